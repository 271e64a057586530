"""Where each class of the mixed workload runs, by GPU model, and what reserving models would buy.

    .venv/bin/python bench/timesim_pools.py --load 1.2 [--variant default|no-locality|t4-only]

Why: issue 7's "training waits < 5 min on average" and "+40 % throughput" pull
against each other on the mixed workload, because training may only use the
A100/V100 pool. This runs the hetsched policy of ``hetsched simulate --mode
time`` (seed 42, 24 h) with an observer that sums the GPU-hours each class
gets on each model, then prints the per-class queueing figures.

Variants: ``no-locality`` drops the rack-locality term; ``t4-only`` restricts
rendering jobs and workflow feature-extraction stages to the T4 nodes, an upper
bound for any placement term that keeps the scarce models for constrained work.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses

from streams.core.decisions import Placement
from streams.core.profile import Profile
from streams.sim.time import cli, mixed
from streams.sim.time.engine import Simulator

HOURS = 24.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--load", type=float, default=1.2)
    p.add_argument("--variant", choices=("default", "no-locality", "t4-only"), default="default")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    if args.variant == "no-locality":
        cli.TIME_PROFILE = Profile("hetsched", {"hetsched": 1.0})
    nodes = mixed.mixed_cluster()
    jobs = mixed.mixed_jobs(args.seed, HOURS * 3600.0, args.load, nodes)
    if args.variant == "t4-only":
        jobs = [dataclasses.replace(j, request=dataclasses.replace(j.request, gpu_models=("T4",)))
                if j.meta.task_class == "rendering" or j.job_id.endswith("-features") else j
                for j in jobs]
    sim = Simulator(cli.make_policy("hetsched", jobs, seed=args.seed), nodes, jobs,
                    HOURS * 3600.0)
    gpu_hours: collections.defaultdict[tuple[str, str], float] = collections.defaultdict(float)

    def observe(s: Simulator, _t: float, o: object) -> None:
        if isinstance(o, Placement):
            job, st = s.jobs[o.task], s.cell.state
            model = st.model_names[st.model[st.node_index[o.node]]]
            gpu_hours[(job.task_class, model)] += (
                job.request.gpu_total_milli / 1000 * job.duration_s / 3600)

    sim.observers.append(observe)
    rec = sim.run()
    print(f"load {args.load}, variant {args.variant}: GPU-hours placed by class and model")
    for (cls, model), hours in sorted(gpu_hours.items()):
        print(f"  {cls:10s} {model:8s} {hours:8.0f}")
    print("class       wait mean (min)  > 1 h %  completion std (min)")
    for cls, row in sorted(rec.per_class().items()):
        print(f"  {cls:10s} {row['wait_mean_s'] / 60:14.1f} {row['wait_over_1h_pct']:8.1f} "
              f"{row['jct_std_s'] / 60:20.1f}")
    s = rec.summary()
    print(f"throughput {s['throughput_per_h']:.1f} jobs/h, allocation from 6 h "
          f"{s['alloc_pct_steady']:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
