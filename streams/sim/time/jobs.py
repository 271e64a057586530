"""The simulator's job model and the generic job-history CSV (``--jobs FILE``).

Why a generic CSV: a cluster's operators should be able to replay their own
history through hetsched and the static baseline before deploying anything.
The format (documented in docs/simulation.md) is one row per job:

    arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos
    [,job_id][,task_class][,cpu_milli][,memory_mib][,expected_s][,depends_on][,util][,name]
    [,duration_s@MODEL...][,duration1_s@MODEL...][,min_gpus][,max_gpus][,restart_s]
    [,in_window]

``gpu_models`` is ``|``-separated (empty: any); ``depends_on`` is
``|``-separated job ids; ``qos`` is guaranteed, burstable or best_effort. The
columns of issue 35 (true speeds per GPU model and count, the restart cost, the
measured window) are read into ``Job.speeds``, ``Job.restart_s`` and
``Job.in_window`` (``streams.sim.time.speeds``). Errors name the file, line and
field.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

from schemas.gpu_catalog import resolve_model, unknown_name_problem
from streams.core.queue import QOS_CLASSES, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.sim.time.speeds import DURATION1_AT, DURATION_AT, Speeds
from streams.sim.traces import TraceFormatError

REQUIRED = ("arrival_s", "duration_s", "num_gpus", "gpu_milli", "gpu_models", "tenant",
            "priority", "qos")
DEFAULT_CPU_MILLI = 1000
DEFAULT_MEMORY_MIB = 1024


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a simulated workload: its request, its time and its queue attributes.

    ``util`` is the share of its allocated GPU the job actually keeps busy
    (used-utilisation and energy); ``expected_s`` what the submitter declares
    (reservations), None if nothing. ``speeds``: the job's true run time per GPU
    model and count (None: ``duration_s`` on every model); ``restart_s``: what each
    preemption, move or resize costs it (None: the simulator's default,
    ``restart_s()``); ``in_window``: whether a protocol measures it (None: the file
    says nothing).
    """

    job_id: str
    arrival_s: float
    duration_s: float
    request: TaskRequest
    meta: TaskMeta
    util: float = 1.0
    speeds: Speeds | None = None
    restart_s: float | None = None
    in_window: bool | None = None

    @property
    def task_class(self) -> str:
        return self.meta.task_class or "task"


def make_job(job_id: str, arrival_s: float, duration_s: float, num_gpus: int, gpu_milli: int,
             *, gpu_models: tuple[str, ...] = (), tenant: str = "default", priority: int = 0,
             qos: str = "burstable", task_class: str = "", cpu_milli: int = DEFAULT_CPU_MILLI,
             memory_mib: int = DEFAULT_MEMORY_MIB, expected_s: float | None = None,
             depends_on: tuple[str, ...] = (), util: float = 1.0,
             input_node: str | None = None, name: str = "", speeds: Speeds | None = None,
             restart_cost_s: float | None = None, in_window: bool | None = None) -> Job:
    req = TaskRequest(job_id, cpu_milli, memory_mib, num_gpus,
                      gpu_milli if num_gpus else 0, gpu_models, input_node)
    elastic = ((speeds.min_gpus, speeds.max_gpus)
               if speeds is not None and speeds.elastic else ())
    meta = TaskMeta(tenant, priority, qos, expected_s, depends_on, task_class, name, elastic)
    return Job(job_id, float(arrival_s), max(float(duration_s), 1.0), req, meta, util,
               speeds, restart_cost_s, in_window)


def scale_arrivals(jobs: list[Job], load: float) -> list[Job]:
    """The same jobs arriving ``load`` times as fast: each arrival time divided by ``load``.

    ``--load`` for a recorded workload (``--jobs FILE``, openb, lora): the arrival
    rate is multiplied by ``load`` and nothing else changes (durations, requests,
    dependencies and the order of arrival stay as recorded), so the offered load
    scales by ``load`` too. Dividing (not multiplying by ``1 / load``) keeps a
    power-of-two factor exact: ``--load 2`` halves every arrival time bit for bit.
    ``load == 1`` returns the list itself, untouched.
    """
    if load <= 0:
        raise ValueError(f"load {load}: must be above 0")
    if load == 1.0:
        return jobs
    return [replace(j, arrival_s=j.arrival_s / load) for j in jobs]


def _field(path: Path, line: int, row: dict[str, str], name: str,
           default: float | None = None) -> float | None:
    """The row's number in ``name``; ``default`` when empty (None too for an optional
    field without one). Raises ``TraceFormatError`` naming the field and the value."""
    raw = (row.get(name) or "").strip()
    if not raw:
        if default is not None or name not in REQUIRED:
            return default
        raise TraceFormatError(f"{path}:{line}: field {name!r}: missing")
    try:
        value = float(raw)
    except ValueError:
        raise TraceFormatError(f"{path}:{line}: field {name!r}: bad value {raw!r}") from None
    if not math.isfinite(value):
        raise TraceFormatError(f"{path}:{line}: field {name!r}: {raw} is not a finite number")
    if value < 0:
        raise TraceFormatError(f"{path}:{line}: field {name!r}: {raw} is negative")
    return value


