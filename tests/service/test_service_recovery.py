"""Recovery and scale-out on the real broker, with real worker processes killed by SIGKILL.

A killed worker's successor restores the cells from the state topics and goes on
from the last committed transaction: every task gets exactly one placement
decision, no decision id appears twice, no GPU is over-committed (all read
from the decisions topic with ``read_committed``).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from service_builders import node, task
from service_checks import check_decisions
from service_kafka import Deployment, wait_for_nodes, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHAPES = ((1, 250), (1, 500), (1, 1000), (2, 1000), (4, 1000))


def _tasks(prefix: str, n: int, start: int = 0) -> list[Any]:
    return [task(f"task-{i:04d}", *SHAPES[i % len(SHAPES)], t=10 + i * 0.001, seed=prefix)
            for i in range(start, start + n)]


async def _count(dep: Deployment, at_least: int, timeout_s: float) -> list[bytes]:
    return await dep.read("hetsched.decisions", lambda r: len(r) >= at_least, timeout_s,
                          raw=True)


async def _produce_slowly(dep: Deployment, envs: list[Any], chunk: int = 20) -> None:
    for i in range(0, len(envs), chunk):
        await dep.produce("hetsched.tasks", envs[i:i + chunk])
        await asyncio.sleep(0.05)


async def test_a_worker_killed_mid_burst_resumes_without_losing_or_repeating_decisions(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    first = dep.start_worker(processes, "worker-1")
    wait_healthy(first, processes)
    await dep.produce("hetsched.nodes", [node(f"node-{i}", "A100", 8, t=i) for i in range(12)])
    wait_for_nodes([first.web_port], 12)
    tasks = _tasks(dep.prefix, 300)
    burst = asyncio.create_task(_produce_slowly(dep, tasks))
    await _count(dep, 40, 60)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    await burst
    second = dep.start_worker(processes, "worker-2")
    raw = await _count(dep, len(tasks), 120)
    assert second.poll() is None, processes.log_of(second)
    check_decisions(raw, tasks)
    assert len(raw) == len(tasks), processes.log_of(second)


async def test_two_workers_share_four_cells_and_one_takes_over_when_the_other_dies(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path, cells=4, partitions=4)
    a = dep.start_worker(processes, "worker-a")
    b = dep.start_worker(processes, "worker-b")
    wait_healthy(a, processes)
    wait_healthy(b, processes)
    await dep.produce("hetsched.nodes", [node(f"node-{c}-{i}", "A100", 8, t=i, cell=f"cell-{c}")
                                         for c in range(4) for i in range(3)])
    wait_for_nodes([a.web_port, b.web_port], 12)
    before = _tasks(dep.prefix, 120)
    await dep.produce("hetsched.tasks", before)
    raw = await _count(dep, len(before), 90)
    cells = {c for c in (decode_cell(r) for r in raw)}
    assert len(cells) > 1, "the router spread tasks over several cells"
    os.killpg(b.pid, signal.SIGKILL)
    b.wait()
    after = _tasks(dep.prefix, 120, start=len(before))
    await dep.produce("hetsched.tasks", after)
    raw = await _count(dep, len(before) + len(after), 120)
    assert a.poll() is None, processes.log_of(a)
    check_decisions(raw, before + after)
    assert len(raw) == len(before) + len(after)


def decode_cell(raw: bytes) -> str | None:
    from schemas.codec import decode

    return decode(raw).cell
