"""``hetsched check``: prove the scheduler's safety invariants from its log.

    hetsched check                          # the live cluster (tasks, status, input log,
                                            # decisions, dead letters)
    hetsched check audit.jsonl.gz           # an exported file (export with --topic for all five)
    hetsched check --settled --json         # the cluster is quiet: undecided tasks are lost

Checks that no GPU was booked over 1000 milli at any point, no task was placed
twice concurrently, every submitted task is accounted for (a submission the router
dead-lettered is refused, with its reason, not lost), no task was ended by a report
its placement's node did not send, every decision was
started at most once by the executors, and no decision went to a failed or
departed node (see ``streams/check/invariants.py`` and docs/guarantees.md).
Exit status: 0 every invariant holds, 1 a violation, 2 nothing to check. Reads the
log twice without holding its input log (the cluster's through a temporary export).
"""

from __future__ import annotations

import argparse

import orjson


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="exported log (default: read the cluster)")
    parser.add_argument("--settled", action="store_true",
                        help="the cluster is quiet: a submission without a decision is lost, "
                             "not in flight")
    parser.add_argument("--topic-prefix", help="deployment's topic prefix (cluster only)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar of reading the cluster (stderr; off "
                             "when not a TTY)")


def run(args: argparse.Namespace) -> int:
    from schemas.command_line import CommandError
    from streams.audit.logfile import AuditFileError, LogFile
    from streams.check.invariants import CHECKED_TOPICS, check
    from streams.commands.audit_input import log_file

    with log_file(args, CHECKED_TOPICS) as (path, _):
        try:
            log = LogFile(path)
            if next(iter(log), None) is None:
                print("hetsched check: no records to check")
                return 2
            report = check(log, log.header.topic_prefix, settled=args.settled)
        except AuditFileError as exc:
            raise CommandError(str(exc)) from None
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(report.render())
    return 0 if report.ok else 1
