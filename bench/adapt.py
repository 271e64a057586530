"""Issue 8 benchmark: the mixed workload's simulated day with and without node failures.

Run: ``python bench/adapt.py [--seed 42] [--scale 1] [--fraction 0.05] [--write]``
(``--write`` replaces the ``adapt`` section of BENCHMARKS.md).

Both runs use the same seeded jobs, cluster and scheduler (the service's
``hetsched`` profile, default queue); the failure run fails ``fraction`` of
the nodes at seeded times during the day and repairs each an hour later. The
targets: no task lost, completion time up by less than 10%.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streams.core.queue import QueueConfig
from streams.core.service_profile import service_scheduler
from streams.sim.time.adapt import FaultLog, attach_failures
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.mixed import mixed_cluster, mixed_jobs

ROOT = Path(__file__).resolve().parents[1]


def _run(seed: int, scale: int, fraction: float) -> tuple[dict[str, float], FaultLog, float]:
    policy = SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig())
    nodes = mixed_cluster(scale)
    jobs = mixed_jobs(seed=seed)
    sim = Simulator(policy, nodes, jobs)
    log = attach_failures(sim, fraction, seed) if fraction > 0 else FaultLog()
    t0 = time.perf_counter()
    rec = sim.run()
    summary = rec.summary()
    done = [s for s in rec.jobs.values() if s.status == "finished"]
    summary["completion_mean_s"] = sum(s.end_s - s.job.arrival_s for s in done) / max(len(done), 1)
    summary["lost"] = float(sum(1 for s in rec.jobs.values()
                                if s.status not in ("finished", "unschedulable")))
    return summary, log, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    base, _, t_base = _run(args.seed, args.scale, 0.0)
    fail, log, t_fail = _run(args.seed, args.scale, args.fraction)
    growth = 100.0 * (fail["completion_mean_s"] / base["completion_mean_s"] - 1.0)
    rows = [("jobs", base["jobs"], fail["jobs"]),
            ("finished", base["finished"], fail["finished"]),
            ("lost (neither finished nor unschedulable)", base["lost"], fail["lost"]),
            ("completion time, mean (s)", base["completion_mean_s"], fail["completion_mean_s"]),
            ("queueing delay, mean (s)", base["wait_mean_s"], fail["wait_mean_s"]),
            ("used GPU utilisation (%)", base["used_pct"], fail["used_pct"]),
            ("energy (kWh, simulated day)", base["energy_kwh"], fail["energy_kwh"])]
    lines = [
        f"`python bench/adapt.py --seed {args.seed} --scale {args.scale} "
        f"--fraction {args.fraction}` on {platform.machine()} / Python "
        f"{platform.python_version()}, {datetime.now(UTC):%Y-%m-%d}; "
        f"{t_base:.1f} s + {t_fail:.1f} s wall.", "",
        "Mixed workload, one simulated day, `hetsched` profile. Failure run: "
        f"{log.failures} of {len(mixed_cluster(args.scale))} nodes fail at seeded times "
        "(repaired 1 h later); no checkpoints, so an evicted run restarts from zero.", "",
        "| metric | no failures | with failures |", "|---|---:|---:|",
        *[f"| {k} | {a:,.1f} | {b:,.1f} |" for k, a, b in rows],
        "", f"Evictions {log.evictions}, work lost {log.work_lost_gpu_h:.1f} GPU-h; "
        f"completion time {growth:+.1f}% (target < +10%); lost tasks {fail['lost']:.0f} "
        "(target 0).",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        path = ROOT / "BENCHMARKS.md"
        body = path.read_text()
        block = f"<!-- adapt:start -->\n## Adaptation (issue 8)\n\n{text}\n<!-- adapt:end -->"
        if "<!-- adapt:start -->" in body:
            body = re.sub(r"<!-- adapt:start -->.*?<!-- adapt:end -->", lambda _: block, body,
                          flags=re.S)
        else:
            body = body.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(body)
    return 0




if __name__ == "__main__":
    sys.exit(main())
