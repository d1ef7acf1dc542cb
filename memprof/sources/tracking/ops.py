"""Every op of a profiled call, seen from a ``TorchDispatchMode`` below autograd: its window on
the profiler's clock, the storage of each tensor it returns, its shapes, the statement that
ran it (the innermost frame of the user's or a library's code, and the user's own line that
called into the library), the module call and the phase it ran in.

The mode changes what torch allocates, which is why it tracks only the explaining call: a
Python number given for a Tensor argument becomes a new 8-byte tensor when the mode calls the
op (recorded, and left out of the explanation), and in backward, tensors with Python objects
are not accumulated into in place (so the mode is taken off while autograd runs backward, and
put back for the forward that activation checkpointing runs again there).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any

import numpy as np
import torch  # noqa: TID253 - the torch side of tracking
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: TID253

from memprof.core.records import BACKWARD, FORWARD, OPTIMIZER, RECOMPUTE, Statements, TrackedOps
from memprof.sources.live.tree import int_array
from memprof.sources.tracking.lines import LIBRARY, MEMPROF, TORCH, USER, frame_kind
from memprof.sources.tracking.modules import PASS_THROUGH as _MODULES_PASS_THROUGH
from memprof.sources.tracking.modules import Calls
from memprof.sources.tracking.wrappers import is_wrapper, plain_tensors

_NO_SEQUENCE = 2**64 - 1  # AccumulateGrad nodes have no forward op
# Bytes of the tensor a Python number becomes when passed for a Tensor argument (double, int64,
# bool, complex128: torch's "wrapped numbers").
_NUMBER_BYTES = {float: 8, int: 8, bool: 1, complex: 16}
_SOURCE_KINDS = frozenset({USER, LIBRARY})


def _no_hook(callback: Any) -> Any:
    return None


try:  # torch.compile's frame evaluation hook, set while compiled code runs
    from torch._C._dynamo.eval_frame import (  # noqa: TID253
        _FrameAction,
        _FrameExecStrategy,
        set_code_exec_strategy,
        set_eval_frame,
    )

    _set_hook: Callable[[Any], Any] = set_eval_frame
except ImportError:  # a torch without them: torch's own wrapper keeps the hook off
    _set_hook = _no_hook


class _Mode(TorchDispatchMode):
    """Records each op's window, outputs, lines, module call and phase.

    No frame of the mode's is handed to ``torch.compile`` when compiled code calls an op. torch
    keeps them out by wrapping a mode's ``__torch_dispatch__`` in ``torch._dynamo.disable``, a
    chain of Python calls around every op (``scripts/bench_phases.py`` part 2 times a mode that
    does nothing both ways); this mode does what that wrapper does itself: the hook skips
    ``__torch_dispatch__``'s own frame, and is off while it runs.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return _set_hook is _no_hook  # True: torch wraps __torch_dispatch__ (its default)

    def __init__(self, ops: Ops) -> None:
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        hook = _set_hook(None)
        try:
            clock = self.ops.clock
            t0 = clock()
            out = func(*args, **kwargs) if kwargs else func(*args)
            t1 = clock()
            self.ops.record(func, t0, t1, out, args, kwargs)
            return out
        finally:
            if hook is not None:
                _set_hook(hook)


