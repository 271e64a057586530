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
policy that serves it (``OBJECTIVE_POLICIES``):

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from streams.core.scheduler import Scheduler, compile_profile
from streams.policies.profile import Profile

SECONDS_PER_DAY = 86_400.0
OBJECTIVE_POLICIES: Mapping[str, str] = MappingProxyType({
    "utilisation": "hetsched", "completion_time": "compute", "energy": "energy",
    "locality": "locality"})
OBJECTIVES = (*OBJECTIVE_POLICIES, "fairness")


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

    @staticmethod
    def from_config(raw: Sequence[Mapping[str, Any]] | Mapping[str, Any],
                    context: Mapping[str, Any] | None = None) -> WeightSchedule:
        """``[{name, hours?: [start, end], load?: [min, max], profile | objectives,
        tenant_weights?}]`` or ``{"rules": [...]}`` (a config file's top level).

        ``profile`` is a profile mapping (``Profile.from_config``); ``objectives``
        maps objective names to weights (module docstring); ``max`` of ``load``
        may be null (no upper bound). Errors name the rule.
        """
        items = raw.get("rules", []) if isinstance(raw, Mapping) else raw
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise ValueError("objectives: expected a list of rules")
        rules = []
        for k, item in enumerate(items):
            name = str(item.get("name", f"rule-{k}"))
            try:
                rules.append(_rule(name, item, context))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"objectives rule {name!r}: {exc}") from None
        return WeightSchedule(tuple(rules))


def objectives_profile(name: str, weights: Mapping[str, float],
                       args: Mapping[str, Mapping[str, Any]] | None = None) -> Profile:
    """The placement profile of objective weights (``fairness`` is not placement)."""
    unknown = sorted(set(weights) - set(OBJECTIVES))
    if unknown:
        raise ValueError(f"unknown objectives {unknown} (known: {', '.join(OBJECTIVES)})")
    pw = {OBJECTIVE_POLICIES[o]: float(w) for o, w in weights.items()
          if o in OBJECTIVE_POLICIES and float(w) > 0}
    if not pw:
        raise ValueError("no placement objective has a positive weight")
    return Profile(name, pw, {p: a for p, a in (args or {}).items() if p in pw})


def _rule(name: str, item: Mapping[str, Any], context: Mapping[str, Any] | None) -> WeightRule:
    hours = item.get("hours", [0, 24])
    load = item.get("load", [0.0, None])
    if ("profile" in item) == ("objectives" in item):
        raise ValueError("give either 'profile' or 'objectives'")
    if "profile" in item:
        profile = Profile.from_config(item["profile"])
    else:
        profile = objectives_profile(name, item["objectives"], item.get("args"))
    weights = item.get("tenant_weights")
    if weights is not None:
        weights = MappingProxyType({str(t): float(w) for t, w in dict(weights).items()})
        if any(w <= 0 for w in weights.values()):
            raise ValueError("tenant weights must be positive")
    start, end = float(hours[0]), float(hours[1])
    if not (0 <= start <= 24 and 0 <= end <= 24):
        raise ValueError(f"hours must be within 0..24, got {hours}")
    return WeightRule(name, compile_profile(profile, context), start, end, float(load[0]),
                      float("inf") if load[1] is None else float(load[1]), weights)


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
