"""Issue 8 benchmark: adaptation on the time simulator's mixed workload, one simulated day.

Run (traces from ``$HETSCHED_TRACES`` or ``<repo>/../shared/traces``):
``PYTHONPATH=$PWD python bench/adapt.py [--seed 42] [--seeds 43,44] [--hours 24]
[--fraction 0.05] [--load "..."] [--write]`` (``--write`` saves every run's metrics in
bench/results/adapt.json and every table in bench/results/adapt.md, from which the
``adapt`` section of BENCHMARKS.md takes its headline figures;
``--from-results --write`` rewrites the text from that file without simulating;
``--hours 2`` is a quick check). Runs go two at a time in worker processes.

Three experiments, same seeded jobs and cluster, the service's ``hetsched``
profile and default queue, the simulator's adaptation layer
(``streams.sim.time.adapt``: GenAI-shaped task utilisation, work/speed model,
energy with servers powered down after 10 idle minutes):

1. *Adaptation on vs off* on three seeds: elastic resizing of multi-GPU training
   and workflow jobs (bounds n/2..2n) with the slot rules, probing (60 s, learnt per
   tenant+class, multi-GPU tasks in place), defragmentation, hot-spot and throttle
   migration (``ON_RULES``); vs all off; and the original rules (``ORIGINAL_RULES``),
   alone and with defragmentation. An ablation switches each mechanism off alone;
   on and off also run with 2% of GPUs throttling for 2 h each.
2. *Node failures*: 5% of nodes fail at seeded times (repaired 1 h later), with
   adaptation off (the failure handling alone, against run "off") and on.
3. *Off-peak consolidation*: a diurnal day (the mixed arrivals thinned to a
   quarter outside 08:00-20:00, workflows kept whole), adaptation on, with off-peak
   energy placement (the ``energy`` objective), consolidation moves below 40%
   allocation, both, or neither; energy per finished task overall and off-peak.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schemas.gpu_catalog import load_catalog
from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.outcomes import Probed
from streams.core.decisions import Placement
from streams.core.objectives import WeightRule, WeightSchedule
from streams.core.profile import Profile, get_profile
from streams.core.queue import QueueConfig
from streams.profiles.compile import compile_profile
from streams.profiles.service import service_scheduler, typical_tasks
from streams.sim.time.adapt import SimAdaptConfig, attach_adaptation, attach_faults
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import Job
from streams.sim.time.mixed import mixed_cluster, mixed_jobs

ROOT = Path(__file__).resolve().parents[1]
HOUR = 3600.0
OFFPEAK = ((0.0, 8 * HOUR), (20 * HOUR, 24 * HOUR))
OFFPEAK_KEEP = 0.25
CONSOLIDATE_PCT = 40.0
THROTTLE = 0.02
ENERGY_WEIGHT = 0.5
"""Weight of the ``energy`` placement term (0..100) beside ``hetsched`` (1.0) off peak."""
ON_RULES: dict[str, Any] = {"probe_s": 60.0, "probe_in_place_gpus": 2, "defrag": True}
"""Adaptation on: probing (60 s; multi-GPU tasks in place), defragmentation moves, and
the core's defaults (growth that keeps free slots, reclaim only for a task that fits,
hot-spot moves onto busy nodes only)."""
ORIGINAL_RULES: dict[str, Any] = {"probe_in_place_gpus": 0, "defrag": False,
                                  "elastic_keep_slots": False, "hot_spot_onto_idle": True}
"""The rules before the non-fragmenting ones (run "on, original rules")."""


def diurnal(jobs: list[Job], seed: int) -> list[Job]:
    """Keep every job arriving 08:00-20:00 and a seeded quarter of the others (a workflow's
    stages share one draw, so no stage loses its predecessor)."""
    out = []
    for j in jobs:
        day = j.arrival_s % 86_400.0
        if not any(a <= day < b for a, b in OFFPEAK):
            out.append(j)
            continue
        key = j.job_id.rsplit("-", 1)[0] if j.job_id.startswith("wf-") else j.job_id
        if zlib.crc32(f"{seed}/{key}".encode()) % 1000 < OFFPEAK_KEEP * 1000:
            out.append(j)
    kept = {j.job_id for j in out}
    return [j for j in out if all(d in kept for d in j.meta.depends_on)]


def offpeak_energy(weight: float, max_load: float,
                   args: dict[str, Any] | None = None) -> WeightSchedule:
    """Off-peak placement rule (20:00-08:00, allocation below ``max_load``): the service's
    profile plus ``energy`` (efficient GPUs of already-powered servers, 0..100) at
    ``weight``, so arrivals fill busy servers and emptied ones stay empty and power down."""
    base = get_profile("hetsched")
    prof = Profile("hetsched+energy", {**base.weights, "energy": weight},
                   {**base.args, "energy": dict(args or {})}, base.gpu_tiebreak)
    sched = compile_profile(prof, {"typical": typical_tasks(), "seed": 0})
    return WeightSchedule((WeightRule("off-peak", sched, OFFPEAK[1][0], OFFPEAK[0][1], 0.0,
                                      max_load),))


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One simulated run (in a worker process); returns its metrics."""
    seed, hours = spec["seed"], spec["hours"]
    nodes = mixed_cluster()
    jobs = mixed_jobs(seed, hours * HOUR, 1.0, nodes)
    if spec.get("diurnal"):
        jobs = diurnal(jobs, seed)
    objectives = (offpeak_energy(spec["energy"], CONSOLIDATE_PCT / 100.0,
                                 spec.get("energy_args"))
                  if spec.get("energy") else None)
    sim = Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig(),
                              objectives=objectives),
                    nodes, jobs, hours * HOUR, tick_s=spec.get("tick_s", 60.0))
    core = replace(AdaptConfig(**ON_RULES), consolidate_pct=spec.get("consolidate", 0.0),
                   model_speed=spec.get("model_speed", False))
    if spec.get("original"):
        core = replace(core, **ORIGINAL_RULES)
    core = replace(core, **spec.get("core", {}))
    if spec.get("no_probe"):
        core = replace(core, probe_s=0.0)
    if spec.get("no_hot"):
        core = replace(core, hot_util_pct=1e9)
    elastic = () if spec.get("no_elastic") else ("training", "workflow")
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=spec["adapt"], core=core, seed=seed,
                                                  elastic_classes=elastic,
                                                  model_speed=spec.get("model_speed", False),
                                                  data_classes=tuple(spec.get("data_classes",
                                                                              ()))),
                              OFFPEAK if spec.get("diurnal") else ())
    if spec.get("fail") or spec.get("throttle"):
        attach_faults(sim, seed=seed, node_fraction=spec.get("fail", 0.0),
                      throttle_fraction=spec.get("throttle", 0.0))
    placed: dict[str, float] = {}
    if spec.get("model_speed"):
        sim.observers.append(_count_placements(placed))
    t0 = time.perf_counter()
    rec = sim.run()
    wall = time.perf_counter() - t0
    summary = rec.summary()
    done = [s for s in rec.jobs.values() if s.status == "finished"]
    out = dict(layer.summary())
    out.update(
        name=spec["name"], wall_s=wall, jobs=summary["jobs"], finished=summary["finished"],
        lost=float(sum(1 for s in rec.jobs.values()
                       if s.status not in ("finished", "unschedulable"))),
        jct_mean_s=sum(s.end_s - s.job.arrival_s for s in done) / max(len(done), 1),
        wait_mean_s=summary["wait_mean_s"], wait_p95_s=summary["wait_p95_s"],
        failures=float(layer.faults.failures),
    )
    for cls, row in rec.per_class().items():
        out[f"jct_{cls}_s"] = row["jct_mean_s"]
        out[f"wait_{cls}_s"] = row["wait_mean_s"]
    out.update(placed)
    return out


