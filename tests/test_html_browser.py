"""The HTML report in a real browser: headless Chromium from ``file://`` with the network blocked.

Chromium is driven over the DevTools protocol by the small stdlib client below (no browser
download, no extra package). Skipped only when no Chromium binary is installed
(``apt-get install chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memprof.model import Report
from memprof.outputs.html import render_html
from memprof.outputs.notebook import notebook_html
from memprof.pipeline import load_report

DATA = Path(__file__).parent / "data"

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium binary on PATH (apt-get install chromium)"
)

# Every scheme that could leave the machine; file:// and data: stay allowed.
BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]


class WebSocket:
    """Just enough RFC 6455 for the DevTools protocol: masked text frames out, frames in."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        assert url.startswith("ws://")
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.reader = self.sock.makefile("rb")
        status = self.reader.readline()
        assert b" 101 " in status, status
        while self.reader.readline() not in (b"\r\n", b""):
            pass

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, n: int) -> bytes:
        data = self.reader.read(n)
        if data is None or len(data) < n:
            raise ConnectionError("DevTools connection closed")
        return data

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools connection closed")
            if opcode in (0x9, 0xA):  # ping/pong: not used by Chromium's DevTools server
                continue
            message += payload
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class DevTools:
    """Commands with replies, and every event kept in order for the test to inspect."""

    def __init__(self, ws_url: str) -> None:
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        for message in self.events[:seen]:
            if message["method"] == event:
                return message
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
                if message["method"] == event:
                    return message
        raise TimeoutError(event)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed + released) at the centre of the element."""
        box = self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.scrollIntoView();"
            " const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def resize(self, width: int, height: int = 900) -> None:
        """The page's viewport, in CSS pixels."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        """A PNG of the page (the whole page, not only the viewport, with ``full_page``)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))

    def hover(self, selector: str) -> None:
        """The mouse moved to the centre of the element, as a user's pointer."""
        box = self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.scrollIntoView();"
            " const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0], y=box[1])

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def outgoing_requests(self) -> list[str]:
        urls = [
            e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"
        ]
        return [u for u in urls if not u.startswith(("file:", "data:"))]

    def console_errors(self) -> list[str]:
        errors = []
        for e in self.events:
            p = e["params"]
            if e["method"] == "Runtime.exceptionThrown":
                errors.append(json.dumps(p["exceptionDetails"])[:300])
            elif e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                errors.append(json.dumps(p["args"])[:300])
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(p["entry"]["text"])
            elif e["method"] == "Page.javascriptDialogOpening":
                errors.append(f"dialog: {p['message']}")
        return errors


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[DevTools]:
    """Headless Chromium with the network blocked, its page at ``width`` x ``height`` CSS px."""
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(prefix="memprof-chromium-")
    log = open(Path(profile) / "stderr.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--allow-file-access-from-files",
            f"--window-size={width},{height}",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not start: {(Path(profile) / 'stderr.log').read_text()}")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            targets = json.load(response)
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        for domain in ("Runtime", "Log", "Network", "Page"):
            tools.call(f"{domain}.enable")
        tools.call("Network.setBlockedURLs", urls=BLOCKED)
        tools.resize(width, height)
        yield tools
        tools.ws.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
    with chromium() as tools:
        yield tools


def png_colours(data: bytes) -> set[bytes]:
    """The distinct pixel colours of an 8-bit RGB/RGBA PNG (decoded with zlib, rows unfiltered)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour_type in (2, 6), (depth, colour_type)
            bpp = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = row[i - bpp] if i >= bpp else 0
            up = previous[i]
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                upper_left = previous[i - bpp] if i >= bpp else 0
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else upper_left)
                row[i] = (row[i] + predictor) & 0xFF
        colours.update(bytes(row[i : i + bpp]) for i in range(0, stride, bpp * 7))
        previous = row
    return colours


def test_harness_sees_requests_and_errors(browser: DevTools, tmp_path: Path) -> None:
    """The checks below can fail: a page that reaches out and logs an error is caught."""
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!DOCTYPE html><img src="http://192.0.2.1/pixel.png"><script>console.error("boom")</script>',
        encoding="utf-8",
    )
    browser.open(page)
    assert browser.outgoing_requests() == ["http://192.0.2.1/pixel.png"]
    failures = [e for e in browser.events if e["method"] == "Network.loadingFailed"]
    assert failures and failures[0]["params"].get("blockedReason") == "inspector"
    assert any("boom" in e for e in browser.console_errors())


def test_report_opens_offline_draws_the_chart_and_sorts(
    browser: DevTools, compare_report: Report, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(compare_report), encoding="utf-8")
    browser.open(page)

    assert browser.outgoing_requests() == []
    assert browser.console_errors() == []
    assert browser.evaluate("document.title") == "memprof: tests.workload:sub_abs"
    # The hostile label is text on the page, not an element: the chart's data block (never
    # run) and the page's own script are its only scripts.
    assert browser.evaluate("[...document.scripts].map(s => s.type || 'script')") == [
        "application/json",
        "script",
    ]
    names = browser.evaluate("[...document.querySelectorAll('#ops td.name')].map(td => td.textContent)")
    assert "<script>alert(1)</script>" in names

    chart = browser.evaluate(
        """(() => {
          const svg = document.querySelector('svg.mp-svg[data-layout=overlay]');
          const box = svg.getBoundingClientRect();
          const lines = [...svg.querySelectorAll('use.mp-line')].map(u => {
            const b = u.getBoundingClientRect(); return [b.width, b.height]; });
          const ticks = [...svg.querySelectorAll('g.mp-xticks text')].map(t => t.textContent);
          return {width: box.width, height: box.height, lines: lines, ticks: ticks};
        })()"""
    )
    assert chart["width"] > 800 and chart["height"] > 200
    assert len(chart["lines"]) == 2 and all(w > 100 and h > 0 for w, h in chart["lines"])
    assert chart["ticks"] == ["0", "1", "2", "3", "4"]  # ms since the call started
    legend = browser.evaluate("document.querySelector('.mp-legend').textContent")
    assert "eager: peak 320.0 MiB at 2.000 ms during aten::abs" in legend

    rows_js = (
        "[...document.querySelectorAll('#ops table.sortable tbody tr')].map(r => r.cells[0].textContent)"
    )
    column_js = (
        "[...document.querySelectorAll('#ops table.sortable tbody tr')].map(r => r.cells[2].dataset.sort)"
    )
    before = browser.evaluate(rows_js)
    assert before[0] == "<script>alert(1)</script>"  # default order: the larger peak of either run

    header = "#ops table.sortable thead th:nth-child(3)"  # "peak compile"
    browser.click(header)
    after = browser.evaluate(rows_js)
    assert sorted(after) == sorted(before) and after != before
    assert browser.evaluate(f"document.querySelector('{header}').getAttribute('aria-sort')") == "descending"
    keys = browser.evaluate(column_js)
    numbers = [int(k) for k in keys if k != ""]
    assert numbers == sorted(numbers, reverse=True) and numbers[0] == 1024 * 1024
    assert keys[len(numbers) :] == [""] * (len(keys) - len(numbers))  # absent ops stay last

    browser.click(header)
    keys = browser.evaluate(column_js)
    numbers = [int(k) for k in keys if k != ""]
    assert numbers == sorted(numbers) and keys[-1] == ""
    assert browser.evaluate(f"document.querySelector('{header}').getAttribute('aria-sort')") == "ascending"

    details_open = browser.evaluate("document.querySelector('#torch-table details').open")
    assert details_open is False  # collapsed until asked for

    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    assert len(png_colours(shot)) > 1
    assert browser.outgoing_requests() == [] and browser.console_errors() == []


def plot_point(browser: DevTools, t_ms: float, layout: str = "overlay") -> tuple[float, float]:
    """Where time ``t_ms`` is on the screen: the page coordinates inside the plot area."""
    return tuple(
        browser.evaluate(
            f"""(() => {{
              const fig = document.querySelector('figure.mp-chart');
              const data = JSON.parse(fig.querySelector('script.mp-data').textContent);
              const svg = fig.querySelector('svg.mp-svg[data-layout={layout}]');
              const shown = fig.getAttribute('data-view') || (data.t0 + ',' + data.t1);
              const view = shown.split(',').map(Number);
              const box = svg.getBoundingClientRect(), scale = box.width / svg.viewBox.baseVal.width;
              const x = data.left + ({t_ms} - view[0]) / (view[1] - view[0]) * data.width;
              const plot = svg.querySelector('rect.mp-frame').getBoundingClientRect();
              return [box.left + x * scale, plot.top + plot.height / 2];
            }})()"""
        )
    )


def mouse(browser: DevTools, kind: str, x: float, y: float, **extra: Any) -> None:
    browser.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)


def tooltip(browser: DevTools) -> list[str]:
    return browser.evaluate(
        "(() => { const t = document.querySelector('.mp-tooltip');"
        " return t.style.display === 'none' ? [] : [...t.children].map(c => c.textContent); })()"
    )


def test_hovering_the_timeline_shows_time_live_bytes_and_the_op(
    browser: DevTools, compare_report: Report, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(compare_report), encoding="utf-8")
    browser.open(page)
    # eager: 256 MiB from 1 ms (in aten::sub), 320 MiB from 2 ms (aten::abs); compile: 1 MiB
    # from 0.5 ms (its fused kernel).
    x, y = plot_point(browser, 2.5)
    mouse(browser, "mouseMoved", x, y)
    lines = tooltip(browser)
    assert lines[0].endswith(" ms") and abs(float(lines[0].split()[0]) - 2.5) < 0.02
    assert lines[1:] == ["eager: 320.0 MiB, aten::abs", "compile: 1.0 MiB"]
    x, y = plot_point(browser, 1.5)
    mouse(browser, "mouseMoved", x, y)
    assert tooltip(browser)[1:] == ["eager: 256.0 MiB, aten::sub", "compile: 1.0 MiB"]
    x, y = plot_point(browser, 0.7)
    mouse(browser, "mouseMoved", x, y)
    assert tooltip(browser)[1:] == ["eager: 0 B", "compile: 1.0 MiB, cpp_fused_abs_sub_0"]
    assert browser.evaluate("document.querySelector('svg.mp-svg .mp-cursor').style.display") == ""
    assert browser.console_errors() == []


def test_zooming_changes_the_visible_range_and_reset_restores_it(
    browser: DevTools, compare_report: Report, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(compare_report), encoding="utf-8")
    browser.open(page)
    view_js = "document.querySelector('figure.mp-chart').getAttribute('data-view')"
    plot_js = "document.querySelector('svg.mp-svg[data-layout=overlay] svg.mp-plot').getAttribute('viewBox')"
    ticks_js = (
        "[...document.querySelectorAll('svg.mp-svg[data-layout=overlay] g.mp-xticks text')]"
        ".map(t => t.textContent)"
    )
    assert browser.evaluate(view_js) == "0,4"
    # Drag from 1 ms to 3 ms.
    (x1, y), (x2, _) = plot_point(browser, 1.0), plot_point(browser, 3.0)
    mouse(browser, "mousePressed", x1, y, button="left", clickCount=1)
    mouse(browser, "mouseMoved", (x1 + x2) / 2, y, button="left")
    mouse(browser, "mouseMoved", x2, y, button="left")
    mouse(browser, "mouseReleased", x2, y, button="left", clickCount=1)
    start, end = map(float, browser.evaluate(view_js).split(","))
    assert abs(start - 1.0) < 0.02 and abs(end - 3.0) < 0.02
    assert float(browser.evaluate(plot_js).split()[0]) == pytest.approx(start)
    assert float(browser.evaluate(plot_js).split()[2]) == pytest.approx(end - start)
    ticks = [float(t) for t in browser.evaluate(ticks_js)]
    assert min(ticks) >= start - 1e-9 and max(ticks) <= end + 1e-9 and len(ticks) >= 4
    shown = browser.evaluate("document.querySelector('.mp-range').textContent")
    assert shown == f"showing {start:.3f} to {end:.3f} ms"
    # Shift + wheel zooms in further around the cursor.
    x, y = plot_point(browser, 2.0)
    browser.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=-100, modifiers=8)
    narrower = list(map(float, browser.evaluate(view_js).split(",")))
    assert narrower[1] - narrower[0] == pytest.approx((end - start) * 0.8, rel=1e-6)
    assert narrower[0] < 2.0 < narrower[1]
    browser.click("figure.mp-chart button.mp-reset")
    assert browser.evaluate(view_js) == "0,4"
    assert browser.evaluate(ticks_js) == ["0", "1", "2", "3", "4"]
    # One panel per run, on the same scale.
    browser.click("figure.mp-chart input.mp-stacked")
    shown = browser.evaluate("[...document.querySelectorAll('svg.mp-svg')].map(s => s.style.display)")
    assert shown == ["none", ""]
    assert browser.console_errors() == []


def overflow(browser: DevTools) -> dict[str, Any]:
    return browser.evaluate(
        """(() => ({
          scroll: document.documentElement.scrollWidth,
          viewport: window.innerWidth,
          wide: [...document.querySelectorAll('*')]
            .filter(e => e.getBoundingClientRect().right > innerWidth + 0.5)
            .map(e => e.tagName + '.' + e.className).slice(0, 5),
          tallest: Math.max(...[...document.querySelectorAll('tr')]
            .filter(r => r.offsetParent !== null).map(r => r.getBoundingClientRect().height)),
        }))()"""
    )


@pytest.mark.parametrize("name", ["transformer-step.json", "similarity-compare.json"])
def test_the_report_fits_1200_px_without_horizontal_overflow(
    browser: DevTools, name: str, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(load_report(DATA / name)), encoding="utf-8")
    browser.resize(1200, 900)
    try:
        browser.open(page)
        found = overflow(browser)
        assert found["scroll"] <= 1200 and found["wide"] == [], found
        # Long notes are collapsed: no row is taller than a few lines.
        assert found["tallest"] < 160, found
        # Showing every quiet row keeps the page within the width too.
        browser.evaluate("document.querySelectorAll('.mp-show-quiet').forEach(b => b.click())")
        found = overflow(browser)
        assert found["scroll"] <= 1200 and found["wide"] == [], found
    finally:
        browser.resize(1280, 900)


def test_the_filter_box_and_the_quiet_toggle(browser: DevTools, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(load_report(DATA / "transformer-step.json")), encoding="utf-8")
    browser.open(page)
    visible_js = (
        "[...document.querySelectorAll('#ops table.ops tbody tr')].filter(r => r.offsetParent !== null)"
        ".map(r => r.cells[0].textContent)"
    )
    everything = browser.evaluate(visible_js)
    # 135 ops; the 91 quiet ones (no memory activity, or a wrapper of the op inside it: the
    # compared runs fold wrappers) are hidden until asked for.
    assert len(everything) == 135 - 91
    browser.evaluate("document.querySelector('#ops .mp-filter').focus()")
    browser.call("Input.insertText", text="SoftMax")
    narrowed = browser.evaluate(visible_js)
    assert narrowed and all("softmax" in name.lower() for name in narrowed)
    assert narrowed == [name for name in everything if "softmax" in name.lower()]
    browser.click("#ops .mp-show-quiet")
    with_quiet = browser.evaluate(visible_js)
    assert len(with_quiet) > len(narrowed) and all("softmax" in name.lower() for name in with_quiet)
    browser.evaluate(
        "(() => { const f = document.querySelector('#ops .mp-filter'); f.value = '';"
        " f.dispatchEvent(new Event('input')); })()"
    )
    assert len(browser.evaluate(visible_js)) == 135


def luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


READABLE_JS = r"""(() => {
  function rgb(text) { return text.match(/[\d.]+/g).map(Number); }
  function background(el) {
    for (let e = el; e; e = e.parentElement) {
      const c = getComputedStyle(e).backgroundColor;
      if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') { return rgb(c); }
    }
    return [255, 255, 255];
  }
  const picks = ['h1', 'h2', 'th', 'td.num', 'td.name code', 'p.verdict', 'p.help', 'dt', 'dd',
                 'svg.mp-svg text.mp-tick', '.mp-legend li', 'figcaption', 'input.mp-filter'];
  return picks.map(sel => {
    const el = document.querySelector('.memprof-report ' + sel);
    const style = getComputedStyle(el);
    const fg = el instanceof SVGElement ? style.fill : style.color;
    return [sel, rgb(fg), background(el), rgb(getComputedStyle(document.body).backgroundColor)];
  });
})()"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_notebook_fragment_is_readable_on_a_dark_page(
    browser: DevTools, compare_report: Report, tmp_path: Path, scheme: str
) -> None:
    # A dark notebook: light text on a near-black page; the fragment brings its own colours.
    page = tmp_path / "notebook.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
        '<body style="background:#111418;color:#e6e6e6"><div class="jp-OutputArea-output">'
        f"{notebook_html(compare_report)}</div></body></html>",
        encoding="utf-8",
    )
    browser.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}])
    try:
        browser.open(page)
        samples = browser.evaluate(READABLE_JS)
    finally:
        browser.call("Emulation.setEmulatedMedia", features=[])
    assert browser.console_errors() == []
    page_background = samples[0][3]
    assert luminance(page_background) < 0.02  # the page really is dark
    for selector, fg, bg, _ in samples:
        assert contrast(fg, bg) >= 4.5, (selector, fg, bg)  # WCAG AA for text
    report_background = samples[0][2]
    if scheme == "light":
        assert luminance(report_background) > 0.9  # a light card on the dark page


