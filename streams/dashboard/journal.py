"""The records of each recent task, kept for the dashboard's task view.

The task view answers "why is my task pending?" with ``hetsched explain``'s own
timeline (:func:`streams.audit.explain.timeline`), which reads audit records of
the input log and the decisions topic. The dashboard's feed already reads both
topics, so it keeps here, per task, the records that name it: the submission,
status reports and decisions, with their positions. Nothing is read back from
Kafka when a task is opened.

Bounded for a worker that runs for months: the :data:`MAX_TASKS` tasks heard of
last, each with its first record (the submission, which says what it asked for)
and its last :data:`MAX_LATER` (the latest decision is the one that says why it
waits). A task's records are a few KB (a placement with its candidates is the
largest), so the journal stays within tens of MB.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from streams.audit.records import Record

MAX_TASKS = 2000
MAX_LATER = 16


@dataclass
class _TaskRecords:
    first: Record
    later: deque[Record] = field(default_factory=lambda: deque(maxlen=MAX_LATER))


@dataclass
class TaskJournal:
    max_tasks: int = MAX_TASKS
    _tasks: OrderedDict[str, _TaskRecords] = field(default_factory=OrderedDict)

    def keep(self, task_id: str, record: Record) -> None:
        """Add ``record`` to ``task_id``'s records; forget the task heard of longest ago
        when more than :attr:`max_tasks` are kept."""
        kept = self._tasks.get(task_id)
        if kept is None:
            self._tasks[task_id] = _TaskRecords(record)
            if len(self._tasks) > self.max_tasks:
                self._tasks.popitem(last=False)
            return
        kept.later.append(record)
        self._tasks.move_to_end(task_id)

    def records(self, task_id: str) -> list[Record]:
        """The records kept for ``task_id`` in the order they were read (empty: none)."""
        kept = self._tasks.get(task_id)
        return [] if kept is None else [kept.first, *kept.later]

    def __len__(self) -> int:
        return len(self._tasks)
