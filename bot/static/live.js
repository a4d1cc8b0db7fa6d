// The live page's only script: draw each quota window with uPlot, then every poll swap in the
// sections the server rendered and give the charts their new points, and show that polling is
// alive (#poll: the dot beats on each answer; "no answer since" when they stop). Every word it
// shows comes from the page (the chart labels in #charts' data-labels, #poll's two spans) or from
// the server's HTML. Every time it writes is UTC, 24-hour, as the server writes them.
(function () {
  "use strict";
  var poll = parseInt(document.body.dataset.pollMs, 10) || 2000;
  var host = document.getElementById("charts");
  var labels = JSON.parse(host.dataset.labels);
  var plots = {};
  var signal = document.getElementById("poll");
  var DAY = 86400;

  function two(n) { return (n < 10 ? "0" : "") + n; }

  function clock(date) {  // 14:05, in UTC
    return two(date.getUTCHours()) + ":" + two(date.getUTCMinutes());
  }

  function day(date) {  // 11-02, in UTC
    return two(date.getUTCMonth() + 1) + "-" + two(date.getUTCDate());
  }

  // The x axis in UTC and 24-hour time: "14:00" within a day (the date under the first tick and
  // under each midnight), "11-02" when the ticks are days apart. The labels drawn are kept on the
  // chart's box (data-ticks), so what the canvas shows can be read back.
  function ticks(u, splits, axis, space, increment) {
    var out = splits.map(function (ts, i) {
      var date = new Date(ts * 1000);
      if (increment >= DAY) { return day(date); }
      var midnight = date.getUTCHours() === 0 && date.getUTCMinutes() === 0;
      return clock(date) + (i === 0 || midnight ? "\n" + day(date) : "");
    });
    if (u.root) { u.root.dataset.ticks = out.join(" | ").replace(/\n/g, " "); }
    return out;
  }

  function width() {
    return Math.max(Math.min(host.clientWidth - 8, 720), 200);
  }

  function options(chart) {
    return {
      width: width(),
      height: 240,
      scales: { x: { time: true } },
      legend: { live: false },  // three points a line: a hover readout says less than the card beside it
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },  // UTC, as every time the server writes
      series: [
        {},
        { label: labels.spent, stroke: "#c0392b", width: 0, points: { show: true, size: 10, fill: "#c0392b" } },
        { label: labels.pacing, stroke: "#7f8c8d", dash: [6, 4] },
        { label: labels.sustainable, stroke: "#27ae60" },
        { label: labels.projection, stroke: "#e67e22", dash: [2, 3] },
        { label: labels.reserve, stroke: "#2c5aa0", width: 2 },
        { label: labels.capacity, stroke: "#333333", width: 1 }
      ],
      axes: [{ label: labels.time, values: ticks }, { label: chart.calibrated ? labels.usd : labels.fraction }]
    };
  }

  function series(chart) {
    return [chart.x, chart.spent, chart.pacing, chart.sustainable, chart.projection, chart.reserve, chart.capacity];
  }

  function draw(charts) {
    var seen = {};
    charts.forEach(function (chart) {
      seen[chart.name] = true;
      if (plots[chart.name]) {
        plots[chart.name].setData(series(chart));
        return;
      }
      var box = document.createElement("div");
      box.className = "chart";
      box.dataset.window = chart.name;
      var title = document.createElement("h3");
      title.textContent = chart.label;
      box.appendChild(title);
      host.appendChild(box);
      plots[chart.name] = new uPlot(options(chart), series(chart), box);
    });
    Object.keys(plots).forEach(function (name) {
      if (!seen[name]) {
        plots[name].destroy();
        var box = host.querySelector('[data-window="' + name + '"]');
        if (box) { box.remove(); }
        delete plots[name];
      }
    });
  }

  function swap(sections) {
    Object.keys(sections).forEach(function (id) {
      var element = document.getElementById(id);
      if (element && element.innerHTML !== sections[id]) { element.innerHTML = sections[id]; }
    });
  }

  function answered(ok) {
    var now = clock(new Date()) + ":" + two(new Date().getUTCSeconds()) + " UTC";
    if (ok) {
      document.getElementById("poll-at").textContent = now;
      document.getElementById("poll-lost-at").textContent = now;
      signal.dataset.polls = String(parseInt(signal.dataset.polls, 10) + 1);
      signal.classList.remove("beat");
      void signal.offsetWidth;  // restart the beat's animation
      signal.classList.add("beat");
    }
    signal.dataset.state = ok ? "live" : "lost";
  }

  // ?waiter=<id> picks the waiter whose queue ladder the queue section shows; the poll keeps it.
  var waiter = new URLSearchParams(window.location.search).get("waiter");
  var stateUrl = "/live/state" + (waiter ? "?waiter=" + encodeURIComponent(waiter) : "");

  function refresh() {
    fetch(stateUrl, { credentials: "same-origin", cache: "no-store" })
      .then(function (answer) {
        if (answer.status === 401) { window.location.reload(); }  // the token changed: show how to get back in
        return answer.ok ? answer.json() : null;
      })
      .then(function (state) {
        if (state) {
          swap(state.sections);
          draw(state.charts);
          document.body.dataset.stateAt = state.now;
        }
        answered(Boolean(state));
      })
      .catch(function () { answered(false); /* a restart or a dropped connection: the next poll tries again */ })
      .then(function () { window.setTimeout(refresh, poll); });
  }

  window.addEventListener("resize", function () {
    Object.keys(plots).forEach(function (name) { plots[name].setSize({ width: width(), height: 240 }); });
  });

  draw(JSON.parse(document.getElementById("chart-data").textContent));
  window.setTimeout(refresh, poll);
}());
