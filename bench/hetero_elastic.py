"""Issue 35's elastic target: Gavel's workload with multi-GPU elastic jobs and restart costs.

Gavel's continuous-single files give every job one GPU and no restart cost, so neither
elasticity nor its price can show there. This script makes the multi-GPU variant the
way Gavel's own generator does (``scheduler/utils.py``, ``generate_multi_gpu_jobs``),
from the same jobs:

- each job draws its scale factor from Gavel's Philly distribution
  (``_generate_scale_factor``: 1 GPU with probability 0.7, 2 with 0.1, 4 with 0.15,
  8 with 0.05; a seeded ``random.Random``, as Gavel's); a job type that Gavel measured
  on one GPU only keeps 1 (Gavel redraws the type instead, which would change the jobs);
- its duration on a V100 at that scale is the file's (Gavel draws the duration for the
  job's scale), so its steps are ``duration x throughput(V100, type, scale)``; its run
  time on each model at its scale, ``duration_s@MODEL``, and on one GPU,
  ``duration1_s@MODEL``, follow from Gavel's measured throughputs
  (``<traces>/hetero/gavel-throughputs-isolated.csv``); a model Gavel has no figure for
  at that scale cannot run the job (the one-GPU figure is then dropped too);
- a multi-GPU job is elastic: ``min_gpus`` 1, ``max_gpus`` its scale (the simulator
  interpolates the rate between the measured one-GPU and full-scale rates);
- ``restart_s`` is blank: every preemption, move, resize or round off costs the
  simulator's default (40 s for up to 8 GPUs, Lucid's checkpoint overhead), for every
  policy alike;
- the cluster is Gavel's 36 + 36 + 36 GPUs in servers of 4 (a 4-GPU cloud instance of
  each type), so a 2- or 4-GPU job fits one server and an 8-GPU job spans two.

Then it runs ``python -m streams.cli simulate --mode time`` on the variant for hetsched
and hetsched-fcfs (learned speeds) and ``gavel-las`` (which runs each job at its
scale factor: Gavel's policies do not resize) and prints the window JCT and its ratio
(issue 35: hetsched <= 0.8 x ``gavel-las`` where jobs carry elastic ranges and restart
costs). At 4.8 jobs/h the variant asks for more than the cluster can do (its jobs'
GPU-time on their fastest model is 109 % of the cluster's, counting every GPU as fast
as that model; the single-GPU file's is 66 %), so its JCTs measure which jobs a policy
lets wait.

    python bench/hetero_elastic.py                 # rates 2.8 and 4.8, ~20 min on 2 cores
    python bench/hetero_elastic.py --write out/elastic --rates 2.8   # only the files
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.sim.traces import traces_dir  # noqa: E402

RATES = ("2.8", "4.8")
POLICIES = ("hetsched", "hetsched-fcfs", "gavel-las")
SEED = 0
"""The scale factors' seed (Gavel's sweeps use seed 0 too)."""
GPUS_PER_SERVER = 4
MODEL_COLUMNS = {"V100M16": "throughput_v100", "P100": "throughput_p100",
                 "K80": "throughput_k80"}
"""The workload's models and their columns in Gavel's throughput table."""
REFERENCE = "V100M16"
"""Gavel's ``reference_worker_type``: the model a job's drawn duration is on."""


def scale_factor(rng: random.Random) -> int:
    """Gavel's ``_generate_scale_factor`` (the Philly distribution), verbatim in effect."""
    r = rng.uniform(0, 1)
    if 0.7 <= r <= 0.8:
        return 2
    if 0.8 <= r <= 0.95:
        return 4
    if r >= 0.95:
        return 8
    return 1


def read_throughputs(path: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(job type, scale factor) -> model -> steps/s alone; models without a figure left out."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            tp = {m: float(row[c]) for m, c in MODEL_COLUMNS.items()
                  if row.get(c) and float(row[c]) > 0}
            out[(row["job_type"], int(row["scale_factor"]))] = tp
    return out


