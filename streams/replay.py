"""Audit replay: rebuild every cell from nothing and re-decide its whole input log.

``replay(inputs, recorded, scheduler)`` folds each cell's input log through the
very function the worker runs per input-log record, :func:`streams.adapter.apply`
on a :class:`streams.core.cell.Cell` (imported, never copied), and compares
each decision it makes with the one recorded on the decisions topic for the
same cause: same ids, same bytes. It mirrors what the scheduler processor does
around that function (``streams/processors/scheduling.py``): records are taken
per partition in offset order, the cell is the envelope's ``cell`` or else the
record key, records the codec refuses are skipped (the worker dead-letters
them), one ``Cell`` per cell name built from the same compiled profile.

Recorded decisions are grouped by ``causation_id``: the decisions of input ``e``
are those caused by ``e``, in log order. A mismatch is reported with the cause,
so "which input made us diverge" is answered directly.

The run hash is :mod:`streams.audit.chain` over the recorded decisions (as read
from the topic, canonically re-encoded only when a record is not already in
canonical form) and over the replayed ones; equal heads prove the whole run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import Envelope, Event
from streams.adapter import apply
from streams.audit.chain import run_hash
from streams.audit.diff import json_diff
from streams.audit.records import Record
from streams.core.cell import Cell
from streams.core.scheduler import Scheduler

PROGRESS_EVERY = 1000
"""Input records between two calls of ``replay``'s progress callback (cheap when off)."""

Observer = Callable[[Envelope[Any], Cell, list[Envelope[Event]]], None]
"""Called after each input with the cell and the decisions it made (what-if metrics)."""


@dataclass
class Mismatch:
    """One decision where record and replay disagree."""

    cell: str
    position: int
    """Index of the decision among its cell's decisions."""
    problem: str
    """``differs``, ``not replayed`` (recorded only) or ``not recorded`` (replayed only)."""
    recorded: dict[str, Any] | None
    replayed: dict[str, Any] | None
    cause: Record | None
    """The input-log record that caused it (None: its cause is not in the log)."""
    diffs: list[tuple[str, Any, Any]] = field(default_factory=list)


@dataclass
class ReplayReport:
    profile: str
    events: int = 0
    skipped: int = 0
    recorded: int = 0
    replayed: int = 0
    matches: int = 0
    mismatches: int = 0
    first: Mismatch | None = None
    recorded_hash: str = ""
    replayed_hash: str = ""
    cells: dict[str, tuple[int, int]] = field(default_factory=dict)
    """cell -> (recorded decisions, replayed decisions)."""
    elapsed_s: float = 0.0
    compared: bool = True

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.recorded_hash == self.replayed_hash

    def to_json(self) -> dict[str, Any]:
        first = None
        if self.first is not None:
            f = self.first
            first = {"cell": f.cell, "position": f.position, "problem": f.problem,
                     "recorded": f.recorded, "replayed": f.replayed,
                     "cause": f.cause.doc if f.cause else None,
                     "cause_position": _position(f.cause),
                     "diffs": [{"path": p, "recorded": e, "replayed": a} for p, e, a in f.diffs]}
        return {"profile": self.profile, "events": self.events, "skipped": self.skipped,
                "recorded": self.recorded, "replayed": self.replayed, "matches": self.matches,
                "mismatches": self.mismatches, "recorded_hash": self.recorded_hash,
                "replayed_hash": self.replayed_hash, "ok": self.ok, "first_mismatch": first,
                "elapsed_s": round(self.elapsed_s, 3)}


