"""Program state as the tracker sees it (memprof.sources.tracking.state): each storage of state
is followed until it dies, while tracking, and described by its shape and dtype."""

from __future__ import annotations

import gc
import time

import torch

from memprof.sources.tracking import Tracker


def _model() -> tuple[torch.nn.Linear, torch.Tensor]:
    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    model(x).sum().backward()  # gradients made before the call
    return model, x


def step(model: torch.nn.Linear, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)  # frees the gradients made before the call
    model(x).sum().backward()


def test_state_freed_in_the_call_is_followed_to_its_death_and_new_state_is_seen() -> None:
    model, x = _model()
    with Tracker((model, x), func=step, ops=False) as tracker:
        start = time.time_ns()
        step(model, x)
        end = time.time_ns()
    gradients = [s for s in tracker.state.storages() if s.kind == "gradient"]
    before = [s for s in gradients if s.seen_ns < start]
    made = [s for s in gradients if s.seen_ns >= start]
    assert len(before) == len(made) == 2  # weight and bias, each step
    assert all(s.died_ns is not None and start <= s.died_ns <= end for s in before)
    assert all(s.died_ns is None for s in made)  # alive when tracking ended
    assert sorted((s.shape, s.dtype, s.nbytes) for s in made) == [
        ("(3, 4)", "float32", 48),
        ("(3,)", "float32", 12),
    ]
    params = {s.name: (s.shape, s.died_ns) for s in tracker.state.storages() if s.kind == "parameter"}
    assert params == {"weight": ("(3, 4)", None), "bias": ("(3,)", None)}


def test_deaths_after_tracking_are_not_noted() -> None:
    model, x = _model()
    with Tracker((model, x), func=step, ops=False) as tracker:
        step(model, x)
    model.zero_grad(set_to_none=True)  # frees the call's gradients after tracking: not noted
    gc.collect()
    deaths = [s.died_ns for s in tracker.state.storages() if s.kind == "gradient"]
    assert len(deaths) == 4 and deaths.count(None) == 2
