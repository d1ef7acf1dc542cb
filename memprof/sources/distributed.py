"""Distributed jobs: which rank this process is, which device it profiles, how its runs are
named, and how every rank's report reaches rank 0.

A process started by ``torchrun`` (or ``python -m torch.distributed.run``, or any launcher
that sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``) is one rank of a job
(:func:`rank_env`). Each rank profiles on its own device (``cuda:LOCAL_RANK`` when CUDA is
used, else the CPU), names its runs ``rank3`` (``rank3/eager``, ``rank3/compile`` when there
are several), and hands its report to rank 0 through an :class:`Exchange`:

- the key-value store of the job's process group, when the profiled code initialised one
  (an inputs factory usually does): it reaches every node;
- otherwise files in a folder the job's ranks share on one node: torchelastic's folder of this
  launch and attempt, or a folder in the temporary directory named after the job's run id and
  master address.

Rank 0 waits at most ``timeout`` seconds for the others once its own runs are done, and names
each rank that did not report; a rank that handed its report in waits as long for rank 0 to
take it. No collective operation is used: a rank that hangs, or fails before the process
group exists, cannot make the others wait forever.

Torch is imported only inside functions (to use the store, to pick a CUDA device). What rank 0
makes of the reports (the job's report, a failed rank's runs) is :mod:`memprof.library.jobs`'.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprof.core.errors import UsageError, param
from memprof.sources.options import DEFAULT_RANK_TIMEOUT, StatusFn

__all__ = ["DEFAULT_RANK_TIMEOUT", "Exchange", "RankEnv", "rank_env"]


# Files older than this before rank 0 started are left over from an earlier job of the same name.
_STALE_SECONDS = 60.0
_STARTED = time.time()


@dataclass(frozen=True)
class RankEnv:
    """This process's place in the job, from the launcher's environment variables."""

    rank: int
    world_size: int
    local_rank: int
    run_id: str = ""
    restart: str = "0"
    master: str = ""
    error_file: str = ""


def _int_var(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None and default is not None:
        return default
    try:
        value = int(text or "")
    except ValueError:
        raise UsageError(
            f"environment variable {name}={text!r} is not a whole number; is this process started "
            "by torchrun?"
        ) from None
    if value < 0:
        raise UsageError(f"environment variable {name}={value} is negative")
    return value


def rank_env(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank of this process when a distributed launcher started it (``RANK`` and
    ``WORLD_SIZE`` set), else None. Malformed variables are a :class:`UsageError`."""
    environ = os.environ if environ is None else environ
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    rank = _int_var(environ, "RANK")
    world_size = _int_var(environ, "WORLD_SIZE")
    if not 0 <= rank < world_size:
        raise UsageError(f"RANK={rank} is not below WORLD_SIZE={world_size}; check the launcher's settings")
    master = f"{environ.get('MASTER_ADDR', '')}:{environ.get('MASTER_PORT', '')}".strip(":")
    return RankEnv(
        rank=rank,
        world_size=world_size,
        local_rank=_int_var(environ, "LOCAL_RANK", rank),
        run_id=environ.get("TORCHELASTIC_RUN_ID", ""),
        restart=environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
        master=master,
        error_file=environ.get("TORCHELASTIC_ERROR_FILE", ""),
    )


def rank_device(requested: str, env: RankEnv) -> str:
    """The device a rank profiles: ``auto`` and ``cuda`` mean ``cuda:LOCAL_RANK`` (``auto``
    without CUDA: the CPU); ``cpu`` and an explicit ``cuda:N`` stay as given. The chosen GPU
    becomes the process's current CUDA device, as the process group's NCCL expects."""
    text = (requested or "auto").strip().lower()
    if text not in ("auto", "cuda"):
        return requested
    import torch

    if not torch.cuda.is_available():
        return "cpu" if text == "auto" else requested  # profiling says CUDA is missing
    count = torch.cuda.device_count()
    if env.local_rank >= count:
        raise UsageError(
            f"LOCAL_RANK={env.local_rank} but this node has {count} CUDA device(s); start at most "
            f"{count} ranks per node, or profile on the CPU with {param('device', 'cpu')}"
        )
    torch.cuda.set_device(env.local_rank)
    return f"cuda:{env.local_rank}"


def rank_label(rank: int, label: str | None = None) -> str:
    """A run of rank ``rank``: ``rank2``, or ``rank2/eager`` when the rank makes several."""
    return f"rank{rank}/{label}" if label else f"rank{rank}"


