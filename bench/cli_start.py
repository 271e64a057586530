"""Start-up of the command lines: how long ``--help`` takes, against a bare interpreter.

    python bench/cli_start.py [--repeat 7]

Each case runs in a fresh interpreter of this virtual environment, ``--repeat`` times
one after the other (cases interleaved, so a busy moment of a shared machine hits them
alike); the median wall time is reported, with its ratio to the floor, ``python -c
pass`` (what any Python command costs before importing anything of ours). Issue 36
asked that the CLI import only what the sub-command needs: ``hetsched --help`` took
0.85-1.1 s when every command's module was imported to build the parser.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "python -c pass (floor)": ["-c", "pass"],
    "hetsched --help": ["-m", "streams.cli", "--help"],
    "hetsched simulate --help": ["-m", "streams.cli", "simulate", "--help"],
    "hetsched explain --help": ["-m", "streams.cli", "explain", "--help"],
    "hetsched replay --help": ["-m", "streams.cli", "replay", "--help"],
    "hetsched-node --help": ["-m", "agents.cli", "--help"],
}


def timed(argv: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, case in CASES.items():
            times[name].append(timed(case))
    floor = statistics.median(times["python -c pass (floor)"])
    print("| command | median (s) | x floor |")
    print("|---|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median:.3f} | {median / floor:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
