"""``hetsched explain TASK_ID``: why a task went where it went, from the log alone.

    hetsched explain train-42 audit.jsonl.gz     # from an exported file
    hetsched explain train-42                    # from the live cluster

Prints the task's timeline (submitted, probed, queued, placed, resized,
migrated, finished ...) in event time; each decision names the input event that
caused it and, when it has them, the candidates the policies compared with
their score terms (weighted, as the worker recorded them).
"""

from __future__ import annotations

import argparse

from streams.audit.explain import render, timeline
from streams.commands.audit_input import load_log


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", help="the task to explain")
    parser.add_argument("file", nargs="?", help="exported log (default: read the cluster)")
    parser.add_argument("--top", type=int, default=5, help="candidates shown per decision")
    parser.add_argument("--topic-prefix", help="deployment's topic prefix (cluster only)")


def run(args: argparse.Namespace) -> int:
    header, records = load_log(args.file, args.topic_prefix)
    rows = timeline(records, args.task_id, header.topic_prefix)
    print(render(args.task_id, rows, args.top))
    return 0 if rows else 1
