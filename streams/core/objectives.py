"""Multi-objective weights that change with load and time of day. Pure.

Why: one weighting is not right all day. At peak, queues are long and users
wait, so completion time matters most (spread work, favour fast GPUs); off
peak, packing tightly and powering fewer GPUs saves energy. A
``WeightSchedule`` is configuration: an ordered list of rules, each with an
hour-of-day window, a load window (allocated share of the cell's GPUs) and
what to use while it matches; the first rule that matches wins, else the
cell's default scheduler and queue weights.

A rule states its weights either as a placement ``profile`` (policy ->
weight) or as ``objectives``, the four named goals, each mapped to the
policy that serves it (``streams.profiles.objectives.OBJECTIVE_POLICIES``):

* ``utilisation`` -> ``hetsched``: fragmentation-aware packing (0..100);
* ``completion_time`` -> ``compute``: the fastest free GPU (0..100);
* ``energy`` -> ``energy``: efficient, already-powered GPUs (0..100);
* ``locality`` -> ``locality``: seconds to move the task's input;
* ``fairness``: the weight of the tenants' fair share in the queue order is
  not a placement score; a rule sets it through ``tenant_weights`` (e.g.
  give the serving team three times the share at peak), applied to the
  queue while the rule matches.

Time comes from the cell's input events (``now_s`` since the epoch, UTC
hours; the simulator's clock starts at midnight), never from a wall clock,
so the choice is replayable. The file format (JSON or TOML) and the
``--objectives`` / ``HETSCHED_OBJECTIVES`` switches are documented in
docs/simulation.md; reading the file is the caller's job (the core does no I/O).
Building a schedule from that configuration (compiling each rule's profile) is
``streams.profiles.objectives``'s, above the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streams.core.scheduler import Scheduler

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class WeightRule:
    """Use ``scheduler`` (and ``tenant_weights``, if any) when the hour is in
    [start_h, end_h) and the load in [min_load, max_load).

    ``start_h > end_h`` wraps around midnight (e.g. 20 -> 6 is the night).
    """

    name: str
    scheduler: Scheduler
    start_h: float = 0.0
    end_h: float = 24.0
    min_load: float = 0.0
    max_load: float = float("inf")
    tenant_weights: Mapping[str, float] | None = field(default=None)

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

    def rule(self, now_s: float, load: float) -> WeightRule | None:
        return next((r for r in self.rules if r.matches(now_s, load)), None)

    def select(self, now_s: float, load: float, default: Scheduler) -> Scheduler:
        rule = self.rule(now_s, load)
        return default if rule is None else rule.scheduler

    def rule_name(self, now_s: float, load: float) -> str:
        rule = self.rule(now_s, load)
        return "default" if rule is None else rule.name
