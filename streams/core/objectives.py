"""Multi-objective weights that change with load and time of day. Pure.

Why: one weighting is not right all day. At peak, queues are long and users
wait, so completion time matters most (spread work, favour fast GPUs); off
peak, packing tightly and powering fewer GPUs saves energy. A
``WeightSchedule`` is configuration: an ordered list of rules, each with an
hour-of-day window, a load window (allocated share of the cell's GPUs) and
the compiled scheduler (profile weights) to use; the first rule that matches
wins, else the cell's default scheduler.

Time comes from the cell's input events (``now_s`` since the epoch, UTC
hours), so the choice is replayable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streams.core.scheduler import Scheduler, compile_profile
from streams.policies.profile import Profile

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class WeightRule:
    """Use ``scheduler`` when the hour is in [start_h, end_h) and load in [min_load, max_load).

    ``start_h > end_h`` wraps around midnight (e.g. 20 -> 6 is the night).
    """

    name: str
    scheduler: Scheduler
    start_h: float = 0.0
    end_h: float = 24.0
    min_load: float = 0.0
    max_load: float = float("inf")

    def matches(self, now_s: float, load: float) -> bool:
        hour = (now_s % SECONDS_PER_DAY) / 3600.0
        if self.start_h <= self.end_h:
            in_hours = self.start_h <= hour < self.end_h
        else:
            in_hours = hour >= self.start_h or hour < self.end_h
        return in_hours and self.min_load <= load < self.max_load


@dataclass(frozen=True, slots=True)
class WeightSchedule:
    """First matching rule wins; see the module docstring."""

    rules: tuple[WeightRule, ...]

    def select(self, now_s: float, load: float, default: Scheduler) -> Scheduler:
        for rule in self.rules:
            if rule.matches(now_s, load):
                return rule.scheduler
        return default

    def rule_name(self, now_s: float, load: float) -> str:
        return next((r.name for r in self.rules if r.matches(now_s, load)), "default")

    @staticmethod
    def from_config(raw: Sequence[Mapping[str, Any]],
                    context: Mapping[str, Any] | None = None) -> WeightSchedule:
        """``[{name, profile: {name, weights, ...}, hours: [start, end], load: [min, max]}]``."""
        rules = []
        for item in raw:
            hours = item.get("hours", [0, 24])
            load = item.get("load", [0.0, float("inf")])
            profile = Profile.from_config(item["profile"])
            rules.append(WeightRule(str(item["name"]), compile_profile(profile, context),
                                    float(hours[0]), float(hours[1]), float(load[0]),
                                    float(load[1])))
        return WeightSchedule(tuple(rules))


def peak_offpeak(peak: Profile, offpeak: Profile, context: Mapping[str, Any] | None = None,
                 peak_hours: tuple[float, float] = (8.0, 20.0),
                 high_load: float = 0.8) -> WeightSchedule:
    """The documented default: completion-time weights at peak hours or high load,
    packing and energy weights otherwise."""
    fast = compile_profile(peak, context)
    return WeightSchedule((
        WeightRule("peak-hours", fast, peak_hours[0], peak_hours[1]),
        WeightRule("high-load", fast, min_load=high_load),
        WeightRule("off-peak", compile_profile(offpeak, context)),
    ))
