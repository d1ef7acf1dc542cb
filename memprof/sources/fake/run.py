"""Fake execution for estimates: a target run on fake tensors, which carry shapes, dtypes and
strides but no data, so nothing of the real size is allocated and nothing is computed.

How a run is estimated (:func:`estimate_target`):

1. A :class:`FakeSession` is entered: torch's ``FakeTensorMode``, and under it a
   :class:`Recorder`, a dispatch mode that sees every op's outputs and records each new
   storage as an allocation and its death (a ``weakref.finalize`` on the storage) as a free,
   on one clock: the allocator records a real run would make, as far as tensors go.
2. The inputs are made inside the session (the factory's tensors, modules and optimizers are
   fake from birth), or real arguments are copied into fake ones (:func:`fake_copy`).
3. The warm-up calls run, then the estimated call, with the attribution's
   :class:`memprof.sources.tracking.Tracker` around it (the same one ``memprof run`` uses):
   categories, modules, source lines.
4. What fake execution cannot see, the bytes an op allocates inside its kernel and frees before
   returning (the int64 copy ``sum`` makes of a bool tensor on the CPU, oneDNN's reorders), is
   measured (:mod:`memprof.sources.fake.workspaces`) and put in each op's window.
5. What it observed is handed over as a :class:`~memprof.core.recording.Recording`, assembled
   as a profile's (:func:`memprof.pipeline.assemble.run_of`: the attribution, the per-op
   analysis); for a CUDA estimate, sizes are rounded to the caching allocator's blocks and the
   whole history, from the first input made to the end of the call, is handed over to be
   replayed through the caching-allocator model for the reserve.

Fake CUDA tensors do not work on a machine without a GPU (nor backward on one with it, pytorch
#92627), so every estimate runs on fake CPU tensors; ``--device cuda`` models the CUDA
allocator on top of them, and keeps what is put on the host (``tensor.cpu()``, an optimizer
offloaded to the CPU) out of the device's figures (:mod:`memprof.sources.fake.host`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import sys
import time
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch  # noqa: TID253 - fake execution, like sources/live.py and sources/tracking.py
from torch._subclasses.fake_tensor import (  # noqa: TID253
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: TID253
from torch.utils._pytree import tree_leaves  # noqa: TID253

from memprof.core.errors import UserCodeError, format_user_traceback, user_code
from memprof.core.recording import Recording
from memprof.core.records import Allocations, RawProfile, TrackedFacts, round_size
from memprof.core.units import format_bytes
from memprof.model.estimate import EstimateSection
from memprof.model.kind import ESTIMATE_SOURCE
from memprof.sources.fake.guesses import GuessedLoop, Guesses
from memprof.sources.fake.host import HostMemory, active
from memprof.sources.fake.workspaces import Workspaces
from memprof.sources.options import EstimateOptions, StatusFn
from memprof.sources.patching import replace_attribute
from memprof.sources.targets.target import Inputs
from memprof.sources.tracking.tracker import FakeClock, Tracker, storage_key
from memprof.sources.tracking.wrappers import has_wrappers, plain_tensors

# What ``.item()`` (and ``float(t)``, ``int(t)``, ``bool(t)``) of a fake tensor whose value is
# unknown returns: fake tensors have no data. One, so that divisions by it still run.
PLACEHOLDERS: dict[str, Any] = {"float": 1.0, "int": 1, "bool": True, "complex": 1 + 0j}

NOT_MODELLED_CUDA = (
    "not modelled on CUDA: kernels' own allocations (cuBLAS and cuBLASLt workspaces, cuDNN "
    "workspaces, the attention kernels' buffers and which of them runs), the CUDA context and "
    "NCCL's buffers (outside the caching allocator): the estimate is torch's tensors on the "
    "caching allocator, rounded and cached as it does"
)


# ---- the records of a fake run ------------------------------------------------------------------


class Recorder(TorchDispatchMode):
    """Sees every op's outputs on fake tensors: a storage no input has and not seen before is
    an allocation; its death, a free. Ops whose real kernels may allocate inside get two more
    instants around their outputs, where a measured workspace is put afterwards.

    An op whose result depends on the data it cannot know: ``.item()`` returns a placeholder
    (counted in ``placeholders``); an op whose output's size depends on the data
    (``nonzero``) raises :class:`UserCodeError`."""

    def __init__(self, clock: FakeClock, workspaces: Workspaces | None) -> None:
        super().__init__()
        self.clock = clock.clock
        self.time: list[int] = []
        self.bytes: list[int] = []
        self.key: list[int] = []
        self.placeholders: dict[str, int] = {}
        self._placeholder_count = 0
        self.workspaces = workspaces
        self._live: dict[int, int] = {}  # key of a live storage -> its allocation record
        self._freed: dict[int, int] = {}  # allocation record -> its free record
        # Only the live storages' (a loop making a tensor a round holds no more than it keeps);
        # a storage resized in place keeps its one.
        self._finalizers: dict[int, weakref.finalize] = {}
        self._next_workspace = -1
        self.host_memory = HostMemory()  # a CUDA estimate's host: out of the device's records

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except DataDependentOutputException:
            return self._placeholder(func, args)
        except (DynamicOutputShapeException, UnsupportedOperatorException) as error:
            raise _unsupported(func, error) from None
        leaves = [a for a in tree_leaves((args, kwargs)) if _is_tensor(a)]
        tensors = [t for t in tree_leaves(out) if _is_tensor(t)]
        # A sharded tensor (DTensor) holds its local shard: that is what is allocated. Its
        # kernels run on the shard inside torch's sharding dispatch: nothing to measure here.
        wrapped = has_wrappers(leaves) or has_wrappers(tensors)
        if wrapped:
            leaves = [p for a in leaves for p in plain_tensors(a)]
            tensors = [p for t in tensors for p in plain_tensors(t)]
        inputs = {storage_key(a.untyped_storage()) for a in leaves}
        fresh = []
        for position, tensor in enumerate(tensors):
            storage = tensor.untyped_storage()
            key = storage_key(storage)
            known = key in inputs or key in self._live or key in self.host_memory.live
            if not known and storage.nbytes():
                fresh.append((position, storage, key))
        # An op that made no storage and writes none of its arguments is a view in all but
        # name (_unsafe_view, _reshape_alias): its kernel allocates nothing.
        measured = self.workspaces is not None and not wrapped and (fresh or _writes(func))
        slot = self.workspaces.slot(func, args, kwargs, out) if measured and self.workspaces else None
        if slot is not None:
            slot.alloc_ns = self.clock()
        host = self.host_memory.depth > 0 or bool(inputs) and inputs <= self.host_memory.live.keys()
        for position, storage, key in fresh:
            if host:
                self._allocate_host(storage, key)
                continue
            record = self._allocate(storage, key)
            if slot is not None:
                slot.outputs.append((position, record))
        if slot is not None:
            slot.free_ns = self.clock()
        return out

    def adopt(self, tensor: torch.Tensor) -> None:
        """A fake tensor made outside any op (a copy of a real one): its storage is allocated."""
        for plain in plain_tensors(tensor):
            storage = plain.untyped_storage()
            key = storage_key(storage)
            if key not in self._live and key not in self.host_memory.live and storage.nbytes():
                if self.host_memory.depth:
                    self._allocate_host(storage, key)
                else:
                    self._allocate(storage, key)

    def _allocate_host(self, storage: Any, key: int) -> None:
        self.host_memory.allocate(key, int(storage.nbytes()), self.clock())
        self._finalizers[key] = weakref.finalize(storage, self._died, key)

    def _allocate(self, storage: Any, key: int) -> int:
        nbytes = int(storage.nbytes())
        record = len(self.time)
        self._live[key] = record
        self._record(key, nbytes)
        if key not in self._finalizers:
            self._finalizers[key] = weakref.finalize(storage, self._died, key)
        return record

    def _died(self, key: int) -> None:
        self._finalizers.pop(key, None)
        self._free(key)

    def _free(self, key: int) -> None:
        if self.host_memory.free(key, self.clock()):
            return
        record = self._live.pop(key, None)
        if record is not None:
            self._freed[record] = len(self.time)
            self._record(key, -self.bytes[record])

    def resized(self, storage: Any) -> None:
        """``storage`` was resized in place (``storage.resize_``: FSDP frees a gathered
        parameter's memory by resizing its storage to 0 and gathers it again into the same
        storage): what it held is freed, and what it holds now allocated."""
        key = storage_key(storage)
        record = self._live.get(key)
        nbytes = int(storage.nbytes())
        if record is not None and self.bytes[record] == nbytes:
            return
        self._free(key)
        if nbytes:
            self._allocate(storage, key)

    def enlarge(self, record: int, nbytes: int) -> None:
        """The storage allocated by ``record`` is ``nbytes`` larger (as measured of its op):
        its allocation and free grow."""
        self.bytes[record] += nbytes
        free = self._freed.get(record)
        if free is not None:
            self.bytes[free] -= nbytes

    def _record(self, key: int, nbytes: int) -> None:
        self.time.append(self.clock())
        self.bytes.append(nbytes)
        self.key.append(key)

    @property
    def placeholder_count(self) -> int:
        """Every placeholder answered so far."""
        return self._placeholder_count

    def _placeholder(self, func: Any, args: Any) -> Any:
        name = _op_name(func)
        self.placeholders[name] = self.placeholders.get(name, 0) + 1
        self._placeholder_count += 1
        tensor = next((a for a in tree_leaves(args) if _is_tensor(a)), None)
        dtype = tensor.dtype if tensor is not None else torch.float32
        kind = "bool" if dtype == torch.bool else "complex" if dtype.is_complex else "float"
        return PLACEHOLDERS["int" if kind == "float" and not dtype.is_floating_point else kind]

    def add_workspace(self, alloc_ns: int, free_ns: int, nbytes: int) -> None:
        """A measured workspace of ``nbytes`` live from ``alloc_ns`` to ``free_ns``."""
        key, self._next_workspace = self._next_workspace, self._next_workspace - 1
        self.time += [alloc_ns, free_ns]
        self.bytes += [nbytes, -nbytes]
        self.key += [key, key]

    def detach(self) -> None:
        """Stop following deaths (the run is over; later frees do not belong to it)."""
        for finalizer in self._finalizers.values():
            finalizer.detach()
        self._finalizers.clear()

    def allocations(self, since: int = 0, until: int | None = None, block: bool = False) -> Allocations:
        """The records from ``since`` to ``until``, in time order; ``block``: sizes rounded to the
        CUDA caching allocator's blocks."""
        array = np.array([self.time, self.bytes, self.key], dtype=np.int64).reshape(3, -1)
        order = np.argsort(array[0], kind="stable")
        time_, size, key = array[0][order], array[1][order], array[2][order]
        keep = (time_ >= since) & (time_ <= (until if until is not None else np.iinfo(np.int64).max))
        size = size[keep]
        if block:
            size = np.sign(size) * np.array([round_size(int(abs(s))) for s in size], dtype=np.int64)
        return Allocations(time=time_[keep], bytes=size, ptr=key[keep])


