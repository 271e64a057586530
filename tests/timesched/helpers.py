"""Small declarative cells for the issue-7 scenarios: nodes, then tasks with meta, at times."""

from __future__ import annotations

from streams.core.cell import Cell, Outcome
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.profile import Profile, get_profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.profiles.compile import compile_profile

BESTFIT = compile_profile(get_profile("bestfit"))
LOCALITY = compile_profile(Profile("loc", {"bestfit": 1.0, "data": 1.0},
                                   {"data": {"scale": 0.0, "transfer_cost": 100.0}}))


def cell(nodes: int = 1, gpus: int = 4, config: QueueConfig | None = None,
         sched=BESTFIT) -> Cell:
    c = Cell("c", sched, config or QueueConfig(), explain=False)
    for i in range(nodes):
        c.add_node(NodeAdded(f"n{i}", f"node-{i}", 64_000, 262_144, gpus, "A100"), now_s=0.0)
    return c


def submit(c: Cell, task: str, gpus: int = 1, milli: int = 1000, t: float = 0.0,
           **meta: object) -> list[Outcome]:
    req = TaskRequest(task, 1000, 1024, gpus, milli)
    return c.submit(TaskArrived(f"s/{task}", req), None, TaskMeta(**meta), now_s=t)  # type: ignore[arg-type]


def end(c: Cell, task: str, t: float, failed: bool = False) -> list[Outcome]:
    return c.end(TaskEnded(f"e/{task}", task), now_s=t, failed=failed)


def running(c: Cell) -> set[str]:
    return {t for t, r in c.tasks.items() if r.status == "running"}
