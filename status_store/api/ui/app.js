// The fleet at a glance: every connector and task of the status topic, not RUNNING first, kept current by
// GET /events. Read only. Every name, worker id and trace goes into the page as text (textContent), never as
// markup; the page's Content-Security-Policy allows this script and this sheet and nothing else.
"use strict";

(() => {
  const FLEET = "/fleet";
  const EVENTS = "/events";
  const ROW_HEIGHT = 28;
  const OVERSCAN = 10;
  const CHANGED_MS = 4000;
  const RECONNECT_MIN_MS = 500;
  const RECONNECT_MAX_MS = 10000;
  // Worst first: the order of the rows and of the counts.
  const ORDER = ["FAILED", "UNASSIGNED", "RESTARTING", "PAUSED", "STOPPED", "DESTROYED", "RUNNING"];
  const rank = (state) => { const i = ORDER.indexOf(state); return i < 0 ? -1 : i; };
  // Health words, worst first (docs/operations.md "One health word per connector"); no word (no status) last.
  const HEALTH = ["UNHEALTHY", "DEGRADED", "PAUSED", "STOPPED", "HEALTHY"];
  const healthRank = (word) => { const i = HEALTH.indexOf(word); return i < 0 ? HEALTH.length : i; };

  const $ = (id) => document.getElementById(id);
  const list = $("list");
  const spacer = $("spacer");
  const streamBadge = $("stream");

  // name -> {name, type, configured, status: {state, worker_id, since, trace, restarts} | null,
  //          tasks: Map(id -> status), changedAt: ms}
  const connectors = new Map();
  // worker id -> {up, gone_since, url}: the Connect group's members as the sidecar reads them (GET /fleet's
  // workers, then the stream's worker events); empty when the sidecar does not read the group.
  const workers = new Map();
  let groupRead = false;
  const expanded = new Set();
  const filter = { name: "", state: "", worker: "", health: "", sort: "health", view: "connectors" };
  let lines = [];          // what the list shows, one entry a row: {kind, connector, task?}
  let pending = [];        // events read, not yet applied (applied once per animation frame)
  let frameAsked = false;
  let dirty = true;        // the rows' order or set changed: rebuild `lines`
  // What the page holds of the topic: per partition, the offset of the last record applied (GET /fleet's position,
  // then each event's). An event at or below it is held already; Last-Event-ID says it when the stream resumes.
  let positions = new Map();
  let heartbeatMs = 15000;
  let lastHeard = 0;       // when the stream last sent anything (events or heartbeats)
  let connected = false;
  let changes = 0;         // status changes applied since the page opened (each record once)
  let loaded = false;      // the statuses were read (GET /fleet) since the page opened or the stream fell behind
  let streamAbort = null;
  let readAt = null;       // when GET /fleet was read while the stream was refused (null: the stream is live)

  // ------------------------------------------------------------------------------------------ the data

  function entry(name) {
    let found = connectors.get(name);
    if (!found) {
      found = { name, type: "unknown", configured: false, status: null, tasks: new Map(), changedAt: -Infinity };
      connectors.set(name, found);
    }
    return found;
  }

  function load(snapshot) {
    connectors.clear();
    for (const c of snapshot.connectors) {
      const found = entry(c.name);
      found.type = c.type;
      found.configured = c.configured;
      found.status = c.state === null ? null
        : { state: c.state, worker_id: c.worker_id, since: c.since, trace: c.trace, restarts: c.restarts || null,
            failure: c.failure || null };
      for (const t of c.tasks) {
        found.tasks.set(t.id, { state: t.state, worker_id: t.worker_id, since: t.since, trace: t.trace,
                                restarts: t.restarts || null, failure: t.failure || null });
      }
    }
    workers.clear();
    groupRead = Array.isArray(snapshot.workers);
    for (const w of snapshot.workers || []) {
      workers.set(w.id, { up: w.up, gone_since: w.gone_since, url: w.url, stuck_since: w.stuck_since || null,
                          health: w.health || null, health_message: w.health_message || null });
    }
    heartbeatMs = snapshot.heartbeat_ms;
    dirty = true;
  }

  function next(previous, event) {
    const changed = previous === null || previous === undefined || previous.state !== event.state;
    return {
      state: event.state,
      worker_id: event.worker_id,
      since: changed ? event.timestamp : previous.since,
      trace: event.trace,
      restarts: previous ? previous.restarts : null,
      failure: event.failure || null,
    };
  }

  // A restart the sidecar sent (event: restart): the task's (or connector's) count and last restart.
  function applyRestart(event) {
    const found = connectors.get(event.connector);
    const status = !found ? null : event.kind === "connector" ? found.status : found.tasks.get(event.task);
    if (!status) {
      return;
    }
    const previous = status.restarts || { count: 0, last: null, result: null, state: "idle", next: null };
    if (event.result === "skipped") {
      // Not restarted (a user failure, an exclusion, the maximum): no request was sent.
      status.restarts = { ...previous, state: event.skipped === "max_restarts" ? "gave-up" : "excluded",
                          skipped: event.skipped };
    } else {
      status.restarts = event.result === "restarted"
        ? { ...previous, count: event.attempt, last: event.timestamp, result: event.result, state: "idle" }
        : { ...previous, result: event.result };
    }
    found.changedAt = performance.now();
    dirty = true;
  }

  // A worker that left the Connect group or came back, or hangs in it or answers again (event: worker).
  function applyWorker(event) {
    groupRead = true;
    const known = workers.get(event.worker_id) || { url: null, stuck_since: null };
    if (event.stuck !== undefined) {
      workers.set(event.worker_id, { ...known, stuck_since: event.stuck ? event.since : null,
                                     health: event.stuck ? event.probe : "healthy",
                                     health_message: event.stuck ? event.message : null });
    } else {
      workers.set(event.worker_id, { ...known, up: event.up, gone_since: event.up ? null : event.since });
    }
    dirty = true;
  }

  // A worker in the Connect group whose GET /health has answered 500, or nothing, for the sidecar's bound.
  function stuck(worker) {
    const w = worker === null || worker === undefined ? null : workers.get(worker);
    return Boolean(w && w.stuck_since);
  }

  // A worker that runs nothing: gone from the group, or stuck in it.
  function down(worker) {
    return gone(worker) || stuck(worker);
  }

  function gone(worker) {
    const w = worker === null || worker === undefined ? null : workers.get(worker);
    return groupRead && worker !== null && worker !== undefined && (!w || !w.up);
  }

  function goneSince(worker) {
    const w = workers.get(worker);
    return w ? w.gone_since : null;
  }

  // The connector's health word, as the sidecar defines it (docs/operations.md): an instance runs when RUNNING on a
  // worker that is not gone.
  function healthOf(c) {
    const s = c.status;
    if (!s) { return null; }
    if (s.state === "STOPPED" || s.state === "PAUSED") { return s.state; }
    if (s.state === "FAILED") { return "UNHEALTHY"; }
    const runs = (x) => x.state === "RUNNING" && !down(x.worker_id);
    let running = 0;
    for (const t of c.tasks.values()) { if (runs(t)) { running += 1; } }
    const itself = runs(s);
    if (itself && running === c.tasks.size) { return "HEALTHY"; }
    if (running === 0 && (c.tasks.size > 0 || !itself)) { return "UNHEALTHY"; }
    return "DEGRADED";
  }

  function apply(event) {
    const now = performance.now();
    if (event.type === "deleted") {
      const found = connectors.get(event.connector);
      if (!found) {
        return;
      }
      if (event.kind === "connector") {
        found.status = null;
        found.tasks.clear();
        if (!found.configured) {
          connectors.delete(event.connector);
        }
      } else {
        found.tasks.delete(event.task);
      }
      found.changedAt = now;
      dirty = true;
      return;
    }
    const found = entry(event.connector);
    if (event.kind === "connector") {
      found.status = next(found.status, event);
    } else {
      found.tasks.set(event.task, next(found.tasks.get(event.task), event));
    }
    found.changedAt = now;
    dirty = true;
  }

  // The connector's worst state: its own, or a task's that is worse.
  function worst(c) {
    let state = c.status ? c.status.state : null;
    for (const t of c.tasks.values()) {
      if (state === null || rank(t.state) < rank(state)) {
        state = t.state;
      }
    }
    return state;
  }

  function matches(c) {
    if (filter.name && !c.name.toLowerCase().includes(filter.name)) {
      return false;
    }
    if (filter.health) {
      const word = healthOf(c);
      if (filter.health === "not-healthy" ? word === "HEALTHY" : word !== filter.health) {
        return false;
      }
    }
    if (filter.worker) {
      const workers = [c.status ? c.status.worker_id : null, ...[...c.tasks.values()].map((t) => t.worker_id)];
      if (!workers.some((w) => w && w.toLowerCase().includes(filter.worker))) {
        return false;
      }
    }
    if (filter.state) {
      const states = [c.status ? c.status.state : null, ...[...c.tasks.values()].map((t) => t.state)];
      if (filter.state === "not-running") {
        return states.some((s) => s !== "RUNNING");
      }
      return states.includes(filter.state);
    }
    return true;
  }

  function rebuild() {
    // Each connector's health word and worst state once, then one sort: worst health first, then worst state (or
    // by name alone), then by name.
    const ranked = [];
    for (const c of connectors.values()) {
      if (matches(c)) {
        const word = healthOf(c);
        c.health = word;
        ranked.push({ health: filter.sort === "name" ? 0 : healthRank(word), rank: filter.sort === "name" ? 0 : rank(worst(c)), c });
      }
    }
    ranked.sort((a, b) => a.health - b.health || a.rank - b.rank
      || (a.c.name < b.c.name ? -1 : a.c.name > b.c.name ? 1 : 0));
    const shown = ranked.map((entry) => entry.c);
    lines = [];
    for (const c of shown) {
      lines.push({ kind: "connector", connector: c });
      if (expanded.has(c.name)) {
        const ids = [...c.tasks.keys()].sort((x, y) => x - y);
        for (const id of ids) {
          const t = c.tasks.get(id);
          lines.push({ kind: "task", connector: c, task: id });
          if (t.state === "FAILED" && t.trace) {
            lines.push({ kind: "trace", connector: c, task: id });
          }
        }
        if (c.status && c.status.state === "FAILED" && c.status.trace) {
          lines.push({ kind: "trace", connector: c, task: null });
        }
        lines.push({ kind: "record", connector: c, task: null });
      }
    }
    $("shown").textContent = `${shown.length} of ${connectors.size} connectors shown`;
    spacer.style.height = `${lines.length * ROW_HEIGHT}px`;
    renderCounts();
    renderWorkers();
    dirty = false;
  }

  function renderCounts() {
    const byState = new Map();
    let tasks = 0;
    for (const c of connectors.values()) {
      const s = c.status ? c.status.state : "no status";
      byState.set(s, (byState.get(s) || 0) + 1);
      tasks += c.tasks.size;
    }
    const taskStates = new Map();
    for (const c of connectors.values()) {
      for (const t of c.tasks.values()) {
        taskStates.set(t.state, (taskStates.get(t.state) || 0) + 1);
      }
    }
    const box = $("counts");
    box.replaceChildren();
    const add = (label, count, state) => {
      const item = document.createElement("button");
      item.type = "button";
      item.className = `count state-${state || "none"}`;
      const number = document.createElement("b");
      number.textContent = String(count);
      item.append(number, ` ${label}`);
      if (state) {
        item.addEventListener("click", () => { $("filter-state").value = state; onFilter(); });
      }
      box.append(item);
    };
    add("connectors", connectors.size, null);
    const byHealth = new Map();
    for (const c of connectors.values()) {
      const word = healthOf(c);
      if (word) { byHealth.set(word, (byHealth.get(word) || 0) + 1); }
    }
    for (const word of HEALTH.filter((w) => byHealth.has(w))) {
      const item = document.createElement("button");
      item.type = "button";
      item.className = `count health-${word}`;
      const number = document.createElement("b");
      number.textContent = String(byHealth.get(word));
      item.append(number, ` ${word}`);
      item.addEventListener("click", () => { $("filter-health").value = word; onFilter(); });
      box.append(item);
    }
    for (const s of [...byState.keys()].sort((a, b) => rank(a) - rank(b))) {
      add(`connectors ${s}`, byState.get(s), ORDER.includes(s) ? s : null);
    }
    add("tasks", tasks, null);
    for (const s of [...taskStates.keys()].sort((a, b) => rank(a) - rank(b))) {
      add(`tasks ${s}`, taskStates.get(s), s);
    }
  }

  // ------------------------------------------------------------------------------------------ the view by worker

  // Each worker (in the group, or named by a status) with its connectors and tasks counted by state; gone first.
  function renderWorkers() {
    const table = $("workers");
    if (filter.view !== "workers") {
      table.hidden = true;
      list.hidden = false;
      return;
    }
    list.hidden = true;
    table.hidden = false;
    const rows = new Map();
    const row = (id) => {
      if (!rows.has(id)) { rows.set(id, { id, connectors: new Map(), tasks: new Map() }); }
      return rows.get(id);
    };
    for (const id of workers.keys()) { row(id); }
    const count = (map, state) => map.set(state, (map.get(state) || 0) + 1);
    for (const c of connectors.values()) {
      if (c.status && c.status.worker_id !== null) { count(row(c.status.worker_id).connectors, c.status.state); }
      for (const t of c.tasks.values()) {
        if (t.worker_id !== null) { count(row(t.worker_id).tasks, t.state); }
      }
    }
    const sorted = [...rows.values()].sort((a, b) => (down(b.id) - down(a.id)) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const body = $("workers-body");
    body.replaceChildren();
    for (const w of sorted) {
      const tr = document.createElement("tr");
      tr.className = down(w.id) ? "worker gone" : "worker";
      tr.dataset.worker = w.id;
      const known = workers.get(w.id);
      const place = !groupRead ? "?" : gone(w.id) ? `gone since ${when(goneSince(w.id)) || "the first read"}`
        : stuck(w.id) ? `stuck since ${when(known.stuck_since)} (${known.health}: ${known.health_message || ""})`
        : "in the group";
      const cells = [w.id, place,
                     byState(w.connectors), byState(w.tasks)];
      for (const text of cells) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.append(td);
      }
      body.append(tr);
    }
    $("workers-note").textContent = groupRead ? "" : "the sidecar does not read the Connect group (no group.id): no worker is marked gone";
  }

  function byState(counted) {
    return [...counted.keys()].sort((a, b) => rank(a) - rank(b)).map((s) => `${counted.get(s)} ${s}`).join(", ") || "none";
  }

  // ------------------------------------------------------------------------------------------ the rows

  const pool = [];

  function cell(row, index, cls) {
    let span = row.children[index];
    if (!span) {
      span = document.createElement("span");
      row.append(span);
    }
    span.className = cls;
    return span;
  }

  function ago(since) {
    if (since === null || since === undefined) {
      return "";
    }
    const seconds = Math.max(0, Date.now() / 1000 - since);
    if (seconds < 90) { return `${Math.round(seconds)} s ago`; }
    if (seconds < 5400) { return `${Math.round(seconds / 60)} min ago`; }
    if (seconds < 172800) { return `${Math.round(seconds / 3600)} h ago`; }
    return `${Math.round(seconds / 86400)} d ago`;
  }

  function when(since) {
    return since === null || since === undefined ? "" : new Date(since * 1000).toISOString();
  }

  function fill(row, line, now) {
    const c = line.connector;
    row.dataset.connector = c.name;
    row.className = `row ${line.kind}`;
    if (now - c.changedAt < CHANGED_MS) {
      row.classList.add("changed");
    }
    if (line.kind === "connector") {
      row.dataset.task = "";
      if (expanded.has(c.name)) { row.classList.add("open"); }
      const s = c.status;
      cell(row, 0, "name").textContent = c.name;
      cell(row, 1, "type").textContent = c.type;
      const state = cell(row, 2, `state state-${s ? s.state : "none"}`);
      state.textContent = s ? s.state : "no status";
      failureMark(state, s);
      const word = c.health === undefined ? healthOf(c) : c.health;
      cell(row, 3, `health health-${word || "none"}`).textContent = word || "";
      const since = cell(row, 4, "since");
      since.textContent = s ? ago(s.since) : "";
      since.title = s ? when(s.since) : "";
      workerCell(cell(row, 5, "worker"), s ? s.worker_id : null);
      const pills = cell(row, 6, "tasks");
      pills.replaceChildren();
      const ids = [...c.tasks.keys()].sort((x, y) => x - y);
      for (const id of ids.slice(0, 24)) {
        const t = c.tasks.get(id);
        const pill = document.createElement("span");
        pill.className = `pill state-${t.state}${down(t.worker_id) ? " gone" : ""}`;
        pill.textContent = String(id);
        pill.title = `task ${id}: ${t.state}${gone(t.worker_id) ? " (its worker is gone)" : stuck(t.worker_id) ? " (its worker is stuck)" : ""}`;
        pills.append(pill);
      }
      if (ids.length > 24) { pills.append(`+${ids.length - 24}`); }
    } else if (line.kind === "task") {
      const t = c.tasks.get(line.task);
      row.dataset.task = String(line.task);
      cell(row, 0, "name").textContent = `task ${line.task}`;
      cell(row, 1, "type").textContent = "";
      const state = cell(row, 2, `state state-${t.state}`);
      state.textContent = t.state;
      failureMark(state, t);
      cell(row, 3, "health").textContent = "";
      const since = cell(row, 4, "since");
      since.textContent = ago(t.since);
      since.title = when(t.since);
      workerCell(cell(row, 5, "worker"), t.worker_id);
      const restarts = cell(row, 6, "tasks restarts");
      restarts.textContent = restartsText(t.restarts);
      restarts.title = t.restarts && t.restarts.last ? `last restart: ${when(t.restarts.last)}` : "";
    } else if (line.kind === "record") {
      row.dataset.task = "";
      const open = cell(row, 0, "name");
      open.replaceChildren();
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "record: the last hour, day and week";
      button.dataset.record = "1";
      open.append(button);
      for (let i = 1; i < 7; i++) { cell(row, i, "").textContent = ""; }
    } else {
      const s = line.task === null ? c.status : c.tasks.get(line.task);
      row.dataset.task = line.task === null ? "" : String(line.task);
      cell(row, 0, "name").textContent = s && s.trace ? s.trace : "";
      const more = cell(row, 1, "more");
      more.replaceChildren();
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "whole trace";
      button.dataset.trace = line.task === null ? "connector" : String(line.task);
      more.append(button);
      // Why it failed, in a sentence: its class, then what it needs of the operator.
      const f = s && s.state === "FAILED" ? s.failure : null;
      cell(row, 2, "failure").textContent = f ? `${failureText(f)}: ${f.action}` : "";
      row.classList.toggle("with-failure", f !== null);
      for (let i = 3; i < 7; i++) { cell(row, i, "").textContent = ""; }
    }
  }

  // A worker id, marked when the worker is gone from the Connect group.
  function workerCell(span, worker) {
    const isGone = gone(worker);
    const isStuck = !isGone && stuck(worker);
    const w = isStuck ? workers.get(worker) : null;
    span.textContent = worker === null || worker === undefined ? "" : isGone ? `${worker} (gone ${ago(goneSince(worker))})`
      : isStuck ? `${worker} (stuck ${ago(w.stuck_since)})` : worker;
    span.title = isGone ? `worker gone from the Connect group since ${when(goneSince(worker)) || "the first read"}`
      : isStuck ? `worker stuck in the Connect group since ${when(w.stuck_since)}: ${w.health}${w.health_message ? `: ${w.health_message}` : ""}` : "";
    span.classList.toggle("gone", isGone || isStuck);
  }

  // A FAILED status's failure class (docs/operations.md "Failure classes"), marked on its state and said in its title.
  function failureMark(span, s) {
    const f = s && s.state === "FAILED" ? s.failure : null;
    span.dataset.failure = f ? f["class"] : "";
    span.title = f ? `${failureText(f)}: ${f.cause || ""}\n${f.action}` : "";
  }

  function failureText(f) {
    return `${f["class"]} failure${f.family ? ` (${f.family})` : ""}`;
  }

  // A task's auto-restarts in a few words.
  function restartsText(r) {
    if (!r) { return ""; }
    const last = r.last ? `, last ${ago(r.last)}` : "";
    if (r.state === "excluded") {
      return r.skipped === "failure_class" ? "not restarted (a restart cannot fix it)" : "not restarted (excluded)";
    }
    if (r.state === "gave-up") { return `gave up after ${r.count} restart${r.count === 1 ? "" : "s"}${last}`; }
    if (r.state === "waiting" && r.next) {
      const wait = Math.max(0, Math.round(r.next - Date.now() / 1000));
      return `restart ${r.count + 1} in ${wait} s${r.count ? ` (restarted ${r.count}×${last})` : ""}`;
    }
    return r.count ? `restarted ${r.count}×${last}` : r.result && r.result !== "restarted" ? `restart: ${r.result}` : "";
  }

  let rendered = false;

  function render() {
    if (dirty) {
      rebuild();
    }
    const now = performance.now();
    const first = Math.max(0, Math.floor(list.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(lines.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    while (pool.length < last - first) {
      const row = document.createElement("div");
      spacer.append(row);
      pool.push(row);
    }
    for (let i = 0; i < pool.length; i++) {
      const row = pool[i];
      const index = first + i;
      if (index < last) {
        row.hidden = false;
        row.style.top = `${index * ROW_HEIGHT}px`;
        fill(row, lines[index], now);
      } else if (!row.hidden) {
        row.hidden = true;
        row.className = "row";
        delete row.dataset.connector;
        delete row.dataset.task;
      }
    }
    if (!rendered && loaded) {
      rendered = true;
      performance.mark("status-store:first-render");  // bench/ui.py reports it: the time to the first rows
    }
  }

  function schedule() {
    if (!frameAsked) {
      frameAsked = true;
      requestAnimationFrame(() => {
        frameAsked = false;
        const batch = pending;
        pending = [];
        for (const event of batch) {
          apply(event);
        }
        if (batch.length) {
          changes += batch.length;
          $("changes").textContent = `${changes} change${changes === 1 ? "" : "s"} since the page opened`;
        }
        render();
      });
    }
  }

  // ------------------------------------------------------------------------------------------ the stream

  function badge(text, kind) {
    streamBadge.textContent = text;
    streamBadge.className = `stream ${kind}`;
  }

  // Reads GET /fleet while the stream is open and holds the events read meanwhile: those at or before the
  // position the answer gives are in it already, the others are applied on top. Nothing is lost, nothing twice.
  async function snapshot(held) {
    const response = await fetch(FLEET, { headers: { Accept: "application/json" }, cache: "no-store" });
    if (!response.ok) {
      throw new Error(`GET ${FLEET}: ${response.status}`);
    }
    const fleet = await response.json();
    load(fleet);
    positions = new Map(Object.entries(fleet.position).map(([p, o]) => [Number(p), o]));
    pending = [];
    loaded = true;
    for (const event of held) {
      take(event);
    }
    schedule();
  }

  // An event read: applied at the next frame, unless the page holds it already.
  function take(event) {
    if (event.offset <= (positions.has(event.partition) ? positions.get(event.partition) : -1)) {
      return;
    }
    positions.set(event.partition, event.offset);
    if (event.kind !== "topic") {  // the topics a connector uses are not shown here
      pending.push(event);
      schedule();
    }
  }

  function lastEventId() {
    return [...positions].sort((a, b) => a[0] - b[0]).map(([p, o]) => `${p}:${o}`).join(",");
  }

  // One Server-Sent Events frame: its id, event type and data lines.
  function parseFrame(text) {
    let id = null;
    let type = "message";
    const data = [];
    for (const line of text.split("\n")) {
      if (line.startsWith(":") || line === "") { continue; }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) { value = value.slice(1); }
      if (field === "id") { id = value; } else if (field === "event") { type = value; } else if (field === "data") { data.push(value); }
    }
    return { id, type, data: data.join("\n") };
  }

  // Reads GET /events with fetch (not EventSource: it must send Last-Event-ID on every reconnection, see the
  // status of a refusal, and tell a stale stream from a live one). Resolves when the stream ends.
  async function follow() {
    const headers = { Accept: "text/event-stream" };
    const resume = loaded ? lastEventId() : "";
    if (resume) { headers["Last-Event-ID"] = resume; }
    streamAbort = new AbortController();
    const response = await fetch(EVENTS, { headers, cache: "no-store", signal: streamAbort.signal });
    if (response.status === 410 || (response.status === 400 && resume)) {
      // Too far behind (or the sidecar, restarted, cannot resume from there): read the statuses anew, then follow.
      loaded = false;
      return;
    }
    if (!response.ok) {
      const retry = Number(response.headers.get("Retry-After"));
      throw Object.assign(new Error(`GET ${EVENTS}: ${response.status}`),
                          { retryAfterMs: retry > 0 ? retry * 1000 : 0, refused: true });
    }
    connected = true;
    readAt = null;
    lastHeard = Date.now();
    // Subscribed: the statuses read now hold everything before the first event this stream sends. "live" once they
    // are read: a change made before then is in GET /fleet's answer, so it is shown, but neither counted nor marked.
    const held = [];
    let reading = null;
    if (loaded) {
      badge("live", "");
    } else {
      badge("reading the statuses…", "");
      reading = snapshot(held).then(() => badge("live", ""), (error) => { streamAbort.abort(); throw error; });
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { break; }
        lastHeard = Date.now();
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if ((frame.type === "restart" || frame.type === "worker") && loaded) {
            const event = JSON.parse(frame.data);
            if (frame.type === "restart") { applyRestart(event); } else { applyWorker(event); }
            schedule();
          } else if (frame.type === "status" || frame.type === "deleted") {
            const event = JSON.parse(frame.data);
            event.type = frame.type;
            if (loaded) {
              take(event);
            } else {
              held.push(event);
            }
          } else if (frame.type === "error") {
            return;
          }
        }
      }
    } finally {
      if (reading !== null) {
        await reading;
      }
    }
  }

  async function stream() {
    let backoff = RECONNECT_MIN_MS;
    for (;;) {
      let wait = backoff;
      let reason = "the connection ended";
      try {
        await follow();
        backoff = RECONNECT_MIN_MS;
        wait = 0;
      } catch (error) {
        reason = error.message;
        wait = Math.max(backoff, error.retryAfterMs || 0);
        backoff = Math.min(RECONNECT_MAX_MS, backoff * 2);
        if (error.refused) {
          await fallback();
        }
      }
      connected = false;
      const again = `reconnecting${wait ? ` in ${Math.ceil(wait / 1000)} s` : ""}; no change is lost`;
      if (readAt !== null) {
        badge(`live stream waiting (${reason}): showing the statuses as read at ${readAt.toLocaleTimeString()}; `
              + again, "waiting");
      } else {
        badge(`stream down (${reason}): ${again}`, "down");
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  // While GET /events refuses a new stream (at its bound of clients, for up to a minute), the statuses are read from
  // GET /fleet at each attempt, so the page shows the fleet meanwhile, not an empty list; the stream, once it opens,
  // resumes after what that read holds (its position), so nothing is lost or applied twice.
  async function fallback() {
    try {
      await snapshot([]);
      readAt = new Date();
    } catch (error) {
      // Not read either: the badge says the stream is down, and the next attempt tries again.
    }
  }

  function watchStaleness() {
    setInterval(() => {
      if (connected && Date.now() - lastHeard > 2 * heartbeatMs + 5000) {
        badge(`stale: nothing heard for ${Math.round((Date.now() - lastHeard) / 1000)} s`, "stale");
        if (streamAbort) { streamAbort.abort(); } // reconnect, resuming after the last event
      }
      render(); // "since" times and the marks of recent changes age
    }, 1000);
  }

  // ------------------------------------------------------------------------------------------ the page

  function onFilter() {
    filter.name = $("filter-name").value.trim().toLowerCase();
    filter.state = $("filter-state").value;
    filter.worker = $("filter-worker").value.trim().toLowerCase();
    filter.health = $("filter-health").value;
    filter.sort = $("sort").value;
    filter.view = $("view").value;
    dirty = true;
    render();
  }

  // By query parameters: a path cannot address every name (the browser resolves ".." before sending it, and an
  // encoded "/" is refused).
  // A connector's record (GET /connectors/{name}/history): availability, failures, restarts and time to recovery over
  // the last hour, day and week, its own status's, its tasks' together and each task's. Every text goes in as text.
  async function showRecord(connector) {
    $("record-title").textContent = `${connector}: the record`;
    const body = $("record-body");
    body.replaceChildren();
    $("record-note").textContent = "loading…";
    $("record-dialog").showModal();
    try {
      const path = `/connectors/${encodeURIComponent(connector)}/history?limit=1`;
      const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
      const answer = await response.json();
      if (!response.ok) {
        $("record-note").textContent = answer.message;
        return;
      }
      const percent = (v) => (v === null || v === undefined ? "-" : `${(v * 100).toFixed(2)} %`);
      const recovery = (r) => (!r || !r.episodes ? "-" : `${r.episodes} in ${(r.mean_ms / 1000).toFixed(1)} s`);
      const restarts = (r) => Object.entries(r || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "-";
      for (const [window, found] of Object.entries(answer.windows)) {
        const rows = [["connector", found.connector], ["tasks together", found.all_tasks],
                      ...Object.entries(found.tasks).map(([n, f]) => [`task ${n}`, f])];
        for (const [what, f] of rows) {
          if (!f) { continue; }
          const tr = document.createElement("tr");
          for (const text of [window, what, percent(f.availability), String(f.failures), String(f.recovered),
                              restarts(f.restarts), recovery(f.recovery_with_restart),
                              recovery(f.recovery_without_restart)]) {
            const td = document.createElement("td");
            td.textContent = text;
            tr.append(td);
          }
          body.append(tr);
        }
      }
      $("record-note").textContent = `from the history topic ${answer.history_topic}, as of ${when(answer.as_of / 1000)}`;
    } catch (error) {
      $("record-note").textContent = String(error);
    }
  }

  async function showTrace(connector, task) {
    const query = new URLSearchParams({ connector });
    if (task !== "connector") { query.set("task", task); }
    const path = `${FLEET}/status?${query}`;
    $("trace-title").textContent = task === "connector" ? connector : `${connector}, task ${task}`;
    $("trace-text").textContent = "loading…";
    $("trace-dialog").showModal();
    try {
      const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
      const body = await response.json();
      $("trace-text").textContent = response.ok ? (body.trace || "(no trace)") : body.message;
    } catch (error) {
      $("trace-text").textContent = String(error);
    }
  }

  function start() {
    $("filters").addEventListener("submit", (e) => e.preventDefault());
    for (const id of ["filter-name", "filter-state", "filter-worker", "filter-health", "sort", "view"]) {
      $(id).addEventListener("input", onFilter);
    }
    $("trace-close").addEventListener("click", () => $("trace-dialog").close());
    $("record-close").addEventListener("click", () => $("record-dialog").close());
    list.addEventListener("scroll", () => render(), { passive: true });
    window.addEventListener("resize", () => render());
    spacer.addEventListener("click", (e) => {
      const button = e.target.closest("button[data-trace]");
      const record = e.target.closest("button[data-record]");
      const row = e.target.closest(".row");
      if (button && row) {
        showTrace(row.dataset.connector, button.dataset.trace);
      } else if (record && row) {
        showRecord(row.dataset.connector);
      } else if (row && row.classList.contains("connector")) {
        const name = row.dataset.connector;
        if (expanded.has(name)) { expanded.delete(name); } else { expanded.add(name); }
        dirty = true;
        render();
      }
    });
    stream();
    watchStaleness();
  }

  start();
})();
