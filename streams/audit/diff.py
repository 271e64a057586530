"""Field-level differences between two JSON documents, by JSON path.

Used to show the first decision where a replay and the record disagree:
``$.payload.node_id: 'node-a' != 'node-b'``.
"""

from __future__ import annotations

from typing import Any

MISSING = "<missing>"


def json_diff(expected: Any, actual: Any, path: str = "$") -> list[tuple[str, Any, Any]]:
    """Every (path, expected, actual) where the two differ; dict keys in sorted order."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(expected) | set(actual)):
            out += json_diff(expected.get(key, MISSING), actual.get(key, MISSING),
                             f"{path}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        out = []
        for i in range(max(len(expected), len(actual))):
            out += json_diff(expected[i] if i < len(expected) else MISSING,
                             actual[i] if i < len(actual) else MISSING, f"{path}[{i}]")
        return out
    if expected == actual and type(expected) is type(actual):
        return []
    return [(path, expected, actual)]


def format_diff(diffs: list[tuple[str, Any, Any]], limit: int = 20) -> list[str]:
    lines = [f"  {p}: recorded {e!r} != replayed {a!r}" for p, e, a in diffs[:limit]]
    if len(diffs) > limit:
        lines.append(f"  ... and {len(diffs) - limit} more")
    return lines