class Ops:
    """The ops recorded while the mode is entered, as parallel lists (appending to lists is
    the cheapest per-op record). ``fake``: the ops run on fake tensors (no allocation of theirs
    to disturb; backward ops are seen by the mode itself)."""

    def __init__(
        self, calls: Calls, clock: Callable[[], int], storage_key: Callable[[Any], int], *, fake: bool
    ) -> None:
        self.calls = calls
        self.clock = clock
        self._storage_key = storage_key
        self._fake = fake
        self.mode = _Mode(self)
        self.notes: list[str] = []
        self.t0: list[int] = []
        self.t1: list[int] = []
        self.name: list[int] = []
        self.site: list[int] = []
        self.user_site: list[int] = []
        self.call: list[int] = []
        self.phase: list[int] = []
        self.names: dict[int, int] = {}  # id of the op -> its name's index
        self._funcs: list[Any] = []
        self.name_list: list[str] = []
        self._tensor_arguments: list[tuple[tuple[int, str], ...]] = []
        self.rewrap_op: list[int] = []
        self.rewrap_bytes: list[int] = []
        self.backward_from_profile = False
        self.sites: dict[tuple[int, int], int] = {}  # (id of the code, line) -> site id
        self.site_lines: list[tuple[str, int]] = []  # by site id: (file, line)
        self.first_op_of_sequence: dict[int, int] = {}
        self.out_ptr: list[int] = []
        self.out_op: list[int] = []
        self.out_shape: list[int] = []
        self.out_dtype: list[int] = []
        self.in_op: list[int] = []
        self.in_shape: list[int] = []
        self.in_dtype: list[int] = []
        self.shapes: dict[Any, int] = {}
        self.dtypes: dict[Any, int] = {}
        self.saved_ptr: list[int] = []
        self.saved_time: list[int] = []
        # By the code object's id: hashing a code object hashes its bytecode and constants (~1 us,
        # tens of frames per op); the codes are kept alive, so that their ids are not reused.
        self._kinds: dict[int, str] = {}
        self._codes: list[Any] = []
        self._ops_unprofiled = False
        # Statements that called into C between ops (:meth:`_statement`), as parallel lists.
        self.statement_time: list[int] = []
        self.statement_site: list[int] = []
        self.statement_user_site: list[int] = []
        self.statement_call: list[int] = []
        self.statement_phase: list[int] = []
        self._last_statement: tuple[int, int, int] | None = None
        # A compiled run's: when each statement's last event came, and the last one noted.
        self.statement_end: list[int] = []
        self._last_noted: tuple[int, int, int] | None = None
        self._thread = threading.get_ident()

    # ---- the hot path -------------------------------------------------------------------------

    def record(self, func: Any, t0: int, t1: int, out: Any, args: Any, kwargs: Any) -> None:
        index = len(self.t0)
        self._last_statement = None  # the statement that ran the op starts a new record
        name = self.names.get(id(func))  # by id: an op's hash is a Python call
        if name is None:
            name = self.names[id(func)] = len(self.name_list)
            self._funcs.append(func)  # alive, so that its id is not reused
            self.name_list.append(_op_name(func))
            self._tensor_arguments.append(_tensor_arguments(func))
        # A Python number passed for a Tensor argument is wrapped in a new tensor when the mode
        # calls the op again: an allocation the untracked run does not make. Noted, to be left out
        # (a fake run records no allocation for it).
        for position, keyword in () if self._fake else self._tensor_arguments[name]:
            value = args[position] if position < len(args) else kwargs.get(keyword) if kwargs else None
            size = _NUMBER_BYTES.get(type(value))
            if size:
                self.rewrap_op.append(index)
                self.rewrap_bytes.append(size)
        calls = self.calls
        node = None if calls.recomputing else torch._C._current_autograd_node()
        if node is not None:
            phase = BACKWARD
            site, user_site, call = self._backward_origin(node)
        else:
            phase = RECOMPUTE if calls.recomputing else OPTIMIZER if calls.optimizer_depth else FORWARD
            site, user_site = self._sites()
            call = calls.stack[-1] if calls.stack else -1
            if phase == FORWARD:
                self.first_op_of_sequence.setdefault(torch._C._autograd._get_sequence_nr(), index)
            if phase != OPTIMIZER:
                for arg in args:
                    if isinstance(arg, torch.Tensor):
                        self._record_tensor(arg, index, self.in_op, self.in_shape, self.in_dtype)
        self.t0.append(t0)
        self.t1.append(t1)
        self.name.append(name)
        self.site.append(site)
        self.user_site.append(user_site)
        self.call.append(call)
        self.phase.append(phase)
        if isinstance(out, torch.Tensor):
            self._record_output(out, index)
        elif isinstance(out, tuple | list):
            for item in out:
                if isinstance(item, torch.Tensor):
                    self._record_output(item, index)

    def _record_output(self, tensor: torch.Tensor, index: int) -> None:
        if is_wrapper(tensor):  # a DTensor's memory is its local shard's
            for plain in plain_tensors(tensor):
                self._record_plain_output(plain, index)
            return
        self._record_plain_output(tensor, index)

    def _record_plain_output(self, tensor: torch.Tensor, index: int) -> None:
        try:
            ptr = self._storage_key(tensor.untyped_storage())
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, wrapper subclasses
            return
        if ptr:
            self.out_ptr.append(ptr)
            self._record_tensor(tensor, index, self.out_op, self.out_shape, self.out_dtype)

    def _record_tensor(
        self, tensor: torch.Tensor, index: int, ops: list[int], shapes: list[int], dtypes: list[int]
    ) -> None:
        shape = self.shapes.get(tensor.shape)
        if shape is None:
            shape = self.shapes[tensor.shape] = len(self.shapes)
        dtype = self.dtypes.get(tensor.dtype)
        if dtype is None:
            dtype = self.dtypes[tensor.dtype] = len(self.dtypes)
        ops.append(index)
        shapes.append(shape)
        dtypes.append(dtype)

    def _sites(self) -> tuple[int, int]:
        """The innermost frame of the user's or a library's code, and the innermost of the
        user's own (-1 when it is the same frame or there is none), as interned (code, line)
        ids. Frames above memprof's own (the code that asked memprof to profile: a script, a
        test runner, the command line) are not the profiled code's.

        The walk stops at the innermost module call's frame (:attr:`Calls.frames`) when it
        meets it: what lies above that frame is the same for every op of the call (its callers
        wait on it, each at its line), walked once per call."""
        return self._sites_from(sys._getframe(3))

    def _sites_from(self, frame: FrameType) -> tuple[int, int]:
        """:meth:`_sites` of the stack from ``frame`` up."""
        frames = self.calls.frames
        call = frames[-1] if frames else None
        site, user, stopped = self._walk(frame, call[1] if call else None)
        if stopped and call is not None:
            if call[2] is None:
                call[2] = self._walk(call[1], None, inside=True)[:2]
            above, user = call[2]
            if site < 0:
                site = above
        return (site, -1) if user < 0 or user == site else (site, user)

    def _walk(
        self, frame: FrameType | None, stop: FrameType | None, *, inside: bool = False
    ) -> tuple[int, int, bool]:
        """Up from ``frame``: the first frame of the user's or a library's code and the first of
        the user's own (-1: none), ending past memprof's frames at the bottom (``inside``: there
        are none below ``frame``), and whether it ended at ``stop`` (met past those frames)."""
        kinds = self._kinds
        site = -1
        while frame is not None:
            if frame is stop and inside:
                return site, -1, True
            code = frame.f_code
            kind = kinds.get(id(code)) or self._new_kind(code)
            if kind == MEMPROF:
                if inside and code not in _PASS_THROUGH:
                    break
            else:
                inside = True
            if kind in _SOURCE_KINDS:
                found = self._intern(code, frame.f_lineno)
                if kind == USER:
                    return (found if site < 0 else site), found, False
                if site < 0:
                    site = found
            frame = frame.f_back
        return site, -1, False

    def _new_kind(self, code: Any) -> str:
        """A code object's kind, met for the first time: kept, so that its id is not reused."""
        kind = self._kinds[id(code)] = frame_kind(code.co_filename)
        self._codes.append(code)
        return kind

    def _intern(self, code: Any, line: int) -> int:
        key = (id(code), line)  # the code is alive: its kind was looked up first
        found = self.sites.get(key)
        if found is None:
            found = self.sites[key] = len(self.sites)
            self.site_lines.append((code.co_filename, line))
        return found

    def _backward_origin(self, node: Any) -> tuple[int, int, int]:
        """(site, user site, module call) of the forward op that made autograd ``node``."""
        sequence = node._sequence_nr()
        if sequence != _NO_SEQUENCE:
            forward = self.first_op_of_sequence.get(sequence + 1)
            if forward is not None:
                return self.site[forward], self.user_site[forward], self.call[forward]
        # AccumulateGrad and nodes made before tracking: the Python line (e.g. loss.backward()).
        site, user_site = self._sites()
        return site, user_site, -1

    def _statement(self) -> int:
        """Called at each of Python's call and return events (as the timer of a ``cProfile``
        profiler, whose hook is C: a Python hook set with ``sys.setprofile`` makes Python copy
        every frame's locals into a dict at each event, which keeps tensors alive past their
        ``del``): the statement running now is noted once, from its first event, so that what
        is allocated outside any op (``torch.get_rng_state()`` in ``torch.utils.checkpoint``,
        ``torch.load``'s storages) is put on it. memprof's own frames are left out."""
        return self._note(sys._getframe(1))

    def _statement_outside_dynamo(self) -> int:
        """:meth:`_statement` for a compiled run: torch.compile's frame evaluation hook is off
        while it runs (as in the mode's ``__torch_dispatch__``), so that no frame of memprof's is
        handed to Dynamo. Only events of the user's or a library's frames, and of torch's
        functions they call, are noted: torch's own (Dynamo's, compiling or guarding) are many,
        and none is a line of the profiled code. Each statement's last event is kept too: what
        is allocated before it came was made by that statement (a builtin it called)."""
        frame = sys._getframe(1)
        kinds = self._kinds
        kind = kinds.get(id(frame.f_code))
        if kind is not None and kind not in _SOURCE_KINDS:
            # The common case, without a Python call: torch's code called by torch's code.
            back = frame.f_back
            back_kind = kinds.get(id(back.f_code)) if back is not None else TORCH
            if back_kind is not None and back_kind not in _SOURCE_KINDS:
                return 0
        hook = _set_hook(None)
        try:
            if self._kind(frame) not in _SOURCE_KINDS:
                back = frame.f_back  # torch's function called by the profiled code: its line
                if back is None or self._kind(back) not in _SOURCE_KINDS:
                    return 0
            key = (id(frame), id(frame.f_code), frame.f_lineno)
            if key == self._last_noted:  # the same statement still runs (a builtin returns)
                self.statement_end[-1] = self.clock()
                return 0
            count = len(self.statement_time)
            self._note(frame)
            if len(self.statement_time) > count:
                self._last_noted = key
                self.statement_end.append(self.statement_time[-1])
            return 0
        finally:
            if hook is not None:
                _set_hook(hook)

    def _kind(self, frame: FrameType) -> str:
        return self._kinds.get(id(frame.f_code)) or self._new_kind(frame.f_code)

    def _note(self, frame: FrameType) -> int:
        """:meth:`_statement` of the event whose ``frame`` called the timer."""
        if threading.get_ident() != self._thread:  # Python 3.12+ profiles every thread
            return 0
        code = frame.f_code
        if (self._kinds.get(id(code)) or self._new_kind(code)) == MEMPROF:
            return 0
        key = (id(frame), id(code), frame.f_lineno)
        if key == self._last_statement:
            return 0
        self._last_statement = key
        site, user_site = self._sites_from(frame)
        if site < 0:  # torch's own code called by memprof (the op tracker's call of an op)
            return 0
        calls = self.calls
        if calls.recomputing:
            phase = RECOMPUTE
        elif torch._C._current_autograd_node() is not None:
            phase = BACKWARD
        else:
            phase = OPTIMIZER if calls.optimizer_depth else FORWARD
        self.statement_time.append(self.clock())
        self.statement_site.append(site)
        self.statement_user_site.append(user_site)
        self.statement_call.append(calls.stack[-1] if calls.stack and phase != BACKWARD else -1)
        self.statement_phase.append(phase)
        return 0

    def statements(self) -> Statements:
        """The statements noted by :meth:`_statement`, as arrays."""
        return Statements(
            time=int_array(self.statement_time),
            end=int_array(self.statement_end),
            site=int_array(self.statement_site),
            user_site=int_array(self.statement_user_site),
            module_call=int_array(self.statement_call),
            phase=int_array(self.statement_phase),
        )

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """A saved-tensors pack hook that notes what autograd saves, and returns it unchanged."""
        with contextlib.suppress(RuntimeError, NotImplementedError, TypeError):
            for plain in plain_tensors(tensor):
                ptr = self._storage_key(plain.untyped_storage())
                if ptr:
                    self.saved_ptr.append(ptr)
                    self.saved_time.append(self.clock())
        return tensor

    # ---- the mode on and off ------------------------------------------------------------------

    def enter(self, stack: contextlib.ExitStack) -> None:
        """Record ops (and saved tensors) until ``stack`` closes; with real tensors, backward
        runs without the mode (:meth:`_run_backward_without`)."""
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self.pack, _unpack))
        self.calls.keep_frames(stack)
        stack.enter_context(self.mode)
        if not self._fake:
            self._run_backward_without(stack)
            self.note_statements(stack)

    def note_statements(self, stack: contextlib.ExitStack, *, compiled: bool = False) -> None:
        """Note the statements that run (:meth:`_statement`) until ``stack`` closes; not under
        another profiler (cProfile, a hook set with ``sys.setprofile``): then they are not known.
        ``compiled``: the call runs compiled code (Dynamo's hook is kept off the timer)."""
        if sys.getprofile() is not None:
            self.notes.append("what is allocated outside any op has no line (another profiler was on)")
            return
        import cProfile

        self._thread = threading.get_ident()
        profiler = cProfile.Profile(self._statement_outside_dynamo if compiled else self._statement)
        try:
            profiler.enable(subcalls=False, builtins=True)
        except ValueError as error:  # Python 3.12+: another tool holds the profiler's slot
            self.notes.append(f"what is allocated outside any op has no line ({error})")
            return
        stack.callback(profiler.disable)

    def _run_backward_without(self, stack: contextlib.ExitStack) -> None:
        """Take the dispatch mode off while autograd runs backward. Under a mode every tensor
        gets a Python object, and autograd neither steals a gradient buffer nor accumulates
        into one in place when it has one: backward would allocate more than without the
        tracker. Backward ops are read from the profile instead (their autograd node says which
        forward op, line and module they belong to)."""
        import torch.autograd as autograd
        from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

        original = getattr(autograd, "_engine_run_backward", None)
        if original is None:
            self.notes.append(
                "backward ran under the op tracker (torch.autograd._engine_run_backward is missing in "
                f"torch {torch.__version__}): the attribution pass may allocate more than the measured run"
            )
            return
        mode = self.mode

        def run_backward(*args: Any, **kwargs: Any) -> Any:
            popped = _get_current_dispatch_mode() is mode
            with (
                _pop_mode_temporarily() if popped else contextlib.nullcontext(),
                self._profiled_ops(),
            ):
                return original(*args, **kwargs)

        autograd._engine_run_backward = run_backward
        stack.callback(setattr, autograd, "_engine_run_backward", original)
        self.backward_from_profile = True

    @contextlib.contextmanager
    def unprofiled(self) -> Iterator[None]:
        """The profiler records no op (only the allocator's records) while inside, but in
        backward, whose ops are read from the profile (:meth:`_run_backward_without`): the mode
        sees forward's ops itself, and each op the profiler records costs its stop and the reading
        of its event tree (``scripts/bench_phases.py`` times both).
        ``torch.autograd._enable_record_function`` is thread-local and carried into autograd's
        worker threads with the rest of the thread's state."""
        self._ops_unprofiled = True
        torch.autograd._enable_record_function(False)
        try:
            yield
        finally:
            self._ops_unprofiled = False
            torch.autograd._enable_record_function(True)

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        """The mode off while inside, where it is the innermost one (its own work: the range
        that marks a block's call is opened and closed without the mode around it)."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

        if _get_current_dispatch_mode() is not self.mode:
            yield
            return
        with _pop_mode_temporarily():
            yield

    @contextlib.contextmanager
    def _profiled_ops(self) -> Iterator[None]:
        """Backward's ops recorded by the profiler again, inside :meth:`unprofiled`."""
        if not self._ops_unprofiled:
            yield
            return
        torch.autograd._enable_record_function(True)
        try:
            yield
        finally:
            torch.autograd._enable_record_function(False)

    def recompute(self, starting: bool) -> None:
        """Put the mode back on for the forward that activation checkpointing runs again in
        backward (it is forward work: its tensors are made as in forward), and off after it."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if starting and _get_current_dispatch_mode() is not self.mode:
            self.mode.__enter__()
            self._pushed = True
        elif not starting and getattr(self, "_pushed", False):
            self._pushed = False
            self.mode.__exit__(None, None, None)

    # ---- the result ---------------------------------------------------------------------------

    def table(self) -> TrackedOps:
        return TrackedOps(
            t0=int_array(self.t0),
            t1=int_array(self.t1),
            name=int_array(self.name),
            site=int_array(self.site),
            module_call=int_array(self.call),
            phase=int_array(self.phase),
            names=tuple(self.name_list),
            user_site=int_array(self.user_site),
        )

    def sequence(self) -> tuple[np.ndarray, np.ndarray]:
        """Autograd sequence numbers seen in forward, and the first op dispatched under each."""
        pairs = sorted(self.first_op_of_sequence.items())
        return int_array([s for s, _ in pairs]), int_array([op for _, op in pairs])


def _unpack(value: Any) -> Any:
    return value


def _tensor_arguments(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the op's arguments typed ``Tensor``."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return ()
    return tuple(
        (i, a.name) for i, a in enumerate(schema.arguments) if isinstance(a.type, torch._C.TensorType)
    )


def _op_name(func: Any) -> str:
    schema = getattr(func, "_schema", None)
    return str(schema.name) if schema is not None else str(func)


# memprof's frames inside the profiled code, which walks up the stack pass: a checkpointed
# forward made a call of its module, and backward run without the mode (a recompute in it is
# the profiled code's own, called from the user's backward()).
_PASS_THROUGH = _MODULES_PASS_THROUGH | frozenset(
    code for code in Ops._run_backward_without.__code__.co_consts if isinstance(code, CodeType)
)


if _set_hook is not _no_hook:
    for _code in (_Mode.__torch_dispatch__.__code__, Ops._statement_outside_dynamo.__code__):
        set_code_exec_strategy(_code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.DEFAULT))
