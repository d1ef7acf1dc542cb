// What the HTML report's scripts compute, without a browser (node --test tests/js; run by
// tests/test_report_js.py, which also checks these functions against memprof's Python).
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const fmt = require(path.join(__dirname, "..", "..", "memprof", "outputs", "assets", "format.js"));

test("sizes are written as memprof writes them", () => {
  assert.equal(fmt.bytes(0), "0 B");
  assert.equal(fmt.bytes(1023), "1023 B");
  assert.equal(fmt.bytes(1024), "1.0 KiB");
  assert.equal(fmt.bytes(834000000), "795.4 MiB");
  assert.equal(fmt.bytes(-2 * 1048576), "-2.0 MiB");
  assert.equal(fmt.bytes(1280), "1.2 KiB"); // 1.25: a tie goes to the even digit, as in Python
  assert.equal(fmt.bytes(1792), "1.8 KiB"); // 1.75
  assert.equal(fmt.bytes(3 * 1099511627776), "3.0 TiB");
});

test("time ticks are round numbers within the range", () => {
  assert.deepEqual(fmt.ticks(0, 4, 6), [0, 1, 2, 3, 4]);
  assert.deepEqual(fmt.ticks(1, 3, 6), [1, 1.5, 2, 2.5, 3]);
  assert.deepEqual(fmt.ticks(2, 2, 6), [2]);
  const many = fmt.ticks(0.123, 0.987, 6);
  assert.ok(many.length >= 4 && many[0] >= 0.123 && many[many.length - 1] <= 0.987);
  assert.equal(fmt.tickLabel(1.5, 0.5), "1.5");
  assert.equal(fmt.tickLabel(40, 20), "40");
  assert.equal(fmt.tickLabel(0.30000000000000004, 0.1), "0.3");
});

test("the point of a step line at a time is the last one at or before it", () => {
  const times = [0, 1, 2, 3];
  assert.equal(fmt.pointAt(times, -0.5), -1);
  assert.equal(fmt.pointAt(times, 0), 0);
  assert.equal(fmt.pointAt(times, 2.9), 2);
  assert.equal(fmt.pointAt(times, 99), 3);
  assert.equal(fmt.pointAt([], 1), -1);
});

test("sorting: exact numbers, text by locale, empty cells last either way", () => {
  const cells = ["268435456", "", "1024", "-5"];
  const down = [...cells].sort((x, y) => fmt.compareCells(x, y, true, -1));
  const up = [...cells].sort((x, y) => fmt.compareCells(x, y, true, 1));
  assert.deepEqual(down, ["268435456", "1024", "-5", ""]);
  assert.deepEqual(up, ["-5", "1024", "268435456", ""]);
  const names = ["aten::sub", "", "aten::abs"].sort((x, y) => fmt.compareCells(x, y, false, 1));
  assert.deepEqual(names, ["aten::abs", "aten::sub", ""]);
});
