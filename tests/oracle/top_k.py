"""The oracle of a reason's top candidates (native/src/select.rs, ``top_k``).

Written from the rule, not from the code: of the nodes with a finite total, the ``k``
with the highest total; among equal totals the lowest rank, then the lowest node slot.
Sorting every node is the plainest way to say it, and what the core avoids.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def top_k(total: Sequence[float], rank: Sequence[int], k: int) -> list[int]:
    finite = [v for v in range(len(total)) if math.isfinite(total[v])]
    return sorted(finite, key=lambda v: (-total[v], rank[v], v))[:k]
