"""Outputs of a time-mode comparison: CSV over time, PNG plots, markdown tables.

Plots use matplotlib's Agg backend (files only, no display): ``plot`` the
allocation, queue and power over time, ``plot_cdfs`` the distributions of JCT
and wait per policy, ``plot_tenants`` each tenant's mean bounded slowdown and
wait per policy. ``write_job_rows`` writes one CSV row per job and policy
(``--jobs-out``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from streams.core.request import MILLI_PER_GPU
from streams.sim.time.jobs import Job
from streams.sim.time.metrics import Recorder, bounded_slowdown
from streams.sim.traces import NodeSpec

HEADLINE = (
    ("alloc_pct", "GPU allocation %", "{:.1f}"),
    ("req_pct", "GPU requested % (no rounding up)", "{:.1f}"),
    ("alloc_pct_steady", "GPU allocation %, from 1/4 of the window", "{:.1f}"),
    ("req_pct_steady", "GPU requested %, from 1/4 of the window", "{:.1f}"),
    ("used_pct", "GPU used %", "{:.1f}"),
    ("wait_mean_s", "queue delay mean (min)", "{:.1f}"),
    ("wait_p50_s", "queue delay p50 (min)", "{:.1f}"),
    ("wait_p95_s", "queue delay p95 (min)", "{:.1f}"),
    ("wait_p99_s", "queue delay p99 (min)", "{:.1f}"),
    ("wait_over_1h_pct", "waiting > 1 h %", "{:.1f}"),
    ("jct_mean_s", "completion time mean (h)", "{:.2f}"),
    ("jct_p50_s", "completion time p50 (h)", "{:.2f}"),
    ("jct_p95_s", "completion time p95 (h)", "{:.2f}"),
    ("jct_p99_s", "completion time p99 (h)", "{:.2f}"),
    ("slowdown_mean", "bounded slowdown mean (10 s)", "{:.2f}"),
    ("slowdown_p99", "bounded slowdown p99 (10 s)", "{:.2f}"),
    ("worst_tenant_slowdown", "worst tenant's mean slowdown", "{:.2f}"),
    ("unfinished", "unfinished at the run's end", "{:.0f}"),
    ("throughput_per_h", "throughput (jobs/h)", "{:.1f}"),
    ("work_gpu_h_per_h", "work throughput (GPU-h/h)", "{:.1f}"),
    ("jain", "Jain (tenants' work share)", "{:.3f}"),
    ("preemptions", "preemptions", "{:.0f}"),
    ("preemptions_per_job", "preemptions per job", "{:.3f}"),
    ("energy_kwh", "energy (kWh)", "{:.0f}"),
    ("makespan_h", "makespan (h)", "{:.1f}"),
)
MINUTES = {"wait_mean_s", "wait_p50_s", "wait_p95_s", "wait_p99_s"}
HOURS = {"jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s", "window_jct_mean_s"}
WINDOW = (
    ("window_jobs", "window jobs (in_window = 1)", "{:.0f}"),
    ("window_jct_mean_s", "window JCT mean (h), finished window jobs", "{:.2f}"),
    ("window_unfinished", "window jobs unfinished", "{:.0f}"),
)
"""Rows of a workload that marks its measured jobs (issue 35), after the headline."""
JOB_COLUMNS = ("policy", "job_id", "tenant", "class", "gpus", "arrival_s", "start_s", "end_s",
               "wait_s", "jct_s", "slowdown", "preemptions", "status", "duration_s",
               "expected_s", "predicted_s")
MAX_TENANT_BARS = 20  # tenants.png shows the tenants with the most jobs, at most this many


def offered_load(jobs: Sequence[Job], nodes: Sequence[NodeSpec],
                 horizon_s: float) -> dict[str, float]:
    """GPU demand of the jobs arriving in the window, as a share of the cluster's GPUs.

    ``requested_pct``: each job's own request x its duration per hour of the
    window (the GPUs it keeps allocated in steady state); ``whole_gpus_pct``:
    the same with fractional requests rounded up to one GPU, as static
    allocation does. Above 100 % a policy cannot keep up: its backlog grows.
    """
    gpus = max(sum(n.gpu_count for n in nodes), 1)
    h = max(horizon_s, 1.0)
    req = whole = 0.0
    arrived = 0
    for j in jobs:
        if j.arrival_s > horizon_s:
            continue
        arrived += 1
        req += j.request.gpu_total_milli / MILLI_PER_GPU * j.duration_s
        whole += j.request.num_gpu * j.duration_s
    return {"requested_pct": 100.0 * req / h / gpus, "whole_gpus_pct": 100.0 * whole / h / gpus,
            "arrivals_per_h": arrived / (h / 3600.0)}


def write_timeseries(path: Path, runs: Mapping[str, Recorder]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "time_s", "alloc_pct", "used_pct", "req_pct", "queued", "running",
                    "power_w"])
        for name, rec in runs.items():
            for s in rec.samples:
                w.writerow([name, f"{s.time_s:.0f}", f"{s.alloc_pct:.2f}", f"{s.used_pct:.2f}",
                            f"{s.req_pct:.2f}", s.queued, s.running, f"{s.power_w:.0f}"])


def write_classes(path: Path, runs: Mapping[str, Recorder]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "class", "jobs", "wait_mean_s", "wait_p95_s", "wait_over_1h_pct",
                    "jct_mean_s", "jct_std_s"])
        for name, rec in runs.items():
            for c, m in rec.per_class().items():
                w.writerow([name, c, *(f"{m[k]:.2f}" for k in (
                    "jobs", "wait_mean_s", "wait_p95_s", "wait_over_1h_pct", "jct_mean_s",
                    "jct_std_s"))])


TENANT_FIELDS = ("jobs", "unfinished", "wait_mean_s", "jct_mean_s", "slowdown_mean", "work_share")


def write_tenants(path: Path, runs: Mapping[str, Recorder]) -> None:
    """Per policy and tenant, ``Recorder.per_tenant``: a CSV, not summary.json, since a
    trace may have thousands of tenants (the LoRA day has 4,247)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "tenant", *TENANT_FIELDS])
        for name, rec in runs.items():
            for tenant, m in rec.per_tenant().items():
                w.writerow([name, tenant, *(f"{m[k]:.4g}" for k in TENANT_FIELDS)])


