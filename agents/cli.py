"""The ``hetsched-node`` command (node side).

Each sub-command lives in its own module, which exposes ``add_arguments(parser)``
and ``run(args) -> int``; this file only maps names to modules, so adding a
command is one line here. Command modules keep heavy imports (Faust, numpy,
matplotlib) inside ``run`` so that ``--help`` and unrelated commands stay fast.

Run ``hetsched-node --help`` for the list.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Modules are imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "health": ("agents.commands.health", "check that the node can reach Kafka"),
    "agent": ("agents.commands.agent", "run the telemetry agent (NVML or --simulate)"),
    "executor": ("agents.commands.executor", "run the task executor for this node"),
    "run": ("agents.commands.run", "run agent and executor together (the usual node)"),
    "sim-cluster": ("agents.commands.sim_cluster", "run many simulated nodes in one process"),
    "config": ("agents.commands.config", "print the effective node configuration"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetsched-node", description=__doc__.splitlines()[0])
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


if __name__ == "__main__":
    sys.exit(main())
