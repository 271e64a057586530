"""The ``backfill`` baseline: whole GPUs, priority then FCFS, EASY backfilling.

What a Slurm cluster runs by default (``SchedulerType=sched/backfill``), reduced
to the part every description of it agrees on, EASY backfilling (the Argonne
SP scheduler, D. Lifka, *The ANL/IBM SP scheduling system*, JSSPP 1995;
analysed by A. Mu'alem and D. Feitelson, *Utilization, predictability,
workloads, and user runtime estimates in scheduling the IBM SP2 with
backfilling*, IEEE TPDS 12(6), 2001):

* whole GPUs, as ``fifo``/``static`` (``static_request``: a fractional task
  gets one whole GPU); gangs as the cell schedules them (all members at once);
* the queue in priority order, then submission order (``QueueConfig``
  ``order="priority"``): no fair share, no aging;
* the first task that does not fit (the head) gets one reservation: the node
  (or a gang's nodes) and the earliest time it fits if running tasks end when
  their estimates say; a later task starts now only where it cannot delay that
  start: it ends by then, or it runs off the reserved nodes (``Cell._drain``,
  ``Cell._reserve``). Only the head is protected (EASY); Slurm's own plugin
  reserves for every job it tests (``bf_max_job_test``), which is more
  conservative;
* no preemption; placement among feasible nodes is best fit.

Runtime estimates: the task's ``expected_s`` when its row has one, else its
true duration (``backfill_estimate`` in ``streams.sim.time.cli``). A perfect
estimate favours this baseline: real users' estimates are poor (Mu'alem and
Feitelson), and the queue's ``default_duration_s`` is never used here.

Parameters: ``max_scan`` = ``max_attempts`` = 500 tasks looked at / tried per
pass (Slurm's ``bf_max_job_test`` default), a pass at every arrival, end and
one-minute tick (Slurm's ``bf_interval`` is 30 s).
"""

from __future__ import annotations

from streams.core.queue import QueueConfig
from streams.policies import static

NAME = "backfill"
PLACEMENT_PROFILE = "bestfit"
DEPTH = 500  # Slurm's bf_max_job_test default: jobs looked at per backfill pass
QUEUE = QueueConfig(order="priority", backfill=True, strict_fifo=False, preemption=False,
                    max_attempts=DEPTH, max_scan=DEPTH)
BASELINES = (*static.NAMES, NAME)
"""The time-mode-only baselines: whole GPUs, no preemption, objectives or adaptation."""
