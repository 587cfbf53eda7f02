// The review page's script: talks only to its own server (/api/...). Every
// value from the audit log or a gateway is shown as text, never as markup:
// hosts and sandbox names come from the guarded side.
//
// The session is no cookie (a browser sends a cookie of 127.0.0.1 to every
// port of it, so to any other local server the browser visits): the token in
// the printed address is traded once for a session key, kept in this tab's
// sessionStorage (its origin's alone, port included) and sent as a header.
"use strict";

const state = { csrf: null, key: null, session: "", seen: new Set(), pending: [], received: 0 };
const SAVED = "tollgate-ui-session";

// Headers of every call: the session key (and on a change the CSRF token);
// credentials are never the browser's own.
function request(extra) {
  return { credentials: "omit", headers: Object.assign({ "X-Tollgate-Session": state.key || "" }, extra || {}) };
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
const $ = (id) => document.getElementById(id);

async function getJSON(url) {
  const r = await fetch(url, request());
  const body = await r.json();
  if (!r.ok || body.ok === false) throw new Error(body.error || r.statusText);
  return body;
}

async function postJSON(url, data) {
  const r = await fetch(url, Object.assign(
    request({ "Content-Type": "application/json", "X-Tollgate-CSRF": state.csrf }),
    { method: "POST", body: JSON.stringify(data) }));
  const body = await r.json();
  if (!r.ok || body.ok === false) throw new Error(body.error || r.statusText);
  return body;
}

function duration(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

function bytesText(n) {
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

// ---- tabs ---------------------------------------------------------------------

function show(view) {
  for (const b of document.querySelectorAll("#tabs button"))
    b.classList.toggle("on", b.dataset.view === view);
  for (const s of document.querySelectorAll(".view")) s.classList.toggle("on", s.id === view);
  location.hash = view;
  if (view === "timeline") loadSandboxes();
  if (view === "counters") loadStats();
  if (view === "fleet") loadFleet(true);
}

// ---- waiting for you ------------------------------------------------------------

// The cards are rebuilt only when the set changes (a button under the pointer
// must not be replaced while someone clicks it); tick() updates the times.
function renderPending() {
  const box = $("pending");
  box.replaceChildren();
  for (const ap of state.pending) {
    if (ap.kind === "host") {
      // Host access (serve --host-access): what would run or be touched, as you.
      box.append(el("div", { class: "card", "data-ref": ap.ref },
        el("h3", {}, "host access: " + ap.what),
        el("div", { class: "meta" }, "serve " + (ap.client || "?") + " · gateway " + ap.gateway),
        el("div", { class: "meta times" }),
        ap.context ? el("div", { class: "meta" }, "the model's reason: " + ap.context) : "",
        el("div", { class: "actions" },
          el("button", { class: "allow", "data-action": "once", onclick: () => decide(ap, true, "once") }, "Allow once"),
          el("button", { "data-action": "client", onclick: () => decide(ap, true, "client") }, "Allow for this server's life"),
          el("button", { class: "deny", "data-action": "deny", onclick: () => decide(ap, false, "once") }, "Deny"))));
      continue;
    }
    const port = ap.port === 0 ? "any port (DNS)" : "port " + ap.port;
    const card = el("div", { class: "card", "data-ref": ap.ref },
      el("h3", {}, ap.host),
      el("div", { class: "meta" },
        port + " · sandbox " + (ap.client || "?") + " · gateway " + ap.gateway),
      el("div", { class: "meta times" }),
      // The sandbox's command, as its gateway named it (vault values redacted).
      ap.command ? el("div", { class: "meta command" }, "command: " + ap.command) : "",
      ap.context ? el("div", { class: "meta" }, "request: " + ap.context) : "",
      el("div", { class: "actions" },
        el("button", { class: "allow", "data-action": "once", onclick: () => decide(ap, true, "once") }, "Allow once"),
        el("button", { "data-action": "client", onclick: () => decide(ap, true, "client") }, "Allow for this sandbox"),
        el("button", { "data-action": "always", onclick: () => decide(ap, true, "always") }, "Always"),
        el("button", { class: "deny", "data-action": "deny", onclick: () => decide(ap, false, "once") }, "Deny")));
    box.append(card);
  }
  $("none").hidden = state.pending.length > 0;
  $("count").textContent = state.pending.length;
  $("count").classList.toggle("zero", state.pending.length === 0);
  tick();
}

function tick() {
  const elapsed = (Date.now() - state.received) / 1000;
  for (const ap of state.pending) {
    const card = document.querySelector(`#pending .card[data-ref="${ap.ref}"]`);
    if (!card) continue;
    const left = (ap.expires_in || 0) - elapsed;
    card.classList.toggle("urgent", left < 15);
    card.querySelector(".times").textContent = "waiting " + duration((ap.age || 0) + elapsed) +
      " · " + (left > 0 ? duration(left) + " left, then refused" : "timing out");
  }
}

function onPending(data) {
  const list = [];
  for (const gw of data.gateways || [])
    for (const ap of gw.approvals || []) list.push(Object.assign({ gateway: gw.pid, ref: gw.pid + ":" + ap.id }, ap));
  for (const ap of list) {
    if (!state.seen.has(ap.ref) && state.received !== 0 && document.hidden &&
        "Notification" in window && Notification.permission === "granted")
      new Notification("tollgate: " + ap.host + " is waiting", { body: "sandbox " + ap.client });
    state.seen.add(ap.ref);
  }
  const changed = list.map((a) => a.ref).join() !== state.pending.map((a) => a.ref).join();
  state.pending = list;
  state.received = Date.now();
  $("pending-errors").textContent = (data.errors || []).join("; ");
  if (changed) renderPending();
  else tick();
}

async function decide(ap, allow, scope) {
  try {
    await postJSON("/api/decide", { gateway: ap.gateway, id: ap.id, allow: allow, scope: scope });
    state.pending = state.pending.filter((p) => p.ref !== ap.ref);
    renderPending();
  } catch (e) {
    $("pending-errors").textContent = e.message;
  }
}

// Server-sent events read through fetch (EventSource cannot send a header);
// reconnects every three seconds after the stream ends or fails.
async function listen() {
  for (;;) {
    try {
      const r = await fetch("/api/events", request());
      if (!r.ok || !r.body) throw new Error(r.statusText);
      $("live").textContent = "live";
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          let event = "message";
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
          if (event === "pending" && data.length > 0) onPending(JSON.parse(data.join("\n")));
        }
      }
    } catch (e) {
      // falls through to the retry
    }
    $("live").textContent = "reconnecting…";
    await new Promise((res) => setTimeout(res, 3000));
  }
}

// The exports are links for their address only: fetched with the session's
// header, then saved from memory.
async function exportRows(ev) {
  ev.preventDefault();
  const link = ev.currentTarget;
  try {
    const r = await fetch(link.href, request());
    if (!r.ok) throw new Error((await r.json()).error || r.statusText);
    const url = URL.createObjectURL(await r.blob());
    const name = link.id === "export-csv" ? "tollgate-audit.csv" : "tollgate-audit.jsonl";
    const a = el("a", { href: url, download: name, hidden: "" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (e) {
    $("search-status").textContent = e.message;
  }
}

// The session: the token in the address traded for a key (the address then
// loses the token), or the key this tab kept from an earlier load.
async function login() {
  const token = new URLSearchParams(location.search).get("token");
  if (token !== null) {
    history.replaceState(null, "", "/" + location.hash);
    const r = await fetch("/api/login", { method: "POST", credentials: "omit", headers: { "X-Tollgate-Token": token } });
    const body = await r.json();
    if (!r.ok || body.ok === false) throw new Error(body.error || r.statusText);
    sessionStorage.setItem(SAVED, JSON.stringify({ key: body.key, csrf: body.csrf }));
  }
  const saved = JSON.parse(sessionStorage.getItem(SAVED) || "null");
  if (!saved || !saved.key)
    throw new Error("this tab has no session: open the address tollgate ui printed (it carries the token)");
  state.key = saved.key;
  state.csrf = saved.csrf;
}

// ---- audit rows -----------------------------------------------------------------

function showRow(row) {
  const facts = $("detail-facts");
  facts.replaceChildren();
  const add = (k, v) => facts.append(el("dt", {}, k), el("dd", {}, v === null || v === undefined ? "" : v));
  add("row (chain position)", row.id);
  add("time", row.ts);
  add("kind", row.kind);
  add("sandbox", row.sandbox);
  add("host", row.host + (row.port ? ":" + row.port : ""));
  // An inspected (or forwarded) request's method and path, the query cut.
  if (row.request) add("request", row.request);
  add("decision", row.decision);
  const d = row.detail && typeof row.detail === "object" ? row.detail : {};
  add("rule", d.rule || "");
  add("reason", row.reason);
  add("hash", row.hash);
  add("previous hash", row.prev_hash);
  $("detail-json").textContent = JSON.stringify(row, null, 2);
  $("detail").hidden = false;
}

function rowBytes(row) {
  const d = row.detail && typeof row.detail === "object" ? row.detail : {};
  return (d.bytes_up || 0) + (d.bytes_down || 0);
}

// ---- timeline -------------------------------------------------------------------

function fillLogs(logs) {
  for (const sel of document.querySelectorAll("select.logs")) {
    sel.replaceChildren();
    for (const l of logs) sel.append(el("option", { value: l.log }, l.path));
  }
}

async function loadSandboxes() {
  const sel = $("tl-sandbox");
  const keep = sel.value;
  try {
    const data = await getJSON("/api/sandboxes?log=" + $("tl-log").value);
    sel.replaceChildren();
    for (const s of data.sandboxes)
      sel.append(el("option", { value: s.sandbox, "data-last": s.last_id }, s.sandbox + " (" + s.rows + ")"));
    if (keep && [...sel.options].some((o) => o.value === keep)) sel.value = keep;
    await loadTimeline();
  } catch (e) {
    $("tl-summary").textContent = e.message;
  }
}

function laneOf(row) {
  if (row.kind === "dns") return "dns";
  if (row.decision === "deny") return "deny";
  if (row.decision === "ask" || row.kind === "approval") return "ask";
  return "allow";
}

async function loadTimeline() {
  const sandbox = $("tl-sandbox").value;
  const chart = $("tl-chart");
  const body = $("tl-rows").tBodies[0];
  chart.replaceChildren();
  body.replaceChildren();
  $("tl-summary").replaceChildren();
  $("tl-policy").hidden = true;
  if (!sandbox) { $("tl-summary").textContent = "No sandbox in this log yet."; return; }
  // From the sandbox's last row down: its rows lie together, so the log is not
  // scanned from the newest row to reach an old sandbox.
  const last = Number($("tl-sandbox").selectedOptions[0].dataset.last || 0);
  const q = new URLSearchParams({ log: $("tl-log").value, sandbox: sandbox, limit: "1000" });
  if (last > 0) q.set("before", String(last + 1));
  const data = await getJSON("/api/audit?" + q);
  const rows = data.rows.slice().reverse();
  summarize(sandbox, rows);
  drawChart(chart, rows.filter((r) => r.host));
  for (const row of data.rows) {
    const tr = el("tr", { onclick: () => showRow(row) },
      el("td", {}, row.ts.slice(11, 23)), el("td", {}, row.kind), el("td", {}, row.request || row.host || ""),
      el("td", {}, row.port || ""), el("td", { class: "d-" + (row.decision || "") }, row.decision || ""),
      el("td", {}, rowBytes(row) ? bytesText(rowBytes(row)) : ""));
    body.append(tr);
  }
}

// The policy file `tollgate policy suggest --sandbox ID` would print.
async function suggestPolicy() {
  const sandbox = $("tl-sandbox").value;
  const box = $("tl-policy");
  if (!sandbox) return;
  const q = new URLSearchParams({ log: $("tl-log").value, sandbox: sandbox });
  const data = await getJSON("/api/suggest?" + q);
  box.textContent = data.policy || "Nothing this sandbox reached was let through: no rule to suggest.";
  box.hidden = false;
}

function summarize(sandbox, rows) {
  const box = $("tl-summary");
  const start = rows.find((r) => r.kind === "sandbox.start");
  const end = rows.find((r) => r.kind === "sandbox.end");
  const add = (k, v) => box.append(el("span", {}, el("span", { class: "muted" }, k + " "), v));
  add("sandbox", sandbox);
  if (start && start.detail) {
    const d = start.detail;
    // sandbox.start's argv (vault values already redacted by the writer).
    const cmd = d.argv || d.command;
    if (cmd) add("command", (Array.isArray(cmd) ? cmd.join(" ") : String(cmd)) + (d.argv_truncated ? " …" : ""));
    if (d.limits) add("limits", JSON.stringify(d.limits));
    if (d.policy_sha256) add("policy", d.policy_sha256.slice(0, 12));
  }
  if (end && end.detail) {
    if ("exit_status" in end.detail) add("exit status", end.detail.exit_status);
    if ("wall_seconds" in end.detail) add("duration", Math.round(end.detail.wall_seconds * 1000) / 1000 + " s");
    if (end.detail.timed_out) add("timed out", "yes");
  }
  let allowed = 0, refused = 0, bytes = 0;
  for (const r of rows) {
    if (r.kind === "decision" && r.decision === "allow") allowed++;
    if (r.decision === "deny") refused++;
    bytes += rowBytes(r);
  }
  add("allowed", allowed);
  add("refused", refused);
  add("bytes", bytesText(bytes));
}

function drawChart(box, rows) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  };
  if (rows.length === 0) { box.append(el("p", { class: "muted" }, "No traffic.")); return; }
  const hosts = [...new Set(rows.map((r) => r.host))].slice(0, 30);
  const times = rows.map((r) => Date.parse(r.ts));
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1000);
  const left = 170, width = Math.max(box.clientWidth || 600, 360), laneH = 26;
  const height = hosts.length * laneH + 30;
  const s = svg("svg", { width: width, height: height, role: "img", "aria-label": "connections over time" });
  hosts.forEach((h, i) => {
    const y = 15 + i * laneH;
    s.append(svg("line", { x1: left, x2: width - 10, y1: y, y2: y, class: "lane" }));
    const t = svg("text", { x: 4, y: y + 4 });
    t.textContent = h.length > 26 ? "…" + h.slice(-25) : h;
    s.append(t);
  });
  const span = t1 - t0;
  for (const label of [0, 0.5, 1]) {
    const anchor = label === 0 ? "start" : label === 1 ? "end" : "middle";
    const t = svg("text", { x: left + label * (width - left - 30), y: height - 4, "text-anchor": anchor });
    t.textContent = new Date(t0 + label * span).toISOString().slice(11, 19);
    s.append(t);
  }
  rows.forEach((row) => {
    const i = hosts.indexOf(row.host);
    if (i < 0) return;
    const x = left + ((Date.parse(row.ts) - t0) / span) * (width - left - 30);
    const r = 4 + Math.min(8, Math.sqrt(rowBytes(row)) / 40);
    const c = svg("circle", { cx: x.toFixed(1), cy: 15 + i * laneH, r: r.toFixed(1), class: laneOf(row) });
    const title = svg("title", {});
    title.textContent = row.ts + " " + row.kind + " " + (row.decision || "");
    c.append(title);
    c.addEventListener("click", () => showRow(row));
    s.append(c);
  });
  box.append(s);
}

// ---- search ---------------------------------------------------------------------

function searchParams(extra) {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData($("search-form"))) if (v !== "") q.set(k, v);
  for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
  return q;
}

