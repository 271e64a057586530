"""Log integrity: gaps, duplicates and reordering in an exported (or freshly read) log.

What each finding means, and why some gaps are normal:

* **Offsets per topic-partition** must increase. An offset seen twice is a
  *duplicate record*; a smaller offset after a larger one is *out of order*
  (the file was edited or merged wrongly). Both are errors.
* **Gaps** (offset jumps > 1) are expected on the input log and the decisions:
  the service writes them in Kafka transactions, and each commit or abort
  marker takes one offset while read_committed (how we export) never returns
  markers nor aborted records. So a gap there is reported as *transactional*
  (info), not as loss. On a topic written without transactions, or when the
  export read ``read_uncommitted``, a gap is *missing records* (error). Within
  a partition, the first exported offset above the broker's log start (from
  the header) is a *truncated head*: records expired or were cut by a time
  range; replay from nothing then cannot rebuild the cell (error when the file
  claims to be complete).
* Loss inside a transactional topic is caught by content instead: every
  recorded decision must name a cause present in the exported input log
  (*orphan decision*, error, only checked on complete exports), and replay
  compares every decision.
* **Duplicate events**: the same ``event_id`` twice in the input log (an
  upstream producer retried; the cell ignores the repeat, warning) or twice in
  the decisions (exactly-once violated, error).
* **Time order**: the sequencer promises arrival order per cell, not event-time
  order (producers' clocks differ), so ``occurred_at`` going backwards within a
  cell is counted (info); going backwards for one ``source`` within a cell is a
  warning (a producer's own clock or ordering went wrong). A decision whose
  cause comes later in the input log than a following decision's cause is out
  of order (error): the worker writes a cause's decisions before the next
  input's.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from schemas.topics import DEADLETTER, DECISIONS, INPUT_LOG
from streams.audit.logfile import Header
from streams.audit.records import Record, logical_topic

TRANSACTIONAL = frozenset({INPUT_LOG, DECISIONS, DEADLETTER})
"""Topics the service writes in Kafka transactions (markers take offsets). The scheduler
writes its dead letters in the transaction of the batch that refused the record."""

ERROR, WARNING, INFO = "error", "warning", "info"

INFO_KEPT = 100
"""Findings of severity info kept per kind; the rest are only counted. A log written in
transactions has a transactional gap per commit and partition, often one per record,
and a finding each took about 300 bytes, half of what checking a long log held."""


@dataclass(frozen=True)
class Finding:
    severity: str
    kind: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.severity:7} {self.kind:22} {self.where}: {self.detail}"


@dataclass
class IntegrityReport:
    findings: list[Finding] = field(default_factory=list)
    """Every error and warning; the first ``INFO_KEPT`` info findings of each kind."""
    counts: Counter[str] = field(default_factory=Counter)
    """Findings of each kind, all of them."""

    def add(self, severity: str, kind: str, where: str, detail: str) -> None:
        """Count the finding, and keep it unless it is one info finding too many."""
        self.counts[kind] += 1
        if severity != INFO or self.counts[kind] <= INFO_KEPT:
            self.findings.append(Finding(severity, kind, where, detail))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors


def check(header: Header, records: Iterable[Record]) -> IntegrityReport:
    """Every finding of the module docstring, records taken in file order."""
    checker = Checker(header)
    for r in records:
        checker.add(r)
    return checker.report()


class Checker:
    """:func:`check` fed one record at a time, in file order, for one pass over a long
    file: it keeps the decisions (checked last, against the inputs) and of the inputs
    only their ids and times. Findings come out in the order ``check`` lists them:
    offsets, then the input log, then the decisions."""

    def __init__(self, header: Header) -> None:
        self.header = header
        self.decisions: list[Record] = []
        """The decision records seen (kept: they are checked once every input is known)."""
        self._offsets, self._inputs = IntegrityReport(), IntegrityReport()
        self._seen: dict[tuple[str, int], array[int]] = {}
        """Per topic-partition, the offsets seen, ascending (8 bytes each: a set of ints
        took about 60; records come in offset order, so this is an append)."""
        self._cell_time: dict[str, str] = {}
        self._source_time: dict[tuple[str, str], str] = {}
        self._first: dict[str, int] = {}
        """Input event id -> its first position among the inputs."""
        self._repeat: dict[str, list[int]] = {}
        """Input event id seen more than once -> every position it was seen at, in order
        (a client's retry is logged again; either copy may be what a decision answers)."""
        self._partitions: list[tuple[str, int]] = []
        self._partition_numbers: dict[tuple[str, int], int] = {}
        self._input_partition, self._input_offset = array("I"), array("q")
        """Topic-partition (its number in ``_partitions``) and offset of each input, by
        position: where an input is, kept in 12 bytes rather than as a string."""
        self.inputs = 0
        """Input-log records seen."""

    def add(self, r: Record) -> None:
        self._offset(r)
        topic = logical_topic(r.topic, self.header.topic_prefix)
        if topic == INPUT_LOG:
            self._input(r)
        elif topic == DECISIONS:
            self.decisions.append(r)

    def report(self) -> IntegrityReport:
        report = IntegrityReport()
        for part in (self._offsets, self._inputs):
            report.findings += part.findings
            report.counts.update(part.counts)
        _decisions(report, self.header, self._position_of, self.decisions)
        return report

    def _position_of(self, event_id: str | None, not_before: int = -1) -> int | None:
        """The position of the input ``event_id``, or None when it is not in the log. A
        repeated input (a retry, the same event id sent again) answers with its first
        copy at or after ``not_before``, else its last: the cell decides on the copy it
        reads first and a retry decides nothing, so a decision answering the first copy
        is in order even when the retry came after later inputs."""
        if not event_id:
            return None
        copies = self._repeat.get(event_id)
        if copies is None:
            return self._first.get(event_id)
        return next((p for p in copies if p >= not_before), copies[-1])

    def _where_input(self, position: int) -> str:
        topic, partition = self._partitions[self._input_partition[position]]
        return f"{topic}[{partition}]@{self._input_offset[position]}"

    def _offset(self, r: Record) -> None:
        report, header = self._offsets, self.header
        tp = (r.topic, r.partition)
        offsets = self._seen.get(tp)
        if offsets is None:
            offsets = self._seen[tp] = array("q")
        prev = offsets[-1] if offsets else None
        if prev is not None and r.offset <= prev:  # a repeat, or out of order: look it up
            i = bisect_left(offsets, r.offset)
            if offsets[i] == r.offset:
                report.add(ERROR, "duplicate record", r.where, "offset seen twice")
                return
            offsets.insert(i, r.offset)
        else:
            offsets.append(r.offset)
        if prev is None:
            start = header.partitions.get(r.topic, {}).get(str(r.partition), {}).get("start")
            if start is not None and r.offset > start and header.from_ms is None:
                report.add(ERROR if header.complete else WARNING, "truncated head", r.where,
                           f"log starts at {start}; offsets {start}..{r.offset - 1} absent")
        elif r.offset < prev:
            report.add(ERROR, "out of order", r.where, f"after offset {prev}")
        elif r.offset > prev + 1:
            txn = (logical_topic(r.topic, header.topic_prefix) in TRANSACTIONAL
                   and header.isolation_level == "read_committed")
            kind = "transactional gap" if txn else "missing records"
            report.add(INFO if txn else ERROR, kind, r.where,
                       f"{r.offset - prev - 1} offset(s) after {prev}")

    def _input(self, r: Record) -> None:
        report = self._inputs
        position, self.inputs = self.inputs, self.inputs + 1
        tp = (r.topic, r.partition)
        number = self._partition_numbers.get(tp)
        if number is None:
            number = self._partition_numbers[tp] = len(self._partitions)
            self._partitions.append(tp)
        self._input_partition.append(number)
        self._input_offset.append(r.offset)
        head = r.head
        if head is None:
            report.add(WARNING, "undecodable input", r.where, "not a JSON envelope (skipped)")
            return
        eid, at, cell = head.event_id, head.occurred_at or "", r.cell or ""
        if eid is not None:
            first = self._first.setdefault(eid, position)
            if first != position:
                report.add(WARNING, "duplicate event", r.where,
                           f"{eid} also at {self._where_input(first)}")
                self._repeat.setdefault(eid, [first]).append(position)
        # RFC 3339 UTC 'Z' strings from the codec sort as times.
        cell_time, source_time = self._cell_time, self._source_time
        if at < cell_time.get(cell, ""):
            report.counts["time regression"] += 1
        cell_time[cell] = max(at, cell_time.get(cell, ""))
        key = (cell, head.source or "")
        if at < source_time.get(key, ""):
            report.add(WARNING, "source time regression", r.where,
                       f"{key[1]} at {at} after {source_time[key]}")
        source_time[key] = max(at, source_time.get(key, ""))


def _decisions(report: IntegrityReport, header: Header,
               position_of: Callable[[str | None, int], int | None],
               decisions: list[Record]) -> None:
    ids: dict[str, str] = {}
    last_cause: dict[str, int] = {}
    for r in decisions:
        where = r.where
        head = r.head
        eid = head.event_id if head is not None else None
        if head is None or eid is None:
            report.add(ERROR, "undecodable decision", where, "not a JSON envelope")
            continue
        if eid in ids:
            report.add(ERROR, "duplicate decision", where, f"{eid} also at {ids[eid]}")
            continue
        ids[eid] = where
        cause = head.causation_id
        cell = r.cell or ""
        pos = position_of(cause, last_cause.get(cell, -1))
        if pos is None:
            if header.complete and header.from_ms is None:
                report.add(ERROR, "orphan decision", where,
                           f"cause {cause} is not in the exported input log")
            continue
        if pos < last_cause.get(cell, -1):
            report.add(ERROR, "out-of-order decision", where,
                       f"its cause precedes the previous decision's cause in cell {cell}")
        last_cause[cell] = max(pos, last_cause.get(cell, -1))
