"""Where the program reads its rank, outside torch: what decides whether a sharded job's
ranks can differ by more than torch's own sharding.

torch shards every rank alike (FSDP2 pads each shard to one size; DTensor splits as
``torch.chunk`` does, so shard sizes never grow with the rank): ranks whose code never reads
the rank differ only where torch's split is uneven, and then the last rank differs from the
first. :class:`RankReads`, entered while a rank runs, notes each read of the rank by code that
is not torch's — ``torch.distributed.get_rank``, a process group's ``rank()``, a device mesh's
``get_rank``/``get_local_rank``/``get_coordinate``, the ``RANK``/``LOCAL_RANK``/``GROUP_RANK``
environment variables — with the line that read it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from memprof.sources.patching import replace_attribute, replace_everywhere
from memprof.sources.tracking.lines import LIBRARY, STDLIB, USER, frame_kind, shown_path

RANK_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK"})
_MAX_READS = 100  # lines kept: a report names a few


class RankReads:
    """Notes, while entered, each line outside torch (the user's code or a library's) that
    reads the rank: ``lines`` (``file.py:LINE``, first seen first)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._stack = contextlib.ExitStack()

    def note(self, depth: int = 2) -> None:
        """The caller ``depth`` frames up read the rank (or, past the standard library's frames,
        ``os.environ.get``'s, the code that called it): noted when it is not torch's."""
        frame: Any = sys._getframe(depth)
        while frame is not None and frame_kind(frame.f_code.co_filename) == STDLIB:
            frame = frame.f_back
        if frame is not None and frame_kind(frame.f_code.co_filename) in (USER, LIBRARY):
            line = f"{shown_path(frame.f_code.co_filename)}:{frame.f_lineno}"
            if line not in self.lines and len(self.lines) < _MAX_READS:
                self.lines.append(line)

    def __enter__(self) -> RankReads:
        import torch.distributed as dist
        from torch._C._distributed_c10d import ProcessGroup
        from torch.distributed.device_mesh import DeviceMesh

        stack = self._stack
        try:
            for owner, name in (
                (dist, "get_rank"),
                (dist.distributed_c10d, "get_rank"),
                (dist, "get_node_local_rank"),
                (ProcessGroup, "rank"),
                (DeviceMesh, "get_rank"),
                (DeviceMesh, "get_local_rank"),
                (DeviceMesh, "get_coordinate"),
            ):
                self._watch(stack, owner, name)
            self._watch_environment(stack)
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _watch(self, stack: contextlib.ExitStack, owner: Any, name: str) -> None:
        original: Callable[..., Any] | None = getattr(owner, name, None)
        if original is None:
            return
        note = self.note

        def read(*args: Any, **kwargs: Any) -> Any:
            note()
            return original(*args, **kwargs)

        # Torch's own modules reach it through ``owner``; a user's may have imported it by name.
        replace_everywhere(stack, original, read)
        replace_attribute(stack, owner, name, read)

    def _watch_environment(self, stack: contextlib.ExitStack) -> None:
        """``os.environ["RANK"]``, ``os.environ.get("LOCAL_RANK")``, ``os.getenv("RANK")``."""
        environ = os.environ
        original = type(environ)
        note = self.note

        class Watched(original):  # type: ignore[valid-type,misc]
            def __getitem__(self, key: str) -> str:
                if key in RANK_VARIABLES:
                    note()
                return str(super().__getitem__(key))

        environ.__class__ = Watched
        stack.callback(setattr, environ, "__class__", original)
