"""``hetsched export``: the per-cell input logs and the decisions, to a portable file.

    hetsched export -o audit.jsonl.gz                       # everything, from the log start
    hetsched export -o day.jsonl.gz --from 2026-11-29T00:00:00Z --to 2026-11-30T00:00:00Z
    hetsched export -o all.jsonl.gz --topic hetsched.tasks --topic hetsched.task-status \
        --topic hetsched.input-log --topic hetsched.decisions --topic hetsched.deadletter

Reads the cluster (``KAFKA_BOOTSTRAP``, security from the environment) with
read_committed isolation, up to each partition's end at start time, and writes
gzip'd JSON lines (``.jsonl`` for plain text): a header, then one line per
record with topic, partition, offset, timestamp, key and value, each written as
it is read (an export holds no records, however long the log). A time range
selects by record timestamp; such a file starts mid-log and cannot be replayed
from nothing (replay needs each cell's log from its start). See docs/auditing.md.
"""

from __future__ import annotations

import argparse
import sys

from streams.audit.source import DEFAULT_TOPICS
from streams.check.invariants import CHECKED_TOPICS
from streams.commands.audit_input import exported, time_arg, writable_output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", required=True, help="file to write (.jsonl.gz)")
    parser.add_argument("--from", dest="from_time", help="first record time (RFC 3339 or ms)")
    parser.add_argument("--to", dest="to_time", help="last record time (RFC 3339 or ms)")
    parser.add_argument("--topic", action="append", dest="topics",
                        help=f"catalog topic to export (repeatable; default: "
                             f"{', '.join(DEFAULT_TOPICS)}; what hetsched check reads: "
                             f"{', '.join(CHECKED_TOPICS)})")
    parser.add_argument("--topic-prefix", help="deployment's topic prefix "
                                               "(default: HETSCHED_TOPIC_PREFIX)")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar (stderr; off when not a TTY)")


def run(args: argparse.Namespace) -> int:
    from streams.progress import advancing, progress_bar

    # The arguments are checked before the topics are read (which may take minutes).
    output = writable_output("--output", args.output)
    from_ms, to_ms = time_arg("--from", args.from_time), time_arg("--to", args.to_time)
    topics = tuple(args.topics or DEFAULT_TOPICS)
    with progress_bar(total=None, unit="rec", desc="export",
                      disable=getattr(args, "no_progress", False)) as bar:
        header, count, integrity = exported(output, args.topic_prefix, topics,
                                            from_ms=from_ms, to_ms=to_ms,
                                            progress=advancing(bar))
    print(f"exported {count} records of {', '.join(header.topics)} to {args.output}"
          f"{'' if header.complete else ' (partial: starts mid-log, not replayable from nothing)'}")
    for finding in integrity.errors:
        print(f"  {finding}", file=sys.stderr)
    return 0