def _count_placements(placed: dict[str, float]) -> Any:
    """An observer counting starts (placements and probes) per task class and GPU model,
    as ``placed_<class>_<model>`` (model-speed runs: where the work ran decides its speed)."""
    def observe(sim: Simulator, _t: float, o: Any) -> None:
        if isinstance(o, Probed):
            o = o.placement
        if isinstance(o, Placement) and o.node:
            s = sim.cell.state
            m = int(s.model[s.node_index[o.node]])
            key = f"placed_{sim.jobs[o.task].task_class}_{s.model_names[m] if m >= 0 else '-'}"
            placed[key] = placed.get(key, 0.0) + 1.0
    return observe


def _pct(a: float, b: float) -> str:
    return f"{100.0 * (b / a - 1.0):+.1f}%" if a else "n/a"


def _change(a: dict[str, Any], b: dict[str, Any], key: str) -> float:
    """Run ``b``'s ``key`` against run ``a``'s, in percent (0 when ``a``'s is 0)."""
    return 100.0 * (b[key] / a[key] - 1.0) if a[key] else 0.0


def _verdict(pairs: list[tuple[dict[str, Any], dict[str, Any]]],
             original: list[dict[str, Any]]) -> list[str]:
    """What the seeds say, counted from the runs (no figure is typed in)."""
    n = len(pairs)

    def better(key: str, runs: list[dict[str, Any]], lower: bool = True) -> int:
        return sum(1 for (a, _), b in zip(pairs, runs, strict=True)
                   if (b[key] < a[key]) == lower and b[key] != a[key])

    on = [b for _, b in pairs]
    return [
        f"Verdict over {n} seeds: adaptation on shortens mean completion time on "
        f"{better('jct_mean_s', on)}/{n}, shortens queueing delay on "
        f"{better('wait_mean_s', on)}/{n} and raises used GPU utilisation on "
        f"{better('used_gpu_pct', on, lower=False)}/{n}; with the original rules: completion "
        f"{better('jct_mean_s', original)}/{n}, queueing {better('wait_mean_s', original)}/{n}, "
        f"utilisation {better('used_gpu_pct', original, lower=False)}/{n}.",
    ]


