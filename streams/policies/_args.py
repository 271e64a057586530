"""Argument validation shared by policy factories (unknown keys are errors, not ignored)."""

from __future__ import annotations

from collections.abc import Mapping


def take(name: str, args: Mapping[str, object] | None, defaults: Mapping[str, float]) -> dict:
    """Merge ``args`` over ``defaults``; reject unknown keys and non-numbers."""
    given = dict(args or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"policy {name!r}: unknown arguments {unknown}")
    out = dict(defaults)
    for key, value in given.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"policy {name!r}: argument {key!r} must be a number, got {value!r}")
        out[key] = value
    return out
