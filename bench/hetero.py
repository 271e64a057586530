"""Issue 35 part 4: Gavel's round-based baselines against Gavel's own simulator.

Runs ``python -m streams.sim.time.rounds`` (the real command, one process per run,
one after the other) for ``gavel-las``, ``gavel-fifo`` and ``las`` on Gavel's
continuous-single workload at 2.8, 4.8 and 5.6 jobs/h (36 V100 + 36 P100 + 36 K80,
``<traces>/hetero/``), and prints one markdown row per run: our mean JCT of the
window jobs, Gavel's figure for it, the ratio, and the simulation's own wall and CPU
time (``wall_s``, ``cpu_s`` of the run's summary.json). The targets: ratio within 5 %,
<= 30 s on one core, judged on the CPU time, since on a shared machine the wall
time also counts the waits for a core (the simulation is single-threaded).

Gavel's figures are constants, copied from the table "Reference results (Gavel's
own simulator at the commit above)" of ``<traces>/hetero/README.md`` (Gavel at
``c4fa400``): the run on this machine type where there is one, else the authors'
figure from their committed evaluation notebook (``source`` says which).

    python bench/hetero.py                                   # 9 runs, ~1.5 min on 2 cores
    python bench/hetero.py --policies las --rates 5.6 --out bench/results/hetero.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.sim.traces import traces_dir  # noqa: E402

POLICIES = ("gavel-las", "gavel-fifo", "las")
RATES = ("2.8", "4.8", "5.6")
#: (policy, jobs/h) -> (Gavel run here, authors), hours; None where the README has none
#: (``-``) or the run did not finish (las at 5.6: ">= 91.8 (unfinished)").
#: Source: <traces>/hetero/README.md, "Reference results"; our names map to Gavel's
#: max_min_fairness_perf (gavel-las), fifo_perf (gavel-fifo), max_min_fairness (las).
GAVEL_H: dict[tuple[str, str], tuple[float | None, float]] = {
    ("las", "2.8"): (23.82, 23.59),
    ("las", "4.8"): (38.02, 35.79),
    ("las", "5.6"): (None, 95.99),
    ("gavel-las", "2.8"): (16.31, 16.04),
    ("gavel-las", "4.8"): (19.22, 18.97),
    ("gavel-las", "5.6"): (29.42, 28.96),
    ("gavel-fifo", "2.8"): (15.96, 15.68),
    ("gavel-fifo", "4.8"): (None, 22.24),
    ("gavel-fifo", "5.6"): (None, 104.12),
}
TOLERANCE = 0.05
TARGET_S = 30.0


def run(policy: str, rate: str, hetero: Path) -> dict[str, float]:
    """One simulator process; its summary.json."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "streams.sim.time.rounds",
               "--jobs", str(hetero / f"gavel-continuous-single-rate{rate}.csv"),
               "--nodes", str(hetero / "nodes-gavel-36-36-36.csv"),
               "--policy", policy, "--out", out]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        summary: dict[str, float] = json.loads((Path(out) / "summary.json").read_text())
    return summary


def row(policy: str, rate: str, s: dict[str, float]) -> str:
    """One markdown row: ours, Gavel's figure and source, ratio, verdicts."""
    ours = s["window_jct_mean_s"]
    here, authors = GAVEL_H[(policy, rate)]
    ref, source = (here, "Gavel run here") if here is not None else (authors, "authors")
    ours_h = None if ours is None else ours / 3600.0
    ratio = None if ours_h is None else ours_h / ref
    ok = ratio is not None and abs(ratio - 1.0) <= TOLERANCE
    wall, cpu = s["wall_s"], s["cpu_s"]
    return (f"| `{policy}` | {rate} | {'unfinished' if ours_h is None else f'{ours_h:.2f}'} | "
            f"{ref:.2f} | {source} | {'-' if ratio is None else f'{ratio:.3f}'} | "
            f"{'yes' if ok else '**no**'} | {wall:.1f} / {cpu:.1f} | "
            f"{'yes' if cpu <= TARGET_S else '**no**'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated, of: {', '.join(POLICIES)}")
    parser.add_argument("--rates", default=",".join(RATES),
                        help=f"comma-separated jobs/h, of: {', '.join(RATES)}")
    parser.add_argument("--traces", type=Path, default=None,
                        help="the traces directory (default: $HETSCHED_TRACES or ../shared/traces)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    rates = [r for r in args.rates.split(",") if r]
    for p in policies:
        if p not in POLICIES:
            parser.error(f"unknown policy {p!r} (known: {', '.join(POLICIES)})")
    for r in rates:
        if r not in RATES:
            parser.error(f"unknown rate {r!r} (known: {', '.join(RATES)})")
    hetero = (args.traces or traces_dir()) / "hetero"
    lines = ["| policy | jobs/h | ours (h) | Gavel (h) | Gavel's figure | ratio | within 5 % "
             "| sim s, wall / CPU | <= 30 s (CPU) |", "|---" * 9 + "|"]
    for rate in rates:  # one run at a time: the wall times are one core's
        for policy in policies:
            s = run(policy, rate, hetero)
            lines.append(row(policy, rate, s))
            print(lines[-1], file=sys.stderr)
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
