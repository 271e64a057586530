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

Replay takes the decisions as documents (:func:`streams.adapter.apply_documents`,
the same step as ``apply``) and writes a placed or unschedulable one straight to
canonical bytes (:mod:`streams.audit.canonical`), keeping them only when they are
the recorded bytes; every other decision is validated and encoded as the worker
does. With an ``observer``, which wants envelopes, it calls ``apply`` itself.

The run hash is :mod:`streams.audit.chain` over the recorded decisions (as read
from the topic, canonically re-encoded only when a record is not already in
canonical form) and over the replayed ones; equal heads prove the whole run.
"""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.codec import decode, encode, trimmed
from schemas.deadletter import DeadLetter
from schemas.events import Envelope, Event
from streams.adapter import Decided, apply, apply_documents, validated
from streams.audit.canonical import fast_bytes
from streams.audit.chain import run_hash
from streams.audit.diff import json_diff
from streams.audit.records import Record
from streams.core.cell import Cell
from streams.core.objectives import WeightSchedule
from streams.core.queue import QueueConfig
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
           progress: Callable[[int], object] | None = None, jobs: int = 1,
           objectives: WeightSchedule | None = None, restore_every: int = 0,
           cell_sizes: dict[str, int] | None = None,
           config: QueueConfig | None = None) -> ReplayReport:
    """Re-decide ``inputs`` (input-log records) and compare with ``recorded`` (decisions).

    Both are taken per partition in offset order: a list or tuple of inputs is sorted
    so, any other iterable is read as it comes (a long file need not be held in
    memory; ValueError if it is out of order). An iterator is read once, in this
    process; a re-iterable (each ``iter()`` a new pass, as over ``LogFile``) may be read
    once per job and once more to split the cells, unless ``cell_sizes`` gives the
    input records of each cell (``Record.cell``, "" for none). ``recorded``
    None: replay only
    (no comparison; the report's recorded side stays empty). ``progress`` is
    called with the number of input records done since its last call, every
    ``PROGRESS_EVERY`` records and at the end (a progress bar's ``update``).

    ``jobs`` > 1 replays the cells in that many forked processes (cells are
    independent logs; see :func:`_replay_parallel`): the report is the same as
    with one process, field for field. It needs ``fork``, no ``observer`` and inputs
    that are not an iterator; otherwise, or with a single cell, the cells are
    replayed here. ``objectives``:
    the worker's objectives schedule (``HETSCHED_OBJECTIVES``), part of its decisions;
    ``config`` its queue settings (``HETSCHED_PREDICT_RUNTIMES``), None: the defaults.

    ``restore_every`` N > 0: after every N inputs of a cell, the cell is rebuilt from its
    records (through JSON, as a worker restores it from its state table) and replay goes
    on with the rebuilt one (:func:`restored`). The recorded decisions must still be
    reproduced: a worker may restart at any input, so anything the records lose that a
    later decision depends on shows as a mismatch (the promise "a restart decides as
    the log does", docs/guarantees.md).
    """
    started = time.perf_counter()
    report = ReplayReport(profile=scheduler.profile.name, compared=recorded is not None)
    by_cause, recorded_cells = _index_recorded(recorded or ())
    report.recorded = sum(len(v) for v in recorded_cells.values())
    held = isinstance(inputs, list | tuple)
    # Held: sorted. Otherwise read as it comes (a file read again), checked to be in order.
    source: Inputs = _ordered(inputs) if held else _Checked(inputs)
    parallel = observer is None and _can_fork(jobs) and (
        held or not isinstance(inputs, Iterator))  # a re-iterable: a pass each
    groups = _split_cells(cell_sizes or _cell_sizes(source), jobs) if parallel else []
    part = None
    with _records_frozen():
        if len(groups) > 1:
            part = _replay_parallel(source, groups, by_cause, scheduler, recorded is not None,
                                    objectives, restore_every, config)
            if part.conflict:
                part = None  # one event id in several cells: only the serial order is exact
            elif progress is not None:
                progress(part.seen)
        if part is None:
            part = _replay_part(enumerate(source), by_cause, scheduler, recorded is not None,
                                observer, progress, objectives, restore_every, config)
    report.events, report.skipped = part.events, part.skipped
    report.matches, report.mismatches = part.matches, part.mismatches
    report.first = part.first[1] if part.first is not None else None
    replayed_cells = part.cells
    if recorded is not None:
        for cause, leftover in by_cause.items():
            if cause in part.consumed:
                continue
            for r in leftover:
                _note(report, Mismatch(r.cell or "", -1, "not replayed", r.doc, None, None))
    report.replayed = sum(len(v) for v in replayed_cells.values())
    report.replayed_hash = run_hash(replayed_cells)
    matched = part.matched
    # A matched record's own bytes are its canonical form (records without a value are
    # left out of recorded_cells; the test only narrows the type).
    canonical = {c: [r.value if r.value is not None and _pos(r) in matched
                     else canonical_bytes(r) for r in rs]
                 for c, rs in recorded_cells.items()}
    report.recorded_hash = run_hash(canonical) if recorded is not None else ""
    for c in sorted(set(canonical) | set(replayed_cells)):
        report.cells[c] = (len(canonical.get(c, [])), len(replayed_cells.get(c, [])))
    report.elapsed_s = time.perf_counter() - started
    return report


@contextmanager
def _records_frozen() -> Iterator[None]:
    """Keep the objects that exist before the replay (the records, parsed decisions, the
    caller's own) out of the garbage collector's full passes while it runs.

    They are all alive until the end, and a full collection walks every one of
    them: about 0.2 s per pass with an 8,000-event log, a tenth of its replay,
    when one falls inside it (``gc.freeze``; measured with ``gc.callbacks``).
    Objects are still freed by reference counting. Left alone when the caller
    has frozen objects itself (there is one permanent generation, not a stack).
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass
class _Part:
    """What replaying some cells gave: counts, the decisions and what was compared."""

    events: int = 0
    skipped: int = 0
    matches: int = 0
    mismatches: int = 0
    first: tuple[int, Mismatch] | None = None
    """(index of the cause among all ordered inputs, first mismatch)."""
    cells: dict[str, list[bytes]] = field(default_factory=dict)
    matched: set[tuple[str, int, int]] = field(default_factory=set)
    consumed: dict[str, int] = field(default_factory=dict)
    """Causes whose recorded decisions were taken for comparison -> the input's index."""
    conflict: bool = False
    """Two parts took the same cause (one event id in two cells): merging is not exact."""
    seen: int = 0
    """Input records read (its cells' records, skipped ones included)."""

    def merge(self, other: _Part) -> None:
        self.seen += other.seen
        self.events += other.events
        self.skipped += other.skipped
        self.matches += other.matches
        self.mismatches += other.mismatches
        if other.first is not None and (self.first is None or other.first[0] < self.first[0]):
            self.first = other.first
        self.cells.update(other.cells)
        self.matched |= other.matched
        if not self.conflict and not other.conflict and self.consumed.keys().isdisjoint(
                other.consumed):
            self.consumed.update(other.consumed)
        else:
            self.conflict = True


def _replay_part(items: Iterable[tuple[int, Record]], by_cause: dict[str, list[Record]],
                 scheduler: Scheduler, compare: bool, observer: Observer | None = None,
                 progress: Callable[[int], object] | None = None,
                 objectives: WeightSchedule | None = None, restore_every: int = 0,
                 config: QueueConfig | None = None) -> _Part:
    """Replay the records of ``items`` ((position among all ordered inputs, record),
    positions ascending): whole cells, in order."""
    part = _Part()
    cells: dict[str, Cell] = {}
    applied: dict[str, int] = {}
    replayed = part.cells
    seen = 0
    for i, rec in items:
        seen += 1
        if progress is not None and seen % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
        env = decode(rec.value) if rec.value is not None else None
        if env is None or isinstance(env, DeadLetter):
            part.skipped += 1
            continue
        part.events += 1
        name = env.cell or (rec.key or b"").decode()
        cell = cells.get(name)
        if cell is None:
            cell = cells[name] = Cell(name, scheduler, config, objectives=objectives)
        out = replayed.get(name)
        if out is None:
            out = replayed[name] = []
        start = len(out)
        expected: list[Record] = []
        if compare:
            found = by_cause.get(env.event_id)
            if found is not None and env.event_id not in part.consumed:
                part.consumed[env.event_id] = i
                expected = found
        if observer is None:
            got = _encoded(apply_documents(cell, env), expected)
        else:
            decisions = apply(cell, env)
            got = [trimmed(encode(d)) for d in decisions]
            observer(env, cell, decisions)
        out += got
        if compare and (expected or got):
            _compare(part, i, name, start, expected, got, rec)
        if restore_every:
            applied[name] = count = applied.get(name, 0) + 1
            if count % restore_every == 0:
                cells[name] = restored(cell, scheduler, objectives, config)
    if progress is not None:
        progress(seen % PROGRESS_EVERY)
    part.seen = seen
    return part


def restored(cell: Cell, scheduler: Scheduler,
             objectives: WeightSchedule | None = None,
             config: QueueConfig | None = None) -> Cell:
    """``cell`` rebuilt from its node, task and meta records as a restarted worker
    rebuilds it (``streams.processors.scheduling.CellStore.restore``): the records go
    through JSON, as through the state table."""
    nodes, tasks, meta = orjson.loads(orjson.dumps([
        {n: cell.node_record(n) for n in cell.nodes},
        {t: cell.task_record(t) for t in cell.tasks}, cell.meta_record()]))
    return Cell.restore(cell.name, scheduler, meta, nodes.items(), tasks.items(),
                        config=config, objectives=objectives)


def _encoded(decided: list[Decided], expected: list[Record]) -> list[bytes]:
    """Canonical bytes of each decision, as ``encode`` of its validated envelope gives.

    A placed or unschedulable decision is written without validation
    (``streams.audit.canonical``) and those bytes are kept only when they equal the
    recorded decision's, which the worker's validated encoding produced; otherwise
    it is validated and encoded (no record, a difference, a record not canonical).
    Bytes equal to the recorded ones are kept as the recorded object (one copy of each
    decision for the whole replay); others are ``trimmed``.
    """
    got = []
    for n, d in enumerate(decided):
        recorded = expected[n].value if n < len(expected) else None
        if isinstance(d, tuple) and recorded is not None:
            raw = fast_bytes(*d)
            if raw is not None and raw == recorded:
                got.append(recorded)
                continue
        raw = encode(validated(d))
        got.append(recorded if recorded is not None and raw == recorded else trimmed(raw))
    return got


Inputs = list[Record] | Iterable[Record]
"""Input records in (topic, partition, offset) order: a sorted list, or a re-iterable
read again for each use (a file), or an iterator read once."""

_FORKED: tuple[Inputs, list[set[str]], dict[str, list[Record]], Scheduler,
               bool, WeightSchedule | None, int, QueueConfig | None] | None = None
"""What forked workers replay: set in the parent just before forking, read in the child."""


class _Checked:
    """Iterating ``records`` as it comes, checked to be in offset order (each ``iter()``
    is another ``iter()`` of ``records``: a re-iterable stays one)."""

    def __init__(self, records: Iterable[Record]) -> None:
        self.records = records

    def __iter__(self) -> Iterator[Record]:
        return _in_offset_order(self.records)


def _can_fork(jobs: int) -> bool:
    return jobs > 1 and "fork" in multiprocessing.get_all_start_methods()


def _cell_sizes(inputs: Inputs) -> dict[str, int]:
    """Input records per cell (``Record.cell``, "" for none)."""
    return Counter(rec.cell or "" for rec in inputs)


def _split_cells(size: dict[str, int], jobs: int) -> list[set[str]]:
    """The cells of each worker, whole cells, the largest first to the least loaded
    (none when there is one cell)."""
    if len(size) < 2:
        return []
    loads: list[tuple[int, int, set[str]]] = [(0, w, set()) for w in
                                              range(min(jobs, len(size)))]
    for name in sorted(size, key=lambda c: (-size[c], c)):
        load, w, cells = min(loads, key=lambda x: (x[0], x[1]))
        loads[w] = (load + size[name], w, cells | {name})
    return [cells for _, _, cells in loads]


def _replay_forked(w: int) -> _Part:
    assert _FORKED is not None
    inputs, groups, by_cause, scheduler, compare, objectives, restore_every, config = _FORKED
    mine = groups[w]
    return _replay_part(((i, r) for i, r in enumerate(inputs) if (r.cell or "") in mine),
                        by_cause, scheduler, compare, objectives=objectives,
                        restore_every=restore_every, config=config)


def _replay_parallel(inputs: Inputs, groups: list[set[str]],
                     by_cause: dict[str, list[Record]], scheduler: Scheduler,
                     compare: bool, objectives: WeightSchedule | None = None,
                     restore_every: int = 0, config: QueueConfig | None = None) -> _Part:
    """Replay each group of cells in its own forked process and merge the results.

    Why it is the same replay: a cell's decisions depend only on its own input
    log (its ``Cell`` is built from nothing and sees only its records, in the
    same order), each group holds whole cells, and every cross-cell choice is
    made here in the parent, in the serial order: the first mismatch is the one
    with the earliest cause among all inputs, and leftover recorded decisions
    are reported in recording order. Workers are forked so that the compiled
    scheduler and the records are inherited, not pickled; each reads the inputs
    and keeps its cells' (a file: each reads it, none holds it).
    """
    global _FORKED
    _FORKED = (inputs, groups, by_cause, scheduler, compare, objectives, restore_every, config)
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(len(groups)) as pool:
            results = pool.map(_replay_forked, range(len(groups)), chunksize=1)
    finally:
        _FORKED = None
    merged = _Part()
    for r in results:
        merged.merge(r)
    return merged


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
        head = r.head
        cause = head.causation_id if head is not None else None
        by_cause.setdefault(cause or "", []).append(r)
        by_cell.setdefault(r.cell or "", []).append(r)
    return by_cause, by_cell


def _compare(part: _Part, index: int, cell: str, start: int, expected: list[Record],
             got: list[bytes], cause: Record) -> None:
    for i in range(max(len(expected), len(got))):
        exp = expected[i] if i < len(expected) else None
        raw = got[i] if i < len(got) else None
        if exp is not None and raw is not None:
            if exp.value == raw:
                part.matched.add(_pos(exp))
                part.matches += 1
                continue
            if canonical_bytes(exp) == raw:
                part.matches += 1
                continue
        recorded_doc = exp.doc if exp is not None else None
        replayed_doc = orjson.loads(raw) if raw is not None else None
        problem = "differs" if exp is not None and raw is not None else (
            "not replayed" if exp is not None else "not recorded")
        diffs = json_diff(recorded_doc, replayed_doc) if problem == "differs" else []
        part.mismatches += 1
        if part.first is None:
            part.first = (index, Mismatch(cell, start + i, problem, recorded_doc, replayed_doc,
                                          cause, diffs))


def _note(report: ReplayReport, mismatch: Mismatch) -> None:
    report.mismatches += 1
    if report.first is None:
        report.first = mismatch


def _ordered(records: Iterable[Record]) -> list[Record]:
    """Per topic-partition in offset order (files and Kafka reads usually are already)."""
    out = list(records)
    keys = [(r.topic, r.partition, r.offset) for r in out]
    if any(a > b for a, b in itertools.pairwise(keys)):
        out = [r for _, r in sorted(zip(keys, out, strict=True), key=lambda kr: kr[0])]
    return out


def _in_offset_order(records: Iterable[Record]) -> Iterator[Record]:
    """``records`` as they come, checked to be in the order ``_ordered`` would sort them
    (an iterator cannot be sorted without holding it whole)."""
    last: tuple[str, int, int] | None = None
    for r in records:
        key = _pos(r)
        if last is not None and key < last:
            raise ValueError(f"input record {_position(r)} comes after "
                             f"{last[0]}[{last[1]}]@{last[2]}: a replay of an iterator needs "
                             "the records in (topic, partition, offset) order")
        last = key
        yield r


def _pos(r: Record) -> tuple[str, int, int]:
    return (r.topic, r.partition, r.offset)


def _position(r: Record | None) -> str | None:
    return None if r is None else r.where
