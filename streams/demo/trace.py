"""Build the demo's workload from the openb pod trace.

Why the trace is reshaped: ``openb_pod_list_default.csv`` describes a 6212-GPU
production cluster over about 149 days, most of whose pods were created long
before the trace ends and still run at its end. Replayed on a demo cluster of
a few dozen nodes at a speed-up, the real arrival times would give a handful
of tasks in three minutes. So the demo keeps what makes the trace real -- the
task shapes (GPU count, fractional share, CPU, memory, GPU-model constraint,
QoS), their order of creation, the burstiness of their inter-arrival gaps and
their durations -- and rescales only the arrival rate, so that the offered
load is ``load`` x the demo cluster's GPU capacity:

* rows with ``num_gpu`` 0 are left out (the demo is about GPUs);
* a seeded sample of the rest, in creation order, with the trace's gaps
  (long quiet gaps cut to the 90th percentile) scaled so that
  ``rate = load x gpus / mean(gpus x duration)`` (Little's law);
* duration = ``deletion_time - creation_time`` in trace seconds, clipped to
  ``[min_duration_s, max_duration_s]``: pods still Running (or never
  scheduled) at the end of the trace have no real end, and their raw span
  (up to 149 days) would park a GPU for the whole demo;
* time runs ``speedup`` times faster than the wall clock: the simulated nodes
  use it as their time scale, and arrivals are spaced by gap / speedup.

Tenants come from QoS (the trace has no users): ``LS`` (latency-sensitive
serving) -> ``serving``, ``Guaranteed`` and ``Burstable`` -> ``platform``,
``BE`` (best-effort batch) -> ``research``. QoS maps to ``guaranteed``,
``guaranteed``, ``burstable`` and ``best_effort`` with priorities 100, 100,
50 and 0.
"""

from __future__ import annotations

import csv
import itertools
import random
from dataclasses import dataclass
from pathlib import Path

from schemas.events import TaskSubmitted

TENANT_OF_QOS = {"LS": "serving", "Guaranteed": "platform", "Burstable": "platform",
                 "BE": "research"}
QOS_OF_QOS = {"LS": "guaranteed", "Guaranteed": "guaranteed", "Burstable": "burstable",
              "BE": "best_effort"}
PRIORITY_OF_QOS = {"LS": 100, "Guaranteed": 100, "Burstable": 50, "BE": 0}


@dataclass(frozen=True)
class Shape:
    """Replay knobs, with the defaults documented in docs/demo.md."""

    speedup: float = 120.0
    """Simulated (trace) seconds per wall second."""
    load: float = 0.9
    """Offered GPU load as a share of the demo cluster's GPUs."""
    min_duration_s: float = 30.0
    max_duration_s: float = 7200.0
    seed: int = 0


@dataclass(frozen=True)
class Arrival:
    """One task to submit ``at_s`` wall seconds after the replay starts."""

    at_s: float
    task: TaskSubmitted


def read_rows(path: Path) -> list[dict[str, str]]:
    """GPU rows of an openb pod list, in creation order."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if int(r["num_gpu"] or 0) > 0]
    rows.sort(key=lambda r: (float(r["creation_time"]), r["name"]))
    return rows


def check_trace(path: Path, shape: Shape) -> int:
    """The GPU tasks of a pod list, each turned into its submission once; raises
    ValueError naming the file and the column or task at fault (the demo checks its
    trace before it starts anything, rather than fail minutes later)."""
    try:
        rows = read_rows(path)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except KeyError as exc:
        raise ValueError(f"{path}: column {exc.args[0]!r} missing") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    for row in rows:
        try:
            to_task(row, shape, "", set())
        except (KeyError, ValueError) as exc:
            what = f"column {exc.args[0]!r} missing" if isinstance(exc, KeyError) else (
                " ".join(str(exc).split()))
            raise ValueError(f"{path}: task {row.get('name')!r}: {what}") from None
    if not rows:
        raise ValueError(f"{path}: no GPU tasks")
    return len(rows)


def duration_s(row: dict[str, str], shape: Shape) -> float:
    """Trace duration of a pod, clipped (see the module docstring)."""
    end = row.get("deletion_time") or ""
    raw = float(end) - float(row["creation_time"]) if end else shape.max_duration_s
    return min(max(raw, shape.min_duration_s), shape.max_duration_s)


def to_task(row: dict[str, str], shape: Shape, prefix: str, models: set[str]) -> TaskSubmitted:
    """The ``TaskSubmitted`` payload of one pod row (a simulated executor task)."""
    gpus = int(row["num_gpu"])
    share = int(row["gpu_milli"] or 1000) if gpus == 1 else 1000
    allowed = [m for m in (row.get("gpu_spec") or "").split("|") if m]
    rng = random.Random(row["name"])
    return TaskSubmitted.model_validate({
        "task_id": f"{prefix}{row['name']}",
        "tenant": TENANT_OF_QOS.get(row["qos"], "research"),
        "qos": QOS_OF_QOS.get(row["qos"], "best_effort"),
        "priority": PRIORITY_OF_QOS.get(row["qos"], 0),
        "resources": {"gpu_count": gpus, "gpu_share_milli": max(1, min(share, 1000)),
                      "cpu_milli": int(row["cpu_milli"]), "memory_mib": int(row["memory_mib"]),
                      "gpu_models": sorted(m for m in allowed if m in models) or allowed},
        "features": {"expected_duration_s": duration_s(row, shape)},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": duration_s(row, shape),
            "gpu_util_pct": float(rng.randint(35, 95)),
            "gpu_mem_used_mib": 1024 * max(1, share // 250)}},
    })


def build_workload(path: Path, shape: Shape, *, gpus: int, wall_s: float, prefix: str = "",
                   models: set[str] | None = None) -> list[Arrival]:
    """Arrivals for ``wall_s`` wall seconds on a cluster of ``gpus`` GPUs."""
    rows = read_rows(path)
    if not rows or gpus <= 0:
        return []
    work = [int(r["num_gpu"]) * duration_s(r, shape) for r in rows]
    mean_gpu_s = sum(work) / len(work)
    rate_per_trace_s = shape.load * gpus / mean_gpu_s
    wanted = max(1, round(rate_per_trace_s * wall_s * shape.speedup))
    rng = random.Random(shape.seed)
    picked = sorted(rng.sample(range(len(rows)), min(wanted, len(rows))))
    chosen = [rows[i] for i in picked]
    return [Arrival(at, to_task(r, shape, prefix, models or set()))
            for at, r in zip(arrival_times(chosen, wall_s), chosen, strict=True)]


def arrival_times(chosen: list[dict[str, str]], wall_s: float) -> list[float]:
    """Wall offsets that keep the trace's bursts but fill ``wall_s`` evenly overall.

    Gaps longer than the 90th percentile are cut to it: almost all pods were
    created in the trace's last month, and the long quiet stretches before it
    would otherwise leave the demo idle for minutes.
    """
    created = [float(r["creation_time"]) for r in chosen]
    gaps = [b - a for a, b in itertools.pairwise(created)]
    if not gaps:
        return [0.0] * len(chosen)
    cap = sorted(gaps)[int(0.9 * (len(gaps) - 1))] or 1.0
    clipped = [min(g, cap) for g in gaps]
    scale = wall_s * 0.98 / max(sum(clipped), 1e-9)
    out, at = [0.0], 0.0
    for g in clipped:
        at += g * scale
        out.append(at)
    return out
