"""Loading a saved checkpoint: fully, with ``mmap=True``, and with ``map_location`` straight to
the device.

A full ``torch.load`` reads every tensor into new storages from torch's allocator: it
allocates the whole checkpoint. ``torch.load(..., mmap=True)`` maps the file instead: the
tensors' storages are the file's pages, read on first touch, and torch's allocator allocates
(almost) nothing. ``map_location=device`` builds the tensors on the target device, instead of
loading to host memory and copying (``torch.load(path).to(device)`` has both copies alive at
once); on a CPU-only machine the target is the host itself, so it is a full load.

The checkpoint (64 MiB of float32 weights, seeded) is written once per process into a
temporary folder by the inputs factory, outside the profile.

    memprof compare memprof.examples.checkpoint_load:full_load \\
        memprof.examples.checkpoint_load:mmap_load memprof.examples.checkpoint_load:map_location_load
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import torch

CHECKPOINT_BYTES = 64 * 1024 * 1024
TENSORS = 8
_checkpoint: Path | None = None


def write_checkpoint(path: Path, total_bytes: int = CHECKPOINT_BYTES, tensors: int = TENSORS) -> Path:
    """Save a state dict of ``tensors`` float32 (1024, n) weights adding up to ``total_bytes``."""
    generator = torch.Generator().manual_seed(0)
    columns = total_bytes // tensors // 4 // 1024
    state = {f"layer{i}.weight": torch.randn(1024, columns, generator=generator) for i in range(tensors)}
    torch.save(state, path)
    return path


def checkpoint_path() -> Path:
    """The example checkpoint, written on first use and removed when the process exits."""
    global _checkpoint
    if _checkpoint is None or not _checkpoint.exists():
        folder = Path(tempfile.mkdtemp(prefix="memprof-checkpoint-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _checkpoint = write_checkpoint(folder / "checkpoint.pt")
    return _checkpoint


def full_load(path: Path, device: str) -> dict[str, torch.Tensor]:
    """``torch.load`` into host memory, then each tensor to ``device`` (a no-op on CPU)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.to(device) for name, tensor in state.items()}


def mmap_load(path: Path, device: str) -> dict[str, torch.Tensor]:
    """``torch.load(..., mmap=True)``: the storages map the file; on CPU nothing is copied."""
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return {name: tensor.to(device) for name, tensor in state.items()}


def map_location_load(path: Path, device: str) -> dict[str, torch.Tensor]:
    """``torch.load(..., map_location=device)``: tensors are created on the target device."""
    return dict(torch.load(path, map_location=device, weights_only=True))


def load_inputs(device: str = "cpu") -> dict[str, object]:
    """The checkpoint's path (written on first use) and the device to load to."""
    return {"path": checkpoint_path(), "device": device}


full_load_inputs = load_inputs
mmap_load_inputs = load_inputs
map_location_load_inputs = load_inputs
