"""Node liveness from heartbeats, judged on ticks; and which failures take GPUs out.

A node is tracked from its registration by an agent (``agent_version`` set) or
its first heartbeat; nodes registered by hand, without an agent, never
heartbeat and are never timed out. On a tick at ``now``, a
tracked node last heard before ``now - timeout`` is lost: it takes no new
work and its tasks are re-queued. A heartbeat from a lost node brings it back
and is reconciled with the tasks its executor reports. Time is event time:
the heartbeat's and the tick's ``occurred_at``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FATAL_XIDS = frozenset({48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120})
"""XID codes after which the GPU is not trusted with work (double-bit ECC, fell off
the bus, row-remap failure, GSP errors, uncontained ECC); NVIDIA's XID catalog."""


def expired(last_seen_s: Mapping[str, float], lost: Iterable[str], now_s: float,
            timeout_s: float) -> list[str]:
    """Tracked nodes not heard from within ``timeout_s`` and not already lost, sorted."""
    gone = set(lost)
    return sorted(n for n, t in last_seen_s.items() if n not in gone and now_s - t > timeout_s)


def fatal_gpu_signal(xid_errors: Iterable[int], ecc_dbe_total: int, known_dbe: int) -> str | None:
    """A reason to take a GPU out from one telemetry sample, or None."""
    bad = sorted(set(xid_errors) & FATAL_XIDS)
    if bad:
        return f"xid {bad[0]}"
    if ecc_dbe_total > known_dbe:
        return "uncorrectable ECC"
    return None