def test_a_trace_report_opens_offline_draws_allocated_and_reserved_and_sorts(
    browser: DevTools, tmp_path: Path
) -> None:
    from gpu_data import gpu_file

    import memprof

    page = tmp_path / "trace.html"
    page.write_text(
        render_html(memprof.analyze(gpu_file("tracelens_h100_bert_small.json.gz"))), encoding="utf-8"
    )
    browser.open(page)
    assert browser.outgoing_requests() == []
    assert browser.console_errors() == []
    assert browser.evaluate("document.title") == "memprof: tracelens_h100_bert_small.json.gz"

    # cuda:0 drawn absolute: its allocated line and fill, what the allocator reserved, the
    # dashed line at live at start (87.1 MiB), the peak's mark; each with an area on screen.
    drawn = browser.evaluate(
        """(() => {
          const svg = document.querySelector('#timeline svg.mp-svg[data-layout=overlay]');
          return [...svg.querySelectorAll('use')].filter(u => {
            const b = u.getBoundingClientRect(); return b.width > 0 || b.height > 0;
          }).map(u => u.getAttribute('class').split(' ')[0]);
        })()"""
    )
    assert sorted(drawn) == ["mp-fill", "mp-line", "mp-peak", "mp-reserved", "mp-start"]
    legend = browser.evaluate("document.querySelector('#timeline .mp-legend').textContent")
    assert legend.startswith("cuda:0: peak 9.5 MiB above start at ")
    assert legend.endswith(
        " ms during aten::linear; 87.1 MiB live at start (dashed), reserved peak 116.0 MiB (thin line)"
    )
    # Hovering the peak: the allocated bytes there (live at start + the peak = the footprint)
    # and the reserve.
    peak_ms = float(legend.split(" at ")[1].split(" ms")[0])
    x, y = plot_point(browser, peak_ms + 1e-3)
    mouse(browser, "mouseMoved", x, y)
    shown = tooltip(browser)
    assert shown[1].startswith("cuda:0: 96.6 MiB allocated, ") and shown[1].endswith(" reserved")

    cuda_ops = "[...document.querySelectorAll('#ops table.sortable')[1].tBodies[0].rows]"
    before = browser.evaluate(f"{cuda_ops}.map(r => r.cells[0].textContent)")
    assert before[:2] == ["ProfilerStep#6", "aten::linear"]  # cuda:0's ops, largest peak first
    browser.evaluate("document.querySelectorAll('#ops table.sortable')[1].tHead.rows[0].cells[1].click()")
    after = browser.evaluate(f"{cuda_ops}.map(r => r.cells[0].textContent)")
    assert sorted(after) == sorted(before) and after != before
    calls = browser.evaluate(f"{cuda_ops}.map(r => Number(r.cells[1].dataset.sort))")
    assert calls == sorted(calls, reverse=True)

    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    assert len(png_colours(shot)) > 1
    assert browser.outgoing_requests() == [] and browser.console_errors() == []