def _table(cols: list[dict[str, Any]], rows: list[tuple[str, str]]) -> list[str]:
    lines = ["| metric | " + " | ".join(c["label"] for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for label, key in rows:
        lines.append(f"| {label} | " + " | ".join(f"{c.get(key, 0.0):,.1f}" for c in cols)
                     + " |")
    return lines


def _specs(args: argparse.Namespace, extra: list[int]) -> list[dict[str, Any]]:
    base = {"seed": args.seed, "hours": args.hours}
    seeds = [args.seed, *extra]
    return [
        {**base, "name": "off", "adapt": False},
        {**base, "name": "on", "adapt": True},
        {**base, "name": "off_thr", "adapt": False, "throttle": THROTTLE},
        {**base, "name": "on_thr", "adapt": True, "throttle": THROTTLE},
        {**base, "name": "fail", "adapt": False, "fail": args.fraction},
        {**base, "name": "fail_on", "adapt": True, "fail": args.fraction},
        {**base, "name": "no_elastic", "adapt": True, "no_elastic": True},
        {**base, "name": "no_probe", "adapt": True, "no_probe": True},
        {**base, "name": "no_hot", "adapt": True, "no_hot": True},
        {**base, "name": "no_defrag", "adapt": True, "core": {"defrag": False}},
        *[{"seed": sd, "hours": args.hours, "name": f"{mode}_{sd}", "adapt": mode == "on"}
          for sd in extra for mode in ("off", "on")],
        *[{"seed": sd, "hours": args.hours, "name": f"orig_{sd}", "adapt": True,
           "original": True} for sd in seeds],
        *[{"seed": sd, "hours": args.hours, "name": f"origd_{sd}", "adapt": True,
           "original": True, "core": {"defrag": True}} for sd in seeds],
        *[{"seed": sd, "hours": args.hours, "name": f"{name}_{sd}", "adapt": True,
           "diurnal": True, **extra_spec}
          for sd in seeds for name, extra_spec in (
              ("diurnal", {}), ("dplace", {"energy": ENERGY_WEIGHT}),
              ("dmove", {"consolidate": CONSOLIDATE_PCT}),
              ("dcons", {"energy": ENERGY_WEIGHT, "consolidate": CONSOLIDATE_PCT}))],
        *[{**base, "name": name, "adapt": True, "diurnal": True, "energy": ENERGY_WEIGHT,
           "energy_args": {"busy_weight": bw}} for name, bw in (("dpowered", 1.0),
                                                                 ("defficient", 0.0))],
    ]


def _speed_specs(args: argparse.Namespace, extra: list[int]) -> list[dict[str, Any]]:
    """Runs with the GPU model speed (``--model-speed``): adaptation off and on, and the
    diurnal day without the energy term, with it (FP32 TFLOPS/W, as above) and with it
    scoring energy per unit of the task's work (``per_work``), on every seed. The core
    knows model speed (``AdaptConfig.model_speed``) except in the ``s_blind_*`` runs, which
    keep the speed-blind core of before for comparison."""
    seeds = [args.seed, *extra]
    speed = {"hours": args.hours, "model_speed": True}
    blind = {"core": {"model_speed": False}}
    return [
        *[{**speed, "seed": sd, "name": f"s_{mode}_{sd}", "adapt": mode == "on"}
          for sd in seeds for mode in ("off", "on")],
        *[{**speed, "seed": sd, "name": f"s_blind_on_{sd}", "adapt": True, **blind}
          for sd in seeds],
        *[{**speed, "seed": sd, "name": f"s_{name}_{sd}", "diurnal": True,
           "energy": ENERGY_WEIGHT, **extra_spec}
          for sd in seeds for name, extra_spec in (
              ("dplaceoff", {"adapt": False}), ("blind_dplace", {"adapt": True, **blind}))],
        *[{**speed, "seed": sd, "name": f"s_blind_diurnal_{sd}", "adapt": True,
           "diurnal": True, **blind} for sd in seeds],
        *[{**speed, "seed": sd, "name": f"s_{name}_{sd}", "adapt": True, "diurnal": True,
           **extra_spec}
          for sd in seeds for name, extra_spec in (
              ("diurnal", {}), ("dplace", {"energy": ENERGY_WEIGHT}),
              ("dwork", {"energy": ENERGY_WEIGHT, "energy_args": {"per_work": 1.0}}),
              ("defficient", {"energy": ENERGY_WEIGHT, "energy_args": {"busy_weight": 0.0}}))],
        *[{**speed, "seed": args.seed, "name": f"s_{name}_infdata_{args.seed}", "adapt": True,
           "diurnal": True, "data_classes": ["inference"], **extra_spec}
          for name, extra_spec in (
              ("diurnal", {}), ("dplace", {"energy": ENERGY_WEIGHT}),
              ("dwork", {"energy": ENERGY_WEIGHT, "energy_args": {"per_work": 1.0}}))],
        {**speed, "seed": args.seed, "name": f"s_dpowered_{args.seed}", "adapt": True,
         "diurnal": True, "energy": ENERGY_WEIGHT, "energy_args": {"busy_weight": 1.0}},
        *[{**speed, "seed": sd, "name": f"s_{name}_{sd}", "adapt": True, **extra_spec}
          for sd in seeds for name, extra_spec in (
              ("nodefrag", {"core": {"defrag": False}}), ("nohot", {"no_hot": True}),
              ("noelastic", {"no_elastic": True}), ("noprobe", {"no_probe": True}))],
    ]


MAIN_ROWS = [
    ("jobs", "jobs"), ("finished", "finished"), ("lost", "lost"),
    ("completion time, mean (s)", "jct_mean_s"),
    ("completion, training (s)", "jct_training_s"),
    ("completion, workflow (s)", "jct_workflow_s"),
    ("completion, inference (s)", "jct_inference_s"),
    ("completion, rendering (s)", "jct_rendering_s"),
    ("queueing delay, mean (s)", "wait_mean_s"), ("queueing delay, p95 (s)", "wait_p95_s"),
    ("queueing delay, training (s)", "wait_training_s"),
    ("queueing delay, workflow (s)", "wait_workflow_s"),
    ("used GPU utilisation (%)", "used_gpu_pct"), ("allocated GPUs (%)", "alloc_gpu_pct"),
    ("busy share of allocated GPUs (%)", "busy_of_alloc_pct"),
    ("energy (kWh)", "energy_kwh"), ("energy per finished task (Wh)", "energy_per_task_wh"),
    ("resizes up", "resizes_up"), ("resizes down", "resizes_down"),
    ("probes", "probes"), ("migrations", "migrations"),
    ("migrations: defragment", "moves_defragment"),
    ("migrations: hot spot", "moves_hot_spot"),
    ("migrations: thermal throttled", "moves_thermal_throttled"),
    ("migration cost (s of task time)", "migration_cost_s"),
    ("migration cost (GPU-h)", "migration_cost_gpu_h"),
    ("migrations refused (cost)", "migrations_refused"),
    ("migrations over budget", "migrations_over_budget"),
    ("evictions", "evictions"), ("work lost to failures (GPU-h)", "work_lost_gpu_h"),
]
CONS_ROWS = [
    ("jobs", "jobs"), ("finished", "finished"), ("lost", "lost"),
    ("completion time, mean (s)", "jct_mean_s"), ("queueing delay, mean (s)", "wait_mean_s"),
    ("energy (kWh)", "energy_kwh"), ("energy per finished task (Wh)", "energy_per_task_wh"),
    ("energy off-peak (kWh)", "energy_offpeak_kwh"),
    ("energy per task finished off-peak (Wh)", "energy_per_task_offpeak_wh"),
    ("powered nodes, mean", "powered_nodes_mean"), ("used GPU utilisation (%)", "used_gpu_pct"),
    ("nodes emptied by consolidation", "nodes_emptied"),
    ("consolidations refused (energy gate)", "consolidations_refused_energy"),
    ("migrations: consolidate", "moves_consolidate"),
    ("migrations: hot spot", "moves_hot_spot"),
    ("migration cost (GPU-h)", "migration_cost_gpu_h"),
    ("migrations over budget", "migrations_over_budget"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--seeds", default="43,44",
                    help="extra seeds for the on/off comparison (comma-separated)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--load", default="",
                    help="machine load to write beside the figures (e.g. '5 on 2 cores')")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--from-results", action="store_true",
                    help="re-write the text from bench/results/adapt.json (no simulation)")
    ap.add_argument("--model-speed", action="store_true",
                    help="run only the GPU-model-speed runs (adaptation off/on with the "
                    "speed-aware core and the speed-blind one, diurnal energy placement) "
                    "and, with --write, save them in adapt.json beside the other runs and "
                    "re-write the text")
    ap.add_argument("--only", default="",
                    help="run only these runs (comma-separated names, e.g. s_dplace_42); "
                    "prints their metrics, writes nothing")
    args = ap.parse_args(argv)
    extra = [int(x) for x in args.seeds.split(",") if x.strip()]
    specs = _specs(args, extra)
    raw = ROOT / "bench" / "results" / "adapt.json"
    if args.only or args.model_speed:
        return _run_speed(args, extra, raw)
    if args.from_results:
        saved = json.loads(raw.read_text())
        res, total, args.load = saved["runs"], saved["wall_s"], saved.get("load", "")
        speed_saved = saved.get("model_speed")
    else:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            res = {r["name"]: r for r in pool.map(run_one, specs)}
        total = time.perf_counter() - t0
        speed_saved = (json.loads(raw.read_text()).get("model_speed")
                       if raw.exists() else None)
    for r in res.values():
        print(f"{r['name']}: {r['wall_s']:.1f} s", file=sys.stderr)
    off, on, fail, fail_on = res["off"], res["on"], res["fail"], res["fail_on"]
    label = {"off": "adaptation off", "on": "adaptation on",
             "off_thr": "off, 2% GPUs throttling", "on_thr": "on, 2% GPUs throttling",
             "fail": f"off, {fail['failures']:.0f} nodes fail",
             "fail_on": f"on, {fail_on['failures']:.0f} nodes fail",
             "no_elastic": "on, without elastic", "no_probe": "on, without probing",
             "no_hot": "on, without hot-spot moves", "no_defrag": "on, without defrag",
             f"orig_{args.seed}": "on, original rules"}
    for k, r in res.items():
        r["label"] = label.get(k, k)
    seeds = [args.seed, *extra]
    res[f"off_{args.seed}"], res[f"on_{args.seed}"] = off, on
    pairs = [(res[f"off_{sd}"], res[f"on_{sd}"]) for sd in seeds]
    seed_lines = ["| seed | run | completion (s) | vs off | queueing (s) | vs off "
                  "| training queueing (s) | used GPU (%) | vs off (points) |",
                  "|---|---|" + "---:|" * 7]
    for sd, (a, b) in zip(seeds, pairs, strict=True):
        for name, r in (("off", a), ("on", b), ("on, original rules", res[f"orig_{sd}"]),
                        ("on, original rules + defrag", res[f"origd_{sd}"])):
            seed_lines.append(
                f"| {sd} | {name} | {r['jct_mean_s']:,.1f} | "
                f"{_pct(a['jct_mean_s'], r['jct_mean_s'])} | {r['wait_mean_s']:,.1f} | "
                f"{_pct(a['wait_mean_s'], r['wait_mean_s'])} | "
                f"{r.get('wait_training_s', 0.0):,.1f} | {r['used_gpu_pct']:.2f} | "
                f"{r['used_gpu_pct'] - a['used_gpu_pct']:+.2f} |")
    ablation = _table([off, on, res[f"orig_{args.seed}"], res["no_elastic"], res["no_probe"],
                       res["no_hot"], res["no_defrag"]], [
        ("completion time, mean (s)", "jct_mean_s"),
        ("completion, training (s)", "jct_training_s"),
        ("queueing delay, mean (s)", "wait_mean_s"),
        ("queueing delay, training (s)", "wait_training_s"),
        ("queueing delay, workflow (s)", "wait_workflow_s"),
        ("used GPU utilisation (%)", "used_gpu_pct"), ("resizes up", "resizes_up"),
        ("resizes down", "resizes_down"), ("migrations", "migrations"),
        ("migrations: defragment", "moves_defragment"),
        ("migrations: hot spot", "moves_hot_spot")])
    growth = 100.0 * (fail["jct_mean_s"] / off["jct_mean_s"] - 1.0)
    growth_on = 100.0 * (fail_on["jct_mean_s"] / on["jct_mean_s"] - 1.0)
    d = {sd: [res[f"{k}_{sd}"] for k in ("diurnal", "dplace", "dmove", "dcons")]
         for sd in seeds}
    cmd = (f"`PYTHONPATH=$PWD HETSCHED_TRACES=<shared>/traces python bench/adapt.py --seed "
           f"{args.seed} --hours {args.hours:g} --fraction {args.fraction} --seeds {args.seeds}`")
    load = f", machine load: {args.load}" if args.load else ""
    lines = [
        f"{cmd} on {platform.machine()} / Python {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d}; {len(specs)} runs in {total:.0f} s wall "
        f"({args.workers} at a time on a shared 2-core machine{load}). The simulation is "
        "seeded and event-timed: every figure below except wall time is the same on any "
        "machine; raw metrics in bench/results/adapt.json.", "",
        "Mixed workload of the time simulator (`mixed_jobs`/`mixed_cluster`: 256 GPUs), "
        f"{args.hours:g} simulated hours, the service's `hetsched` profile. Task "
        "utilisation follows the GenAI duty-cycle curves (shape, scaled to each job's mean), "
        "a work/speed model turns resizes, moves and throttling into run time, and idle "
        "servers power down after 10 minutes (both runs alike). Model and assumptions: "
        "`streams/sim/time/telemetry.py`, `streams/sim/time/adapt.py`, docs/simulation.md.", "",
        "*Adaptation on* = elastic resizing of multi-GPU training and workflow jobs (bounds "
        "n/2..2n), probing of featureless tasks (60 s, learnt per tenant and class; tasks of "
        "2 or more GPUs probed in place), defragmentation moves (free whole GPUs for a stuck "
        "multi-GPU task by moving fractional ones), hot-spot and throttle migration, with "
        "the rules that keep free slots whole: growth takes only a GPU that breaks no free "
        "pair, quad or whole node (`AdaptConfig.elastic_keep_slots`), borrowed GPUs are "
        "reclaimed as soon as a queued task would fit with them and only then, hot-spot "
        "moves land on busy nodes only (`hot_spot_onto_idle=False`). *Original rules* = "
        "the same before these fixes (growth into any free GPU, reclaim on the first tick "
        "anyone waits, hot-spot moves onto idle nodes, every probe on half a GPU, no "
        "defragmentation): the configuration measured before, re-run here (checked "
        "against the code before this change: identical figures). The previous version of "
        "this section came from an earlier main, so its rows differ from these (e.g. its "
        "seed-42 'off' queueing delay was 15.4 s).", "",
        "### Adaptation on vs off, and node failures", "",
        *_table([off, on, res["off_thr"], res["on_thr"], fail, fail_on], MAIN_ROWS), "",
        f"On vs off: completion time {_pct(off['jct_mean_s'], on['jct_mean_s'])}, queueing "
        f"delay {_pct(off['wait_mean_s'], on['wait_mean_s'])}, used GPU utilisation "
        f"{on['used_gpu_pct'] - off['used_gpu_pct']:+.2f} points; with throttling: "
        f"completion {_pct(res['off_thr']['jct_mean_s'], res['on_thr']['jct_mean_s'])}, "
        f"queueing {_pct(res['off_thr']['wait_mean_s'], res['on_thr']['wait_mean_s'])}.", "",
        f"The same comparison over {len(seeds)} seeds (workload and curve picks change), with "
        "the original rules beside, alone and with defragmentation added:", "",
        *seed_lines, "",
        f"Which mechanism moves what (seed {args.seed}, each switched off alone):", "",
        *ablation, "", *_verdict(pairs, [res[f"orig_{sd}"] for sd in seeds]), "",
        f"Failures: {fail['failures']:.0f} of {len(mixed_cluster())} nodes fail "
        f"(repaired 1 h later), evictions {fail['evictions']:.0f}, work lost "
        f"{fail['work_lost_gpu_h']:.1f} GPU-h (no checkpoints: an evicted run restarts from "
        f"zero); completion time **{growth:+.1f}%** (target < +10%); lost tasks "
        f"**{fail['lost']:.0f}** (target 0). With adaptation on: completion "
        f"{growth_on:+.1f}% against adaptation on without failures, lost "
        f"{fail_on['lost']:.0f}.", "",
        "### Off-peak consolidation (diurnal day)", "",
        f"Arrivals outside 08:00-20:00 thinned to {OFFPEAK_KEEP:.0%}; adaptation on in all "
        "runs. *Placement*: off peak (20:00-08:00, allocation below "
        f"{CONSOLIDATE_PCT:.0f}%) the cell's objectives add the `energy` term (efficient GPU "
        "models per the catalog's TFLOPS/W, and servers already running something) at "
        f"weight {ENERGY_WEIGHT:g} beside `hetsched` (`bench/adapt.py:offpeak_energy`, the "
        "service's `HETSCHED_OBJECTIVES`). *Moves*: consolidation empties the least-loaded "
        f"busy node onto other busy ones while allocation is below {CONSOLIDATE_PCT:.0f}% "
        "and nothing waits (all its tasks or none, each with runtime left to repay its move, "
        "the energy gate of the per-model power model, within the migration budget; the "
        "destinations are chosen by the hour's objectives).", "",
        *_table([*(dict(r, label=lbl) for r, lbl in zip(d[args.seed], (
            "no consolidation", "placement", "moves", "placement + moves"), strict=True))],
            CONS_ROWS), "",
        "Over the seeds (energy per finished task, Wh, and change against no consolidation):",
        "",
        "| seed | none | placement | change | moves | change | placement + moves | change "
        "| off-peak: none | placement + moves | change | powered nodes: none | p + m |",
        "|---|" + "---:|" * 12,
        *[f"| {sd} | {a['energy_per_task_wh']:.1f} | {p['energy_per_task_wh']:.1f} | "
          f"{_pct(a['energy_per_task_wh'], p['energy_per_task_wh'])} | "
          f"{m['energy_per_task_wh']:.1f} | "
          f"{_pct(a['energy_per_task_wh'], m['energy_per_task_wh'])} | "
          f"{b['energy_per_task_wh']:.1f} | "
          f"{_pct(a['energy_per_task_wh'], b['energy_per_task_wh'])} | "
          f"{a['energy_per_task_offpeak_wh']:.1f} | {b['energy_per_task_offpeak_wh']:.1f} | "
          f"{_pct(a['energy_per_task_offpeak_wh'], b['energy_per_task_offpeak_wh'])} | "
          f"{a['powered_nodes_mean']:.2f} | {b['powered_nodes_mean']:.2f} |"
          for sd, (a, p, m, b) in d.items()],
        "",
        f"Where the placement's saving comes from (seed {args.seed}; the `energy` term "
        "mixes two preferences, split here by its `busy_weight`): already-powered servers "
        f"only {res['dpowered']['energy_per_task_wh']:.1f} Wh per task "
        f"({_pct(d[args.seed][0]['energy_per_task_wh'], res['dpowered']['energy_per_task_wh'])}"
        f", powered nodes {res['dpowered']['powered_nodes_mean']:.2f}), efficient GPU models "
        f"only {res['defficient']['energy_per_task_wh']:.1f} Wh "
        f"({_pct(d[args.seed][0]['energy_per_task_wh'], res['defficient']['energy_per_task_wh'])}"
        f", powered nodes {res['defficient']['powered_nodes_mean']:.2f}).", "",
    ]
    text = "\n".join(lines + _notes(res, seeds, args.seed)
                     + _speed_text(speed_saved, res, seeds))
    print(text)
    if args.write:
        if not args.from_results:
            raw.parent.mkdir(parents=True, exist_ok=True)
            raw.write_text(json.dumps({"command": cmd, "runs": res, "wall_s": total,
                                       "load": args.load, "model_speed": speed_saved},
                                      indent=1, sort_keys=True))
        # Every table of the run; BENCHMARKS.md keeps the current headline figures of
        # it by hand (a reader's page, under 400 lines, tests/foundation).
        tables = raw.with_suffix(".md")
        tables.write_text(f"# Adaptation: every table of the last run\n\n{text}\n")
        print(f"wrote {tables.relative_to(ROOT)}", file=sys.stderr)
    return 0


def _run_speed(args: argparse.Namespace, extra: list[int], raw: Path) -> int:
    """``--model-speed`` / ``--only``: run a subset, print it, and (``--model-speed
    --write``) keep it in adapt.json under ``model_speed`` and re-write the text."""
    specs = _speed_specs(args, extra)
    if args.only:
        names = {x.strip() for x in args.only.split(",") if x.strip()}
        specs = [sp for sp in [*_specs(args, extra), *specs] if sp["name"] in names]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        res = {r["name"]: r for r in pool.map(run_one, specs)}
    total = time.perf_counter() - t0
    keys = ("jct_mean_s", "wait_mean_s", "energy_per_task_wh", "energy_per_task_offpeak_wh",
            "used_gpu_pct", "powered_nodes_mean", "finished", "wall_s")
    for name, r in res.items():
        print(name, " ".join(f"{k}={r[k]:.2f}" for k in keys))
    print(f"{len(specs)} runs in {total:.0f} s wall")
    if args.write and args.model_speed and not args.only:
        saved = json.loads(raw.read_text())
        saved["model_speed"] = {
            "runs": res, "wall_s": total, "load": args.load,
            "command": f"python bench/adapt.py --model-speed --seed {args.seed} --hours "
                       f"{args.hours:g} --seeds {args.seeds} --write"}
        raw.write_text(json.dumps(saved, indent=1, sort_keys=True))
        return main(["--from-results", "--write", "--seed", str(args.seed), "--hours",
                     f"{args.hours:g}", "--fraction", str(args.fraction), "--seeds",
                     args.seeds])
    return 0


def _ratio_text() -> str:
    """Speeds of the mixed cluster's models against the A100, from the GPU catalog."""
    cat = load_catalog()
    ref = cat["A100"]
    return "; ".join(
        f"{m}: compute {cat[m].fp32_tflops / ref.fp32_tflops:.0%}, data "
        f"{cat[m].mem_bandwidth_gbps / ref.mem_bandwidth_gbps:.0%}"
        for m in ("V100M32", "T4"))


def _range(vals: list[float]) -> str:
    lo, hi = min(vals), max(vals)
    return f"{lo:+.1f}%" if abs(hi - lo) < 0.05 else f"{lo:+.1f}% to {hi:+.1f}%"


def _jct_without(sr: dict[str, Any], seed: int, switch: tuple[str, str]) -> float:
    """Mean completion time of ``seed``'s run with ``switch`` (key, label) applied."""
    return sr[f"s_{switch[0]}_{seed}"]["jct_mean_s"]


def _speed_text(saved: dict[str, Any] | None, res: dict[str, Any],
                seeds: list[int]) -> list[str]:
    """The GPU-model-speed subsection, read from the saved runs (nothing when absent)."""
    if not saved:
        return []
    sr = saved["runs"]
    seeds = [sd for sd in seeds if f"s_dwork_{sd}" in sr]
    n = len(seeds)

    onoff = ["| seed | run | completion (s) | vs off | queueing (s) | vs off | used GPU (%) "
             "| energy per task (Wh) | inference completion (s) | inference on A100s (%) "
             "| completion without model speed (s) |",
             "|---|---|" + "---:|" * 9]
    for sd in seeds:
        a = sr[f"s_off_{sd}"]
        for mode, key in (("off", "off"), ("on, speed-blind core (before)", "blind_on"),
                          ("on, speed-aware core", "on")):
            if f"s_{key}_{sd}" not in sr:
                continue
            # the blind core on tasks of equal speed is plain "on"; the aware core has no twin
            r = sr[f"s_{key}_{sd}"]
            plain = res.get(f"{'on' if key == 'blind_on' else key}_{sd}", {}) if (
                key != "on") else {}
            onoff.append(
                f"| {sd} | {mode} | {r['jct_mean_s']:,.1f} | "
                f"{_pct(a['jct_mean_s'], r['jct_mean_s'])} | {r['wait_mean_s']:,.1f} | "
                f"{_pct(a['wait_mean_s'], r['wait_mean_s'])} | "
                f"{r['used_gpu_pct']:.2f} | {r['energy_per_task_wh']:.1f} | "
                f"{r.get('jct_inference_s', float('nan')):,.1f} | "
                f"{_share(r, 'inference', 'A100')} | "
                + (f"{plain['jct_mean_s']:,.1f} |" if plain else "- |"))
    day = ["| seed | run | energy per task (Wh) | change | completion (s) | change "
           "| off-peak energy per task (Wh) | change | powered nodes |",
           "|---|---|" + "---:|" * 7]
    for sd in seeds:
        a = sr[f"s_diurnal_{sd}"]
        for name, key in (("no energy term", "diurnal"),
                          ("energy term, FP32 TFLOPS/W", "dplace"),
                          ("efficient models only (FP32 TFLOPS/W)", "defficient"),
                          ("powered servers only", "dpowered"),
                          ("energy term, per unit of work", "dwork")):
            if f"s_{key}_{sd}" not in sr:
                continue
            r = sr[f"s_{key}_{sd}"]
            day.append(
                f"| {sd} | {name} | {r['energy_per_task_wh']:.1f} | "
                f"{_pct(a['energy_per_task_wh'], r['energy_per_task_wh'])} | "
                f"{r['jct_mean_s']:,.1f} | {_pct(a['jct_mean_s'], r['jct_mean_s'])} | "
                f"{r['energy_per_task_offpeak_wh']:.1f} | "
                f"{_pct(a['energy_per_task_offpeak_wh'], r['energy_per_task_offpeak_wh'])} | "
                f"{r['powered_nodes_mean']:.2f} |")
    place_e = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_dplace_{sd}"], "energy_per_task_wh")
               for sd in seeds]
    place_t = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_dplace_{sd}"], "jct_mean_s") for sd in seeds]
    work_e = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_dwork_{sd}"], "energy_per_task_wh")
              for sd in seeds]
    work_t = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_dwork_{sd}"], "jct_mean_s") for sd in seeds]
    plain_e = [_change(res[f"diurnal_{sd}"], res[f"dplace_{sd}"], "energy_per_task_wh")
               for sd in seeds if f"dplace_{sd}" in res]
    eff_e = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_defficient_{sd}"], "energy_per_task_wh")
             for sd in seeds if f"s_defficient_{sd}" in sr]
    eff_t = [_change(sr[f"s_diurnal_{sd}"], sr[f"s_defficient_{sd}"], "jct_mean_s")
             for sd in seeds if f"s_defficient_{sd}" in sr]
    on_t = [_change(sr[f"s_off_{sd}"], sr[f"s_on_{sd}"], "jct_mean_s") for sd in seeds]
    blind_t = [_change(sr[f"s_off_{sd}"], sr[f"s_blind_on_{sd}"], "jct_mean_s") for sd in seeds
               if f"s_blind_on_{sd}" in sr]
    blind_w = [_change(sr[f"s_off_{sd}"], sr[f"s_blind_on_{sd}"], "wait_mean_s") for sd in seeds
               if f"s_blind_on_{sd}" in sr]
    on_w = [_change(sr[f"s_off_{sd}"], sr[f"s_on_{sd}"], "wait_mean_s") for sd in seeds]
    saves = sum(1 for x in place_e if x < 0)
    slower = sum(1 for x in place_t if x > 0)
    w_better = sum(1 for a, b in zip(work_e, place_e, strict=True) if a < b)
    w_faster = sum(1 for a, b in zip(work_t, place_t, strict=True) if a < b)
    load = f", machine load: {saved['load']}" if saved.get("load") else ""
    switches = (("off", "off"), ("on", "on"), ("nodefrag", "without defrag"),
                ("noprobe", "without probing"), ("nohot", "without hot-spot moves"),
                ("noelastic", "without elastic"))
    abl_seeds = [sd for sd in seeds if all(f"s_{k}_{sd}" in sr for k, _ in switches)]
    abl = ["| seed | " + " | ".join(lbl for _, lbl in switches) + " |",
           "|---|" + "---:|" * len(switches),
           *[f"| {sd} | " + " | ".join(
               f"{sr[f's_{k}_{sd}']['jct_mean_s']:,.1f} / {sr[f's_{k}_{sd}']['wait_mean_s']:.1f}"
               for k, _ in switches) + " |" for sd in abl_seeds]]
    abl_note: list[str] = []
    cat = load_catalog()
    t4_compute = cat["T4"].fp32_tflops / cat["A100"].fp32_tflops
    t4_data = cat["T4"].mem_bandwidth_gbps / cat["A100"].mem_bandwidth_gbps
    if abl_seeds:
        best = {sd: min(switches[2:], key=functools.partial(_jct_without, sr, sd))
                for sd in abl_seeds}
        abl_note = [
            "Switching off alone the mechanism whose absence shortens completion most: "
            + ", ".join(f"seed {sd}: {lbl} ({sr[f's_{k}_{sd}']['jct_mean_s']:,.1f} s)"
                        for sd, (k, lbl) in best.items())
            + (": a different one on each seed, so no single mechanism is the cause, and the "
               "differences between switches are of the size of the on-vs-off change"
               if len({k for k, _ in best.values()}) == len(best) > 1 else "")
            + ". These runs use the speed-aware core (`AdaptConfig.model_speed`).", ""]
    sens_seed = next((sd for sd in seeds if f"s_diurnal_infdata_{sd}" in sr), None)
    sens: list[str] = []
    if sens_seed is not None:
        base = sr[f"s_diurnal_infdata_{sens_seed}"]
        rows = [(lbl, sr[f"s_{k}_infdata_{sens_seed}"]) for k, lbl in (
            ("diurnal", "no energy term"), ("dplace", "energy term, FP32 TFLOPS/W"),
            ("dwork", "energy term, per unit of work"))]
        sens = [
            f"Sensitivity to the serving ASSUMPTION (seed {sens_seed}): the same diurnal "
            "runs with inference taken as data work (`SimAdaptConfig.data_classes`), so it "
            f"runs at {t4_data:.0%} of its A100 speed on a T4 instead of {t4_compute:.0%}. "
            "The `energy` term's per-work rule still sees inference as compute (it names no "
            "input node), so it too sends it to T4s:", "",
            "| run | energy per task (Wh) | change | completion (s) | change |",
            "|---|---:|---:|---:|---:|",
            *[f"| {lbl} | {r['energy_per_task_wh']:.1f} | "
              f"{_pct(base['energy_per_task_wh'], r['energy_per_task_wh'])} | "
              f"{r['jct_mean_s']:,.1f} | {_pct(base['jct_mean_s'], r['jct_mean_s'])} |"
              for lbl, r in rows], "",
            "With serving bandwidth bound the FP32 TFLOPS/W preference "
            + ("no longer saves energy" if rows[1][1]["energy_per_task_wh"]
               >= base["energy_per_task_wh"] else "still saves energy")
            + f" ({_pct(base['energy_per_task_wh'], rows[1][1]['energy_per_task_wh'])}) and "
            f"costs {_pct(base['jct_mean_s'], rows[1][1]['jct_mean_s'])} completion time.", ""]
    abl_block = (["Which mechanism costs what with model speed (each switched off alone; "
                  "completion time, mean s / queueing delay, mean s):", "", *abl, "",
                  *abl_note] if abl_seeds else [])
    return [
        "", "### With GPU model speed (`--model-speed`)", "",
        f"`PYTHONPATH=$PWD HETSCHED_TRACES=<shared>/traces {saved['command']}`: "
        f"{len(sr)} runs in {saved['wall_s']:.0f} s wall (2 at a time{load}); raw metrics "
        "in bench/results/adapt.json under `model_speed`.", "",
        "The tables above run every task as fast on a T4 as on an A100. With "
        "`SimAdaptConfig.model_speed` (`hetsched simulate --mode time --model-speed`) a "
        "task's work rate follows its GPU model, from the GPU catalog: *compute* work "
        "with FP32 TFLOPS, *data* work with memory bandwidth; a job is data work when it "
        "names an input node (rendering, workflow feature stages: the ones the mixed "
        "workload calls data intensive), else compute (training; fractional serving, an "
        "ASSUMPTION: small-batch serving taken as compute bound). Reference: a job's "
        "drawn duration is its run time on the fastest model it may use in the cluster "
        "(the A100 here, for every job: training may use A100 or V100, the rest anything). "
        "Why that one: a drawn duration cannot say where it was measured; taking the "
        "fastest makes every factor <= 1, so the model never invents a speed-up, and a "
        "move to a slower GPU costs its full datasheet ratio, the opposite bound to the "
        f"runs above. Speeds against the A100: {_ratio_text()}. Run time, work left, "
        "finish time and energy (power over the longer run) follow; busy share does not "
        "drop (a slower GPU is as busy, for longer). Figures are not comparable with the "
        "tables above in absolute terms: the same jobs are more work here.", "",
        "Adaptation on vs off, with model speed:", "", *onoff, "",
        f"On vs off with model speed, speed-aware core: completion {_range(on_t)}, "
        f"queueing delay {_range(on_w)} over the {n} seeds"
        + (f"; with the speed-blind core (before): completion {_range(blind_t)}, queueing "
           f"{_range(blind_w)}" if blind_t else "") + ".", "",
        *_core_speed_text(sr, seeds),
        *abl_block,
        "Off-peak energy placement (diurnal day, adaptation on; no consolidation moves), "
        "with model speed. *Per unit of work* = the `energy` term with `per_work=1`: "
        "bandwidth per watt for a task with an input node, FP32 TFLOPS per watt otherwise "
        "(`streams/policies/energy.py`), instead of FP32 TFLOPS per watt for every task:",
        "", *day, "",
        f"Verdict: without model speed the off-peak energy placement (its saving is the "
        f"efficient-model preference's, above) changed energy per finished task by "
        f"{_range(plain_e)}. With model speed it "
        + (f"still saves energy on {saves}/{n} seeds ({_range(place_e)})"
           if saves else f"no longer saves energy ({_range(place_e)} on every seed)")
        + f", and it costs completion time on {slower}/{n} seeds ({_range(place_t)}). "
        + (f"The efficient-model preference alone (`busy_weight=0`) changes energy per "
           f"task by {_range(eff_e)} and completion time by {_range(eff_t)}. "
           if eff_e else "")
        + f"Scored per unit of work, the term changes energy per task by {_range(work_e)} "
        f"(lower than the FP32 TFLOPS/W term on {w_better}/{n} seeds) and completion time by "
        f"{_range(work_t)} (shorter than with the FP32 TFLOPS/W term on {w_faster}/{n}).",
        *(["", *sens[:-1]] if sens else []),
    ]


