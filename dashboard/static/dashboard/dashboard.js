/* The staff dashboard: draws the charts from the embedded data, then polls the JSON feed. */
(function () {
  "use strict";
  var script = document.getElementById("dashboard-script");
  var url = script.dataset.url;
  var pollMs = parseInt(script.dataset.poll, 10) || 5000;
  var form = document.getElementById("filters");
  var COLORS = {
    allowed: "#2e7d32", rate: "#c62828", budget: "#ef6c00", acl: "#6a1b9a",
    capacity: "#1565c0", banned: "#37474f", local: "#ad1457", shadow: "#9e9d24"
  };
  var PALETTE = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f"];
  var charts = {};
  var lastToday = null;
  var live = { labels: [], allowed: [], denied: [] };

  function el(tag, text, attrs) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  function fillTable(id, rows, cells) {
    var body = document.querySelector("#" + id + " tbody");
    body.replaceChildren();
    if (!rows.length) {
      var tr = el("tr");
      var td = el("td", "Nothing yet.", { colspan: document.querySelectorAll("#" + id + " th").length, "class": "empty" });
      tr.appendChild(td);
      body.appendChild(tr);
      return;
    }
    rows.forEach(function (row) {
      var tr = el("tr");
      cells(row).forEach(function (cell) {
        var td = el("td");
        if (cell instanceof Node) td.appendChild(cell); else td.textContent = cell === null ? "—" : String(cell);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function link(row) {
    var a = el("a", row.name, { href: row.url, "class": "client-link" });
    a.title = row.client;
    return a;
  }

  function chart(id, config) {
    if (charts[id]) {
      charts[id].data = config.data;
      charts[id].update("none");
      return charts[id];
    }
    config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options);
    charts[id] = new Chart(document.getElementById(id), config);
    return charts[id];
  }

  // Chart labels in the viewer's time zone (as glance.js writes times): minutes and hours are UTC instants,
  // days are UTC dates (the usage rows' days), shown as they are.
  var LABEL_FORMATS = {
    minute: new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" }),
    hour: new Intl.DateTimeFormat(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit" }),
    day: new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" })
  };
  var TITLES = { minute: "Requests per minute, last hour", hour: "Requests per hour", day: "Requests per day" };

  function labelOf(resolution, iso) {
    var when = new Date(resolution === "day" ? iso + "T00:00:00Z" : iso);
    return isNaN(when) ? iso : LABEL_FORMATS[resolution].format(when);
  }

  function percent(rate) { return (rate * 100).toFixed(rate < 0.1 ? 1 : 0) + " %"; }

  function drawTraffic(c) {
    var labels = c.labels.map(function (iso) { return labelOf(c.resolution, iso); });
    var datasets = [{ label: "allowed", data: c.allowed, backgroundColor: COLORS.allowed, stack: "requests" }];
    Object.keys(c.denied).forEach(function (reason) {
      var isShadow = reason === "shadow";
      datasets.push({
        label: isShadow ? "shadow would deny" : "denied: " + reason,
        data: c.denied[reason],
        backgroundColor: COLORS[reason],
        borderColor: COLORS[reason],
        type: isShadow ? "line" : "bar",
        stack: isShadow ? "shadow" : "requests"
      });
    });
    document.getElementById("traffic-title").textContent =
      c.resolution === "hour" ? TITLES.hour + ", last " + (c.labels.length > 24 ? "7 days" : "24 hours") : TITLES[c.resolution];
    var notice = document.getElementById("range-notice");
    notice.textContent = c.notice || "";
    notice.hidden = !c.notice;
    chart("chart-traffic", {
      type: "bar",
      data: { labels: labels, datasets: datasets },
      options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } }
    });
  }

  function drawRates(c) {
    var threshold = c.alert.threshold, labels = c.labels.map(function (iso) { return labelOf(c.resolution, iso); });
    var datasets = [];
    [["plans", "plan: ", []], ["scopes", "scope: ", [6, 3]]].forEach(function (kind, k) {
      c.rates[kind[0]].forEach(function (line, i) {
        var color = PALETTE[(i + 3 * k) % PALETTE.length];
        var above = line.rates.map(function (r) { return r !== null && r > threshold; });
        datasets.push({
          label: kind[1] + line.name, data: line.rates, borderColor: color, borderDash: kind[2], spanGaps: true,
          pointBackgroundColor: above.map(function (a) { return a ? COLORS.rate : color; }),
          pointBorderColor: above.map(function (a) { return a ? COLORS.rate : color; }),
          pointRadius: above.map(function (a) { return a ? 4 : 1.5; })
        });
      });
    });
    datasets.push({
      label: "alert threshold", data: labels.map(function () { return threshold; }), borderColor: COLORS.rate,
      borderDash: [4, 4], borderWidth: 1.5, pointRadius: 0
    });
    chart("chart-rates", {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: { scales: { y: { min: 0, max: 1, ticks: { callback: function (v) { return percent(v); } } } } }
    });
    document.getElementById("alert-threshold").textContent = percent(threshold);
    fillTable("rate-alerts", c.alert.above, function (r) {
      return [r.kind + ": " + r.name, el("span", percent(r.rate), { "class": "badge over" }),
        r.refused + " / " + r.requests, labelOf(c.resolution, r.at)];
    });
  }

  function todayOf(data) {
    var s = data.series, i = s.labels.length - 1, denied = 0;
    Object.keys(s.denied).forEach(function (r) { if (r !== "shadow") denied += s.denied[r][i]; });
    return { allowed: s.allowed[i], denied: denied };
  }

  function drawLive(data) {
    var now = todayOf(data);
    if (lastToday !== null) {
      live.labels.push(new Date().toLocaleTimeString());
      live.allowed.push(Math.max(0, now.allowed - lastToday.allowed));
      live.denied.push(Math.max(0, now.denied - lastToday.denied));
      if (live.labels.length > 720) { live.labels.shift(); live.allowed.shift(); live.denied.shift(); }
    }
    lastToday = now;
    chart("chart-live", {
      type: "line",
      data: {
        labels: live.labels.slice(),
        datasets: [
          { label: "allowed", data: live.allowed.slice(), borderColor: COLORS.allowed, tension: 0.2 },
          { label: "denied", data: live.denied.slice(), borderColor: COLORS.rate, tension: 0.2 }
        ]
      },
      options: { scales: { y: { beginAtZero: true } } }
    });
  }

  function drawAdaptive(adaptive) {
    fillTable("multipliers", adaptive.plans, function (p) {
      return [p.name, p.multiplier.toFixed(2), p.computed.toFixed(2)];
    });
    document.getElementById("adaptive-mode").textContent = adaptive.mode === "enforce"
      ? "Enforcing: the computed multipliers are applied."
      : "Observing: the computed multipliers are shown, not applied (QUOTAS['ADAPTIVE']['MODE'] = 'enforce' applies them).";
    var dl = document.getElementById("signals");
    dl.replaceChildren();
    adaptive.signals.forEach(function (signal) {
      dl.appendChild(el("dt", signal.name));
      dl.appendChild(el("dd", signal.note ? signal.value + " (" + signal.note + ")" : signal.value));
    });
    if (!adaptive.signals.length) dl.appendChild(el("dd", "No snapshot recorded yet."));
    document.getElementById("adaptive-reason").textContent =
      (adaptive.readable ? "" : "Redis unreadable: multipliers unknown. ") + (adaptive.reason || "");
    var names = adaptive.plans.map(function (p) { return p.name; });
    chart("chart-adaptive", {
      type: "line",
      data: {
        labels: adaptive.history.map(function (h) { return h.at.slice(5, 16).replace("T", " "); }),
        datasets: names.map(function (name, i) {
          return {
            label: name, stepped: true, borderColor: PALETTE[i % PALETTE.length],
            data: adaptive.history.map(function (h) { return h.multipliers[name]; })
          };
        })
      },
      options: { scales: { y: { min: 0, max: 1 } } }
    });
  }

  function render(data) {
    var updated = document.getElementById("updated");
    updated.setAttribute("datetime", data.generated_at);
    updated.title = new Date(data.generated_at).toISOString().replace("T", " ").slice(0, 19) + " UTC";
    window.glance.localize(updated.parentNode);
    document.getElementById("updated").dataset.polls = String((parseInt(document.getElementById("updated").dataset.polls || "0", 10)) + 1);
    document.getElementById("live-state").textContent = data.live ? "live" : "flushed usage only (Redis unavailable)";
    Object.keys(data.totals).forEach(function (k) {  // a card per total: Denied and each refusal kind
      var card = document.getElementById("total-" + k);
      if (card) { card.textContent = data.totals[k]; }
    });
    drawTraffic(data.charts);
    drawRates(data.charts);
    drawLive(data);
    fillTable("top-clients", data.top_clients, function (r) { return [link(r), r.plan, r.denied, r.allowed]; });
    fillTable("top-scopes", data.top_scopes, function (r) { return [r.scope || "(none)", r.denied, r.allowed]; });
    fillTable("upgrades", data.upgrades, function (r) {
      var by = [];
      if (r.denied_by.rate) by.push(r.denied_by.rate + " rate limit");
      if (r.denied_by.budget) by.push(r.denied_by.budget + " budget");
      var scope = r.scope ? "; most in " + r.scope : "";
      return [link(r), r.plan, r.denied + " (" + by.join(", ") + scope + ")", r.upgrade_to, "+" + r.revenue_difference_text];
    });
    fillTable("budgets", data.budgets, function (r) {
      var badge = el("span", r.over ? "over" : Math.round(r.used * 100) + " %", { "class": r.over ? "badge over" : "badge near" });
      return [r.name, r.budget, r.spent_text, r.amount_text, badge];
    });
    drawAdaptive(data.adaptive);
  }

  function query() {
    return new URLSearchParams(new FormData(form)).toString();
  }

  function refresh() {
    return fetch(url + "?" + query(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(render)
      .catch(function (err) { document.getElementById("live-state").textContent = "refresh failed (" + err.message + ")"; });
  }

  form.addEventListener("change", function () {
    lastToday = null;
    live = { labels: [], allowed: [], denied: [] };
    history.replaceState(null, "", "?" + query());
    refresh();
  });
  render(JSON.parse(document.getElementById("dashboard-data").textContent));
  document.body.dataset.ready = "1";
  setInterval(refresh, pollMs);
})();