def test_the_peak_explained_draws_its_chart_lists_its_entries_and_shows_sizes_on_hover(
    browser: DevTools, explained_report: Report, tmp_path: Path
) -> None:
    page = tmp_path / "explained.html"
    page.write_text(render_html(explained_report), encoding="utf-8")
    browser.open(page)
    assert browser.outgoing_requests() == [] and browser.console_errors() == []
    # The timeline stacked by category: one filled area per category, each drawn.
    areas = browser.evaluate(
        """[...document.querySelectorAll('#at-peak figure.category-chart path.category')].map(p => {
             const b = p.getBBox(); return [p.dataset.category, b.width > 0 && b.height > 0]; })"""
    )
    assert areas == [[name, True] for name in ("parameter", "optimizer_state", "activation", "temporary")]
    rows = browser.evaluate(
        "[...document.querySelectorAll('#at-peak table.at-peak-entries tbody tr')]"
        ".map(r => r.cells[0].textContent)"
    )
    assert rows == ["4.0 MiB", "2.0 MiB", "2.0 MiB", "2.0 MiB"]
    # Hovering a box of the icicle shows its size; hovering an area of the chart, its bytes.
    leaf = "#at-peak .icicle .bar[data-tip^='model.py:12']"
    assert browser.evaluate(f"document.querySelector({json.dumps(leaf)}).getBoundingClientRect().width") > 100
    browser.hover(leaf)
    tip = browser.evaluate(
        "(() => { const t = document.querySelector('.memprof-report .tooltip');"
        " return [t.textContent, getComputedStyle(t).display]; })()"
    )
    assert tip == ["model.py:12: 4.0 MiB (4,194,304 B)", "block"]
    browser.hover("#at-peak path.category[data-category='parameter']")
    assert browser.evaluate("document.querySelector('.memprof-report .tooltip').textContent") == (
        "parameter: 2.0 MiB (2,097,152 B) at the peak"
    )
    # With the script running, its tooltip replaces the browser's own.
    assert browser.evaluate("document.querySelectorAll('#at-peak [data-tip][title]').length") == 0
    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    assert len(png_colours(shot)) > 1
    assert browser.console_errors() == []


