"""Profiles: which policies a scheduler runs and with what weights (configuration, not code).

A profile is plain data so it can come from YAML/JSON config: a name, the
weight per enabled policy, per-policy arguments and an optional GPU
tie-break override. ``fit`` (feasibility) is always enabled and needs no
weight. The built-in profiles are the benchmark's single-policy baselines and
hetsched's default; ``DEFAULT_PROFILE`` names the one the service uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from streams.core.policy import GpuTiebreak

DEFAULT_PROFILE = "hetsched"


@dataclass(frozen=True)
class Profile:
    """Enabled policies and weights; see the module docstring."""

    name: str
    weights: Mapping[str, float]
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    gpu_tiebreak: GpuTiebreak | None = None

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError(f"profile {self.name!r} enables no scoring policy")
        for policy, weight in self.weights.items():
            if not isinstance(weight, int | float) or weight < 0:
                raise ValueError(f"profile {self.name!r}: weight of {policy!r} must be >= 0")
        unknown = sorted(set(self.args) - set(self.weights))
        if unknown:
            raise ValueError(f"profile {self.name!r}: args for policies not enabled: {unknown}")
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    @staticmethod
    def from_config(raw: Mapping[str, Any]) -> Profile:
        """Build from a config mapping: ``{name, weights: {policy: w}, args?, gpu_tiebreak?}``."""
        try:
            return Profile(
                name=str(raw["name"]),
                weights={str(k): float(v) for k, v in dict(raw["weights"]).items()},
                args={str(k): dict(v) for k, v in dict(raw.get("args", {})).items()},
                gpu_tiebreak=raw.get("gpu_tiebreak"),
            )
        except KeyError as exc:
            raise ValueError(f"bad profile config: field {exc.args[0]!r} missing "
                             "(a profile has name and weights)") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad profile config: {exc}") from exc


BUILTIN_PROFILES: Mapping[str, Profile] = MappingProxyType(
    {
        name: Profile(name, {name: 1.0})
        for name in (
            "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "hetsched",
            "compute", "data",
        )
    }
    | {"balanced": Profile("balanced", {"hetsched": 1.0, "compute": 0.05, "data": 0.05})}
)


def get_profile(name: str) -> Profile:
    try:
        return BUILTIN_PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r} (built-in: {', '.join(sorted(BUILTIN_PROFILES))})"
        ) from None
