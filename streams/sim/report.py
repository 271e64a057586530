"""Outputs of a packing simulation: curve CSV, allocation plot, summary table, decision logs.

File formats are an interface (other tools script against them):
``curve.csv`` has ``policy,seed,arrived_pct,alloc_pct,frag_ratio_pct``;
``decisions-<policy>-<seed>.jsonl`` has one object per arrival in order with
``index``, ``task``, ``node`` (null when dropped) and ``gpus`` (a list of
``{"gpu": index, "milli": share}``).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from streams.sim.packing import RunResult

CURVE_FIELDS = ("policy", "seed", "arrived_pct", "alloc_pct", "frag_ratio_pct")
HEADLINE_PCTS = (100, 130)


def write_curve(path: Path, results: Sequence[RunResult]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CURVE_FIELDS)
        for r in results:
            for p in r.curve:
                w.writerow((r.policy, r.seed, p.arrived_pct, f"{p.alloc_pct:.2f}",
                            f"{p.frag_ratio_pct:.2f}"))


def write_decisions(out_dir: Path, result: RunResult) -> Path:
    path = out_dir / f"decisions-{result.policy}-{result.seed}.jsonl"
    with path.open("w") as fh:
        for d in result.decisions or ():
            fh.write(json.dumps(d, separators=(",", ":")) + "\n")
    return path


def mean_curves(results: Sequence[RunResult]) -> dict[str, dict[int, float]]:
    """Per policy: arrived % -> mean allocation % over seeds."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for p in r.curve:
            acc[r.policy][p.arrived_pct].append(p.alloc_pct)
    return {pol: {x: statistics.fmean(v) for x, v in sorted(c.items())} for pol, c in acc.items()}


def headline(results: Sequence[RunResult], pct: int) -> dict[str, list[float]]:
    """Per policy, the per-seed allocation % at ``pct`` arrived (seed order)."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in sorted(results, key=lambda r: r.seed):
        point = r.at(pct)
        if point is not None:
            out[r.policy].append(point.alloc_pct)
    return out


def summary_table(results: Sequence[RunResult], pcts: Sequence[int] = HEADLINE_PCTS) -> str:
    """Markdown: per policy, mean (and std) allocation % over seeds at each headline point."""
    policies = list(dict.fromkeys(r.policy for r in results))
    seeds = sorted({r.seed for r in results})
    head = "| policy | " + " | ".join(f"alloc % at {p} % arrived" for p in pcts) + " |"
    lines = [f"Seeds: {', '.join(map(str, seeds))}", "", head,
             "|---|" + "---|" * len(pcts)]
    per = {p: headline(results, p) for p in pcts}
    for pol in policies:
        cells = []
        for p in pcts:
            vals = per[p].get(pol, [])
            if not vals:
                cells.append("n/a")
                continue
            std = statistics.pstdev(vals) if len(vals) > 1 else 0.0
            cells.append(f"{statistics.fmean(vals):.2f} (sd {std:.2f})")
        lines.append(f"| {pol} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(path: Path, results: Sequence[RunResult], title: str) -> None:
    """Allocation ratio vs arrived workload, one line per policy (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for policy, curve in mean_curves(results).items():
        xs = list(curve)
        ax.plot(xs, [curve[x] for x in xs], label=policy, linewidth=1.4)
    ax.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("arrived GPU workload (% of cluster GPU capacity)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.set_title(title)
    ax.set_xlim(0, max(130, max((p.arrived_pct for r in results for p in r.curve), default=0)))
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
