"""The ``fifo`` baseline (alias ``static``): whole GPUs, strict FCFS, no backfill.

``fifo`` is its true name; ``static`` is kept as an alias for the runs and
tables that already use it. It is the no-backfill straw man: no production
cluster runs a queue that stops at its first blocked job (Slurm backfills by
default), so a fair comparison also runs ``backfill``
(``streams.policies.backfill``), the same whole GPUs with EASY backfilling.

Not a scoring policy but a *scheduling* policy, so it is a request transform
plus queue settings rather than a ``Policy``:

* a fixed number of whole GPUs per task, decided at submission: a fractional
  task (e.g. inference at 0.3 GPU) gets one whole GPU, a multi-GPU task its
  count; no sharing, no resizing afterwards;
* first-come first-served, strictly: the queue stops at the first task that
  does not fit (no backfilling, no priorities, no fair share);
* no preemption.

Placement among feasible nodes is best fit (the usual bin-packing choice of
static allocators); the time simulator runs it on the same cell as hetsched.
"""

from __future__ import annotations

import dataclasses

from streams.core.queue import QueueConfig
from streams.core.request import MILLI_PER_GPU, TaskRequest

NAME = "static"
FIFO = "fifo"
NAMES = (FIFO, NAME)
"""The names this baseline answers to: ``fifo``, and ``static`` (its old name)."""
PLACEMENT_PROFILE = "bestfit"
QUEUE = QueueConfig(order="fifo", backfill=False, strict_fifo=True, preemption=False)


def static_request(req: TaskRequest) -> TaskRequest:
    """Whole GPUs only: a share below one GPU becomes one whole GPU."""
    if not req.num_gpu or req.gpu_milli == MILLI_PER_GPU:
        return req
    return dataclasses.replace(req, gpu_milli=MILLI_PER_GPU)
