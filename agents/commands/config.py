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
    from pydantic import ValidationError

    from agents.commands.common import config_from_args, fail
    from agents.config import dump

    try:
        config = config_from_args(args)
    except (ValidationError, ValueError, OSError) as exc:
        return fail(f"bad configuration: {exc}")
    print(dump(config), end="")
    return 0
