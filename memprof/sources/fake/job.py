"""One rank of an N-rank torch.distributed job, run in this process for an estimate.

torch's fake process group (backend ``"fake"``, ``FakeStore``) lets one process play any rank
of any world size: collectives return at once with outputs of the right shapes, and
``init_device_mesh``, ``fully_shard`` (FSDP2), ``DistributedDataParallel``, DTensor and
``parallelize_module`` run on it, on fake tensors too. :class:`FakeJob` sets the job up as
``torchrun`` would for one rank, so that the user's code runs unchanged:

- ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and
  ``MASTER_ADDR``/``MASTER_PORT`` are set;
- the fake group is the default process group; the code's own ``init_process_group`` (any
  backend: nccl, gloo, env://) returns at once, and ``destroy_process_group`` leaves it;
- a device mesh is laid out for real (its rank map is a handful of integers: fake tensors,
  which have no values, cannot lay it out), on the CPU whatever device it names: the estimate
  runs on fake CPU tensors and models the CUDA allocator on top; ``torch.cuda.set_device``
  does nothing meanwhile.

Everything is put back on leaving, and the group destroyed, so the next rank starts afresh.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch  # noqa: TID253 - fake execution, like sources/fake.py
import torch.distributed as dist  # noqa: TID253

from memprof.core.errors import UsageError, param
from memprof.sources.patching import replace_attribute, replace_everywhere

_MODULES = ("torch.distributed", "torch.distributed.distributed_c10d")


class FakeJob:
    """While entered, this process is rank ``rank`` of a ``world_size``-rank job on torch's
    fake process group. ``backends`` lists the backends the code asked for."""

    def __init__(self, world_size: int, rank: int) -> None:
        if world_size < 1:
            raise UsageError(f"{param('world_size')} must be 1 or more, got {world_size}")
        if not 0 <= rank < world_size:
            last = world_size - 1
            raise UsageError(f"{param('rank')} {rank} is not a rank of a {world_size}-rank job (0 to {last})")
        self.world_size = world_size
        self.rank = rank
        self.backends: list[str] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> FakeJob:
        if not dist.is_available():
            raise UsageError("this torch build has no torch.distributed: a sharded job cannot be estimated")
        if dist.is_initialized():
            raise UsageError(
                "a process group is already initialised in this process: estimate a sharded job from a "
                "process that is not one of its ranks (the command line, or a fresh Python)"
            )
        import torch.distributed.tensor  # noqa: F401 - DTensor's dispatch, patched by the fake session
        from torch.testing._internal.distributed.fake_pg import FakeStore

        stack = self._stack
        try:
            stack.enter_context(_environment(self.world_size, self.rank))
            dist.init_process_group("fake", store=FakeStore(), rank=self.rank, world_size=self.world_size)
            stack.callback(_destroy_group)
            self._patch_functions(stack)
            _patch_device_mesh(stack)
            _patch_ddp(stack)
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _patch_functions(self, stack: contextlib.ExitStack) -> None:
        """The code's ``init_process_group`` and ``destroy_process_group`` (wherever it imported
        them from), and ``torch.cuda.set_device``, do nothing while the job runs."""

        def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
            self.backends.append(str(backend or kwargs.get("backend") or "default"))

        def destroy_process_group(*args: Any, **kwargs: Any) -> None:
            return None

        from torch.distributed import utils

        replace_everywhere(stack, dist.init_process_group, init_process_group, _MODULES)
        replace_everywhere(stack, dist.destroy_process_group, destroy_process_group, _MODULES)
        verify = getattr(utils, "_verify_param_shape_across_processes", None)
        if verify is not None:
            # DDP checks that every rank's parameters have the same shapes by reading them: fake
            # tensors have no data, and every rank here runs the same code.
            replace_everywhere(stack, verify, destroy_process_group, None)
        replace_attribute(stack, torch.cuda, "set_device", lambda *args, **kwargs: None)


@contextlib.contextmanager
def _environment(world_size: int, rank: int) -> Iterator[None]:
    """The variables torchrun sets for one rank on one node (``MASTER_*`` kept if set)."""
    values = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",
        "MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
        "MASTER_PORT": os.environ.get("MASTER_PORT", "29500"),
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _destroy_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
    with contextlib.suppress(Exception):  # DTensor's random-number tracker belongs to the group
        import torch.distributed.tensor._random as dtensor_random

        dtensor_random._rng_tracker = None


def _patch_device_mesh(stack: contextlib.ExitStack) -> None:
    """A device mesh laid out for real, on the CPU: its rank map made by fake tensors (inside
    the estimate's fake mode) is the identity layout ``init_device_mesh`` always makes."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.distributed.device_mesh import DeviceMesh
    from torch.utils._python_dispatch import _disable_current_modes

    original = DeviceMesh.__init__

    def real(value: Any) -> Any:
        if isinstance(value, FakeTensor):
            return torch.arange(value.numel(), dtype=value.dtype).view(value.shape)
        return value

    def __init__(self: Any, device_type: str, mesh: Any = None, *args: Any, **kwargs: Any) -> None:
        with _disable_current_modes():
            if isinstance(mesh, torch.Tensor):
                mesh = real(mesh)
            if isinstance(kwargs.get("_rank_map"), torch.Tensor):
                kwargs["_rank_map"] = real(kwargs["_rank_map"])
            original(self, "cpu", mesh, *args, **kwargs)

    replace_attribute(stack, DeviceMesh, "__init__", __init__)


def _patch_ddp(stack: contextlib.ExitStack) -> None:
    """DistributedDataParallel as its memory is: the module, and one set of gradient buckets
    of the parameters' size (after DDP's rebuild, the buckets of its steady state, at most
    ``bucket_cap_mb`` each), allocated when it is built. DDP's C++ reducer reads the
    parameters' data, which fake tensors lack: it does not run. Its collectives reduce in place
    into the buckets, allocating nothing: the gradients are autograd's, as without DDP."""
    from torch.nn.parallel import DistributedDataParallel

    def __init__(self: Any, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        torch.nn.Module.__init__(self)
        if kwargs.get("gradient_as_bucket_view"):
            from memprof.core.errors import UserCodeError

            raise UserCodeError(
                "DistributedDataParallel(gradient_as_bucket_view=True) cannot be estimated: its "
                "gradients are views of buckets its C++ reducer makes; estimate without it (the "
                "gradients then take their own memory, once more the parameters' size)"
            )
        self.module = module
        cap = int((kwargs.get("bucket_cap_mb") or 25) * 1024 * 1024)
        params: list[torch.Tensor] = [p for p in module.parameters() if p.requires_grad]
        groups, _ = dist._compute_bucket_assignment_by_size(params, [cap]) if params else ([], [])
        self._memprof_buckets = [
            torch.empty(sum(params[i].numel() for i in group), dtype=params[group[0]].dtype)
            for group in groups
        ]

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self: Any) -> Iterator[None]:
        yield

    def register_comm_hook(self: Any, *args: Any, **kwargs: Any) -> None:
        return None  # the hook's collectives would reduce the buckets in place

    for name, replacement in (
        ("__init__", __init__),
        ("forward", forward),
        ("no_sync", no_sync),
        ("register_comm_hook", register_comm_hook),
    ):
        replace_attribute(stack, DistributedDataParallel, name, replacement)
