// ---- every source --------------------------------------------------------
const view = {status: null, history: null, hosts: new Map(),
              sort: "state", dir: 1, q: "", state: "", host: ""};
function readQuery() {
  const q = new URLSearchParams(location.search);
  view.q = q.get("q") || ""; view.state = q.get("state") || ""; view.host = q.get("host") || "";
  view.sort = q.get("sort") || "state"; view.dir = q.get("dir") === "desc" ? -1 : 1;
  document.getElementById("q").value = view.q;
  document.getElementById("state-filter").value = view.state;
}
function writeQuery() {
  const q = new URLSearchParams();
  if (view.q) q.set("q", view.q);
  if (view.state) q.set("state", view.state);
  if (view.host) q.set("host", view.host);
  if (view.sort !== "state" || view.dir !== 1) { q.set("sort", view.sort); q.set("dir", view.dir < 0 ? "desc" : "asc"); }
  const s = q.toString();
  history.replaceState(null, "", path + (s ? "?" + s : ""));
}
function historyOf(name) {
  const h = view.history && view.history.sources.find(x => x.name === name);
  return h || null;
}
// Per minute over the last hour, from the history: over the time the
// history covers when that is less (a daemon up 2 minutes divides by 2,
// not 60); `key`: "changes" (incremental runs and audits) or "baseline"
// (resources a baseline stored, no upstream change). Buckets the window
// cuts count for their part in it.
function windowStart(h) {
  const per = view.history.step_seconds * 1000, from = Date.parse(view.history.from);
  const now = Date.parse(view.status ? view.status.now : new Date().toISOString());
  let first = Infinity;
  for (let i = 0; i < h.changes.length; i++) {
    if (h.lag_seconds[i] !== null || h.changes[i] || (h.baseline && h.baseline[i])) { first = from + i * per; break; }
  }
  // The data starts in its first bucket, or later: when this daemon started
  // within that bucket (rates from the first minute, not from the bucket's
  // start: 48/min shown for 62/min logged).
  const started = view.status && view.status.node && view.status.node.started_at
    ? Date.parse(view.status.node.started_at) : NaN;
  if (isFinite(first) && started > first && started < first + per) first = started;
  return {per, from, now, first, start: Math.max(now - 3600e3, first)};
}
function rateOf(name, key) {
  const h = historyOf(name);
  if (!h) return null;
  const w = windowStart(h);
  if (!isFinite(w.start) || w.now - w.start < 60e3) return null;
  let sum = 0;
  // A bucket's counts fall between its start (or the data's, when the data
  // began within it) and its end (or now): the window's start cuts that
  // span, not the whole bucket's (a daemon up 80 s counted 83/900 of its
  // first bucket: 22/min shown for 239/min logged).
  (h[key || "changes"] || []).forEach((c, i) => {
    const t0 = Math.max(w.from + i * w.per, w.first), t1 = Math.min(w.from + (i + 1) * w.per, w.now);
    if (!c || t1 <= w.start) return;
    sum += t1 > t0 ? c * Math.min(1, (t1 - Math.max(t0, w.start)) / (t1 - t0)) : c;
  });
  return sum / ((w.now - w.start) / 60000);
}
function sortValue(s, key) {
  switch (key) {
    case "name": return s.name;
    case "state": return RANKS[s.state] * 1e12 - (s.lag.seconds || 0);
    case "lag": return s.lag.seconds === null ? -1 : s.lag.seconds;
    case "rate": return rateOf(s.name) || 0;
    case "resources": return s.resources.live;
    case "host": return s.host || "";
    case "next": return s.next_run_at ? Date.parse(s.next_run_at) : Infinity;
    case "success": return s.last_success ? Date.parse(s.last_success.finished_at) : 0;
    case "error": return s.last_failure ? Date.parse(s.last_failure.finished_at) : 0;
  }
  return 0;
}
// A host's throttle in a few words: "12.5 req/s, window 8[, limited to 2.0/s]".
function hostRate(h) {
  // Over the last minute: the last second's rate is 0 between a source's runs.
  return h.minute_rate.toFixed(1) + " req/s, window " + h.window +
      (h.rate_limit !== null ? ", limited to " + h.rate_limit.toFixed(1) + "/s" : "");
}
function hostCell(s) {
  const td = el("td", hostLabel(s.host), "host");
  const h = view.hosts.get(s.host);
  if (h) {
    td.title = hostRate(h) + (h.reason ? " · " + h.reason : "");
    if (h.paused_until || h.throttled || h.rate_limit !== null) {
      const mark = el("span", " ⚠", "throttled");
      mark.title = (h.paused_until ? "paused until " + exact(h.paused_until) + " · " : "") + (h.reason || "throttled");
      td.appendChild(mark);
    }
  }
  return td;
}
// Whether our subscription to the source's notifications is active.
function pushedSources(d) {
  return new Set((d.push ? d.push.subscriptions : []).filter(x => x.state === "active").map(x => x.source));
}
// One line a source (about 28 px): the details are on hover and on its page.
function sourceRow(s, now, pushed, nodes) {
  const tr = document.createElement("tr");
  tr.dataset.source = s.name;
  tr.dataset.syncState = s.state;
  const name = document.createElement("td");
  const a = el("a", s.name); a.href = root + "status/sources/" + encodeURIComponent(s.name);
  name.appendChild(a);
  tr.appendChild(name);
  const st = document.createElement("td");
  st.appendChild(syncBadge(s));
  if (s.failing_since) {
    const since = el("span", " " + duration((Date.parse(now) - Date.parse(s.failing_since)) / 1000), "since");
    since.title = "failing since " + exact(s.failing_since);
    st.appendChild(since);
  }
  // A running job is a bar 3em wide, its words on hover: words here would
  // widen the column while a run lasts, and the list past 1,280 px with it.
  if (s.job) {
    const pct = s.job.total ? Math.min(100, Math.floor(100 * s.job.done / s.job.total)) : 0;
    const j = el("span", "", "job");
    j.title = s.activity + " · " + s.job.mode + " " + pct + "%: " + s.job.done + "/" + s.job.total +
              (s.job.eta_seconds !== null ? ", ETA " + duration(s.job.eta_seconds) : "");
    j.dataset.percent = pct;
    const done = document.createElement("span");
    done.style.width = pct + "%";
    j.appendChild(done);
    st.append(" "); st.appendChild(j);
  } else {
    const act = activityBadge(s);
    if (act) { st.append(" "); st.appendChild(act); }
  }
  // Which node: only when several share the database.
  if (nodes > 1 && (s.running_on || s.last_node)) {
    st.title = s.running_on ? "running on " + s.running_on : "last run on " + s.last_node;
  }
  tr.appendChild(st);
  const h = historyOf(s.name);
  const lag = el("td", duration(s.lag.seconds), "num");
  if (s.lag.unapplied_changes) lag.title = s.lag.unapplied_changes + " changes pending in the running job";
  if (h) lag.appendChild(spark(h.lag_seconds, "lag", 90, 16, "lag, the worst per " + view.history.step_seconds / 60 + " min over 24 h", v => duration(v)));
  tr.appendChild(lag);
  const rate = rateOf(s.name, "changes");
  const changes = el("td", rate === null ? "–" : rate.toFixed(rate < 10 ? 1 : 0), "num");
  if (h) changes.appendChild(spark(h.changes, "changes", 90, 16, "changes per " + view.history.step_seconds / 60 + " min over 24 h", v => num(v)));
  tr.appendChild(changes);
  const res = el("td", num(s.resources.live), "num");
  if (s.resources.retrying) res.appendChild(el("span", " +" + num(s.resources.retrying) + " retrying", "sub"));
  tr.appendChild(res);
  tr.appendChild(hostCell(s));
  const next = document.createElement("td");
  next.appendChild(nextRun(s, pushed.has(s.name), now));
  tr.appendChild(next);
  const ok = document.createElement("td");
  ok.appendChild(s.last_success ? when(s.last_success.finished_at, now) : el("span", "never"));
  tr.appendChild(ok);
  const problems = el("td", "", "error");
  if (s.last_failure) {
    problems.appendChild(when(s.last_failure.finished_at, now));
    problems.append(": " + s.last_failure.error);
    problems.title = s.last_failure.error;
  }
  for (const hd of s.deletions_held || []) {
    const held = el("span", " deletions held", "held");
    held.title = hd.capability_list + ": " + hd.reason + (hd.confirmed ? " (confirmed: the next baseline applies them)" : "");
    problems.appendChild(held);
  }
  tr.appendChild(problems);
  return tr;
}
function renderSummary(d) {
  const counts = {in_sync: 0, lagging: 0, attention: 0, failing: 0, paused: 0, disabled: 0};
  for (const s of d.sources) counts[s.state] = (counts[s.state] || 0) + 1;
  let total = null, stored = null, minutes = null;
  for (const s of d.sources) {
    const r = rateOf(s.name, "changes");
    if (r !== null) total = (total || 0) + r;
    const b = rateOf(s.name, "baseline");
    if (b !== null) stored = (stored || 0) + b;
    const h = historyOf(s.name);
    if (h) { const w = windowStart(h); if (isFinite(w.start)) minutes = Math.max(minutes || 0, (w.now - w.start) / 60000); }
  }
  const box = document.getElementById("summary");
  box.replaceChildren();
  box.appendChild(el("b", d.sources.length)); box.append(" sources: ");
  ["in_sync", "lagging", "attention", "failing", "paused", "disabled"].forEach((k, i) => {
    if (i) box.append(" · ");
    const b = document.createElement("button");
    b.dataset.count = k;
    b.appendChild(el("b", counts[k])); b.append(" " + LABELS[k]);
    b.className = counts[k] && k !== "in_sync" ? "sync " + k : "";
    b.onclick = () => { view.state = view.state === k ? "" : k; document.getElementById("state-filter").value = view.state; render(); };
    box.appendChild(b);
  });
  box.append(" · ");
  box.appendChild(el("b", total === null ? "–" : num(total < 10 ? Math.round(total * 10) / 10 : Math.round(total)), "")).id = "total-rate";
  const over = minutes === null ? "" : minutes >= 59 ? " (last hour)" : " (last " + Math.max(1, Math.round(minutes)) + " min)";
  box.append(" changes/min" + over);
  if (stored) {
    box.append(" · ");
    box.appendChild(el("b", num(Math.round(stored)))).id = "baseline-rate";
    box.append(" resources/min stored by baselines");
  }
}
function renderHosts(d) {
  const sel = document.getElementById("host-filter");
  const hosts = [...new Set(d.sources.map(s => s.host).filter(Boolean))].sort();
  const have = [...sel.options].slice(1).map(o => o.value);
  if (have.join("\n") !== hosts.join("\n")) {
    sel.replaceChildren(el("option", "every host"));
    sel.options[0].value = "";
    for (const h of hosts) { const o = el("option", hostLabel(h)); o.value = h; sel.appendChild(o); }
  }
  sel.value = view.host;
}
function render() {
  const d = view.status;
  if (!d) return;
  writeQuery();
  renderSummary(d);
  renderHosts(d);
  const q = view.q.toLowerCase();
  const rows = d.sources.filter(s => (!q || s.name.toLowerCase().includes(q)) &&
                                     (!view.state || s.state === view.state) &&
                                     (!view.host || s.host === view.host));
  rows.sort((a, b) => {
    const x = sortValue(a, view.sort), y = sortValue(b, view.sort);
    return (x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : 1) * view.dir;
  });
  const pushed = pushedSources(d);
  const nodes = new Set(d.sources.map(s => s.last_node).filter(Boolean)).size;
  document.getElementById("sources").replaceChildren(...rows.map(s => sourceRow(s, d.now, pushed, nodes)));
  document.getElementById("shown").textContent = rows.length === d.sources.length ?
      "showing all " + rows.length : "showing " + rows.length + " of " + d.sources.length;
  for (const th of document.querySelectorAll("#source-table th[data-key]")) {
    if (th.dataset.key === view.sort) th.setAttribute("aria-sort", view.dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
  push(d.push);
}
function cells(values, cls) {
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  for (const v of values) tr.appendChild(el("td", v));
  return tr;
}
function push(p) {
  const box = document.getElementById("push");
  if (!p || (!p.subscriptions.length && !p.subscribers.length)) { box.hidden = true; return; }
  box.hidden = false;
  document.getElementById("subscriptions").replaceChildren(...p.subscriptions.map(s => {
    const tr = cells([s.source, s.topic, "", exact(s.expires_at) || "–", exact(s.last_notification_at) || "never",
                      s.notifications, s.ignored, s.last_note]);
    tr.dataset.subscription = s.source;
    tr.children[2].appendChild(el("span", s.state, "state " + (s.state === "active" ? "idle" : "syncing")));
    return tr;
  }));
  document.getElementById("subscribers").replaceChildren(...p.subscribers.map(s => {
    const tr = cells([s.callback, s.topic, exact(s.expires_at), s.deliveries, exact(s.delivered_at) || "never",
                      s.deliveries_failed + (s.consecutive_failures ? " (" + s.consecutive_failures + " in a row)" : ""),
                      s.last_error]);
    tr.dataset.subscriber = s.callback;
    return tr;
  }));
  document.getElementById("subscribers-count").textContent =
    p.subscribers.length < p.subscribers_total
      ? p.subscribers.length + " of " + p.subscribers_total + " shown (failing first); " + p.subscribers_failing + " failing"
      : p.subscribers_total + " subscribers, " + p.subscribers_failing + " failing";
}
function meta(d) {
  document.getElementById("meta").textContent =
      "version " + d.version + " · up " + duration(d.uptime_seconds) + " · " + d.sources.length + " sources · " + exact(d.now) +
      (d.reload ? " · last reload " + exact(d.reload.at) + (d.reload.ok ? "" : ": refused (" + d.reload.error + ")") : "");
}
async function refreshList() {
  try {
    const d = await get("status");
    view.status = d;
    view.hosts = new Map(d.hosts.map(h => [h.host, h]));
    meta(d);
    render();
    const disk = d.node && d.node.disk;
    setProblem(disk && disk.full ? "the data directory's disk is full since " + disk.since + " (" + num(disk.free_bytes) +
               " bytes free): every run is paused until space returns" : "");
  } catch (e) {
    setProblem("status unavailable: " + e.message);
  }
}
async function refreshHistory(query) {
  try {
    view.history = await get("history?" + query);
    if (detailMatch) renderCharts(); else render();
  } catch (e) {
    setProblem("history unavailable: " + e.message);
  }
}
function startList() {
  document.getElementById("list-view").hidden = false;
  readQuery();
  document.getElementById("q").addEventListener("input", e => { view.q = e.target.value; render(); });
  document.getElementById("state-filter").addEventListener("change", e => { view.state = e.target.value; render(); });
  document.getElementById("host-filter").addEventListener("change", e => { view.host = e.target.value; render(); });
  for (const th of document.querySelectorAll("#source-table th[data-key]")) {
    th.addEventListener("click", () => {
      if (view.sort === th.dataset.key) view.dir = -view.dir; else { view.sort = th.dataset.key; view.dir = 1; }
      render();
    });
  }
  // The list first, then the sparklines (a larger answer, once a minute).
  refreshList().then(() => refreshHistory("hours=24&step=900"));
  setInterval(refreshList, 5000);
  setInterval(() => refreshHistory("hours=24&step=900"), 60000);
}

