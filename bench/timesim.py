"""Time-mode benchmark (issue 7): hetsched vs static allocation on three workloads.

Run (from the project root; traces from ../shared/traces):
    .venv/bin/python bench/timesim.py            # mixed 24 h, openb busiest day, genai LoRA
Writes bench/results/timesim/<workload>/{summary.md,timeseries.csv,classes.csv,timeline.png}
and prints the wall time of each run (the openb day must simulate in under a minute).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = {
    "mixed": ["--workload", "mixed", "--hours", "24", "--seeds", "42"],
    "openb": ["--workload", "openb"],
    "lora": ["--workload", "lora", "--time-scale", "23"],
}


def main() -> int:
    only = sys.argv[1:] or list(RUNS)
    for name in only:
        out = ROOT / "bench" / "results" / "timesim" / name
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "streams.cli", "simulate", "--mode", "time", *RUNS[name],
               "--out", str(out)]
        rc = subprocess.call(cmd, cwd=ROOT)
        print(f"{name}: rc={rc} wall={time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
