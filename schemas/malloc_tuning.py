"""Where a process's large temporary arrays come from (glibc's malloc thresholds).

The scheduler's batch steps build numpy temporaries of megabytes at 100k GPUs (a
node-state key of 20k rows x 22 columns in ``_node_classes``, its products and
comparisons). glibc serves an allocation above ``M_MMAP_THRESHOLD`` (128 KiB at
start) with a fresh ``mmap``, whose pages fault in on first touch and go back to the
system when freed: every such step then pays its page faults again. glibc raises the
threshold by itself once a large mmapped block is freed, so how fast those steps run
used to depend on what happened to be freed first: when FGD's fragmentation moved to
the compiled core (issue 36) and stopped freeing large numpy arrays early, placement
p99 at 105,604 GPUs doubled (5.9 to 11.5 ms) with no change to the code that ran slower
(measured with both thresholds fixed: 6.2 and 6.1 ms). Fixing the thresholds makes it
deterministic: blocks up to 32 MiB (glibc's largest mmap threshold on 64-bit) come
from the heap, and up to 64 MiB of freed heap is kept for reuse instead of trimmed.

A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 64 << 20


def keep_large_blocks_in_heap() -> bool:
    """Fix glibc's mmap and trim thresholds (see the module docstring).

    Returns whether both were set: False where the C library has no ``mallopt``
    (not glibc) or refused a value.
    """
    try:
        # The symbols the process already has: the C library's, with no search for it.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
