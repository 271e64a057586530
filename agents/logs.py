"""Structured logs for the node side: one line per record, context as key=value.

Why not plain ``%(message)s``: node logs are read across hundreds of machines,
and a task's story must be found by grepping ``task_id=``; every record's
``extra`` fields (node, task, decision ids) are appended, sorted, as key=value.
"""

from __future__ import annotations

import logging
import sys

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """``2026-01-01T00:00:00 INFO agents.executor task started node_id=n1 task_id=t1``."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in sorted(extras.items()))
        return line


def setup(level: str = "INFO") -> None:
    """Log to stderr (journald/systemd picks it up) at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
