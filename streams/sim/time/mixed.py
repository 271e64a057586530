"""A seeded mixed cluster workload, as practitioners describe theirs, and a cluster for it.

Four kinds of work share one heterogeneous cluster (``mixed_cluster``: A100,
V100 and T4 nodes in racks):

* ``training``: long multi-GPU jobs (2, 4 or 8 whole GPUs, hours), compute
  intensive, on A100/V100; declared runtimes overestimate by 30%.
* ``inference``: short fractional jobs (0.1-0.5 GPU, minutes), many, latency
  sensitive (priority 600: may preempt best-effort work).
* ``rendering``: bursts of tens of one-GPU jobs (15-45 min), data intensive,
  best effort.
* ``workflow``: two stages, feature extraction (1 GPU, data input on a node)
  then training (4 GPUs) that depends on it.

Each kind has its tenant. ``load`` scales every arrival rate. The same seed
gives the same jobs (numpy ``default_rng``), so runs are reproducible.
"""

from __future__ import annotations

import numpy as np

from streams.sim.time.jobs import Job, make_job
from streams.sim.traces import NodeSpec

HOUR_S = 3600.0
RACK_NODES = 8
CLUSTER = (("A100", 12), ("V100M32", 12), ("T4", 8))  # model, nodes of 8 GPUs
TRAINING_MODELS = ("A100", "V100M32")


def mixed_cluster(scale: int = 1) -> list[NodeSpec]:
    """Nodes named ``rackRR-nodeNNN`` (8 per rack), 8 GPUs each, 256 GPUs at scale 1."""
    nodes = []
    i = 0
    for model, count in CLUSTER:
        for _ in range(count * scale):
            nodes.append(NodeSpec(f"rack{i // RACK_NODES:02d}-node{i:03d}", 96_000, 786_432,
                                  8, model))
            i += 1
    return nodes


def _poisson_times(rng: np.random.Generator, rate_per_h: float, horizon_s: float) -> np.ndarray:
    n = rng.poisson(rate_per_h * horizon_s / HOUR_S)
    return np.sort(rng.uniform(0.0, horizon_s, n))


def mixed_jobs(seed: int = 42, horizon_s: float = 24 * HOUR_S, load: float = 1.0,
               nodes: list[NodeSpec] | None = None) -> list[Job]:
    """The mixed workload over ``horizon_s`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    names = [n.name for n in (nodes or mixed_cluster())]
    jobs: list[Job] = []
    for k, t in enumerate(_poisson_times(rng, 9.0 * load, horizon_s)):
        gpus = int(rng.choice([2, 4, 8], p=[0.4, 0.4, 0.2]))
        dur = float(np.clip(rng.lognormal(np.log(3 * HOUR_S), 0.6), 0.5 * HOUR_S, 12 * HOUR_S))
        jobs.append(make_job(f"train-{k:04d}", t, dur, gpus, 1000, gpu_models=TRAINING_MODELS,
                             tenant="training", priority=100, task_class="training",
                             cpu_milli=8000 * gpus, memory_mib=65_536 * gpus // 2,
                             expected_s=dur * 1.3, util=0.9))
    for k, t in enumerate(_poisson_times(rng, 600.0 * load, horizon_s)):
        milli = int(rng.choice([100, 200, 250, 300, 500]))
        dur = float(rng.uniform(120.0, 1200.0))
        jobs.append(make_job(f"infer-{k:05d}", t, dur, 1, milli, tenant="serving",
                             priority=600, task_class="inference", cpu_milli=2000,
                             memory_mib=8192, expected_s=dur, util=0.6))
    bursts = _poisson_times(rng, 0.5 * load, horizon_s)
    k = 0
    for b in bursts:
        for _ in range(int(rng.integers(20, 61))):
            dur = float(rng.uniform(900.0, 2700.0))
            t = float(b + rng.uniform(0.0, 300.0))
            jobs.append(make_job(f"render-{k:04d}", t, dur, 1, 1000, tenant="rendering",
                                 priority=50, qos="best_effort", task_class="rendering",
                                 cpu_milli=4000, memory_mib=32_768, expected_s=dur * 1.2,
                                 util=0.7, input_node=names[int(rng.integers(len(names)))]))
            k += 1
    for k, t in enumerate(_poisson_times(rng, 2.0 * load, horizon_s)):
        d1 = float(rng.uniform(1200.0, 3600.0))
        d2 = float(np.clip(rng.lognormal(np.log(2 * HOUR_S), 0.5), 0.5 * HOUR_S, 8 * HOUR_S))
        home = names[int(rng.integers(len(names)))]
        fe, tr = f"wf-{k:03d}-features", f"wf-{k:03d}-train"
        jobs.append(make_job(fe, t, d1, 1, 1000, tenant="pipelines", priority=100,
                             task_class="workflow", cpu_milli=8000, memory_mib=65_536,
                             expected_s=d1 * 1.3, util=0.5, input_node=home))
        jobs.append(make_job(tr, t, d2, 4, 1000, gpu_models=TRAINING_MODELS,
                             tenant="pipelines", priority=100, task_class="workflow",
                             cpu_milli=32_000, memory_mib=131_072, expected_s=d2 * 1.3,
                             depends_on=(fe,), util=0.9))
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
