"""Fourth round of hostile cases: every path the system refuses (a name too long, a loop of
links, a file where a folder should be), integers too large for the arrays, CSV cells a
spreadsheet would evaluate, control characters in ``repr``, generators handed to ``track``,
outputs over the running program's own files. Each gets its documented exit code and one line,
never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app

DATA = Path(__file__).parent / "data"
REPORT = DATA / "similarity.json"
LONG = "a" * 300  # one name over the 255 bytes a file system allows


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _refused_paths(tmp_path: Path) -> dict[str, str]:
    """One path per way the system refuses a path."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "file").write_text("x")
    return {
        "name too long": str(tmp_path / f"{LONG}.json"),
        "folder name too long": str(tmp_path / LONG / "x.json"),
        "through a loop of links": str(tmp_path / "loop1" / "x.json"),
        "through a file": str(tmp_path / "file" / "x.json"),
    }


def _one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("memprof: error: "), output
    return lines[0]


@pytest.mark.parametrize("option", ["--json", "--html", "--markdown", "--csv", "--at-peak-csv", "--table"])
@pytest.mark.parametrize(
    "case", ["name too long", "folder name too long", "through a loop of links", "through a file"]
)
def test_every_output_option_refuses_a_path_the_system_refuses_with_exit_2(
    runner: CliRunner, tmp_path: Path, option: str, case: str
) -> None:
    path = _refused_paths(tmp_path)[case]
    result = runner.invoke(app, ["analyze", str(REPORT), option, path])
    assert result.exit_code == 2, result.output
    assert option in _one_error_line(result.output)


@pytest.mark.parametrize(
    "case", ["name too long", "folder name too long", "through a loop of links", "through a file"]
)
def test_an_input_or_baseline_the_system_refuses_is_exit_2(
    runner: CliRunner, tmp_path: Path, case: str
) -> None:
    path = _refused_paths(tmp_path)[case]
    for args in (["analyze", path], ["check", str(REPORT), "--baseline", path], ["diff", path, str(REPORT)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        _one_error_line(result.output)


def test_a_loop_of_links_as_analyze_input_is_named_as_a_loop(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = runner.invoke(app, ["analyze", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert "symbolic links" in _one_error_line(result.output)


def test_an_os_error_of_a_path_that_reaches_the_command_line_is_one_line_and_exit_2(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop: whatever reads or writes a path, the system's refusal of it is a usage error."""
    import errno

    import memprof.recordings

    def refuse(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENAMETOOLONG, "File name too long", "/x/" + LONG)

    monkeypatch.setattr(memprof.recordings, "_read_all", refuse)
    result = runner.invoke(app, ["analyze", str(REPORT)])
    assert result.exit_code == 2
    assert "File name too long" in _one_error_line(result.output)
