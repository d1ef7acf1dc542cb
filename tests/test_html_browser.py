"""The HTML report in a real browser: headless Chromium from ``file://`` with the network blocked.

Chromium is driven over the DevTools protocol by the small stdlib client below (no browser
download, no extra package). Skipped only when no Chromium binary is installed
(``apt-get install chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
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
from memprof.report.html import render_html

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


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
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
            "--window-size=1280,900",
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
        tools.call(
            "Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False
        )
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
    # The hostile label is text on the page, not an element.
    assert browser.evaluate("document.scripts.length") == 1
    names = browser.evaluate("[...document.querySelectorAll('#ops td.name')].map(td => td.textContent)")
    assert "<script>alert(1)</script>" in names

    chart = browser.evaluate(
        """(() => {
          const svg = document.querySelector('#timeline-chart svg');
          const box = svg.getBoundingClientRect();
          const drawn = [...svg.querySelectorAll('path')].filter(p => {
            const b = p.getBBox(); return b.width > 0 && b.height > 0; }).length;
          const texts = [...svg.querySelectorAll('text')].map(t => t.textContent);
          return {width: box.width, height: box.height, drawn: drawn, texts: texts};
        })()"""
    )
    assert chart["width"] > 400 and chart["height"] > 200
    assert chart["drawn"] >= 6  # per panel: background, the step line, its fill, ...
    assert "peak 320.0 MiB during aten::abs" in chart["texts"]

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

    chart = browser.evaluate(
        """(() => {
          const svg = document.querySelector('#timeline-chart svg');
          const box = svg.getBoundingClientRect();
          const drawn = [...svg.querySelectorAll('path')].filter(p => {
            const b = p.getBBox(); return b.width > 0 && b.height > 0; }).length;
          const texts = [...svg.querySelectorAll('text')].map(t => t.textContent);
          return {width: box.width, height: box.height, drawn: drawn, texts: texts};
        })()"""
    )
    assert chart["width"] > 400 and chart["height"] > 150
    assert chart["drawn"] >= 5  # background, allocated line and its fill, reserved line, live at start
    assert "peak 9.5 MiB above start during aten::linear" in chart["texts"]
    assert {"allocated", "reserved", "live at start"} <= set(chart["texts"])

    cuda_ops = "[...document.querySelectorAll('#ops table.sortable')[1].tBodies[0].rows]"
    before = browser.evaluate(f"{cuda_ops}.map(r => r.cells[0].textContent)")
    assert before[:2] == ["ProfilerStep#6", "aten::linear"]  # cuda:0's ops, largest peak first
    browser.click("#ops div.scroll:nth-of-type(2) thead th:nth-child(2)")  # cuda:0's "calls"
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
