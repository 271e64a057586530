"""Find and read the openb trace files (nodes, tasks) with errors that name file, line and field.

Traces are never copied into the repo. ``traces_dir()`` looks for
``$HETSCHED_TRACES`` first, then a ``shared/traces`` directory beside the
repository root (i.e. ``../shared/traces`` from the project root).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from schemas.gpu_catalog import resolve_model, unknown_name_problem
from streams.core.request import TaskRequest

TRACES_ENV = "HETSCHED_TRACES"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class TraceFormatError(ValueError):
    """A trace file is malformed; the message names file, line and field."""


def traces_dir() -> Path:
    """The traces directory (``$HETSCHED_TRACES`` or ``<repo>/../shared/traces``)."""
    env = os.environ.get(TRACES_ENV, "").strip()
    if env:
        return Path(env)
    return PROJECT_ROOT.parent / "shared" / "traces"


def resolve(path: str | Path) -> Path:
    """A path as given if it exists, else relative to the traces directory."""
    p = Path(path)
    if p.exists():
        return p
    for cand in (traces_dir() / p, traces_dir() / "openb" / p):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"{path}: no such file (traces directory: {traces_dir()})")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str


def _int(path: Path, line: int, row: dict[str, str], field: str, lo: int, hi: int | None) -> int:
    raw = row.get(field)
    if raw is None:
        raise TraceFormatError(f"{path}:{line}: field {field!r}: missing")
    try:
        value = int(raw.strip())
    except ValueError:
        raise TraceFormatError(
            f"{path}:{line}: field {field!r}: expected an integer, got {raw!r}"
        ) from None
    if value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise TraceFormatError(f"{path}:{line}: field {field!r}: {value} is not {bound}")
    return value


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [f for f in required if f not in header]
        if missing:
            raise TraceFormatError(f"{path}:1: header lacks field(s) {missing}")
        out = []
        for row in reader:
            if None in row:
                raise TraceFormatError(f"{path}:{reader.line_num}: more fields than the header")
            out.append((reader.line_num, row))
    if not out:
        raise TraceFormatError(f"{path}: no data rows")
    return out


def read_nodes(path: str | Path) -> list[NodeSpec]:
    """Nodes sorted by name (the benchmark's node order).

    A node's GPU model must be a catalog name (``schemas/gpu_models.json``) or one of its
    aliases, read as the catalog name (``V100`` -> ``V100M32``: the Helios node list says
    ``V100`` of its 32 GB boards; ``schemas.gpu_catalog``). A model the catalog does not
    know has no figures (speed, memory, power), so its GPUs would be scored and simulated
    as if they were any other (issue 35: Gavel's K80s ran every job as fast as a V100).
    The error names the model, the known names and the aliases."""
    p = resolve(path)
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for line, row in _rows(p, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        name = (row["sn"] or "").strip()
        if not name:
            raise TraceFormatError(f"{p}:{line}: field 'sn': empty node name")
        if name in seen:
            raise TraceFormatError(f"{p}:{line}: field 'sn': duplicate node {name!r}")
        seen.add(name)
        gpus = _int(p, line, row, "gpu", 0, 64)
        model = (row["model"] or "").strip()
        if gpus and not model:
            raise TraceFormatError(f"{p}:{line}: field 'model': empty for a node with GPUs")
        problem = unknown_name_problem(model) if gpus else None
        if problem is not None:  # its GPUs would run every job as if at no known speed
            raise TraceFormatError(f"{p}:{line}: field 'model': {problem}")
        if gpus:
            model = resolve_model(model) or model
        nodes.append(NodeSpec(
            name=name,
            cpu_milli=_int(p, line, row, "cpu_milli", 0, None),
            memory_mib=_int(p, line, row, "memory_mib", 0, None),
            gpu_count=gpus,
            gpu_model=model,
        ))
    return sorted(nodes, key=lambda n: n.name.encode())


def read_tasks(path: str | Path) -> list[TaskRequest]:
    """Tasks sorted by name in byte order (the benchmark's ``base`` list)."""
    p = resolve(path)
    tasks: list[TaskRequest] = []
    for line, row in _rows(p, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        name = (row["name"] or "").strip()
        if not name:
            raise TraceFormatError(f"{p}:{line}: field 'name': empty task name")
        num_gpu = _int(p, line, row, "num_gpu", 0, 64)
        gpu_milli = _int(p, line, row, "gpu_milli", 0, None) if num_gpu else 0
        if num_gpu and gpu_milli == 0:
            raise TraceFormatError(f"{p}:{line}: field 'gpu_milli': 0 for a task with GPUs")
        spec = (row.get("gpu_spec") or "").strip()
        tasks.append(TaskRequest(
            task=name,
            cpu_milli=_int(p, line, row, "cpu_milli", 0, None),
            memory_mib=_int(p, line, row, "memory_mib", 0, None),
            num_gpu=num_gpu,
            gpu_milli=gpu_milli,
            gpu_models=tuple(s for s in spec.split("|") if s) if num_gpu else (),
        ))
    return sorted(tasks, key=lambda t: t.task.encode())
