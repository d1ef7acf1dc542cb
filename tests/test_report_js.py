"""The HTML report's scripts outside a browser: ``node --test tests/js`` (what they compute:
sizes, time ticks, the point under the mouse, the order of sorted cells), and the same
functions checked against memprof's Python for many values, so that a size on hover reads as
the table beside it does. Skipped where no ``node`` (18 or later) is installed."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from memprof.core.units import format_bytes
from memprof.outputs.chart import format_tick_ms, nice_ticks

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="no node on PATH (the script tests need node 18+)")


def node(script: str) -> str:
    assert NODE is not None
    result = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_scripts_pass_their_own_tests() -> None:
    assert NODE is not None
    result = subprocess.run(
        [NODE, "--test", "tests/js/"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "# fail 0" in result.stdout and "# pass 4" in result.stdout


def test_sizes_and_ticks_are_written_as_python_writes_them() -> None:
    rng = random.Random(7)
    sizes = [0, 1, 1023, 1024, 1280, 1792, 2560, 834_000_000, 2**40 * 3, -(2**21), -1536]
    sizes += [rng.randrange(-(2**45), 2**45) for _ in range(300)]
    sizes += [k * 1024**e // 20 for k in range(1, 60) for e in (1, 2, 3)]  # many ties at .x5
    ranges = [(0.0, 4.0), (1.0, 3.0), (0.0, 0.004), (0.123, 0.987), (0.0, 1234.5), (17.0, 17.0)]
    ranges += [(0.0, rng.uniform(1e-3, 1e4)) for _ in range(100)]
    script = (
        "const f = require('./memprof/outputs/assets/format.js');"
        f"const sizes = {json.dumps(sizes)}, ranges = {json.dumps(ranges)};"
        "const ticks = ranges.map(([lo, hi]) => { const t = f.ticks(lo, hi, 6);"
        " const step = t.length > 1 ? t[1] - t[0] : 1; return [t, t.map(v => f.tickLabel(v, step))]; });"
        "console.log(JSON.stringify({sizes: sizes.map(f.bytes), ticks: ticks}));"
    )
    shown = json.loads(node(script))
    assert shown["sizes"] == [format_bytes(n) for n in sizes]
    for (low, high), (values, labels) in zip(ranges, shown["ticks"], strict=True):
        expected = nice_ticks(low, high)
        assert values == pytest.approx(expected, rel=1e-12, abs=1e-12), (low, high)
        step = expected[1] - expected[0] if len(expected) > 1 else 1.0
        assert labels == [format_tick_ms(v, step) for v in expected], (low, high)