def _share(r: dict[str, Any], cls: str, model: str) -> str:
    """Share of ``cls`` starts on ``model`` (from the ``placed_*`` counts), or n/a."""
    total = sum(v for k, v in r.items() if k.startswith(f"placed_{cls}_"))
    return f"{100.0 * r.get(f'placed_{cls}_{model}', 0.0) / total:.1f}" if total else "n/a"


def _core_speed_text(sr: dict[str, Any], seeds: list[int]) -> list[str]:
    """Speed-blind against speed-aware core (before/after ``AdaptConfig.model_speed``),
    adaptation off beside, on the plain and the diurnal day; figures read from the runs."""
    seeds = [sd for sd in seeds if f"s_blind_on_{sd}" in sr and f"s_dplaceoff_{sd}" in sr]
    if not seeds:
        return []
    n = len(seeds)

    rows = ["| seed | run | off-peak energy per task (Wh) | vs off | energy per task (Wh) "
            "| completion (s) | vs off | queueing (s) | used GPU (%) |",
            "|---|---|" + "---:|" * 7]
    for sd in seeds:
        a = sr[f"s_dplaceoff_{sd}"]
        for lbl, key in (("off", "dplaceoff"), ("on, speed-blind core (before)", "blind_dplace"),
                         ("on, speed-aware core", "dplace")):
            r = sr[f"s_{key}_{sd}"]
            rows.append(
                f"| {sd} | {lbl} | {r['energy_per_task_offpeak_wh']:.1f} | "
                f"{_pct(a['energy_per_task_offpeak_wh'], r['energy_per_task_offpeak_wh'])} | "
                f"{r['energy_per_task_wh']:.1f} | {r['jct_mean_s']:,.1f} | "
                f"{_pct(a['jct_mean_s'], r['jct_mean_s'])} | {r['wait_mean_s']:.1f} | "
                f"{r['used_gpu_pct']:.2f} |")
    aware_t = [sr[f"s_on_{sd}"]["jct_mean_s"] < sr[f"s_blind_on_{sd}"]["jct_mean_s"]
               for sd in seeds]
    aware_w = [sr[f"s_on_{sd}"]["wait_mean_s"] < sr[f"s_blind_on_{sd}"]["wait_mean_s"]
               for sd in seeds]
    d_e = [_change(sr[f"s_dplaceoff_{sd}"], sr[f"s_dplace_{sd}"], "energy_per_task_offpeak_wh")
           for sd in seeds]
    b_e = [_change(sr[f"s_dplaceoff_{sd}"], sr[f"s_blind_dplace_{sd}"],
               "energy_per_task_offpeak_wh") for sd in seeds]
    d_t = [_change(sr[f"s_dplaceoff_{sd}"], sr[f"s_dplace_{sd}"], "jct_mean_s") for sd in seeds]
    b_t = [_change(sr[f"s_dplaceoff_{sd}"], sr[f"s_blind_dplace_{sd}"], "jct_mean_s")
           for sd in seeds]
    inf = [(sd, sr[f"s_off_{sd}"], sr[f"s_on_{sd}"]) for sd in seeds]
    moves = [(sd, sr[f"s_on_{sd}"], sr[f"s_blind_on_{sd}"]) for sd in seeds]
    return [
        "*Speed-blind core (before)* = the core's moves as they were: a classified probe "
        "moves to the most energy-efficient half of the models for its kind (TFLOPS or "
        "bandwidth per watt: a T4 for compute work) and hot-spot, throttle and "
        "defragmentation moves go wherever placement puts them, judged as if every model "
        "ran the task alike. *Speed-aware core* = `AdaptConfig.model_speed` "
        "(`HETSCHED_MODEL_SPEED=1`; `streams/core/adapt/speed.py`): the core takes declared "
        "durations as run times on the fastest allowed model, ranks the allowed models by "
        "`(1 - a) x run time + a x energy per unit of work` (both relative to the best), "
        "with `a` from the hour's objectives (the `energy` term's model part against the "
        "`completion_time` term; 0 without an energy term, so at peak and in the plain-day "
        "runs the fastest model wins; 1 off peak in the diurnal runs, whose off-peak rule "
        "has `energy` and no `completion_time`), places the probe's real allocation and "
        "the destinations of moves in that order, judges hot-spot and throttle moves at the "
        "destination's speed against the source's (no move onto a slower model) and adds "
        "the GPU time its moved tasks lose on slower models to defragmentation's cost. "
        "Off by default: without it the core decides as before (checked when it was added: "
        "`bench/adapt.py --only off,on,on_43,on_44,on_thr,fail_on,dplace_42,dcons_42` gave "
        "the figures of the tables above again, the issue-7 time-mode runs `mixed` and "
        "`mixed-load1.3-objectives` the same summary.json, and the pinned replay heads of "
        "tests/audit are unchanged).", "",
        f"Speed-aware against speed-blind core, plain day: completion shorter on "
        f"{sum(aware_t)}/{n} seeds, queueing shorter on {sum(aware_w)}/{n}; moves: "
        + ", ".join(f"seed {sd}: {a.get('migrations', 0.0):.0f} (hot spot "
                    f"{a.get('moves_hot_spot', 0.0):.0f}, defragment "
                    f"{a.get('moves_defragment', 0.0):.0f}) vs {b.get('migrations', 0.0):.0f} "
                    f"({b.get('moves_hot_spot', 0.0):.0f}, {b.get('moves_defragment', 0.0):.0f})"
                    for sd, a, b in moves) + ".", "",
        "What is left of the completion gap shows in where the placement profile "
        "(speed-blind, the same with adaptation on or off) puts the many short inference "
        "tasks, which make most of the mean. Inference started on A100s "
        + ", ".join(f"seed {sd}: {_share(a, 'inference', 'A100')}% off, "
                    f"{_share(b, 'inference', 'A100')}% on (inference completion "
                    f"{a.get('jct_inference_s', 0.0):,.0f} s vs "
                    f"{b.get('jct_inference_s', 0.0):,.0f} s)" for sd, a, b in inf)
        + ". Adaptation changes which GPUs are free when inference arrives (growth, "
        "defragmentation, earlier starts), and the profile, which does not weigh speed, "
        "then puts more of it on V100s and T4s, 1.2-2.4x slower for compute work (not "
        "traced further: which of the mechanisms shifts it differs by seed). A peak-hour "
        "`completion_time` objective in placement, or a speed term in the profile, would "
        "be the place to act; not measured here.", "",
        "Diurnal day with the off-peak `energy` objective (`energy` 0.5 beside `hetsched`, "
        "FP32 TFLOPS/W), adaptation off and on, with model speed:", "", *rows, "",
        f"Off-peak energy per finished task, on vs off: speed-aware core {_range(d_e)}, "
        f"speed-blind {_range(b_e)}; mean completion, on vs off: speed-aware {_range(d_t)}, "
        f"speed-blind {_range(b_t)}.", "",
        *_diurnal_plain(sr, seeds),
    ]


