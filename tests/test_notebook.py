"""Notebooks: ``%load_ext memprof`` and the ``%%memprof`` / ``%memprof`` magics, run through a
real IPython shell; and the HTML report's colours in notebook themes (light and dark, JupyterLab,
VS Code, Colab)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memprof.model import Report
from memprof.outputs.html import THEME_CSS
from memprof.outputs.notebook import notebook_css, notebook_html
from memprof.pipeline import load_report

MiB = 1024 * 1024


# ---- the report's colours in a notebook -----------------------------------------------------------


def declarations(block: str) -> dict[str, str]:
    return dict(re.findall(r"(--mp-[a-z0-9-]+)\s*:\s*([^;]+?)\s*(?:;|$)", block))


def rules(css: str) -> list[tuple[str, str]]:
    """(selector list, declarations) of each rule, comments and @media wrappers left out."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [(selector.strip(), body) for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)]


def palette(selector_part: str) -> dict[str, str]:
    """The colours the first notebook rule whose selectors contain ``selector_part`` sets."""
    return next(declarations(body) for selector, body in rules(notebook_css()) if selector_part in selector)


def test_notebook_themes_set_every_colour_of_the_report_light_or_dark() -> None:
    light, dark = (declarations(block) for block in THEME_CSS.split("@media"))
    assert len(light) == len(dark) >= 16
    for theme in ('data-jp-theme-light="false"', "body.vscode-dark", 'html[theme="dark"]'):
        assert palette(theme) == dark, theme
    for theme in ('data-jp-theme-light="true"', "body.vscode-light", 'html[theme="light"]'):
        assert palette(theme) == light, theme


def test_notebook_themes_lend_the_report_their_own_surface_and_text() -> None:
    surfaces = [declarations(body) for selector, body in rules(notebook_css()) if "var(--" in body]
    jupyter_dark, jupyter_light, vscode_dark, vscode_light = surfaces
    assert jupyter_dark["--mp-bg"] == "var(--jp-layout-color0, #16181c)"
    assert jupyter_light["--mp-fg"] == "var(--jp-content-font-color1, #1b1b1b)"
    assert vscode_dark["--mp-bg"] == "var(--vscode-editor-background, #16181c)"
    assert vscode_light["--mp-fg"] == "var(--vscode-editor-foreground, #1b1b1b)"


def test_the_notebook_fragment_brings_the_themes_after_the_reports_own_style(single_report: Report) -> None:
    fragment = notebook_html(single_report)
    assert fragment.startswith("<style>\n.memprof-report{")
    assert fragment.endswith(f"<style>{notebook_css()}</style>")
    assert fragment.count("<style>") == 2


# ---- the magics ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    pytest.importorskip("IPython", reason="IPython is not installed (pip install 'torch-memprof[notebook]')")
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "memprof")
    assert ip.run_cell("import torch").success
    yield ip
    InteractiveShell.clear_instance()


def test_a_report_displays_as_its_html_report_in_ipython(shell: Any, single_report: Report) -> None:
    # IPython's own formatter, as a notebook asks it: the front end registered the report's
    # HTML (the model has no _repr_html_ of its own).
    data, _ = shell.display_formatter.format(single_report)
    assert data["text/html"] == notebook_html(single_report)
    assert not hasattr(single_report, "_repr_html_")


_IMPORTED_IN_IPYTHON = """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
from memprof.pipeline import load_report  # imports memprof: no %load_ext
data, _ = shell.display_formatter.format(load_report(REPORT))
from memprof.outputs.notebook import notebook_html
print(data.get("text/html") == notebook_html(load_report(REPORT)))
"""


def test_importing_memprof_in_ipython_shows_reports_as_html(tmp_path: Path, single_report: Report) -> None:
    import subprocess
    import sys

    pytest.importorskip("IPython", reason="IPython is not installed (pip install 'torch-memprof[notebook]')")
    path = tmp_path / "r.json"
    path.write_text(single_report.to_json())
    root = str(Path(__file__).resolve().parents[1])
    code = _IMPORTED_IN_IPYTHON.replace("REPORT", repr(str(path)))
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert done.stdout == "True\n", done.stderr


def run(shell: Any, cell: str) -> tuple[Any, Any]:
    """Run ``cell``; its result and what it displayed."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, captured


def test_a_cell_is_profiled_written_and_shown(shell: Any, tmp_path: Path) -> None:
    path = tmp_path / "cell.json"
    result, shown = run(shell, f"%%memprof --json {path}\nx = torch.ones(25 * 2**20 // 4)\nx.numel()")
    assert result.success and result.result == 25 * MiB // 4  # the cell's last value, returned
    report = load_report(path)
    assert report.runs["cell"].peak_bytes == 25 * MiB
    assert report.target.startswith("notebook cell [")
    html = shown.outputs[0].data["text/html"]
    assert 'class="memprof-report"' in html and notebook_css() in html
    assert shell.user_ns["_memprof_report"].base.peak_bytes == 25 * MiB
    assert shell.user_ns["x"].numel() == 25 * MiB // 4
    at_peak = shell.user_ns["_memprof_report"].base.at_peak
    entries = [(e.source_text, e.bytes) for e in at_peak.entries]
    assert entries == [("x = torch.ones(25 * 2**20 // 4)", 25 * MiB)]


def test_a_line_is_profiled_with_the_options(shell: Any, tmp_path: Path) -> None:
    paths = [tmp_path / name for name in ("line.json", "line.html", "line.md")]
    files = f"--json {paths[0]} --html {paths[1]} --markdown {paths[2]}"
    options = f"{files} --device cpu --no-explain --label one"
    result, shown = run(shell, f"%memprof {options} y = torch.zeros(2**20 // 4)")
    assert result.success, result.error_in_exec
    report = load_report(paths[0])
    assert report.device == "cpu" and list(report.runs) == ["one"]
    assert report.runs["one"].peak_bytes == MiB and report.runs["one"].at_peak is None
    assert all(path.is_file() for path in paths)
    assert shell.user_ns["y"].numel() == 2**20 // 4
    quiet, shown = run(shell, "%memprof --quiet z = torch.zeros(4)")
    assert quiet.success and shown.outputs == []


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%memprof --device tpu\nx = 1", "--device 'tpu' is not a device; use auto, cpu, cuda or cuda:N"),
        ("%%memprof --bogus\nx = 1", "%%memprof: unknown option(s) --bogus; see %%memprof?"),
        ("%memprof", "%memprof needs a statement to profile (%memprof y = f(x)); %%memprof profiles a cell"),
        ("%%memprof --json /no/such/folder/r.json\nx = 1", "--json '/no/such/folder/r.json': folder"),
    ],
)
def test_bad_options_are_one_line_usage_errors(shell: Any, cell: str, message: str) -> None:
    from IPython.core.error import UsageError

    result, shown = run(shell, cell)
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec).startswith(message)
    assert "Traceback" not in shown.stdout + shown.stderr


def test_a_failing_cell_shows_its_report_then_its_error(shell: Any) -> None:
    result, shown = run(shell, "%%memprof\nw = torch.ones(2**20 // 4)\nraise ValueError('boom')")
    assert isinstance(result.error_in_exec, ValueError)
    assert "text/html" in shown.outputs[0].data
    report = shell.user_ns["_memprof_report"]
    assert report.base.peak_bytes == MiB
    assert "the block raised ValueError: boom: the numbers cover it up to the failure" in report.base.notes
