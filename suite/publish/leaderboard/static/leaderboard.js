// The leaderboard's behaviour: tables (Tabulator: sort, per-column filters, CSV), charts (uPlot),
// configuration tabs and table state in the URL (a permalink), the system-against-system picker.
// Data comes from <script type="application/json"> elements and, for a benchmark's page, from its
// own data file (data/<benchmark>.js, loaded before this script); nothing comes from a network.
(function () {
  "use strict";
  var doc = document;
  doc.documentElement.classList.add("js");
  var PALETTE = ["#0b5394", "#b45f06", "#38761d", "#990000", "#674ea7", "#0c7b7b", "#7f6000", "#a64d79", "#434343"];

  function json(id) {
    var el = doc.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "";
    var a = Math.abs(v);
    if (a >= 1e4) return Math.round(v).toLocaleString("en-US");
    return Number(v.toPrecision(4)).toLocaleString("en-US", { maximumSignificantDigits: 4 });
  }
  function text(el, s) { el.textContent = s; return el; }

  // -- plain sortable tables and row filters (front, system and record pages) ------------------
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
  doc.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      th.addEventListener("click", function () {
        var ascending = !th.classList.contains("sorted-asc");
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
        var type = th.getAttribute("data-type") || "text";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var ka = cellKey(a, index, type), kb = cellKey(b, index, type);
          var order = ka < kb ? -1 : ka > kb ? 1 : 0;
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  doc.querySelectorAll("input.filter").forEach(function (input) {
    input.addEventListener("input", function () {
      var needle = input.value.trim().toLowerCase();
      doc.querySelectorAll("table.sortable tbody tr").forEach(function (row) {
        row.classList.toggle("hidden", needle !== "" && row.textContent.toLowerCase().indexOf(needle) === -1);
      });
    });
  });

  // -- the URL's hash: the table state (configuration, sort, filters) --------------------------
  function readHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var i = part.indexOf("=");
      if (i > 0) out[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1));
    });
    return out;
  }
  function writeHash(state) {
    var parts = [];
    Object.keys(state).forEach(function (k) { if (state[k]) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(state[k])); });
    history.replaceState(null, "", "#" + parts.join("&"));
  }

  // -- charts ---------------------------------------------------------------------------------
  function chartWidth(el) { return Math.max(280, Math.min(el.clientWidth || 600, 1100)); }
  // A value axis as wide as its widest figure (uPlot's axis-autosize): at uPlot's fixed 50 px,
  // "1,400,000" runs under the axis's name.
  function fitAxis(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) return axis._size;
    var longest = "";
    (values || []).forEach(function (v) { if (v !== null && String(v).length > longest.length) longest = String(v); });
    var size = axis.ticks.size + axis.gap;
    if (longest) { u.ctx.font = axis.font[0]; size += u.ctx.measureText(longest).width / devicePixelRatio; }
    return Math.max(50, Math.ceil(size + 4));
  }
  function drawChart(el, opts, data) {
    el.textContent = "";
    (opts.axes || []).forEach(function (axis, i) { if (i > 0 && axis && axis.size === undefined) axis.size = fitAxis; });
    opts.width = chartWidth(el);
    opts.height = Math.round(Math.min(420, Math.max(240, opts.width * 0.55)));
    // A canvas says nothing to a screen reader: once drawn, the container names the picture and
    // the span of its value axis.
    var yLabel = (opts.axes && opts.axes[1] && opts.axes[1].label) || "value";
    opts.hooks = { draw: [function (u) {
      var y = u.scales.y;
      if (y.min !== null && y.max !== null) {
        el.setAttribute("aria-label", opts.title + "; " + yLabel + " axis from " + +y.min.toPrecision(3) + " to " + +y.max.toPrecision(3));
        el.setAttribute("data-y", y.min + " " + y.max);
      }
      var x = u.scales.x;  // the span drawn along x, for whoever reads the page without its canvas
      if (x.min !== null && x.max !== null) el.setAttribute("data-x", x.min + " " + x.max);
    }] };
    var plot = new uPlot(opts, data, el);
    el.setAttribute("data-series", String(opts.series.length - 1));
    // the series drawn as points that no line joins, named for whoever reads the page without its canvas
    var unjoined = opts.series.slice(1).filter(function (s) { return s.width === 0; }).map(function (s) { return s.label; });
    if (unjoined.length) el.setAttribute("data-unjoined", unjoined.join(" | "));
    window.addEventListener("resize", function () { plot.setSize({ width: chartWidth(el), height: opts.height }); });
    return plot;
  }
  function note(el, s) { el.textContent = ""; el.appendChild(text(doc.createElement("p"), s)).className = "note"; el.setAttribute("data-series", "0"); }
  // Series with their own x values on one shared, sorted x axis (nulls where a series has no point).
  function align(seriesList) {
    var xs = {};
    seriesList.forEach(function (s) { s.points.forEach(function (p) { xs[p[0]] = true; }); });
    var x = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var data = [x];
    seriesList.forEach(function (s) {
      var m = {};
      s.points.forEach(function (p) { m[p[0]] = p[1]; });
      data.push(x.map(function (v) { return v in m ? m[v] : null; }));
    });
    return data;
  }
  function lineSeries(label, i, lines) {
    var colour = PALETTE[i % PALETTE.length];
    return { label: label, stroke: colour, width: 2, spanGaps: true, points: { show: true, size: 6, fill: colour },
             paths: lines ? undefined : function () { return null; } };
  }
  // A serving series of steps whose throughput is not a steady-state figure (the site names it
  // with this suffix): hollow points in its system's colour, never joined by a line, so that a
  // step shorter than its requests is shown as what it is, not drawn as a measurement.
  // The steady steps a system's per-GPU frontier leaves out (the site names them with this
  // suffix): plain points in its system's colour, never joined, so the line stays the frontier.
  var UNSTEADY = " · no steady state", BELOW_FRONTIER = " · below the frontier";
  function servingSeries(n, i, names) {
    var suffix = [UNSTEADY, BELOW_FRONTIER].filter(function (x) { return n.indexOf(x) >= 0; })[0];
    if (!suffix) return lineSeries(n, i, true);
    var own = names.indexOf(n.slice(0, n.indexOf(suffix)));
    var s = lineSeries(n, own >= 0 ? own : i, false);
    s.width = 0;
    if (suffix === UNSTEADY) s.points = { show: true, size: 9, fill: "#fff", stroke: s.stroke, width: 2 };
    return s;
  }
  // Under the first serving picture with such steps: what the hollow points are, in words (a
  // legend's "no steady state" alone does not say why a point stands apart from its line).
  function unsteadyKey(el, names) {
    if (!names.some(function (n) { return n.indexOf(UNSTEADY) >= 0; })) return;
    if (doc.querySelector("#pictures .unsteady-key")) return;  // said once, under the picture above
    el.appendChild(text(doc.createElement("p"), "Hollow points, never joined to a line: rate steps whose throughput is " +
      "no steady-state figure. Their first request ended after half of the step's arrivals, so the step measured its " +
      "tail: a step past saturation, or a step of a sweep filed before the window was measured (judged from its " +
      "requests' median time). They are drawn as measured, apart from their system's curve.")).className = "note unsteady-key";
  }
  function bytes(v) {
    if (v === null || v === undefined) return "";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (Math.round(v * 10) / 10) + " " + units[i];
  }

  function familyChart(el, chart, cfg) {
    // "the N leaders of the table": said only above a picture that draws systems
    var leaders = doc.getElementById("chart-systems");
    if (leaders) leaders.classList.toggle("hidden", !chart);
    var perGpu = doc.getElementById("serving-curve");
    if (perGpu) perGpu.parentNode.removeChild(perGpu);  // another table's picture may have no such view
    if (!chart) {
      note(el, board.category === "kernels" ? "Kernel results are drawn on their system's roofline: follow a system's link."
             : board.category === "collectives" ? "No bus-bandwidth curve for this table: at one rank busbw is zero by " +
                                                  "nccl-tests' formula, and a log axis cannot draw it."
             : cfg && cfg.throughput_goal ? "Throughput runs reach no target, so there is no time to target to draw: " +
                                            "their rates are drawn against the GPUs in the scaling view below."
             : "No picture for this benchmark's family: its figures are in the table above.");
      return;
    }
    var names = Object.keys(chart.series);
    if (chart.kind === "busbw") {
      var list = names.map(function (n) { return { points: chart.series[n] }; });
      drawChart(el, {
        // other world sizes' tables drawn beside: one series per system and world size
        title: "bus bandwidth against message size (nccl-tests' busbw)" +
               ((chart.beside || []).length ? ", one series per world size" : ""),
        scales: { x: { time: false, distr: 3, log: 2 }, y: { distr: 3, log: 10 } },
        axes: [{ label: "message size", values: function (u, vals) { return vals.map(bytes); } }, { label: "busbw GB/s" }],
        series: [{ label: "size", value: function (u, v) { return v === null ? "" : bytes(v); } }]
          .concat(names.map(function (n, i) {
            var s = lineSeries(n, i, true);
            if ((chart.beside || []).indexOf(n) >= 0) s.dash = [6, 4];  // another world size: drawn beside, never ranked
            return s;
          }))
      }, align(list));
    } else if (chart.kind === "serving" && !names.length) {
      note(el, "No rate sweep in these runs: latency is drawn against the throughput of rate steps.");
      inferenceMaxChart(el, chart.per_gpu || {});
    } else if (chart.kind === "serving") {
      drawChart(el, {
        // against the throughput achieved: past saturation more offered load buys latency, not tokens
        title: "time to first token and time per output token (p99) against the achieved throughput, with the SLOs",
        scales: { x: { time: false, distr: 3, log: 2 }, y: { distr: 3, log: 10 } },
        axes: [{ label: "achieved output tokens/s" }, { label: "ms" }],
        series: [{ label: "output tokens/s" }].concat(names.map(function (n, i) {
          var s = servingSeries(n, i, names);
          if (n.indexOf("SLO ") === 0) { s.dash = [6, 4]; s.points = { show: false }; s.stroke = "#555"; s.width = 1; }
          return s;
        }))
      }, align(names.map(function (n) { return { points: chart.series[n] }; })));
      unsteadyKey(el, names);
      inferenceMaxChart(el, chart.per_gpu || {});  // drawn below, a rate sweep or not
    } else if (chart.kind === "latency") {
      var lat = names.map(function (n) { return { points: chart.series[n] }; });
      drawChart(el, {
        title: "latency (p90) against throughput, one point per LoadGen scenario",
        scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
        axes: [{ label: "throughput (samples/s or queries/s)" }, { label: "latency p90 ms" }],
        series: [{ label: "throughput" }].concat(names.map(function (n, i) { return lineSeries(n, i, false); }))
      }, align(lat));
    } else if (chart.kind === "time_to_target") {
      // Each run (each seed) a point over its system, the figure the table ranks (the olympic
      // mean of five runs) a ring: the spread across seeds is part of the result.
      var cases = {}, most = 0;
      names.forEach(function (n) {
        Object.keys(chart.series[n]).forEach(function (c) { cases[c] = true; most = Math.max(most, chart.series[n][c].runs.length); });
      });
      var caseList = Object.keys(cases), tData = [names.map(function (_, i) { return i; })], tSeries = [];
      caseList.forEach(function (c, ci) {
        var colour = PALETTE[ci % PALETTE.length], prefix = caseList.length > 1 ? c + " " : "";
        for (var k = 0; k < most; k++) {
          tData.push(names.map(function (n) { var s = chart.series[n][c]; return s && k < s.runs.length ? s.runs[k] : null; }));
          tSeries.push({ label: prefix + "run " + (k + 1), stroke: colour, fill: colour, width: 0,
                         points: { show: true, size: 7, fill: colour, stroke: colour }, paths: function () { return null; } });
        }
        var labels = {};
        names.forEach(function (n) { var s = chart.series[n][c]; if (s) labels[s.score_label] = true; });
        tData.push(names.map(function (n) { var s = chart.series[n][c]; return s ? s.score : null; }));
        tSeries.push({ label: prefix + Object.keys(labels).join(" or "), stroke: "#111", width: 0,
                       points: { show: true, size: 16, fill: "transparent", stroke: "#111", width: 2 }, paths: function () { return null; } });
      });
      // system names side by side overlap on a phone: there they are drawn slanted
      var slant = chartWidth(el) < 120 * names.length;
      drawChart(el, {
        title: "time to target per system",
        scales: { x: { time: false, range: [-0.5, names.length - 0.5] },
                  y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
        axes: [{ label: "system", splits: function () { return names.map(function (_, i) { return i; }); },
                 rotate: slant ? -45 : 0, size: slant ? 90 : 50,
                 values: function (u, vals) { return vals.map(function (v) { return names[v] || ""; }); } },
               { label: "seconds" }],
        series: [{ label: "system", value: function (u, v) { return names[v] || ""; } }].concat(tSeries)
      }, tData);
      el.setAttribute("data-runs", String(names.reduce(function (t, n) {
        return t + Object.keys(chart.series[n]).reduce(function (a, c) { return a + chart.series[n][c].runs.length; }, 0);
      }, 0)));
    }
  }

  // InferenceMAX's view of a serving table: output tokens/s per GPU against output tokens/s per
  // user, one line per system and engine (its steps' Pareto frontier, as the site picks it), in a
  // chart of its own below the latency picture, with a sentence saying what the line joins.
  function inferenceMaxChart(after, series) {
    var el = doc.createElement("div");
    el.className = "chart";
    el.id = "serving-curve";
    after.parentNode.insertBefore(el, after.nextSibling);
    var names = Object.keys(series);
    if (!names.length) {
      note(el, "No step of these runs records output tokens/s per GPU and per user: they were measured before the curve was kept.");
      return;
    }
    drawChart(el, {
      title: "output tokens/s per GPU against output tokens/s per user (InferenceMAX's view)",
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: [{ label: "output tokens/s per user" }, { label: "output tokens/s per GPU" }],
      series: [{ label: "tokens/s per user" }].concat(names.map(function (n, i) { return servingSeries(n, i, names); }))
    }, align(names.map(function (n) { return { points: series[n] }; })));
    el.appendChild(text(doc.createElement("p"), "Each system's line joins only its frontier, as InferenceMAX draws it: " +
      "the steps that no other step of its sweep beats on both tokens/s per user and tokens/s per GPU; its other " +
      "steps are drawn unjoined, as points of their own (\u201cbelow the frontier\u201d) or hollow (no steady state).")).className = "note frontier-key";
    unsteadyKey(el, names);
  }

  // A training benchmark's scaling: throughput and efficiency against GPUs, one series per system
  // and kind of scaling (strong: the global batch held; weak: the batch per GPU held), and the
  // same figures as a table beside the pictures.
  function scalingCharts(chart) {
    var thr = doc.getElementById("scaling-throughput"), eff = doc.getElementById("scaling-efficiency");
    var tableEl = doc.getElementById("scaling-table");
    tableEl.textContent = "";
    scalingShown = null;
    // a time-to-target table is drawn beside the throughput runs' series: the page says so
    var source = doc.getElementById("scaling-source");
    if (source) {
      text(source, chart && chart.from ? "Drawn from " + chart.from + ", beside this table's time to target and never " +
                                         "ranked against it: throughput runs reach no target." : "");
      source.classList.toggle("hidden", !(chart && chart.from));
    }
    if (!chart || !chart.series.length) {
      note(thr, "No scaling series for this table: no other table of this benchmark differs from it only in the " +
                "number of GPUs (and, for weak scaling, in a global batch that keeps the batch per GPU).");
      note(eff, "");
      return;
    }
    var worlds = {};
    chart.series.forEach(function (s) { s.points.forEach(function (p) { worlds[p[0]] = true; }); });
    var xs = Object.keys(worlds).map(Number).sort(function (a, b) { return a - b; });
    var lo = xs[0], hi = xs[xs.length - 1];
    var xScale = { time: false, distr: 3, log: 2, range: [lo / 1.25, hi * 1.25] };
    var xAxis = { label: "GPUs (world size)", splits: function () { return xs; },
                  values: function (u, vals) { return vals.map(function (v) { return String(v); }); } };
    var top = 0;
    chart.series.forEach(function (s) { s.points.forEach(function (p) { top = Math.max(top, p[1]); }); });
    drawChart(thr, {
      title: "throughput against GPUs",
      scales: { x: xScale, y: { range: function () { return [0, top > 0 ? top * 1.1 : 1]; } } },
      axes: [xAxis, { label: chart.metric + " (" + chart.unit + ")", size: 90 }],  // room for 1,600,000
      series: [{ label: "GPUs" }].concat(chart.series.map(function (s, i) { return lineSeries(s.label, i, true); }))
    }, align(chart.series.map(function (s) { return { points: s.points.map(function (p) { return [p[0], p[1]]; }) }; })));
    var effTop = 1;
    chart.series.forEach(function (s) { s.points.forEach(function (p) { if (p[2] !== null) effTop = Math.max(effTop, p[2]); }); });
    var effList = chart.series.map(function (s) { return { points: s.points.map(function (p) { return [p[0], p[2]]; }) }; });
    var effSeries = chart.series.map(function (s, i) { return lineSeries(s.label, i, true); });
    // the bare DDP loop the cross-check ran beside each run: the efficiency a plain loop reaches
    // on the same machine, dashed in its series' colour
    chart.series.forEach(function (s, i) {
      var loop = s.points.filter(function (p) { return p[4] !== null && p[4] !== undefined; });
      if (!loop.length) return;
      loop.forEach(function (p) { effTop = Math.max(effTop, p[4]); });
      effList.push({ points: loop.map(function (p) { return [p[0], p[4]]; }) });
      var bare = lineSeries(s.system + " · bare DDP loop", i, true);
      bare.dash = [3, 3];
      effSeries.push(bare);
    });
    effList.push({ points: [[lo, 1], [hi, 1]] });
    var ideal = { label: "ideal (1.0)", stroke: "#555", width: 1, dash: [6, 4], points: { show: false }, spanGaps: true };
    drawChart(eff, {
      title: "scaling efficiency against GPUs",
      scales: { x: xScale, y: { range: function () { return [0, effTop * 1.1]; } } },
      axes: [xAxis, { label: "scaling efficiency", size: 90 }],  // as wide as the throughput's: the GPU axes line up
      series: [{ label: "GPUs" }].concat(effSeries, [ideal])
    }, align(effList));
    scalingTable(tableEl, chart);
  }

  // The scaling figures as a table. On a phone (PHONE) each series is a heading row over its
  // points, which then need neither its name nor its base world ("against") in a column of their
  // own: five narrow columns under wrapped headers fit 390 px with nothing scrolled or clipped.
  var PHONE = window.matchMedia ? window.matchMedia("(max-width: 600px)") : null;
  var scalingShown = null;
  function breakable(el, s) {  // a header that may wrap after "_" ("samples_per_s (images/s)")
    s.split(/(?<=_)/).forEach(function (part, i) {
      if (i) el.appendChild(doc.createElement("wbr"));
      el.appendChild(doc.createTextNode(part));
    });
    return el;
  }
  function scalingTable(tableEl, chart) {
    scalingShown = chart;
    tableEl.textContent = "";
    var narrow = !!(PHONE && PHONE.matches);
    // a header or cell ([text, class]) kept at this width: one rule, so headers and cells line up
    var kept = function (c) { return !narrow || (c[1] !== "series" && c[1] !== "against"); };
    var heads = [["series", "series"], ["GPUs", "num"], [chart.metric + " (" + chart.unit + ")", "num"],
                 ["efficiency", "num"], ["against", "against"], ["runs", "num"], ["bare DDP loop's efficiency", "num"]]
      .filter(kept);
    var wrap = doc.createElement("table"), head = doc.createElement("tr");
    heads.forEach(function (h) { head.appendChild(breakable(doc.createElement("th"), h[0])).className = h[1]; });
    var thead = doc.createElement("thead"); thead.appendChild(head); wrap.appendChild(thead);
    var body = doc.createElement("tbody");
    chart.series.forEach(function (s) {
      var against = s.base_world + " GPU" + (s.base_world === 1 ? "" : "s");
      if (narrow) {
        var group = doc.createElement("tr"), th = text(doc.createElement("th"), s.label);
        group.className = "series-head";
        th.colSpan = heads.length;
        th.scope = "rowgroup";
        th.appendChild(doc.createElement("br"));
        th.appendChild(text(doc.createElement("small"), "efficiency against " + against));
        group.appendChild(th);
        body.appendChild(group);
      }
      s.points.forEach(function (p) {
        var tr = doc.createElement("tr");
        tr.className = "point";
        var loop = p[4] === null || p[4] === undefined ? "" : p[4].toFixed(3);
        var cells = [[s.label, "series"], [String(p[0]), "num"], [fmt(p[1]), "num"], [p[2] === null ? "" : p[2].toFixed(3), "num"],
                     [against, "against"], [String(p[3]), "num"], [loop, "num"]];
        cells.filter(kept).forEach(function (c) { tr.appendChild(text(doc.createElement("td"), c[0])).className = c[1]; });
        body.appendChild(tr);
      });
    });
    wrap.appendChild(body);
    wrap.className = "scaling" + (narrow ? " narrow" : "");
    tableEl.appendChild(wrap);
    // the suite's efficiency over the bare loop's from the cross-check's rounds (each round's two
    // sides back to back): a line a series, under the table, wrapping on a phone
    chart.series.forEach(function (s) {
      var found = s.points.filter(function (p) { return p[5]; });
      if (!found.length) return;
      var line = doc.createElement("p");
      line.className = "note versus-bare";
      text(line, s.label + ": the suite's efficiency over the bare DDP loop's, from the rounds of each run's cross-check " +
        "(95% interval): " + found.map(function (p) {
          return p[0] + " GPUs " + p[5][0].toFixed(3) + " (" + p[5][1].toFixed(3) + "\u2013" + p[5][2].toFixed(3) + ")";
        }).join(", ") + ".");
      tableEl.appendChild(line);
    });
  }
  if (PHONE && PHONE.addEventListener) {  // a phone turned, a window narrowed: the table redrawn for its width
    PHONE.addEventListener("change", function () {
      var el = doc.getElementById("scaling-table");
      if (el && scalingShown) scalingTable(el, scalingShown);
    });
  }

  function trendChart(el, trends, caseName, axisLabel) {
    var bySystem = (trends || {})[caseName];
    if (!bySystem) { note(el, "No runs to draw."); return; }
    var names = Object.keys(bySystem);
    var list = names.map(function (n) {
      var s = bySystem[n];
      return { points: s.t.map(function (t, i) { return [t, s.v[i]]; }) };
    });
    var changes = [];
    names.forEach(function (n) { var s = bySystem[n]; s.change.forEach(function (i) { changes.push([s.t[i], s.v[i]]); }); });
    var series = [{ label: "time" }].concat(names.map(function (n, i) { return lineSeries(n, i, true); }));
    if (changes.length) {
      list.push({ points: changes });
      series.push({ label: "change point", stroke: "#a11515", width: 0, points: { show: true, size: 14, fill: "transparent", stroke: "#a11515", width: 2 }, paths: function () { return null; } });
    }
    // a day either side of a single run's time, so that one point is not drawn on a span of years
    var data = align(list), xs = data[0];
    var x = { time: true };
    if (xs.length && xs[0] === xs[xs.length - 1]) x.range = [xs[0] - 86400, xs[0] + 86400];
    drawChart(el, { title: caseName + " over time", scales: { x: x }, axes: [{}, { label: axisLabel || caseName }], series: series }, data);
  }

  // -- a benchmark's page -------------------------------------------------------------------------
  var board = window.PERFSUITE_BOARD || null;
  if (!board && doc.getElementById("family-chart")) {
    note(doc.getElementById("family-chart"), "This benchmark's data file (data/*.js) did not load: the tables below are the page's own copy.");
    doc.documentElement.classList.remove("js");  // the page's own tables, not empty grids
  }
  if (board) {
    var tables = {};
    var state = readHash();
    var configs = {};
    board.configs.forEach(function (cfg) { configs[cfg.id] = cfg; });
    // A table is built when its tab is first shown (Tabulator measures its container).
    function build(cfg) {
      var holder = doc.querySelector('.grid[data-config="' + cfg.id + '"]');
      // rank and system, then the figures (what a phone must show first), then the system's details.
      // On a phone the first figure column fits beside rank and system: fixed widths, its notes wrapped.
      var narrow = window.matchMedia("(max-width: 600px)").matches;
      var columns = [
        { title: "#", field: "rank", sorter: "number", minWidth: narrow ? 36 : 48, width: narrow ? 40 : 56, headerFilter: false },
        { title: "system", field: "system", headerFilter: "input", minWidth: narrow ? 90 : 110, maxWidth: narrow ? 120 : 220,
          formatter: function (cell) {
          var a = doc.createElement("a"); a.className = "system-link";
          a.href = "../systems/" + cell.getData().system_key + ".html"; a.textContent = cell.getValue(); return a; } }
      ];
      var details = [
        { title: "submitter", field: "submitter", headerFilter: "input", maxWidth: 160, formatter: "textarea" },
        { title: "accelerator", field: "accelerator", headerFilter: "input", maxWidth: 170, formatter: "textarea" },
        { title: "software", field: "software", headerFilter: "input", maxWidth: 210, formatter: "textarea" }
      ];
      cfg.columns.forEach(function (col) {
        columns.push({
          title: col.case + " (" + col.unit + ")", field: "c:" + col.case, sorter: "number", hozAlign: "right",
          headerSortStartingDir: col.higher_is_better ? "desc" : "asc", headerFilter: false,
          headerTooltip: col.metric + " (" + (col.higher_is_better ? "higher" : "lower") + " is better)",
          titleFormatter: function () {
            var span = doc.createElement("span");
            span.appendChild(doc.createTextNode(col.case + " (" + col.unit + ")"));
            span.appendChild(doc.createElement("br"));
            var small = doc.createElement("small");
            small.textContent = col.metric + (col.higher_is_better ? " \u2191" : " \u2193");
            span.appendChild(small);
            return span;
          },
          minWidth: 120, maxWidth: 260, width: narrow ? 150 : undefined, cssClass: "figure",
          formatter: function (cell) {
            var d = cell.getData(), v = cell.getValue();
            if (v === undefined || v === null) return "";
            var span = doc.createElement("span");
            var a = doc.createElement("a"); a.href = "../record.html#" + d["r:" + col.case]; a.textContent = fmt(v);
            span.appendChild(a);
            span.appendChild(doc.createElement("br"));
            var small = doc.createElement("small"); small.textContent = d["n:" + col.case] || ""; span.appendChild(small);
            return span;
          },
          accessorDownload: function (v) { return v; }
        });
      });
      columns = columns.concat(details);
      var mine = state.cfg === cfg.id;
      var sort = mine && state.sort ? state.sort.split(":") : null;
      var filters = [];
      if (mine) Object.keys(state).forEach(function (k) { if (k.indexOf("f.") === 0) filters.push({ field: k.slice(2), value: state[k] }); });
      // nestedFieldSeparator: a case is often dotted ("matmul.bf16", "pinned.1stream.1GiB"), and
      // Tabulator would read field "c:matmul.bf16" as row["c:matmul"]["bf16"] and show nothing
      var table = new Tabulator(holder, { data: cfg.rows, columns: columns, layout: "fitDataStretch", nestedFieldSeparator: false,
                                          initialSort: [sort ? { column: sort.slice(0, -1).join(":"), dir: sort[sort.length - 1] } : { column: "rank", dir: "asc" }],
                                          initialHeaderFilter: filters, placeholder: "no rows match" });
      tables[cfg.id] = table;
      table.on("tableBuilt", function () {
        table.on("dataSorted", function () { saveState(cfg.id); });
        table.on("dataFiltered", function () { saveState(cfg.id); });
        holder.setAttribute("data-built", "true");
      });
    }
    function saveState(id) {
      var table = tables[id], out = { cfg: id };
      var sorters = table.getSorters();
      if (sorters.length) out.sort = sorters[0].field + ":" + sorters[0].dir;
      table.getHeaderFilters().forEach(function (f) { if (f.value) out["f." + f.field] = f.value; });
      writeHash(out);
    }
    // The filters: one select per setting that tells the board's tables apart. Picking a value
    // shows the table with that value that agrees with the other selects most (the standard
    // table first among equals), then every select shows that table's own settings.
    var facetSelects = doc.querySelectorAll("select[data-facet]");
    // on a phone the filters start folded: the table, not a screenful of drop-downs, comes first
    var facetBox = doc.getElementById("facets-box");
    if (facetBox && window.matchMedia && window.matchMedia("(max-width: 600px)").matches) facetBox.removeAttribute("open");
    function facetValue(cfg, name) { var v = cfg.shown[name]; return v === undefined ? "\u2014" : v; }
    function syncFacets(id) {
      facetSelects.forEach(function (sel) { sel.value = facetValue(configs[id], sel.getAttribute("data-facet")); });
    }
    facetSelects.forEach(function (sel) {
      sel.addEventListener("change", function () {
        var name = sel.getAttribute("data-facet"), best = null, bestScore = -1;
        board.configs.forEach(function (cfg) {
          if (facetValue(cfg, name) !== sel.value) return;
          var score = 0;
          facetSelects.forEach(function (other) {
            if (other !== sel && facetValue(cfg, other.getAttribute("data-facet")) === other.value) score++;
          });
          if (score > bestScore) { best = cfg; bestScore = score; }
        });
        if (best) { show(best.id); writeHash({ cfg: best.id }); }
      });
    });
    function show(id) {
      doc.querySelectorAll("section.config").forEach(function (s) { s.classList.toggle("hidden", s.getAttribute("data-config") !== id); });
      doc.querySelectorAll(".tab").forEach(function (t) { t.classList.toggle("selected", t.getAttribute("data-config") === id); });
      syncFacets(id);
      if (!tables[id]) build(configs[id]);
      familyChart(doc.getElementById("family-chart"), board.charts[id], configs[id]);
      if (doc.getElementById("scaling-throughput")) scalingCharts((board.scaling || {})[id]);
      var select = doc.getElementById("trend-case");
      select.textContent = "";
      Object.keys(board.trends[id] || {}).forEach(function (c) { var o = doc.createElement("option"); o.value = c; o.textContent = c; select.appendChild(o); });
      // the metric and its unit: the case is in the picture's title, and with it the name ran past
      // a phone's 240 px tall axis ("throughput samples_per_s (image")
      var axisLabel = function (c) {
        var col = configs[id].columns.filter(function (k) { return k["case"] === c; })[0];
        return col ? col.metric + " (" + col.unit + ")" : c;
      };
      trendChart(doc.getElementById("trend-chart"), board.trends[id], select.value, axisLabel(select.value));
      select.onchange = function () { trendChart(doc.getElementById("trend-chart"), board.trends[id], select.value, axisLabel(select.value)); };
      current = id;
    }
    var current = null;
    doc.querySelectorAll(".tab").forEach(function (t) {
      t.addEventListener("click", function (e) { e.preventDefault(); var id = t.getAttribute("data-config"); show(id); writeHash({ cfg: id }); });
    });
    doc.querySelectorAll("button.csv").forEach(function (b) {
      b.addEventListener("click", function () { var t = tables[b.getAttribute("data-config")]; if (t) t.download("csv", board.workload + ".csv"); });
    });
    var defaultId = board.configs.filter(function (c) { return c.default; })[0].id;
    show(state.cfg && configs[state.cfg] ? state.cfg : defaultId);
  }

  // -- a system's roofline (points from the same report as `perfsuite roofline`) -------------------
  var roof = json("roofline-data");
  if (roof) {
    var el = doc.getElementById("roofline-chart");
    var pts = roof.points.filter(function (p) { return p.intensity && p.tflops; });
    var bw = roof.bandwidths_gbps.memory;
    var xs = pts.map(function (p) { return p.intensity; });
    var ridges = Object.keys(roof.peaks_tflops).map(function (k) { return bw ? roof.peaks_tflops[k] * 1e3 / bw : 1; });
    var lo = Math.min.apply(null, xs.concat(ridges, [1])) / 8, hi = Math.max.apply(null, xs.concat(ridges, [1])) * 8;
    var grid = [];
    for (var g = Math.log10(lo); g <= Math.log10(hi) + 1e-9; g += 0.05) grid.push(Math.pow(10, g));
    var list = Object.keys(roof.peaks_tflops).map(function (k) {
      var peak = roof.peaks_tflops[k];
      return { label: k, points: grid.map(function (x) { return [x, bw ? Math.min(peak, x * bw / 1e3) : peak]; }) };
    });
    list.push({ label: "results", points: pts.map(function (p) { return [p.intensity, p.tflops]; }) });
    var series = [{ label: "FLOP/B" }].concat(list.map(function (s, i) {
      if (s.label === "results") return { label: "results", stroke: "#1a1a1a", width: 0, points: { show: true, size: 9, fill: "#1a1a1a" }, paths: function () { return null; } };
      return { label: s.label + " roof", stroke: PALETTE[i % PALETTE.length], width: 1.5, points: { show: false }, spanGaps: true };
    }));
    if (pts.length) {
      drawChart(el, { title: "roofline (" + roof.device + ")", scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
                      axes: [{ label: "arithmetic intensity (FLOP/byte)" }, { label: "TFLOP/s" }], series: series }, align(list));
    } else {
      note(el, "No result of this system reports both FLOPs and bytes: see the table below.");
    }
  }

  // -- a record's page: its tables drawn from the record itself (every text set as text) ---------
  // record.html#RUN_ID loads the shard its run id falls in, records/shard-N.js (the stored
  // records, as data; N = FNV-1a of the run id modulo the site's shard count), and draws it.
  function shardOf(id, shards) {
    var h = 0x811c9dc5;
    for (var i = 0; i < id.length; i++) { h ^= id.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
    return h % shards;
  }
  var recordBody = doc.getElementById("record-body");
  if (recordBody) {
    var runId = location.hash.replace(/^#/, "");
    if (!/^[0-9a-f]{1,64}$/.test(runId)) {
      text(recordBody, "No record named: the address ends with #RUN_ID.");
    } else {
      var loader = doc.createElement("script");
      loader.src = "records/shard-" + shardOf(runId, Number(recordBody.getAttribute("data-shards")) || 1) + ".js";
      loader.onload = function () {
        var entry = Object.prototype.hasOwnProperty.call(window.PERFSUITE_SHARD || {}, runId) ? window.PERFSUITE_SHARD[runId] : null;
        if (entry) drawRecord(entry.record, entry.mllog, runId); else text(recordBody, "No record " + runId + " in this site.");
      };
      loader.onerror = function () { text(recordBody, "No record " + runId + " in this site."); };
      doc.body.appendChild(loader);
    }
    window.addEventListener("hashchange", function () { location.reload(); });
  }
  function drawRecord(record, hasMllog, runId) {
    var body = recordBody;
    body.textContent = "";
    function h2(s) { body.appendChild(text(doc.createElement("h2"), s)); }
    function table(head, rows) {
      var wrap = doc.createElement("div"); wrap.className = "scroll";
      var t = doc.createElement("table"), tr = doc.createElement("tr");
      head.forEach(function (hd) { tr.appendChild(text(doc.createElement("th"), hd)); });
      var thead = doc.createElement("thead"); thead.appendChild(tr); t.appendChild(thead);
      var tb = doc.createElement("tbody");
      rows.forEach(function (r) {
        var row = doc.createElement("tr");
        r.forEach(function (v) { row.appendChild(text(doc.createElement("td"), v === null || v === undefined ? "" : String(v))); });
        tb.appendChild(row);
      });
      t.appendChild(tb); wrap.appendChild(t); body.appendChild(wrap);
    }
    var links = doc.getElementById("record-links");
    var download = doc.createElement("a");
    download.textContent = "record (JSON)";
    download.download = runId + ".json";
    download.href = URL.createObjectURL(new Blob([JSON.stringify(record, null, 1)], { type: "application/json" }));
    links.appendChild(download);
    if (hasMllog) {
      links.appendChild(doc.createTextNode(" · "));
      var mllog = doc.createElement("a"); mllog.textContent = "MLLOG"; mllog.href = "records/" + runId + ".mllog";
      links.appendChild(mllog);
    }
    var wl = record.workload || {}, envr = record.environment || {};
    text(doc.getElementById("record-title"), (wl.name || "") + " · run " + record.run_id);
    doc.title = (wl.name || "") + " run " + String(record.run_id).slice(0, 8) + " — perfsuite leaderboard";
    text(doc.getElementById("record-facts"), [record.started_at, envr.host, (envr.measured_device || {}).name,
      "status " + record.status, "verification " + (record.verification || {}).status].join(" · "));
    h2("Statistics");
    table(["case", "metric", "value", "unit", "n", "95% CI", "p5–p95"], (record.metrics || []).map(function (m) {
      var st = m.statistics || {};
      return [m["case"], m.name, fmt(m.value), m.unit, st.n, st.ci95_low === undefined ? "" : fmt(st.ci95_low) + "–" + fmt(st.ci95_high),
              st.p5 === undefined ? "" : fmt(st.p5) + "–" + fmt(st.p95)];
    }));
    h2("Verification: " + (record.verification || {}).status);
    table(["check"], ((record.verification || {}).checks || []).map(function (c) { return [typeof c === "string" ? c : JSON.stringify(c)]; }));
    var throttle = (record.details || {}).throttle || {};
    h2("Regime (what NVML saw while each case was timed)");
    table(["case", "power-capped", "thermal slowdown", "SM MHz min–max", "power W (median)", "clock events"],
      Object.keys(throttle).map(function (c) { var t = throttle[c] || {};
        return [c, t.power_capped, t.thermal_slowdown, (t.sm_clock_mhz_min || "") + "–" + (t.sm_clock_mhz_max || ""), t.power_w_median,
                (t.clock_events || []).join(", ")]; }));
    h2("GPU state");
    var gpuRows = [];
    Object.keys(record.gpu_state || {}).forEach(function (when) {
      var seen = record.gpu_state[when];
      (Array.isArray(seen) ? seen : []).forEach(function (g) {
        gpuRows.push([when, g.index, g.sm_clock_mhz, g.power_w, g.power_limit_w, g.temperature_c, (g.throttle_reasons || []).join(", ")]);
      });
    });
    table(["when", "GPU", "SM MHz", "power W", "limit W", "°C", "clock events"], gpuRows);
    h2("Environment");
    var runtime = envr.runtime || {};
    table(["fact", "value"], [["host", envr.host], ["CPU", (envr.cpu || {}).model], ["OS", envr.os], ["Python", envr.python],
      ["GPUs", (envr.gpus || []).map(function (g) { return g.name + " (driver " + g.driver + ")"; }).join(", ")],
      ["launch", (record.launch || {}).launcher + " x" + (record.launch || {}).world_size],
      ["parameters", Object.keys(wl.params || {}).map(function (k) { return k + "=" + JSON.stringify(wl.params[k]); }).join(", ")]]
      .concat(Object.keys(runtime).map(function (k) { return [k, runtime[k]]; })));
    var inference = (record.details || {}).inference;
    if (inference && inference.scenarios) {
      var files = [];
      Object.keys(inference.scenarios).forEach(function (sc) {
        var info = inference.scenarios[sc] || {};
        Object.keys(info).forEach(function (k) { ((info[k] || {}).files || []).forEach(function (f) { files.push([sc, f]); }); });
      });
      h2("LoadGen logs (kept with the run's artifacts" + (inference.artifact_dir ? ": " + inference.artifact_dir : "") + ")");
      table(["scenario", "file"], files);
    }
  }

  // -- system against system ---------------------------------------------------------------------
  var pairs = json("pairs-data");
  if (pairs) {
    var a = doc.getElementById("system-a"), b = doc.getElementById("system-b");
    var grid = null;
    var st = readHash();
    if (st.a) a.value = st.a;
    if (st.b) b.value = st.b;
    function render() {
      var pair = null, flip = false;
      pairs.forEach(function (p) {
        if (p.systems[0] === a.value && p.systems[1] === b.value) pair = p;
        if (p.systems[0] === b.value && p.systems[1] === a.value) { pair = p; flip = true; }
      });
      writeHash({ a: a.value, b: b.value });
      var summary = doc.getElementById("pair-summary");
      var rows = [];
      if (pair) {
        rows = pair.rows.map(function (r) {
          var ratio = flip ? 1 / r.ratio : r.ratio, lo = flip ? 1 / r.ci_high : r.ci_low, hi = flip ? 1 / r.ci_low : r.ci_high;
          var verdict = r.verdict;
          if (flip && verdict === "faster") verdict = "slower"; else if (flip && verdict === "slower") verdict = "faster";
          return { benchmark: r.benchmark, configuration: r.configuration, "case": r["case"],
                   a: flip ? r.b : r.a, b: flip ? r.a : r.b, unit: r.unit, ratio: ratio,
                   ci: r.p === null ? "n/a (a side has one run)" : fmt(lo) + "–" + fmt(hi),
                   p: r.p, runs: (flip ? r.runs_b : r.runs_a) + " / " + (flip ? r.runs_a : r.runs_b), verdict: verdict };
        });
      }
      text(summary, a.value === b.value ? "Pick two different systems." :
           rows.length + " shared benchmark cells: B against A (ratio above 1: B's figure is larger).");
      if (grid) grid.destroy();
      grid = new Tabulator(doc.getElementById("pair-grid"), {
        data: rows, layout: "fitDataStretch", placeholder: "no shared benchmark",
        columns: [
          { title: "benchmark", field: "benchmark", headerFilter: "input" },
          { title: "configuration", field: "configuration", headerFilter: "input", maxWidth: 340, formatter: "textarea" },
          { title: "case", field: "case", headerFilter: "input", maxWidth: 200, formatter: "textarea" },
          { title: "A", field: "a", sorter: "number", hozAlign: "right", formatter: function (c) { return fmt(c.getValue()) + " " + c.getData().unit; } },
          { title: "B", field: "b", sorter: "number", hozAlign: "right", formatter: function (c) { return fmt(c.getValue()) + " " + c.getData().unit; } },
          { title: "B / A", field: "ratio", sorter: "number", hozAlign: "right", formatter: function (c) { return fmt(c.getValue()); } },
          { title: "95% CI", field: "ci" },
          { title: "p", field: "p", sorter: "number", formatter: function (c) { var v = c.getValue(); return v === null ? "n/a" : v.toPrecision(2); } },
          { title: "runs A / B", field: "runs" },
          { title: "verdict", field: "verdict", minWidth: 200, headerFilter: "input", formatter: function (c) {
            var s = doc.createElement("span"); s.textContent = c.getValue(); s.className = "verdict-" + c.getValue().split(" ")[0]; return s; } }
        ]
      });
    }
    a.addEventListener("change", render);
    b.addEventListener("change", render);
    render();
  }
})();
