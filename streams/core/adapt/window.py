"""A step-function window over sparse samples: "has X held for the last W seconds?".

Agents send telemetry only when a threshold is crossed, so a value holds until
the next sample. ``Window`` keeps the samples of the last ``span_s`` plus the
one in effect at the window's start; a condition is *sustained* when the value
in effect at ``now - w`` and every later sample satisfy it. That is exact for
sparse, threshold-triggered samples and for dense periodic ones alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Window:
    """Samples ``(t_s, value)`` in time order; ``span_s`` bounds what is kept."""

    span_s: float
    samples: list[tuple[float, float]] = field(default_factory=list)

    def add(self, t_s: float, value: float) -> None:
        if self.samples and t_s < self.samples[-1][0]:
            return  # out-of-order sample: the log order is the truth, drop it
        self.samples.append((t_s, value))
        self._prune(t_s)

    def _prune(self, now_s: float) -> None:
        start = now_s - self.span_s
        keep = 0
        for i, (t, _) in enumerate(self.samples):
            if t <= start:
                keep = i  # the last sample at or before the start stays (value in effect)
        if keep:
            del self.samples[:keep]

    def clear(self) -> None:
        self.samples.clear()

    def sustained(self, now_s: float, window_s: float, ok: Callable[[float], bool]) -> bool:
        """True if ``ok`` held for every value in effect during ``[now - window_s, now]``."""
        start = now_s - window_s
        if not self.samples or self.samples[0][0] > start:
            return False  # not observed for the whole window yet
        return all(ok(v) for t, v in self._in_effect(start, now_s))

    def _in_effect(self, start: float, now_s: float) -> list[tuple[float, float]]:
        out = [s for s in self.samples if start < s[0] <= now_s]
        before = [s for s in self.samples if s[0] <= start]
        return before[-1:] + out

    def values(self, now_s: float, window_s: float) -> list[float]:
        return [v for _, v in self._in_effect(now_s - window_s, now_s)]

    def last(self) -> float | None:
        return self.samples[-1][1] if self.samples else None


def mean_cv(values: list[float]) -> tuple[float, float]:
    """Mean and coefficient of variation (0 for a constant or empty series)."""
    if not values:
        return 0.0, 0.0
    m = sum(values) / len(values)
    if m <= 0:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / len(values)
    return m, math.sqrt(var) / m
