"""Run the local demo: the main job of the README.

Today this is the smoke run of the foundation: it creates the catalog's
topics on the broker, starts a scheduler worker as a real process, waits
until the worker reports healthy over its web server, prints that, and
stops everything cleanly (also on Ctrl-C). The full demo (simulated cluster
from the openb node list, trace replayer, live view) grows from here.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--web-port", type=int, default=6066, help="worker web port (6066)")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for health (120)"
    )


def run(args: argparse.Namespace) -> int:
    import asyncio
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    from schemas.admin import ensure_topics
    from schemas.kafka import bootstrap_servers

    bootstrap = bootstrap_servers()
    created = asyncio.run(ensure_topics(bootstrap))
    print(f"hetsched: Kafka at {bootstrap}; topics ready ({len(created)} created)")

    env = dict(os.environ, HETSCHED_WEB_PORT=str(args.web_port), KAFKA_BOOTSTRAP=bootstrap)
    worker = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", "worker", "--loglevel", "warn"],
        env=env, start_new_session=True,
    )
    url = f"http://127.0.0.1:{args.web_port}/health"
    began = time.monotonic()
    try:
        while True:
            if worker.poll() is not None:
                print(f"hetsched: worker exited with code {worker.returncode}", file=sys.stderr)
                return 1
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - began > args.timeout:
                print(f"hetsched: worker not healthy after {args.timeout:.0f}s", file=sys.stderr)
                return 1
            time.sleep(0.5)
        print(f"hetsched: worker healthy at {url} after {time.monotonic() - began:.1f}s")
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        print("hetsched: stopped")
