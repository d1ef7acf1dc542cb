"""Usage mistakes in a target and its inputs are answered from the source, before torch loads,
with the very message that resolving the target and building its inputs gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memprof.core.errors import EXIT_USAGE, MemprofError, spelled_as
from memprof.frontends.commands.groups import cli_spelling, with_option_groups
from memprof.frontends.commands.run import run
from memprof.sources.targets import target as targets
from memprof.sources.targets.check import check_before_running

ROOT = Path(__file__).resolve().parents[1]

TRAIN = """
    import torch
    from torch import ones  # another module's function: never suggested

    def step(model, batch):
        return model(batch)

    def make_batch(batch=8, seq=4, device="cpu"):
        return torch.nn.Identity(), torch.ones(batch, seq, device=device)

    def get_batch():  # one tensor: step takes two arguments, so never suggested
        return torch.ones(2)

    def no_args():
        return torch.ones(2)
"""

# Two models in one file, each with a factory named after it; one more factory elsewhere.
MODELS = """
    import torch

    def bert_inputs():
        return torch.nn.Identity(), torch.ones(2, 8, dtype=torch.long)

    def bert_step(model, ids):
        return model(ids)

    def make_bert_step():
        return [torch.nn.Identity(), torch.ones(2, 8, dtype=torch.long)]

    def get_batch():
        batch = (torch.nn.Identity(), torch.ones(2, 8))
        return batch

    def vit_step(model, pixels):
        return model(pixels)

    def vit_inputs():
        return {"model": torch.nn.Identity(), "pixels": torch.ones(2, 3, 32, 32)}
"""

WITH_DEFAULT_FACTORY = """
    import torch

    def step(x):
        return x * 2

    def step_inputs(batch=8, *, seq=4):
        return (torch.ones(batch, seq),)
