"""How many events do threshold triggers send, per sample, on real GPU curves?

Replays every container of the Alibaba GenAI trace (``../shared/traces/genai``:
per-container GPU duty cycle and memory, one sample a minute over ~23 h) as one
GPU through :class:`agents.triggers.TriggerEngine`, and counts the telemetry
events it emits. The ratio events/samples is what the agents save the
scheduler's input log compared with streaming every sample.

Run:  .venv/bin/python bench/triggers.py [--write]
``--write`` replaces the section between ``<!-- triggers:start -->`` and
``<!-- triggers:end -->`` in BENCHMARKS.md (creating the file if needed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.telemetry.base import GpuSample  # noqa: E402
from agents.telemetry.traces import GenaiCurves, load_genai  # noqa: E402
from agents.triggers import BandSpec, TriggerConfig, TriggerEngine  # noqa: E402

START, END = "<!-- triggers:start -->", "<!-- triggers:end -->"
GPU_MEMORY_MIB = 81920.0
"""The trace does not say the GPU; memory shares are taken of an 80 GiB GPU."""


@dataclass(frozen=True)
class Variant:
    name: str
    config: TriggerConfig


def variants() -> list[Variant]:
    default = TriggerConfig()
    util = default.gpu_util_pct
    return [
        Variant("defaults (5 min EWMA, hysteresis 10, min interval 30 s)", default),
        Variant(
            "no smoothing (hysteresis 10 only)",
            default.model_copy(
                update={"gpu_util_pct": util.model_copy(update={"smoothing_s": 0.0})}
            ),
        ),
        Variant(
            "5 min EWMA, no hysteresis",
            default.model_copy(
                update={"gpu_util_pct": util.model_copy(update={"hysteresis": 0.0})}
            ),
        ),
        Variant(
            "no smoothing, no hysteresis",
            default.model_copy(update={"gpu_util_pct": BandSpec(edges=util.edges, hysteresis=0.0)}),
        ),
        Variant(
            "1 min EWMA",
            default.model_copy(
                update={"gpu_util_pct": util.model_copy(update={"smoothing_s": 60.0})}
            ),
        ),
        Variant(
            "10 min EWMA",
            default.model_copy(
                update={"gpu_util_pct": util.model_copy(update={"smoothing_s": 600.0})}
            ),
        ),
    ]


@dataclass(frozen=True)
class Result:
    variant: str
    gpus: int
    samples: int
    events: int
    snapshots: int
    gpu_hours: float
    seconds: float

    @property
    def ratio(self) -> float:
        return self.events / self.samples

    @property
    def per_gpu_hour(self) -> float:
        return (self.events - self.snapshots) / self.gpu_hours


def measure(curves: GenaiCurves, variant: Variant) -> Result:
    started = time.perf_counter()
    samples = events = snapshots = 0
    gpu_seconds = 0.0
    containers = curves.containers()
    for name in containers:
        util, mem = curves.util_pct[name], curves.mem_mib[name]
        engine = TriggerEngine(variant.config)
        for t, value in zip(util.t_s, util.values, strict=True):
            sample = GpuSample(0, float(value), mem.at(float(t)), GPU_MEMORY_MIB)
            engine.observe(float(t), [sample])
        samples += engine.stats.samples
        events += engine.stats.events
        snapshots += engine.stats.by_kind.get("snapshot", 0)
        gpu_seconds += util.span_s
    return Result(
        variant.name,
        len(containers),
        samples,
        events,
        snapshots,
        gpu_seconds / 3600.0,
        time.perf_counter() - started,
    )


def measure_resampled(curves: GenaiCurves, containers: int, step_s: float) -> Result:
    """Like :func:`measure` with defaults, but sampling every ``step_s`` as an agent
    polling NVML would (the trace value held between its one-minute points)."""
    started = time.perf_counter()
    samples = events = snapshots = 0
    gpu_seconds = 0.0
    names = curves.containers()[:containers]
    for name in names:
        util, mem = curves.util_pct[name], curves.mem_mib[name]
        engine = TriggerEngine(TriggerConfig())
        t = float(util.t_s[0])
        while t <= util.t_s[-1]:
            engine.observe(t, [GpuSample(0, util.at(t), mem.at(t), GPU_MEMORY_MIB)])
            t += step_s
        samples += engine.stats.samples
        events += engine.stats.events
        snapshots += engine.stats.by_kind.get("snapshot", 0)
        gpu_seconds += util.span_s
    return Result(
        f"defaults, first {containers} GPUs, sampled every {step_s:g} s",
        len(names),
        samples,
        events,
        snapshots,
        gpu_seconds / 3600.0,
        time.perf_counter() - started,
    )


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def render(results: list[Result], heartbeat_s: float) -> str:
    today = dt.date.today().isoformat()
    lines = [
        START,
        "## Threshold triggers: events per sample (agents)",
        "",
        "Every container of the GenAI trace (`../shared/traces/genai`, GPU duty cycle and "
        "memory, one sample a minute) replayed as one GPU through the agent's trigger "
        "engine (`agents/triggers.py`). Events are `GpuTelemetry` messages, including one "
        "start-up snapshot per GPU; streaming every sample would be a ratio of 1.",
        "",
        "- command: `.venv/bin/python bench/triggers.py --write`",
        f"- machine: {_cpu()} ({os.cpu_count()} CPUs), "
        f"Python {platform.python_version()}, {platform.system()}",
        f"- date: {today}",
        "",
        "| configuration | GPUs | samples | events | events/sample | events per GPU-hour |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.variant} | {r.gpus} | {r.samples} | {r.events} | {r.ratio:.4f} "
            f"| {r.per_gpu_hour:.2f} |"
        )
    lines += [
        "",
        f"Heartbeats are per node, not per sample: one every {heartbeat_s:g} s "
        f"({3600 / heartbeat_s:.0f} per node-hour) whatever the load. The last row samples "
        "as the agent does on a real GPU (every second; the trace value held between its "
        "minute points): smoothing and the minimum interval are in seconds, so events per "
        "GPU-hour stay put while samples grow 57-fold.",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace our marked section, leaving the rest of the file (others' sections) alone."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + section.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument(
        "--resampled-gpus", type=int, default=10, help="GPUs in the 1 s sampling rows (10)"
    )
    parser.add_argument("--benchmarks", type=Path, default=REPO / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    curves = load_genai()
    results = [measure(curves, v) for v in variants()]
    results.append(measure_resampled(curves, args.resampled_gpus, 57.0))
    results.append(measure_resampled(curves, args.resampled_gpus, 1.0))
    section = render(results, TriggerConfig().heartbeat_s)
    print(section)
    if args.write:
        write_section(args.benchmarks, section)
        print(f"wrote {args.benchmarks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