# ---- every screen: a 390 px phone and a 1,200 px window -------------------------------------------

FIT_JS = r"""(() => {
  const width = document.documentElement.clientWidth;
  // Inside a box that scrolls sideways (a wide table's), an element may pass the window's edge.
  function scrolled(el) {
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const x = getComputedStyle(e).overflowX;
      if (x === 'auto' || x === 'scroll') { return true; }
    }
    return false;
  }
  const past = [...document.querySelectorAll('body *')].filter(e => {
    const r = e.getBoundingClientRect();
    return (r.width > 0 || r.height > 0) && r.right > width + 0.5 && !scrolled(e);
  }).map(e => `${e.tagName.toLowerCase()}.${e.getAttribute('class') || ''}`);
  // A cell squeezed to a few characters a line: narrower than 3 characters, its text wrapped.
  const cells = [...document.querySelectorAll('td, th, dt, dd')];
  const probe = document.createElement('span');
  probe.textContent = '000';
  (cells[0] || document.body).appendChild(probe);
  const three = probe.getBoundingClientRect().width;
  probe.remove();
  const squeezed = cells.filter(c => {
    if (!c.offsetParent || !c.textContent.trim()) { return false; }
    const style = getComputedStyle(c);
    const inner = c.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const range = document.createRange();
    range.selectNodeContents(c);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.bottom))).size;
    return inner < three && lines > 1;
  }).map(c => c.textContent.slice(0, 40));
  return {page: document.documentElement.scrollWidth, width: width, past: past.slice(0, 8),
          squeezed: squeezed.slice(0, 8)};
})()"""


