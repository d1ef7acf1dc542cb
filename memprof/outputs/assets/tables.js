/* Sortable tables (click a header; again to reverse), and an op table's filter box and the
   toggle for the rows the summaries leave out. Sorting follows memprofFormat.compareCells. */
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  function controlsOf(table) {
    // The controls come just before the table, or before the box it scrolls in.
    var box = table.parentNode && table.parentNode.classList.contains("scroll") ? table.parentNode : table;
    var controls = box.previousElementSibling;
    return controls && controls.classList.contains("mp-table-controls") ? controls : null;
  }
  function sortable(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      function sort() {
        var numeric = th.getAttribute("data-type") === "num";
        var first = numeric ? "descending" : "ascending";
        var second = numeric ? "ascending" : "descending";
        var dir = th.getAttribute("aria-sort") === first ? second : first;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var sign = dir === "ascending" ? 1 : -1;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        function key(row) {
          var cell = row.cells[col], value = cell ? cell.getAttribute("data-sort") : "";
          return value === null ? cell.textContent : value;
        }
        rows.sort(function (r1, r2) { return memprofFormat.compareCells(key(r1), key(r2), numeric, sign); });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
      });
    });
  }
  function filterable(table, controls) {
    var filter = controls.querySelector(".mp-filter"), quiet = controls.querySelector(".mp-show-quiet");
    filter.addEventListener("input", function () {
      var text = filter.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var name = row.cells[0].textContent.toLowerCase();
        row.classList.toggle("filtered", text !== "" && name.indexOf(text) < 0);
      });
    });
    if (quiet) {
      quiet.addEventListener("change", function () { table.classList.toggle("show-quiet", quiet.checked); });
    }
  }
  root.querySelectorAll("table.sortable").forEach(function (table) {
    if (table.getAttribute("data-bound")) { return; }
    table.setAttribute("data-bound", "1");
    sortable(table);
    var controls = controlsOf(table);
    if (controls) { filterable(table, controls); }
  });
})();
