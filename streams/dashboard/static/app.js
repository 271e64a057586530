// hetsched dashboard: polls /dashboard/data every second and redraws. No build step.
"use strict";
const $ = (id) => document.getElementById(id);

// Task ids are any string: escaped wherever they enter HTML.
const esc = (s) => String(s ?? "").replace(/[&<>"']/g,
  (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// Ids of one run share a long prefix: keep the head and the distinctive tail, cut the
// middle (the rule of streams/dashboard/short_id.py, counted in code points).
const ID_HEAD = 6, ID_WIDTH = 22;
function shortId(id) {
  const chars = Array.from(id);
  if (chars.length <= ID_WIDTH) return id;
  return chars.slice(0, ID_HEAD).join("") + "…" +
    chars.slice(chars.length - (ID_WIDTH - ID_HEAD - 1)).join("");
}

// A task as a link to its view: the short id shown, the whole id on hover.
const taskLink = (id) => `<a class="task" href="#task=${encodeURIComponent(id)}" ` +
  `title="${esc(id)}">${esc(shortId(id))}</a>`;

function colour(metric, gpu) {
  let v = 0;
  if (metric === "alloc") v = gpu.used_milli / 1000;
  else if (metric === "util") v = (gpu.util ?? 0) / 100;
  else v = Math.min(1, Math.max(0, ((gpu.temp ?? 30) - 30) / 60));
  const hue = 210 - 210 * v;
  return `hsl(${hue}, 70%, ${18 + 32 * v}%)`;
}

function heatmap(nodes) {
  const metric = $("metric").value;
  const rows = nodes.map((n) => {
    const cells = n.gpus.map((g) => {
      const tip = `${n.node} GPU ${g.index}: ${(g.used_milli / 10).toFixed(0)}% allocated` +
        (g.util !== undefined ? `, ${g.util.toFixed(0)}% util, ${g.temp.toFixed(0)} °C` : "");
      const label = metric === "alloc" ? Math.round(g.used_milli / 10) :
        metric === "util" ? Math.round(g.util ?? 0) : Math.round(g.temp ?? 0);
      return `<td title="${esc(tip)}" style="background:${colour(metric, g)}">${label}</td>`;
    }).join("");
    return `<tr data-node="${esc(n.node)}"><th>${esc(n.node)} <small>${esc(n.model)}</small></th>${cells}</tr>`;
  });
  $("heatmap").innerHTML = rows.join("");
}

// The chart's frame: plot area inside the SVG's 600 x 200 view box.
const PLOT = { left: 52, right: 548, top: 10, bottom: 160 };

// Round tick steps (1, 2, 5 x 10^k, at least `least`) giving about `count` ticks over
// [0, span]; the last tick is at or past span.
function ticks(span, count, least = 0) {
  const raw = Math.max(span / count, least, 1e-9), mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v < span + step - 1e-9; v += step) out.push(v);
  return out;
}

// Allocation (left axis, %) and queue length (right axis, tasks) against time (x axis,
// seconds before the latest sample). Axes are drawn before there is any history.
function curves(history) {
  const tLast = history.length ? history[history.length - 1].t : 0;
  const span = Math.max(60, history.length ? tLast - history[0].t : 0);
  const qTicks = ticks(Math.max(1, ...history.map((h) => h.queue)), 4, 1);  // whole tasks
  const qmax = qTicks[qTicks.length - 1];
  const w = PLOT.right - PLOT.left, h = PLOT.bottom - PLOT.top;
  const x = (ago) => PLOT.right - (w * ago) / span;
  const y = (share) => PLOT.bottom - h * share;
  const text = (cls, tx, ty, s, anchor = "middle", rotate = "") =>
    `<text class="${cls}" x="${tx}" y="${ty}" text-anchor="${anchor}"${rotate}>${s}</text>`;
  const parts = [
    `<line class="axis" x1="${PLOT.left}" y1="${PLOT.bottom}" x2="${PLOT.right}" y2="${PLOT.bottom}"/>`,
    `<line class="axis" x1="${PLOT.left}" y1="${PLOT.top}" x2="${PLOT.left}" y2="${PLOT.bottom}"/>`,
    `<line class="axis" x1="${PLOT.right}" y1="${PLOT.top}" x2="${PLOT.right}" y2="${PLOT.bottom}"/>`];
  for (const ago of ticks(span, 6).filter((a) => a <= span)) {
    parts.push(`<line class="grid" x1="${x(ago)}" y1="${PLOT.top}" x2="${x(ago)}" y2="${PLOT.bottom}"/>`,
      text("tick", x(ago), PLOT.bottom + 13, ago ? `−${Math.round(ago)}` : "0"));
  }
  for (const pct of [0, 25, 50, 75, 100]) {
    parts.push(text("tick alloc", PLOT.left - 5, y(pct / 100) + 4, pct, "end"));
  }
  for (const q of qTicks) parts.push(text("tick queue", PLOT.right + 5, y(q / qmax) + 4, q, "start"));
  parts.push(
    text("axis-label", (PLOT.left + PLOT.right) / 2, PLOT.bottom + 32, "time (s, 0 = latest sample)"),
    text("axis-label alloc", 12, (PLOT.top + PLOT.bottom) / 2, "GPUs allocated (%)", "middle",
      ` transform="rotate(-90 12 ${(PLOT.top + PLOT.bottom) / 2})"`),
    text("axis-label queue", 590, (PLOT.top + PLOT.bottom) / 2, "queue (tasks)", "middle",
      ` transform="rotate(90 590 ${(PLOT.top + PLOT.bottom) / 2})"`));
  const line = (f, c) => `<polyline fill="none" stroke="${c}" stroke-width="2" points="${
    history.map((p) => `${x(tLast - p.t).toFixed(1)},${y(f(p)).toFixed(1)}`).join(" ")}"/>`;
  if (history.length >= 2) {
    parts.push(line((p) => p.allocation, "#4fa3ff"), line((p) => p.queue / qmax, "#ffa94f"));
  }
  $("curves").innerHTML = parts.join("");
}

function feed(decisions) {
  $("feed").innerHTML = decisions.slice(0, 25).map((d) => {
    const where = d.node ? `${d.node}[${d.gpus.map((g) => g.index + (g.share_milli < 1000 ? "@" + g.share_milli + "m" : "")).join(",")}]` : "";
    const top = d.candidates.length ? " · " + Object.entries(d.candidates[0].terms)
      .map(([k, v]) => `${k}=${v}`).join(" ") : "";
    return `<tr class="${esc(d.type)}" data-task="${esc(d.task)}"><td>${d.at.slice(11, 19)}</td>` +
      `<td>${esc(d.type.replace("Task", ""))}</td><td>${taskLink(d.task)}</td><td>${esc(d.tenant)}</td>` +
      `<td>${esc(where)}</td><td title="${esc(d.reason + top)}">${esc(d.reason + top)}</td></tr>`;
  }).join("");
}

function queue(data) {
  $("tenants").textContent = Object.entries(data.queued_by_tenant)
    .map(([t, n]) => `${t || "?"}: ${n}`).join("  ") || "empty";
  $("queue").innerHTML = data.queue.slice(0, 50)
    .map((q) => `<li data-task="${esc(q.task)}">${taskLink(q.task)} <small>${esc(q.tenant)}</small></li>`)
    .join("");
}

// Learned speeds (issue 35): per class and GPU count, each model's speed against the
// class's fastest model; "measured" cells rest on runs there, "filled" ones on other
// classes and the catalog (the basis is the cell's title).
function speeds(rows) {
  const models = [...new Set(rows.flatMap((r) => Object.keys(r.models)))].sort();
  $("speeds").innerHTML = rows.length === 0 ? "<tr><td>nothing learned yet: tasks that " +
    "write their progress (docs/node.md) teach it when a run ends</td></tr>" :
    `<tr><th>class</th><th>GPUs</th>${models.map((m) => `<th>${esc(m)}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr><td>${esc(r.class)}</td><td>${r.gpus}</td>` + models.map((m) => {
      const e = r.models[m];
      if (!e) return "<td></td>";
      const kind = e.runs ? "measured" : "filled";
      return `<td class="${kind}" title="${esc(e.basis)}">${e.speed.toFixed(2)}` +
        `${e.runs ? ` <small>(${e.runs} run${e.runs === 1 ? "" : "s"})</small>` : ""}</td>`;
    }).join("") + "</tr>").join("");
}

// ---- the task view: #task=<id> opens it (every task link sets that hash) ----------

function openedTask() {
  const m = location.hash.match(/^#task=(.*)$/);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (e) { return m[1]; }
}

// The endpoint's URL for any id: "." and ".." would be resolved as path segments.
const taskUrl = (id) => (id === "." || id === "..") ?
  `/task/?id=${encodeURIComponent(id)}` : `/task/${encodeURIComponent(id)}`;

// The line `hetsched explain` prints for one verdict: "policy: code: reasons".
const verdictLine = (v) => `${v.policy}: ${v.code}: ${(v.reasons || []).join("; ")}`;

function detail(row) {
  const p = row.payload || {};
  if (row.type === "TaskUnschedulable") {
    return (p.resolvable ? "waits: " : "refused: ") + (p.verdicts || []).map(verdictLine).join(" | ");
  }
  const node = p.node_id || p.to_node_id;
  const gpus = (p.gpus || p.to_gpus || []).map((g) => g.index ?? g.gpu_index).join(",");
  const reason = p.reason && typeof p.reason === "object" ? p.reason.code : p.reason;
  return [node ? `${node}${gpus ? "[" + gpus + "]" : ""}` : "", reason || ""].filter(Boolean).join(" · ");
}

function taskPanel(doc) {
  const now = doc.now ? `<p class="now">now <b>${esc(doc.now.status)}</b> in ${esc(doc.now.cell)}` +
    (doc.now.node ? ` on ${esc(doc.now.node)} [${doc.now.gpus.join(",")}]` : "") +
    (doc.now.waiting_on.length ? `, waiting on ${doc.now.waiting_on.map(taskLink).join(", ")}` : "") +
    "</p>" : "";
  const pending = doc.pending ? `<section id="task-pending"><h3>why it waits ` +
    `<small>(latest decision, ${esc(doc.pending.at)}, ${doc.pending.nodes_considered} nodes considered)</small></h3>` +
    (doc.pending.message ? `<p>${esc(doc.pending.message)}</p>` : "") +
    `<ul class="verdicts">${doc.pending.verdicts.map((v) =>
      `<li data-policy="${esc(v.policy)}">${esc(verdictLine(v))}` +
      (v.nodes ? ` <small>(${v.nodes} nodes filtered out)</small>` : "") + "</li>").join("")}</ul>` +
    "</section>" : "";
  const rows = doc.timeline.map((r) => `<tr class="${esc(r.type)}"><td title="${esc(r.at)}">` +
    `${esc(r.at.slice(11, 23))}</td><td>${esc(r.step)}</td><td>${esc(detail(r))}</td></tr>`).join("");
  const explained = doc.explain ? `<details><summary>hetsched explain</summary>` +
    `<pre>${esc(doc.explain)}</pre></details>` : `<p class="note">${esc(doc.explain_error || "")}</p>`;
  return now + pending + `<h3>timeline <small>(event time, UTC)</small></h3>` +
    (rows ? `<table id="task-timeline">${rows}</table>` :
      `<p class="note">no records of this task since the worker started</p>`) + explained;
}

async function showTask() {
  const id = openedTask();
  $("task-panel").hidden = id === null;
  if (id === null) return;
  $("task-title").innerHTML = `task <code>${esc(id)}</code>`;
  try {
    const res = await fetch(taskUrl(id), { cache: "no-store" });
    const doc = await res.json();
    if (openedTask() !== id) return;  // another task was opened meanwhile
    $("task-body").innerHTML = res.ok ? taskPanel(doc) : `<p class="error">${esc(doc.error)}</p>`;
    $("task-panel").dataset.state = res.ok ? (doc.pending ? "pending" : "known") : "unknown";
  } catch (e) {
    $("task-body").innerHTML = `<p class="error">worker unreachable: ${esc(e)}</p>`;
  }
}

async function refresh() {
  try {
    const data = await (await fetch("/dashboard/data", { cache: "no-store" })).json();
    const gpus = data.nodes.reduce((a, n) => a + n.gpus.length, 0);
    const used = data.nodes.reduce((a, n) => a + n.gpus.reduce((b, g) => b + g.used_milli, 0), 0);
    $("summary").textContent = `${data.worker}: ${data.nodes.length} nodes, ${gpus} GPUs, ` +
      `${gpus ? ((100 * used) / (1000 * gpus)).toFixed(0) : 0}% allocated, ` +
      `${data.queue.length} queued, ${data.placed} placed`;
    document.body.dataset.nodes = data.nodes.length;
    document.body.dataset.placed = data.placed;
    heatmap(data.nodes); curves(data.history); feed(data.decisions); queue(data);
    speeds(data.speeds);
  } catch (e) {
    $("summary").textContent = "worker unreachable: " + e;
  }
  if (openedTask() !== null) showTask();
}
$("metric").addEventListener("change", refresh);
$("task-close").addEventListener("click", () => { history.replaceState(null, "", location.pathname); showTask(); });
window.addEventListener("hashchange", showTask);
curves([]);
refresh();
setInterval(refresh, 1000);
