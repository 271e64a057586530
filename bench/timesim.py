"""Time-mode benchmark (issue 7): hetsched vs static allocation, at several loads.

Run (from the project root; traces from ../shared/traces):
    .venv/bin/python bench/timesim.py                 # everything below
    .venv/bin/python bench/timesim.py mixed lora      # some runs only
    .venv/bin/python bench/timesim.py --table         # only rebuild loads.md from results

Runs ``hetsched simulate --mode time`` (one core each, one after the other) and
writes bench/results/timesim/<run>/{summary.md,summary.json,timeseries.csv,
classes.csv,timeline.png}. The mixed workload runs at seven load factors,
because throughput can only differ when the cluster is the bottleneck: the
offered load of each run (its jobs' requested GPU-hours per hour, and the same
rounded up to whole GPUs as static allocation does, as a share of the 256
GPUs) is in its summary.json and in bench/results/timesim/loads.md, which
this script builds from the mixed runs' summary.json files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "timesim"
LOADS = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.6)
RUNS = {
    **{("mixed" if load == 1.0 else f"mixed-load{load}"):
       ["--workload", "mixed", "--hours", "24", "--seeds", "42", "--load", str(load)]
       for load in LOADS},
    # Is one day long enough for static allocation's backlog to matter? The same load, 3 days.
    "mixed-72h": ["--workload", "mixed", "--hours", "72", "--seeds", "42", "--load", "1.0"],
    # Objectives by time of day (bench/results/timesim/objectives.json) on the busy load.
    "mixed-load1.3-objectives": ["--workload", "mixed", "--hours", "24", "--seeds", "42",
                                 "--load", "1.3", "--objectives",
                                 "bench/results/timesim/objectives.json"],
    "openb": ["--workload", "openb"],
    "lora": ["--workload", "lora", "--time-scale", "23"],
}
ROWS = (  # (summary key, label, scale, format)
    ("req_pct_steady", "requested % of GPUs (from 6 h)", 1.0, "{:.1f}"),
    ("alloc_pct_steady", "allocated % (from 6 h)", 1.0, "{:.1f}"),
    ("alloc_pct", "allocated % (24 h)", 1.0, "{:.1f}"),
    ("used_pct", "used % (24 h)", 1.0, "{:.1f}"),
    ("wait_mean_s", "queue delay mean (min)", 1 / 60, "{:.1f}"),
    ("throughput_per_h", "throughput (jobs/h)", 1.0, "{:.0f}"),
    ("work_gpu_h_per_h", "work throughput (GPU-h/h)", 1.0, "{:.1f}"),
    ("jain", "Jain", 1.0, "{:.2f}"),
)


def loads_table() -> str:
    """Markdown: one column pair per load of the mixed runs found under ``OUT``."""
    found = []
    for load in LOADS:
        path = OUT / ("mixed" if load == 1.0 else f"mixed-load{load}") / "summary.json"
        if path.exists():
            found.append((load, json.loads(path.read_text())))
    if not found:
        return ""
    head = "| metric | " + " | ".join(f"{ld} static | {ld} hetsched" for ld, _ in found) + " |"
    lines = [head, "|---|" + "---|---|" * len(found)]
    off = [d["offered"] for _, d in found]
    lines.append("| offered, requested % of GPUs | " + " | ".join(
        f"{o['requested_pct']:.0f} | {o['requested_pct']:.0f}" for o in off) + " |")
    lines.append("| offered, whole GPUs % (static's view) | " + " | ".join(
        f"{o['whole_gpus_pct']:.0f} | {o['requested_pct']:.0f}" for o in off) + " |")
    lines.append("| arrivals (jobs/h) | " + " | ".join(
        f"{o['arrivals_per_h']:.0f} | {o['arrivals_per_h']:.0f}" for o in off) + " |")
    for key, label, scale, fmt in ROWS:
        cells = []
        for _, d in found:
            for pol in ("static", "hetsched"):
                cells.append(fmt.format(d["summary"][pol][key] * scale))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for _, d in found:
        s, h = d["summary"]["static"], d["summary"]["hetsched"]
        cells += ["", f"{100 * (h['throughput_per_h'] / s['throughput_per_h'] - 1):+.0f}%"]
    lines.append("| throughput vs static | " + " | ".join(cells) + " |")
    cells = []
    for _, d in found:
        s, h = d["classes"]["static"]["training"], d["classes"]["hetsched"]["training"]
        cells += [f"{s['wait_over_1h_pct']:.0f}", f"{h['wait_over_1h_pct']:.0f}"]
    lines.append("| training waiting > 1 h % | " + " | ".join(cells) + " |")
    cells = []
    for _, d in found:
        s, h = d["classes"]["static"]["training"], d["classes"]["hetsched"]["training"]
        cells += [f"{s['wait_mean_s'] / 60:.1f}", f"{h['wait_mean_s'] / 60:.1f}"]
    lines.append("| training queue delay mean (min) | " + " | ".join(cells) + " |")
    cells = []
    for _, d in found:
        s, h = d["classes"]["static"]["rendering"], d["classes"]["hetsched"]["rendering"]
        cells += [f"{s['jct_std_s'] / 60:.0f}", f"{h['jct_std_s'] / 60:.0f}"]
    lines.append("| rendering completion std (min) | " + " | ".join(cells) + " |")
    cells = []
    for _, d in found:
        cells += [f"{d['simulate_s'].get('static', 0):.0f}",
                  f"{d['simulate_s'].get('hetsched', 0):.0f}"]
    lines.append("| simulated in (s wall, loaded 2-core machine) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help=f"runs to do (default: all): {', '.join(RUNS)}")
    parser.add_argument("--table", action="store_true",
                        help="only rebuild loads.md from the results")
    args = parser.parse_args(argv)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown:
        parser.error(f"unknown run {', '.join(unknown)} (known: {', '.join(RUNS)})")
    only = [] if args.table else (args.runs or list(RUNS))
    for name in only:
        out = OUT / name
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "streams.cli", "simulate", "--mode", "time", *RUNS[name],
               "--out", str(out)]
        rc = subprocess.call(cmd, cwd=ROOT)
        print(f"{name}: rc={rc} wall={time.perf_counter() - t0:.1f} s", file=sys.stderr)
    table = loads_table()
    if table:
        (OUT / "loads.md").write_text(
            "# Mixed workload at seven load factors (seed 42, 24 h, 256 GPUs)\n\n"
            "Command: `.venv/bin/python bench/timesim.py`\n\n" + table)
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
