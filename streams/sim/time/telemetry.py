"""Utilisation of simulated tasks over time, shaped by the GenAI trace, and what it does to speed.

Why a model at all: elastic resizing, probing and hot-spot moves act on what
tasks *use*, which a job list does not say. Each simulated task follows one
real container's GPU duty-cycle curve from ``genai/pod_gpu_duty_cycle_anon``
(read in place from the shared traces directory, like every trace here),
picked and offset by a stable hash of the task id and the seed.

ASSUMPTIONS (stated in docs/simulation.md and BENCHMARKS.md):

* Shape, not level: the GenAI serving curves average ~7% busy, far below
  training jobs, so a task's utilisation is its job's mean ``util`` times
  ``1 - a + a * c(t) / mean(c)``: the curve's relative variation ``c/mean(c)``
  with a per-class amplitude ``a`` (steady training 0.3, data stages and
  rendering 0.5, serving 1.0), clipped to [0.02, 1].
* Speed (work done per second, 1 = as the job list's duration assumes) on an
  allocation ``a`` GPU-equivalents for a request of ``r``: with fewer GPUs,
  ``min(1, a / (r * u))`` (a task busy only ``u`` of the time loses nothing
  until its demand ``r * u`` exceeds what it has); with more, it gains
  ``(a / r) ** 0.85 - 1`` scaled by how compute-bound it is now
  (``clip((u - 0.5) / 0.5, 0, 1)``); a throttled GPU halves it and a hot-spot
  node (every GPU above 95% busy) takes 10% off (the core's own assumptions).
* The task reports utilisation as a share of its booking: busy
  GPU-equivalents ``min(a, r * u * speed)`` over ``a``.
* GPU model speed (opt-in, ``SimAdaptConfig.model_speed``; off, every model runs a
  task as fast as any other): a task's work is ``compute`` or ``data`` (``work_kind``:
  data when the job names an input node, i.e. its data lives somewhere, else
  compute); compute work scales with the catalog's FP32 TFLOPS, data work with its
  memory bandwidth, relative to the reference model its duration was drawn for
  (``reference_figure``: the fastest model, by that figure, among those the job may
  use in the cluster). The factor (<= 1) multiplies the allocation's speed; it does
  not lower ``busy`` (a slower GPU is as busy, for longer).
"""

from __future__ import annotations

import csv
import io
import tarfile
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from streams.sim.traces import traces_dir

GENAI_UTIL = "genai/pod_gpu_duty_cycle_anon.tar.gz"
MIN_UTIL = 0.02
AMPLITUDE = {"training": 0.3, "workflow": 0.5, "rendering": 0.5, "inference": 1.0}
DEFAULT_AMPLITUDE = 0.5
SCALE_EXPONENT = 0.85
THROTTLE_SPEED = 0.5
HOT_SPEED = 0.9


@dataclass(frozen=True, slots=True)
class Shapes:
    """Relative utilisation curves (mean 1) on a common sample grid, one row per container."""

    step_s: float
    rel: np.ndarray  # (curves, samples)

    @property
    def span_s(self) -> float:
        return self.step_s * self.rel.shape[1]

    def at(self, curve: int, t_s: float) -> float:
        i = int(t_s // self.step_s) % self.rel.shape[1]
        return float(self.rel[curve, i])


@lru_cache(maxsize=1)
def genai_shapes(min_samples: int = 1000, step_s: float = 60.0) -> Shapes | None:
    """The GenAI duty-cycle curves resampled (step-hold) to ``step_s``, each divided by its
    mean; curves shorter than ``min_samples`` or all zero are skipped. None if the trace
    archive is absent (the simulator then uses flat utilisation)."""
    path = traces_dir() / GENAI_UTIL
    if not path.exists():
        return None
    by: dict[str, list[tuple[float, float]]] = {}
    with tarfile.open(path, "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.isfile() and m.name.endswith(".csv"))
        raw = tar.extractfile(member)
        assert raw is not None
        with io.TextIOWrapper(raw, encoding="utf-8") as text:
            for row in csv.DictReader(text):
                by.setdefault(row["container_ip"], []).append(
                    (float(row["timestamp_anon"]), float(row["value"])))
    t0 = min(p[0] for pts in by.values() for p in pts)
    t1 = max(p[0] for pts in by.values() for p in pts)
    grid = np.arange(0.0, t1 - t0, step_s)
    rows = []
    for name in sorted(by):
        pts = sorted(by[name])
        if len(pts) < min_samples:
            continue
        arr = np.asarray(pts)
        idx = np.clip(np.searchsorted(arr[:, 0] - t0, grid, side="right") - 1, 0, len(arr) - 1)
        vals = arr[idx, 1]
        if vals.mean() <= 0:
            continue
        rows.append(vals / vals.mean())
    if not rows:
        return None
    return Shapes(step_s, np.vstack(rows))


def pick(job_id: str, seed: int, shapes: Shapes) -> tuple[int, float]:
    """A task's curve and start offset: stable across runs and processes (crc32, not hash)."""
    h = zlib.crc32(f"{seed}/{job_id}".encode())
    return h % shapes.rel.shape[0], float((h >> 8) % int(shapes.span_s))


def utilisation(mean_util: float, task_class: str, shape: float) -> float:
    """A task's utilisation now (0..1) from its mean and the curve's relative value."""
    a = AMPLITUDE.get(task_class, DEFAULT_AMPLITUDE)
    return float(min(1.0, max(MIN_UTIL, mean_util * (1.0 - a + a * shape))))


def speed(requested: float, allocated: float, util: float, throttled: bool = False,
          hot: bool = False) -> float:
    """Work per second on ``allocated`` GPU-equivalents (see the module docstring)."""
    if requested <= 0:
        s = 1.0
    elif allocated < requested:
        s = min(1.0, allocated / (requested * max(util, MIN_UTIL)))
    elif allocated > requested:
        bound = min(1.0, max(0.0, (util - 0.5) / 0.5))
        s = 1.0 + ((allocated / requested) ** SCALE_EXPONENT - 1.0) * bound
    else:
        s = 1.0
    if throttled:
        s *= THROTTLE_SPEED
    if hot:
        s *= HOT_SPEED
    return s


def work_kind(has_input_node: bool) -> str:
    """``data`` for a job whose input lives on a node (the mixed workload's rendering and
    workflow feature stages, which it calls data intensive), else ``compute`` (training,
    and fractional serving: ASSUMPTION, small-batch serving taken as compute bound)."""
    return "data" if has_input_node else "compute"


def model_figure(fp32_tflops: float, bandwidth_gbps: float, kind: str) -> float:
    """The catalog figure a kind of work runs at: memory bandwidth for data, FP32 TFLOPS
    for compute (the figure the ``energy`` term and ``perf_per_watt`` use)."""
    return bandwidth_gbps if kind == "data" else fp32_tflops


def reference_figure(figures: dict[str, float], allowed: tuple[str, ...]) -> float:
    """The figure a job's duration is taken at: the fastest model it may use among the
    cluster's (``figures``: model -> figure; every model when ``allowed`` is empty)."""
    pool = [f for m, f in figures.items() if not allowed or m in allowed]
    return max(pool or figures.values() or [1.0])


def model_speed(figure: float, reference: float) -> float:
    """Work per second on a model with ``figure`` for a duration measured at ``reference``."""
    return figure / reference if reference > 0 and figure > 0 else 1.0


def busy(requested: float, allocated: float, util: float, s: float) -> float:
    """Busy GPU-equivalents of the task (for used utilisation, energy and its reports)."""
    return min(allocated, requested * util * s) if allocated > 0 else 0.0