def replay(inputs: Iterable[Record], recorded: Iterable[Record] | None,
           scheduler: Scheduler, observer: Observer | None = None,
           progress: Callable[[int], object] | None = None) -> ReplayReport:
    """Re-decide ``inputs`` (input-log records) and compare with ``recorded`` (decisions).

    Both are taken per partition in offset order. ``recorded`` None: replay only
    (no comparison; the report's recorded side stays empty). ``progress`` is
    called with the number of input records done since its last call, every
    ``PROGRESS_EVERY`` records and at the end (a progress bar's ``update``).
    """
    started = time.perf_counter()
    report = ReplayReport(profile=scheduler.profile.name, compared=recorded is not None)
    by_cause, recorded_cells = _index_recorded(recorded or ())
    report.recorded = sum(len(v) for v in recorded_cells.values())
    matched: set[tuple[str, int, int]] = set()
    cells: dict[str, Cell] = {}
    replayed_cells: dict[str, list[bytes]] = {}
    seen = 0
    for rec in _ordered(inputs):
        seen += 1
        if progress is not None and seen % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
        env = decode(rec.value) if rec.value is not None else None
        if env is None or isinstance(env, DeadLetter):
            report.skipped += 1
            continue
        report.events += 1
        name = env.cell or (rec.key or b"").decode()
        cell = cells.get(name)
        if cell is None:
            cell = cells[name] = Cell(name, scheduler)
        decisions = apply(cell, env)
        out = replayed_cells.setdefault(name, [])
        start = len(out)
        out.extend(encode(d) for d in decisions)
        if observer is not None:
            observer(env, cell, decisions)
        if recorded is not None:
            expected = by_cause.pop(env.event_id, [])
            _compare(report, name, start, expected, out[start:], rec, matched)
    if progress is not None:
        progress(seen % PROGRESS_EVERY)
    if recorded is not None:
        for leftover in by_cause.values():
            for r in leftover:
                _note(report, Mismatch(r.cell or "", -1, "not replayed", r.doc, None, None))
    report.replayed = sum(len(v) for v in replayed_cells.values())
    report.replayed_hash = run_hash(replayed_cells)
    canonical = {c: [r.value if _pos(r) in matched else canonical_bytes(r) for r in rs]
                 for c, rs in recorded_cells.items()}
    report.recorded_hash = run_hash(canonical) if recorded is not None else ""
    for c in sorted(set(canonical) | set(replayed_cells)):
        report.cells[c] = (len(canonical.get(c, [])), len(replayed_cells.get(c, [])))
    report.elapsed_s = time.perf_counter() - started
    return report


def canonical_bytes(r: Record) -> bytes:
    """The codec's canonical encoding of a recorded decision (its raw bytes if undecodable)."""
    value = r.value or b""
    env = decode(value)
    return value if isinstance(env, DeadLetter) else encode(env)


def _index_recorded(records: Iterable[Record]) -> tuple[dict[str, list[Record]],
                                                        dict[str, list[Record]]]:
    by_cause: dict[str, list[Record]] = {}
    by_cell: dict[str, list[Record]] = {}
    for r in _ordered(records):
        if r.value is None:
            continue
        doc = r.doc
        cause = doc.get("causation_id") if doc else None
        by_cause.setdefault(cause if isinstance(cause, str) else "", []).append(r)
        by_cell.setdefault(r.cell or "", []).append(r)
    return by_cause, by_cell


def _compare(report: ReplayReport, cell: str, start: int, expected: list[Record],
             got: list[bytes], cause: Record, matched: set[tuple[str, int, int]]) -> None:
    for i in range(max(len(expected), len(got))):
        exp = expected[i] if i < len(expected) else None
        raw = got[i] if i < len(got) else None
        if exp is not None and raw is not None and (
                exp.value == raw or canonical_bytes(exp) == raw):
            if exp.value == raw:
                matched.add(_pos(exp))
            report.matches += 1
            continue
        recorded_doc = exp.doc if exp is not None else None
        replayed_doc = orjson.loads(raw) if raw is not None else None
        problem = "differs" if exp is not None and raw is not None else (
            "not replayed" if exp is not None else "not recorded")
        diffs = json_diff(recorded_doc, replayed_doc) if problem == "differs" else []
        _note(report, Mismatch(cell, start + i, problem, recorded_doc, replayed_doc, cause,
                               diffs))


def _note(report: ReplayReport, mismatch: Mismatch) -> None:
    report.mismatches += 1
    if report.first is None:
        report.first = mismatch


def _ordered(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.topic, r.partition, r.offset))


def _pos(r: Record) -> tuple[str, int, int]:
    return (r.topic, r.partition, r.offset)


def _position(r: Record | None) -> str | None:
    return None if r is None else f"{r.topic}[{r.partition}]@{r.offset}"