def _number(path: Path, line: int, row: dict[str, str], name: str,
            default: float | None = None) -> float:
    """``_field`` of a field that always has a value (required, or with a default)."""
    value = _field(path, line, row, name, default)
    if value is None:  # an optional field read without a default: a caller's mistake
        raise TypeError(f"field {name!r} is optional: give a default or use _field")
    return value


def _whole(path: Path, line: int, row: dict[str, str], name: str,
           default: int | None = None) -> int:
    """``_number`` of a count (GPUs, milli-shares, priority, CPU, memory): 2 or 2.0, not
    2.5, which would otherwise be cut to 2 without a word."""
    value = _number(path, line, row, name, default)
    if not float(value).is_integer():  # a default is an int already
        raise TraceFormatError(f"{path}:{line}: field {name!r}: {value:g} is not a whole "
                               "number")
    return int(value)


def _model_columns(path: Path, header: list[str], prefix: str) -> dict[str, str]:
    """Model -> column of the ``prefix`` columns (``duration_s@V100M16``); the model must
    be a catalog name or alias (read as the catalog name, as in node lists: ``@V100`` is
    ``V100M32``), or the column is refused naming the known names and aliases."""
    out: dict[str, str] = {}
    for col in header:
        if not col.startswith(prefix):
            continue
        named = col[len(prefix):].strip()
        problem = unknown_name_problem(named)
        if problem is not None:
            raise TraceFormatError(f"{path}:1: column {col!r}: {problem}")
        model = resolve_model(named) or named
        if model in out:  # e.g. duration_s@V100 and duration_s@V100M32: which one holds?
            raise TraceFormatError(f"{path}:1: column {col!r}: {out[model]!r} already gives "
                                   f"{model}")
        out[model] = col
    return out


def _speeds(path: Path, line: int, row: dict[str, str], cols: tuple[dict[str, str], ...],
            elastic: bool, num: int, milli: int, duration: float,
            models: tuple[str, ...]) -> tuple[Speeds | None, tuple[str, ...]]:
    """The row's ``Speeds`` and the models it may run on (``gpu_models`` narrowed to the
    models with a ``duration_s@`` value); (None, models) when the file gives no speeds."""
    at, at1 = cols
    if not at and not at1 and not elastic:
        return None, models
    given: dict[str, float] = {}
    for col in (*at.values(), *at1.values()):
        value = _field(path, line, row, col)
        if value is not None and value <= 0:
            raise TraceFormatError(f"{path}:{line}: field {col!r}: {value:g} must be above 0")
        if value is not None:
            given[col] = value
    by = {m: given[c] for m, c in at.items() if c in given and (not models or m in models)}
    one = {m: given[c] for m, c in at1.items() if c in given}
    if not num:
        if given:
            raise TraceFormatError(f"{path}:{line}: field {next(iter(given))!r}: a speed for "
                                   "a job with no GPU (num_gpus 0)")
        return None, models
    for m in one:
        if at and m not in by:
            raise TraceFormatError(f"{path}:{line}: field {at1[m]!r}: a one-GPU run time "
                                   f"where {DURATION_AT}{m} is blank (the job cannot run on "
                                   f"{m})")
    lo = _whole(path, line, row, "min_gpus", num)
    hi = _whole(path, line, row, "max_gpus", num)
    if not 1 <= lo <= num:
        raise TraceFormatError(f"{path}:{line}: field 'min_gpus': {lo} not in 1..num_gpus "
                               f"({num})")
    if hi < num:
        raise TraceFormatError(f"{path}:{line}: field 'max_gpus': {hi} below num_gpus ({num})")
    if (lo, hi) != (num, num) and milli < MILLI_PER_GPU:
        raise TraceFormatError(f"{path}:{line}: field 'min_gpus': an elastic range needs "
                               "whole GPUs (gpu_milli 1000)")
    if not at:  # elastic columns only: every model runs the job at its duration_s
        return Speeds({}, num, duration, one, lo, hi), models
    if not by:
        why = f" among gpu_models {'|'.join(models)}" if models else ""
        raise TraceFormatError(f"{path}:{line}: every {DURATION_AT} cell{why} is blank: the "
                               "job can run nowhere")
    allowed = tuple(m for m in models if m in by) if models else tuple(sorted(by))
    return Speeds(by, num, None, one, lo, hi), allowed


def _window(path: Path, line: int, row: dict[str, str], present: bool) -> bool | None:
    if not present:
        return None
    raw = (row.get("in_window") or "").strip()
    if raw not in ("", "0", "1"):
        raise TraceFormatError(f"{path}:{line}: field 'in_window': {raw!r} is not 0 or 1")
    return raw == "1"


