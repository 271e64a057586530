"""A seeded, heavy-tailed deep-learning training workload with gangs, and a cluster for it.

``hetsched simulate --mode time --workload training``. Every number below is a
published fact or a rounded reading of one, fixed here with its reason; none is
fitted to make a scheduler look good, and none is tuned per run.

Sources: Q. Hu, P. Sun, S. Yan, Y. Wen, T. Zhang, *Characterization and
Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters*, SC '21
(Helios, SenseTime) and M. Jeon, S. Venkataraman, A. Phanishayee, J. Qian,
W. Xiao, F. Yang, *Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
Training Workloads*, USENIX ATC '19 (Philly, Microsoft). Both find the same
shape: most GPU jobs are short (debugging, trial and early-failing runs), a
small share of long, large jobs holds most of the GPU-time, a few users submit
most jobs, and users rerun the same jobs, so that a job's history predicts it
(Helios' QSSF service predicts a job's duration from the same user's runs of
the same job name). The concrete figures come from the Helios extract in
``../shared/traces/training/README.md`` (cluster Venus, September 2020, its
"Statistics" table and GPU-count list), which is what the paper's trace says
about whole-GPU training on 8-GPU V100 nodes.

* **GPUs per job**: the README's three classes in their 26-day shares,
  ``g1`` 75 / ``g2-8`` 917 / ``g>8`` 875 of 1,867 jobs (4.0 / 49.1 / 46.9 %).
  Within a class the sizes are powers of two, 1 to 128 (the largest power of
  two under the README's largest job, 144): each count of the README's list
  goes to the nearest power of two in log scale (3 and 5 -> 4, 6 -> 8,
  24 -> 32, 48..88 -> 64, 96..144 -> 128), which keeps every job in its class
  (``SIZE_COUNTS``, ``size_table``). Jobs over 8 GPUs are gangs over whole
  8-GPU nodes (16 to 128 GPUs: 2 to 16 nodes). Size and duration are drawn
  independently (an assumption: neither paper gives their joint law).
* **Duration**: log-normal, median ``MEDIAN_S`` = 120 s (the extract's median
  is 93 s over 26 days, 77 s over its busiest two weeks: most jobs are
  short), with ``SIGMA`` chosen so that ``DAY_SHARE`` = 2 % of jobs run longer
  than a day (extract: 2.1 % and 2.3 %), i.e. sigma = ln(86,400 / 120) /
  z(0.98) = 3.20. Then 41 % of jobs are shorter than a minute (extract: 39 %
  and 46 %) and jobs longer than a day hold 69 % of the GPU-time (extract:
  75 % and 78 %). Cut at ``CAP_S`` = 7 days, a run-time limit just above the
  extract's longest job (6.6 days): 0.4 % of jobs hit it. Analytic median
  120 s, p90 7,300 s, p99 2.4 days; mean 8,320 s (extract: 5,651 s).
* **Tenants**: ``TENANTS`` = 12 (the extract's 12 users), job counts Zipf-like
  with exponent ``ZIPF_S`` = 1.5: the first tenant submits 49 % of the jobs,
  the first three 76 % (extract: 58 % and 91 %; Helios: a few users submit
  most jobs). Tenant names ``u00`` .. ``u11`` by rank.
* **Job names**: each tenant works on one model (``MODELS``, one each, drawn
  per seed) and names a run ``<model>-<gpus>g-<stage>``: its size and its
  stage, ``debug``, ``tune`` or ``train``, the tercile of its duration's
  log-normal score read with noise (``STAGE_NOISE`` = 0.5 standard deviations),
  so that runs of one name are alike but not equal, as reruns are. A tenant
  thus has a small set of names (a few sizes x 3 stages) that recur, which is
  what the run-time predictor keys on (tenant + name). No ``expected_s``:
  training users rarely declare a run time.
* **Arrivals**: Poisson, at the rate that offers ``load`` x the cluster's GPUs
  in expectation. ``load`` L makes the same sequence of jobs arrive L times as
  fast (the arrival times at load 1 divided by L, as ``--load`` does to a
  recorded workload), cut at the horizon: loads compare the same jobs, more of
  them at a higher load, never a fresh draw. The rate is
  load x GPUs / (E[GPUs per job] x E[duration]) with the analytic means
  (47.7 GPUs x 8,320 s): at load 1 on the default cluster, 4.35 jobs an hour,
  about 1,460 jobs in the default two weeks. Heavy tails make a window's
  realized load vary around that figure (at load 1 over two weeks, 87 % to
  106 % of the GPUs for seeds 0 to 4, 95 % for the default seed 42; 79 % and
  110 % at loads 0.7 and 1.3): ``summary.json`` reports it (``offered``).
* **Cluster** (``training_cluster``): ``NODES`` = 60 nodes x 8 V100 32 GB
  (``V100M32``), the node shape of ``nodes-venus2vc.csv`` (48 CPUs,
  385,426 MiB), racks of 8 nodes. Not the extract's own 22 nodes: there one
  128-GPU gang holds 73 % of the GPUs, so the queue is a string of gang waits
  whatever the policy; on 480 GPUs three such gangs fit at once and smaller
  jobs still flow around them (the issue's held-out Helios week runs on the
  same 60 x 8). Each job asks 6 CPUs and 46 GiB per GPU on each node (a node's
  share per GPU), so CPU and memory never bind before GPUs do.

Deterministic for a seed: ``numpy.random.SeedSequence(seed)`` spawns one
``default_rng`` per quantity (model per tenant, arrival gaps, size, duration,
tenant, name noise), each drawn in job order; no global randomness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from streams.sim.time.jobs import Job, make_job
from streams.sim.traces import NodeSpec

HOUR_S = 3600.0
DAY_S = 86_400.0
DEFAULT_HOURS = 14 * 24.0
"""Two simulated weeks: about 1,460 jobs at load 1, enough for several multi-day gangs."""

NODES = 60
GPUS_PER_NODE = 8
MODEL = "V100M32"
NODE_CPU_MILLI = 48_000
NODE_MEMORY_MIB = 385_426
RACK_NODES = 8
CPU_MILLI_PER_GPU = NODE_CPU_MILLI // GPUS_PER_NODE  # 6 CPUs
MEMORY_MIB_PER_GPU = 47_104  # 46 GiB: 8 of them fit a node's 385,426 MiB
UTIL = 0.9  # share of its GPUs a training job keeps busy (as the mixed workload's training)

SIZE_COUNTS: dict[int, int] = {
    1: 75, 2: 79, 3: 6, 4: 123, 5: 6, 6: 12, 8: 691, 16: 181, 24: 15, 32: 33, 40: 6,
    48: 5, 56: 18, 64: 28, 72: 3, 80: 3, 88: 4, 96: 12, 104: 6, 112: 16, 120: 99, 128: 401,
    136: 34, 144: 11}
"""Jobs per GPU count in the README's 26-day Helios extract (1,867 jobs)."""
MAX_GANG = 128