async function search(before) {
  const body = $("search-rows").tBodies[0];
  if (!before) body.replaceChildren();
  const q = searchParams(before ? { before: before } : {});
  $("export-csv").href = "/api/audit?" + searchParams({ format: "csv" });
  $("export-json").href = "/api/audit?" + searchParams({ format: "json" });
  try {
    const t0 = performance.now();
    const data = await getJSON("/api/audit?" + q);
    for (const row of data.rows) {
      body.append(el("tr", { onclick: () => showRow(row) },
        el("td", {}, row.id), el("td", {}, row.ts), el("td", {}, row.kind),
        el("td", {}, row.sandbox || ""), el("td", {}, row.host || ""), el("td", {}, row.port || ""),
        el("td", { class: "d-" + (row.decision || "") }, row.decision || ""), el("td", {}, row.reason || "")));
    }
    $("older").hidden = !data.next_before;
    $("older").dataset.before = data.next_before || "";
    $("search-status").textContent = body.rows.length + " rows shown (" +
      Math.round(performance.now() - t0) + " ms)";
  } catch (e) {
    $("search-status").textContent = e.message;
  }
}

// ---- integrity and counters ------------------------------------------------------

async function verify() {
  const dl = $("int-result");
  dl.replaceChildren(el("dt", {}, "state"), el("dd", {}, "checking…"));
  const q = new URLSearchParams({ log: $("int-log").value });
  if ($("anchor").value) q.set("anchor", $("anchor").value.trim());
  try {
    const r = await getJSON("/api/verify?" + q);
    dl.replaceChildren();
    const add = (k, v, cls) => dl.append(el("dt", {}, k), el("dd", cls ? { class: cls } : {}, v));
    add("log", r.path);
    add("chain", r.intact ? "intact" : "BROKEN at row " + r.first_bad_id, r.intact ? "ok" : "bad");
    if (!r.intact) add("why", r.what);
    add("rows checked", r.rows_checked);
    add("head row", r.head_id);
    add("head hash (anchor it elsewhere)", r.head_hash);
    if (r.anchor_found !== null) add("anchor", r.anchor_found ? "found in the chain" : "NOT in the chain", r.anchor_found ? "ok" : "bad");
  } catch (e) {
    dl.replaceChildren(el("dt", {}, "error"), el("dd", { class: "bad" }, e.message));
  }
}

