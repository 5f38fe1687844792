// reynctl web: the page. Hand-written, no build step, nothing from another origin.
// Every read and action is one daemon method behind /api/read and /api/call (POST,
// with this page's CSRF value); /api/events streams the daemon's notifications.
"use strict";
const CSRF = document.querySelector('meta[name="csrf"]').content;
const ROW = 24, LANE = 14, PAD = 8, OVERSCAN = 10;
const FIRST = 100;  // rows of the first paint: more than a tall screen shows
const SHOWN = 200;  // messages and changes drawn at most: a long history stays fast
const $ = (id) => document.getElementById(id);
const ui = { rows: [], bySeq: new Map(), fromEnd: new Map(), head: 0, selected: null, agent: null,
             complete: false, detail: Promise.resolve() };
// A row's index, kept as its place from the end: rows only ever come on top.
ui.index = {
  has: (seq) => ui.fromEnd.has(seq),
  get: (seq) => { const e = ui.fromEnd.get(seq); return e === undefined ? undefined : ui.rows.length - 1 - e; },
};

// The token stays out of the address bar (and of screenshots): the cookie carries it now.
if (location.search.includes("token=")) history.replaceState(null, "", "/");

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
async function answer(r) {
  const body = await r.json().catch(() => ({ error: { message: `HTTP ${r.status}` } }));
  if (!r.ok) throw new Error(body.error ? body.error.message : `HTTP ${r.status}`);
  return body;
}
async function read(method, params) {
  const p = encodeURIComponent(JSON.stringify(params || {}));
  return answer(await fetch(`/api/read/${method}?p=${p}`));
}
async function act(method, params) {
  return answer(await fetch(`/api/call/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-reynd-csrf": CSRF },
    body: JSON.stringify(params),
  }));
}
function showError(e) {
  $("error").textContent = e ? String(e.message || e) : "";
  $("error").hidden = !e;
}

// ---- the timeline: only the rows in view are in the DOM --------------------------
async function loadTimeline(first) {
  // With all the rows of a head, ask for the change since it: a few rows, not megabytes.
  const url = first ? `/api/timeline?first=${first}`
            : ui.complete ? `/api/timeline?since=${ui.head}` : "/api/timeline";
  return showTimeline(await answer(await fetch(url)), first);
}

// `first`: t holds only the newest rows (the rest follows).
async function showTimeline(t, first) {
  if (t.since !== undefined) {
    if (t.since !== ui.head) return loadTimeline();  // moved meanwhile: everything
    // Rows come on top only: the maps change by the rows replaced, not all 22,000.
    for (const r of ui.rows.slice(0, t.replace)) { ui.bySeq.delete(r.seq); ui.fromEnd.delete(r.seq); }
    const n = t.rows.length + ui.rows.length - t.replace;
    t.rows.forEach((r, i) => { ui.bySeq.set(r.seq, r); ui.fromEnd.set(r.seq, n - 1 - i); });
    t.rows = t.rows.concat(ui.rows.slice(t.replace));
  } else {
    ui.bySeq = new Map(t.rows.map((r) => [r.seq, r]));
    ui.fromEnd = new Map(t.rows.map((r, i) => [r.seq, t.rows.length - 1 - i]));
  }
  ui.complete = !first;
  const box = $("timeline");
  const top = Math.floor(box.scrollTop / ROW);
  const anchor = ui.rows[top] ? ui.rows[top].seq : null;  // keep what the user looks at
  const offset = box.scrollTop - top * ROW;
  // Selected at the tip: follow it (a turn then shows step by step); else stay put.
  const follow = ui.selected === ui.head;
  ui.rows = t.rows; ui.head = t.head;
  if (follow) ui.selected = t.head;
  ui.width = PAD * 2 + LANE * t.lanes;
  $("spacer").style.height = `${t.total * ROW}px`;
  if (anchor !== null && ui.index.has(anchor) && top > 0) box.scrollTop = ui.index.get(anchor) * ROW + offset;
  if (ui.selected === null || !ui.bySeq.has(ui.selected)) ui.selected = t.head;
  draw();
}

function x(col) { return PAD + col * LANE + LANE / 2; }

function draw() {
  const box = $("timeline"), win = $("window");
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - OVERSCAN);
  const last = Math.min(ui.rows.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + OVERSCAN);
  win.style.top = `${first * ROW}px`;
  const lanes = svg("svg", { class: "lanes", width: ui.width, height: (last - first) * ROW });
  const y = (i) => (i - first) * ROW + ROW / 2;
  // Edges into view: a node's line runs down its own lane, then bends into its parent.
  for (let i = 0; i < ui.rows.length; i++) {
    const r = ui.rows[i];
    if (r.parent === null || i >= last) continue;
    const j = ui.index.get(r.parent);
    if (j === undefined || j < first) continue;
    const bend = Math.max(y(i), y(j) - ROW);
    const d = `M${x(r.col)},${y(i)} V${bend} C${x(r.col)},${y(j)} ${x(r.col)},${y(j)} ${x(ui.rows[j].col)},${y(j)}`;
    lanes.append(svg("path", { d, class: r.active ? "" : "abandoned" }));
  }
  const frag = document.createDocumentFragment();
  frag.append(lanes);
  for (let i = first; i < last; i++) {
    const r = ui.rows[i];
    const cls = r.here ? "here" : r.active ? "" : "abandoned";
    lanes.append(svg("circle", { cx: x(r.col), cy: y(i), r: r.here ? 6 : 5, class: cls, "data-seq": r.seq }));
    frag.append(rowElement(r));
  }
  win.replaceChildren(frag);
  if (!performance.getEntriesByName("timeline-drawn").length) performance.mark("timeline-drawn");
}

function kindText(r) {
  if (r.kind === "reset") return `${r.op || "reset"} → ${r.target}`;
  return r.kind === "plan_step" ? "plan step" : r.kind;
}

function rowElement(r) {
  const row = el("div", { class: `row${r.active ? "" : " abandoned"}${r.seq === ui.selected ? " sel" : ""}`,
                          "data-seq": r.seq, role: "option", "aria-selected": r.seq === ui.selected });
  row.style.paddingLeft = `${ui.width}px`;
  const label = r.kind === "genesis" ? "the empty state" : r.kind === "tip" ? "the tip" : r.label;
  row.append(el("span", { class: "seq" }, String(r.seq)), el("span", { class: "kind" }, kindText(r)),
             el("span", { class: "agent" }, r.agent || ""));
  const text = el("span", { class: "label" });
  for (const t of r.tags) text.append(el("span", { class: "tag" }, t));
  text.append(label || "");
  if (r.reason) text.append(el("span", { class: "reason" }, `“${r.reason}”`));
  row.append(text);
  if (r.here) row.append(el("span", { class: "here" }, "◀ you are here"));
  else if (!r.active) row.append(el("span", {}, "abandoned"));
  return row;
}

// ---- the selected checkpoint --------------------------------------------------------
function select(seq, { scroll = true } = {}) {
  if (!ui.bySeq.has(seq)) return;
  ui.selected = seq;
  const i = ui.index.get(seq), box = $("timeline");
  if (scroll && (i * ROW < box.scrollTop || (i + 1) * ROW > box.scrollTop + box.clientHeight))
    box.scrollTop = i * ROW - box.clientHeight / 2;
  draw();
  ui.detail = loadDetail().catch(showError);  // bench.web awaits it
}

async function loadDetail() {
  const r = ui.bySeq.get(ui.selected);
  if (!r) return;
  $("detail-title").textContent = `seq ${r.seq} · ${kindText(r)}${r.agent ? " · " + r.agent : ""}` +
    (r.here ? " · you are here" : r.active ? "" : " · abandoned");
  $("do-rewind").disabled = !r.active || r.here;
  $("do-checkout").disabled = r.here;
  $("do-act-turn").disabled = !r.active || !r.agent;
  $("do-tag").disabled = false;
  const [diff, state] = await Promise.all([
    read("state.diff", { from_seq: r.seq, to_seq: diffTo(), files: true }),
    read("state.get", { seq: r.seq, history_last: SHOWN }),
  ]);
  if (ui.selected !== r.seq) return;  // another row was selected meanwhile: its own load draws
  $("diff").replaceChildren(...conversationDiff(diff), ...filesDiff(diff), diffTable(diff));
  const names = Object.keys(state.agents);
  const sel = $("agent");
  if (ui.agent === null || !names.includes(ui.agent)) ui.agent = r.agent || names[0] || null;
  sel.replaceChildren(...names.map((n) => el("option", n === ui.agent ? { selected: "" } : {}, n)));
  const agent = ui.agent ? state.agents[ui.agent] : null;
  const history = agent ? agent.history : [];
  $("conversation").replaceChildren(...history.slice(-SHOWN).map((m) => {
    const calls = (m.tool_calls || []).map((c) => `→ ${c.name}(${c.arguments})`).join("\n");
    return el("div", { class: `msg ${m.role}` }, el("b", {}, m.role), [m.content, calls].filter(Boolean).join("\n"));
  }));
  if (!agent) $("conversation").append("(no agent as of this seq)");
  const earlier = (state.history_from || {})[ui.agent] || 0;  // the daemon sent the last SHOWN
  if (earlier)
    $("conversation").prepend(el("p", {}, `${earlier} earlier messages not shown`));
}

// The other side of a checkpoint's diff: the seq typed, else the tip.
function diffTo() {
  const v = $("diff-to").value;
  return v === "" ? ui.head : Number(v);
}

// One diff across substrates (issue 27): the messages each agent's conversation gained or
// lost, the workspace's files (when workspace rewind is on), then the rest of the state.
function conversationDiff(diff) {
  const out = [];
  for (const [agent, c] of Object.entries(diff.conversations || {})) {
    const lines = [
      ...c.removed.map((m) => el("div", { class: `msg ${m.role} removed` }, el("b", {}, `− ${m.role}`), m.content || "")),
      ...c.added.map((m) => el("div", { class: `msg ${m.role} added` }, el("b", {}, `+ ${m.role}`), m.content || "")),
    ];
    out.push(el("h4", {}, `${agent}: ${c.removed.length} message(s) only as of ${diff.from_seq}, ` +
      `${c.added.length} only as of ${diff.to_seq} (after ${c.common} shared)`), ...lines.slice(0, SHOWN));
  }
  return out;
}

function filesDiff(diff) {
  if (!diff.files || !diff.files.length) return [];
  const out = [el("h4", {}, `${diff.files.length} file(s) differ`)];
  for (const f of diff.files.slice(0, SHOWN))
    out.push(el("div", { class: "file" }, el("b", {}, `${f.op} ${f.path}`),
      f.patch ? el("pre", { class: "patch" }, f.patch) : el("span", {}, f.binary ? " (binary)" : "")));
  return out;
}

function diffTable(diff) {
  const rows = [];
  for (const [agent, changes] of Object.entries(diff.agents))
    for (const c of changes)
      rows.push(el("tr", {}, el("td", {}, `${agent}${c.path}`), el("td", {}, c.op),
        el("td", { class: "before" }, c.before === undefined || c.before === null ? "" : JSON.stringify(c.before)),
        el("td", { class: "after" }, c.after === undefined || c.after === null ? "" : JSON.stringify(c.after))));
  const to = diff.to_seq === ui.head ? `the tip ${diff.to_seq}` : `${diff.to_seq}`;
  if (!rows.length) return el("p", {}, `no difference between ${diff.from_seq} and ${to}`);
  const head = el("tr", {}, el("th", {}, "path"), el("th", {}, "op"),
                  el("th", {}, `as of ${diff.from_seq}`), el("th", {}, `as of ${to}`));
  const table = el("table", { class: "diff" }, head, ...rows.slice(0, SHOWN));
  if (rows.length <= SHOWN) return table;
  return el("div", {}, table, el("p", {}, `and ${rows.length - SHOWN} more changes (reynctl diff shows all)`));
}

// ---- actions, each behind a confirm that says what it changes ------------------------
function confirmDialog(title, body) {
  return new Promise((resolve) => {
    const d = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-body").replaceChildren(...body);
    d.onclose = () => resolve(d.returnValue === "ok");
    d.returnValue = "";
    d.showModal();
    $("confirm-ok").focus();
  });
}

async function whatChanges(target, agent) {
  const diff = await read("state.diff", { from_seq: ui.head, to_seq: target, ...(agent ? { agent } : {}) });
  const n = Object.values(diff.agents).reduce((a, c) => a + c.length, 0);
  const lines = [el("p", {}, `The tip moves from ${ui.head} to the state as of ${target}. ` +
    "A reset record is appended; nothing is deleted: what is abandoned stays reachable by checkout.")];
  lines.push(el("p", {}, n ? `${n} change(s) to the agents' state:` : "The agents' state does not change."));
  if (n) lines.push(diffTable(diff));
  return lines;
}

async function move(method, seq) {
  const r = ui.bySeq.get(seq);
  const agent = method === "act_turn.rewind" ? r.agent : undefined;
  const body = await whatChanges(seq, agent);
  const reason = el("input", { placeholder: "reason (optional)", "aria-label": "reason", id: "reason" });
  body.push(reason);
  // Edit and retry: a message to deliver in the same atomic batch as the reset record.
  const then = el("input", { placeholder: `then send to ${ui.agent || "the agent"} (optional)`,
                             "aria-label": "then send", id: "then" });
  if (!agent && ui.agent) body.push(el("br"), then);
  if (!(await confirmDialog(`${method} to ${seq}?`, body))) return;
  const params = { seq };
  if (reason.value) params.reason = reason.value;
  if (agent) params.agent = agent;
  if (then.value && !agent) params.then = { agent: ui.agent, text: then.value };
  await act(method, params);
  showError(null);
  await refresh();
  select(ui.head);
}

async function undo() {
  const log = await read("reflog.list", { limit: 1 });
  if (!log.entries.length) throw new Error("nothing to undo: the tip never moved");
  const target = log.entries[0].supersedes;
  if (!(await confirmDialog(`undo the last move (to ${target})?`, await whatChanges(target)))) return;
  await act("undo", {});
  await refresh();
  select(ui.head);
}

async function tag() {
  const name = $("tag-name").value.trim();
  if (!name) throw new Error("type a tag name first");
  const body = [el("p", {}, `Name seq ${ui.selected} “${name}”. The state does not change.`)];
  if (!(await confirmDialog(`tag ${ui.selected} as ${name}?`, body))) return;
  await act("tags.set", { name, seq: ui.selected });
  await refresh();
}

async function send(ev) {
  ev.preventDefault();
  const text = $("message").value;
  if (!ui.agent) throw new Error("no agent to send to");
  if (!text) return;
  await act("agents.send", { agent: ui.agent, text });
  $("message").value = "";
}

// Each open question's form, by agent and id: a reload (every live update) keeps the
// forms of questions still open, so an answer being typed is neither lost nor unfocused.
const questionForms = new Map();

async function loadQuestions() {
  const q = await read("interventions.list", {});
  const open = new Map();
  for (const i of q.interventions) {
    const key = JSON.stringify([i.agent, i.intervention_id]);
    let form = questionForms.get(key);
    if (!form) {
      const input = el("input", { "aria-label": `answer to ${i.question}` });
      form = el("form", {}, el("b", {}, `${i.agent} asks: `), i.question, " ", input, el("button", {}, "Answer"));
      form.onsubmit = (ev) => { ev.preventDefault();
        act("interventions.answer", { agent: i.agent, intervention_id: i.intervention_id, answer: input.value })
          .then(loadQuestions).catch(showError); };
    }
    open.set(key, form);
  }
  questionForms.clear();
  for (const [key, form] of open) questionForms.set(key, form);
  const box = $("questions");
  const forms = [...open.values()];
  if (forms.length !== box.children.length || forms.some((f, n) => box.children[n] !== f)) {
    box.replaceChildren(...forms);
  }
}

async function loadStatus() {
  const [s, agents] = await Promise.all([read("daemon.status", {}), read("agents.list", {})]);
  $("status").textContent = `head ${s.head} on branch ${s.branch} · ${agents.agents.length} agent(s)`;
  const dl = $("daemon");
  dl.replaceChildren();
  const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, String(v)));
  add("head", s.head); add("branch", s.branch); add("version", s.version); add("pid", s.pid);
  add("floor", s.floor); add("connections", s.connections);
  add("ambiguous steps", s.ambiguous.length ? s.ambiguous.map((a) => `${a.agent} ${a.turn_id}`).join(", ") : "none");
  add("replication", s.replication ? `${s.replication.state} to ${s.replication.url}, shipped ${s.replication.shipped}` : "off");
  for (const a of agents.agents) {
    let what = a.status + (a.step !== null && a.step !== undefined ? ` (step ${a.step})` : "");
    if (a.ambiguous) what += " · an ambiguous step: `reynctl agents resolve`";
    if (a.waiting_for) what += ` · waiting for an answer`;
    add(`agent ${a.name}`, what);
  }
}

