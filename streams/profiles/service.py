"""The scheduler the service compiles: a built-in profile plus a fixed typical workload.

Fragmentation-aware policies (``fgd``, ``hetsched``) score a placement by how
much it fragments GPUs *for the tasks that typically arrive*. The simulator
learns that histogram from its trace; a long-running service has no trace up
front, so it uses this fixed, documented mix (fractional quarters and halves,
whole 1/2/4/8-GPU jobs). It is part of the decision function: changing it
changes decisions, so audit replay must compile the same profile and mix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from streams.core.objectives import WeightSchedule
from streams.core.profile import Profile, get_profile
from streams.core.request import TaskRequest
from streams.core.scheduler import Scheduler
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile
from streams.profiles.objectives import schedule_from_config

# (cpu_milli, memory_mib, num_gpu, gpu_milli, how many of 100 tasks)
DEFAULT_MIX: tuple[tuple[int, int, int, int, int], ...] = (
    (4000, 16384, 1, 250, 25),
    (4000, 16384, 1, 500, 20),
    (8000, 32768, 1, 1000, 25),
    (16000, 65536, 2, 1000, 15),
    (32000, 131072, 4, 1000, 10),
    (64000, 262144, 8, 1000, 5),
)
SEED = 0


def typical_tasks() -> TypicalTasks:
    """The fixed typical workload (see the module docstring)."""
    tasks = [
        TaskRequest(f"typical-{i}-{j}", cpu, mem, num_gpu=n, gpu_milli=milli)
        for i, (cpu, mem, n, milli, count) in enumerate(DEFAULT_MIX)
        for j in range(count)
    ]
    return TypicalTasks.from_tasks(tasks, coverage=1.0)


def service_objectives(raw: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None,
                       ) -> WeightSchedule | None:
    """Compile an objectives config (``HETSCHED_OBJECTIVES``) with the service's mix; None: off.

    Part of the decision function like the profile: audit replay must compile
    the same file to reproduce the decisions.
    """
    if raw is None:
        return None
    return schedule_from_config(raw, {"typical": typical_tasks(), "seed": SEED})


SPEED_WEIGHT = 100.0
"""Weight of ``speed`` (0..100, 100 on the class's fastest model) for tasks whose speeds
the cell learned: a model 1 % faster outweighs packing's whole range (0..100, weight
1), so the task goes to its fastest free model and packing chooses among that model's
nodes (the time simulator's ``--speeds`` uses the same weight)."""

LOCALITY_WEIGHT = 1.0
"""Weight of ``locality`` added for tasks whose input is on a known node (as the time
simulator's profile: seconds to move the input, so it decides between nodes that
pack about as well and does not override packing)."""


def service_scheduler(profile: str) -> Scheduler:
    """Compile built-in ``profile`` with the service's typical workload and seed.

    A task that names its input's node (a workflow stage, whose input is where its
    predecessor ran, or a submission with a located input) is placed with the
    profile plus ``locality``, so it lands on or near its data where that packs as
    well; without it the service ignored where a stage's input is. Other tasks use
    the profile alone: their decisions (candidate terms included) are unchanged.
    """
    ctx = {"typical": typical_tasks(), "seed": SEED}
    base = get_profile(profile)
    located = None
    if "locality" not in base.weights:
        located = with_speed(compile_profile(Profile(
            base.name, {**base.weights, "locality": LOCALITY_WEIGHT}, base.args,
            base.gpu_tiebreak), ctx), ctx)
    return dataclasses.replace(with_speed(compile_profile(base, ctx), ctx), located=located)


def with_speed(sched: Scheduler, context: dict[str, object]) -> Scheduler:
    """``sched`` with its ``speedy`` variant: the same profile plus the ``speed`` term
    at :data:`SPEED_WEIGHT`, for tasks the cell has learned speeds of (issue 35)."""
    p = sched.profile
    if "speed" in p.weights:
        return sched
    speedy = compile_profile(Profile(p.name, {**p.weights, "speed": SPEED_WEIGHT}, p.args,
                                     p.gpu_tiebreak), context)
    return dataclasses.replace(sched, speedy=speedy)