def estimate_sweep_report() -> Report:
    """An estimate's sweep of batch (the explained run at three values, a search beyond them)
    with a capacity and a reserve: what ``memprof estimate --sweep`` writes."""
    from dataclasses import replace

    from conftest import make_explained_report

    from memprof.model import EstimateSection, Source, Sweep, SweepPoint
    from memprof.pipeline import build_report

    base = make_explained_report().runs["eager"]
    mib = 1024 * 1024
    values = [(8, False), (16, False), (32, False), (47, True), (48, True)]
    runs = {
        f"batch={v}": replace(
            base,
            label=f"batch={v}",
            peak_bytes=v * mib,
            footprint_bytes=(v + 4) * mib,
            estimate=EstimateSection(),
        )
        for v, _ in values
    }
    points = tuple(
        SweepPoint(
            value=str(v),
            label=f"batch={v}",
            footprint_bytes=(v + 4) * mib,
            fitted_bytes=(v + 4) * mib,
            needed_bytes=(v + 4) * mib,
            fits=v <= 47,
            searched=searched,
        )
        for v, searched in values
    )
    sweep = Sweep(
        parameter="batch",
        needed="footprint_bytes",
        points=points,
        slope_bytes=float(mib),
        intercept_bytes=float(4 * mib),
        capacity_bytes=56 * mib,
        reserve_bytes=4 * mib,
        largest_fitting="47",
        largest_fitting_label="batch=47",
        largest_fitting_bytes=51 * mib,
        verified=True,
        verdict="largest batch that fits 56.0 MiB less a 4.0 MiB reserve: batch=47",
    )
    return build_report(
        target="memprof.examples.gpt:train_step",
        device="cpu",
        runs=runs,
        source=Source(kind="estimate"),
        detail=sweep,
        environment={"torch": "2.13.0+cpu", "device_name": "x86_64"},
    )


