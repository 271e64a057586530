"""A small recorded run for the audit tests: a heterogeneous cell, fractional and whole tasks."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.workload import Recording, record_run
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler

NODES = (
    ("node-a100-0", 64000, 524288, 8, "A100"),
    ("node-v100-0", 32000, 262144, 4, "V100M32"),
    ("node-t4-0", 16000, 131072, 2, "T4"),
    ("node-t4-1", 16000, 131072, 2, "T4"),
)


def tasks(n: int = 60) -> list[TaskRequest]:
    shapes = ((1, 250, ()), (1, 500, ()), (1, 1000, ()), (2, 1000, ()), (4, 1000, ("A100",)),
              (1, 1000, ("T4",)), (8, 1000, ("H100",)))
    out = []
    for i in range(n):
        num_gpu, milli, models = shapes[i % len(shapes)]
        out.append(TaskRequest(f"task-{i:03d}", 2000, 8192, num_gpu, milli, models))
    return out


def recorded(n: int = 60, profile: str = "hetsched") -> Recording:
    return record_run(NODES, tasks(n), service_scheduler(profile), running_limit=8,
                      tick_every=10, prefix="t.")


def export(path: Path, rec: Recording) -> Path:
    logfile.write(path, Header(topics=["t.hetsched.input-log", "t.hetsched.decisions"],
                               exported_at="2026-11-29T14:00:00+00:00", topic_prefix="t."),
                  rec.records)
    return path


def edit_first_input(path: Path, out: Path, type_: str, edit: object) -> str:
    """Rewrite the first ``type_`` input-log line of ``path`` with ``edit``; its event id."""
    lines = gzip.decompress(path.read_bytes()).splitlines()
    for i, raw in enumerate(lines[1:], start=1):
        line = orjson.loads(raw)
        value = line.get("value") or {}
        if "input-log" in line["topic"] and value.get("type") == type_:
            edit(value["payload"])  # type: ignore[operator]
            lines[i] = orjson.dumps(line)
            out.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
            return str(value["event_id"])
    raise AssertionError(f"no {type_} in {path}")
