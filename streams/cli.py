"""The ``hetsched`` command (scheduler side).

Each sub-command lives in its own module; this file only maps names to modules
(:mod:`schemas.command_line` says how). Run ``hetsched --help`` for the list.
"""

from __future__ import annotations

import argparse
import sys

from schemas import command_line
from schemas.command_line import Commands

# name -> (module, one-line help)
COMMANDS: Commands = {
    "worker": ("streams.commands.worker", "run a scheduler worker (Faust)"),
    "demo": ("streams.commands.demo", "run the local cluster demo (main job)"),
    "simulate": ("streams.commands.simulate", "run policies on a trace without Kafka (packing)"),
    "submit": ("streams.commands.submit", "submit tasks from a YAML/JSON file (validated)"),
    "cancel": ("streams.commands.cancel", "cancel tasks by id (stops them if running)"),
    "status": ("streams.commands.status", "show queue, running tasks and GPU use per node"),
    "nodes": ("streams.commands.nodes", "list nodes with their GPU use"),
    "acl": ("streams.commands.acl", "print or apply the Kafka ACLs of the roles (security)"),
    "export": ("streams.commands.export", "export input logs and decisions to a file (audit)"),
    "replay": ("streams.commands.replay", "re-decide a recorded log and compare (audit)"),
    "explain": ("streams.commands.explain", "a task's timeline and decision reasons (audit)"),
    "check": ("streams.commands.check", "check the safety invariants on the log (reliability)"),
}


def build_parser() -> argparse.ArgumentParser:
    return command_line.build_parser("hetsched", __doc__.splitlines()[0], COMMANDS)


def main(argv: list[str] | None = None) -> int:
    return command_line.main("hetsched", __doc__.splitlines()[0], COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