async function loadStats() {
  const box = $("stats");
  try {
    const data = await getJSON("/api/stats");
    box.replaceChildren();
    if (data.gateways.length === 0) box.append(el("p", { class: "muted" }, "No running gateway."));
    for (const gw of data.gateways) {
      const card = el("div", { class: "card" }, el("h3", {}, "gateway " + gw.pid));
      const dl = el("dl", { class: "facts" });
      const st = gw.stats || {};
      const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
      for (const part of ["proxy", "dns"]) {
        const total = st[part] && st[part].total;
        if (!total) continue;
        for (const [k, v] of Object.entries(total)) if (typeof v !== "object") add(part + " " + k.replace(/_/g, " "), v);
      }
      if (st.queue) for (const [k, v] of Object.entries(st.queue)) add("queue " + k.replace(/_/g, " "), v);
      card.append(dl);
      box.append(card);
    }
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, e.message));
  }
}

// ---- the fleet (tollgate ui --fleet) ----------------------------------------------

// The nodes' table, the held requests of the node chosen (or of all) and its
// newest rows; asked again every two seconds while the view is open. Every
// chain is checked again when the view opens and on Reload (else the server's
// check of the last 30 seconds stands: it reads every row).
async function loadFleet(verify) {
  const node = $("fl-node").value;
  const q = node ? "?node=" + encodeURIComponent(node) : "";
  try {
    const [nodes, pending, rows] = await Promise.all([
      getJSON("/api/fleet/nodes" + (verify ? "?verify=1" : "")), getJSON("/api/fleet/pending" + q), getJSON("/api/fleet/audit" + q)]);
    renderFleetNodes(nodes.nodes);
    renderFleetPending(pending.approvals);
    const body = $("fl-rows").tBodies[0];
    body.replaceChildren();
    for (const r of rows.rows.slice().reverse())
      body.append(el("tr", { class: r.decision || "" }, el("td", {}, r.node), el("td", {}, r.seq),
        el("td", {}, r.ts || ""), el("td", {}, r.kind || ""), el("td", {}, r.sandbox || ""),
        el("td", {}, r.host || ""), el("td", {}, r.port || ""), el("td", {}, r.decision || "")));
    $("fl-live").textContent = "as of " + new Date().toLocaleTimeString();
    $("fl-errors").textContent = "";
  } catch (e) {
    $("fl-errors").textContent = e.message;
  }
}

