"""What a cell rebuilt from its records must put back into its numpy state. Pure.

The adaptation rules (``engine``) keep a node's failed GPUs and phantom bookings
in the node record's ``extra["adapt"]``, which the cell persists; the free-GPU
figures of ``ClusterState`` are not persisted, so ``Cell.restore`` calls
``after_restore`` to take them out again. A module of its own, that imports
neither the cell nor the engine, so the cell can call it without the import
circle it had when this lived in ``engine`` (which imports the cell).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.state import ClusterState


def after_restore(state: ClusterState, nodes: Mapping[str, Any]) -> None:
    """Re-apply failed GPUs and phantom bookings, from each node record's
    ``extra["adapt"]``, to a state rebuilt from the records."""
    for node, record in nodes.items():
        ns = record.extra.get("adapt") if isinstance(record.extra, dict) else None
        if not ns:
            continue
        i = state.node_index[node]
        for g in ns.get("bad", []):
            state.gpu_free[i, g] = 0
        for g, milli in sorted(ns.get("phantom", {}).items()):
            state.gpu_free[i, int(g)] -= int(milli)
        state._touch(i)
