"""``hetsched explain TASK_ID``: why a task went where it went, from the log alone.

    hetsched explain train-42 audit.jsonl.gz     # from an exported file
    hetsched explain train-42                    # from the live cluster

Prints the task's timeline (submitted, probed, queued, placed, resized,
migrated, finished ...) in event time; each decision names the input event that
caused it and, when it has them, the candidates the policies compared with
their score terms (weighted, as the worker recorded them). Holds only the task's
records: the log is read twice (the cluster's through a temporary export).
"""

from __future__ import annotations

import argparse

from schemas.command_line import CommandError, check_limits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", help="the task to explain")
    parser.add_argument("file", nargs="?", help="exported log (default: read the cluster)")
    parser.add_argument("--top", type=int, default=5,
                        help="candidates shown per decision (5; 0: only how many)")
    parser.add_argument("--topic-prefix", help="deployment's topic prefix (cluster only)")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar of reading the cluster (stderr; off "
                             "when not a TTY)")


def run(args: argparse.Namespace) -> int:
    # Here, not at the top: ``--help`` then prints without loading the audit path.
    from streams.audit.explain import render, timeline
    from streams.audit.logfile import AuditFileError, LogFile
    from streams.commands.audit_input import log_file

    check_limits([("--top", args.top, args.top >= 0, "0 (no candidates) or more")])
    with log_file(args) as (path, _):
        try:
            log = LogFile(path)
            rows = timeline(log, args.task_id, log.header.topic_prefix)
        except AuditFileError as exc:
            raise CommandError(str(exc)) from None
    print(render(args.task_id, rows, args.top))
    return 0 if rows else 1