def _diurnal_plain(sr: dict[str, Any], seeds: list[int]) -> list[str]:
    """Speed-blind against speed-aware core on the diurnal day without the energy term."""
    seeds = [sd for sd in seeds if f"s_blind_diurnal_{sd}" in sr]
    if not seeds:
        return []
    rows = ["| seed | core | completion (s) | change | queueing (s) | energy per task (Wh) "
            "| change | off-peak energy per task (Wh) | change |", "|---|---|" + "---:|" * 7]
    for sd in seeds:
        a = sr[f"s_blind_diurnal_{sd}"]
        for lbl, r in (("speed-blind (before)", a), ("speed-aware", sr[f"s_diurnal_{sd}"])):
            rows.append(
                f"| {sd} | {lbl} | {r['jct_mean_s']:,.1f} | "
                f"{_pct(a['jct_mean_s'], r['jct_mean_s'])} | {r['wait_mean_s']:.1f} | "
                f"{r['energy_per_task_wh']:.1f} | "
                f"{_pct(a['energy_per_task_wh'], r['energy_per_task_wh'])} | "
                f"{r['energy_per_task_offpeak_wh']:.1f} | "
                f"{_pct(a['energy_per_task_offpeak_wh'], r['energy_per_task_offpeak_wh'])} |")
    def ch(key: str) -> list[float]:
        return [100.0 * (sr[f"s_diurnal_{sd}"][key] / sr[f"s_blind_diurnal_{sd}"][key] - 1.0)
                for sd in seeds]

    t = ch("jct_mean_s")
    return ["Diurnal day without the `energy` term (adaptation on; so `a` = 0 all day):",
            "", *rows, "",
            f"Speed-aware against speed-blind core here: completion shorter on "
            f"{sum(1 for x in t if x < 0)}/{len(seeds)} seeds ({_range(t)}), energy per task "
            f"{_range(ch('energy_per_task_wh'))}, off-peak energy per task "
            f"{_range(ch('energy_per_task_offpeak_wh'))}.", ""]


