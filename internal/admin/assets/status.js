// The status page's refresh: every few seconds, fetch /debug/status and
// redraw each section from it (DOM text only, never HTML). The formatting
// helpers mirror the server template's (statuspage.go).
"use strict";
(function () {
  const every = 3000;

  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(1) + " " + units[i] + " (" + n + " B)";
  }
  function fmtAge(s) { return s === undefined || s === null ? "never" : s.toFixed(1) + "s ago"; }
  function fmtUptime(s) {
    let t = Math.floor(s);
    const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), sec = t % 60;
    if (h > 0) return h + "h" + m + "m" + sec + "s";
    if (m > 0) return m + "m" + sec + "s";
    return sec + "s";
  }
  function fmtClock(iso) { return new Date(iso).toISOString().substring(11, 19); }
  // errAt is an error with the time it happened (statuspage.go: formatErrAt).
  function errAt(err, at) { return !err || !at ? err || "" : fmtClock(at) + " UTC: " + err; }
  // authErrors: an authority's link error and failed origin checks
  // (statuspage.go: formatAuthorityErrors).
  function authErrors(a) {
    const out = [];
    if (a.last_error) out.push(errAt(a.last_error, a.last_error_at));
    for (const c of a.origin_checks || []) {
      if (c.state === "failed") out.push(errAt("origin " + c.origin + ": " + c.error, c.at));
      for (const p of c.file_problems || []) out.push(errAt("origin " + c.origin + ": " + (p.file ? p.file + ": " : "") + p.error, p.at));
    }
    return out.join("; ");
  }
  function short(label) { const i = label.lastIndexOf("."); return i < 0 ? label : label.substring(i + 1); }
  // counts formats a map as "k: n, ..." by key; shorten names types by
  // their last dotted part (counts of names that shorten alike are summed).
  function counts(m, shorten) {
    const out = {};
    for (const k of Object.keys(m || {})) {
      const kk = shorten ? short(k) : k;
      out[kk] = (out[kk] || 0) + m[k];
    }
    return Object.keys(out).sort().map(k => k + ": " + out[k]).join(", ");
  }
  function shortAll(ts) { return (ts || []).map(short).join(", "); }
  // states: how many clients the table lists (statuspage.go: formatClientStates).
  function states(p) { return p.matched > p.rows.length ? "the first " + p.rows.length + " of " + p.matched : String(p.rows.length); }
  function ratio(c) {
    if (c.hits + c.misses === 0) return "n/a (no subscriptions yet)";
    return (c.hit_ratio * 100).toFixed(1) + "% (" + c.hits + " hits, " + c.misses + " misses)";
  }

  // holdReason, heldSince, heldNames: the Delivery section's
  // (statuspage.go: formatHoldReason, formatHeldSince, formatHeldNames).
  function holdReason(r) {
    if (r === "deletion_share") return "more than max_removed_share of the type removed at once (" + r + ")";
    if (r === "deletion_empty") return "a collection or wildcard emptied (" + r + ")";
    if (r === "breaker") return "clients NACKed it (" + r + ")";
    if (r === "wave") return "rolling out wave by wave (" + r + ")";
    if (r === "wave_stalled") return "its rollout stopped: a wave did not ACK within max_wait (" + r + ")";
    return r;
  }
  function since(t, ageS) { return fmtClock(t) + " UTC (" + fmtUptime(ageS) + " ago)"; }
  function heldSince(h) { return since(h.since, h.age_s); }
  // nackedBy, holders, wavesOpen, waveProgress: the breaker's and the
  // waves' tables (statuspage.go: formatNackedBy, formatHolders,
  // formatWavesOpen, formatWaveProgress).
  function nackedBy(v) {
    let who = v.nackers.length + " client(s)";
    if (v.relay_below) who += ", a relay below among them";
    if (v.nackers.length > 0) who += "; " + v.nackers[0].node + ": " + v.nack;
    return who;
  }
  function holders(v) {
    if (v.holders.length === 0) return "none connected";
    return v.holders.map(h => h.which + " " + h.version.substring(0, 8) + ": " + h.clients + " (" + h.acked + " ACKed)").join(", ");
  }
  function wavesOpen(r) { return Math.min(r.open, r.waves) + " of " + r.waves + " open" + (r.stalled ? ", stopped (release to go on)" : ""); }
  function waveProgress(r) {
    return r.progress.map((w, i) => (i === r.progress.length - 1 ? "everyone else" : "wave " + w.wave) + ": " +
      w.clients + " clients, " + w.sent + " sent, " + w.acked + " ACKed").join("; ");
  }
  function heldNames(h) { return h.resources + ": " + h.names.join(", ") + (h.resources > h.names.length ? ", …" : ""); }
  // releaseForm is the Delivery section's button: a form that POSTs the
  // hold's authority and type to the release endpoint.
  function releaseForm(h) {
    const form = document.createElement("form");
    form.method = "post";
    form.action = "/debug/delivery/release";
    for (const [name, value] of [["authority", h.authority], ["type", h.type]]) {
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      form.appendChild(input);
    }
    const button = document.createElement("button");
    button.type = "submit";
    button.textContent = "Release";
    form.appendChild(button);
    return form;
  }

  function setText(id, text) { const el = document.getElementById(id); if (el) el.textContent = text; }
  function fillRows(id, rows) {
    const tbody = document.getElementById(id);
    if (!tbody) return;
    const frag = document.createDocumentFragment();
    for (const cells of rows) {
      const tr = document.createElement("tr");
      for (const c of cells) {
        const td = document.createElement("td");
        if (c instanceof Node) td.appendChild(c);
        else if (typeof c === "object" && c.href) {
          const a = document.createElement("a");
          a.href = c.href;
          a.textContent = c.text;
          td.appendChild(a);
        } else if (typeof c === "object") { td.textContent = c.text; td.className = c.cls || ""; } else td.textContent = c;
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
  }
  function live(section) { const el = document.getElementById(section); if (el) el.dataset.rendered = "live"; }

  function render(st) {
    const ready = document.getElementById("ready");
    ready.textContent = st.ready;
    ready.className = st.ready === "ready" ? "ok" : "bad";
    setText("uptime", fmtUptime(st.uptime_s));

    fillRows("authorities-rows", st.authorities.map(a => [a.name, a.origins.join(", "), a.in_use.join(", "),
      a.links + (Object.keys(a.states).length ? " (" + counts(a.states) + ")" : ""),
      fmtAge(a.last_response_age_s), counts(a.subscriptions, true), { text: authErrors(a), cls: "err" }]));
    setText("links-count", st.links.length + (st.links_truncated ? ", more in /debug/upstreams" : ""));
    fillRows("links-rows", st.links.map(l => [l.authority, l.group || "", l.origin || "", l.state,
      fmtAge(l.last_response_age_s), counts(l.subscriptions, true), { text: errAt(l.last_error, l.last_error_at), cls: "err" }]));
    live("authorities");

    setText("clients-total", st.clients.total);
    setText("clients-sotw", st.clients.streams.sotw);
    setText("clients-delta", st.clients.streams.delta);
    setText("clients-parked", st.clients.parked);
    fillRows("clients-rows", st.clients.by_type.map(t => [short(t.type), t.sotw, t.delta]));
    setText("client-states-count", states(st.client_states));
    fillRows("client-states-rows", st.client_states.rows.map(c => [
      { text: c.client, href: "/debug/propagation/client?node=" + encodeURIComponent(c.client) }, c.variant, shortAll(c.types),
      counts(c.synced, true), { text: counts(c.nacked, true), cls: "err" }, counts(c.pending, true)]));
    live("clients");

    fillRows("propagation-rows", st.propagation.changes.map(p => [fmtClock(p.arrived), p.authority,
      { text: p.line, cls: p.nacked > 0 ? "err" : "" }, p.state]));
    live("propagation");

    const c = st.cache;
    setText("cache-resources", c.resources);
    setText("cache-bytes", fmtBytes(c.bytes));
    setText("cache-hits", ratio(c));
    setText("cache-keys", c.keys + " (" + c.watched_keys + ")");
    setText("cache-unwatched", c.unwatched + ", " + fmtBytes(c.unwatched_bytes));
    live("cache");

    setText("nacks-total", st.nacks.total);
    fillRows("nacks-rows", st.nacks.recent.map(n => [fmtClock(n.time), n.node_id, n.variant, short(n.type_url),
      n.nonce, { text: n.error_detail, cls: "err" }]));
    live("nacks");

    const d = st.delivery;
    setText("held-count", d.held.length);
    fillRows("held-rows", d.held.map(h => [h.authority, h.group || "", short(h.type), { text: holdReason(h.reason), cls: "err" },
      heldSince(h), heldNames(h), releaseForm(h)]));
    setText("held-versions-count", d.versions.length);
    fillRows("held-versions-rows", d.versions.map(v => [v.authority, short(v.type), v.name, v.origin_version,
      { text: nackedBy(v), cls: "err" }, since(v.since, v.age_s), holders(v), releaseForm(v)]));
    setText("rollouts-count", d.rollouts.length);
    fillRows("rollouts-rows", d.rollouts.map(r => [r.authority, short(r.type), r.versions + ": " + r.names.join(", "),
      since(r.arrived, r.age_s), wavesOpen(r), waveProgress(r), releaseForm(r)]));
    setText("invalid-total", d.invalid.total);
    fillRows("invalid-rows", d.invalid.recent.map(i => [i.time.substring(11, 19), i.authority, short(i.type), i.name,
      { text: i.error, cls: "err" }]));
    live("delivery");

    const l = document.getElementById("live");
    l.textContent = "live, updated " + fmtClock(st.time) + " UTC";
    l.className = "live";
  }

  function refresh() {
    fetch("/debug/status", { cache: "no-store" })
      .then(r => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(render)
      .catch(err => {
        const l = document.getElementById("live");
        l.textContent = "refresh failed: " + err.message;
        l.className = "bad";
      });
  }
  refresh();
  setInterval(refresh, every);
})();
