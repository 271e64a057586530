"""The executor's durable memory: applied decisions, read positions, running tasks.

Why SQLite in the state directory: the executor must apply each decision at
most once even across its own restarts and redeliveries (Kafka delivers at
least once; the scheduler may re-send after a failover). Claiming a
``decision_id`` is one ``INSERT OR IGNORE`` in a transaction, done *before*
the decision is acted on, so a crash between claim and action loses the
action but never doubles it. The same transaction marks the claim *pending*
until the action is over (``done``); a pending claim found at start-up is an
action a crash cut short, which the executor reports (a placement that never
started: ``TaskFailed(lost, retryable)``, so the scheduler queues the task
again instead of believing it runs). SQLite gives that atomically,
crash-safely, with no extra service and one file an operator can inspect with
``sqlite3``.

Positions (next offset per topic partition) live in the same file so that a
restart resumes where it stopped; they are an optimisation, not the
guarantee: re-reading old decisions is harmless because claims dedupe them.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS applied (
    decision_id TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL,
    type        TEXT NOT NULL,
    applied_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS positions (
    topic       TEXT NOT NULL,
    partition   INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS pending (
    decision_id TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL,
    type        TEXT NOT NULL,
    cause       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    record  TEXT NOT NULL
);
"""


class Journal:
    """One SQLite file; not shared between processes at the same time."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    # -- decisions -------------------------------------------------------------

    def claim(self, decision_id: str, task_id: str, event_type: str,
              cause: dict[str, Any] | None = None) -> bool:
        """Record the decision as applied; False if it already was (do not apply it).

        A new claim is also *pending*, with ``cause`` (what a report about it must
        name), until :meth:`done`.
        """
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO applied VALUES (?, ?, ?, ?)",
                (decision_id, task_id, event_type, time.time()),
            )
            if cur.rowcount != 1:
                return False
            db.execute(
                "INSERT INTO pending VALUES (?, ?, ?, ?)",
                (decision_id, task_id, event_type, json.dumps(cause or {}, sort_keys=True)),
            )
            return True

    def done(self, decision_id: str) -> None:
        """The claimed decision's action is over (applied, refused or reported)."""
        with self._tx() as db:
            db.execute("DELETE FROM pending WHERE decision_id = ?", (decision_id,))

    def pending(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """Claims whose action a crash cut short: (decision_id, task_id, type, cause)."""
        rows = self._db.execute(
            "SELECT decision_id, task_id, type, cause FROM pending ORDER BY rowid"
        )
        return [(d, t, kind, json.loads(c)) for d, t, kind, c in rows]

    def applied(self, decision_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM applied WHERE decision_id = ?", (decision_id,)
        ).fetchone()
        return row is not None

    def applied_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM applied").fetchone()[0])

    # -- positions -------------------------------------------------------------

    def positions(self, topic: str) -> dict[int, int]:
        rows = self._db.execute(
            "SELECT partition, next_offset FROM positions WHERE topic = ?", (topic,)
        )
        return {int(p): int(o) for p, o in rows}

    def save_positions(self, topic: str, positions: dict[int, int]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT INTO positions VALUES (?, ?, ?) ON CONFLICT (topic, partition) "
                "DO UPDATE SET next_offset = excluded.next_offset",
                [(topic, p, o) for p, o in positions.items()],
            )

    # -- running tasks ---------------------------------------------------------

    def put_task(self, task_id: str, record: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO tasks VALUES (?, ?) ON CONFLICT (task_id) "
                "DO UPDATE SET record = excluded.record",
                (task_id, json.dumps(record, sort_keys=True)),
            )

    def remove_task(self, task_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))

    def tasks(self) -> dict[str, dict[str, Any]]:
        rows = self._db.execute("SELECT task_id, record FROM tasks ORDER BY task_id")
        return {task_id: json.loads(record) for task_id, record in rows}
