"""Packing benchmark: fidelity vs the published FGD-paper numbers, quality, speed.

Run from the project root (traces come from ../shared/traces or $HETSCHED_TRACES):

    .venv/bin/python bench/packing.py runs --jobs 2          # all traces x seeds x policies
    .venv/bin/python bench/packing.py speed                  # run time, latency, memory
    .venv/bin/python bench/packing.py render                 # rewrite BENCHMARKS.md section

``runs`` and ``speed`` store their raw numbers in bench/results/*.json so that
``render`` can rewrite only the packing section of BENCHMARKS.md (between
the ``packing:start``/``packing:end`` markers) without re-running anything.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
RUNS_FILE = RESULTS / "packing-runs.json"
SPEED_FILE = RESULTS / "packing-speed.json"
BENCHMARKS = ROOT / "BENCHMARKS.md"
START, END = "<!-- packing:start -->", "<!-- packing:end -->"
NODES = "openb_node_list_gpu_node.csv"
SEEDS = tuple(range(42, 52))
TUNE = 1.3
BASELINES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
DETERMINISTIC = BASELINES[1:]

# docs/packing-benchmark.md §6: mean of 10 seeds, allocation % at 100 / 130 % arrived.
PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {}
_TABLE = """
default 86.30 87.47 90.62 90.85 91.65 91.88 91.78 92.00 92.86 93.08 95.23 95.39
gpushare40 84.86 86.00 89.30 89.56 89.76 90.02 89.77 90.03 91.44 91.69 93.96 94.15
gpushare60 82.81 83.65 86.82 87.11 86.90 87.20 87.15 87.45 89.06 89.36 91.25 91.40
gpushare80 80.62 81.22 84.14 84.49 84.50 84.85 84.65 85.00 86.66 87.01 89.08 89.30
multigpu20 86.92 88.69 91.85 92.06 93.34 93.56 93.50 93.71 93.73 93.93 95.53 95.65
multigpu30 86.63 89.27 93.11 93.28 94.55 94.72 94.70 94.87 94.57 94.72 96.36 96.46
multigpu40 85.38 90.09 94.04 94.19 95.35 95.50 95.59 95.74 95.10 95.23 96.91 96.99
cpu050 89.02 91.24 93.03 93.27 93.52 93.79 93.46 93.72 93.56 93.79 95.00 95.21
cpu100 87.44 89.11 91.73 91.95 92.42 92.64 92.50 92.72 93.26 93.44 95.21 95.35
cpu200 83.03 83.77 87.45 87.70 89.67 89.92 89.98 90.22 92.15 92.40 94.82 95.05
gpuspec10 86.26 87.43 90.17 90.39 91.96 92.18 92.24 92.46 93.10 93.30 94.66 94.95
gpuspec20 85.90 87.24 88.29 89.97 89.11 92.25 89.28 92.94 88.46 93.30 94.66 94.84
gpuspec25 85.42 86.94 85.44 89.63 86.41 92.08 86.77 92.98 85.67 93.23 93.91 94.74
"""
for _line in _TABLE.strip().splitlines():
    _name, *_vals = _line.split()
    PUBLISHED[_name] = {
        p: (float(_vals[2 * i]), float(_vals[2 * i + 1])) for i, p in enumerate(BASELINES)
    }
TRACES = tuple(PUBLISHED)


def _run(job: tuple[str, str, int]) -> tuple[str, str, int, float | None, float | None, float]:
    from streams.sim.packing import run_packing
    from streams.sim.traces import read_nodes, read_tasks

    trace, policy, seed = job
    nodes = read_nodes(NODES)
    tasks = read_tasks(f"openb_pod_list_{trace}.csv")
    t0 = time.perf_counter()
    r = run_packing(nodes, tasks, policy, seed, TUNE)
    wall = time.perf_counter() - t0
    p100, p130 = r.at(100), r.at(130)
    return (trace, policy, seed, None if p100 is None else p100.alloc_pct,
            None if p130 is None else p130.alloc_pct, wall)


def cmd_runs(args: argparse.Namespace) -> None:
    """Run traces x policies x seeds; merge into bench/results/packing-runs.json."""
    from tqdm import tqdm

    data = json.loads(RUNS_FILE.read_text()) if RUNS_FILE.exists() else {"runs": {}}
    jobs = [(t, p, s) for t in args.traces for p in args.policies for s in args.seeds]
    with mp.get_context("fork").Pool(args.jobs) as pool:
        for trace, policy, seed, a100, a130, wall in tqdm(
            pool.imap_unordered(_run, jobs), total=len(jobs), unit="run"
        ):
            data["runs"][f"{trace}/{policy}/{seed}"] = [a100, a130, round(wall, 3)]
            RESULTS.mkdir(parents=True, exist_ok=True)
            RUNS_FILE.write_text(json.dumps(data, indent=0, sort_keys=True))
    data["date"] = args.date
    data["machine"] = f"{platform.processor() or platform.machine()}, {mp.cpu_count()} cores"
    RUNS_FILE.write_text(json.dumps(data, indent=0, sort_keys=True))


def _means(runs: dict, trace: str, policy: str) -> tuple[float, float, int] | None:
    vals = [v for s in SEEDS if (v := runs.get(f"{trace}/{policy}/{s}"))
            and v[0] is not None and v[1] is not None]
    if not vals:
        return None
    return (statistics.fmean(v[0] for v in vals), statistics.fmean(v[1] for v in vals), len(vals))


def render_fidelity(runs: dict) -> str:
    head = "| trace | " + " | ".join(BASELINES) + " |"
    lines = [head, "|---|" + "---|" * len(BASELINES)]
    worst = 0.0
    for t in TRACES:
        cells = []
        for p in BASELINES:
            m = _means(runs, t, p)
            pub = PUBLISHED[t][p]
            if m is None:
                cells.append("n/a")
                continue
            d = max(abs(m[0] - pub[0]), abs(m[1] - pub[1]))
            if p in DETERMINISTIC:
                worst = max(worst, d)
            cells.append(f"{m[0]:.2f} / {m[1]:.2f} ({pub[0]:.2f} / {pub[1]:.2f})")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Largest gap of a deterministic baseline's 10-seed mean: {worst:.3f} pp.")
    return "\n".join(lines)


def render_quality(runs: dict) -> str:
    lines = ["| trace | FGD published | FGD ours | hetsched | gain vs published FGD at 130 % "
             "| unallocated-GPU reduction vs FGD at 130 % |", "|---|---|---|---|---|---|"]
    for t in TRACES:
        pub = PUBLISHED[t]["fgd"]
        ours = _means(runs, t, "fgd")
        het = _means(runs, t, "hetsched")
        if het is None:
            continue
        gain = het[1] - pub[1]
        red = 100 * ((100 - pub[1]) - (100 - het[1])) / (100 - pub[1])
        fgd_cell = f"{ours[0]:.2f} / {ours[1]:.2f}" if ours else "n/a"
        lines.append(
            f"| {t} | {pub[0]:.2f} / {pub[1]:.2f} | {fgd_cell} | {het[0]:.2f} / {het[1]:.2f} "
            f"| {gain:+.2f} pp | {red:.1f} % |"
        )
    return "\n".join(lines)


def cmd_speed(args: argparse.Namespace) -> None:
    """Single-core run time, placement latency and state memory."""
    import numpy as np

    from streams.core.profile import get_profile
    from streams.core.scheduler import place
    from streams.policies.fragmentation import TypicalTasks
    from streams.profiles.compile import compile_profile
    from streams.sim.packing import new_state, run_packing
    from streams.sim.traces import NodeSpec, read_nodes, read_tasks
    from streams.sim.workload import build_workload

    nodes = read_nodes(NODES)
    tasks = read_tasks("openb_pod_list_default.csv")
    out: dict = {"date": args.date, "repeat": args.repeat,
                 "machine": f"{platform.processor() or platform.machine()}, shared, "
                            f"load average {os.getloadavg()[0]:.1f} at start"}
    # The bench machine is shared: CPU time (process/thread clocks) is what one core
    # spends; wall time is recorded too.
    for policy in ("fgd", "hetsched", "bestfit"):
        walls, cpus, lats = [], [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            r = run_packing(nodes, tasks, policy, 42, TUNE, record_latency=True,
                            clock=time.thread_time)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            assert r.latency_s is not None  # record_latency=True
            lats.append(r.latency_s)
        lat = np.min(np.stack(lats), axis=0) * 1e3
        out[f"run_{policy}"] = {
            "wall_s_min": round(min(walls), 3), "cpu_s_min": round(min(cpus), 3),
            "arrivals": r.arrivals,
            "p50_ms": round(float(np.percentile(lat, 50)), 3),
            "p99_ms": round(float(np.percentile(lat, 99)), 3),
            "max_ms": round(float(lat.max()), 3),
        }
    # 100k-GPU cluster: the node list replicated, loaded to ~100 % with the default mix.
    reps = -(-100_000 // sum(n.gpu_count for n in nodes))
    big = [NodeSpec(f"{n.name}-r{k:02d}", n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
           for k in range(reps) for n in nodes]
    gpus = sum(n.gpu_count for n in big)
    typical = TypicalTasks.from_tasks(tasks)
    wl = build_workload(tasks, len(big), gpus, 1.0, 42)
    state = new_state(big, wl.ranks)
    sched = compile_profile(get_profile("hetsched"), {"typical": typical})
    lat = []
    for i, task in enumerate(wl.arrivals[: args.big_arrivals]):
        t0 = time.thread_time()
        res = place(state, sched, task, explain=True)
        lat.append(time.thread_time() - t0)
        if res.node >= 0:
            state.allocate(task, res.node, res.gpus, task_id=f"{i}")
    # Fill to the full workload (not timed) to measure memory with ~all tasks placed.
    for i, task in enumerate(wl.arrivals[args.big_arrivals:], start=args.big_arrivals):
        res = place(state, sched, task, explain=False)
        if res.node >= 0:
            state.allocate(task, res.node, res.gpus, task_id=f"{i}")
    lat_ms = np.array(lat) * 1e3
    cache_bytes = _cache_bytes(state.cache)
    out["big"] = {
        "nodes": len(big), "gpus": gpus, "timed_arrivals": len(lat),
        "p50_ms": round(float(np.percentile(lat_ms, 50)), 3),
        "p99_ms": round(float(np.percentile(lat_ms, 99)), 3),
        "tasks": len(state.task_slot),
        "state_mb": round(state.nbytes() / 2**20, 1),
        "task_index_mb": round(_dict_bytes(state.task_slot) / 2**20, 1),
        "cache_mb": round(cache_bytes / 2**20, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    SPEED_FILE.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


def _dict_bytes(d: dict) -> int:
    return sys.getsizeof(d) + sum(sys.getsizeof(k) for k in d)


def _cache_bytes(obj: object) -> int:
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_cache_bytes(v) for v in obj.values())
    slots = getattr(type(obj), "__slots__", ())
    attrs = list(getattr(obj, "__dict__", {}).values()) + [getattr(obj, s) for s in slots]
    return sum(_cache_bytes(v) for v in attrs if isinstance(v, np.ndarray | dict))


def render_speed(sp: dict) -> str:
    lines = ["| measurement | value |", "|---|---|"]
    for policy in ("fgd", "hetsched", "bestfit"):
        r = sp.get(f"run_{policy}")
        if r:
            lines.append(f"| one 130 % run of default, {policy} ({r['arrivals']} arrivals, 1,213 "
                         f"nodes, 6,212 GPUs), best of {sp.get('repeat', 3)}: CPU time (wall) "
                         f"| {r['cpu_s_min']:.2f} s ({r['wall_s_min']:.2f} s) |")
            lines.append(f"| placement latency p50 / p99 / max (CPU time), {policy}, 6,212 GPUs "
                         f"| {r['p50_ms']:.3f} / {r['p99_ms']:.3f} / {r['max_ms']:.2f} ms |")
    b = sp.get("big")
    if b:
        lines.append(f"| placement latency p50 / p99 (CPU time), hetsched with reasons, "
                     f"{b['gpus']:,} GPUs "
                     f"({b['nodes']:,} nodes), first {b['timed_arrivals']:,} arrivals "
                     f"| {b['p50_ms']:.3f} / {b['p99_ms']:.3f} ms |")
        lines.append(f"| core state arrays for {b['gpus']:,} GPUs and {b['tasks']:,} tasks "
                     f"| {b['state_mb']} MB (+ task-name index {b['task_index_mb']} MB, "
                     f"score caches {b['cache_mb']} MB) |")
    return "\n".join(lines)


def cmd_render(args: argparse.Namespace) -> None:
    runs = json.loads(RUNS_FILE.read_text()) if RUNS_FILE.exists() else {"runs": {}}
    sp = json.loads(SPEED_FILE.read_text()) if SPEED_FILE.exists() else {}
    section = "\n".join([
        START,
        "## Packing (FGD / openb protocol)",
        "",
        "Protocol: docs/packing-benchmark.md (tune 1.3, seeds 42-51, bit-exact Go "
        "math/rand stream, node list `openb_node_list_gpu_node.csv`).",
        f"Runs: {runs.get('date', 'n/a')} on {runs.get('machine', 'n/a')}; "
        f"speed: {sp.get('date', 'n/a')} on {sp.get('machine', 'n/a')}.",
        "",
        "Reproduce:",
        "",
        "```",
        ".venv/bin/python bench/packing.py runs --jobs 2   # ~13 traces x 10 seeds x 7 policies",
        ".venv/bin/python bench/packing.py speed",
        ".venv/bin/python bench/packing.py render",
        "# one trace, any policies, with curve.csv / allocation.png / decision logs:",
        "hetsched simulate --nodes openb_node_list_gpu_node.csv "
        "--tasks openb_pod_list_default.csv \\",
        "    --policies fgd,bestfit,hetsched --seeds 42-51 --tune 1.3 --out out/default",
        "```",
        "",
        "### Fidelity: ours vs published, 10-seed mean allocation % at 100 / 130 % arrived",
        "",
        "Each cell: ours (published). The published per-seed values are not in our "
        "reference (docs/packing-benchmark.md §6 gives 10-seed means only), so per-seed "
        "equality is not checked directly; every deterministic mean agrees to the rounding "
        "of the published figure (largest gap below), which is what exact per-seed "
        "reproduction gives. Random is not reproducible in the published runs (§7). The "
        "one gap found on the way (gpuspec10 FGD, 0.03 pp) came from normalising the "
        "typical-task probabilities as count/kept instead of (count/total)/(kept/total).",
        "",
        render_fidelity(runs["runs"]),
        "",
        "### Quality: hetsched vs FGD (10-seed means, allocation % at 100 / 130 % arrived)",
        "",
        "Unallocated-GPU reduction = 1 - (100 - hetsched) / (100 - published FGD) at 130 %.",
        "",
        render_quality(runs["runs"]),
        "",
        "How hetsched works and what was measured on the way (default trace, seeds 42-43, "
        "allocation % at 130 %): FGD 95.31; FGD ties broken by best-fit instead of the random "
        "rank 95.32, by worst-fit 89.82; exact (untruncated) fragmentation change 91.68; "
        "a CPU-aware fragmentation measure (copies of each typical task the node's CPU can "
        "feed) 95.60; FGD + GPUs stranded by CPU (hetsched's term) 95.94, with a sharper "
        "sigmoid (scale 500) 95.99; + stranded memory 95.99 (not kept); tie-break by GPU "
        "power 95.99 (neutral, not kept). The model-scarcity term fixed the one regression "
        "(gpuspec25 at 100 %: 92.77 without it, 95.81 with it; FGD 93.88).",
        "",
        "Why not 97 % on default: at 130 % about three quarters of hetsched's unallocated "
        "capacity sits in 100-199 milli slivers next to 0.81-GPU tasks (13 % of tasks, "
        "14 % of GPU demand); only tasks of at most 0.19 GPU (1.3 % of tasks) fit there, and "
        "the protocol places every task that fits, so those slivers are structural for any "
        "policy that does not refuse feasible work.",
        "",
        "### Speed and memory (single core)",
        "",
        f"Measured {sp.get('date', '?')} on the shared 2-core VM "
        f"({sp.get('machine', 'machine not recorded')}), best of {sp.get('repeat', '?')} "
        "runs; CPU time (`time.process_time`, per placement `time.thread_time`) is "
        "reported because wall time on a shared machine also counts waiting for a core. "
        "Targets: one 130 % run <= 3 s, placement p99 <= 2 ms at 6,212 GPUs and <= 20 ms "
        "at 100,000 GPUs, core state < 200 MB for 100,000 GPUs; issue 36's: one run <= "
        "0.5 s for fgd and hetsched, p99 <= 2 ms at 100,000 GPUs with reasons. Since "
        "2026-12-07 FGD's fragmentation, the fgd, hetsched and bestfit scores and the "
        "scheduler's scoring pass are in the compiled core (docs/core.md): one run (seed 42, "
        "fresh processes, alternated with the pure-Python tree 4b18505, best of 3) took 0.34 "
        "x (fgd), 0.33 x (hetsched) and 0.46 x (bestfit) the CPU, with the same decisions on "
        "all 13 traces x 10 seeds. Since 2026-12-08 a reason's top-k (engine version 2: "
        "numpy's argpartition chose among ties by the CPU) and the node classes are too: at "
        "100k GPUs, alternated with 24c96fe on one core, p50 0.14-0.19 ms against 1.6-1.7 "
        "and p99 1.7-2.0 ms against 6.6-6.7; with the entry written through slices when "
        "every node is re-scored, 1.4-1.6 ms in two runs of this script (the p99 is a new "
        "task shape: every node grouped, its classes scored, the entry rewritten); "
        "placements unchanged on the 13 x 10 runs. The "
        "100k-GPU cluster is the node list replicated 17 times, loaded with the default "
        "mix at tune 1.0; its first placements are timed and the rest fill it for the "
        "memory figure.",
        "",
        render_speed(sp),
        END,
    ])
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else "# Benchmarks\n\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    BENCHMARKS.write_text(text)
    print(f"wrote {BENCHMARKS.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("runs")
    r.add_argument("--traces", default=",".join(TRACES), type=lambda s: s.split(","))
    r.add_argument("--policies", default=",".join((*BASELINES, "hetsched")),
                   type=lambda s: s.split(","))
    r.add_argument("--seeds", default=SEEDS,
                   type=lambda s: [int(x) for x in s.split(",")])
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    r.set_defaults(fn=cmd_runs)
    s = sub.add_parser("speed")
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--big-arrivals", type=int, default=3000)
    s.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    s.set_defaults(fn=cmd_speed)
    w = sub.add_parser("render")
    w.set_defaults(fn=cmd_render)
    args = p.parse_args(argv)
    # As every hetsched command runs (schemas/malloc_tuning.py): the timings are the CLI's.
    from schemas.malloc_tuning import keep_large_blocks_in_heap

    keep_large_blocks_in_heap()
    args.fn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
