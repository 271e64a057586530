"""Cancel tasks by id: a ``TaskCancelled`` on ``hetsched.tasks`` for each.

A queued task leaves the queue; a running one is stopped on its node (the
scheduler emits a ``TaskPreempted`` with the reason, the executor stops the
process and reports it). The cancellation is keyed by the task id, so it
shares the submission's partition and is ordered after it. On a secured
cluster the router accepts it only from the tenant that owns the task
(docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_ids", nargs="+", metavar="TASK_ID", help="task ids to cancel")
    parser.add_argument("--reason", default="cancelled by user",
                        help="why, recorded with the decision (default: cancelled by user)")
    parser.add_argument("--source", default="cli", help="envelope source (default cli)")


def run(args: argparse.Namespace) -> int:
    import sys

    from pydantic import ValidationError

    from schemas.events import TaskCancelled

    payloads: list[Any] = []
    for task_id in args.task_ids:
        try:
            payloads.append(TaskCancelled(task_id=task_id, reason=args.reason))
        except ValidationError as exc:
            why = "; ".join(f"field {'.'.join(map(str, e['loc']))}: {e['msg']}"
                            for e in exc.errors(include_url=False))
            print(f"hetsched cancel: task id {task_id!r}: {why}; nothing sent", file=sys.stderr)
            return 2
    return asyncio.run(_send(args, payloads))


async def _send(args: argparse.Namespace, payloads: list[Any]) -> int:
    from datetime import UTC, datetime

    from schemas.consume import produce_event
    from schemas.events import make_event
    from streams.commands.tasks_topic import tasks_producer
    from streams.settings import WorkerSettings

    spec, producer = tasks_producer(WorkerSettings.from_env())
    try:
        await producer.start()  # fails at once when nothing listens: the CLI says so
    except BaseException:
        await producer.stop()
        raise
    try:
        for p in payloads:
            env = make_event(p, source=args.source, occurred_at=datetime.now(UTC))
            await produce_event(producer, spec, env)
            print(f"cancel sent for {p.task_id} (event {env.event_id})")
    finally:
        await producer.stop()
    return 0
