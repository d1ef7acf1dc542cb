"""Explaining the peak of eager runs: what is live at it, by category, module and source line.

Every test that profiles goes through ``explaining.explain``, which asserts the reconciliation
(every byte in exactly one category; entries add up to the footprint; what the call made, less
what it freed from before, is the peak)."""

from __future__ import annotations

import importlib
import inspect
import math
import os
import pickle
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from explaining import _profiled, explain, profile_calls, reconcile
from torch import nn
from torch.profiler import ProfilerActivity, profile

import memprof.examples.gpt as gpt
import memprof.examples.similarity as similarity
from memprof.analysis.attribution import Attribution, attribute
from memprof.core.records import CALL_MARKER
from memprof.model.explanation import AtPeakEntry
from memprof.sources import tracking
from memprof.sources.live import tree
from memprof.sources.tracking import Tracker, is_user_file

MiB = 1024 * 1024
FLOAT = 4


def line_of(module: object, statement: str) -> str:
    """``file:LINE`` of the one line of ``module``'s source that starts with ``statement``."""
    path = Path(inspect.getfile(module))  # type: ignore[arg-type]
    lines = path.read_text().splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.strip().startswith(statement)]
    assert len(found) == 1, (statement, found)
    return f"{path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}:{found[0]}"


def made_during(explained: Attribution) -> list[AtPeakEntry]:
    return [e for e in explained.at_peak.entries if not e.before_call]


def gpt_parameter_bytes(c: gpt.GPTConfig) -> int:
    """Parameters of the GPT, counted by hand: the output layer shares the token embedding."""
    block = (
        2 * c.n_embd  # ln1
        + 3 * c.n_embd * c.n_embd
        + 3 * c.n_embd  # qkv
        + c.n_embd * c.n_embd
        + c.n_embd  # attention projection
        + 2 * c.n_embd  # ln2
        + 4 * c.n_embd * c.n_embd
        + 4 * c.n_embd  # fc
        + 4 * c.n_embd * c.n_embd
        + c.n_embd  # mlp projection
    )
    return FLOAT * (c.vocab_size * c.n_embd + c.context * c.n_embd + c.n_layer * block + 2 * c.n_embd)


GPT_TENSORS = 2 + 12 * gpt.GPTConfig().n_layer + 2  # embeddings, 12 per block, final LayerNorm


@pytest.fixture(scope="module")
def gpt_step() -> Attribution:
    """One explained AdamW step of the example GPT after one warm-up step."""
    return explain(gpt.train_step, *gpt.train_step_inputs(), module=gpt)


# ---- footprint, live at start and exact peaks ---------------------------------------------------