def rank_labels(rank: int, labels: Sequence[str]) -> list[str]:
    """A rank's run labels: ``rank2`` for its one run, ``rank2/eager``, ``rank2/compile`` for
    several."""
    if len(labels) == 1:
        return [rank_label(rank)]
    return [rank_label(rank, label) for label in labels]


# ------------------------------------------------------------------------------- the exchange


def process_group_store() -> Any | None:
    """The key-value store of the default process group, when one is initialised."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # torch without distributed, or the store moved: files still work
        return None


def process_group_backend() -> str | None:
    """The default process group's backend (``gloo``, ``nccl``), when one is initialised."""
    try:
        import torch.distributed as dist

        return str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


def exchange_folder(env: RankEnv) -> Path:
    """The folder the ranks of this job on this node share: inside torchelastic's folder of
    this launch and attempt when it has one, else in the temporary directory, named after the
    job's run id and master address (and the user)."""
    if env.error_file:
        # <log dir>/<run id>_<random>/attempt_<n>/<local rank>/error.json: unique to this launch.
        return Path(env.error_file).parent.parent / "memprof"
    job = "-".join(part for part in (env.run_id, env.master, str(env.world_size)) if part)
    user = str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"memprof-{user}-{job}")
    return Path(tempfile.gettempdir()) / safe


class Exchange:
    """Hands each rank's report (JSON text) to rank 0, through the process group's store when
    there is one and through files in :func:`exchange_folder` otherwise; rank 0 reads both."""

    def __init__(self, env: RankEnv, timeout: float, store: Any | None = None, folder: Path | None = None):
        self.env = env
        self.timeout = timeout
        self.store = store
        self.folder = folder if folder is not None else exchange_folder(env)
        self._key_prefix = f"memprof/attempt{env.restart}"

    def _key(self, rank: int) -> str:
        return f"{self._key_prefix}/rank{rank}"

    def _file(self, rank: int) -> Path:
        return self.folder / f"rank{rank}.json"

    def hand_in(self, text: str) -> str:
        """Give this rank's report to rank 0; returns how (``store`` or the folder's path)."""
        if self.store is not None:
            try:
                self.store.set(self._key(self.env.rank), text.encode("utf-8"))
                return "store"
            except Exception:  # the store is gone (its host exited): files still work on one node
                self.store = None
        from memprof.core.writing import atomic_write_text

        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self._file(self.env.rank), text, remember=False)  # not an output of the user's
        return str(self.folder)

    def _handed_in(self) -> bool:
        if self.store is not None:
            try:
                return bool(self.store.check([self._key(self.env.rank)]))
            except Exception:  # the store's host has exited: rank 0 is done, one way or another
                return False
        return self._file(self.env.rank).exists()

    def wait_taken(self) -> bool:
        """Wait until rank 0 has taken this rank's report; False after ``timeout`` seconds."""
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while self._handed_in():
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
        return True

    def _take(self, rank: int) -> str | None:
        if self.store is not None:
            key = self._key(rank)
            try:
                if self.store.check([key]):
                    text = bytes(self.store.get(key)).decode("utf-8")
                    self.store.delete_key(key)
                    return text
            except Exception:
                self.store = None
        path = self._file(rank)
        try:
            if path.stat().st_mtime < _STARTED - _STALE_SECONDS:
                path.unlink(missing_ok=True)  # left over from an earlier job of the same name
                return None
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        path.unlink(missing_ok=True)
        return text

    def collect(self, status: StatusFn | None = None) -> tuple[dict[int, str], list[int]]:
        """Rank 0: every other rank's report, waiting at most ``timeout`` seconds; returns the
        reports by rank and the ranks that did not report."""
        pending = list(range(1, self.env.world_size))
        got: dict[int, str] = {}
        start = time.monotonic()
        next_status, delay = start + 2.0, 0.02
        while True:
            for rank in list(pending):
                text = self._take(rank)
                if text is not None:
                    got[rank] = text
                    pending.remove(rank)
            now = time.monotonic()
            if not pending or now - start >= self.timeout:
                break
            if status is not None and now >= next_status:
                waiting = ", ".join(str(rank) for rank in pending)
                ranks = "rank" if len(pending) == 1 else "ranks"
                status(f"waiting for {ranks} {waiting} ({now - start:.0f} s of {self.timeout:g} s)")
                next_status = now + 5.0
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
        shutil.rmtree(self.folder, ignore_errors=True)
        return got, pending
