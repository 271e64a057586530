"""Issue 31's targets: hetsched against the strongest schedulers, per workload and load.

Runs ``hetsched simulate --mode time`` (the real command, one process per workload
and load) with every policy of the comparison and writes two tables:

* ``bench/results/time_targets.md``: every policy's figures, per workload and load;
* on stdout, one row per workload and load with the targets: the candidate's mean
  JCT over the better of ``backfill`` and ``tiresias`` (target <= 0.8) and over
  ``srtf-oracle`` (<= 1.3); its p99 wait and share waiting over 1 h against
  ``backfill``'s (no worse); Jain's index against ``backfill``'s (no lower); its
  preemptions per job (<= 1).

Workloads: the two Helios training files (../shared/traces/training/, with their
node list), the mixed generator and the heavy-tailed training generator with gangs,
at loads 0.7, 1.0 and 1.3 (``--load`` scales arrival rates). The parameters of
every policy are fixed in code with their reasons; nothing here is tuned per trace.

    python bench/time_targets.py                      # all, ~15 min on 2 cores
    python bench/time_targets.py --loads 1.0 --workloads mixed
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINING = Path(os.environ.get("HETSCHED_TRACES", ROOT.parent / "shared" / "traces")) / "training"
POLICIES = ("fifo", "backfill", "tiresias", "srtf-oracle", "hetsched", "hetsched-fcfs")
CANDIDATE = "hetsched"
WORKLOADS = {
    "helios-2weeks": ["--jobs", str(TRAINING / "venus2vc-2weeks.csv"),
                      "--nodes", str(TRAINING / "nodes-venus2vc.csv")],
    "helios-sept": ["--jobs", str(TRAINING / "venus2vc-sept.csv"),
                    "--nodes", str(TRAINING / "nodes-venus2vc.csv")],
    "mixed": ["--workload", "mixed"],
    "training": ["--workload", "training"],
}
COLUMNS = (("jct_mean_s", "JCT mean (h)", 3600.0), ("jct_p99_s", "JCT p99 (h)", 3600.0),
           ("wait_mean_s", "wait mean (min)", 60.0), ("wait_p99_s", "wait p99 (min)", 60.0),
           ("wait_over_1h_pct", "waiting > 1 h %", 1.0), ("slowdown_p99", "slowdown p99", 1.0),
           ("jain", "Jain", 1.0), ("preemptions_per_job", "preemptions / job", 1.0),
           ("sim_seconds", "sim s", 1.0))


def run(workload: str, load: float, policies: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """One ``simulate --mode time`` process; its summary.json's per-policy figures."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-c", "import sys; from streams.cli import main; "
               "sys.exit(main(sys.argv[1:]))", "simulate", "--mode", "time",
               *WORKLOADS[workload], "--load", str(load), "--policies", ",".join(policies),
               "--out", out]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        data = json.loads((Path(out) / "summary.json").read_text())
    summary: dict[str, dict[str, float]] = data["summary"]
    return summary


def targets_row(workload: str, load: float, s: dict[str, dict[str, float]]) -> str:
    c, bf, tr, srtf = s[CANDIDATE], s["backfill"], s["tiresias"], s["srtf-oracle"]
    best = min(bf["jct_mean_s"], tr["jct_mean_s"])
    checks = [
        (c["jct_mean_s"] / best, 0.8, "<="),
        (c["jct_mean_s"] / srtf["jct_mean_s"], 1.3, "<="),
        (c["wait_p99_s"] / 60.0, bf["wait_p99_s"] / 60.0, "<="),
        (c["wait_over_1h_pct"], bf["wait_over_1h_pct"], "<="),
        (c["jain"], bf["jain"], ">="),
        (c["preemptions_per_job"], 1.0, "<="),
    ]
    cells = []
    for value, bound, op in checks:
        ok = value <= bound + 1e-9 if op == "<=" else value >= bound - 1e-9
        cells.append(f"{value:.2f} {'ok' if ok else '**miss**'} ({op} {bound:.2f})")
    fcfs = s["hetsched-fcfs"]["jct_mean_s"] / best
    return f"| {workload} | {load:g} | {' | '.join(cells)} | {fcfs:.2f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of: {', '.join(WORKLOADS)}")
    parser.add_argument("--loads", default="0.7,1.0,1.3", help="comma-separated arrival scales")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "time_targets.md")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r} (known: {', '.join(WORKLOADS)})")
    loads = [float(x) for x in args.loads.split(",") if x]
    head = ("| workload | load | JCT / best of backfill, tiresias | JCT / srtf-oracle | "
            "wait p99 (min) vs backfill | > 1 h % vs backfill | Jain vs backfill | "
            "preemptions / job | hetsched-fcfs JCT / best |")
    rows = [f"candidate: {CANDIDATE}", "", head, "|---" * 9 + "|"]
    detail = ["# Time targets: every policy", ""]
    for workload in workloads:
        for load in loads:
            t0 = time.perf_counter()
            s = run(workload, load, POLICIES)
            print(f"{workload} at load {load:g}: {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
            rows.append(targets_row(workload, load, s))
            detail += [f"## {workload}, load {load:g}", "",
                       "| policy | " + " | ".join(label for _, label, _ in COLUMNS) + " |",
                       "|---" * (len(COLUMNS) + 1) + "|"]
            detail += [f"| {p} | " + " | ".join(f"{s[p].get(k, float('nan')) / scale:.2f}"
                                               for k, _, scale in COLUMNS) + " |"
                       for p in POLICIES]
            detail.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(detail) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