MEDIAN_S = 120.0
DAY_SHARE = 0.02
Z_98 = 2.053748910631823  # standard normal quantile at 0.98
SIGMA = math.log(DAY_S / MEDIAN_S) / Z_98
MU = math.log(MEDIAN_S)
CAP_S = 7 * DAY_S

ZIPF_S = 1.5
MODELS = ("resnet50", "bert-large", "gpt2", "vit-b16", "yolov5", "unet", "deeplabv3",
          "swin-t", "t5-base", "mask-rcnn", "wav2vec2", "efficientnet-b7")
TENANTS = len(MODELS)  # 12, one model each
STAGES = ("debug", "tune", "train")
STAGE_NOISE = 0.5
_TERCILE = 0.4307272992954576  # standard normal quantile at 2/3


def size_class(gpus: int) -> str:
    """The README's class of a GPU count: ``g1``, ``g2-8`` or ``g>8``."""
    return "g1" if gpus <= 1 else "g2-8" if gpus <= GPUS_PER_NODE else "g>8"


def _power_of_two(n: int) -> int:
    """The nearest power of two to ``n`` in log scale, at most ``MAX_GANG``."""
    return min(1 << round(math.log2(n)), MAX_GANG)


def size_table() -> tuple[np.ndarray, np.ndarray]:
    """GPU sizes (powers of two) and their probabilities, ``SIZE_COUNTS`` folded."""
    folded: dict[int, int] = {}
    for n, count in SIZE_COUNTS.items():
        p = _power_of_two(n)
        if size_class(p) != size_class(n):  # the folding must keep the README's shares
            raise AssertionError(f"{n} GPUs -> {p} changes class")
        folded[p] = folded.get(p, 0) + count
    sizes = np.array(sorted(folded), np.int64)
    counts = np.array([folded[s] for s in sizes], np.float64)
    return sizes, counts / counts.sum()


def class_shares() -> dict[str, float]:
    """The target share of each class (the README's 26-day shares)."""
    total = sum(SIZE_COUNTS.values())
    shares: dict[str, float] = {}
    for n, count in SIZE_COUNTS.items():
        shares[size_class(n)] = shares.get(size_class(n), 0.0) + count / total
    return shares


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def duration_quantile(q: float) -> float:
    """The analytic ``q`` quantile of a job's duration (s), below the cap."""
    from statistics import NormalDist

    return min(math.exp(MU + SIGMA * NormalDist().inv_cdf(q)), CAP_S)