def drop_then_allocate(holder: list[torch.Tensor]) -> None:
    holder.clear()  # frees the 100 MiB made before the call
    big = torch.ones(150 * MiB // FLOAT)  # the peak: 150 MiB live, 50 MiB above the start
    del big
    holder.append(torch.ones(100 * MiB // FLOAT))  # what the next call frees


# Slow tier: test_explain_run checks the same call, numbers and entry through the command line.
@pytest.mark.slow
def test_a_call_that_frees_a_tensor_made_before_it_has_an_exact_peak() -> None:
    explained = explain(drop_then_allocate, [torch.ones(100 * MiB // FLOAT)])
    assert explained.live_at_start_bytes == 100 * MiB
    assert explained.footprint_bytes == 150 * MiB
    assert explained.peak_bytes == 50 * MiB
    assert explained.freed_before_peak_bytes == 100 * MiB
    assert explained.at_peak.by_category["temporary"] == 150 * MiB
    (entry,) = explained.at_peak.entries
    assert (entry.bytes, entry.op, entry.before_call) == (150 * MiB, "aten::ones", False)
    assert entry.source == line_of(drop_then_allocate, "big = torch.ones(150")
    assert explained.calls[0].growth_bytes is None


def test_zero_grad_in_a_training_step_frees_the_previous_gradients(gpt_step: Attribution) -> None:
    parameters = gpt_parameter_bytes(gpt.GPTConfig())
    # The warm-up step's gradients (one per parameter) are freed by zero_grad(set_to_none=True)
    # before the peak: the peak above the start counts that.
    assert gpt_step.freed_before_peak_bytes == parameters
    assert gpt_step.peak_bytes == gpt_step.footprint_bytes - gpt_step.live_at_start_bytes
    assert gpt_step.at_peak.by_category["gradient"] == 0  # the peak comes before the new ones


def test_tracking_program_state_leaves_the_measured_allocations_untouched() -> None:
    inputs = gpt.train_step_inputs()
    bare, _ = profile_calls(gpt.train_step, inputs, track=False)
    tracked, explained = profile_calls(gpt.train_step, inputs, explain=False)
    assert explained is not None
    # Frees of blocks made before a profile are recorded or not depending on earlier profiles
    # in the process; allocations are always recorded: they are the same, in the same order.
    assert bare.mem_bytes[bare.mem_bytes > 0].tolist() == tracked.mem_bytes[tracked.mem_bytes > 0].tolist()
    again, explained_again = profile_calls(gpt.train_step, inputs, explain=False)
    assert explained_again is not None
    assert (explained_again.peak_bytes, explained_again.footprint_bytes) == (
        explained.peak_bytes,
        explained.footprint_bytes,
    )


def test_the_attribution_pass_allocates_what_the_measured_run_does_and_its_own_scalars() -> None:
    """The op tracker (a dispatch mode) wraps again each Python number given for a Tensor
    argument (an 8-byte tensor each time); it records those and the attribution leaves them out.
    It stays out of backward, where tensors with Python objects would change what autograd
    allocates (gradients would not be accumulated in place)."""
    inputs = gpt.train_step_inputs()
    gpt.train_step(*inputs)
    light = Tracker(inputs, func=gpt.train_step, ops=False)
    measured, _ = _profiled(gpt.train_step, inputs, {}, 1, light)
    full = Tracker(inputs, func=gpt.train_step)
    _, prof = _profiled(gpt.train_step, inputs, {}, 1, full)
    facts = full.facts(prof)
    sizes = facts.allocations.bytes
    extra = Counter(sizes[sizes > 0].tolist()) - Counter(measured.mem_bytes[measured.mem_bytes > 0].tolist())
    assert extra == Counter({8: len(facts.rewrap_op)})
    assert Counter(facts.rewrap_bytes.tolist()) == Counter({8: len(facts.rewrap_op)})
    assert len(facts.rewrap_op) > 100  # AdamW's scalar arithmetic, per parameter


def test_the_explaining_call_profiles_the_allocator_and_backward_alone() -> None:
    """memprof run's explaining call has the profiler record no op of forward or of the
    optimizer (the tracker's dispatch mode sees them; each op the profiler records costs its
    stop and the reading of its event tree), only the allocator and the ops autograd runs in
    backward: what is live at the peak is what a call with every op profiled explains."""
    inputs = gpt.train_step_inputs()
    gpt.train_step(*inputs)
    explained, names, made = {}, {}, {}
    for unprofiled in (False, True):
        tracker = Tracker(inputs, func=gpt.train_step)
        _, prof = _profiled(gpt.train_step, inputs, {}, 1, tracker, unprofiled=unprofiled)
        facts = tracker.facts(prof)
        explained[unprofiled] = attribute(None, facts)
        names[unprofiled] = Counter(e.name() for e in prof.profiler.kineto_results.events())
        made[unprofiled] = sorted(facts.allocations.bytes[facts.allocations.bytes > 0].tolist())
    full, lean = explained[False], explained[True]
    assert (lean.peak_bytes, lean.footprint_bytes) == (full.peak_bytes, full.footprint_bytes)
    assert lean.at_peak == full.at_peak and len(lean.at_peak.entries) > 10
    assert made[True] == made[False] and len(made[True]) > 100  # every allocation recorded
    assert names[True]["aten::embedding"] == 0 < names[False]["aten::embedding"]  # forward
    assert names[True]["aten::add_"] < names[False]["aten::add_"]  # AdamW's, not backward's
    backward = [name for name in names[True] if name.startswith("autograd::engine::evaluate_function")]
    assert backward and all(names[True][n] == names[False][n] for n in backward)
    # Record functions are on again after the call: a later profile records its ops.
    with profile(activities=[ProfilerActivity.CPU]) as after:
        torch.ones(4).add_(1)
    assert "aten::add_" in {e.name() for e in after.profiler.kineto_results.events()}


def test_the_flat_event_list_is_only_a_cross_check() -> None:
    x, y = similarity.similarity_inputs()
    similarity.similarity(x, y)
    tracker = Tracker((x, y), func=similarity.similarity)
    raw, prof = _profiled(similarity.similarity, (x, y), {}, 1, tracker)
    facts = tracker.facts(prof)
    with_raw, without = attribute(raw, facts), attribute(None, facts)
    assert with_raw == without
    assert without.peak_bytes == 834_000_000


# ---- categories ---------------------------------------------------------------------------------


def test_gpt_parameters_and_adamw_state_are_exact(gpt_step: Attribution) -> None:
    config = gpt.GPTConfig()
    parameters = gpt_parameter_bytes(config)
    assert parameters == 3_717_120
    by_category = gpt_step.at_peak.by_category
    assert by_category["parameter"] == parameters
    # exp_avg and exp_avg_sq per parameter, and one float32 step counter per parameter tensor.
    assert by_category["optimizer_state"] == 2 * parameters + FLOAT * GPT_TENSORS
    ids = 2 * config.batch * config.context * 8  # idx and targets, int64
    assert by_category["input"] == ids
    # The causal masks (module buffers, one bool per context x context) are "other".
    assert by_category["other"] == config.n_layer * config.context**2
    # The attention's scale, a Python float, becomes a float64 tensor before aten::mul starts,
    # which autograd keeps for the product's backward: an activation of that op, on its line.
    q = torch.ones(2, 2, requires_grad=True)
    kept = (q * (1.0 / math.sqrt(config.n_embd // config.n_head))).grad_fn._saved_other  # type: ignore[union-attr]
    assert kept.numel() * kept.element_size() == 8
    scale = [e for e in gpt_step.at_peak.entries if e.op == "aten::mul" and e.bytes == 8]
    assert [(e.category, e.module, e.source_text[:6]) for e in scale] == [
        ("activation", f"blocks.{n}.attn", "att = ") for n in range(config.n_layer)
    ]
    assert by_category["workspace"] == 0
    state = [e for e in gpt_step.at_peak.entries if e.category == "optimizer_state"]
    assert all(e.before_call for e in state)  # made by the warm-up step
    assert {e.module for e in state} >= {"tok_emb", "blocks.1.mlp.fc", "ln_f"}


def test_gradients_parameters_and_optimizer_state_of_an_accumulating_step() -> None:
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)

    def accumulate_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
        model(x).square().mean().backward()  # adds into the gradients the warm-up made
        optimizer.step()

    explained = explain(accumulate_step, model, optimizer, torch.ones(512, 256))
    parameters = FLOAT * (256 * 1024 + 1024 + 1024 * 256 + 256)
    by_category = explained.at_peak.by_category
    assert by_category["parameter"] == parameters
    assert by_category["gradient"] == parameters
    assert by_category["optimizer_state"] == 2 * parameters + FLOAT * 4
    assert by_category["input"] == 512 * 256 * FLOAT
    gradients = [e for e in explained.at_peak.entries if e.category == "gradient"]
    assert {e.module for e in gradients} == {"0", "2"}
    assert all(e.before_call for e in gradients)


def test_what_python_makes_outside_any_op_is_other_on_its_own_line() -> None:
    # torch.get_rng_state() and the storage of a tensor unpickled allocate without an op:
    # "other", on their own statements, with no op (not a workspace of the op that follows).
    data = pickle.dumps(torch.ones(4096))

    def step() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        state = torch.get_rng_state()
        copy = pickle.loads(data)
        follows = torch.ones(1024)
        return state, copy, follows

    explained = explain(step)
    state = torch.get_rng_state()
    other = {e.source_text: (e.category, e.op, e.bytes) for e in made_during(explained) if not e.op}
    assert other == {
        "state = torch.get_rng_state()": ("other", "", state.numel() * state.element_size()),
        "copy = pickle.loads(data)": ("other", "", 4096 * FLOAT),
    }
    assert explained.at_peak.by_category["workspace"] == 0


class Tied(nn.Module):
    """An embedding whose weight the output layer shares (as GPT-2's lm_head does)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1024, 256)
        self.head = nn.Linear(256, 1024, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():  # only the head's backward computes the shared weight's gradient
            x = self.emb(ids)
        return self.head(x)


def test_a_gradient_is_on_its_parameters_module_with_its_shape() -> None:
    # The tied weight's gradient is made by the head's backward (the op that computes it); it
    # is still the gradient of emb.weight, where its parameter and optimizer state are.
    model = Tied()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(model: Tied, optimizer: torch.optim.Optimizer, ids: torch.Tensor) -> torch.Tensor:
        model(ids).logsumexp(-1).mean().backward()
        spike = torch.ones(4 * MiB)  # the peak, while the gradient made in backward is live
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return spike.sum()

    explained = explain(step, model, optimizer, torch.arange(512) % 1024)
    weight = 1024 * 256 * FLOAT
    state = {e.category: (e.module, e.shape) for e in explained.at_peak.entries if e.bytes == weight}
    assert explained.at_peak.by_category["gradient"] == weight
    assert state == {
        "parameter": ("emb", "(1024, 256)"),
        "optimizer_state": ("emb", "(1024, 256)"),
        "gradient": ("emb", "(1024, 256)"),
    }


def test_similarity_sum_copy_is_workspace_on_the_sum_line() -> None:
    x, y = similarity.similarity_inputs()
    explained = explain(similarity.similarity, x, y, module=similarity)
    assert explained.peak_bytes == 834_000_000
    assert explained.live_at_start_bytes == 2 * 256 * 500 * FLOAT
    by_category = explained.at_peak.by_category
    assert by_category["workspace"] == 512_000_000
    # xy (256 x 500 x 500 float32), its comparison (bool) and the (500, 500) int64 result.
    assert by_category["temporary"] == 256_000_000 + 64_000_000 + 2_000_000
    assert by_category["input"] == 1_024_000
    top = explained.at_peak.entries[0]
    assert (top.bytes, top.category, top.op, top.phase) == (512_000_000, "workspace", "aten::sum", "forward")
    assert top.source == line_of(similarity, "return xy.abs().lt(1).sum(")
    assert ".sum(" in top.source_text and "#" not in top.source_text
    xy = explained.at_peak.entries[1]
    assert (xy.bytes, xy.op, xy.shape, xy.dtype) == (256_000_000, "aten::sub", "(256, 500, 500)", "float32")
    assert xy.source == line_of(similarity, "xy = x[:, :, None]")


# ---- lines and modules --------------------------------------------------------------------------


def test_gpt_peak_is_the_logits_and_the_loss(gpt_step: Attribution) -> None:
    config = gpt.GPTConfig()
    logits = config.batch * config.context * config.vocab_size * FLOAT
    largest = made_during(gpt_step)[:4]
    assert [e.bytes for e in largest] == [logits] * 4
    logits_line = line_of(gpt, "logits = self.lm_head(x)")
    loss_line = line_of(gpt, "loss = F.cross_entropy(")
    assert {e.source for e in largest} == {logits_line, loss_line}
    described = {(e.category, e.module, e.phase, e.source, e.op) for e in largest}
    assert described == {
        ("temporary", "lm_head", "forward", logits_line, "aten::mm"),
        ("activation", "GPT", "forward", loss_line, "aten::_log_softmax"),
        # Backward allocations carry the forward line whose gradient they are.
        ("temporary", "GPT", "backward", loss_line, "aten::_log_softmax_backward_data"),
        ("temporary", "GPT", "backward", loss_line, "aten::nll_loss_backward"),
    }
    assert all(e.shape == f"({config.batch * config.context}, {config.vocab_size})" for e in largest)


class Wide(nn.Module):
    """A 16 MiB hidden layer between two small ones: its gradient is made in backward."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(64, 4096)
        self.down = nn.Linear(4096, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.up(x)
        return self.down(hidden)


def wide_step(model: Wide, x: torch.Tensor) -> None:
    model(x).square().sum().backward()


@pytest.fixture(scope="module")
def wide() -> Attribution:
    torch.manual_seed(0)
    return explain(wide_step, Wide(), torch.ones(1024, 64))


def test_backward_allocations_name_the_module_and_line_of_their_forward(wide: Attribution) -> None:
    hidden = 1024 * 4096 * FLOAT
    first, second = made_during(wide)[:2]
    by_phase = {e.phase: e for e in (first, second)}
    forward, backward = by_phase["forward"], by_phase["backward"]
    assert (forward.bytes, forward.category, forward.module, forward.op) == (
        hidden,
        "activation",
        "up",
        "aten::addmm",
    )
    assert forward.source == line_of(Wide, "hidden = self.up(x)")
    assert (backward.bytes, backward.category, backward.module, backward.op) == (
        hidden,
        "temporary",
        "down",
        "aten::mm",
    )
    assert backward.source == line_of(Wide, "return self.down(hidden)")
    assert backward.source_text == "return self.down(hidden)"


def test_modules_table_separates_forward_and_backward(wide: Attribution) -> None:
    hidden = 1024 * 4096 * FLOAT
    rows = {(m.module, m.phase): m for m in wide.modules}
    up = rows["up", "forward"]
    assert (up.calls, up.allocated_bytes, up.peak_bytes, up.at_peak_bytes) == (1, hidden, hidden, hidden)
    down = rows["down", "forward"]
    assert (down.calls, down.allocated_bytes, down.peak_bytes) == (1, 1024 * 64 * FLOAT, 1024 * 64 * FLOAT)
    # At the peak, down's backward has made the hidden layer's gradient and its own weight's and
    # bias's gradients.
    assert rows["down", "backward"].at_peak_bytes == hidden + FLOAT * (4096 * 64 + 64)
    assert rows["down", "backward"].allocated_bytes >= hidden
    assert rows["Wide", "forward"].allocated_bytes == hidden + 1024 * 64 * FLOAT
    assert rows["Wide", "forward"].at_peak_bytes == hidden
    assert [m.phase for m in wide.modules] == sorted(
        (m.phase for m in wide.modules), key=["forward", "backward"].index
    )


def test_multiline_statements_give_their_first_line() -> None:
    def join(x: torch.Tensor) -> torch.Tensor:
        joined = torch.cat(
            [x, x],
        )
        return joined

    explained = explain(join, torch.ones(MiB // FLOAT))
    (entry,) = made_during(explained)
    assert entry.source == line_of(test_multiline_statements_give_their_first_line, "joined = torch.cat(")
    assert entry.source_text == "joined = torch.cat( [x, x], )"


def test_model_and_optimizer_held_as_module_globals_are_found(make_module) -> None:  # type: ignore[no-untyped-def]
    name = make_module(
        """
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(512, 512)
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)

        def step(x):
            optimizer.zero_grad(set_to_none=True)
            model(x).sum().backward()
            optimizer.step()
        """
    )
    sys.path.insert(0, os.getcwd())
    module = importlib.import_module(name)
    explained = explain(module.step, torch.ones(64, 512), module=module)
    parameters = FLOAT * (512 * 512 + 512)
    by_category = explained.at_peak.by_category
    assert by_category["parameter"] == parameters
    assert by_category["optimizer_state"] == 2 * parameters + 2 * FLOAT
    assert by_category["input"] == 64 * 512 * FLOAT
    assert explained.freed_before_peak_bytes == parameters  # the warm-up's gradients


# ---- across calls -------------------------------------------------------------------------------


def test_repeated_training_steps_have_equal_numbers_and_no_leak_note() -> None:
    explained = explain(gpt.train_step, *gpt.train_step_inputs(), repeat=3, module=gpt)
    assert len(explained.calls) == 3
    assert len({c.peak_bytes for c in explained.calls}) == 1
    assert len({c.live_at_start_bytes for c in explained.calls}) == 1
    assert [c.growth_bytes for c in explained.calls] == [0, 0, None]
    assert not any("grew" in note for note in explained.notes)


# Slow tier: test_explain_run checks the same growth and note through the command line.
@pytest.mark.slow
def test_live_bytes_growing_from_call_to_call_is_flagged() -> None:
    kept: list[torch.Tensor] = []

    def leaky(x: torch.Tensor) -> None:
        kept.append(x * 2)

    explained = explain(leaky, torch.ones(MiB // FLOAT), repeat=3)
    assert [c.growth_bytes for c in explained.calls] == [MiB, MiB, None]
    assert [c.live_at_start_bytes - explained.calls[0].live_at_start_bytes for c in explained.calls] == [
        0,
        MiB,
        2 * MiB,
    ]
    assert any("grew from one call to the next" in note for note in explained.notes)


def test_optimizer_state_made_in_the_first_call_is_live_at_the_second() -> None:
    raw, explained = profile_calls(gpt.train_step, gpt.train_step_inputs(), warmup=0, repeat=2, module=gpt)
    assert explained is not None
    reconcile(raw, explained)
    parameters = gpt_parameter_bytes(gpt.GPTConfig())
    first, second = explained.calls
    # After the first step: AdamW's state and the gradients (freed by the next zero_grad).
    assert first.growth_bytes == 2 * parameters + FLOAT * GPT_TENSORS + parameters
    assert second.live_at_start_bytes - first.live_at_start_bytes == first.growth_bytes
    assert not any("grew" in note for note in explained.notes)  # lazily made state is no leak


# ---- the tracker's parts ------------------------------------------------------------------------


def test_user_files_are_everything_but_torch_memprof_and_the_standard_library() -> None:
    assert is_user_file(__file__)
    assert is_user_file(gpt.__file__)  # memprof's examples are user code
    assert not is_user_file(torch.nn.functional.__file__)
    assert not is_user_file(inspect.__file__)
    assert not is_user_file(tracking.__file__)
    assert is_user_file("<string>")
    assert not is_user_file("<frozen importlib._bootstrap>")


# ---- every built-in example explains itself ----------------------------------------------------

EXAMPLES = [
    ("activation_checkpointing", "plain_step"),
    ("activation_checkpointing", "checkpointed_step"),
    ("channels_last", "contiguous"),
    ("channels_last", "channels_last"),
    ("checkpoint_load", "full_load"),
    ("checkpoint_load", "mmap_load"),
    ("no_grad", "with_autograd"),
    ("no_grad", "no_grad"),
    ("no_grad", "inference_mode"),
]


@pytest.mark.parametrize(("module_name", "func_name"), EXAMPLES)
def test_built_in_examples_reconcile_and_reproduce_their_peak(module_name: str, func_name: str) -> None:
    module = importlib.import_module(f"memprof.examples.{module_name}")
    made = getattr(module, f"{func_name}_inputs")(device="cpu")
    func = getattr(module, func_name)
    if isinstance(made, dict):
        raw, explained = profile_calls(func, (), made, module=module)
    else:
        raw, explained = profile_calls(func, tuple(made), module=module)
    assert explained is not None
    reconcile(raw, explained)
    assert (explained.at_peak.footprint_bytes, explained.at_peak.peak_bytes) == (
        explained.footprint_bytes,
        explained.peak_bytes,
    ), explained.notes
    if explained.peak_bytes:
        top = made_during(explained)[0]
        assert top.source.startswith("memprof/examples/") and (top.op or top.category == "other"), top
    if func_name == "checkpointed_step":
        # torch.utils.checkpoint saves the CPU RNG state (torch.get_rng_state(), outside any
        # op) for each checkpointed block: "other", on the user's checkpoint line, no op.
        state = torch.get_rng_state()
        other = [e for e in made_during(explained) if e.category == "other"]
        assert other and {(e.source_text, e.op) for e in other} == {
            ("h = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)", "")
        }
        nbytes = state.numel() * state.element_size()
        assert all(e.bytes == e.count * nbytes == e.count * 5_056 for e in other)
    if func_name == "full_load":
        # torch.load makes the checkpoint's storages in Python, outside any op: "other", on the
        # line that called it (not a workspace of the aten::empty that follows).
        expected = ("other", module.CHECKPOINT_BYTES, module.TENSORS, "")
        assert (top.category, top.bytes, top.count, top.op) == expected
        assert top.source_text == 'state = torch.load(path, map_location="cpu", weights_only=True)'


# Slow tier (~7 s): the quick tier has both steps' exact peaks (test_estimate's agreement).
@pytest.mark.slow
def test_checkpointing_keeps_fewer_activations_at_the_peak() -> None:
    from memprof.examples import activation_checkpointing as ac

    plain = explain(ac.plain_step, *ac.step_inputs(), module=ac)
    checkpointed = explain(ac.checkpointed_step, *ac.step_inputs(), module=ac)
    assert checkpointed.at_peak.by_category["activation"] < plain.at_peak.by_category["activation"] / 2


def _reference_read(
    prof: object, device: str
) -> tuple[list[tuple[int, int, int]], list[tuple[str, int, int, int]]]:
    """The allocator records (time, bytes, address) of ``device`` and the backward ops (name,
    start, end, autograd node number), read the plain way: a recursive walk of the event tree
    where a backward op is the first aten op under an ``evaluate_function`` range."""
    records: list[tuple[int, int, int]] = []
    backward: list[tuple[str, int, int, int]] = []

    def visit(node, sequence: int | None, inside: bool) -> None:  # type: ignore[no-untyped-def]
        if node.name == "[memory]":
            if node.extra_fields.device == torch.device(device):
                records.append((node.start_time_ns, node.extra_fields.alloc_size, node.extra_fields.ptr))
            return
        if node.name.startswith("autograd::engine::evaluate_function"):
            sequence, inside = node.extra_fields.sequence_number, False
        elif sequence is not None and not inside and node.name.startswith("aten::"):
            backward.append((node.name, node.start_time_ns, node.end_time_ns, sequence))
            inside = True
        for child in node.children:
            visit(child, sequence, inside)

    for root in prof.profiler.kineto_results.experimental_event_tree():  # type: ignore[attr-defined]
        visit(root, None, False)
    return sorted(records), backward


def test_the_profile_reads_as_a_plain_walk_of_its_event_tree() -> None:
    inputs = gpt.train_step_inputs()
    gpt.train_step(*inputs)
    full = Tracker(inputs, func=gpt.train_step)
    _, prof = _profiled(gpt.train_step, inputs, {}, 2, full)
    records, backward = _reference_read(prof, "cpu")
    assert len(records) > 1000 and len(backward) > 100
    for backward_ops in (False, True):
        read = tree.read_profile(prof, "cpu", backward_ops=backward_ops)
        allocations = read.allocations
        columns = (allocations.time.tolist(), allocations.bytes.tolist(), allocations.ptr.tolist())
        assert sorted(zip(*columns, strict=True)) == records
        assert allocations.time.tolist() == sorted(allocations.time.tolist())
        assert sorted(read.backward) == (sorted(backward) if backward_ops else [])
        assert len(read.calls) == 2 and read.calls == sorted(read.calls)
    assert tree.read_profile(prof, "cuda:0").allocations.time.size == 0


class _Node:
    """A stand-in event-tree node: what the walks read of one."""

    def __init__(self, name: str, start: int, end: int, *children: _Node, device_side: bool = False) -> None:
        self.name, self.start_time_ns, self.end_time_ns = name, start, end
        self.children = list(children)
        self.tag = tree.DEVICE_SIDE if device_side else torch._C._profiler._EventType.TorchOp


def test_a_call_marker_s_gpu_side_span_is_not_a_second_call() -> None:
    # On CUDA every record_function range is in the tree twice: on the host, and as the span
    # of its kernels on the GPU (gpu_user_annotation), which starts and ends later.
    kernel = _Node("triton_poi_fused_add_0", 12, 13)
    wrapper = _Node("graph_0_inductor_wrapper_call", 11, 14, kernel)
    host = _Node(CALL_MARKER, 10, 20, wrapper)
    gpu_kernel = _Node("triton_poi_fused_add_0", 15, 16, device_side=True)
    gpu_wrapper = _Node("graph_0_inductor_wrapper_call", 15, 17, gpu_kernel, device_side=True)
    gpu = _Node(CALL_MARKER, 15, 30, device_side=True)
    roots = [host, gpu, gpu_wrapper]
    memory = tree.MemoryRecords(torch.device("cuda:0"))
    calls: list[tuple[int, int]] = []
    tree.walk_with_context(roots, memory, calls, None, None)  # type: ignore[arg-type]
    assert calls == [(10, 20)]
    calls, found = [], []
    tree.walk_with_context(roots, memory, calls, None, found)  # type: ignore[arg-type]
    assert calls == [(10, 20)]
    assert found == [(0, "triton_poi_fused_add_0", 12, 13, 0)]
