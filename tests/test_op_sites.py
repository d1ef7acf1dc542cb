"""The statement the op tracker gives each op (its ``site``: the innermost frame of the user's
or a library's code; its ``user_site``: the user's own line that called into the library).

Inside a module call, the tracker walks the stack only down to the frame that runs the call
(``Calls.frames``) and reuses what lies above it, found once per call: these tests check that
every op gets the statement a walk of the whole stack gives, and that no frame is held once
its call has returned."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from memprof.sources.tracking import Tracker, lines
from memprof.sources.tracking.modules import Calls

LIBRARY_CODE = """
import torch


def scale(x):
    return x * 2  # a library function, called outside any module too


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.inner(x)  # torch's module, called from the library
        return scale(y) + 1
"""


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A module installed in a site directory: library code to the tracker."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "blocklib.py").write_text(LIBRARY_CODE)
    monkeypatch.setattr(lines, "site_dirs", lambda: (os.path.join(str(site), ""),))
    lines.frame_kind.cache_clear()
    spec = importlib.util.spec_from_file_location("blocklib", site / "blocklib.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    lines.frame_kind.cache_clear()


class Net(torch.nn.Module):
    """The user's own model: its forward is user code, around a library block."""

    def __init__(self, library: ModuleType) -> None:
        super().__init__()
        self.block = library.Block()
        self.head = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(x)
        return self.head(h).sum()


Where = tuple[str, int] | None


def _statements(
    library: ModuleType, *, shortcut: bool, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, Where, Where]]:
    """(name, site, user site) of every op of a training step, sites as (file name, line)."""
    if not shortcut:
        monkeypatch.setattr(Calls, "keep_frames", lambda self, stack: None)
    torch.manual_seed(0)
    net, x = Net(library), torch.randn(4, 8)

    def step(net: Net, x: torch.Tensor) -> None:
        loss = net(library.scale(x))
        loss.backward()

    with Tracker((net, x), func=step) as tracker:
        step(net, x)
    ops = tracker.ops
    assert ops is not None

    def where(site: int) -> Where:
        if site < 0:
            return None
        file, line = ops.site_lines[site]
        return os.path.basename(file), line

    names = [ops.name_list[i] for i in ops.name]
    return list(zip(names, map(where, ops.site), map(where, ops.user_site), strict=True))


def test_every_op_gets_the_statement_a_walk_of_the_whole_stack_gives(
    library: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    shortcut = _statements(library, shortcut=True, monkeypatch=monkeypatch)
    whole = _statements(library, shortcut=False, monkeypatch=monkeypatch)
    assert shortcut == whole
    # What the walk finds, for the record: the library's lines with the user's line that called
    # into it, and the user's own lines alone.
    here = os.path.basename(__file__)
    sites = {(site, user) for _, site, user in shortcut}
    assert any(site and site[0] == "blocklib.py" and user and user[0] == here for site, user in sites)
    assert any(site and site[0] == here and user is None for site, user in sites)


def test_no_frame_is_held_once_its_call_has_returned(library: ModuleType) -> None:
    net, x = Net(library), torch.randn(4, 8)
    held: list[int] = []

    class Failing(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            held.append(len(tracker.calls.frames or ()))
            raise ValueError("a forward that fails")

    with Tracker((net, x), func=net) as tracker:
        net(x)
        assert tracker.calls.frames == []
        with pytest.raises(ValueError):
            Failing()(x)
        assert tracker.calls.frames == []  # its frame dropped as the failed call ended
    assert held == [1]
    assert tracker.calls.frames is None
