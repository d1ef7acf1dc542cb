/* The memory timeline's interactivity (memprof/outputs/chart.py draws the chart as SVG, complete
   without this script): zooming rewrites each plot's viewBox and the time ticks; hovering reads
   the points embedded as JSON. Sizes and ticks as memprofFormat computes them. */
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  var SVG = "http://www.w3.org/2000/svg";
  var bytes = memprofFormat.bytes, ticks = memprofFormat.ticks, tickLabel = memprofFormat.tickLabel;
  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function bind(fig) {
    if (fig.getAttribute("data-bound")) { return; }
    fig.setAttribute("data-bound", "1");
    var data = JSON.parse(fig.querySelector("script.mp-data").textContent);
    var svgs = Array.prototype.slice.call(fig.querySelectorAll("svg.mp-svg"));
    var area = fig.querySelector(".mp-area"), tip = fig.querySelector(".mp-tooltip");
    var rangeText = fig.querySelector(".mp-range"), view = [data.t0, data.t1], drag = null;
    function at(svg, clientX) {
      var box = svg.getBoundingClientRect(), x = (clientX - box.left) * svg.viewBox.baseVal.width / box.width;
      var f = (x - data.left) / data.width;
      return {x: x, f: f, t: view[0] + f * (view[1] - view[0])};
    }
    function drawTicks(svg) {
      var g = svg.querySelector("g.mp-xticks"), y = Number(g.getAttribute("data-y"));
      while (g.firstChild) { g.removeChild(g.firstChild); }
      var ts = ticks(view[0], view[1], 6), step = ts.length > 1 ? ts[1] - ts[0] : 1;
      ts.forEach(function (v) {
        var x = (data.left + (v - view[0]) / (view[1] - view[0]) * data.width).toFixed(1);
        g.appendChild(el("line", {"class": "mp-axis", x1: x, x2: x, y1: y, y2: y + 5}));
        var label = tickLabel(v, step);
        g.appendChild(el("text", {"class": "mp-tick", x: x, y: y + 18, "text-anchor": "middle"}, label));
      });
    }
    function setView(a, b) {
      var full = data.t1 - data.t0;
      if (!(b - a > full * 1e-6)) { return; }
      a = Math.max(data.t0, a); b = Math.min(data.t1, b);
      view = [a, b];
      fig.querySelectorAll("svg.mp-plot").forEach(function (plot) {
        plot.setAttribute("viewBox", a + " 0 " + (b - a) + " 1000");
      });
      svgs.forEach(drawTicks);
      var zoomed = a > data.t0 || b < data.t1;
      rangeText.textContent = zoomed ? "showing " + a.toFixed(3) + " to " + b.toFixed(3) + " ms" : "";
      fig.setAttribute("data-view", a + "," + b);
    }
    function hover(svg, event) {
      var p = at(svg, event.clientX), cursor = svg.querySelector(".mp-cursor");
      if (p.f < 0 || p.f > 1) { cursor.style.display = "none"; tip.style.display = "none"; return; }
      cursor.setAttribute("x1", p.x); cursor.setAttribute("x2", p.x); cursor.style.display = "";
      while (tip.firstChild) { tip.removeChild(tip.firstChild); }
      var head = document.createElement("div");
      head.className = "mp-tip-time"; head.textContent = p.t.toFixed(3) + " ms";
      tip.appendChild(head);
      data.runs.forEach(function (run, i) {
        var k = memprofFormat.pointAt(run.t, p.t), line = document.createElement("div");
        var op = k >= 0 && run.op.length && run.op[k] >= 0 && run.op[k] < run.ops.length
          ? ", " + run.ops[run.op[k]] : "";
        var live = k >= 0 ? bytes(run.b[k]) : "-";
        if (k >= 0 && run.r.length) { live += " allocated, " + bytes(run.r[k]) + " reserved"; }
        line.className = "mp-tip-run";
        line.textContent = run.label + ": " + live + op;
        tip.appendChild(line);
      });
      var box = area.getBoundingClientRect(), left = event.clientX - box.left + 14;
      tip.style.display = "";
      if (left + tip.offsetWidth > box.width) {
        left = Math.max(0, event.clientX - box.left - tip.offsetWidth - 14);
      }
      tip.style.left = left + "px";
      tip.style.top = Math.max(0, event.clientY - box.top + 10) + "px";
    }
    svgs.forEach(function (svg) {
      var brush = svg.querySelector(".mp-brush");
      svg.addEventListener("mousemove", function (event) {
        hover(svg, event);
        if (drag && drag.svg === svg) {
          var x = at(svg, event.clientX).x, x0 = Math.min(drag.x, x), x1 = Math.max(drag.x, x);
          brush.setAttribute("x", x0); brush.setAttribute("width", x1 - x0); brush.style.display = "";
        }
      });
      svg.addEventListener("mouseleave", function () {
        svg.querySelector(".mp-cursor").style.display = "none"; tip.style.display = "none";
      });
      svg.addEventListener("mousedown", function (event) {
        var p = at(svg, event.clientX);
        if (event.button === 0 && p.f >= 0 && p.f <= 1) {
          drag = {svg: svg, x: p.x, t: p.t};
          event.preventDefault();
        }
      });
      svg.addEventListener("mouseup", function (event) {
        if (!drag || drag.svg !== svg) { return; }
        var p = at(svg, event.clientX), start = drag;
        drag = null; brush.style.display = "none";
        if (Math.abs(p.x - start.x) > 4) { setView(Math.min(start.t, p.t), Math.max(start.t, p.t)); }
      });
      svg.addEventListener("wheel", function (event) {
        if (!(event.ctrlKey || event.shiftKey || event.metaKey)) { return; }
        event.preventDefault();
        var p = at(svg, event.clientX), factor = event.deltaY < 0 ? 0.8 : 1.25;
        var c = Math.min(Math.max(p.t, view[0]), view[1]);
        setView(c - (c - view[0]) * factor, c + (view[1] - c) * factor);
      }, {passive: false});
      svg.addEventListener("dblclick", function () { setView(data.t0, data.t1); });
    });
    document.addEventListener("mouseup", function () {
      if (drag) { drag.svg.querySelector(".mp-brush").style.display = "none"; drag = null; }
    });
    fig.querySelector(".mp-reset").addEventListener("click", function () { setView(data.t0, data.t1); });
    var toggle = fig.querySelector(".mp-stacked");
    if (toggle) {
      toggle.addEventListener("change", function () {
        svgs.forEach(function (svg) {
          var stacked = svg.getAttribute("data-layout") === "stacked";
          svg.style.display = stacked === toggle.checked ? "" : "none";
        });
      });
    }
    setView(data.t0, data.t1);
  }
  root.querySelectorAll("figure.mp-chart").forEach(bind);
})();