def _writes(func: Any) -> bool:
    schema = getattr(func, "_schema", None)
    return schema is not None and any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments
    )


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _op_name(func: Any) -> str:
    schema = getattr(func, "_schema", None)
    return str(schema.name) if schema is not None else str(func)


def _unsupported(func: Any, error: BaseException) -> UserCodeError:
    why = (
        "its output's size depends on the values in its input"
        if isinstance(error, DynamicOutputShapeException)
        else "torch has no fake (shape-only) implementation of it"
    )
    return UserCodeError(
        f"{_op_name(func)} cannot run on fake tensors: {why}; memprof cannot estimate this "
        "code (profile it with memprof run on a machine that has the memory)",
        user_traceback=format_user_traceback(error),
    )


# ---- the session --------------------------------------------------------------------------------


class FakeSession:
    """Fake tensors while entered: ``FakeTensorMode``, the :class:`Recorder` under it, and the
    one adjustment torch needs for modules built on fake tensors (``Module.to`` swaps a fake
    parameter for its converted self, which torch refuses while the fake-tensor converter's
    memo holds a weak reference to it: the memo is emptied first; it only caches conversions
    of real tensors)."""

    def __init__(self, workspaces: Workspaces | None, host: bool = False) -> None:
        self.host = host
        self.clock = FakeClock()
        self.mode = FakeTensorMode()
        self.recorder = Recorder(self.clock, workspaces)
        self.guesses = Guesses(lambda: self.recorder.placeholder_count)
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> FakeSession:
        original = torch.utils.swap_tensors
        memo = self.mode.fake_tensor_converter.meta_converter.tensor_memo

        def swap_tensors(t1: Any, t2: Any) -> Any:
            memo.clear()
            return original(t1, t2)

        replace_attribute(self._stack, torch.utils, "swap_tensors", swap_tensors)
        self._count_redistributions()
        self._follow_resizes()
        if self.host:
            self._count_rng_states()
        else:
            self._copy_to_host()
        self._stack.enter_context(self.mode)
        self._stack.enter_context(self.recorder)
        self._stack.enter_context(self.guesses)
        if not self.host:
            self._stack.enter_context(active(self.recorder.host_memory))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()
        self.recorder.detach()

    def _follow_resizes(self) -> None:
        """A storage resized in place (no op runs: ``UntypedStorage.resize_`` is a method of the
        storage) allocates or frees as a real allocator would."""
        original = torch.UntypedStorage.resize_
        resized = self.recorder.resized

        def resize_(storage: Any, size: int) -> Any:
            result = original(storage, size)
            resized(storage)
            return result

        replace_attribute(self._stack, torch.UntypedStorage, "resize_", resize_)

    def enter(self, context: Any) -> Any:
        """Enter ``context`` (a dispatch mode, say) until the session ends: made inside the
        session, it sees the warm-up calls and the estimated one, under the tracker's mode."""
        return self._stack.enter_context(context)

    def _copy_to_host(self) -> None:
        """A CUDA estimate's ``tensor.cpu()`` copies to the host (on the fake CPU tensors a CUDA
        estimate runs on it would return the tensor itself): a host copy, out of the device's
        figures, as is what is computed from it (:mod:`memprof.sources.fake.host`)."""
        host = self.recorder.host_memory
        original = torch.Tensor.cpu

        def cpu(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if not isinstance(tensor, FakeTensor):  # a real tensor (torch's own): as it was
                return original(tensor, *args, **kwargs)
            with host.entered():
                return tensor.clone()

        replace_attribute(self._stack, torch.Tensor, "cpu", cpu)

    def _count_rng_states(self) -> None:
        """The CPU generator's state read as a tensor (activation checkpointing stashes it for
        each checkpointed call, to replay dropout in the recomputation) is a real CPU tensor made
        outside any op: on the CPU it is allocated as in a real run."""
        original = torch.get_rng_state
        adopt = self.recorder.adopt

        def get_rng_state() -> torch.Tensor:
            state = original()
            adopt(state)
            return state

        replace_attribute(self._stack, torch, "get_rng_state", get_rng_state)

    def _count_redistributions(self) -> None:
        """A DTensor op whose arguments' placements do not suit it redistributes them inside
        torch's sharding dispatch (an all-gather, say), where no dispatch mode sees the ops:
        the resharded shards are counted as allocated there, until the op drops them."""
        dispatch = sys.modules.get("torch.distributed.tensor._dispatch")
        original = getattr(dispatch, "redistribute_local_tensor", None)
        if dispatch is None or original is None:
            return
        adopt = self.recorder.adopt

        def redistribute_local_tensor(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if isinstance(result, torch.Tensor):
                adopt(result)
            return result

        replace_attribute(self._stack, dispatch, "redistribute_local_tensor", redistribute_local_tensor)


def fake_copy(value: Any, mode: FakeTensorMode, made: Callable[[torch.Tensor], None] = lambda t: None) -> Any:
    """A deep copy of ``value`` with every tensor made fake (shared storages stay shared,
    parameters stay parameters with their gradients): arguments a caller made for real, for
    an estimate. Modules, optimizers and containers are copied around them. ``made`` is told
    of each fake tensor (the recorder counts their storages as allocated)."""
    originals = {cls: cls.__dict__.get("__deepcopy__") for cls in (torch.Tensor, torch.nn.Parameter)}

    def fake_of(tensor: torch.Tensor, memo: dict[int, Any]) -> torch.Tensor:
        fake: torch.Tensor = mode.from_tensor(tensor)
        if isinstance(tensor, torch.nn.Parameter):
            fake = torch.nn.Parameter(fake, requires_grad=tensor.requires_grad)
        made(fake)
        if tensor.grad is not None:
            fake.grad = mode.from_tensor(tensor.grad)
            made(fake.grad)
        memo[id(tensor)] = fake
        return fake

    for cls in originals:
        cls.__deepcopy__ = fake_of  # type: ignore[assignment]
    try:
        return copy.deepcopy(value)
    finally:
        for cls, original in originals.items():
            if original is None:
                delattr(cls, "__deepcopy__")
            else:
                cls.__deepcopy__ = original  # type: ignore[method-assign]


def fake_callable(func: Callable[..., Any], session: FakeSession) -> Callable[..., Any]:
    """A module called as a function, as a fake copy of it; a bound method of an object that
    holds tensors (a module's ``forward``), bound to a fake copy of it; other callables as
    they are."""
    if isinstance(func, torch.nn.Module):
        copied: Callable[..., Any] = fake_copy(func, session.mode, session.recorder.adopt)
        return copied
    owner = getattr(func, "__self__", None)
    if inspect.ismethod(func) and isinstance(owner, torch.nn.Module | torch.optim.Optimizer):
        return types.MethodType(func.__func__, fake_copy(owner, session.mode, session.recorder.adopt))
    return func


# ---- one estimated run --------------------------------------------------------------------------


@dataclass
class _Call:
    """What the fake calls gave: the tracker of the estimated call, its window, and when the
    tracker started."""

    tracker: Tracker
    start_ns: int
    end_ns: int
    tracked_from_ns: int


def estimate_target(
    func: Callable[..., Any],
    make_inputs: Callable[[FakeSession], Inputs],
    options: EstimateOptions,
    *,
    label: str,
    name: str = "target",
    module: types.ModuleType | None = None,
    status: StatusFn | None = None,
) -> Recording:
    """Estimate ``func``'s memory on fake tensors (what fake execution observed, for
    :func:`memprof.pipeline.assemble.run_of` to make the run of): ``make_inputs(mode)`` is called inside the
    fake session (``session.mode``; ``session.recorder.adopt`` counts fake copies of real tensors)
    and returns the arguments (made fake); ``options.warmup`` calls, then the
    estimated one. Raises :class:`UserCodeError` (exit 3) when the code fails on fake tensors."""
    cuda = options.device == "cuda"
    workspaces = Workspaces() if options.workspaces and not cuda else None
    session = FakeSession(workspaces, host=not cuda)
    started = time.perf_counter()
    if status:
        status(f"estimating {name} ({label}) on fake tensors")
    try:
        with session:
            inputs = _fake_inputs(make_inputs, session, name)
            call = _fake_calls(fake_callable(func, session), inputs, options, session, name, module)
    except GuessedLoop as loop:
        raise _stopped(loop, session.recorder, name) from None
    seconds = time.perf_counter() - started
    notes: list[str] = []
    if workspaces is not None:
        notes += workspaces.resolve(session.recorder.add_workspace, session.recorder.enlarge, status)
    recorder = session.recorder
    facts = _facts(call, recorder, cuda)
    notes += _notes(session, options)
    estimate = EstimateSection(
        modelled_device=options.device,
        seconds=seconds,
        ops=len(facts.ops.t0),
        workspace_ops=workspaces.summary() if workspaces is not None else {},
        unmeasured_ops=workspaces.unmeasured() if workspaces is not None else (),
        placeholders=sum(recorder.placeholders.values()),
        reliable=not session.guesses.steering,
        guesses=session.guesses.sites(),
        host_peak_bytes=recorder.host_memory.peak_bytes or None,
    )
    # CUDA: every allocation and free from the first input made to the end of the estimated
    # call, for the caching-allocator model's replay.
    allocations = recorder.allocations(until=call.end_ns) if cuda else None
    return _recording(facts, call, estimate, label, notes, options, allocations)


def _fake_inputs(make_inputs: Callable[[FakeSession], Inputs], session: FakeSession, name: str) -> Inputs:
    with user_code(lambda did: f"making the inputs of {name} on fake tensors failed: it {did}"):
        return make_inputs(session)


def _fake_calls(
    func: Callable[..., Any],
    inputs: Inputs,
    options: EstimateOptions,
    session: FakeSession,
    name: str,
    module: types.ModuleType | None,
) -> _Call:
    """The warm-up calls, then the estimated call inside the tracker."""
    clock = session.clock
    result: Any = None
    with user_code(lambda did: f"{name} {did} on fake tensors"):
        for _ in range(options.warmup):
            result = func(*inputs.args, **inputs.kwargs)
            result = None
        tracker = Tracker(inputs.args, inputs.kwargs, func=func, module=module, device="cpu", fake=clock)
        tracked_from = clock.clock()
        with tracker:
            start = clock.clock()
            result = func(*inputs.args, **inputs.kwargs)
            end = clock.clock()
    del result
    return _Call(tracker, start, end, tracked_from)


def _stopped(loop: GuessedLoop, recorder: Recorder, name: str) -> UserCodeError:
    """The estimate stopped in a loop that guesses kept going: where, what to do, and how far
    the memory had got (not reliable: part of a run, on guessed values)."""
    from memprof.sources.tracking.lines import resolve_sites

    lines = [loop.where] + ([loop.user] if loop.user is not None else [])
    sites = resolve_sites(lines)
    at = f"{sites[0].source} ({sites[0].text})" if sites[0].text else sites[0].source
    if len(sites) > 1 and sites[1] != sites[0]:
        at += f", called from {sites[1].source}"
    reached = int(np.cumsum(recorder.bytes).max()) if recorder.bytes else 0
    return UserCodeError(
        f"estimating {name} stopped in a loop at {at}: fake tensors have no values, so its condition "
        f"was guessed ({loop.count:,} times in {loop.seconds:.1f} s) and the loop would never end; "
        "give the loop its trip count (a for loop over a fixed number of steps; generate's "
        "max_new_tokens with min_new_tokens the same) or keep tensor values out of its condition, "
        f"or measure it with memprof run. Partial and not reliable: {format_bytes(reached)} live at "
        "most before it stopped"
    )


def _facts(call: _Call, recorder: Recorder, cuda: bool) -> TrackedFacts:
    """The tracker's facts with the recorder's allocations since the tracker started (as a
    profile would have them); CUDA: every size rounded to the allocator's blocks."""
    allocations = recorder.allocations(since=call.tracked_from_ns, block=cuda)
    facts = call.tracker.fake_facts(allocations, [(call.start_ns, call.end_ns)])
    # What the tracker saw on the host (an offloaded optimizer's copies) is not the device's.
    device = tuple(s for s in facts.storages if not recorder.host_memory.held(s.ptr, s.seen_ns))
    facts = replace(facts, storages=device)
    if cuda:
        storages = tuple(replace(s, nbytes=round_size(s.nbytes)) for s in facts.storages)
        facts = replace(facts, storages=storages, device="cuda:0")
    return facts


def _notes(session: FakeSession, options: EstimateOptions) -> list[str]:
    notes = []
    recorder, guesses = session.recorder, session.guesses
    steering = [guess for guess in guesses.sites() if guess.steers]
    if steering:
        where = ", ".join(f"{g.source} ({g.kind} x{g.count})" for g in steering[:3])
        more = f" and {len(steering) - 3} more" if len(steering) > 3 else ""
        notes.append(
            f"NOT RELIABLE: fake tensors have no values, and the program branched or sized memory on "
            f"values fake execution could only guess (at {where}{more}): a real run may take another "
            "path (e.g. run a loop more times) and need more or less memory; see the guesses"
        )
    elif recorder.placeholders:
        ops = ", ".join(f"{op} x{count}" for op, count in sorted(recorder.placeholders.items()))
        notes.append(
            f"fake tensors have no values: {sum(recorder.placeholders.values())} scalar read(s) ({ops}; "
            ".item(), float(t), ...) returned a placeholder 1, used only as a value (never to branch or "
            "to size memory)"
        )
    if options.device == "cuda":
        notes.append(NOT_MODELLED_CUDA)
        notes.append(
            "estimated on fake CPU tensors (fake CUDA tensors need a GPU): ops whose CUDA kernels "
            "allocate differently from their CPU kernels are counted as on the CPU, without the CPU "
            "kernels' own workspaces"
        )
    host = recorder.host_memory.peak_bytes
    if host and options.device == "cuda":
        notes.append(
            f"the host held up to {format_bytes(host)} of the step's tensors (put on the CPU, such as "
            "an offloaded optimizer's state): not in the device's figures"
        )
    return notes


def _recording(
    facts: TrackedFacts,
    call: _Call,
    estimate: EstimateSection,
    label: str,
    notes: list[str],
    options: EstimateOptions,
    allocations: Allocations | None,
) -> Recording:
    """What fake execution observed, as a profiled run's recording: the records it made (for
    the per-op numbers; times unknown: nothing ran for real), the program state tracked during
    the estimated call (the exact peak, footprint, live bytes at the start and what is live at
    the peak), and what the estimate adds (a CUDA device's allocations for the allocator's
    replay, the capacity)."""
    ops = facts.ops
    raw = RawProfile.from_lists(
        [(ops.names[n], int(a), int(b), 0) for n, a, b in zip(ops.name, ops.t0, ops.t1, strict=True)],
        list(zip(facts.allocations.time.tolist(), facts.allocations.bytes.tolist(), strict=True)),
        [(call.start_ns, call.end_ns)],
    )
    return Recording(
        label=label,
        mode="eager",
        source=ESTIMATE_SOURCE,
        raw=raw,
        device="cuda" if options.device == "cuda" else "cpu",
        facts=facts,
        warm=options.warmup > 0,
        profiled=False,
        notes=tuple(notes),
        allocations=allocations,
        capacity_bytes=options.capacity_bytes,
        fields={"device_total_bytes": options.capacity_bytes, "estimate": estimate},
    )


def estimate_environment(device: str, gpu: str | None) -> dict[str, str]:
    """What an estimate depends on: torch, python, platform, the CPU it ran on, and the device
    it models (``device_name``: the card named, else what is modelled)."""
    import os
    import platform

    modelled = gpu or ("a CUDA device (caching allocator model)" if device == "cuda" else None)
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device_name": modelled or platform.processor() or platform.machine(),
        "cpu_count": str(os.cpu_count()),
    }
