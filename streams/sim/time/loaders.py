"""Workloads from the public traces: openb creation/deletion times, genai LoRA requests.

Assumptions (stated in docs/simulation.md and BENCHMARKS.md):

* openb: a job runs from ``creation_time`` to ``deletion_time`` (its duration
  is the lifetime it had in production); a day is a 24-hour window starting
  at ``start_s``: pods alive at the start arrive at 0 with the rest of their
  lifetime, pods created inside arrive when created. The trace has no tenant,
  so the QoS class stands for the tenant; LS is latency-sensitive (priority
  600, may preempt), BE is best effort, Guaranteed and Burstable keep their
  class.
* genai LoRA: every request is a one-GPU inference task with a share of
  ``LORA_GPU_MILLI`` (the trace has no GPU figure: an SD+LoRA pipeline fits
  half of a 24-GB GPU); ``groupId`` is the tenant; arrivals can be
  compressed by ``time_scale`` (the trace spans 23 days at under one busy
  GPU on average, too light to tell schedulers apart).
"""

from __future__ import annotations

import csv
import io
import tarfile
from datetime import datetime
from pathlib import Path

from streams.sim.time.jobs import Job, make_job
from streams.sim.traces import resolve, traces_dir

DAY_S = 86_400.0
OPENB_QOS = {  # trace QoS -> (tenant, priority, qos, util)
    "LS": ("ls", 600, "burstable", 0.6),
    "BE": ("be", 0, "best_effort", 0.8),
    "Burstable": ("burstable", 100, "burstable", 0.7),
    "Guaranteed": ("guaranteed", 800, "guaranteed", 0.7),
}
LORA_GPU_MILLI = 500
LORA_UTIL = 0.9


def busiest_day_start(path: str | Path = "openb_pod_list_default.csv") -> float:
    """Start (s) of the 24-hour window, aligned to a day, with the most creations."""
    days: dict[int, int] = {}
    with resolve(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            d = int(float(row["creation_time"]) // DAY_S)
            days[d] = days.get(d, 0) + 1
    best = max(sorted(days), key=lambda d: days[d])
    return best * DAY_S


def openb_jobs(path: str | Path = "openb_pod_list_default.csv", start_s: float | None = None,
               window_s: float = DAY_S) -> list[Job]:
    """The openb pods of one window as jobs (see the module docstring)."""
    start = busiest_day_start(path) if start_s is None else start_s
    end = start + window_s
    jobs: list[Job] = []
    with resolve(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            created = float(row["creation_time"])
            deleted = float(row["deletion_time"] or end)
            if created >= end or deleted <= start:
                continue
            arrival = max(created - start, 0.0)
            duration = deleted - max(created, start)
            tenant, priority, qos, util = OPENB_QOS.get(row["qos"], OPENB_QOS["Burstable"])
            num = int(row["num_gpu"])
            spec = (row.get("gpu_spec") or "").strip()
            jobs.append(make_job(
                row["name"], arrival, duration, num, int(row["gpu_milli"]) if num else 0,
                gpu_models=tuple(s for s in spec.split("|") if s) if num else (),
                tenant=tenant, priority=priority, qos=qos, task_class=row["qos"],
                cpu_milli=int(row["cpu_milli"]), memory_mib=int(row["memory_mib"]),
                util=util))
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))


def lora_jobs(path: str | Path | None = None, time_scale: float = 1.0,
              limit: int | None = None) -> list[Job]:
    """The genai LoRA inference requests as one-GPU fractional jobs."""
    p = Path(path) if path else traces_dir() / "genai" / "lora_request_trace.tar.gz"
    with tarfile.open(p) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".csv"))
        fh = tar.extractfile(member)
        assert fh is not None
        rows = list(csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8")))
    stamps = [datetime.fromisoformat(r["gmt_create"]).timestamp() for r in rows]
    t0 = min(stamps)
    jobs = []
    for i, (r, t) in enumerate(zip(rows, stamps, strict=True)):
        if limit is not None and i >= limit:
            break
        jobs.append(make_job(
            f"lora-{i:05d}", (t - t0) / time_scale, float(r["exec_time_seconds"] or 1.0), 1,
            LORA_GPU_MILLI, tenant=r["groupId"] or "unknown", priority=600,
            qos="burstable", task_class="inference", expected_s=None, util=LORA_UTIL))
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
