"""A compiled Hugging Face training step (GPT-2 with AdamW under ``torch.compile``: dynamo
splits it into several graphs at graph breaks) explains itself: at least 80% of the bytes made
during the call are traced to a source line and a module, lines are transformers' with the
user's call kept, and the weight gradients live at the peak are gradients, each the shape of a
parameter of its module. One cold compile for the whole session."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install 'torch-memprof[hf]')")

from reconcile import assert_reconciled  # noqa: E402
from state_bytes import parameter_bytes  # noqa: E402

from real_models import workloads  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled(profiled: Any) -> Any:
    return profiled("gpt2_step", "compile")


def test_most_of_a_compiled_step_is_traced_to_lines_and_modules(compiled: Any) -> None:
    assert_reconciled(compiled.report)
    at_peak = compiled.run.at_peak
    during = [e for e in at_peak.entries if not e.before_call]
    made = sum(e.bytes for e in during) + sum(u.bytes for u in at_peak.unattributed if not u.before_call)
    traced = sum(e.bytes for e in during if e.source and e.module)
    assert made > 0 and traced >= 0.8 * made, (traced, made)


def test_compiled_lines_are_the_libraries_and_keep_the_users_call(compiled: Any) -> None:
    lines, first = inspect.getsourcelines(workloads.gpt2_step)
    (call,) = [first + n for n, text in enumerate(lines) if text.strip().startswith("out = model(")]
    user = f"{os.path.relpath(inspect.getsourcefile(workloads.gpt2_step) or '', Path.cwd())}:{call}"
    forward = [e for e in compiled.run.at_peak.entries if e.phase == "forward" and e.source]
    assert forward and all(e.source.startswith("transformers/") for e in forward), [e.source for e in forward]
    assert all(e.user_source == user for e in forward), {e.user_source for e in forward}


def test_weight_gradients_are_gradients(compiled: Any) -> None:
    model = compiled.args[0]
    named = dict(model.named_modules())
    root = type(model).__name__
    gradients = [e for e in compiled.run.at_peak.entries if e.category == "gradient"]
    assert gradients
    for entry in gradients:
        module = model if entry.module == root else named[entry.module]
        shapes = {str(tuple(p.shape)) for p in module.parameters(recurse=False)}
        assert entry.shape in shapes, (entry.module, entry.shape, shapes)
    assert sum(e.bytes for e in gradients) <= parameter_bytes(model)


def test_graph_breaks_are_shown_at_the_librarys_line_and_the_users_call(compiled: Any) -> None:
    # Dynamo splits GPT-2's step into several graphs; a break is named where transformers' code
    # made it (in 5.24, a logger call inside modeling_gpt2.py:703's callee), with the user's
    # call that led there and Dynamo's reason.
    lines, first = inspect.getsourcelines(workloads.gpt2_step)
    (call,) = [first + n for n, text in enumerate(lines) if text.strip().startswith("out = model(")]
    user = f"{os.path.relpath(inspect.getsourcefile(workloads.gpt2_step) or '', Path.cwd())}:{call}"
    section = compiled.run.compile
    assert section is not None and section.graphs >= 2
    inside = [b for b in section.breaks if b.source.startswith("transformers/")]
    assert inside and all(b.reason and b.source_text for b in inside), section.breaks
    assert any(b.user_source == user for b in inside), [(b.source, b.user_source) for b in inside]
    assert all("memprof" not in r.source for r in section.recompiles)


def test_each_entry_made_during_the_step_names_its_graph(compiled: Any) -> None:
    import re

    from memprof.model.explanation import EAGER_GRAPH

    during = [e for e in compiled.run.at_peak.entries if not e.before_call]
    assert all(
        re.fullmatch(r"\d+/\d+ \w+ \(\w+\.py:\d+\)", e.graph) or e.graph == EAGER_GRAPH for e in during
    )
    # The model's forward and the loss are graphs of their own (a break between them): the
    # logits' gradient is the loss graph's backward, lm_head's logits the model's forward.
    graphs = {e.graph for e in during if e.graph != EAGER_GRAPH}
    assert len(graphs) >= 2
    logits = next(e for e in during if e.module == "lm_head" and e.phase == "forward")
    assert logits.graph.split(" ")[1] == "forward"
    assert any(e.graph.split(" ")[1] == "ForCausalLMLoss" for e in during)
    assert {e.graph for e in compiled.run.at_peak.entries if e.before_call} == {""}


def test_backward_work_between_compiled_graphs_is_on_the_backward_call(compiled: Any) -> None:
    """What autograd's engine or AOTAutograd's runtime makes between two compiled backward
    graphs (65,540 B of GPT-2's compiled step, outside every graph's call) ran eagerly while
    the user's ``loss.backward()`` ran: it is on that line, phase backward, with no op."""
    lines, first = inspect.getsourcelines(workloads.train_step)
    (line,) = [first + n for n, text in enumerate(lines) if text.strip() == "out.loss.backward()"]
    entries = compiled.run.at_peak.entries
    between = [e for e in entries if e.graph == "eager, between graphs" and e.phase == "backward"]
    assert between, [(e.graph, e.phase) for e in entries]
    for entry in between:
        assert entry.source.endswith(f"workloads.py:{line}"), entry
        assert (entry.source_text, entry.op, entry.user_source) == ("out.loss.backward()", "", "")