// One reload at a time, in order: an older answer never lands over a newer one.
let chain = Promise.resolve();
function refresh() {
  chain = chain.catch(() => {}).then(async () => {
    await loadTimeline();  // first and alone: the tree shows the change soonest
    await Promise.all([loadStatus(), loadQuestions(), loadDetail()]);
  });
  return chain;
}

// ---- live: the daemon's notifications over SSE ----------------------------------------
// A burst of notifications costs one reload more: those that come while one runs
// make one more when it ends (no fixed wait: another client's write shows at once).
let reloading = null, stale = false;
function soon() {
  if (reloading) { stale = true; return; }
  reloading = refresh().catch(showError).finally(() => {
    reloading = null;
    if (stale) { stale = false; soon(); }
  });
}
function live() {
  const es = new EventSource("/api/events");
  es.addEventListener("hello", () => { $("lost").hidden = true; soon(); });
  es.addEventListener("resync", soon);
  es.addEventListener("notify", soon);
  es.addEventListener("lost", (e) => {
    const d = JSON.parse(e.data);
    $("lost").textContent = `The daemon is lost (${d.message}); reconnecting…`;
    $("lost").hidden = false;
  });
  es.onerror = () => {
    $("lost").textContent = "This page lost its server (reynctl web); reconnecting…";
    $("lost").hidden = false;
  };
}

