"""The one place policies are registered: name -> (factory, runtime context it needs).

Some policies need run-time context that is not configuration: ``typical``
(the expected task mix, for fragmentation-aware policies) and ``seed`` (for
Random). ``build`` injects those into the factory arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from streams.core import fit
from streams.core.policy import Policy
from streams.policies import (
    bestfit,
    compute,
    data,
    dotprod,
    energy,
    fgd,
    gpu_clustering,
    gpu_packing,
    hetsched,
    locality,
    random_fit,
    speed,
)

Factory = Callable[[Mapping[str, Any] | None], Policy]

REGISTRY: Mapping[str, tuple[Factory, tuple[str, ...]]] = MappingProxyType(
    {
        fit.NAME: (fit.factory, ()),
        random_fit.NAME: (random_fit.factory, ("seed",)),
        dotprod.NAME: (dotprod.factory, ()),
        gpu_clustering.NAME: (gpu_clustering.factory, ()),
        gpu_packing.NAME: (gpu_packing.factory, ()),
        bestfit.NAME: (bestfit.factory, ()),
        fgd.NAME: (fgd.factory, ("typical",)),
        compute.NAME: (compute.factory, ()),
        data.NAME: (data.factory, ()),
        energy.NAME: (energy.factory, ()),
        hetsched.NAME: (hetsched.factory, ("typical",)),
        locality.NAME: (locality.factory, ()),
        speed.NAME: (speed.factory, ()),
    }
)


def build(name: str, args: Mapping[str, Any] | None, context: Mapping[str, Any]) -> Policy:
    """Instantiate a registered policy with its args plus the context it declares."""
    try:
        factory, needs = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(REGISTRY)})") from None
    merged = dict(args or {})
    for key in needs:
        if key in context and key not in merged:
            merged[key] = context[key]
    return factory(merged)
