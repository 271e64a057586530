// hetsched dashboard: polls /dashboard/data every second and redraws. No build step.
"use strict";
const $ = (id) => document.getElementById(id);

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
      return `<td title="${tip}" style="background:${colour(metric, g)}">${label}</td>`;
    }).join("");
    return `<tr data-node="${n.node}"><th>${n.node} <small>${n.model}</small></th>${cells}</tr>`;
  });
  $("heatmap").innerHTML = rows.join("");
}

function curves(history) {
  if (history.length < 2) return;
  const t0 = history[0].t, t1 = history[history.length - 1].t || t0 + 1;
  const qmax = Math.max(1, ...history.map((h) => h.queue));
  const x = (h) => (600 * (h.t - t0)) / Math.max(1, t1 - t0);
  const line = (f, c) => `<polyline fill="none" stroke="${c}" stroke-width="2" points="${
    history.map((h) => `${x(h).toFixed(1)},${(155 - 150 * f(h)).toFixed(1)}`).join(" ")}"/>`;
  $("curves").innerHTML = line((h) => h.allocation, "#4fa3ff") + line((h) => h.queue / qmax, "#ffa94f");
}

function feed(decisions) {
  $("feed").innerHTML = decisions.slice(0, 25).map((d) => {
    const where = d.node ? `${d.node}[${d.gpus.map((g) => g.index + (g.share_milli < 1000 ? "@" + g.share_milli + "m" : "")).join(",")}]` : "";
    const top = d.candidates.length ? " · " + Object.entries(d.candidates[0].terms)
      .map(([k, v]) => `${k}=${v}`).join(" ") : "";
    return `<tr class="${d.type}" data-task="${d.task}"><td>${d.at.slice(11, 19)}</td>` +
      `<td>${d.type.replace("Task", "")}</td><td>${d.task}</td><td>${d.tenant}</td>` +
      `<td>${where}</td><td title="${d.reason}${top}">${d.reason}${top}</td></tr>`;
  }).join("");
}

function queue(data) {
  $("tenants").textContent = Object.entries(data.queued_by_tenant)
    .map(([t, n]) => `${t || "?"}: ${n}`).join("  ") || "empty";
  $("queue").innerHTML = data.queue.slice(0, 50)
    .map((q) => `<li>${q.task} <small>${q.tenant}</small></li>`).join("");
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
  } catch (e) {
    $("summary").textContent = "worker unreachable: " + e;
  }
}
$("metric").addEventListener("change", refresh);
refresh();
setInterval(refresh, 1000);