def fit_reports() -> dict[str, Report]:
    """A report of each kind, with long names: live runs compared (explained, compiled), a
    snapshot and a trace read by ``memprof analyze``, an estimate's sweep."""
    from gpu_data import gpu_file

    import memprof

    return {
        "run": load_report(DATA / "gpt-explained.json"),
        "compiled": load_report(DATA / "transformer-step.json"),
        "snapshot": memprof.analyze(gpu_file("magma27_cs336.snapshot.pickle")),
        "trace": memprof.analyze(gpu_file("tracelens_h100_bert_small.json.gz")),
        "estimate": estimate_sweep_report(),
    }


@pytest.mark.parametrize("width", [390, 1200])
def test_every_kind_of_report_fits_a_phone_and_a_window(
    browser: DevTools, tmp_path: Path, width: int
) -> None:
    """No element passes the window's edge but inside a box that scrolls (a wide table's), the
    page never scrolls sideways, and no cell is squeezed to a few letters a line."""
    browser.resize(width, 900)
    try:
        for kind, report in fit_reports().items():
            page = tmp_path / f"{kind}.html"
            page.write_text(render_html(report), encoding="utf-8")
            browser.open(page)
            found = browser.evaluate(FIT_JS)
            assert width - 20 <= found["width"] <= width, found  # less a scroll bar
            assert found["page"] <= width and found["past"] == [], (kind, found)
            assert found["squeezed"] == [], (kind, found)
            assert browser.evaluate(SMALL_TEXT_JS) == [], kind
            assert browser.console_errors() == [], kind
    finally:
        browser.resize(1280, 900)


