"""Where the audit commands read from: an exported file, or the live cluster.

The cluster is read by ``export``, into a file or into a temporary one the other
commands then read (``streams.commands.audit_input.log_file``), so every command
works the same on both and none holds the log.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from schemas.kafka import bootstrap_servers
from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit import logfile
from streams.audit.integrity import Checker, IntegrityReport
from streams.audit.kafka_source import ISOLATION, Progress, reading
from streams.audit.logfile import Header
from streams.audit.records import Record

DEFAULT_TOPICS = (INPUT_LOG, DECISIONS)
_PROFILE = re.compile(r"^profile (\S+):")


def topic_prefix(explicit: str | None) -> str:
    """``--topic-prefix``, else the deployment's ``HETSCHED_TOPIC_PREFIX``."""
    return explicit if explicit is not None else os.environ.get("HETSCHED_TOPIC_PREFIX", "")


def _header(bootstrap: str, prefix: str, names: list[str], from_ms: int | None,
            to_ms: int | None, partitions: dict[str, dict[str, dict[str, int]]],
            complete: bool) -> Header:
    return Header(topics=names, exported_at=datetime.now(UTC).isoformat(),
                  bootstrap=bootstrap, topic_prefix=prefix, isolation_level=ISOLATION,
                  from_ms=from_ms, to_ms=to_ms, partitions=partitions,
                  complete=complete and from_ms is None)


def export(path: Path, prefix: str, topics: tuple[str, ...] = DEFAULT_TOPICS,
           from_ms: int | None = None, to_ms: int | None = None,
           progress: Progress | None = None, compresslevel: int = 6,
           check: bool = True) -> tuple[Header, int, IntegrityReport]:
    """Write the cluster's ``topics`` to the audit file ``path`` as they are read, holding
    none of the records (the integrity check keeps its indexes of ids and offsets):
    the header, the number of records written and the log's integrity report (empty
    with ``check`` False: for a file that is checked when it is read, as a spool is; the
    check is nearly half of an export's CPU). Raises :class:`MissingTopics` when the
    cluster lacks one of the topics: nothing is written then."""
    bootstrap = bootstrap_servers()
    names = [prefix + t for t in topics]

    async def go() -> tuple[Header, int, IntegrityReport]:
        async with reading(bootstrap, names, from_ms, to_ms, progress=progress) as read:
            header = _header(bootstrap, prefix, names, from_ms, to_ms, read.partitions,
                             read.complete)
            checker, count = Checker(header) if check else None, 0
            with logfile.writing(path, header, compresslevel) as add:
                async for r in read.records():
                    add(r)
                    if checker is not None:
                        checker.add(r)
                    count += 1
            return header, count, (checker.report() if checker is not None
                                   else IntegrityReport())

    return asyncio.run(go())


def _placement_reasons(records: list[Record]) -> Iterator[dict[str, Any]]:
    """The reason document of each ``TaskPlaced`` among ``records``, in order."""
    for r in records:
        head = r.head
        doc = r.doc if head is not None and head.type == "TaskPlaced" else None
        if doc:
            yield (doc.get("payload") or {}).get("reason") or {}


def recorded_profile(records: list[Record]) -> str | None:
    """The profile named in the first placement's reason (the worker's HETSCHED_PROFILE)."""
    for reason in _placement_reasons(records):
        m = _PROFILE.match(reason.get("message", ""))
        if m:
            return m.group(1)
    return None


def recorded_predicts_runtimes(records: list[Record]) -> bool | None:
    """Did the worker's queue predict run times (``HETSCHED_PREDICT_RUNTIMES``)? Read from
    the first placement: its reason carries ``PREDICTING_MARK`` when it did. None: the
    log holds no placement to tell."""
    from streams.core.queue import PREDICTING_MARK

    for reason in _placement_reasons(records):
        return PREDICTING_MARK in (reason.get("metrics") or {})
    return None


def recorded_engine(records: list[Record]) -> int | None:
    """The engine version that decided the log's placements: the first placement's mark
    (``streams.core.engine_version``), version 1 when it carries none. None: the log
    holds no placement to tell."""
    from streams.core.engine_version import ENGINE_MARK, UNMARKED

    for reason in _placement_reasons(records):
        mark = (reason.get("metrics") or {}).get(ENGINE_MARK)
        return int(mark) if isinstance(mark, int | float) else UNMARKED
    return None


def parse_time(text: str | None) -> int | None:
    """RFC 3339 (``2026-11-29T14:02:00Z``) or epoch milliseconds -> epoch milliseconds."""
    if not text:
        return None
    if text.isdigit():
        return int(text)
    at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if at.tzinfo is None:
        raise ValueError(f"{text!r}: give a time zone (Z or +hh:mm)")
    return int(at.timestamp() * 1000)
