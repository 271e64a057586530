"""Run agent and executor together in one process (the usual way to run a node).

Run: ``hetsched-node run [--config FILE] [--simulate A100x8 --time-scale 60]``.
Together, simulated tasks show up in the simulated GPUs' telemetry and
heartbeats list the running tasks.
"""

from __future__ import annotations

import argparse

from agents.commands.common import add_node_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_node_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from agents.commands.common import serve_node

    return serve_node(args, agent=True, executor=True)