# Every chart's shown text drawn at least 11 px high (an SVG's text shrinks with its drawing).
SMALL_TEXT_JS = r"""(() => [...document.querySelectorAll('svg text')]
  .filter(t => t.getClientRects().length && t.textContent.trim())
  .map(t => {
    const svg = t.ownerSVGElement;
    const scale = svg.getScreenCTM() ? svg.getScreenCTM().a : 1;
    return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale];
  })
  .filter(([, px]) => px < 11)
  .map(([text, px]) => text + ' ' + px.toFixed(1) + 'px'))()"""


@contextlib.contextmanager
def colour_scheme(browser: DevTools, scheme: str) -> Iterator[None]:
    """The page as a reader whose system prefers ``scheme`` (light or dark) sees it."""
    browser.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}])
    try:
        yield
    finally:
        browser.call("Emulation.setEmulatedMedia", features=[])


ICICLE_JS = r"""(() => {
  function rgb(text) { return text.match(/[\d.]+/g).map(Number); }
  return [...document.querySelectorAll('#at-peak .icicle .bar')].map(bar => {
    const style = getComputedStyle(bar);
    return [bar.textContent, rgb(style.color), rgb(style.backgroundColor)];
  });
})()"""


def test_the_icicles_labels_read_on_their_boxes_light_or_dark(
    browser: DevTools, explained_report: Report, tmp_path: Path
) -> None:
    (tmp_path / "explained.html").write_text(render_html(explained_report), encoding="utf-8")
    for scheme in ("light", "dark"):
        with colour_scheme(browser, scheme):
            browser.open(tmp_path / "explained.html")
            boxes = browser.evaluate(ICICLE_JS)
        assert len(boxes) >= 6  # the footprint, the modules, the lines
        for text, fg, bg in boxes:
            assert contrast(fg, bg) >= 4.5, (scheme, text, fg, bg)
