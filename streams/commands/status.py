"""Show the queue, running tasks and per-node GPU use, from the workers' web views.

``--url`` may be given once per worker (default: the local worker on
``HETSCHED_WEB_PORT``); the cells of all of them are merged. Each worker also
reports every cell's summary, so one URL is enough for the cluster totals.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_url_argument(parser)


def add_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", action="append", default=[],
                        help="worker web URL (repeatable; default http://127.0.0.1:$HETSCHED_WEB_PORT)")


def fetch_states(urls: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(cells, cluster summaries) merged from every worker's ``/state``."""
    import os
    import urllib.request

    import orjson

    if not urls:
        urls = [f"http://127.0.0.1:{os.environ.get('HETSCHED_WEB_PORT', '6066')}"]
    cells: dict[str, Any] = {}
    cluster: dict[str, Any] = {}
    for url in urls:
        where = url.rstrip("/") + "/state"
        try:
            with urllib.request.urlopen(where, timeout=5) as r:
                state = orjson.loads(r.read())
        except OSError as exc:  # name the address: "connection refused" alone says nothing
            raise OSError(f"{where}: {getattr(exc, 'reason', None) or exc}") from None
        cells.update(state["cells"])
        cluster.update(state["cluster"])
    return dict(sorted(cells.items())), dict(sorted(cluster.items()))


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain fixed-width table."""
    cols = [headers, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in cols)


def gpu_bar(used_milli: list[int]) -> str:
    """Per-GPU use: ``#`` whole, ``+`` partly, ``.`` idle."""
    return "".join("#" if u >= 1000 else "+" if u > 0 else "." for u in used_milli)


def run(args: argparse.Namespace) -> int:
    try:
        cells, cluster = fetch_states(args.url)
    except OSError as exc:
        print(f"hetsched status: cannot reach a worker: {exc}", file=sys.stderr)
        return 1
    queue = [[c, t] for c, cell in cells.items() for t in cell["queue"]]
    running = [[c, t["task"], t["node"], ",".join(map(str, t["gpus"])) or "-", t["share_milli"]]
               for c, cell in cells.items() for t in cell["running"]]
    nodes = [[c, n["node"], n["model"] or "-", gpu_bar(n["gpus_used_milli"]), n["tasks"],
              "yes" if n["healthy"] else "no"] for c, cell in cells.items() for n in cell["nodes"]]
    print(f"queue ({len(queue)})")
    print(table(["CELL", "TASK"], queue) if queue else "  (empty)")
    print(f"\nrunning ({len(running)})")
    print(table(["CELL", "TASK", "NODE", "GPUS", "SHARE_MILLI"], running) if running
          else "  (none)")
    print("\nnodes (GPU use: # whole, + partly, . idle)")
    print(table(["CELL", "NODE", "MODEL", "GPUS", "TASKS", "HEALTHY"], nodes))
    totals = [[c, s["nodes"], sum(m["gpus"] for m in s["models"].values()),
               sum(m["free"] for m in s["models"].values()), s["queued"]]
              for c, s in cluster.items()]
    print("\ncells (from the published summaries)")
    print(table(["CELL", "NODES", "GPUS", "FREE_GPUS", "QUEUED"], totals))
    return 0
