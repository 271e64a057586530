"""Reading a job CSV and a node list for the round simulator (the only I/O of the package).

The job CSV is the generic one of docs/simulation.md; this reader takes only
``job_id``, ``arrival_s``, ``num_gpus``, ``duration_s``, ``in_window``, ``restart_s``
(absent or blank: 0, as in Gavel) and the ``duration_s@MODEL`` columns (run time
alone on ``num_gpus`` GPUs of MODEL; a blank cell: the job cannot run there).
Without any ``duration_s@MODEL`` column every model runs a job in its ``duration_s``.
``task_class`` is kept for reports.

The node list gives the GPU types and their counts (``gpu`` GPUs of ``model`` per
row); the types are kept in their order of first appearance, which is the order
the heterogeneity-aware policies walk them in.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from streams.sim.time.rounds.simulator import Workload

DURATION_PREFIX = "duration_s@"


def read_nodes(path: str | Path) -> tuple[list[str], np.ndarray]:
    """GPU types in order of first appearance, and the number of GPUs of each."""
    counts: dict[str, int] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            model = (row.get("model") or "").strip()
            gpus = int(float(row.get("gpu") or 0))
            if not model or gpus <= 0:
                continue
            counts[model] = counts.get(model, 0) + gpus
    if not counts:
        raise ValueError(f"{path}: no GPU node (columns 'model' and 'gpu')")
    return list(counts), np.array([counts[m] for m in counts], dtype=float)


def read_jobs(path: str | Path, type_names: list[str]) -> tuple[Workload, list[str]]:
    """The jobs, sorted by arrival (stable), with run times per type of ``type_names``.

    Returns the workload and each job's ``task_class`` (empty where absent).
    """
    ids: list[str] = []
    arrival: list[float] = []
    sf: list[float] = []
    window: list[bool] = []
    classes: list[str] = []
    restart: list[float] = []
    dur: list[list[float]] = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        per_model = {h[len(DURATION_PREFIX):] for h in header if h.startswith(DURATION_PREFIX)}
        for row in reader:
            ids.append(row["job_id"])
            arrival.append(float(row["arrival_s"]))
            sf.append(float(row.get("num_gpus") or 1))
            window.append((row.get("in_window") or "0").strip() == "1")
            classes.append(row.get("task_class") or "")
            restart.append(float(row.get("restart_s") or 0.0))
            if per_model:
                cells = [(row.get(DURATION_PREFIX + m) or "").strip() for m in type_names]
                dur.append([float(c) if c and m in per_model else np.inf
                            for c, m in zip(cells, type_names, strict=True)])
            else:
                dur.append([float(row["duration_s"])] * len(type_names))
    order = np.argsort(np.asarray(arrival), kind="stable")
    wl = Workload(
        job_ids=[ids[i] for i in order],
        arrival=np.asarray(arrival)[order],
        duration=np.asarray(dur, dtype=float).reshape(len(ids), len(type_names))[order],
        scale_factor=np.asarray(sf)[order],
        in_window=np.asarray(window, dtype=bool)[order],
        type_names=list(type_names),
        restart_s=np.asarray(restart, dtype=float)[order],
    )
    return wl, [classes[i] for i in order]
