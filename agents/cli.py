"""The ``hetsched-node`` command (node side).

Each sub-command lives in its own module; this file only maps names to modules
(:mod:`schemas.command_line` says how). Run ``hetsched-node --help`` for the list.
"""

from __future__ import annotations

import argparse
import sys

from schemas import command_line
from schemas.command_line import Commands

# name -> (module, one-line help)
COMMANDS: Commands = {
    "health": ("agents.commands.health", "check that the node can reach Kafka"),
    "agent": ("agents.commands.agent", "run the telemetry agent (NVML or --simulate)"),
    "executor": ("agents.commands.executor", "run the task executor for this node"),
    "run": ("agents.commands.run", "run agent and executor together (the usual node)"),
    "sim-cluster": ("agents.commands.sim_cluster", "run many simulated nodes in one process"),
    "config": ("agents.commands.config", "print the effective node configuration"),
}


def build_parser() -> argparse.ArgumentParser:
    return command_line.build_parser("hetsched-node", __doc__.splitlines()[0], COMMANDS)


def main(argv: list[str] | None = None) -> int:
    return command_line.main("hetsched-node", __doc__.splitlines()[0], COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
