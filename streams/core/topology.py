"""Racks and measured links between nodes: what data locality needs to price a transfer. Pure.

Why: a task whose input sits on one node should run there, else in the same
rack (top-of-rack switch, full bandwidth), else where the input is cheapest
to fetch. The price of a move is ``latency + size / bandwidth`` of the link
from the node holding the input to the candidate node.

Where the figures come from, most specific first:

1. a ``LinkMetrics`` event with ``scope="node"`` between the two nodes (either
   direction: links are taken as symmetric, the last measurement wins);
2. a ``LinkMetrics`` event with ``scope="rack"`` from either node to the
   other's rack;
3. the default topology: same rack ``DEFAULT_RACK_LINK``, different racks
   ``DEFAULT_CROSS_LINK`` (a 4:1 oversubscribed spine, as in most clusters).

Racks come from node registration (``NodeRegistered.rack``); a node that
names none is put in the rack its name starts with (``rack07-node3`` ->
``rack07``, the simulators' convention), else in a rack of its own. The same
node costs nothing.

The topology is part of the cluster state (``ClusterState.topology``), changed
only by ``evolve`` (node added, link measured), and saved in the cell's meta
record, so replay and restore rebuild the same prices. Costs per input node
are cached as one vector over node slots and dropped whenever a rack or link
changes (``version``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

GBIT_PER_MIB = 8 * 1024 * 1024 / 1e9  # one MiB in gigabits


@dataclass(frozen=True, slots=True)
class Link:
    """Measured (or assumed) bandwidth and latency of a path between two places."""

    bandwidth_gbps: float
    latency_us: float

    def seconds(self, size_mib: float) -> float:
        """Time to move ``size_mib`` over this link (no bandwidth: never, i.e. infinite)."""
        if self.bandwidth_gbps <= 0:
            return float("inf")
        return self.latency_us * 1e-6 + size_mib * GBIT_PER_MIB / self.bandwidth_gbps


# ASSUMPTION (documented in docs/simulation.md): 100 GbE to the top-of-rack switch,
# 4:1 oversubscribed spine between racks; latencies of one and three switch hops.
DEFAULT_RACK_LINK = Link(100.0, 5.0)
DEFAULT_CROSS_LINK = Link(25.0, 20.0)
_RACK_PREFIX = re.compile(r"^(rack[^-_./]*)", re.IGNORECASE)


def default_rack(node: str) -> str:
    """The rack a node without a registered rack is put in (see the module docstring)."""
    m = _RACK_PREFIX.match(node)
    return m.group(1) if m else f"node:{node}"


class Topology:
    """Racks of nodes and measured links; see the module docstring. Mutable (in the state)."""

    def __init__(self, rack_link: Link = DEFAULT_RACK_LINK,
                 cross_link: Link = DEFAULT_CROSS_LINK) -> None:
        self.rack_link = rack_link
        self.cross_link = cross_link
        self.rack_of: dict[str, str] = {}
        self.node_links: dict[tuple[str, str], Link] = {}
        self.rack_links: dict[tuple[str, str], Link] = {}
        self.version = 0
        self._cache: dict[tuple[int, int, float, float | None], np.ndarray] = {}
        self._rack_ids: tuple[int, np.ndarray] | None = None

    # ---- changes (called by evolve) ----------------------------------------------------

    def _changed(self) -> None:
        self.version += 1
        self._cache.clear()
        self._rack_ids = None

    def add_node(self, node: str, rack: str | None) -> None:
        self.rack_of[node] = rack or default_rack(node)
        self._changed()

    def set_link(self, node: str, peer: str, scope: str, link: Link) -> None:
        """Record a measurement from ``node`` to ``peer`` (a node, or a rack for scope rack)."""
        if scope == "node":
            self.node_links[_pair(node, peer)] = link
        elif scope == "rack":
            self.rack_links[(node, peer)] = link
        else:
            raise ValueError(f"unknown link scope {scope!r}")
        self._changed()

    def copy(self) -> Topology:
        """An independent copy for a state's ``ClusterState.copy``: the racks and links
        (their keys and ``Link`` values are immutable, so one level is enough), without
        the price cache, which is derived and rebuilt on demand. A deep copy walked every
        cached price vector, a trial state copied per swap the cell weighs."""
        dup = Topology(self.rack_link, self.cross_link)
        dup.rack_of = dict(self.rack_of)
        dup.node_links = dict(self.node_links)
        dup.rack_links = dict(self.rack_links)
        dup.version = self.version
        return dup

    # ---- prices -------------------------------------------------------------------------

    def link(self, src: str, dst: str) -> Link | None:
        """The link between two nodes (None: the same node, nothing moves)."""
        if src == dst:
            return None
        found = self.node_links.get(_pair(src, dst))
        if found is not None:
            return found
        rs, rd = self.rack_of.get(src), self.rack_of.get(dst)
        found = self.rack_links.get((dst, rs or "")) or self.rack_links.get((src, rd or ""))
        if found is not None:
            return found
        return self.rack_link if rs is not None and rs == rd else self.cross_link

    def same_rack(self, a: str, b: str) -> bool:
        ra = self.rack_of.get(a)
        return ra is not None and ra == self.rack_of.get(b)

    def transfer_s(self, names: Sequence[str], home: int, size_mib: float,
                   cap_s: float | None = None) -> np.ndarray:
        """Seconds to move ``size_mib`` from node slot ``home`` to every node slot of ``names``,
        at most ``cap_s`` each when given. Read-only: the array is shared.

        Cached per (home, node count, size, cap) until the topology changes: a placement
        scored with locality asks for the same vector again and again. Without
        published links the vector is built from rack ids in one numpy pass.
        """
        n = len(names)
        key = (home, n, size_mib, cap_s)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if cap_s is not None:
            out = np.minimum(self.transfer_s(names, home, size_mib), cap_s)
        else:
            racks = self._racks(names)
            src = names[home]
            out = np.where(racks == racks[home], self.rack_link.seconds(size_mib),
                           self.cross_link.seconds(size_mib))
            if self.node_links or self.rack_links:
                for i, dst in enumerate(names):
                    link = self.link(src, dst)
                    out[i] = 0.0 if link is None else link.seconds(size_mib)
            out[home] = 0.0
        if len(self._cache) > 4096:
            self._cache.clear()
        out.flags.writeable = False  # shared by every caller of the same key
        self._cache[key] = out
        return out

    def _racks(self, names: Sequence[str]) -> np.ndarray:
        if self._rack_ids is not None and self._rack_ids[0] == len(names):
            return self._rack_ids[1]
        ids: dict[str, int] = {}
        arr = np.array([ids.setdefault(self.rack_of.get(nm) or default_rack(nm), len(ids))
                        for nm in names], np.int64)
        self._rack_ids = (len(names), arr)
        return arr

    # ---- persistence ----------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """Measured links as a JSON-able dict (racks travel with the nodes' records)."""
        return {"node": [[a, b, lk.bandwidth_gbps, lk.latency_us]
                         for (a, b), lk in sorted(self.node_links.items())],
                "rack": [[a, b, lk.bandwidth_gbps, lk.latency_us]
                         for (a, b), lk in sorted(self.rack_links.items())]}

    def restore(self, raw: Mapping[str, Any] | None) -> None:
        for scope in ("node", "rack"):
            for a, b, bw, lat in (raw or {}).get(scope, []):
                self.set_link(a, b, scope, Link(float(bw), float(lat)))


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)
