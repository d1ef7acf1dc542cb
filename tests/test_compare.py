"""`memprof compare`: two or more callables side by side, with their own inputs and labels."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from reconcile import assert_json_keeps
from typer.testing import CliRunner

from memprof.core.errors import UsageError
from memprof.frontends.cli import app
from memprof.frontends.commands.compare import parse_labels, split_target
from memprof.library.api import default_labels

# float32 tensors of 1024 and 4096 elements: 4 KiB and 16 KiB from torch's CPU allocator.
TARGETS = textwrap.dedent(
    """
    import torch

    def alloc(n):
        return torch.ones(n)

    def alloc_inputs():
        return 1024

    def make_small():
        return 1024

    def make_big():
        return 4096

    def make_huge():
        return 8192

    def broken(n):
        raise ValueError("broken on purpose")

    def broken_inputs():
        return 1
    """
)


@pytest.fixture
def targets(tmp_path: Path) -> str:
    path = tmp_path / "compare_targets.py"
    path.write_text(TARGETS)
    return str(path)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["compare", *args, "-q"])
    return result.exit_code, result.stdout, result.stderr


def test_per_target_inputs_labels_and_json(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, stdout, _ = invoke(
        f"{targets}:alloc@{targets}:make_small",
        f"{targets}:alloc@{targets}:make_big",
        "--labels",
        "small,big",
        "--json",
        str(out),
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert_json_keeps(report)
    assert list(report["runs"]) == ["small", "big"]
    assert report["runs"]["small"]["peak_bytes"] == 4096
    assert report["runs"]["big"]["peak_bytes"] == 16384
    diff = report["diff"]
    assert (diff["base"], diff["other"]) == ("small", "big")
    assert diff["peak_bytes_delta"] == 12288
    assert diff["peak_ratio"] == 4.0
    assert "diffs" not in report
    # Time next to memory: the medians the runs report, and their ratio.
    walls = report["runs"]["small"]["wall_ms"], report["runs"]["big"]["wall_ms"]
    assert (diff["wall_ms_base"], diff["wall_ms_other"]) == walls
    # The report writes times to 6 decimals (of a millisecond): the ratio of the written
    # times is that of the exact ones within what that rounding moves it.
    assert diff["wall_ratio"] == pytest.approx(walls[1] / walls[0], rel=1e-6 / min(walls) + 1e-9)
    assert diff["summary"].startswith("big vs small: peak +300.0%, wall time ")
    assert "big vs small: peak +300.0%, wall time " in stdout
    assert "wall/call" in stdout


def test_global_inputs_and_default_labels_deduplicated(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, _, _ = invoke(
        f"{targets}:alloc",
        f"{targets}:alloc@{targets}:make_big",
        "--inputs",
        f"{targets}:make_huge",
        "--json",
        str(out),
    )
    assert code == 0
    runs = json.loads(out.read_text())["runs"]
    assert list(runs) == ["alloc", "alloc#2"]
    assert runs["alloc"]["peak_bytes"] == 32768  # --inputs: 8192 floats
    assert runs["alloc#2"]["peak_bytes"] == 16384  # its own @INPUTS wins


def test_three_targets_each_diffed_against_the_first(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, stdout, _ = invoke(
        f"{targets}:alloc@{targets}:make_small",
        f"{targets}:alloc@{targets}:make_big",
        f"{targets}:alloc@{targets}:make_huge",
        "--labels",
        "s,b,h",
        "--json",
        str(out),
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert_json_keeps(report)
    assert list(report["runs"]) == ["s", "b", "h"]
    assert report["diff"]["other"] == "b"
    assert {k: v["peak_bytes_delta"] for k, v in report["diffs"].items()} == {"b": 12288, "h": 28672}
    assert "b vs s: peak +300.0%" in stdout
    assert "h vs s: peak +700.0%" in stdout


def test_default_inputs_factory_of_each_module(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.csv"
    code, _, _ = invoke(f"{targets}:alloc", f"{targets}:alloc", "--csv", str(out))
    assert code == 0
    header, *rows = out.read_text().splitlines()
    assert header.startswith("run,name,")
    assert {row.split(",")[0] for row in rows} == {"alloc", "alloc#2"}


def test_label_count_mismatch_is_a_usage_error(targets: str) -> None:
    code, _, stderr = invoke(f"{targets}:alloc", f"{targets}:alloc", "--labels", "a,b,c")
    assert code == 2
    assert "--labels gives 3 label(s) for 2 targets" in stderr


def test_one_target_is_a_usage_error(targets: str) -> None:
    code, _, stderr = invoke(f"{targets}:alloc")
    assert code == 2
    assert "compare needs two or more targets, got 1" in stderr


def test_missing_target_is_a_usage_error(targets: str) -> None:
    code, _, stderr = invoke(f"{targets}:alloc", f"{targets}:nope")
    assert code == 2
    assert "has no attribute 'nope'" in stderr


def test_failing_target_exits_3_and_keeps_the_other_run(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, _, stderr = invoke(f"{targets}:alloc", f"{targets}:broken", "--json", str(out))
    assert code == 3
    assert "broken raised ValueError: broken on purpose" in stderr
    runs = json.loads(out.read_text())["runs"]
    assert runs["alloc"]["status"] == "ok" and runs["alloc"]["peak_bytes"] == 4096
    assert runs["broken"]["status"] == "failed"


def test_out_creates_a_new_folder(targets: str, tmp_path: Path) -> None:
    folder = tmp_path / "new" / "reports"
    code, _, stderr = invoke(f"{targets}:alloc", f"{targets}:alloc", "--out", str(folder))
    assert code == 0, stderr
    assert sorted(p.name for p in folder.iterdir()) == [
        "memprof-at-peak.csv",
        "memprof-ops.csv",
        "memprof.html",
        "memprof.json",
        "memprof.md",
    ]


def test_out_naming_a_file_fails_before_running(targets: str, tmp_path: Path) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    code, _, stderr = invoke(f"{targets}:alloc", f"{targets}:alloc", "--out", str(a_file))
    assert code == 2
    assert "Traceback" not in stderr and str(a_file) in stderr


def test_run_goes_through_the_same_path(targets: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["run", f"{targets}:alloc", "-q", "--json", str(out)])
    assert result.exit_code == 0
    report = json.loads(out.read_text())
    assert_json_keeps(report)
    assert list(report["runs"]) == ["eager"]
    assert report["runs"]["eager"]["peak_bytes"] == 4096


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mod:f", ("mod:f", None)),
        ("mod:f@mod:make", ("mod:f", "mod:make")),
        ("pkg.mod:obj.f@other.mod:make", ("pkg.mod:obj.f", "other.mod:make")),
        ("dir@v2/file.py:f@dir@v2/inputs.py:make", ("dir@v2/file.py:f", "dir@v2/inputs.py:make")),
    ],
)
def test_split_target(text: str, expected: tuple[str, str | None]) -> None:
    assert split_target(text, None) == expected


def test_split_target_uses_the_default_inputs_only_without_its_own() -> None:
    assert split_target("mod:f", "mod:default") == ("mod:f", "mod:default")
    assert split_target("mod:f@mod:own", "mod:default") == ("mod:f", "mod:own")


def test_labels() -> None:
    assert default_labels(["a:f", "b:f", "c:g", "d:f"]) == ["f", "f#2", "g", "f#3"]
    assert parse_labels(" x , y ", ["a:f", "b:g"]) == ["x", "y"]
    with pytest.raises(UsageError, match="repeats x"):
        parse_labels("x,x", ["a:f", "b:g"])
    with pytest.raises(UsageError, match="empty label"):
        parse_labels("x,", ["a:f", "b:g"])


LABELS = textwrap.dedent(
    """
    import torch

    def alloc(n):
        return torch.empty(n, dtype=torch.uint8)

    def make_100():
        return 100

    def make_300():
        return 300
    """
)


def test_a_run_labelled_delta_keeps_its_own_numbers(tmp_path: Path) -> None:
    # The second run is called "delta": its op peak (300 B) is its own column, never the
    # computed delta (200 B), in the terminal and in the JSON.
    path = tmp_path / "labels_targets.py"
    path.write_text(LABELS)
    out = tmp_path / "report.json"
    code, stdout, _ = invoke(
        f"{path}:alloc@{path}:make_100",
        f"{path}:alloc@{path}:make_300",
        "--labels",
        "base,delta",
        "--json",
        str(out),
    )
    assert code == 0
    table = stdout.split("Top 5 ops by peak bytes, base vs delta:\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == [
        "op",
        "peak",
        "base",
        "peak",
        "delta",
        "delta",
        "self",
        "base",
        "self",
        "delta",
        "note",
    ]
    empty = next(line for line in table if line.startswith("aten::empty "))
    assert empty.split()[1:7] == ["100", "B", "300", "B", "+200", "B"]
    diff = json.loads(out.read_text())["diff"]
    assert (diff["base"], diff["other"]) == ("base", "delta")
    op = next(op for op in diff["ops"] if op["name"] == "aten::empty")
    assert op["base"]["peak_bytes"] == 100 and op["other"]["peak_bytes"] == 300
    assert op["peak_bytes_delta"] == 200