def mean_duration_s() -> float:
    """E[min(X, CAP_S)] for X log-normal(MU, SIGMA), in closed form."""
    c = math.log(CAP_S)
    below = math.exp(MU + SIGMA ** 2 / 2) * _phi((c - MU - SIGMA ** 2) / SIGMA)
    return below + CAP_S * (1.0 - _phi((c - MU) / SIGMA))


def mean_gpus() -> float:
    sizes, prob = size_table()
    return float((sizes * prob).sum())


def arrival_rate_per_s(load: float, gpus: int) -> float:
    """Poisson rate that offers ``load`` x ``gpus`` in expectation (sizes and durations
    independent, so E[GPU-seconds per job] = E[GPUs] x E[duration])."""
    return load * gpus / (mean_gpus() * mean_duration_s())


def training_cluster() -> list[NodeSpec]:
    """``NODES`` nodes of 8 ``V100M32``, named ``rackRR-nodeNNN`` (8 per rack)."""
    return [NodeSpec(f"rack{i // RACK_NODES:02d}-node{i:03d}", NODE_CPU_MILLI,
                     NODE_MEMORY_MIB, GPUS_PER_NODE, MODEL) for i in range(NODES)]


def tenant_weights(count: int = TENANTS) -> np.ndarray:
    """Zipf-like share of jobs per tenant rank (1/k^ZIPF_S, normalised)."""
    w = 1.0 / np.arange(1, count + 1, dtype=np.float64) ** ZIPF_S
    return w / w.sum()


def _arrivals_at_load_1(rng: np.random.Generator, rate_per_s: float,
                        until_s: float) -> np.ndarray:
    """A Poisson process of ``rate_per_s`` up to ``until_s``: cumulative exponential gaps,
    drawn in blocks from one stream (so a longer window extends a shorter one)."""
    gaps = np.empty(0)
    while gaps.sum() <= until_s * rate_per_s:
        block = max(64, int(until_s * rate_per_s * 0.1))
        gaps = np.concatenate([gaps, rng.standard_exponential(block)])
    times = np.cumsum(gaps) / rate_per_s
    return times[times < until_s]


def training_jobs(seed: int = 42, horizon_s: float = DEFAULT_HOURS * HOUR_S,
                  load: float = 1.0, nodes: Sequence[NodeSpec] | None = None) -> list[Job]:
    """The training workload over ``horizon_s`` (see the module docstring): arrivals at
    ``load`` x the cluster's GPUs (``nodes``, default ``training_cluster``)."""
    if load <= 0:
        raise ValueError(f"load {load}: must be above 0")
    gpus_total = sum(n.gpu_count for n in (nodes if nodes is not None else training_cluster()))
    # One stream per quantity, so that job k is the same job at every load and horizon:
    # a draw of n values of a stream starts with the n - 1 of a shorter draw.
    s_models, s_gaps, s_size, s_dur, s_tenant, s_noise = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6))
    models = [str(m) for m in s_models.permutation(np.array(MODELS))]
    arrivals = _arrivals_at_load_1(s_gaps, arrival_rate_per_s(1.0, gpus_total),
                                   horizon_s * load) / load
    count = len(arrivals)
    sizes, prob = size_table()
    gpus = s_size.choice(sizes, size=count, p=prob)
    score = s_dur.standard_normal(count)
    durations = np.minimum(np.exp(MU + SIGMA * score), CAP_S)
    tenants = s_tenant.choice(TENANTS, size=count, p=tenant_weights())
    noisy = (score + STAGE_NOISE * s_noise.standard_normal(count)) / math.sqrt(
        1 + STAGE_NOISE ** 2)
    stages = np.where(noisy < -_TERCILE, 0, np.where(noisy < _TERCILE, 1, 2))
    jobs: list[Job] = []
    for k in range(count):
        g = int(gpus[k])
        t = int(tenants[k])
        model = models[t]
        per_node = min(g, GPUS_PER_NODE)
        jobs.append(make_job(
            f"tr-{k:05d}", float(arrivals[k]), float(durations[k]), g, 1000,
            tenant=f"u{t:02d}", priority=0, qos="burstable", task_class=size_class(g),
            cpu_milli=CPU_MILLI_PER_GPU * per_node, memory_mib=MEMORY_MIB_PER_GPU * per_node,
            expected_s=None, util=UTIL, name=f"{model}-{g}g-{STAGES[int(stages[k])]}"))
    return jobs
