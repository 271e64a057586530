"""Submit tasks from a YAML or JSON file: one spec or a list of specs.

Each spec holds the fields of a ``TaskSubmitted`` payload (``task_id``,
``tenant``, ``resources``, ``executor``, ...). Every spec is validated with
the schema model first (a GPU model must be one of the catalog's, and no two
specs may share a task id); if any is invalid, nothing is sent and each problem is printed as
``FILE: task N (task_id X): field a.b: value ...: message`` (exit status 2).
Valid specs are sent to ``hetsched.tasks`` keyed by task id, and their ids and
event ids printed. ``--wait`` then prints the answers to these submissions
(not older decisions about the same ids): a placement, a refusal with its
reasons (the id is in use, no node can ever host the task, the submission was
dead-lettered), or that the task is queued, and waits on for its placement.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from streams.commands.watch import EXIT_HELP

    parser.epilog = EXIT_HELP
    parser.add_argument("file", type=Path, help="YAML or JSON file with one spec or a list")
    parser.add_argument("--wait", action="store_true",
                        help="wait until each task is placed or refused, printing why")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to --wait (30)")
    parser.add_argument("--source", default="cli", help="envelope source (default cli)")


def load_specs(path: Path) -> list[Any]:
    """The specs in ``path`` (a list, even for one spec); raises ValueError on bad syntax."""
    import yaml

    from schemas.command_line import yaml_problem

    text = path.read_text()
    try:
        doc = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML/JSON: {yaml_problem(exc)}") from None
    if isinstance(doc, dict) and isinstance(doc.get("tasks"), list):
        doc = doc["tasks"]
    return doc if isinstance(doc, list) else [doc]


GANG_FIELDS = ("nodes", "gpus_per_node", "mixed_models")
"""Resource fields of ``TaskSubmitted`` v2 (a gang's shape): a spec using one is sent as v2,
any other as v1, which every reader knows."""


def _shaped(spec: Any) -> bool:
    resources = spec.get("resources") if isinstance(spec, dict) else None
    return isinstance(resources, dict) and any(f in resources for f in GANG_FIELDS)


def validate(path: Path, specs: list[Any]) -> tuple[list[Any], list[str]]:
    """Validated payloads and the error lines (empty when all are valid)."""
    import orjson
    from pydantic import ValidationError

    from schemas.events import TaskSubmitted, TaskSubmittedV2, TaskSubmittedV3

    payloads, errors = [], []
    first_of: dict[str, int] = {}
    for n, spec in enumerate(specs, start=1):
        task_id = spec.get("task_id", "?") if isinstance(spec, dict) else "?"
        where = f"{path}: task {n} (task_id {task_id})"
        try:
            # Through JSON, so YAML's dates/ints behave as the wire would.
            # The lowest version that carries the spec's fields, so older workers read it.
            model = (TaskSubmittedV3 if isinstance(spec, dict) and "job_name" in spec
                     else TaskSubmittedV2 if _shaped(spec) else TaskSubmitted)
            payloads.append(model.model_validate_json(orjson.dumps(spec)))
        except (ValidationError, TypeError) as exc:
            if isinstance(exc, TypeError):
                errors.append(f"{where}: not JSON-compatible: {exc}")
                continue
            for err in exc.errors(include_url=False):
                field = ".".join(str(p) for p in err["loc"]) or "(spec)"
                value = orjson.dumps(err.get("input")).decode()[:80] if "input" in err else ""
                errors.append(f"{where}: field {field}: value {value}: {err['msg']}")
        named = spec.get("task_id") if isinstance(spec, dict) else None
        if isinstance(named, str) and named in first_of:
            # The scheduler would reject the second: a task id is taken by its first use.
            errors.append(f"{where}: field task_id: value {orjson.dumps(named).decode()}: "
                          f"also the id of task {first_of[named]} of this file")
        elif isinstance(named, str):
            first_of[named] = n
    return payloads, errors


def run(args: argparse.Namespace) -> int:
    try:
        specs = load_specs(args.file)
    except (OSError, ValueError) as exc:
        print(f"hetsched submit: {exc}", file=sys.stderr)
        return 2
    payloads, errors = validate(args.file, specs)
    if errors:
        for line in errors:
            print(line, file=sys.stderr)
        print(f"hetsched submit: nothing sent ({len(errors)} problem(s))", file=sys.stderr)
        return 2
    import asyncio

    return asyncio.run(_send(args, payloads))


async def _send(args: argparse.Namespace, payloads: list[Any]) -> int:
    from datetime import UTC, datetime

    from schemas.consume import produce_event
    from schemas.events import make_event
    from schemas.kafka import not_authorized
    from streams.commands.tasks_topic import tasks_producer
    from streams.commands.watch import Watcher
    from streams.settings import WorkerSettings

    settings = WorkerSettings.from_env()
    watcher = Watcher(settings) if args.wait else None
    if watcher is not None:
        await watcher.open()  # before sending: only answers to what is sent now count
    spec, producer = tasks_producer(settings)
    try:
        await producer.start()  # fails at once when nothing listens: the CLI says so (cli.py)
        for p in payloads:
            env = make_event(p, source=args.source, occurred_at=datetime.now(UTC))
            if watcher is not None:
                watcher.expect(p.task_id, env.event_id)
            await produce_event(producer, spec, env)
            print(f"submitted {p.task_id} (event {env.event_id})")
    except BaseException as exc:
        if watcher is not None:
            await watcher.consumer.stop()
        refused = not_authorized(exc, f"to write {spec.name}")
        if refused is not None:  # a producer-id refusal does not name the topic itself
            raise refused from None
        raise
    finally:
        await producer.stop()
    return await watcher.wait(args.timeout) if watcher is not None else 0
