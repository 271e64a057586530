"""``hetsched replay``: re-decide a recorded input log from nothing and compare every decision.

    hetsched replay audit.jsonl.gz            # an exported file
    hetsched replay                           # the live cluster's input log and decisions
    hetsched replay audit.jsonl.gz --policy fgd          # what-if: another built-in profile
    hetsched replay audit.jsonl.gz --profile mine.yaml   # what-if: a profile file

Runs the worker's own pure step (``streams.adapter.apply`` on ``Cell``) over
each cell's input log, compares decision ids and bytes with the recorded
decisions and the two hash-chain heads, checks the log's integrity, and prints
a summary with the first mismatch (field-level diff and the input that caused
it). Exit status: 0 all reproduced, 1 a decision or the hash differs, 2 the
log is at fault: it has integrity errors (but every decision matched), or it
or an argument cannot be used (one line naming which; ``audit_input``), 3
decisions differ but the log was recorded by another engine version, whose
rules differ from this one's where the report says
(``streams.core.engine_version``). A what-if run reports how decisions and
metrics would have differed and exits 0.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="exported log (default: read the cluster)")
    parser.add_argument("--baseline", help="profile the recorded run used (default: the one "
                                            "named in its decisions, else HETSCHED_PROFILE)")
    what_if = parser.add_mutually_exclusive_group()
    what_if.add_argument("--policy", help="what-if: replay with this built-in profile")
    what_if.add_argument("--profile", help="what-if: replay with this profile file (YAML/JSON)")
    parser.add_argument("--topic-prefix", help="deployment's topic prefix (cluster only)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="replay the cells in N processes (cells are independent logs; "
                             "the report is the same as with one)")
    parser.add_argument("--restore-every", type=int, default=0, metavar="N",
                        help="rebuild each cell from its records after every N of its "
                             "inputs, as a restarted worker does, and go on with the "
                             "rebuilt one (checks that a restart decides as the log does)")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar (stderr; off when not a TTY)")


def run(args: argparse.Namespace) -> int:
    from streams.commands.replay_run import run as replay_command

    return replay_command(args)