function renderFleetNodes(nodes) {
  const sel = $("fl-node");
  const known = new Set([...sel.options].map((o) => o.value));
  for (const n of nodes) if (!known.has(n.node)) sel.append(el("option", { value: n.node }, n.node));
  const body = $("fl-nodes").tBodies[0];
  body.replaceChildren();
  for (const n of nodes) {
    const c = n.chain;
    const chain = !c ? "no rows" : c.ok ? "intact (" + c.rows_checked + " rows)" :
      c.problem + " at seq " + c.bad_seq + ": " + c.what;
    body.append(el("tr", { "data-node": n.node },
      el("td", {}, n.node), el("td", {}, n.rows), el("td", {}, n.head_seq + (n.head_ts ? " · " + n.head_ts : "")),
      el("td", { class: !c || c.ok ? "ok" : "bad" }, chain),
      el("td", {}, n.rows ? n.lag_s.toFixed(2) + "s" : ""),
      el("td", {}, n.since_ship_s >= 0 ? duration(n.since_ship_s) + " ago" : ""),
      el("td", {}, n.pending)));
  }
}

function renderFleetPending(list) {
  const box = $("fl-pending");
  const refs = list.map((a) => a.node + "/" + a.id).join();
  $("fl-none").hidden = list.length > 0;
  $("fl-count").textContent = list.length;
  $("fl-count").classList.toggle("zero", list.length === 0);
  // Rebuilt only when the set changes: a button under the pointer stays.
  if (box.dataset.refs === refs) return;
  box.dataset.refs = refs;
  box.replaceChildren();
  for (const ap of list) {
    const d = ap.detail || {};
    const what = ap.kind === "host" ? "host access: " + (d.what || ap.host) :
      ap.host + (ap.port === 0 ? " (DNS)" : ":" + ap.port);
    const buttons = [el("button", { class: "allow", "data-action": "once", onclick: () => fleetDecide(ap, true, "once") }, "Allow once"),
      el("button", { "data-action": "client", onclick: () => fleetDecide(ap, true, "client") }, "Allow for this sandbox")];
    if (ap.kind !== "host")
      buttons.push(el("button", { "data-action": "always", onclick: () => fleetDecide(ap, true, "always") }, "Always"));
    buttons.push(el("button", { class: "deny", "data-action": "deny", onclick: () => fleetDecide(ap, false, "once") }, "Deny"));
    box.append(el("div", { class: "card", "data-ref": ap.node + "/" + ap.id },
      el("h3", {}, what),
      el("div", { class: "meta" }, "node " + ap.node + " · sandbox " + (ap.sandbox || "?") + " · " + ap.id),
      el("div", { class: "meta" }, duration(ap.expires_in) + " left, then refused"),
      d.command ? el("div", { class: "meta command" }, "command: " + d.command) : "",
      d.context ? el("div", { class: "meta" }, "request: " + d.context) : "",
      el("div", { class: "actions" }, ...buttons)));
  }
}

