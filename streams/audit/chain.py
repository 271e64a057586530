"""A hash chain over decisions: one value that stands for a whole run.

``h_0 = sha256(b"")``, ``h_i = sha256(h_{i-1} || canonical bytes of decision i)``
(raw 32-byte digests; canonical bytes = :func:`schemas.codec.encode`, sorted-key
orjson). Two runs have the same head iff they made the same decisions, byte for
byte, in the same order. Decisions are chained per cell in log order (a cell's
decisions are one ordered partition); the run's head chains the cells' decisions
cell by cell, cells sorted by name, so it does not depend on how cells were
spread over partitions or workers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

EMPTY = hashlib.sha256(b"").digest()


class HashChain:
    """Running head of a chain; :meth:`add` one canonical decision at a time."""

    __slots__ = ("count", "head")

    def __init__(self) -> None:
        self.head = EMPTY
        self.count = 0

    def add(self, canonical: bytes) -> None:
        self.head = hashlib.sha256(self.head + canonical).digest()
        self.count += 1

    def hexdigest(self) -> str:
        return self.head.hex()


def chain_of(decisions: Iterable[bytes]) -> HashChain:
    chain = HashChain()
    for d in decisions:
        chain.add(d)
    return chain


def run_hash(by_cell: Mapping[str, list[bytes]]) -> str:
    """The run's head: every cell's decisions in order, cells sorted by name."""
    return chain_of(d for cell in sorted(by_cell) for d in by_cell[cell]).hexdigest()
