"""Outputs of a time-mode comparison: CSV over time, PNG plots, markdown tables."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from streams.core.request import MILLI_PER_GPU
from streams.sim.time.jobs import Job
from streams.sim.time.metrics import Recorder
from streams.sim.traces import NodeSpec

HEADLINE = (
    ("alloc_pct", "GPU allocation %", "{:.1f}"),
    ("req_pct", "GPU requested % (no rounding up)", "{:.1f}"),
    ("alloc_pct_steady", "GPU allocation %, from 1/4 of the window", "{:.1f}"),
    ("req_pct_steady", "GPU requested %, from 1/4 of the window", "{:.1f}"),
    ("used_pct", "GPU used %", "{:.1f}"),
    ("wait_mean_s", "queue delay mean (min)", "{:.1f}"),
    ("wait_p95_s", "queue delay p95 (min)", "{:.1f}"),
    ("wait_over_1h_pct", "waiting > 1 h %", "{:.1f}"),
    ("throughput_per_h", "throughput (jobs/h)", "{:.1f}"),
    ("work_gpu_h_per_h", "work throughput (GPU-h/h)", "{:.1f}"),
    ("jain", "Jain (tenants)", "{:.3f}"),
    ("preemptions", "preemptions", "{:.0f}"), ("energy_kwh", "energy (kWh)", "{:.0f}"),
    ("makespan_h", "makespan (h)", "{:.1f}"),
)
MINUTES = {"wait_mean_s", "wait_p95_s"}


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


def summary_table(runs: Mapping[str, Recorder]) -> str:
    names = list(runs)
    sums = {n: runs[n].summary() for n in names}
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label, fmt in HEADLINE:
        vals = [sums[n][key] / (60.0 if key in MINUTES else 1.0) for n in names]
        lines.append(f"| {label} | " + " | ".join(fmt.format(v) for v in vals) + " |")
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
