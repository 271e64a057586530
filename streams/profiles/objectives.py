"""Building a ``WeightSchedule`` from its configuration (see ``streams.core.objectives``).

Each rule names its weights as a placement profile or as objectives, the four
named goals, each mapped to the policy that serves it (``OBJECTIVE_POLICIES``);
the rule's profile is compiled here, where policies can be looked up by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from streams.core.objectives import WeightRule, WeightSchedule
from streams.core.profile import Profile
from streams.profiles.compile import compile_profile

OBJECTIVE_POLICIES: Mapping[str, str] = MappingProxyType({
    "utilisation": "hetsched", "completion_time": "compute", "energy": "energy",
    "locality": "locality"})
OBJECTIVES = (*OBJECTIVE_POLICIES, "fairness")


def schedule_from_config(raw: Sequence[Mapping[str, Any]] | Mapping[str, Any],
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
