"""Process-wide settings of a transactional worker, and its trace (``streams.processors.eos``).

Why apart from the loop: none of these decides what a round does; each tunes the
process it runs in (the garbage collector, aiokafka's retry pauses and logging) or
records it for bench/service.py, and each carries the measurement that set it.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import orjson
from aiokafka import TopicPartition
from aiokafka.producer import sender as aiokafka_sender

TXN_RETRY_BACKOFF_MS = 20
"""Retry pause of the transactional producers. Right after a commit the
coordinator is still writing the markers and answers the next transaction's
AddOffsetsToTxn / EndTxn with CONCURRENT_TRANSACTIONS; aiokafka retries those
after ``retry_backoff_ms`` (100 ms by default): a 100 ms stall of the hop
each time. The Java client uses 20 ms for the same case (KAFKA-5477)."""

FREEZE_AFTER_OPEN = True
"""After opening partitions, ``gc.freeze()``: everything alive then (the restored state,
and the worker's modules, schemas and clients from its start) moves to the permanent
generation, which CPython's full collections skip.

A full (generation 2) collection walks every tracked object, and it stalls the event
loop while it does. Measured in the worker at 200 submissions/s (``gc.callbacks``,
bench/service.py, load average 4.5-5.8): without freezing, full collections of
140-190 ms about every 20 s, each waited out by every submission in flight; with this
freeze, 55 ms and then 1.4 ms (what the worker keeps after its start, e.g. the nodes
registered later, is walked until it dies or a later opening freezes it). Objects
still die by reference counting; only a reference cycle that was alive at a freeze
and becomes garbage later is never freed (the state restored here is long-lived by
design, and opening is rare)."""


YOUNG_COLLECTION_THRESHOLD = 20_000
"""The worker's first-generation garbage-collection threshold (CPython's default: 700).

The threshold counts tracked objects allocated less those freed since the last
collection. A round keeps thousands alive for its whole length (its fetched records,
their envelopes, the outputs), and the routed-telemetry table (``ingest``) holds
thousands more until the scheduler takes them, so at 700 a collection ran every few
dozen records and found them all still alive: walked, promoted, walked again by the
middle generation, and their promotions counted towards a full collection, which
after :data:`FREEZE_AFTER_OPEN` has few long-lived objects to weigh that against.
Measured in the telemetry backlog run (``bench/load.py --only telemetry``, traced with
:data:`TRACE_ENV`): collections of 2 ms or more took 0.33 s (wall clock) of ~5.3 s of
worker CPU at 700, full ones 0.14 s of it; at 20,000 the backlog of 100,000 events saw
7 young collections of ~5.5 ms (thread time) and no full one (BENCHMARKS.md,
"Telemetry ingest, session 6"). Most of those objects die by reference counting within
a round or two, before a collection at this threshold sees them; the price is a
longer young collection, now and then."""


def use_young_collection_threshold() -> None:
    """Raise the process's first-generation GC threshold to
    :data:`YOUNG_COLLECTION_THRESHOLD` (never lower one set higher)."""
    first, *rest = gc.get_threshold()
    if 0 < first < YOUNG_COLLECTION_THRESHOLD:
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *rest)


GC_TRACE_MIN_S = 0.002
"""Trace only: collections at least this long are written (shorter ones are noise)."""

TRACE_ENV = "HETSCHED_EOS_TRACE"
"""A folder: each processor appends one JSON line per transaction to
``<folder>/<name>-<pid>.jsonl`` (wall-clock stage times and the records it
consumed), for ``bench/service.py --trace``'s per-stage latency breakdown."""


class Trace:
    """Per-transaction stage times (``time.time()``, comparable across processes), and
    the process's garbage collections of :data:`GC_TRACE_MIN_S` or more (a stall of
    every round in flight) in ``gc-<pid>.jsonl``."""

    _gc_file: Any = None

    def __init__(self, folder: str, name: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self._file = open(os.path.join(folder, f"{name}-{os.getpid()}.jsonl"), "ab")  # noqa: SIM115
        if Trace._gc_file is None:  # one per process, however many processors trace
            Trace._gc_file = open(os.path.join(folder, f"gc-{os.getpid()}.jsonl"), "ab")  # noqa: SIM115
            gc.callbacks.append(Trace._on_gc)

    _gc_started = 0.0

    @staticmethod
    def _on_gc(phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            Trace._gc_started = now
            return
        took = now - Trace._gc_started
        if took >= GC_TRACE_MIN_S:
            Trace._gc_file.write(orjson.dumps({
                "gen": info.get("generation"), "end": time.time(),
                "ms": round(took * 1000, 2)}) + b"\n")
            Trace._gc_file.flush()

    def write(self, p: int, todo: Sequence[tuple[TopicPartition, Any]],
              stages: dict[str, float]) -> None:
        recs = [f"{tp.topic}:{tp.partition}:{r.offset}" for tp, r in todo]
        self._file.write(orjson.dumps({"p": p, **stages, "recs": recs}) + b"\n")
        self._file.flush()


CONCURRENT_TXN_BACKOFF_S = 0.002
"""Retry pause of AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS.

The broker answers EndTxn once the commit is decided (PrepareCommit logged) and
writes the markers after; until they are written, the producer's next
transaction gets CONCURRENT_TRANSACTIONS for its first AddPartitionsToTxn.
aiokafka retries that after a fixed 20 ms (``sender.BACKOFF_OVERRIDE``, not a
client option). Measured on the dev broker (one producer, transactions back to
back): the markers take 2-4 ms and about one transaction in five waited the
full 20 ms; with 2 ms, p90 begin -> first append acked fell from 23 ms to
4.5 ms. Every transaction of both hops starts this way right after the previous
one, so the 20 ms lands on a submission's path up to twice. A few more cheap
requests per transaction are the price."""


def use_short_concurrent_txn_backoff() -> None:
    """Set aiokafka's CONCURRENT_TRANSACTIONS retry pause (a module constant) to ours."""
    if isinstance(getattr(aiokafka_sender, "BACKOFF_OVERRIDE", None), float):
        aiokafka_sender.BACKOFF_OVERRIDE = CONCURRENT_TXN_BACKOFF_S


def quiet_client_debug_logs() -> None:
    """Stop aiokafka building a LogRecord per produced and fetched record nobody sees.

    aiokafka logs every send, fetch and request at DEBUG. Faust's worker, run at
    WARN or above, sets the root logger to DEBUG so that its terminal spinner
    turns on every record, while its output handler prints WARN and up only: each
    of those calls then built and dispatched a record, about 10 % of a worker's
    CPU under load (py-spy, bench/service.py). When no handler other than the
    spinner shows DEBUG, the aiokafka logger gets the level actually shown.
    An explicitly set aiokafka level is left alone.
    """
    client = logging.getLogger("aiokafka")
    if client.level != logging.NOTSET:
        return
    root = logging.getLogger()
    shown = [h.level for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
    floor = max(root.level, min(shown)) if shown else root.level
    if floor > logging.DEBUG:
        client.setLevel(floor)
