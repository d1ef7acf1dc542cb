"""The op tracker's dispatch mode and torch.compile: compiled code called while the mode is on
runs as compiled, and no frame of the mode's own is handed to torch.compile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from memprof.sources.tracking import Tracker


def _compiled_sine() -> tuple[Callable[[torch.Tensor], torch.Tensor], list[str]]:
    """``sin(x) * 2`` compiled by a backend that lists the code of each graph it is given, and
    compiled once already (before any mode is on)."""
    graphs: list[str] = []

    def backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(graph.code)
        return graph.forward

    @torch.compile(backend=backend)
    def sine(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2

    sine(torch.ones(8))
    return sine, graphs


def test_compiled_code_under_the_op_tracker_compiles_no_frame_of_the_tracker() -> None:
    sine, graphs = _compiled_sine()
    x = torch.randn(8)

    def step(x: torch.Tensor) -> torch.Tensor:
        return sine(x) + 1

    with Tracker((x,), func=step) as tracker:
        y = step(x)
    assert torch.equal(y, torch.sin(x) * 2 + 1)
    assert len(graphs) == 1  # the graph compiled before; nothing compiled under the mode
    assert tracker.ops is not None
    assert [tracker.ops.name_list[i] for i in tracker.ops.name] == ["aten::sin", "aten::mul", "aten::add"]


def test_a_mode_that_lets_torch_compile_in_would_compile_its_own_frames() -> None:
    """What the test above guards against: compiled code calls an op, the op calls the mode's
    ``__torch_dispatch__`` with torch.compile's frame hook still set, and the mode's frames are
    compiled too (torch's own wrapper, or the tracker's mode, keeps them out)."""
    sine, graphs = _compiled_sine()

    class Open(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    with Open():
        sine(torch.randn(8))
    assert len(graphs) > 1