async function fleetDecide(ap, allow, scope) {
  try {
    await postJSON("/api/fleet/decide", { node: ap.node, id: ap.id, allow: allow, scope: scope });
  } catch (e) {
    $("fl-errors").textContent = e.message;
  }
  loadFleet(false);
}

// ---- start ----------------------------------------------------------------------

async function start() {
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => show(b.dataset.view));
  $("detail-close").addEventListener("click", () => { $("detail").hidden = true; });
  $("tl-sandbox").addEventListener("change", loadTimeline);
  $("tl-log").addEventListener("change", loadSandboxes);
  $("tl-reload").addEventListener("click", loadSandboxes);
  $("tl-suggest").addEventListener("click", suggestPolicy);
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); search(); });
  $("older").addEventListener("click", () => search($("older").dataset.before));
  $("verify").addEventListener("click", verify);
  $("notify").addEventListener("click", () => { if ("Notification" in window) Notification.requestPermission(); });
  $("export-csv").addEventListener("click", exportRows);
  $("export-json").addEventListener("click", exportRows);
  await login();
  const sess = await getJSON("/api/session");
  state.csrf = sess.csrf;
  $("who").textContent = "session " + sess.session;
  if (sess.fleet) {
    $("fleet-tab").hidden = false;
    $("fl-node").addEventListener("change", () => loadFleet(false));
    $("fl-reload").addEventListener("click", () => loadFleet(true));
    setInterval(() => { if ($("fleet").classList.contains("on") && !document.hidden) loadFleet(false); }, 2000);
  }
  fillLogs((await getJSON("/api/logs")).logs);
  listen();
  setInterval(tick, 1000);
  setInterval(() => { if ($("counters").classList.contains("on") && !document.hidden) loadStats(); }, 2000);
  const first = location.hash.slice(1);
  show(["waiting", "timeline", "search", "integrity", "counters"].concat(sess.fleet ? ["fleet"] : []).includes(first) ? first : "waiting");
  search();
}

start().catch((e) => { document.body.prepend(el("p", { class: "error" }, "tollgate: " + e.message)); });
