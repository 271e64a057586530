"""Event ids: ULIDs, unique and sortable by event time.

A ULID is 48 bits of Unix milliseconds followed by 80 bits of entropy, written
as 26 Crockford base-32 characters, so string order is time order. Producers
at the edge (agents, users) use random entropy; the pure decision core must be
deterministic, so it derives the entropy from a seed (e.g. the causing event
id and a counter) and replay produces the same ids.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TIME_BITS = 48
_RAND_BITS = 80


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
"""Two base-32 digits per 10-bit value: a ULID is written in 13 steps instead of 26."""
_PAIR_SHIFTS = tuple(range(120, -1, -10))


def _encode(value: int) -> str:
    """The 26 base-32 digits of the value's low 130 bits, most significant first."""
    return "".join([_PAIRS[(value >> s) & 1023] for s in _PAIR_SHIFTS])


def _ms(occurred_at: datetime) -> int:
    if occurred_at.tzinfo is None:
        raise ValueError("occurred_at must be timezone-aware")
    ms = int(occurred_at.timestamp() * 1000)
    if not 0 <= ms < 1 << _TIME_BITS:
        raise ValueError("occurred_at is outside the ULID time range")
    return ms


def new_event_id(occurred_at: datetime) -> str:
    """A fresh ULID for an event at ``occurred_at`` with random entropy."""
    return _encode(_ms(occurred_at) << _RAND_BITS | secrets.randbits(_RAND_BITS))


def derive_event_id(occurred_at: datetime, seed: str | bytes) -> str:
    """A deterministic ULID: same time and seed give the same id.

    Seeds must be unique per event, e.g. ``f"{cause_event_id}/{n}"`` for the
    n-th decision caused by one input event.
    """
    data = seed.encode() if isinstance(seed, str) else seed
    entropy = int.from_bytes(hashlib.blake2b(data, digest_size=10).digest(), "big")
    return _encode(_ms(occurred_at) << _RAND_BITS | entropy)


def event_id_ms(event_id: str) -> int:
    """The millisecond timestamp encoded in a ULID."""
    value = 0
    for ch in event_id[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    return value
