#include "aggregator/status_page.h"

namespace tributary::agg {

std::string_view status_page_html() {
  static constexpr std::string_view k_page = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tributary status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d232a; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  #meta { color: #5b6570; margin-bottom: 1em; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
  th { background: #f4f6f8; font-weight: 600; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .state { display: inline-block; padding: 0 .5em; border-radius: .6em; font-size: .9em; }
  .idle { background: #e3f4e8; color: #17612f; }
  .syncing { background: #e2edfb; color: #1a4f8f; }
  .failing { background: #fbe4e4; color: #8f1a1a; }
  .disabled { background: #eceef0; color: #5b6570; }
  .bar { width: 10em; height: .8em; background: #e3e6ea; border-radius: .4em; overflow: hidden; }
  .bar > div { height: 100%; background: #2f6fbd; }
  .error { color: #8f1a1a; max-width: 30em; overflow-wrap: anywhere; }
  .held { color: #6b4a00; font-weight: bold; margin-top: 0.3em; }
  #problem { color: #8f1a1a; }
  h2 { font-size: 1.1em; margin: 1.5em 0 .4em; }
  #push table { margin-bottom: 1em; }
</style>
</head>
<body>
<h1>Tributary</h1>
<div id="meta">loading…</div>
<div id="problem"></div>
<table>
  <thead><tr><th>Source</th><th>State</th><th>Lag</th><th>Resources</th><th>Deleted</th><th>Bytes</th>
  <th>Last success</th><th>Progress</th><th>Last error</th></tr></thead>
  <tbody id="sources"></tbody>
</table>
<div id="push" hidden>
<h2>Push (WebSub)</h2>
<table>
  <thead><tr><th>Subscribed to</th><th>Topic</th><th>State</th><th>Lease until</th><th>Last notification</th>
  <th>Accepted</th><th>Ignored</th><th>Note</th></tr></thead>
  <tbody id="subscriptions"></tbody>
</table>
<table>
  <thead><tr><th>Our subscriber</th><th>Topic</th><th>Lease until</th><th>Delivered</th><th>Last delivery</th>
  <th>Failed</th><th>Last error</th></tr></thead>
  <tbody id="subscribers"></tbody>
</table>
</div>
<script>
"use strict";
function text(tag, value, cls) {
  const el = document.createElement(tag);
  el.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) el.className = cls;
  return el;
}
function duration(s) {
  if (s === null || s === undefined) return "–";
  s = Math.round(s);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " d";
}
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}
function row(s) {
  const tr = document.createElement("tr");
  tr.dataset.source = s.name;
  tr.appendChild(text("td", s.name));
  const st = document.createElement("td");
  st.appendChild(text("span", s.state, "state " + s.state));
  if (s.running_on || s.last_node) {
    st.appendChild(text("div", (s.running_on ? "running on " + s.running_on : "last on " + s.last_node), "node"));
  }
  tr.appendChild(st);
  tr.appendChild(text("td", duration(s.lag.seconds) +
      (s.lag.unapplied_changes ? " (" + s.lag.unapplied_changes + " pending)" : ""), "num"));
  tr.appendChild(text("td", s.resources.live + (s.resources.retrying ? " (" + s.resources.retrying + " retrying)" : ""),
      "num"));
  tr.appendChild(text("td", s.resources.deleted, "num"));
  tr.appendChild(text("td", bytes(s.bytes), "num"));
  tr.appendChild(text("td", s.last_success ? s.last_success.finished_at : "never"));
  const progress = document.createElement("td");
  if (s.job) {
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("div");
    fill.style.width = (s.job.total ? Math.min(100, 100 * s.job.done / s.job.total) : 0) + "%";
    bar.appendChild(fill);
    progress.appendChild(bar);
    progress.appendChild(text("div", s.job.mode + " " + s.job.done + "/" + s.job.total +
        (s.job.eta_seconds !== null ? ", ETA " + duration(s.job.eta_seconds) : "")));
  }
  tr.appendChild(progress);
  const problems = text("td", s.last_failure ? s.last_failure.finished_at + ": " + s.last_failure.error : "", "error");
  for (const h of s.deletions_held || []) {
    problems.appendChild(text("div", "deletions held (" + h.capability_list + "): " + h.reason + " (" + h.confirm +
        (h.confirmed ? ", confirmed: the next baseline applies them)" : ")"), "held"));
  }
  tr.appendChild(problems);
  return tr;
}
function cells(values, cls) {
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  for (const v of values) tr.appendChild(text("td", v));
  return tr;
}
function push(p) {
  const box = document.getElementById("push");
  if (!p || (!p.subscriptions.length && !p.subscribers.length)) { box.hidden = true; return; }
  box.hidden = false;
  document.getElementById("subscriptions").replaceChildren(...p.subscriptions.map(s => {
    const tr = cells([s.source, s.topic, "", s.expires_at || "–", s.last_notification_at || "never",
                      s.notifications, s.ignored, s.last_note]);
    tr.dataset.subscription = s.source;
    tr.children[2].appendChild(text("span", s.state, "state " + (s.state === "active" ? "idle" : "syncing")));
    return tr;
  }));
  document.getElementById("subscribers").replaceChildren(...p.subscribers.map(s => {
    const tr = cells([s.callback, s.topic, s.expires_at, s.deliveries, s.delivered_at || "never",
                      s.deliveries_failed + (s.consecutive_failures ? " (" + s.consecutive_failures + " in a row)" : ""),
                      s.last_error]);
    tr.dataset.subscriber = s.callback;
    return tr;
  }));
}
async function refresh() {
  try {
    const response = await fetch("api/v1/status", {cache: "no-store"});
    const body = await response.json();
    if (!body.ok) throw new Error(body.error.message);
    const d = body.data;
    document.getElementById("meta").textContent =
        "version " + d.version + " · up " + duration(d.uptime_seconds) + " · " + d.sources.length + " sources · " + d.now;
    const tbody = document.getElementById("sources");
    tbody.replaceChildren(...d.sources.map(row));
    push(d.push);
    document.getElementById("problem").textContent = "";
  } catch (e) {
    document.getElementById("problem").textContent = "status unavailable: " + e.message;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
)HTML";
  return k_page;
}

} // namespace tributary::agg
