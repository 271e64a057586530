"""Start-up of the command lines: how long ``--help`` takes, against a bare interpreter.

    python bench/cli_start.py [--repeat 7]

Each case runs in a fresh interpreter of this virtual environment, ``--repeat`` times
one after the other (cases interleaved, so a busy moment of a shared machine hits them
alike); the median wall time is reported, with its ratio to the floor, ``python -c
pass`` (what any Python command costs before importing anything of ours). Issue 36
asked that the CLI import only what the sub-command needs: ``hetsched --help`` took
0.85-1.1 s when every command's module was imported to build the parser; and that
``hetsched status`` answer within 0.5 s. Its case runs the whole command, start to
printed tables, against a stand-in for a worker's web view: a local HTTP server, in
this process, answering ``/state`` with a 200-node cell (``STATE_NODES``), so the
figure is the command's own cost and not a worker's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "python -c pass (floor)": ["-c", "pass"],
    "hetsched --help": ["-m", "streams.cli", "--help"],
    "hetsched simulate --help": ["-m", "streams.cli", "simulate", "--help"],
    "hetsched explain --help": ["-m", "streams.cli", "explain", "--help"],
    "hetsched replay --help": ["-m", "streams.cli", "replay", "--help"],
    "hetsched-node --help": ["-m", "agents.cli", "--help"],
}


STATE_NODES = 200


def worker_state(nodes: int = STATE_NODES) -> bytes:
    """A worker's ``/state`` (``streams/web.py``) for one cell of ``nodes`` 8-GPU nodes,
    half of them running a task."""
    cell = {
        "queue": [f"queued-{i}" for i in range(20)],
        "running": [{"task": f"task-{i}", "node": f"node-{i}", "gpus": [0, 1],
                     "share_milli": 1000} for i in range(0, nodes, 2)],
        "nodes": [{"node": f"node-{i}", "model": "A100", "healthy": True,
                   "gpus_used_milli": [1000, 1000, 0, 0, 0, 0, 0, 0] if i % 2 == 0 else [0] * 8,
                   "tasks": 1 - i % 2} for i in range(nodes)],
    }
    cluster = {"nodes": nodes, "queued": 20,
               "models": {"A100": {"gpus": 8 * nodes, "free": 7 * nodes}}}
    return orjson.dumps({"cells": {"cell-0": cell}, "cluster": {"cell-0": cluster}})


def serve_state() -> ThreadingHTTPServer:
    """A local server answering ``GET /state`` with :func:`worker_state`, in a thread."""
    body = worker_state()

    class State(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/state" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), State)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def timed(argv: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    server = serve_state()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    cases = {**CASES, f"hetsched status ({STATE_NODES} nodes)":
             ["-m", "streams.cli", "status", "--url", url]}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, case in cases.items():
            times[name].append(timed(case))
    server.shutdown()
    floor = statistics.median(times["python -c pass (floor)"])
    print("| command | median (s) | x floor |")
    print("|---|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median:.3f} | {median / floor:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
