"""The ``hetsched`` command (scheduler side).

Each sub-command lives in its own module, which exposes ``add_arguments(parser)``
and ``run(args) -> int``; this file only maps names to modules, so adding a
command is one line here. Command modules keep heavy imports (Faust, numpy,
matplotlib) inside ``run`` so that ``--help`` and unrelated commands stay fast.

Run ``hetsched --help`` for the list.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Modules are imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "worker": ("streams.commands.worker", "run a scheduler worker (Faust)"),
    "demo": ("streams.commands.demo", "run the local cluster demo (main job)"),
    "simulate": ("streams.commands.simulate", "run policies on a trace without Kafka (packing)"),
    "submit": ("streams.commands.submit", "submit tasks from a YAML/JSON file (validated)"),
    "status": ("streams.commands.status", "show queue, running tasks and GPU use per node"),
    "nodes": ("streams.commands.nodes", "list nodes with their GPU use"),
    "acl": ("streams.commands.acl", "print or apply the Kafka ACLs of the roles (security)"),
    "export": ("streams.commands.export", "export input logs and decisions to a file (audit)"),
    "replay": ("streams.commands.replay", "re-decide a recorded log and compare (audit)"),
    "explain": ("streams.commands.explain", "a task's timeline and decision reasons (audit)"),
    "check": ("streams.commands.check", "check the safety invariants on the log (reliability)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetsched", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # A one-shot command against a cluster that does not answer: one line naming
        # the address, exit 1, no traceback (long-running ones wait instead).
        from schemas.kafka import bootstrap_servers, is_unreachable, unreachable_message

        if not is_unreachable(exc):
            raise
        print(f"hetsched {args.command}: {unreachable_message(bootstrap_servers(), exc)}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
