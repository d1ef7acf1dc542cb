/* What the report's scripts compute, without a page: sizes as memprof.core.units.format_bytes
   writes them, time ticks as memprof.outputs.chart.nice_ticks and format_tick_ms choose them,
   the point of a step line at a time, and the order of two cells when a table is sorted.
   tests/js/format.test.js runs these under node (tests/test_report_js.py). */
var memprofFormat = (function () {
  var UNITS = [["TiB", 1099511627776], ["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
  // v with `digits` decimals as Python writes it: a tie goes to the even digit (toFixed rounds
  // it up). Exact for the values used here (bytes over a power of two, ticks).
  function fixed(v, digits) {
    var scale = Math.pow(10, digits), scaled = Math.abs(v) * scale, floor = Math.floor(scaled);
    if (scaled - floor === 0.5 && floor % 2 === 0) { return (Math.sign(v) * floor / scale).toFixed(digits); }
    return v.toFixed(digits);
  }
  function bytes(n) {
    var sign = n < 0 ? "-" : "", size = Math.abs(n);
    for (var i = 0; i < UNITS.length; i++) {
      if (size >= UNITS[i][1]) { return sign + fixed(size / UNITS[i][1], 1) + " " + UNITS[i][0]; }
    }
    return sign + Math.floor(size) + " B";
  }
  function ticks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) { return [lo]; }
    var raw = span / count, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    [1, 2, 5, 10].some(function (m) { if (m * mag >= raw * (1 - 1e-9)) { step = m * mag; return true; } });
    var out = [];
    // + 0: a tick at 0 from a ceiling of a tiny negative is -0, written "0" but not equal to 0.
    for (var i = Math.ceil(lo / step - 1e-9); i <= Math.floor(hi / step + 1e-9); i++) { out.push(i * step + 0); }
    return out;
  }
  function tickLabel(v, step) {
    return fixed(v, step > 0 ? Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) : 0);
  }
  // The last point at or before t of a step line (the value holds until the next point); -1 before it.
  function pointAt(times, t) {
    var lo = 0, hi = times.length - 1;
    if (hi < 0 || t < times[0]) { return -1; }
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (times[mid] <= t) { lo = mid; } else { hi = mid - 1; }
    }
    return lo;
  }
  // Numbers by their exact value (bytes, not the rounded text), text by locale; an empty cell
  // (an op absent from a run) stays last in either direction. sign: 1 ascending, -1 descending.
  function compareCells(x, y, numeric, sign) {
    if (x === "" || y === "") { return x === y ? 0 : (x === "" ? 1 : -1); }
    if (numeric) { return sign * (Number(x) - Number(y)); }
    return sign * x.localeCompare(y);
  }
  return {
    fixed: fixed, bytes: bytes, ticks: ticks, tickLabel: tickLabel, pointAt: pointAt, compareCells: compareCells
  };
})();
if (typeof module !== "undefined" && module.exports) { module.exports = memprofFormat; }
