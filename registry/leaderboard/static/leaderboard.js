// Sorting and filtering of the leaderboard's tables: plain JavaScript, no network.
// A header click sorts its table by that column (numbers by data-value); a second click
// reverses. A filter box hides the rows of the page's tables that do not contain its text.
(function () {
  "use strict";

  function cellKey(row, index, type) {
    var cell = row.cells[index];
    if (!cell) return type === "number" ? -Infinity : "";
    if (type === "number") {
      var raw = cell.getAttribute("data-value");
      var value = raw === null || raw === "" ? NaN : parseFloat(raw);
      return isNaN(value) ? -Infinity : value;
    }
    return cell.textContent.trim().toLowerCase();
  }

  function sortTable(table, index, type, th) {
    var body = table.tBodies[0];
    var ascending = !th.classList.contains("sorted-asc");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.classList.remove("sorted-asc", "sorted-desc");
    });
    th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var ka = cellKey(a, index, type), kb = cellKey(b, index, type);
      var order = ka < kb ? -1 : ka > kb ? 1 : 0;
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      th.addEventListener("click", function () {
        sortTable(table, index, th.getAttribute("data-type") || "text", th);
      });
    });
  });

  document.querySelectorAll("input.filter").forEach(function (input) {
    input.addEventListener("input", function () {
      var needle = input.value.trim().toLowerCase();
      document.querySelectorAll("table.sortable tbody tr").forEach(function (row) {
        var hit = needle === "" || row.textContent.toLowerCase().indexOf(needle) !== -1;
        row.classList.toggle("hidden", !hit);
      });
    });
  });
})();
