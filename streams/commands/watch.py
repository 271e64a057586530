"""Follow the answers to this run's submissions (``hetsched submit --wait``).

A task id says too little: an older decision may name the same id (a task that
holds it, or an earlier run of it), and a duplicate submission's answer names
the id of the task that holds it. An answer is this submission's when it was
caused by the submission's event (``causation_id``) or belongs to its chain
(``correlation_id``: a queued task's later placement), or, for a dead letter,
when it carries the submission's event id. The watcher positions itself at the
end of the decisions and dead-letter topics *before* anything is sent
(:meth:`Watcher.open`), so it reads only what came after.

What each answer means for the exit status of ``submit --wait`` (:data:`EXIT`):
placed (``TaskPlaced``, ``TaskProbe``) succeeds; refused (``TaskRejected``, a
``TaskUnschedulable`` that no change of the cluster can resolve, a dead letter)
fails; queued (a resolvable ``TaskUnschedulable``) keeps waiting for the
placement until the timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from streams.settings import WorkerSettings

PLACED, QUEUED, REFUSED = "placed", "queued", "refused"
OPEN_WAIT_S = 10.0
"""How long :meth:`Watcher.open` waits for the topics' partitions (a topic no worker
created yet has none: its answers cannot be read, and ``--wait`` times out)."""
EXIT_PLACED, EXIT_REFUSED, EXIT_NOT_PLACED = 0, 1, 3
"""Exit statuses of ``submit --wait`` (2, invalid input, is the submit command's own)."""
EXIT_HELP = (
    "exit status: 0 every task sent (with --wait: placed); 1 a task was refused (its "
    "id is in use, no node of its cell can ever host it, or the scheduler dead-lettered "
    "the submission), or the Kafka cluster did not answer; 2 invalid file or spec, "
    "nothing sent; 3 with --wait: a task was not placed within --timeout (still "
    "queued, or no answer)")


def describe(payload: Any) -> str:
    """One line per decision, e.g. ``job-1: TaskPlaced on node-a gpus 0,1``."""
    kind = type(payload).__name__
    if hasattr(payload, "gpus") and hasattr(payload, "node_id"):
        gpus = ",".join(f"{g.index}" + (f"@{g.share_milli}m" if g.share_milli < 1000 else "")
                        for g in payload.gpus)
        return f"{payload.task_id}: {kind} on {payload.node_id} gpus {gpus or '-'}"
    if kind == "TaskUnschedulable":
        why = "; ".join(r for v in payload.verdicts for r in v.reasons) or payload.message
        state = QUEUED if payload.resolvable else REFUSED
        return f"{payload.task_id}: {kind} ({state}) {why}"
    if kind == "TaskRejected":
        return f"{payload.task_id}: {kind} ({REFUSED}) {payload.reason.message}"
    return f"{payload.task_id}: {kind}"


def verdict_of(payload: Any) -> str | None:
    """What a decision about a submitted task says of it: placed, queued, refused, or
    None for a decision that settles nothing about the submission."""
    kind = type(payload).__name__
    if kind in ("TaskPlaced", "TaskProbe"):
        return PLACED
    if kind == "TaskRejected":
        return REFUSED
    if kind == "TaskUnschedulable":
        return QUEUED if payload.resolvable else REFUSED
    return None


def describe_dead_letter(task: str, letter: Any) -> str:
    """A dead-lettered submission in one line: the decoder's or the router's reason."""
    fields = "; ".join(f"field {e.field}: value {e.value!r}: {e.error}" for e in letter.errors)
    return f"{task}: refused before scheduling ({letter.reason}): {letter.message}" + (
        f": {fields}" if fields else "")


@dataclass
class Submission:
    """One sent submission and what has been heard of it so far."""

    task_id: str
    event_id: str
    state: str | None = None
    last: str = ""


def refuse_unreadable(topics: set[str], consumer: Any) -> None:
    """Raise a :class:`CommandError` naming the principal when the brokers refused to
    let it read ``topics``: the submitter role writes tasks and reads nothing, since
    reading decisions would show it every tenant's. Said before anything is sent
    (aiokafka only logs the refusal and the wait would end in a time-out)."""
    from schemas.command_line import CommandError
    from schemas.kafka import security_settings

    cluster = getattr(getattr(consumer, "_client", None), "cluster", None)
    denied = sorted(topics & set(getattr(cluster, "unauthorized_topics", ())))
    if denied:
        principal = security_settings().principal or "this client"
        raise CommandError(
            f"--wait reads {' and '.join(denied)}, which {principal} may not read (the "
            "submitter role only writes tasks); nothing sent. Submit without --wait and "
            "follow the task with `hetsched status`, or wait under a role that may read "
            "decisions (dashboard)")


@dataclass
class Watcher:
    """Reads decisions and dead letters from where the topics ended at :meth:`open`."""

    settings: WorkerSettings
    consumer: Any = None
    submissions: dict[str, Submission] = field(default_factory=dict)
    """Event id -> submission."""

    async def open(self) -> None:
        """Start at the current end of both topics: call it before sending."""
        import asyncio

        from aiokafka import AIOKafkaConsumer

        from schemas.kafka import aiokafka_kwargs
        from schemas.topics import DEADLETTER, DECISIONS

        topics = {self.settings.topic(DECISIONS), self.settings.topic(DEADLETTER)}
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap,
                                         group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="latest",
                                         isolation_level="read_committed",
                                         **aiokafka_kwargs())
        await self.consumer.start()
        try:
            self.consumer.subscribe(topics=sorted(topics))
            deadline = time.monotonic() + OPEN_WAIT_S
            while ({tp.topic for tp in self.consumer.assignment()} != topics
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.05)  # without a group, every partition is assigned
            refuse_unreadable(topics, self.consumer)
            for tp in self.consumer.assignment():
                await self.consumer.position(tp)  # the end, resolved now: before sending
        except BaseException:
            await self.consumer.stop()
            raise

    def expect(self, task_id: str, event_id: str) -> None:
        self.submissions[event_id] = Submission(task_id, event_id)

    async def wait(self, timeout_s: float) -> int:
        """Print each submission's answers until all are placed or refused, or the time is
        up; the exit status (:data:`EXIT_HELP`)."""
        deadline = time.monotonic() + timeout_s
        try:
            while self._open() and time.monotonic() < deadline:
                for records in (await self.consumer.getmany(timeout_ms=300)).values():
                    for r in records:
                        self._read(r)
        finally:
            await self.consumer.stop()
        return self._report(timeout_s)

    def _open(self) -> list[Submission]:
        return [s for s in self.submissions.values() if s.state not in (PLACED, REFUSED)]

    def _read(self, record: Any) -> None:
        from schemas.codec import decode, decode_deadletter
        from schemas.deadletter import DeadLetter
        from schemas.topics import DEADLETTER

        if record.topic == self.settings.topic(DEADLETTER):
            try:
                letter = decode_deadletter(record.value or b"")
            except ValueError:
                return
            sub = self.submissions.get(letter.event_id or "")
            if sub is not None and sub.state not in (PLACED, REFUSED):
                sub.state, sub.last = REFUSED, describe_dead_letter(sub.task_id, letter)
                print(sub.last)
            return
        env = decode(record.value or b"")
        if isinstance(env, DeadLetter):
            return
        sub = self.submissions.get(env.causation_id or "") or self.submissions.get(
            env.correlation_id or "")
        task = getattr(env.payload, "task_id", None)
        if sub is None or task != sub.task_id or sub.state in (PLACED, REFUSED):
            return
        verdict = verdict_of(env.payload)
        if verdict is None:
            return
        sub.state, sub.last = verdict, describe(env.payload)
        print(sub.last)

    def _report(self, timeout_s: float) -> int:
        import sys

        subs = list(self.submissions.values())
        refused = [s for s in subs if s.state == REFUSED]
        late = [s for s in subs if s.state not in (PLACED, REFUSED)]
        for s in late:
            print(f"{s.task_id}: not placed within {timeout_s:g}s: "
                  + ("still queued" if s.state == QUEUED else "no decision"))
        if refused or late:
            parts = [f"{len(refused)} refused"] if refused else []
            parts += [f"{len(late)} not placed within {timeout_s:g}s"] if late else []
            print(f"hetsched submit: {len(subs)} task(s): {', '.join(parts)}", file=sys.stderr)
        return EXIT_REFUSED if refused else EXIT_NOT_PLACED if late else EXIT_PLACED
