"""Simulated backend: tasks that progress by a throughput model instead of running.

A ``simulated`` task (``ExecutorSpec.simulated``) says how long it takes
(``duration_s``) on the reference GPU (``simulate.reference_model``, V100 32 GB
by default) with the share it was first given, and how much of its GPU it
uses. Here it advances, every tick, by::

    dt_wall * time_scale * speed(model) * share_now / share_first * health

* ``speed(model)`` = sqrt(fp16 TFLOPS x memory bandwidth) relative to the
  reference: deep-learning steps are partly compute-, partly memory-bound, and
  the geometric mean ranks catalog GPUs as published training benchmarks do
  (A100 ~2.4x a V100, T4 ~0.4x).
* ``share_now / share_first``: a resize up speeds the task up, down slows it.
* ``health``: 1, or less while a GPU is thermally throttled, 0 on a failed GPU
  (the task then fails with ``gpu_failed``). A multi-GPU task runs at the pace
  of its slowest GPU.

On a simulated node (:class:`~agents.telemetry.simulated.SimulatedNode`) the
task's load appears on its GPUs, shaped by a GenAI curve, so the agent reports
what the executor runs. Runtimes are reported in simulated seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from agents.backends.base import ExitInfo, LaunchError, OnExit, TaskRun
from agents.progress import ProgressReading
from agents.telemetry.simulated import SimulatedNode
from schemas.gpu_catalog import GpuModelSpec, get_model

TICK_S = 0.1
"""Wall seconds between progress updates."""


def relative_speed(model: GpuModelSpec, reference: GpuModelSpec) -> float:
    """Throughput of ``model`` relative to ``reference`` (see the module docstring)."""
    perf = math.sqrt(model.fp16_tflops * model.mem_bandwidth_gbps)
    ref = math.sqrt(reference.fp16_tflops * reference.mem_bandwidth_gbps)
    return perf / ref


@dataclass
class _SimTask:
    run: TaskRun
    started: float
    last: float
    done_s: float
    baseline_share: int


class SimulatedBackend:
    """Runs ``ExecutorSpec(kind="simulated")`` tasks, on a simulated node or alone."""

    kind = "simulated"

    def __init__(
        self,
        on_exit: OnExit,
        *,
        node: SimulatedNode | None = None,
        time_scale: float = 1.0,
        reference_model: str = "V100M32",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_exit = on_exit
        self._node = node
        self._time_scale = node.time_scale if node is not None else time_scale
        self._reference = get_model(reference_model)
        self._clock = clock
        self._tasks: dict[str, _SimTask] = {}
        self._ticker: asyncio.Task[None] | None = None
        self.frozen = False
        """Set on node loss: nothing progresses or reports any more."""

    # -- Backend ---------------------------------------------------------------

    async def start(self, run: TaskRun) -> None:
        work = run.spec.simulated
        if work is None:
            raise LaunchError("simulated task without 'simulated' work description")
        if run.task_id in self._tasks:
            raise LaunchError(f"task {run.task_id} is already running here")
        now = self._clock()
        baseline = run.baseline_share_milli or run.share_milli or 1000
        task = _SimTask(run, now, now, run.progress_s, baseline)
        self._tasks[run.task_id] = task
        self._place(task, now)
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick_forever())

    async def stop(self, task_id: str, *, grace_s: float, checkpoint: bool) -> ExitInfo | None:
        task = self._tasks.pop(task_id, None)
        if task is None:
            return None
        self._unplace(task)
        return ExitInfo(143, self._runtime(task), message="stopped (SIGTERM)")

    def running(self) -> list[str]:
        return sorted(self._tasks)

    def progress(self, task_id: str) -> float:
        """Simulated seconds of work done (carried into a resized run)."""
        task = self._tasks.get(task_id)
        return task.done_s if task else 0.0

    def progress_reading(self, task_id: str) -> ProgressReading | None:
        """The work done (simulated seconds on the reference GPU at the first share),
        at the simulated time: its rate is the task's speed where it runs, as a
        real task's own count would show it (:mod:`agents.progress`)."""
        task = self._tasks.get(task_id)
        if task is None:
            return None
        return ProgressReading(task.done_s, task.last * self._time_scale)

    def usage(self, task_id: str) -> dict[int, tuple[float, float]] | None:
        task = self._tasks.get(task_id)
        if task is None:
            return None
        if self._node is not None:
            return self._node.task_usage(task_id, self._clock())
        work = task.run.spec.simulated
        assert work is not None
        return {
            g.index: (work.gpu_util_pct * g.share_milli / 1000.0, float(work.gpu_mem_used_mib))
            for g in task.run.gpus
        }

    async def close(self, *, stop_tasks: bool) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for task in list(self._tasks.values()):
            self._unplace(task)
        self._tasks.clear()

    # -- internals -------------------------------------------------------------

    def _runtime(self, task: _SimTask) -> float:
        return (self._clock() - task.started) * self._time_scale

    def _place(self, task: _SimTask, now: float) -> None:
        if self._node is None:
            return
        work = task.run.spec.simulated
        assert work is not None
        for g in task.run.gpus:
            if 0 <= g.index < len(self._node.gpus):
                self._node.add_load(
                    g.index,
                    task.run.task_id,
                    share=g.share_milli / 1000.0,
                    util_pct=work.gpu_util_pct,
                    mem_mib=float(min(work.gpu_mem_used_mib, g.memory_mib or math.inf)),
                    now_s=now,
                )

    def _unplace(self, task: _SimTask) -> None:
        if self._node is None:
            return
        for g in task.run.gpus:
            if 0 <= g.index < len(self._node.gpus):
                self._node.remove_load(g.index, task.run.task_id)

    def _speed(self, task: _SimTask, now: float) -> tuple[float, int | None]:
        """Progress rate (simulated work s per simulated s) and a failed GPU if any."""
        model = self._reference
        health = 1.0
        if self._node is not None:
            model = self._node.gpus[0].spec
            for g in task.run.gpus:
                h = self._node.gpu_speed(g.index, now)
                if h == 0.0:
                    return 0.0, g.index
                health = min(health, h)
        share = task.run.share_milli / task.baseline_share
        return relative_speed(model, self._reference) * share * health, None

    async def _tick_forever(self) -> None:
        while self._tasks:
            await asyncio.sleep(TICK_S)
            if not self.frozen:
                await self.tick()

    async def tick(self) -> None:
        """Advance every task to now; report the ones that ended."""
        now = self._clock()
        for task in list(self._tasks.values()):
            rate, failed_gpu = self._speed(task, now)
            task.done_s += (now - task.last) * self._time_scale * rate
            task.last = now
            work = task.run.spec.simulated
            assert work is not None
            if failed_gpu is not None:
                await self._end(
                    task,
                    ExitInfo(None, self._runtime(task), "gpu_failed", f"GPU {failed_gpu} failed"),
                )
            elif task.done_s >= work.duration_s:
                await self._end(task, ExitInfo(work.exit_code, self._runtime(task)))

    async def _end(self, task: _SimTask, info: ExitInfo) -> None:
        if self._tasks.pop(task.run.task_id, None) is None:
            return
        self._unplace(task)
        await self._on_exit(task.run, info)