"""

# (files to write, target, --inputs, --set values, the message)
MISTAKES = [
    pytest.param(
        {"train.py": TRAIN},
        "train.py:step",
        None,
        {},
        "'train.py:step' needs arguments (model, batch): give them with --inputs train.py:make_batch, or "
        "define step_inputs() in train.py",
        id="no inputs factory",
    ),
    pytest.param(
        {
            "mytrain.py": """
                import torch
                from torch import nn

                def make_model():
                    model = nn.Linear(8, 8)
                    return model

                def make_batch(n=4):
                    return torch.randn(n, 8)

                def step(model, x):
                    return model(x).sum()
                """
        },
        "mytrain.py:step",
        None,
        {},
        "'mytrain.py:step' needs arguments (model, x): give a function that returns them with "
        "--inputs mytrain.py:FACTORY, or define step_inputs() in mytrain.py",
        id="factories that return one value, for a target of two arguments",
    ),
    pytest.param(
        {"models.py": MODELS},
        "models:vit_step",
        None,
        {},
        "'models:vit_step' needs arguments (model, pixels): give them with --inputs models:vit_inputs or "
        "--inputs models:get_batch or --inputs models:make_bert_step, or define vit_step_inputs() in models",
        id="factories named after the target first",
    ),
    pytest.param(
        {"models.py": MODELS},
        "models.py:bert_step",
        None,
        {},
        "'models.py:bert_step' needs arguments (model, ids): give them with --inputs "
        "models.py:make_bert_step or --inputs models.py:bert_inputs or --inputs models.py:get_batch, or "
        "define bert_step_inputs() in models.py",
        id="a factory named for the whole target first",
    ),
    pytest.param(
        {"plain.py": "import torch\n\ndef step(model, batch):\n    return model(batch)\n"},
        "plain:step",
        None,
        {},
        "'plain:step' needs arguments (model, batch): give a function that returns them with "
        "--inputs plain:FACTORY, or define step_inputs() in plain",
        id="no factory anywhere",
    ),
    pytest.param(
        {"train.py": TRAIN},
        "train.py:step",
        "train.py:make_batch",
        {"bacth": 32},
        "inputs factory 'train.py:make_batch' has no parameter bacth; it takes batch, seq",
        id="--set misspelled",
    ),
    pytest.param(
        {"model.py": WITH_DEFAULT_FACTORY},
        "model:step",
        None,
        {"batch": 4, "sqe": 3},
        "inputs factory 'model:step_inputs' has no parameter sqe; it takes batch, seq",
        id="--set for the default factory",
    ),
    pytest.param(
        {"model.py": WITH_DEFAULT_FACTORY},
        "model:step",
        None,
        {"device": "cuda"},
        "the inputs factory's device is memprof's to set (--device); remove device from --set",
        id="--set device",
    ),
    pytest.param(
        {"train.py": TRAIN},
        "train.py:no_args",
        None,
        {"batch": 4},
        "'train.py:no_args' takes no arguments, so there is no inputs factory to give batch to; name one "
        "with --inputs",
        id="--set without a factory",
    ),
    pytest.param(
        {"train.py": TRAIN},
        "train.py:stpe",
        None,
        {},
        "'train.py' has no attribute 'stpe'; did you mean 'step'?",
        id="function misspelled",
    ),
    pytest.param(
        {"train.py": TRAIN},
        "train:step",
        "train:make_bath",
        {},
        "'train' has no attribute 'make_bath'; did you mean 'make_batch', 'get_batch'?",
        id="factory misspelled",
    ),
    pytest.param(
        {"pkg/__init__.py": "import torch\n", "pkg/model.py": TRAIN},
        "pkg.modle:step",
        None,
        {},
        "module 'pkg.modle' not found (searched the working directory {cwd} and PYTHONPATH); check the "
        "spelling of 'pkg.modle:step' or run from the folder that holds it",
        id="submodule misspelled",
    ),
    pytest.param(
        {"train.py": TRAIN},
        "trian:step",
        None,
        {},
        "module 'trian' not found (searched the working directory {cwd} and PYTHONPATH); check the "
        "spelling of 'trian:step' or run from the folder that holds it",
        id="module misspelled",
    ),
]

MESSAGES = {case.id: case.values[4] for case in MISTAKES}


def write(folder: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def resolved_message(target: str, inputs: str | None, params: dict[str, Any]) -> str:
    """What resolving the target and building its inputs says (the module imported, torch too)."""
    with pytest.raises(MemprofError) as caught:
        targets.build_inputs(targets.resolve(target), inputs, "cpu", params)
    assert caught.value.exit_code == EXIT_USAGE
    return caught.value.message


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A working directory whose modules are forgotten afterwards (each test imports its own)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("train", "plain", "model", "pkg", "models", "mytrain"):
            del sys.modules[name]


@pytest.mark.parametrize(("files", "target", "inputs", "params", "message"), MISTAKES)
def test_the_source_settles_it_with_the_message_resolving_gives(
    folder, files, target, inputs, params, message
) -> None:
    write(folder, files)
    expected = message.format(cwd=folder)
    with spelled_as(cli_spelling(with_option_groups(run))):  # messages name flags, as on the command line
        with pytest.raises(MemprofError) as caught:
            check_before_running(target, inputs, params)
        assert caught.value.exit_code == EXIT_USAGE
        assert caught.value.message == expected
        assert resolved_message(target, inputs, params) == expected


def memprof_fresh(folder: Path, *args: str) -> tuple[int, str, bool]:
    """``memprof ARGS`` in a fresh interpreter: its exit code, stderr, and whether torch loaded."""
    code = (
        "import sys, json\n"
        f"sys.argv = ['memprof', *{list(args)!r}]\n"
        "from memprof.frontends.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    sys.stderr.write('\\n' + json.dumps([done.code, 'torch' in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    *lines, last = done.stderr.rstrip("\n").split("\n")
    exit_code, torch_loaded = json.loads(last)
    return exit_code, "\n".join(lines).strip("\n"), torch_loaded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train.py:step"], MESSAGES["no inputs factory"]),
        (
            ["train.py:step", "--inputs", "train.py:make_batch", "--set", "bacth=32"],
            MESSAGES["--set misspelled"],
        ),
        (["trian:step"], MESSAGES["module misspelled"]),
    ],
    ids=["no inputs factory", "--set misspelled", "module misspelled"],
)
def test_the_command_line_answers_before_torch_loads(tmp_path: Path, args: list[str], message: str) -> None:
    write(tmp_path, {"train.py": TRAIN})
    exit_code, stderr, torch_loaded = memprof_fresh(tmp_path, "run", *args, "-q")
    assert exit_code == 2
    assert stderr == f"memprof: error: {message.format(cwd=tmp_path)}"
    assert not torch_loaded


# Sources that leave the answer open: the check says nothing, and the run decides.
OPEN = {
    "a factory defined under a condition": """
        import os
        def step(x):
            return x
        if os.environ.get("BIG"):
            def step_inputs():
                return (1,)
        """,
    "a star import": "from os.path import *\ndef step(x):\n    return x\n",
    "a module __getattr__": "def step(x):\n    return x\ndef __getattr__(name):\n    return step\n",
    "globals() written": "def step(x):\n    return x\nglobals()['step_inputs'] = lambda: (1,)\n",
    "setattr on the module": (
        "import sys\ndef step(x):\n    return x\nsetattr(sys.modules[__name__], 'stpe', step)\n"
    ),
    "a decorated target": "import functools\n@functools.lru_cache\ndef step(x):\n    return x\n",
    "a generator target": "def step(x):\n    yield x\n",
    "a name bound twice": "def step(x):\n    return x\nstep = step\n",
    "a candidate factory that is decorated": """
        import functools
        def step(x):
            return x
        @functools.cache
        def make_batch():
            return (1,)
        """,
    "a global statement": (
        "def step(x):\n    return x\ndef setup():\n    global step_inputs\n    step_inputs = lambda: (1,)\n"
    ),
    "a syntax error": "def step(x:\n",
}


@pytest.mark.parametrize("source", OPEN.values(), ids=OPEN.keys())
def test_what_the_source_leaves_open_is_left_to_the_run(folder, source: str) -> None:
    write(folder, {"open_case.py": source})
    check_before_running("open_case.py:step", None, {})
    check_before_running("open_case:stpe" if "setattr" in source else "open_case:step", None, {})


def test_a_name_bound_in_a_branch_is_not_called_missing(folder) -> None:
    write(folder, {"branchy.py": "try:\n    from fast import step\nexcept ImportError:\n    step = None\n"})
    check_before_running("branchy.py:step", None, {})  # may exist: the run decides
    check_before_running("branchy.py:stop", None, {})  # whether 'step' is suggested: the run decides
    with pytest.raises(MemprofError) as caught:
        check_before_running("branchy.py:train", None, {})  # missing, and nothing close either way
    assert caught.value.message == "'branchy.py' has no attribute 'train'"


def test_a_method_target_is_checked_up_to_its_object(folder) -> None:
    write(folder, {"holder.py": "class Model:\n    def forward(self, x):\n        return x\n"})
    check_before_running("holder.py:Model.forward", None, {})
    check_before_running("holder.py:Model.nothing", None, {})  # the run looks the attribute up
    with pytest.raises(MemprofError, match="'holder.py' has no attribute 'Modle'; did you mean 'Model'"):
        check_before_running("holder.py:Modle.forward", None, {})


def test_a_misspelled_function_is_named_before_its_module_runs(folder) -> None:
    # The module would fail to import (exit 3 once the name is right); the misspelling comes first.
    write(folder, {"failing.py": "raise RuntimeError('boom at import')\n\ndef step():\n    pass\n"})
    with pytest.raises(MemprofError) as caught:
        check_before_running("failing.py:stpe", None, {})
    assert caught.value.message == "'failing.py' has no attribute 'stpe'; did you mean 'step'?"
    check_before_running("failing.py:step", None, {})  # the name is right: the import decides


def test_factories_named_after_the_target_or_defined_near_it_come_first() -> None:
    rank = targets.rank_factories
    found = [("bert_inputs", 3), ("vit_inputs", 40), ("make_batch", 20), ("get_vit_step", 90)]
    # Named after the target (its name once the factory words are off), then sharing a word of
    # it, then nearest, then by name.
    assert rank("vit_step", 30, found) == ["get_vit_step", "vit_inputs", "make_batch", "bert_inputs"]
    assert rank("bert_step", 30, found) == ["bert_inputs", "make_batch", "vit_inputs", "get_vit_step"]
    assert rank("step", None, found) == ["bert_inputs", "get_vit_step", "make_batch", "vit_inputs"]
    assert rank("train_bert_layer", 0, [("bert_batch", 50), ("bert_layer_batch", 60)]) == [
        "bert_layer_batch",  # shares two words
        "bert_batch",
    ]


def test_a_file_named_without_a_function_lists_its_functions_and_their_factories(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": TRAIN})
    exit_code, stderr, torch_loaded = memprof_fresh(tmp_path, "run", "train.py", "-q")
    assert exit_code == 2 and not torch_loaded
    assert stderr == (
        "memprof: error: target 'train.py' names a file, not a function in it: name one as "
        "'train.py:step'; its functions: step (inputs make_batch), no_args (no arguments). To profile a "
        "block of a script where it runs (a training loop), wrap it in `with memprof.track(model=model, "
        "optimizer=optimizer):` (docs/guides/track.md)"
    )


@pytest.mark.parametrize(
    ("body", "returned"),
    [
        ("return model, x", 2),
        ("return [model, x, y]", 3),
        ("return {'model': model, 'x': x}", frozenset({"model", "x"})),
        ("batch = (model, x)\n    return batch", 2),
        ("return Net().to(device)", 1),
        ("return torch.randn(4, 8)", 1),
        ("return 8", 1),
        ("model = nn.Linear(8, 8)\n    return model", 1),
        ("return next(iter(loader))", None),  # may be a tuple: left open
        ("return (*parts,)", None),
        ("return {**kwargs}", None),
    ],
)
def test_what_a_factory_returns_is_read_from_its_source(body: str, returned: object) -> None:
    import ast

    from memprof.sources.targets.factory_fit import returns_of

    node = ast.parse(f"def make():\n    {body}\n").body[0]
    assert isinstance(node, ast.FunctionDef)
    assert returns_of(node) == (returned,)


def test_a_factory_fits_when_its_value_fills_the_arguments() -> None:
    from memprof.sources.targets.factory_fit import signature_of

    def step(model, x, scale=1.0):  # type: ignore[no-untyped-def]
        return model, x, scale

    signature = signature_of(step)
    assert signature is not None
    assert [signature.takes(n) for n in (1, 2, 3, 4)] == [False, True, True, False]
    assert signature.takes(frozenset({"model", "x"})) is True
    assert signature.takes(frozenset({"model"})) is False
    assert signature.takes(frozenset({"model", "x", "batch"})) is False  # step takes no batch
    assert signature.filled_by((2, None)) is None and signature.filled_by((2, 1)) is False
