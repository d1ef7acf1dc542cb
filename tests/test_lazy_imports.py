"""Commands that do not profile (``--help``, ``parse``, ``check``, rendering a saved report) never
import torch: importing torch alone costs over a second. Rendering a saved report to a file or a
pipe imports no rich either (only a terminal's colours need it), and the HTML report needs no
plotting library at all. The integrations import their framework (transformers, lightning,
IPython) only when imported themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "matplotlib", "rich", "tabulate")
FRAMEWORKS = ("transformers", "lightning", "pytorch_lightning", "IPython")
ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def heavy_modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the heavy modules it left in ``sys.modules``."""
    probe = (
        f"{code}\nimport sys, json\n"
        f"print('\\n' + json.dumps([m for m in {list(HEAVY + FRAMEWORKS)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def heavy_modules_after_cli(*args: str) -> list[str]:
    """Run ``memprof <args>`` in-process of a fresh interpreter (exit code kept); return the heavy
    modules loaded by the time it exits. Add a command's check in one line with this."""
    code = (
        "import sys\n"
        f"sys.argv = ['memprof', *{list(args)!r}]\n"
        "from memprof.frontends.cli import app\n"
        "try:\n"
        "    app(prog_name='memprof')\n"
        "except SystemExit as done:\n"
        "    sys.stderr.write(f'exit {done.code}\\n')\n"
    )
    return heavy_modules_after(code)


@pytest.mark.parametrize(
    "module",
    [
        "memprof",
        "memprof.frontends.cli",
        "memprof.model",
        "memprof.core.units",
        "memprof.analysis.diff",
        "memprof.outputs.terminal",
        "memprof.outputs.notebook",
        "memprof.library.blocks",
        "memprof.integrations",
        "memprof.integrations.steps",
    ],
)
def test_importing_the_light_modules_loads_no_torch(module: str) -> None:
    assert heavy_modules_after(f"import {module}") == []


def test_memprof_track_exists_without_loading_torch() -> None:
    # memprof.track is an attribute of the package; torch loads when a block is profiled.
    assert heavy_modules_after("import memprof\nassert callable(memprof.track)") == []
    assert heavy_modules_after("import memprof\nmemprof.load_ipython_extension") == []


def test_the_notebook_magics_load_ipython_but_no_torch() -> None:
    # %load_ext memprof is quick: torch loads when the magic profiles a cell.
    pytest.importorskip("IPython", reason="IPython is not installed")
    assert heavy_modules_after("import memprof.frontends.ipython") == ["IPython"]


def test_help_loads_no_torch() -> None:
    # typer draws its help with rich.
    assert heavy_modules_after_cli("--help") == ["rich"]


def test_run_help_loads_no_torch() -> None:
    assert heavy_modules_after_cli("run", "--help") == ["rich"]


def test_advise_help_loads_no_torch() -> None:
    assert heavy_modules_after_cli("advise", "--help") == ["rich"]


def test_estimate_help_and_its_gpu_table_load_no_torch() -> None:
    # typer draws its help with rich.
    assert heavy_modules_after_cli("estimate", "--help") == ["rich"]
    assert heavy_modules_after_cli("estimate", "x:y", "--gpu", "list") == []


def test_analyze_reads_a_trace_and_a_snapshot_without_torch(tmp_path: Path) -> None:
    data = ROOT / "tests" / "data" / "gpu"
    trace, snapshot = (
        data / "tracelens_h100_bert_small.json.gz",
        data / "silmont2000_cs336_tiny.snapshot.pickle",
    )
    assert heavy_modules_after_cli("analyze", str(trace), str(snapshot), "-q") == []
    # Its HTML (the chart of allocated and reserved bytes) and Markdown: no plotting library.
    outputs = ["--html", str(tmp_path / "r.html"), "--markdown", str(tmp_path / "r.md")]
    assert heavy_modules_after_cli("analyze", str(trace), str(snapshot), "-q", *outputs) == []
    assert "<svg" in (tmp_path / "r.html").read_text(encoding="utf-8")
    # typer draws its help with rich.
    assert heavy_modules_after_cli("analyze", "--help") == ["rich"]


def modules_after_cli(
    runs: list[list[str]], first: str = "", watched: tuple[str, ...] = ("pandas", "torch")
) -> list[str]:
    """Run ``memprof <args>`` for each of ``runs`` in one fresh interpreter (each must exit 0),
    after the code ``first``; return which of the ``watched`` modules were imported by the end."""
    code = (
        f"import sys\n{first}\n"
        "from memprof.frontends.cli import app\n"
        f"for args in {runs!r}:\n"
        "    try:\n"
        "        app(args, prog_name='memprof')\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, (args, done.code)\n"
        f"print('\\n' + ' '.join(sorted(m for m in {watched!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1].split()


def test_parse_and_check_load_no_pandas(tmp_path: Path) -> None:
    # Both work on plain data: `parse` on memprof.sources.files.table.ParsedTable, `check` on the
    # report model.
    table = str(ROOT / "tests" / "data" / "cpu_memory.txt")
    report = str(ROOT / "tests" / "data" / "similarity.json")
    gpt = [str(ROOT / "tests" / "data" / "gate" / f"gpt-batch{b}.json") for b in (2, 4)]
    runs = [
        ["parse", table],
        ["parse", table, "--csv", str(tmp_path / "t.csv"), "--json", str(tmp_path / "t.json")],
        ["check", report, "--budget", "1GB"],
        # `diff` of two explained reports, gated (the peak shrank: exit 0), with every file it writes.
        ["diff", gpt[1], gpt[0], "--tolerance", "5%", "--markdown", str(tmp_path / "d.md"),
         "--html", str(tmp_path / "d.html"), "--json", str(tmp_path / "d.json")],
    ]  # fmt: skip
    assert modules_after_cli(runs) == []
    assert (tmp_path / "t.csv").read_text(encoding="utf-8").startswith("name,")
    assert modules_after_cli(runs[:1], first="import pandas") == ["pandas"]  # the probe sees it


def test_a_profiled_run_loads_no_pandas(tmp_path: Path) -> None:
    """A run's analysis groups ops without pandas (importing it costs a quarter of a second):
    explained or not, and with its report files; only ``run.ops``, asked for, builds a DataFrame."""
    (tmp_path / "step.py").write_text(
        "import torch\n\ndef step(x):\n    return (x * 2).sum()\n\n"
        "def step_inputs():\n    return (torch.ones(1000),)\n"
    )
    target = f"{tmp_path / 'step.py'}:step"
    outputs = ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")]
    runs = [
        ["run", target, "-q", "--time-budget", "0", "--no-explain"],
        ["run", target, "-q", "--time-budget", "0", "--html", str(tmp_path / "r.html"), *outputs],
    ]
    assert modules_after_cli(runs) == ["torch"]


def test_an_explained_run_of_code_that_compiles_nothing_loads_no_torch_compile(tmp_path: Path) -> None:
    """torch.compile's packages (``torch._dynamo``, ``torch._inductor``: over a second to import,
    ``scripts/bench_phases.py`` part 3) are
    loaded by the code a run profiles, or by ``--compare-compile``; not by memprof's profiler
    sessions (``torch.profiler.profile`` imports them at each start) nor by its op tracker."""
    (tmp_path / "step.py").write_text(
        "import torch\n\ndef step(x):\n    return (x * 2).sum()\n\n"
        "def step_inputs():\n    return (torch.ones(1000),)\n"
    )
    runs = [["run", f"{tmp_path / 'step.py'}:step", "-q", "--time-budget", "0"]]
    watched = ("torch", "torch._dynamo", "torch._inductor")
    assert modules_after_cli(runs, watched=watched) == ["torch"]
    assert modules_after_cli(runs, first="import torch._dynamo", watched=watched) == [
        "torch",
        "torch._dynamo",
        "torch._inductor",
    ]  # the probe sees them


def test_rendering_a_saved_report_loads_no_torch(tmp_path: Path) -> None:
    report = {
        "schema_version": 1,
        "target": "pkg.mod:fn",
        "device": "cpu",
        "runs": {
            "eager": {
                "peak_bytes": 1024,
                "ops": [{"name": "aten::empty", "calls": 1, "self_bytes": 1024, "peak_bytes": 1024}],
            }
        },
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    code = (
        "from memprof.pipeline import load_report\n"
        "from memprof.outputs import renderer\n"
        "from memprof.outputs.terminal import render_terminal\n"
        f"report = load_report({str(path)!r})\n"
        "assert '1.0 KiB' in render_terminal(report)\n"
        "renderer('json')(report); renderer('csv')(report)\n"
        "renderer('html')(report); renderer('markdown')(report)\n"
        "import io, sys; sys.stdout = io.StringIO()\n"
        "from memprof.outputs.terminal import print_terminal; print_terminal(report)\n"
        "sys.stdout = sys.__stdout__\n"
    )
    assert heavy_modules_after(code) == []


# Slow tier (a fresh interpreter importing torch): the probe's own check, not memprof's.
@pytest.mark.slow
def test_the_probe_sees_torch_when_it_is_imported() -> None:
    # The helper itself must be able to fail.
    assert heavy_modules_after("import torch") == ["torch"]