def summary_table(runs: Mapping[str, Recorder]) -> str:
    names = list(runs)
    sums = {n: runs[n].summary() for n in names}
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label, fmt in HEADLINE + (WINDOW if "window_jobs" in sums[names[0]] else ()):
        scale = 60.0 if key in MINUTES else 3600.0 if key in HOURS else 1.0
        # a key a policy cannot give (Gavel's round-based ones: no samples) shows as "-"
        cells = [fmt.format(sums[n][key] / scale) if key in sums[n] else "-" for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| class | policy | jobs | wait mean (min) | wait p95 (min) | > 1 h % | "
                 "completion mean (h) | completion std (h) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    classes = sorted({c for n in names for c in runs[n].per_class()})
    for c in classes:
        for n in names:
            m = runs[n].per_class().get(c)
            if m is None:
                continue
            lines.append(f"| {c} | {n} | {m['jobs']:.0f} | {m['wait_mean_s'] / 60:.1f} | "
                         f"{m['wait_p95_s'] / 60:.1f} | {m['wait_over_1h_pct']:.1f} | "
                         f"{m['jct_mean_s'] / 3600:.2f} | {m['jct_std_s'] / 3600:.2f} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, runs: Mapping[str, Recorder], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for name, rec in runs.items():
        t = [s.time_s / 3600 for s in rec.samples]
        axes[0].plot(t, [s.alloc_pct for s in rec.samples], label=f"{name} allocated")
        axes[0].plot(t, [s.used_pct for s in rec.samples], "--", label=f"{name} used")
        axes[1].plot(t, [s.queued for s in rec.samples], label=name)
        axes[2].plot(t, [s.power_w / 1000 for s in rec.samples], label=name)
    axes[0].set_ylabel("GPU %")
    axes[1].set_ylabel("queued jobs")
    axes[2].set_ylabel("power (kW)")
    axes[2].set_xlabel("simulated hours")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_job_rows(path: Path, runs: Mapping[str, Recorder]) -> None:
    """One row per job and policy (``--jobs-out``), in ``JOB_COLUMNS`` order.

    ``gpus``: the job's own request in GPUs (0.3 for a 0.3-GPU share, not static
    allocation's rounding up); ``start_s``: its first start; ``wait_s``: all its
    queued time (censored at the run's end when ``unfinished``, see
    streams.sim.time.metrics); ``jct_s`` and ``slowdown`` (bounded, 10 s): empty
    unless it finished; ``duration_s``: its true run time; ``expected_s``: the
    runtime its submitter declared, empty when none; ``predicted_s``: the run time
    the cell predicted from its history when the job first started (policies with
    ``predict_runtimes``, for jobs that declare none), else empty. ``status``:
    finished, unfinished or unschedulable.
    """
    def num(v: float | None) -> str:
        return "" if v is None else f"{v:.3f}".rstrip("0").rstrip(".")

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(JOB_COLUMNS)
        for name, rec in runs.items():
            for st in rec.jobs.values():
                j = st.job
                done = st.status == "finished"
                status = st.status if st.status in ("finished", "unschedulable") \
                    else "unfinished"
                w.writerow([
                    name, j.job_id, j.meta.tenant, j.task_class,
                    num(j.request.gpu_total_milli / MILLI_PER_GPU), num(j.arrival_s),
                    num(st.first_start_s if st.first_start_s >= 0 else None),
                    num(st.end_s if done else None), num(st.wait_s),
                    num(st.end_s - j.arrival_s if done else None),
                    num(bounded_slowdown(st.wait_s, j.duration_s) if done else None),
                    st.preemptions, status, num(j.duration_s), num(j.meta.expected_s),
                    num(st.predicted_s)])


def plot_cdfs(path: Path, runs: Mapping[str, Recorder], title: str) -> None:
    """Empirical CDFs of JCT (finished jobs) and of wait (every counted job) per policy.

    Log x axes in minutes; a wait of 0 (most jobs on an unloaded cluster) is
    drawn at the axis's left edge, 0.01 min, so the curve starts at its share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, rec in runs.items():
        pool = rec.counted()
        jct = np.sort([s.end_s - s.job.arrival_s for s in pool if s.status == "finished"])
        wait = np.sort([s.wait_s for s in pool])
        for ax, vals in ((axes[0], jct), (axes[1], wait)):
            if len(vals) == 0:
                continue
            x = np.maximum(np.asarray(vals) / 60.0, 0.01)
            ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=name)
    for ax, what in ((axes[0], "completion time (JCT)"), (axes[1], "queue wait")):
        ax.set_xscale("log")
        ax.set_xlabel(f"{what}, minutes (log)")
        ax.set_ylabel("share of jobs at or below")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_tenants(path: Path, runs: Mapping[str, Recorder], title: str) -> None:
    """Per tenant, one bar per policy: mean bounded slowdown (top) and mean wait (bottom).

    At most ``MAX_TENANT_BARS`` tenants, those with the most jobs (the title
    says how many were left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    per = {name: rec.per_tenant() for name, rec in runs.items()}
    count: dict[str, float] = {}
    for rows in per.values():
        for tenant, row in rows.items():
            count[tenant] = max(count.get(tenant, 0.0), row["jobs"])
    tenants = sorted(count, key=lambda t: (-count[t], t))[:MAX_TENANT_BARS]
    left = len(count) - len(tenants)
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.6 * len(tenants) * max(len(per), 1)),
                                            6), sharex=True)
    x = np.arange(len(tenants))
    width = 0.8 / max(len(per), 1)
    for i, (name, rows) in enumerate(per.items()):
        empty = {"slowdown_mean": 0.0, "wait_mean_s": 0.0}
        slow = [rows.get(t, empty)["slowdown_mean"] for t in tenants]
        wait = [rows.get(t, empty)["wait_mean_s"] / 60.0 for t in tenants]
        axes[0].bar(x + i * width, slow, width, label=name)
        axes[1].bar(x + i * width, wait, width, label=name)
    axes[0].set_ylabel("mean bounded slowdown")
    axes[1].set_ylabel("mean wait (min)")
    axes[1].set_xticks(x + width * (len(per) - 1) / 2, tenants, rotation=45, ha="right",
                       fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    more = f" ({left} tenants with fewer jobs not shown)" if left > 0 else ""
    axes[0].set_title(f"{title}: per tenant{more}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
