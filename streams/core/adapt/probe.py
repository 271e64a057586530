"""Probing and classification of tasks that did not declare their features.

A task submitted without features first runs on a small allocation for a
short window (``TaskProbe``). What it used then classifies it on three axes:

* **kind**: ``data`` when the memory controller is busy (bandwidth bound),
  ``compute`` when the SMs are busy and memory bandwidth is not, else ``mixed``;
* **length**: ``long`` when its declared or learnt duration is at least
  ``long_s``, ``short`` when known and below, ``unknown`` otherwise;
* **burstiness**: ``bursty`` when utilisation varies a lot (coefficient of
  variation above ``bursty_cv``), else ``steady``.

Tasks of the same tenant and command learn from earlier runs (``Learnt``):
once one was classified, the next ones skip the probe; finished runs teach
the duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.window import mean_cv


@dataclass(frozen=True, slots=True)
class Classification:
    kind: str
    length: str
    bursty: bool
    util_pct: float
    mem_util_pct: float
    mem_mib: float

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.length}/{'bursty' if self.bursty else 'steady'}"


def classify(util: list[float], mem_util: list[float], mem_mib: list[float],
             duration_s: float | None, cfg: AdaptConfig) -> Classification:
    """Classify from the probe's samples (percent, percent, MiB) and a duration if known."""
    u, cv = mean_cv(util)
    bw, _ = mean_cv(mem_util)
    mem, _ = mean_cv(mem_mib)
    if bw >= cfg.data_mem_util_pct:
        kind = "data"
    elif u >= cfg.compute_util_pct:
        kind = "compute"
    else:
        kind = "mixed"
    length = "unknown" if duration_s is None else (
        "long" if duration_s >= cfg.long_s else "short")
    return Classification(kind, length, cv > cfg.bursty_cv, u, bw, mem)


def command_key(tenant: str, argv: list[str] | None, image: str | None) -> str:
    """What identifies 'the same job' across submissions: tenant, image, program."""
    program = argv[0] if argv else ""
    return f"{tenant}|{image or ''}|{program}"


@dataclass(slots=True)
class Learnt:
    """What earlier runs of one (tenant, command) taught; persisted with the cell."""

    kind: str | None = None
    bursty: bool | None = None
    duration_s: float | None = None
    runs: int = 0

    def learn_duration(self, runtime_s: float) -> None:
        # Running mean: stable under redelivery order, cheap, good enough for short/long.
        self.runs += 1
        prev = self.duration_s or 0.0
        self.duration_s = prev + (runtime_s - prev) / self.runs

    def to_json(self) -> list[object]:
        return [self.kind, self.bursty, self.duration_s, self.runs]

    @classmethod
    def from_json(cls, raw: list[object]) -> Learnt:
        kind, bursty, dur, runs = raw
        return cls(kind if isinstance(kind, str) else None,
                   bool(bursty) if bursty is not None else None,
                   float(dur) if isinstance(dur, int | float) else None, int(str(runs)))
