"""Activation checkpointing's recompute, explained: forward work run again in backward is put
on the module and line being recomputed, with phase ``recompute``, whether the checkpointed
function is a module (its hooks fire again) or a module's own ``forward`` (as Hugging Face's
layers checkpoint it: no hook fires), and compiled backward graphs take the module paths of
the forward graph they belong to."""

from __future__ import annotations

import functools

import torch
from explaining import explain
from test_explain import line_of
from torch import nn
from torch.utils.checkpoint import checkpoint

from memprof.sources.tracking.compiled import backward_pair
from memprof.sources.tracking.modules import checkpointed_module

WIDTH, ROWS = 256, 512
BUFFER = ROWS * WIDTH * 4  # one (512, 256) float32 tensor


class Block(nn.Module):
    """A block that checkpoints its own forward, the way transformers' layers do
    (``partial(forward, self)``: module hooks stay outside the checkpoint)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(functools.partial(Block.inner, self), x, use_reentrant=False)

    def inner(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return torch.sigmoid(h) * h  # the block's own ops, outside any submodule


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.plain = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The second way: a module checkpointed as a whole (its hooks fire when it runs again).
        return checkpoint(self.plain, self.blocks(x), use_reentrant=False)


def step(model: Model, x: torch.Tensor) -> None:
    model(x).sum().backward()


def test_a_checkpointed_forward_is_recomputed_on_its_module_and_line() -> None:
    torch.manual_seed(0)
    model, x = Model(), torch.randn(ROWS, WIDTH, requires_grad=True)
    explained = explain(step, model, x)
    recomputed = [e for e in explained.at_peak.entries if e.phase == "recompute"]
    # Backward of blocks.1 needs its sigmoid again: recomputed, and on blocks.1's own line,
    # not on a module-less line nor on the backward of the model.
    own = [e for e in recomputed if e.op == "aten::sigmoid"]
    assert own and {(e.module, e.source) for e in own} == {
        ("blocks.1", line_of(Block, "return torch.sigmoid(h) * h"))
    }
    assert {e.bytes for e in own} == {BUFFER}
    fc = [e for e in recomputed if e.op == "aten::addmm"]
    assert fc and {e.module for e in fc} <= {"blocks.0.fc", "blocks.1.fc"}
    modules = {(m.module, m.phase): m for m in explained.modules}
    # The block is a recompute call of its own, its submodule's nested in it.
    for block in ("blocks.0", "blocks.1"):
        whole, inner = modules[(block, "recompute")], modules[(f"{block}.fc", "recompute")]
        assert whole.calls == 1 and whole.at_peak_bytes >= inner.at_peak_bytes
    assert modules[("blocks.1", "recompute")].at_peak_bytes >= sum(e.bytes for e in own)
    # A module checkpointed whole: its hooks fire again (one recompute call, not two).
    assert modules[("plain", "recompute")].calls == 1


def torch_block_step(block: nn.Module, x: torch.Tensor) -> None:
    h = checkpoint(block, x, use_reentrant=False)
    h.pow(2).sum().backward()


def test_torch_modules_recomputed_are_on_the_users_backward_line() -> None:
    # torch's own modules have no line of their own: what they recompute is on the user's line
    # that ran backward (memprof's frames between backward and the recompute are passed), not
    # on no line at all.
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH))
    explained = explain(torch_block_step, block, torch.randn(ROWS, WIDTH, requires_grad=True))
    recomputed = [e for e in explained.at_peak.entries if e.phase == "recompute"]
    assert {e.op for e in recomputed} >= {"aten::addmm", "aten::gelu"}
    assert {e.source for e in recomputed} == {line_of(torch_block_step, "h.pow(2).sum().backward()")}


def test_which_module_a_checkpoint_recomputes() -> None:
    block, linear = Block(), nn.Linear(2, 2)

    def recompute_of(fn: object):  # the closure torch.utils.checkpoint makes around ``fn``
        def recompute_fn(*args: object) -> None:
            fn(*args)  # type: ignore[operator]

        return checkpointed_module(recompute_fn)

    assert recompute_of(functools.partial(Block.inner, block)) is block
    assert recompute_of(functools.partial(functools.partial(Block.inner, block))) is block
    assert recompute_of(block.inner) is block
    assert recompute_of(linear.forward) is linear
    # Called as a whole, a module's hooks fire: nothing to add.
    assert recompute_of(linear) is None
    assert recompute_of(linear.__call__) is None
    assert recompute_of(functools.partial(nn.Module.__call__, linear)) is None
    assert recompute_of(torch.relu) is None
    assert recompute_of(functools.partial(torch.add, other=1)) is None
    assert checkpointed_module(lambda: None) is None  # no ``fn`` in its closure


def test_a_backward_graph_pairs_with_the_forward_graph_naming_its_modules() -> None:
    head, blocks = frozenset({"lm_head"}), frozenset({"h.0.attn", "h.0.mlp", "h.1.mlp"})
    forwards = [blocks, head, frozenset()]
    assert backward_pair(forwards, frozenset()) == 2
    assert backward_pair(forwards, head) == 1
    # Backward names other modules than its forward (recomputed work, dropout's gradient, the
    # embedding's), fused differently: the forward sharing the most of them.
    assert backward_pair(forwards, frozenset({"h.0.mlp", "h.0.dropout", "wte"})) == 0
    assert backward_pair([blocks, blocks], blocks) == 1  # the latest: backward runs in reverse
    assert backward_pair([head], frozenset({"wte"})) is None
    assert backward_pair([], head) is None


def test_a_compiled_kernel_is_recompute_when_all_its_work_is() -> None:
    from memprof.sources.tracking.compiled import NodeMeta, kernel_origin

    def node(op: str, recompute: bool) -> NodeMeta:
        return NodeMeta("", "", "", f"aten::{op}", None, recompute)

    # Forward work done again in backward (Inductor marks its nodes).
    assert kernel_origin([node("native_layer_norm", True), node("addmm", True)]).phase == "recompute"
    # A backward kernel that reads recomputed tensors through views, or fuses recomputed work
    # into a gradient, is backward work (its buffers are gradients and backward temporaries).
    assert kernel_origin([node("view", True), node("unbind", True), node("mm", False)]).phase == ""
    assert kernel_origin([node("tanh", True), node("tanh_backward", False)]).phase == ""
    assert kernel_origin([node("view", True)]).phase == "recompute"  # views alone: what they view