// ---- wiring and keys -------------------------------------------------------------------
const guard = (f) => (...a) => Promise.resolve(f(...a)).catch(showError);
$("timeline").addEventListener("scroll", () => requestAnimationFrame(draw));
$("window").addEventListener("click", (ev) => {
  const row = ev.target.closest(".row");
  if (row) select(Number(row.dataset.seq), { scroll: false });
});
$("do-rewind").onclick = guard(() => move("rewind", ui.selected));
$("do-checkout").onclick = guard(() => move("checkout", ui.selected));
$("do-act-turn").onclick = guard(() => move("act_turn.rewind", ui.selected));
$("do-tag").onclick = guard(tag);
$("undo").onclick = guard(undo);
$("send-form").onsubmit = guard(send);
$("diff-to").onchange = guard(loadDetail);
$("agent").onchange = guard(() => { ui.agent = $("agent").value; return loadDetail(); });
document.addEventListener("keydown", (ev) => {
  if (ev.target.closest("input, select, button, dialog") || !ui.rows.length) return;
  const i = ui.index.get(ui.selected);
  if (ev.key === "j" || ev.key === "ArrowDown") { select(ui.rows[Math.min(i + 1, ui.rows.length - 1)].seq); }
  else if (ev.key === "k" || ev.key === "ArrowUp") { select(ui.rows[Math.max(i - 1, 0)].seq); }
  else if (ev.key === "Enter") { const r = ui.bySeq.get(ui.selected);
    if (!r.here) guard(() => move(r.active ? "rewind" : "checkout", ui.selected))(); }
  else if (ev.key === "u") { guard(undo)(); }
  else if (ev.key === "/") { $("message").focus(); }
  else return;
  ev.preventDefault();
});
window.addEventListener("resize", () => requestAnimationFrame(draw));
// The rows in view first (painted at once: the page carries them when the server had them
// at hand, else asked for), then all of them with the rest of the page.
const shipped = $("first-rows").textContent;
(shipped ? showTimeline(JSON.parse(shipped), FIRST) : loadTimeline(FIRST))
  .catch(showError).finally(() => refresh().catch(showError));
live();