def read_jobs(path: str | Path) -> list[Job]:
    """Jobs of a generic CSV, sorted by arrival (then line)."""
    p = Path(path)
    jobs: list[Job] = []
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        missing = [f for f in REQUIRED if f not in header]
        if missing:
            raise TraceFormatError(f"{p}:1: header lacks field(s) {missing}")
        cols = (_model_columns(p, header, DURATION_AT), _model_columns(p, header, DURATION1_AT))
        elastic = "min_gpus" in header or "max_gpus" in header
        for row in reader:
            line = reader.line_num
            qos = (row.get("qos") or "").strip() or "burstable"
            if qos not in QOS_CLASSES:
                raise TraceFormatError(f"{p}:{line}: field 'qos': {qos!r} is not one of "
                                       f"{', '.join(QOS_CLASSES)}")
            num = _whole(p, line, row, "num_gpus")
            milli = _whole(p, line, row, "gpu_milli", 1000)
            if num and not 0 < milli <= 1000:
                raise TraceFormatError(f"{p}:{line}: field 'gpu_milli': {milli} not in 1..1000")
            if milli < 1000 and num > 1:
                raise TraceFormatError(f"{p}:{line}: field 'gpu_milli': below 1000 needs "
                                       "num_gpus == 1")
            models = tuple(resolve_model(m) or m  # an alias as node lists read it
                           for m in (row.get("gpu_models") or "").split("|") if m.strip())
            deps = tuple(d for d in (row.get("depends_on") or "").split("|") if d.strip())
            expected = _field(p, line, row, "expected_s")
            duration = _number(p, line, row, "duration_s")
            speeds, models = _speeds(p, line, row, cols, elastic, num, milli, duration, models)
            jobs.append(make_job(
                (row.get("job_id") or "").strip() or f"job-{line - 1}",
                _number(p, line, row, "arrival_s"),
                duration,
                num, milli, gpu_models=models,
                tenant=(row.get("tenant") or "").strip() or "default",
                priority=_whole(p, line, row, "priority", 0),
                qos=qos, task_class=(row.get("task_class") or "").strip(),
                cpu_milli=_whole(p, line, row, "cpu_milli", DEFAULT_CPU_MILLI),
                memory_mib=_whole(p, line, row, "memory_mib", DEFAULT_MEMORY_MIB),
                expected_s=expected,
                depends_on=deps,
                util=_number(p, line, row, "util", 1.0),
                name=(row.get("name") or "").strip(),
                speeds=speeds,
                restart_cost_s=_field(p, line, row, "restart_s"),
                in_window=_window(p, line, row, "in_window" in header),
            ))
    if not jobs:
        raise TraceFormatError(f"{p}: no data rows")
    return sorted(jobs, key=lambda j: j.arrival_s)


def write_jobs(path: str | Path, jobs: list[Job]) -> None:
    """Write jobs in the generic format (used to export the mixed workload as an example)."""
    cols = [*REQUIRED, "job_id", "task_class", "cpu_milli", "memory_mib", "expected_s",
            "depends_on", "util", "name"]
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for j in jobs:
            r, m = j.request, j.meta
            w.writerow([j.arrival_s, j.duration_s, r.num_gpu, r.gpu_milli or 1000,
                        "|".join(r.gpu_models), m.tenant, m.priority, m.qos, j.job_id,
                        m.task_class, r.cpu_milli, r.memory_mib,
                        "" if m.expected_s is None else m.expected_s, "|".join(m.depends_on),
                        j.util, m.name])


RESTART_SMALL_S, RESTART_LARGE_S, RESTART_LARGE_ABOVE = 40.0, 60.0, 8
"""Checkpoint + restart time of a preempted job, by size: Lucid's ``ckpt_overhead``
(Hu et al., ASPLOS'23), after the 62 s average the Tiresias paper measured."""


def restart_s(gpus: int) -> float:
    """What a preempted job pays when it runs again, in the simulator (every policy): its
    progress is kept (checkpointed), but reloading and warming up take this long."""
    return RESTART_LARGE_S if gpus > RESTART_LARGE_ABOVE else RESTART_SMALL_S


def job_restart_s(job: Job) -> float:
    """What a preempted, moved or resized run of ``job`` pays when it runs again: its
    ``restart_s`` column, else the simulator's default by size (``restart_s``)."""
    return job.restart_s if job.restart_s is not None else restart_s(job.request.num_gpu)


def restart_note(jobs: list[Job]) -> str:
    """What a restart costs in this run, for the report (issue 35: a workload without a
    ``restart_s`` column runs with the simulator's default, and the reader is told so)."""
    given = sum(1 for j in jobs if j.restart_s is not None)
    default = (f"the simulator's default, {RESTART_SMALL_S:g} s for jobs of up to "
               f"{RESTART_LARGE_ABOVE} GPUs and {RESTART_LARGE_S:g} s above (Lucid's "
               "ckpt_overhead)")
    if given == len(jobs):
        return "restart cost per preemption: each job's restart_s (workload column)"
    if not given:
        return f"restart cost per preemption: {default} (the workload has no restart_s)"
    return (f"restart cost per preemption: restart_s for {given} of {len(jobs)} jobs, "
            f"else {default}")
