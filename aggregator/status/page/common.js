"use strict";
// Everything here is served by Tributary itself: no framework, no CDN.
const path = location.pathname;
const detailMatch = path.match(/\/status\/sources\/([^/]+)$/);
const root = path.replace(/status(\/sources\/[^/]*)?$/, "");
const api = p => root + "api/v1/" + p;
const RANKS = {failing: 0, attention: 1, lagging: 2, paused: 3, in_sync: 4, disabled: 5};
const LABELS = {in_sync: "in sync", lagging: "lagging", attention: "needs attention", failing: "failing", paused: "paused",
                disabled: "disabled"};

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
// The exact time, as the reader's clock shows it ("2026-11-26 09:14:03").
function exact(iso) {
  if (!iso) return "";
  const t = new Date(Date.parse(iso)), p = n => String(n).padStart(2, "0");
  return t.getFullYear() + "-" + p(t.getMonth() + 1) + "-" + p(t.getDate()) + " " + p(t.getHours()) + ":" +
      p(t.getMinutes()) + ":" + p(t.getSeconds());
}
// A time relative to `now` ("3 min ago", "in 54 min"), exact on hover.
function when(iso, now, never) {
  if (!iso) return el("span", never === undefined ? "never" : never);
  const s = (Date.parse(now) - Date.parse(iso)) / 1000;
  const t = el("time", s >= 0 ? duration(s) + " ago" : "in " + duration(-s));
  t.dateTime = iso; t.title = exact(iso);
  return t;
}
function clip(t, n) { return t && t.length > n ? t.slice(0, n) + "…" : t; }
function hostLabel(h) { return h ? h.replace(/^https?:\/\//, "") : "–"; }
// A sparkline of `values` (nulls leave gaps) as inline SVG, with its scale
// (the largest value, as `scale` writes it) in its corner.
function spark(values, cls, w, h, title, scale) {
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
  if (scale) {
    const label = document.createElementNS(ns, "text");
    label.setAttribute("class", "scale"); label.setAttribute("x", w - 1); label.setAttribute("y", 7);
    label.setAttribute("text-anchor", "end");
    label.textContent = scale(max);
    svg.appendChild(label);
  }
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
// What the scheduler is doing, when it says more than the state does.
function activityBadge(s) {
  return ["syncing", "busy", "waiting"].includes(s.activity) ? el("span", s.activity, "activity " + s.activity) : null;
}
// The next run in words: when, and why then (backing off, pushed, paused).
function nextRun(s, pushed, now) {
  if (s.state === "disabled") return el("span", "–");
  if (s.paused) { const p = el("span", "paused"); p.title = "by " + s.paused.by + (s.paused.reason ? ": " + s.paused.reason : ""); return p; }
  if (s.job) return el("span", "running");
  const due = !s.next_run_at || Date.parse(s.next_run_at) <= Date.parse(now);
  const span = document.createElement("span");
  if (due) span.appendChild(el("span", s.queued ? s.queued + " queued" : "due"));
  else span.appendChild(when(s.next_run_at, now));
  if (s.activity === "backing_off") {
    span.appendChild(el("span", " · retry", "sub"));
    span.title = "backing off after " + s.consecutive_failures + " failed run(s): 30 s, then doubling up to an hour";
  } else if (pushed) {
    span.appendChild(el("span", " · pushed", "sub"));
    span.title = "notifications start a run at once; the schedule only polls every push.poll_interval, as a safety net";
  } else {
    span.title = "every " + duration(s.interval_seconds) + " (±10%)";
  }
  return span;
}


// ---- actions (behind the admin token) ----------------------------------------
// The token lives in this variable only: never in the address, storage or a
// cookie; it is asked for again after a reload of the page.
let adminToken = "";
async function act(source, action, body) {
  if (!adminToken) throw new Error("enter the admin token first");
  const response = await fetch(api("sources/" + encodeURIComponent(source) + "/" + action), {
    method: "POST", cache: "no-store",
    headers: {"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"},
    body: JSON.stringify(body || {}),
  });
  const answer = await response.json();
  if (!answer.ok) throw new Error(answer.error.message);
  return answer.data;
}

