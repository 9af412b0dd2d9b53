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
  title.replaceChildren(el("span", s.name + " "), syncBadge(s));
  const activity = activityBadge(s);
  if (activity) title.append(" ", activity);
  renderActions(s);
  const dl = document.getElementById("facts");
  dl.replaceChildren();
  const link = el("a", s.url); link.href = s.url;
  fact(dl, "Source", link);
  fact(dl, "Publishes", KINDS[s.kind] || "not known yet");
  if (s.clock_ahead_seconds) fact(dl, "Source's clock", "ahead by " + duration(s.clock_ahead_seconds) + " (its future-dated changes are applied; the watermark waits)").className = "held";
  fact(dl, "In sync?", (LABELS[s.state] || s.state) + (s.state_reason ? ": " + s.state_reason : ""));
  fact(dl, "Lag", duration(s.lag.seconds) + (s.lag.unapplied_changes ? " (" + s.lag.unapplied_changes + " pending)" : ""));
  fact(dl, "Newest change applied", s.watermark);
  const pushed = d.subscription && d.subscription.state === "active";
  fact(dl, "Next run", nextRun(s, pushed, now)).title = nextRun(s, pushed, now).title || "";
  if (s.paused) fact(dl, "Paused", el("span", "since " + exact(s.paused.since) + " by " + s.paused.by + (s.paused.reason ? ": " + s.paused.reason : ""))).className = "held";
  fact(dl, "Schedule", "every " + duration(s.interval_seconds) + (s.audit_interval_seconds ? ", audit every " + duration(s.audit_interval_seconds) : "") +
       ", strategy " + s.strategy);
  fact(dl, "Resources", num(s.resources.live) + " live, " + num(s.resources.deleted) + " deleted, " +
       num(s.resources.retrying) + " retrying, " + bytes(s.bytes));
  fact(dl, "Last success", s.last_success ? when(s.last_success.finished_at, now) : "never");
  fact(dl, "Consecutive failures", s.consecutive_failures + (s.failing_since ? " (failing since " + exact(s.failing_since) + ")" : ""));
  if (s.last_failure) {
    const f = fact(dl, "Last failure", when(s.last_failure.finished_at, now));
    f.append(": " + s.last_failure.error);
    f.className = "error";
  }
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
  // Runs in a row that succeeded and changed nothing fold into one line
  // ("not modified" every minute would push the one failed run off).
  const runItems = [];
  for (const r of d.runs) {
    const c = r.counters;
    const nothing = r.status === "succeeded" && !c.created && !c.updated && !c.deleted && !c.failed;
    const last = runItems[runItems.length - 1];
    if (nothing && last && last.quiet) last.quiet.push(r);
    else runItems.push(nothing ? {quiet: [r]} : {run: r});
  }
  const runRow = r => {
    const tr = cells([r.id, r.mode + (r.trigger ? " · " + r.trigger : ""), "", "", r.duration_seconds !== undefined ? r.duration_seconds.toFixed(2) : "running",
                      r.counters.created, r.counters.updated, r.counters.deleted, r.counters.unchanged, r.counters.failed,
                      r.node || "–", r.message]);
    tr.children[2].appendChild(el("span", r.status, "state " + ({succeeded: "idle", partial: "lagging", failed: "failing", interrupted: "disabled"}[r.status] || "syncing")));
    tr.children[3].appendChild(when(r.started_at, now));
    tr.dataset.run = r.id;
    return tr;
  };
  rows("runs", runItems.slice(0, 30), item => {
    if (item.run || item.quiet.length === 1) return runRow(item.run || item.quiet[0]);
    const q = item.quiet, newest = q[0], oldest = q[q.length - 1];
    const modes = [...new Set(q.map(r => r.mode))].join(", ");
    const unchanged = q.reduce((n, r) => n + r.counters.unchanged, 0);
    const tr = cells([oldest.id + "–" + newest.id, modes, "", "", "", 0, 0, 0, unchanged, 0,
                      [...new Set(q.map(r => r.node || "–"))].join(", "), q.length + " runs that changed nothing"]);
    tr.children[2].appendChild(el("span", "succeeded", "state idle"));
    tr.children[3].appendChild(when(oldest.started_at, now));
    tr.children[3].append(" to ");
    tr.children[3].appendChild(when(newest.started_at, now));
    tr.dataset.runs = q.length;
    return tr;
  }, "no run yet");
  document.getElementById("errors-title").textContent = "Errors by kind (the newest " + num(d.errors.window) + " of the last runs)";
  rows("errors", d.errors.kinds, k => {
    const tr = document.createElement("tr");
    tr.dataset.kind = k.kind;
    tr.appendChild(el("td", k.kind));
    tr.appendChild(el("td", num(k.count), "num"));
    const last = document.createElement("td"); last.appendChild(when(k.last_at, now)); tr.appendChild(last);
    const urls = document.createElement("td");
    urls.className = "wrap";
    for (const u of k.example_urls) urls.appendChild(el("div", u));
    tr.appendChild(urls);
    tr.appendChild(el("td", k.example_reason, "error"));
    return tr;
  }, "no errors recorded");
  document.getElementById("retrying-title").textContent = "Retrying resources (" + num(d.retrying.total) + ")";
  rows("retrying", d.retrying.resources, r => {
    const tr = cells([r.uri, r.kind, r.why ? r.reason + " \u2014 " + r.why : r.reason, r.attempts,
                      exact(r.first_failed_at), exact(r.next_attempt_at)]);
    tr.className = "wrap";
    tr.dataset.uri = r.uri;
    return tr;
  }, "none");
  rows("actions", d.actions || [], a => {
    const tr = cells([a.action, a.by, "", a.detail]);
    tr.children[2].appendChild(when(a.at, now));
    tr.dataset.action = a.action;
    return tr;
  }, "no operator action yet");
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
// The actions an operator can take on this source now, as buttons. The
// admin token is typed once into the page and kept in memory only.
function renderActions(s) {
  const box = document.getElementById("action-buttons");
  const buttons = [];
  const add = (label, action, body, confirmText) => {
    const b = el("button", label);
    b.dataset.action = action;
    b.onclick = async () => {
      if (confirmText && !window.confirm(confirmText)) return;
      const out = document.getElementById("action-result");
      adminToken = document.getElementById("admin-token").value || adminToken;
      document.getElementById("admin-token").value = "";
      try {
        const extra = action === "pause" ? {reason: document.getElementById("action-reason").value} : {};
        const by = document.getElementById("action-by").value;
        await act(s.name, action, Object.assign(body || {}, extra, by ? {by} : {}));
        await refreshDetail(); // the page shows what the action did before it says done
        out.textContent = label + ": done";
        out.className = "";
      } catch (e) {
        out.textContent = label + ": " + e.message;
        out.className = "failed";
      }
    };
    buttons.push(b);
  };
  if (s.paused) add("Resume", "resume");
  else if (s.state !== "disabled") add("Pause", "pause");
  if (!s.paused && s.state !== "disabled") {
    add("Sync now", "sync", {mode: "incremental"});
    add("Audit now", "audit");
    if (s.resources.retrying) add("Retry failed now", "retry");
  }
  if (s.deletions_held.length) {
    add("Confirm deletions", "confirm-deletions", {}, "Delete the resources the Resource List no longer names?");
    add("Refuse deletions", "refuse-deletions");
  }
  box.replaceChildren(...buttons);
  document.getElementById("token-state").textContent = adminToken ? "token entered" : "";
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
    // A source removed from the config is gone from the API: say so, not
    // "loading…" for ever.
    document.getElementById("meta").textContent = "source " + detailName;
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
