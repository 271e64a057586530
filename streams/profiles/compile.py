"""``compile_profile``: a ``Profile`` (names and weights) into a ``Scheduler`` (instances).

Kept out of the core because it looks policies up by name in the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.fit import Fit
from streams.core.policy import ScoreOnly
from streams.core.profile import Profile
from streams.core.scheduler import DEFAULT_CACHE_SHAPES, DEFAULT_TOP_K, Scheduler
from streams.policies import registry


def compile_profile(
    profile: Profile,
    context: Mapping[str, Any] | None = None,
    top_k: int = DEFAULT_TOP_K,
    cache_shapes: int = DEFAULT_CACHE_SHAPES,
) -> Scheduler:
    """Instantiate the profile's policies (``context``: typical tasks, seed)."""
    ctx = dict(context or {})
    names = [n for n, w in profile.weights.items() if n != "fit"]
    policies = tuple(registry.build(n, profile.args.get(n), ctx) for n in names)
    weights = tuple(float(profile.weights[n]) for n in names)
    fit = registry.build("fit", None, ctx)
    assert isinstance(fit, Fit)
    heaviest = max(range(len(policies)), key=lambda i: weights[i]) if policies else None
    tiebreak = profile.gpu_tiebreak or (
        policies[heaviest].gpu_tiebreak if heaviest is not None else "least_free"
    )
    filters = tuple(p for p in policies if type(p).filter is not ScoreOnly.filter)
    return Scheduler(
        profile=profile,
        fit=fit,
        policies=policies,
        weights=weights,
        gpu_tiebreak=tiebreak,
        cacheable=all(p.node_local for p in policies),
        top_k=top_k,
        cache_shapes=cache_shapes,
        filters=filters,
        scalar=not filters and all(hasattr(p, "score_rows") for p in policies),
    )
