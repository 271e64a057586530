"""The demo's summary report: one JSON document and the same numbers as markdown.

Times are wall seconds of the demo and, in brackets, trace seconds (wall x
speed-up), since the simulated nodes run ``speedup`` times faster than the
wall clock.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import orjson

from streams.demo.accounting import Accounting
from streams.demo.tracker import Tracker


def _dist(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))], 3)

    return {"count": len(values), "mean": round(statistics.fmean(values), 3),
            "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": round(ordered[-1], 3)}


def tasks(tracker: Tracker, accounting: Accounting | None, why_not: str = "") -> dict[str, Any]:
    """Each task's final state as ``hetsched check`` derives it from the run's topics
    (``by_state`` sums to ``submitted``); without an accounting (the topics could not
    be read), only what the demo saw submitted and placed, and ``why_not``."""
    placed = len(tracker.placed_at)
    if accounting is None:
        return {"submitted": len(tracker.submitted_at), "placed": placed, "by_state": None,
                "not_checked": why_not}
    report = accounting.report
    return {"submitted": len(report.task_states), "placed": placed, "by_state": report.states(),
            "failure_reasons": dict(sorted(report.failure_reasons.items())),
            "invariants_hold": report.ok,
            "check": f"hetsched check --topic-prefix {accounting.prefix}",
            "audit_file": str(accounting.audit_file)}


def summarise(tracker: Tracker, settings: dict[str, Any], accounting: Accounting | None,
              why_not: str = "") -> dict[str, Any]:
    """The report's numbers; the tasks' states from ``accounting`` (see :func:`tasks`)."""
    samples = tracker.samples
    mean = (lambda xs: round(statistics.fmean(xs), 4) if xs else 0.0)  # noqa: E731
    return {
        "settings": settings,
        "tasks": tasks(tracker, accounting, why_not),
        "decisions_by_type": dict(sorted(tracker.decisions.items())),
        "allocation": {"mean": mean([s.allocation for s in samples]),
                       "peak": max((s.allocation for s in samples), default=0.0),
                       "by_model_at_end": {m: {"nodes": n, "gpus": g, "allocated": round(a, 4)}
                                           for m, (n, g, a) in tracker.by_model().items()}},
        "utilisation": {"mean": mean([s.utilisation for s in samples]),
                        "peak": round(max((s.utilisation for s in samples), default=0.0), 4),
                        "reported_mean": mean([s.reported_utilisation for s in samples]),
                        "by_model_at_end": {m: round(u, 4) for m, u
                                            in tracker.utilisation_by_model().items()}},
        "queue_length": {"mean": mean([float(s.queue) for s in samples]),
                         "max": max((s.queue for s in samples), default=0)},
        "fragmentation": {"mean": mean([s.fragmentation for s in samples]),
                          "at_end": round(samples[-1].fragmentation, 4) if samples else 0.0},
        "queueing_delay_s": _dist(tracker.queue_delays_s()),
        "completion_time_s": _dist(tracker.completion_s()),
    }


def markdown(summary: dict[str, Any]) -> str:
    s, t = summary["settings"], summary["tasks"]
    speedup = float(s.get("speedup", 1.0))

    def dist_line(name: str, d: dict[str, float]) -> str:
        if not d.get("count"):
            return f"| {name} | 0 | - | - | - |"
        cells = " | ".join(f"{d[k]:.2f} s ({d[k] * speedup:.0f} s)" for k in ("p50", "p90", "max"))
        return f"| {name} | {d['count']} | {cells} |"

    lines = [
        "# hetsched demo report", "",
        f"Cluster: {s.get('nodes')} nodes, {s.get('gpus')} GPUs sampled from the openb node "
        f"list (seed {s.get('seed')}); trace `{s.get('trace')}` at {speedup:g}x, "
        f"load {s.get('load')}, {s.get('minutes')} min of submissions.", "",
        "## Tasks", "", *_tasks_lines(t), "",
        "## Decisions by type", "", "| type | count |", "|---|---|",
        *[f"| {k} | {v} |" for k, v in summary["decisions_by_type"].items()], "",
        "## Allocation and utilisation", "",
        f"GPU allocation mean {summary['allocation']['mean']:.1%}, peak "
        f"{summary['allocation']['peak']:.1%}; GPU utilisation (sampled on the nodes) mean "
        f"{summary['utilisation']['mean']:.1%}, peak {summary['utilisation']['peak']:.1%}; "
        f"as reported to the scheduler (threshold telemetry) mean "
        f"{summary['utilisation']['reported_mean']:.1%}; queue length mean "
        f"{summary['queue_length']['mean']:.1f}, max {summary['queue_length']['max']}.", "",
        "| model | nodes | GPUs | allocated at end |", "|---|---|---|---|",
        *[f"| {m} | {v['nodes']} | {v['gpus']} | {v['allocated']:.1%} |"
          for m, v in summary["allocation"]["by_model_at_end"].items()], "",
        "## Fragmentation", "",
        f"Share of free GPU capacity stranded on partly used GPUs: mean "
        f"{summary['fragmentation']['mean']:.1%}, at the end "
        f"{summary['fragmentation']['at_end']:.1%}.", "",
        "## Queueing delay and completion time", "",
        "Event time of the first placement (or completion) minus event time of the "
        "submission; wall seconds (trace seconds).", "",
        "| measure | tasks | p50 | p90 | max |", "|---|---|---|---|---|",
        dist_line("queueing delay", summary["queueing_delay_s"]),
        dist_line("completion time", summary["completion_time_s"]), "",
    ]
    return "\n".join(lines)


def _tasks_lines(t: dict[str, Any]) -> list[str]:
    if t["by_state"] is None:
        return [f"submitted {t['submitted']}, placed {t['placed']}; the states of the tasks "
                f"could not be read from the run's topics: {t['not_checked']}"]
    states = ", ".join(f"{state.replace('_', ' ')} {n}" for state, n in t["by_state"].items()
                       if n)
    reasons = ", ".join(f"{reason} {n}" for reason, n in t["failure_reasons"].items())
    return [
        f"submitted {t['submitted']}: {states or 'none'}"
        + (f" (failed by reason: {reasons})" if reasons else "") + ".",
        "",
        f"Each task in its one final state, as `{t['check']}` finds it in the run's topics "
        f"(invariants {'all hold' if t['invariants_hold'] else 'VIOLATED: run it for the list'}"
        f"); {t['placed']} were placed at least once. Any task's story: "
        f"`hetsched explain TASK {t['audit_file']}`.",
    ]


def write(summary: dict[str, Any], path: Path) -> tuple[Path, Path]:
    """Write ``path`` (markdown) and the same name with ``.json``; return both paths."""
    path.parent.mkdir(parents=True, exist_ok=True)
    md = path if path.suffix == ".md" else path.with_suffix(".md")
    js = md.with_suffix(".json")
    md.write_text(markdown(summary))
    js.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return md, js
