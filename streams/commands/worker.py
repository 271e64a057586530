"""Start a scheduler worker (a Faust worker of ``streams.app``).

Several workers with the same ``HETSCHED_APP_ID`` share the cells through
Kafka consumer-group rebalancing. Settings come from the environment; see
``streams/settings.py``.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loglevel", "-l", default="info", choices=["crit", "error", "warn", "info", "debug"],
        help="log level (default info)",
    )
    parser.add_argument("--web-port", type=int, help="web server port (default HETSCHED_WEB_PORT)")


def run(args: argparse.Namespace) -> int:
    import os
    import sys

    if args.web_port:
        os.environ["HETSCHED_WEB_PORT"] = str(args.web_port)
    from streams.app import app, settings

    # Faust's CLI reads sys.argv; it exits the process when the worker stops.
    sys.argv = ["hetsched", "worker", "--loglevel", args.loglevel,
                "--web-port", str(settings.web_port), "--web-host", settings.web_host]
    app.main()
    return 0
