"""Run the task executor: apply this node's decisions once each, report task status.

Run: ``hetsched-node executor [--config FILE] [--node-id ID] [--state-dir DIR]``.
Needs the node's GPU list: from NVML, or from ``--simulate MODEL[xCOUNT]``.
Keep ``--state-dir`` on persistent storage: its journal is what makes a
restarted executor skip decisions it already applied.
"""

from __future__ import annotations

import argparse

from agents.commands.common import add_node_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_node_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from agents.commands.common import serve_node

    return serve_node(args, agent=False, executor=True)