def _notes(res: dict[str, Any], seeds: list[int], seed: int) -> list[str]:
    """The explanation under the tables; every figure in it is read from the runs."""
    on, off = res["on"], res["off"]

    moves_help = sum(1 for sd in seeds if res[f"dcons_{sd}"]["energy_per_task_wh"]
                     < res[f"dplace_{sd}"]["energy_per_task_wh"])
    moves_help_off = sum(1 for sd in seeds if res[f"dcons_{sd}"]["energy_per_task_offpeak_wh"]
                         < res[f"dplace_{sd}"]["energy_per_task_offpeak_wh"])
    nd, orig = res["no_defrag"], res[f"orig_{seed}"]
    slots_wait = sum(1 for sd in seeds if res[f"on_{sd}"]["wait_mean_s"]
                     < res[f"origd_{sd}"]["wait_mean_s"])
    slots_jct = sum(1 for sd in seeds if res[f"on_{sd}"]["jct_mean_s"]
                    < res[f"origd_{sd}"]["jct_mean_s"])
    waits = ", ".join(
        f"{sd}: {_pct(res[f'off_{sd}']['wait_mean_s'], res[f'on_{sd}']['wait_mean_s'])}"
        for sd in seeds)
    return [
        f"What does what (seed {seed}, ablation table): **defragmentation** is what shortens "
        f"queueing. Without it the mean wait is {nd['wait_mean_s']:.1f} s instead of "
        f"{on['wait_mean_s']:.1f} s (off: {off['wait_mean_s']:.1f} s). The jobs that wait "
        "longest are 8-GPU training jobs waiting for a whole node, and the nodes closest to "
        "empty are often held by a few short fractional inference tasks, cheap to move "
        "(little state); moving them frees whole GPUs for the head of the queue. The "
        "**slot rules** target the harm found before: growth into a free pair or quad "
        "of a busy node sent the next 2- or 4-GPU arrival onto an idle node, so fewer nodes "
        "ever emptied; a reclaim the queued task could not use started a shrink/regrow "
        "cycle; hot-spot moves put whole-GPU tasks on idle nodes, turning one full and one "
        "idle node into two half-used ones. Measured, they matter less than that "
        "diagnosis suggested. Alone they do not shorten queueing (seed "
        f"{seed} without defragmentation: {nd['wait_mean_s']:.1f} s with them, "
        f"{orig['wait_mean_s']:.1f} s with the original rules); with defragmentation they "
        f"beat the original rules plus defragmentation on queueing on {slots_wait}/"
        f"{len(seeds)} seeds and on completion on {slots_jct}/{len(seeds)}, so most of the "
        "gain is defragmentation's. What they surely remove is resize churn (up "
        f"{on['resizes_up']:.0f} vs {orig['resizes_up']:.0f}, down {on['resizes_down']:.0f} "
        f"vs {orig['resizes_down']:.0f}) and the consolidation/hot-spot flapping below; "
        "hot-spot moves, now onto busy nodes only, are more frequent "
        f"({on.get('moves_hot_spot', 0.0):.0f} vs {orig.get('moves_hot_spot', 0.0):.0f}): "
        "a task moved onto a busy node can make it the next hot spot. "
        "The rarer growth still shortens completion: without elastic resizing the mean is "
        f"{res['no_elastic']['jct_mean_s']:.1f} s, with it {on['jct_mean_s']:.1f} s. "
        "Used GPU utilisation rises because waiting work starts earlier and more of it "
        "falls within the simulated day (the work itself is the same). "
        "Probing in place (tasks of 2 or more GPUs are classified where they run instead "
        "of on half a GPU and then moved to their full shape, a second placement of a big "
        "shape that may find no room) matters little here: probes are learnt per tenant "
        f"and class, so a day has {on['probes']:.0f} of them.", "",
        f"Queueing delay, on vs off, by seed: {waits}. Its seed-to-seed spread is large "
        "(a different whole-node job waits at a different moment), so a small change on "
        "one seed is within that noise; the direction holds on every seed.", "",
        "Consolidation: off-peak *placement* gives most of the saving, and the split "
        "above shows where it comes from: the efficient-model preference, not powered "
        "servers. Work that may run anywhere (inference, rendering, workflow feature "
        "stages) goes to T4s (70 W) rather than A100s (400 W) and V100s (300 W). "
        "ASSUMPTION behind the size of this saving: in these runs job durations do not "
        "depend on the GPU model, so a T4 runs such a task as fast as an A100 and sending "
        "work there looks free: the saving is an upper bound, and may be an artefact. The "
        "subsection *With GPU model speed* below measures it with slower GPUs slower (and "
        "what it costs in completion time). The preference for "
        "already-powered servers alone saves nothing measurable: the mean number of "
        "powered servers barely moves, because whole-GPU training started at peak "
        "(3-12 h runs) pins most servers through the night and an emptied server stays "
        "powered for the 10-minute power-down delay. The *moves* add to placement on "
        f"{moves_help}/{len(seeds)} seeds overall and {moves_help_off}/{len(seeds)} "
        "off-peak; with the fixed hot-spot rule they no longer flap (before, a hot-spot "
        "move put a consolidated task back on the node consolidation had just emptied).",
    ]


if __name__ == "__main__":
    sys.exit(main())
