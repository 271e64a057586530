"""Run the telemetry agent: register this node, publish threshold-triggered GPU events.

Run: ``hetsched-node agent [--config FILE] [--node-id ID] [--simulate A100x8]``.
Without ``--simulate`` it reads the GPUs through NVML and exits with status 3
(saying why) when the NVIDIA driver / libnvidia-ml is not there.
"""

from __future__ import annotations

import argparse

from agents.commands.common import add_node_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_node_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from agents.commands.common import serve_node

    return serve_node(args, agent=True, executor=False)
