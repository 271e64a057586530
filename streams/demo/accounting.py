"""Where each of the demo's tasks ended: the run's topics exported beside the report and
folded by ``hetsched check``'s own fold.

The report counted tasks from what the demo had read back while it ran: every
``TaskFailed`` (a preemption's kill report too, for a task that went on to finish),
every first ``TaskFinished``, and the worker's queue and running tasks polled at
another moment; the numbers did not add up to the tasks submitted and disagreed
with ``hetsched check`` on the same topics. Now the counts are check's: each task
in exactly one state, taken after every process of the run has stopped, so the
report and a later ``hetsched check --topic-prefix <the run's prefix>`` read the
same records and agree. The export stays beside the report, so any task can be
explained from it (``hetsched explain TASK audit.jsonl.gz``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streams.check.findings import Report


@dataclass(frozen=True)
class Accounting:
    """The check of a finished run, and the export it was read from."""

    report: Report
    audit_file: Path
    prefix: str


def account(prefix: str, audit_file: Path) -> Accounting:
    """Export the run's checked topics to ``audit_file`` and check them (not settled,
    as ``hetsched check`` without ``--settled``: a submission the worker never logged
    before it stopped is in flight, not lost)."""
    from streams.audit.logfile import LogFile
    from streams.audit.source import export
    from streams.check.invariants import CHECKED_TOPICS, check

    export(audit_file, prefix, CHECKED_TOPICS, check=False)  # checked as it is read back
    return Accounting(check(LogFile(audit_file), prefix), audit_file, prefix)