def elastic_rows(jobs_csv: Path, tput: dict[tuple[str, int], dict[str, float]],
                 seed: int = SEED) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of the multi-GPU elastic variant of one of Gavel's files."""
    rng = random.Random(seed)
    with jobs_csv.open(newline="") as f:
        reader = csv.DictReader(f)
        base = [c for c in reader.fieldnames or [] if not c.startswith("duration_s@")]
        rows = list(reader)
    header = [*base, *(f"duration_s@{m}" for m in MODEL_COLUMNS),
              *(f"duration1_s@{m}" for m in MODEL_COLUMNS), "min_gpus", "max_gpus"]
    out: list[dict[str, str]] = []
    for row in rows:
        kind = row["task_class"]
        n = scale_factor(rng)
        if (kind, n) not in tput or REFERENCE not in tput[(kind, n)]:
            n = 1  # Gavel measured this type on one GPU only
        at_n, at_1 = tput[(kind, n)], tput[(kind, 1)]
        steps = float(row[f"duration_s@{REFERENCE}"]) * at_n[REFERENCE]  # V100 time at n
        run = {m: steps / at_n[m] for m in MODEL_COLUMNS if m in at_n}
        one = {m: steps / at_1[m] for m in run if m in at_1}
        new = {k: row[k] for k in base}
        new.update(num_gpus=str(n), duration_s=f"{min(run.values()):.2f}", restart_s="",
                   min_gpus="1" if n > 1 else "", max_gpus=str(n) if n > 1 else "")
        for m in MODEL_COLUMNS:
            new[f"duration_s@{m}"] = f"{run[m]:.2f}" if m in run else ""
            new[f"duration1_s@{m}"] = f"{one[m]:.2f}" if n > 1 and m in one else ""
        out.append(new)
    return header, out


def write_variant(rate: str, hetero: Path, out_dir: Path, seed: int = SEED) -> tuple[Path, Path]:
    """Write the elastic jobs of ``rate`` and the 4-GPU-server node list; their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    header, rows = elastic_rows(hetero / f"gavel-continuous-single-rate{rate}.csv",
                                read_throughputs(hetero / "gavel-throughputs-isolated.csv"),
                                seed)
    jobs = out_dir / f"gavel-elastic-rate{rate}.csv"
    with jobs.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    nodes = out_dir / "nodes-gavel-elastic.csv"
    write_servers(hetero / "nodes-gavel-36-36-36.csv", nodes)
    return jobs, nodes


def write_servers(one_gpu_nodes: Path, out: Path, per_server: int = GPUS_PER_SERVER) -> None:
    """Gavel's one-GPU servers regrouped into servers of ``per_server`` GPUs of a model."""
    counts: dict[str, int] = {}
    with one_gpu_nodes.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        counts[r["model"]] = counts.get(r["model"], 0) + int(r["gpu"])
    cpu, mem = int(rows[0]["cpu_milli"]), int(rows[0]["memory_mib"])
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for model, n in counts.items():
            for i in range(-(-n // per_server)):
                gpus = min(per_server, n - i * per_server)
                w.writerow([f"{model.lower()}-{i:02d}", cpu * gpus, mem * gpus, gpus, model])


def run(policy: str, jobs: Path, nodes: Path) -> dict[str, float]:
    """One simulation process; its summary for ``policy``."""
    with tempfile.TemporaryDirectory() as out:
        speeds = [] if policy.startswith("gavel") else ["--speeds", "learned"]
        subprocess.run([sys.executable, "-m", "streams.cli", "simulate", "--mode", "time",
                        "--jobs", str(jobs), "--nodes", str(nodes), "--policies", policy,
                        *speeds, "--out", out, "--no-progress"],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads((Path(out) / "summary.json").read_text())["summary"][policy]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default=",".join(RATES))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--traces", type=Path, default=None,
                        help="traces directory (default: $HETSCHED_TRACES or ../shared/traces)")
    parser.add_argument("--write", type=Path, default=None,
                        help="only write the variant's files into this directory")
    args = parser.parse_args(argv)
    hetero = (args.traces or traces_dir()) / "hetero"
    if args.write is not None:
        for rate in args.rates.split(","):
            print(*write_variant(rate, hetero, args.write))
        return 0
    print("| jobs/h | policy | window JCT (h) | x gavel-las | preemptions / job | sim s |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates.split(","):
            jobs, nodes = write_variant(rate, hetero, Path(tmp))
            results = {p: run(p, jobs, nodes) for p in args.policies.split(",")}
            ref = results.get("gavel-las")
            for policy, s in results.items():
                ratio = ("" if ref is None or policy == "gavel-las" else
                         f"{s['window_jct_mean_s'] / ref['window_jct_mean_s']:.2f}")
                print(f"| {rate} | {policy} | {s['window_jct_mean_s'] / 3600:.2f} | {ratio} | "
                      f"{s.get('preemptions_per_job', 0.0):.2f} | "
                      f"{s.get('sim_seconds', 0.0):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
