"""Take the picture of the HTML report that README and the documentation show: the report of a
real run of the built-in GPT training step, eager vs compiled (tests/data/gpt-explained.json),
rendered by memprof and photographed by headless Chromium (Debian's ``chromium`` package).

    PYTHONPATH=. python scripts/screenshot_report.py      # writes docs/assets/report.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "tests" / "data" / "gpt-explained.json"
PICTURE = ROOT / "docs" / "assets" / "report.png"
WIDTH, HEIGHT = 1200, 2400


def main() -> int:
    import memprof
    from memprof.outputs import renderer

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("needs Chromium: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        page.write_text(renderer("html")(memprof.load_report(REPORT)))
        shot = Path(folder) / "report.png"
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                f"--window-size={WIDTH},{HEIGHT}",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        PICTURE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, PICTURE)
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
