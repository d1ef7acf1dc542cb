"""The host's memory in a CUDA estimate. Such an estimate runs on fake CPU tensors (fake CUDA
tensors need a GPU), where ``torch.empty(..., device="cpu")`` makes a tensor like any other:
what lives on the host is told by where it was made. Code that puts tensors on the host says
so (:func:`host_memory`: an optimizer offloaded to the CPU; the fake session's ``tensor.cpu()``),
and what is allocated meanwhile, or computed from host tensors only, is kept here, out of the
device's records: how much at most, and which storages were the host's when.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class HostMemory:
    """The host storages of one fake run, by key (a storage's identity while it lives)."""

    def __init__(self) -> None:
        self.depth = 0
        self.live: dict[int, int] = {}  # key of a live host storage -> its bytes
        self.bytes = 0
        self.peak_bytes = 0
        self._spans: dict[int, list[list[int | None]]] = {}  # key -> [born, died] of each

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """While entered, what is allocated is host memory."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def allocate(self, key: int, nbytes: int, now: int) -> None:
        self.live[key] = nbytes
        self.bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        self._spans.setdefault(key, []).append([now, None])

    def free(self, key: int, now: int) -> bool:
        """The storage ``key`` died: whether it was a host storage."""
        nbytes = self.live.pop(key, None)
        if nbytes is None:
            return False
        self.bytes -= nbytes
        self._spans[key][-1][1] = now
        return True

    def held(self, key: int, at: int) -> bool:
        """Whether the storage ``key`` was a host storage at ``at`` (keys are reused)."""
        return any(
            born is not None and born <= at and (died is None or at <= died)
            for born, died in self._spans.get(key, ())
        )


_ACTIVE: list[HostMemory] = []
"""The host memory of each CUDA estimate's fake session entered, innermost last."""


@contextlib.contextmanager
def active(host: HostMemory) -> Iterator[None]:
    """``host`` is where :func:`host_memory` puts what is allocated, while entered."""
    _ACTIVE.append(host)
    try:
        yield
    finally:
        _ACTIVE.remove(host)


def host_memory() -> contextlib.AbstractContextManager[Any]:
    """Where code that puts tensors on the host says so: in a CUDA estimate, what is allocated
    while entered is host memory, out of the device's figures; in a CPU estimate or a real run,
    nothing (the host is the device, or a real ``device="cpu"`` tells)."""
    return _ACTIVE[-1].entered() if _ACTIVE else contextlib.nullcontext()
