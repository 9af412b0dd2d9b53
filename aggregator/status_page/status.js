"use strict";
// Everything here is served by Tributary itself: no framework, no CDN.
const path = location.pathname;
const detailMatch = path.match(/\/status\/sources\/([^/]+)$/);
const root = path.replace(/status(\/sources\/[^/]*)?$/, "");
const api = p => root + "api/v1/" + p;
const RANKS = {failing: 0, lagging: 1, paused: 2, in_sync: 3, disabled: 4};
const LABELS = {in_sync: "in sync", lagging: "lagging", failing: "failing", paused: "paused", disabled: "disabled"};

const KINDS = {
  "resourcesync": "ResourceSync with Change Lists",
  "resource-list-only": "a Resource List only (compared at every run; its changes become our Change List)",
  "plain-sitemap": "a plain sitemap (compared at every run; its changes become our Change List)",
};
function el(tag, value, cls) {
  const e = document.createElement(tag);
  e.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) e.className = cls;
  return e;
}
function duration(s) {
  if (s === null || s === undefined) return "–";
  const neg = s < 0; s = Math.abs(Math.round(s));
  let t;
  if (s < 120) t = s + " s"; else if (s < 7200) t = Math.round(s / 60) + " min";
  else if (s < 172800) t = Math.round(s / 3600) + " h"; else t = Math.round(s / 86400) + " d";
  return neg ? "in " + t : t;
}
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}
function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en"); }
function ago(iso, now) { return iso ? duration((Date.parse(now) - Date.parse(iso)) / 1000) + " ago" : "never"; }
// A run's message leads with its counts; the list shows its first error.
function firstError(m) { const at = m ? m.indexOf("first error: ") : -1; return at < 0 ? m : m.slice(at + 13); }
function clip(t, n) { return t && t.length > n ? t.slice(0, n) + "…" : t; }
function hostLabel(h) { return h ? h.replace(/^https?:\/\//, "") : "–"; }
// A sparkline of `values` (nulls leave gaps) as inline SVG.
function spark(values, cls, w, h, title) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark " + cls);
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  const t = document.createElementNS(ns, "title"); t.textContent = title; svg.appendChild(t);
  const base = document.createElementNS(ns, "line");
  base.setAttribute("class", "base"); base.setAttribute("x1", 0); base.setAttribute("x2", w);
  base.setAttribute("y1", h - 0.5); base.setAttribute("y2", h - 0.5); svg.appendChild(base);
  const max = Math.max(1, ...values.filter(v => v !== null));
  const step = values.length > 1 ? w / (values.length - 1) : w;
  let points = [];
  const flush = () => {
    if (points.length === 1) points.push([points[0][0] + 1, points[0][1]]);
    if (points.length) {
      const p = document.createElementNS(ns, "polyline");
      p.setAttribute("class", "line");
      p.setAttribute("points", points.map(q => q[0].toFixed(1) + "," + q[1].toFixed(1)).join(" "));
      svg.appendChild(p);
    }
    points = [];
  };
  values.forEach((v, i) => {
    if (v === null) { flush(); return; }
    points.push([i * step, h - 1 - (h - 2) * v / max]);
  });
  flush();
  return svg;
}
function setProblem(msg) { document.getElementById("problem").textContent = msg || ""; }
async function get(p) {
  const response = await fetch(api(p), {cache: "no-store"});
  const body = await response.json();
  if (!body.ok) throw new Error(body.error.message);
  return body.data;
}
function syncBadge(s) {
  const b = el("span", LABELS[s.state] || s.state, "sync " + s.state);
  if (s.state_reason) b.title = s.state_reason;
  return b;
}

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
// Changes per minute over the last hour, from the history.
function rateOf(name) {
  const h = historyOf(name);
  if (!h) return null;
  const per = view.history.step_seconds;
  const n = Math.max(1, Math.round(3600 / per));
  const recent = h.changes.slice(-n);
  return recent.reduce((a, b) => a + b, 0) / (n * per / 60);
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
  return h.measured_rate.toFixed(1) + " req/s, window " + h.window +
      (h.rate_limit !== null ? ", limited to " + h.rate_limit.toFixed(1) + "/s" : "");
}
function hostCell(s) {
  const td = el("td", hostLabel(s.host));
  const h = view.hosts.get(s.host);
  if (h) {
    td.appendChild(el("div", hostRate(h), "sub"));
    if (h.paused_until) td.appendChild(el("div", "paused until " + h.paused_until, "throttled"));
    if (h.throttled || h.rate_limit !== null) td.appendChild(el("div", h.reason, "throttled"));
  }
  return td;
}
function sourceRow(s, now) {
  const tr = document.createElement("tr");
  tr.dataset.source = s.name;
  tr.dataset.syncState = s.state;
  const name = document.createElement("td");
  const a = el("a", s.name); a.href = root + "status/sources/" + encodeURIComponent(s.name);
  name.appendChild(a);
  tr.appendChild(name);
  const st = document.createElement("td");
  st.appendChild(syncBadge(s));
  st.appendChild(el("span", s.activity, "activity " + s.activity));
  if (s.state_reason) st.appendChild(el("div", s.state_reason, "why"));
  if (s.running_on || s.last_node) {
    st.appendChild(el("div", (s.running_on ? "running on " + s.running_on : "last on " + s.last_node), "node"));
  }
  if (s.job) {
    const bar = document.createElement("div"); bar.className = "bar";
    const fill = document.createElement("div");
    fill.style.width = (s.job.total ? Math.min(100, 100 * s.job.done / s.job.total) : 0) + "%";
    bar.appendChild(fill); st.appendChild(bar);
    st.appendChild(el("div", s.job.mode + " " + s.job.done + "/" + s.job.total +
        (s.job.eta_seconds !== null ? ", ETA " + duration(s.job.eta_seconds) : ""), "sub"));
  }
  tr.appendChild(st);
  const h = historyOf(s.name);
  const lag = el("td", duration(s.lag.seconds) + (s.lag.unapplied_changes ? " (" + s.lag.unapplied_changes + " pending)" : ""), "num");
  if (h) lag.appendChild(spark(h.lag_seconds, "lag", 120, 22, "lag, worst per " + h.lag_seconds.length + "th of 24 h"));
  tr.appendChild(lag);
  const rate = rateOf(s.name);
  const changes = el("td", rate === null ? "–" : rate.toFixed(rate < 10 ? 1 : 0), "num");
  if (h) changes.appendChild(spark(h.changes, "changes", 120, 22, "changes per " + view.history.step_seconds / 60 + " min"));
  tr.appendChild(changes);
  tr.appendChild(el("td", num(s.resources.live) + (s.resources.retrying ? " (" + num(s.resources.retrying) + " retrying)" : ""), "num"));
  tr.appendChild(hostCell(s));
  const next = el("td", s.next_run_at ? duration((Date.parse(now) - Date.parse(s.next_run_at)) / 1000 * -1) : "–");
  if (s.next_run_at && Date.parse(s.next_run_at) <= Date.parse(now)) next.textContent = s.job ? "running" : "due";
  if (s.queued) next.appendChild(el("div", s.queued + " queued", "sub"));
  tr.appendChild(next);
  tr.appendChild(el("td", s.last_success ? ago(s.last_success.finished_at, now) : "never"));
  const problems = el("td", s.last_failure ? ago(s.last_failure.finished_at, now) + ": " + clip(firstError(s.last_failure.error), 160) : "", "error");
  if (s.last_failure) problems.title = s.last_failure.error;
  for (const hd of s.deletions_held || []) {
    problems.appendChild(el("div", "deletions held (" + hd.capability_list + "): " + hd.reason + " (" + hd.confirm +
        (hd.confirmed ? ", confirmed: the next baseline applies them)" : ")"), "held"));
  }
  tr.appendChild(problems);
  return tr;
}
function renderSummary(d) {
  const counts = {in_sync: 0, lagging: 0, failing: 0, paused: 0, disabled: 0};
  for (const s of d.sources) counts[s.state] = (counts[s.state] || 0) + 1;
  let total = null;
  for (const s of d.sources) { const r = rateOf(s.name); if (r !== null) total = (total || 0) + r; }
  const box = document.getElementById("summary");
  box.replaceChildren();
  box.appendChild(el("b", d.sources.length)); box.append(" sources: ");
  ["in_sync", "lagging", "failing", "paused", "disabled"].forEach((k, i) => {
    if (i) box.append(" · ");
    const b = document.createElement("button");
    b.dataset.count = k;
    b.appendChild(el("b", counts[k])); b.append(" " + LABELS[k]);
    b.className = counts[k] && k !== "in_sync" ? "sync " + k : "";
    b.onclick = () => { view.state = view.state === k ? "" : k; document.getElementById("state-filter").value = view.state; render(); };
    box.appendChild(b);
  });
  box.append(" · ");
  box.appendChild(el("b", total === null ? "–" : num(Math.round(total)), "")).id = "total-rate";
  box.append(" changes/min (last hour)");
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
  document.getElementById("sources").replaceChildren(...rows.map(s => sourceRow(s, d.now)));
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
    const tr = cells([s.source, s.topic, "", s.expires_at || "–", s.last_notification_at || "never",
                      s.notifications, s.ignored, s.last_note]);
    tr.dataset.subscription = s.source;
    tr.children[2].appendChild(el("span", s.state, "state " + (s.state === "active" ? "idle" : "syncing")));
    return tr;
  }));
  document.getElementById("subscribers").replaceChildren(...p.subscribers.map(s => {
    const tr = cells([s.callback, s.topic, s.expires_at, s.deliveries, s.delivered_at || "never",
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
      "version " + d.version + " · up " + duration(d.uptime_seconds) + " · " + d.sources.length + " sources · " + d.now;
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

// ---- one source ------------------------------------------------------------
const detailName = detailMatch ? decodeURIComponent(detailMatch[1]) : null;
function fact(dl, name, value) {
  dl.appendChild(el("dt", name));
  const dd = document.createElement("dd");
  if (value instanceof Node) dd.appendChild(value); else dd.textContent = value === null || value === undefined ? "–" : value;
  dl.appendChild(dd);
  return dd;
}
function rows(id, items, make, empty) {
  const body = document.getElementById(id);
  if (!items.length) {
    const tr = document.createElement("tr");
    const td = el("td", empty, "empty");
    td.colSpan = body.parentElement.querySelectorAll("th").length;
    tr.appendChild(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...items.map(make));
}
function renderCharts() {
  const h = view.history && view.history.sources[0];
  if (!h) return;
  const lags = h.lag_seconds.filter(v => v !== null);
  const total = h.changes.reduce((a, b) => a + b, 0);
  document.getElementById("lag-chart").replaceChildren(spark(h.lag_seconds, "lag", 480, 70, "lag over 24 h"));
  document.getElementById("changes-chart").replaceChildren(spark(h.changes, "changes", 480, 70, "changes over 24 h"));
  document.getElementById("lag-caption").textContent = "lag over 24 h (worst " +
      (lags.length ? duration(Math.max(...lags)) : "–") + ", now " + (lags.length ? duration(lags[lags.length - 1]) : "–") + ")";
  document.getElementById("changes-caption").textContent = "changes per 5 min over 24 h (" + num(total) + " in all)";
}
function renderDetail(d, now) {
  const s = d.source;
  document.title = s.name + " · Tributary";
  const title = document.getElementById("source-title");
  title.replaceChildren(el("span", s.name + " "), syncBadge(s), el("span", " "), el("span", s.activity, "activity " + s.activity));
  const dl = document.getElementById("facts");
  dl.replaceChildren();
  const link = el("a", s.url); link.href = s.url;
  fact(dl, "Source", link);
  fact(dl, "Publishes", KINDS[s.kind] || "not known yet");
  if (s.clock_ahead_seconds) fact(dl, "Source's clock", "ahead by " + duration(s.clock_ahead_seconds) + " (its future-dated changes are applied; the watermark waits)").className = "held";
  fact(dl, "In sync?", (LABELS[s.state] || s.state) + (s.state_reason ? ": " + s.state_reason : ""));
  fact(dl, "Lag", duration(s.lag.seconds) + (s.lag.unapplied_changes ? " (" + s.lag.unapplied_changes + " pending)" : ""));
  fact(dl, "Newest change applied", s.watermark);
  fact(dl, "Next run", s.next_run_at ? s.next_run_at + (s.queued ? " (" + s.queued + " queued)" : "") : "–");
  fact(dl, "Schedule", "every " + duration(s.interval_seconds) + (s.audit_interval_seconds ? ", audit every " + duration(s.audit_interval_seconds) : "") +
       ", strategy " + s.strategy);
  fact(dl, "Resources", num(s.resources.live) + " live, " + num(s.resources.deleted) + " deleted, " +
       num(s.resources.retrying) + " retrying, " + bytes(s.bytes));
  fact(dl, "Last success", s.last_success ? s.last_success.finished_at + " (" + ago(s.last_success.finished_at, now) + ")" : "never");
  fact(dl, "Consecutive failures", s.consecutive_failures);
  if (s.last_failure) fact(dl, "Last failure", s.last_failure.finished_at + ": " + s.last_failure.error).className = "error";
  const h = view.hosts.get(s.host);
  fact(dl, "Host", hostLabel(s.host) + (h ? " · " + hostRate(h) + (h.reason ? " · " + h.reason : "") : ""));
  if (s.job) fact(dl, "Running", s.job.mode + " " + s.job.done + "/" + s.job.total + " (" + s.job.document + ")");
  for (const hd of s.deletions_held) fact(dl, "Deletions held", hd.capability_list + ": " + hd.reason + " (" + hd.confirm + ")").className = "held";

  rows("feeds", d.feeds, f => {
    const tr = cells([f.capability_list, num(f.resources.live), num(f.resources.deleted), num(f.resources.retrying),
                      bytes(f.bytes), f.baseline_at || "never", f.change_list || "–",
                      f.watermark.datetime ? [f.watermark.datetime, f.watermark.uri, f.watermark.position].filter(v => v !== null).join(" · ") : "none yet"]);
    tr.dataset.feed = f.capability_list;
    tr.className = "wrap";
    return tr;
  }, "no feed yet: the source has not been discovered");
  rows("runs", d.runs, r => {
    const tr = cells([r.id, r.mode, "", r.started_at, r.duration_seconds !== undefined ? r.duration_seconds.toFixed(2) : "running",
                      r.counters.created, r.counters.updated, r.counters.deleted, r.counters.unchanged, r.counters.failed,
                      r.node || "–", r.message]);
    tr.children[2].appendChild(el("span", r.status, "state " + ({succeeded: "idle", partial: "lagging", failed: "failing"}[r.status] || "syncing")));
    tr.dataset.run = r.id;
    return tr;
  }, "no run yet");
  document.getElementById("errors-title").textContent = "Errors by kind (the newest " + num(d.errors.window) + " of the last runs)";
  rows("errors", d.errors.kinds, k => {
    const tr = document.createElement("tr");
    tr.dataset.kind = k.kind;
    tr.appendChild(el("td", k.kind));
    tr.appendChild(el("td", num(k.count), "num"));
    tr.appendChild(el("td", ago(k.last_at, now)));
    const urls = document.createElement("td");
    urls.className = "wrap";
    for (const u of k.example_urls) urls.appendChild(el("div", u));
    tr.appendChild(urls);
    tr.appendChild(el("td", k.example_reason, "error"));
    return tr;
  }, "no errors recorded");
  document.getElementById("retrying-title").textContent = "Retrying resources (" + num(d.retrying.total) + ")";
  rows("retrying", d.retrying.resources, r => {
    const tr = cells([r.uri, r.kind, r.reason, r.attempts, r.first_failed_at, r.next_attempt_at]);
    tr.className = "wrap";
    tr.dataset.uri = r.uri;
    return tr;
  }, "none");
  const sub = document.getElementById("subscription");
  if (!d.subscription) {
    sub.replaceChildren(el("p", "none: the source offers no notification channel we subscribe to, or push is off", "empty"));
  } else {
    const x = d.subscription;
    const sdl = document.createElement("dl"); sdl.className = "facts";
    fact(sdl, "State", el("span", x.state, "state " + (x.state === "active" ? "idle" : "syncing")));
    fact(sdl, "Topic", x.topic); fact(sdl, "Hub", x.hub);
    fact(sdl, "Signed", x.signed ? "yes" : "no");
    fact(sdl, "Lease until", x.expires_at); fact(sdl, "Verified", x.verified_at);
    fact(sdl, "Last notification", x.last_notification_at || "never");
    fact(sdl, "Notifications", x.notifications + " accepted, " + x.ignored + " ignored");
    if (x.last_note) fact(sdl, "Note", x.last_note);
    sub.replaceChildren(sdl);
    sub.dataset.state = x.state;
  }
}
async function refreshDetail() {
  try {
    const [d, st] = await Promise.all([get("sources/" + encodeURIComponent(detailName) + "/detail"), get("hosts")]);
    view.hosts = new Map(st.hosts.map(h => [h.host, h]));
    const now = new Date().toISOString();
    document.getElementById("meta").textContent = "source " + detailName + " · " + now;
    renderDetail(d, now);
    setProblem("");
  } catch (e) {
    setProblem("source unavailable: " + e.message);
  }
}
function startDetail() {
  document.getElementById("source-view").hidden = false;
  document.getElementById("home").href = root + "status";
  document.getElementById("back").href = root + "status";
  const q = "hours=24&step=300&source=" + encodeURIComponent(detailName);
  refreshDetail().then(() => refreshHistory(q));
  setInterval(refreshDetail, 5000);
  setInterval(() => refreshHistory(q), 60000);
}

if (detailName) startDetail(); else startList();
