"""Host-to-device copies from pinned (page-locked) memory with ``non_blocking=True``, and from
ordinary pageable memory.

A pageable tensor is first staged through a pinned buffer by the driver, and the copy blocks
the host; a pinned tensor is copied by DMA directly and ``non_blocking=True`` lets the host
queue more work meanwhile. The device memory is the same (the batch, 64 MiB); the time is
what changes. Needs CUDA: without it the inputs factory stops with a usage error (exit 2).

    memprof compare memprof.examples.pinned_memory:pageable memprof.examples.pinned_memory:pinned \\
        --device cuda
"""

from __future__ import annotations

import torch

from memprof.core.errors import UsageError, param

BATCH_BYTES = 64 * 1024 * 1024


def pageable(batch: torch.Tensor, device: str) -> torch.Tensor:
    """Copy a pageable host tensor to ``device`` (blocking)."""
    return batch.to(device)


def pinned(batch: torch.Tensor, device: str) -> torch.Tensor:
    """Copy a pinned host tensor to ``device`` with ``non_blocking=True``."""
    return batch.to(device, non_blocking=True)


def _require_cuda(device: str) -> None:
    if not torch.cuda.is_available():
        raise UsageError(
            "the pinned_memory example needs CUDA: pinned host memory and non_blocking copies only "
            f"matter for host-to-GPU transfers, and this torch ({torch.__version__}) sees no CUDA "
            f"device; run it on a machine with a GPU, with {param('device', 'cuda')}"
        )
    if not device.startswith("cuda"):
        raise UsageError(
            f"the pinned_memory example copies to a GPU, but the device is {device!r}; "
            f"run it with {param('device', 'cuda')}"
        )


def _batch() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(BATCH_BYTES // 4, generator=generator)


def pageable_inputs(device: str = "cpu") -> tuple[torch.Tensor, str]:
    """A 64 MiB float32 host batch in ordinary (pageable) memory, and the target device."""
    _require_cuda(device)
    return _batch(), device


def pinned_inputs(device: str = "cpu") -> tuple[torch.Tensor, str]:
    """The same batch in pinned (page-locked) host memory, and the target device."""
    _require_cuda(device)
    return _batch().pin_memory(), device
