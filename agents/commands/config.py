"""Print the effective node configuration (defaults, file, flags merged) as YAML.

Run: ``hetsched-node config [--config FILE] [--set KEY=VALUE ...]``. The output is
itself a valid config file: a good starting point for /etc/hetsched/node.yaml.
"""

from __future__ import annotations

import argparse

from agents.commands.common import add_node_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_node_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from agents.commands.common import node_config
    from agents.config import dump

    print(dump(node_config(args)), end="")
    return 0
