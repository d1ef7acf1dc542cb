"""`memprof parse`: exit codes, messages, outputs, through typer's CliRunner."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.frontends.cli import app

DATA = Path(__file__).parent / "data"
CPU_TABLE = DATA / "cpu_memory.txt"
TWO_TABLES = DATA / "two_tables.log"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _bad_row_table(tmp_path: Path) -> tuple[Path, int]:
    lines = CPU_TABLE.read_text().split("\n")
    line = next(k for k, text in enumerate(lines) if "aten::mm" in text)
    lines[line] = lines[line].replace("100.00 KB", "100.00 QB", 1)
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines))
    return path, line + 1


def test_prints_the_parsed_table(runner: CliRunner) -> None:
    result = runner.invoke(app, ["parse", str(CPU_TABLE)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "name",
        "self_cpu_pct",
        "self_cpu_us",
        "cpu_total_pct",
        "cpu_total_us",
        "cpu_time_avg_us",
        "cpu_mem_bytes",
        "self_cpu_mem_bytes",
        "calls",
    ]
    assert any(line.startswith("my block: matmul & sum <fp32> ") for line in lines)
    assert any(line.startswith("[memory]") and "-1.5 MiB" in line for line in lines)
    assert lines[-2] == "self_cpu_time_total_us: 663.833"
    assert lines[-1] == "13 rows from table 0 (header at line 2)"


def test_reads_standard_input(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "ops.csv"
    result = runner.invoke(app, ["parse", "-", "--csv", str(out)], input=CPU_TABLE.read_text())
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == f"memprof: wrote 13 rows to {out}\n"
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 13
    assert rows[0]["name"] == "aten::empty" and rows[0]["cpu_mem_bytes"] == "1426063"
    assert rows[0]["name_truncated"] == "False" and rows[0]["calls"] == "3"


def test_writes_json_with_totals_and_nulls(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "ops.json"
    result = runner.invoke(app, ["parse", str(DATA / "top_level_flops.txt"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["schema_version"] == 1 and document["kind"] == "torch_table"
    assert document["totals"] == {"self_cpu_time_total_us": 697.908}
    assert document["table"]["top_level_only"] is True
    assert document["columns"][:2] == ["name", "name_truncated"]
    first = document["rows"][0]
    assert list(first) == document["columns"]
    assert first["name"] == "aten::ones" and first["total_flops"] is None
    assert first["cpu_mem_bytes"] == 1024000


def test_csv_and_json_together(runner: CliRunner, tmp_path: Path) -> None:
    csv_out, json_out = tmp_path / "a.csv", tmp_path / "a.json"
    args = ["parse", str(TWO_TABLES), "--table-index", "1", "--csv", str(csv_out)]
    result = runner.invoke(app, [*args, "--json", str(json_out)])
    assert result.exit_code == 0, result.output
    assert [r["name"] for r in csv.DictReader(csv_out.open())] == [
        "aten::fill_",
        "aten::mm",
        "my block: matmul & sum <fp3",
    ]
    assert json.loads(json_out.read_text())["table"]["header_line"] == 18


def test_several_tables_without_an_index_is_exit_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["parse", str(TWO_TABLES)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: {TWO_TABLES}: found 2 profiler tables (header lines 5, 18); choose "
        "one with --table-index 0 to 1\n"
    )


def test_table_index_out_of_range_is_exit_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["parse", str(TWO_TABLES), "--table-index", "7"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: {TWO_TABLES}: table index 7 is out of range: found 2 profiler tables "
        "(header lines 5, 18); use 0 to 1, or -1 for the last\n"
    )
    result = runner.invoke(app, ["parse", str(TWO_TABLES), "--table-index", "-1"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == "3 rows from table 1 (header at line 18)"


def test_no_table_is_exit_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["parse", "-"], input="just a log\nnothing here\n")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "memprof: error: standard input: no torch profiler table found: expected a dash line"
    )


def test_missing_file_is_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    result = runner.invoke(app, ["parse", str(missing)])
    assert result.exit_code == 2
    assert result.stderr == f"memprof: error: input {str(missing)!r} does not exist\n"


def test_bad_row_is_exit_2_with_line_and_expectation(runner: CliRunner, tmp_path: Path) -> None:
    path, line = _bad_row_table(tmp_path)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["parse", str(path), "--json", str(out)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"memprof: error: {path}: line {line}: column 'CPU Mem' should be a size like "
        "'244.14 MB', '-1.00 KB' or '40 B' but is '100.00 QB'; --lenient skips bad rows\n"
    )
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]  # no temporary file left


def test_a_log_line_inside_the_table_is_not_a_row(runner: CliRunner) -> None:
    lines = CPU_TABLE.read_text().split("\n")
    lines[4] = "loss=0.25"
    result = runner.invoke(app, ["parse", "-"], input="\n".join(lines))
    assert result.exit_code == 2
    assert result.stderr == (
        "memprof: error: standard input: line 5: not a table row: there is text only under "
        "Name; expected the 9 columns of the header at line 2 (Name, Self CPU %, Self CPU, "
        "CPU total %, CPU total, CPU time avg, CPU Mem, Self CPU Mem, # of Calls); "
        "--lenient skips bad rows\n"
    )


def test_lenient_skips_bad_rows_with_a_warning_each(runner: CliRunner, tmp_path: Path) -> None:
    path, line = _bad_row_table(tmp_path)
    out = tmp_path / "out.csv"
    result = runner.invoke(app, ["parse", str(path), "--lenient", "--csv", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"memprof: warning: {path}: line {line}: skipped: column 'CPU Mem' should be a size "
        "like '244.14 MB', '-1.00 KB' or '40 B' but is '100.00 QB'",
        f"memprof: wrote 12 rows to {out}",
    ]
    names = [r["name"] for r in csv.DictReader(out.open())]
    assert "aten::mm" not in names and len(names) == 12


def test_output_paths_are_checked_before_reading(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "missing-folder" / "ops.csv"
    result = runner.invoke(app, ["parse", str(tmp_path / "no-input.txt"), "--csv", str(out)])
    assert result.exit_code == 2
    assert "folder" in result.stderr and "does not exist; create it first" in result.stderr
    same = tmp_path / "x.out"
    result = runner.invoke(app, ["parse", str(CPU_TABLE), "--csv", str(same), "--json", str(same)])
    assert result.exit_code == 2
    assert "--csv and --json both write" in result.stderr
    assert not same.exists()


def test_help_explains_with_an_example(runner: CliRunner) -> None:
    result = runner.invoke(app, ["parse", "--help"])
    assert result.exit_code == 0
    assert "memprof parse train.log --table-index -1 --csv ops.csv" in result.stdout
    for option in ("--csv", "--json", "--table-index", "--lenient"):
        assert option in result.stdout


def test_parse_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from memprof.frontends.cli import app;"
        f"r = CliRunner().invoke(app, ['parse', {str(CPU_TABLE)!r}]);"
        "assert r.exit_code == 0, r.output; assert 'torch' not in sys.modules"
    )
    root = Path(__file__).parent.parent
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
