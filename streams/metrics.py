"""Prometheus metrics of a scheduler worker (served at ``/metrics`` by :mod:`streams.web`).

Names follow Prometheus conventions: ``_total`` counters, base units
(seconds), ``hetsched_`` prefix. Placement latency is measured at the worker
from the submission's event time to the moment its decision is sent, so it
includes the router hop and both transaction commits' waiting, not the
consumer's read.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

DECISIONS = Counter("hetsched_decisions_total", "Decisions sent, by type", ["type"])
INPUTS = Counter("hetsched_inputs_total", "Input-log events processed, by type", ["type"])
ROUTED = Counter("hetsched_routed_total", "Events appended to the input log by the router",
                 ["type"])
UNROUTED = Counter("hetsched_unrouted_total",
                   "Valid events the router could not assign to a cell (unknown node/task)")
DEAD_LETTERS = Counter("hetsched_dead_letters_total", "Records sent to the dead-letter topic",
                       ["reason"])
QUEUE_LENGTH = Gauge("hetsched_queue_length", "Tasks waiting in a cell's queue", ["cell"])
ALLOCATION_RATIO = Gauge("hetsched_allocation_ratio",
                         "Allocated share of the cell's GPU capacity (0..1)", ["cell"])
PLACEMENT_LATENCY = Histogram(
    "hetsched_placement_latency_seconds",
    "Submission event time to decision sent, for first decisions on a submission",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


class CountsByType:
    """A labelled counter advanced once per transaction instead of once per record.

    A Prometheus ``inc`` takes a lock and ``labels()`` a lock and a lookup: at
    thousands of records a second that showed in the worker's profile, so records are
    tallied in a dict (:meth:`add`) and the counter moves at the transaction's end
    (:meth:`flush`).
    """

    def __init__(self, counter: Counter) -> None:
        self._counter = counter
        self._children: dict[str, Any] = {}
        self._pending: dict[str, int] = {}

    def add(self, kind: str) -> None:
        self._pending[kind] = self._pending.get(kind, 0) + 1

    def flush(self) -> None:
        for kind, n in self._pending.items():
            child = self._children.get(kind)
            if child is None:
                child = self._children[kind] = self._counter.labels(kind)
            child.inc(n)
        self._pending.clear()


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus text format and its content type."""
    return generate_latest(), CONTENT_TYPE_LATEST
