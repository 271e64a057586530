"""The node executor: carry out the scheduler's decisions for this node, once each.

For every decision on the decisions topic (fed by :mod:`agents.feed`):

1. Ignore it unless it names this node (``node_id``, either end of a
   migration, or any member of a gang's ``TaskPlaced`` v2), or it stops a gang
   task whose member runs here (a gang's stop names rank 0's node only).
2. Claim its ``decision_id`` in the journal; if it was claimed before (a
   redelivery, a re-read after restart), do nothing. Claim-then-act gives
   at-most-once application, surviving restarts (see :mod:`agents.journal`).
3. Act: place/probe -> start; preempt -> stop, report ``TaskFailed(killed)``
   with the exit code; resize -> checkpoint, stop, restart on the new GPUs;
   migrate -> checkpoint and stop here / start on the destination. A gang
   member starts on its own GPUs with the rendezvous variables of
   :func:`gang_environment` (``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR``...).
4. Report on ``hetsched.task-status``: ``TaskStarted``, periodic ``TaskUsage``,
   ``TaskFinished`` or ``TaskFailed`` (with the reason), each caused by the
   decision's event so the audit trail links them.

Usage is attributed per process (:mod:`agents.accounting`): the GPU memory and
SM share of the task's own processes (its launched pid and descendants) where
the telemetry source lists processes, the GPU's figures split by booked share
where it does not. A task whose processes hold more GPU memory than it booked
(beyond ``executor.overuse_margin_pct``) also gets a ``TaskOverUse`` per GPU
and usage window; the scheduler's policy decides what happens to it.

Bad input never stops the executor: an unknown GPU index, a command that does
not exist, an executor kind this node does not run -- each becomes a
``TaskFailed`` with the reason, and the next decision is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from agents.accounting import (
    MPS_SERVER,
    Booking,
    ProcessTable,
    attribute,
    foreign_mib,
    over_booking,
    owners,
    process_name,
    read_process_table,
)
from agents.backends.base import Backend, ExitInfo, LaunchError, TaskRun
from agents.bus import Publisher, Topics
from agents.config import ExecutorSection
from agents.journal import Journal
from agents.metrics import DECISIONS_HANDLED
from agents.progress import ProgressWindow
from agents.sandbox import NodeInventory as SandboxInventory
from agents.sandbox import SandboxPolicy, check_decision, env_refusal
from agents.telemetry.base import GpuSample
from schemas.events import (
    Envelope,
    Event,
    ExecutorSpec,
    GpuAssignment,
    GpuUsage,
    TaskFailed,
    TaskFinished,
    TaskMigrating,
    TaskOverUse,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskProbe,
    TaskProgress,
    TaskResized,
    TaskStarted,
    TaskUsage,
    TaskUsageV2,
)

log = logging.getLogger(__name__)

UsageProbe = Callable[[int], tuple[float, float] | None]
"""GPU index -> (utilisation %, memory MiB) of the whole GPU now, if known."""
OWNERS_TTL_S = 0.5
"""How long one walk of the process table serves (the agent and the usage sampler
both ask once a second)."""


MASTER_PORT_BASE = 20000
MASTER_PORT_SPAN = 20000
"""A gang's ``MASTER_PORT`` is ``MASTER_PORT_BASE + crc32(task_id) % MASTER_PORT_SPAN``:
every member derives the same port from the task id alone, with no exchange."""


def decision_nodes(payload: Event) -> tuple[str, ...]:
    """The node ids a decision concerns (empty for e.g. ``TaskUnschedulable``)."""
    if isinstance(payload, TaskMigrating):
        return (payload.from_node_id, payload.to_node_id)
    if isinstance(payload, TaskPlacedV2) and payload.members:
        return tuple(m.node_id for m in payload.members)
    node_id = getattr(payload, "node_id", None)
    return (node_id,) if isinstance(node_id, str) else ()


def master_port(task_id: str) -> int:
    """The rendezvous port of a gang (:data:`MASTER_PORT_BASE`), the same on every node."""
    return MASTER_PORT_BASE + zlib.crc32(task_id.encode()) % MASTER_PORT_SPAN


def gang_environment(placed: TaskPlacedV2, node_id: str) -> dict[str, str]:
    """The variables distributed frameworks read, for ``node_id``'s member of a gang.

    One member per node, so ``RANK`` and ``NODE_RANK`` are both the member's rank
    (a per-node launcher such as ``torchrun --node-rank`` spreads its own processes);
    ``WORLD_SIZE`` counts the gang's GPUs, ``LOCAL_WORLD_SIZE`` this member's.
    ``MASTER_ADDR`` is rank 0's node id: nodes register no address, so a gang needs
    node ids that resolve (the default node id is the host name)."""
    member = next(m for m in placed.members if m.node_id == node_id)
    first = min(placed.members, key=lambda m: m.rank)
    return {
        "WORLD_SIZE": str(sum(len(m.gpus) for m in placed.members)),
        "RANK": str(member.rank),
        "NODE_RANK": str(member.rank),
        "LOCAL_WORLD_SIZE": str(len(member.gpus)),
        "NNODES": str(len(placed.members)),
        "MASTER_ADDR": first.node_id,
        "MASTER_PORT": str(master_port(placed.task_id)),
    }


@dataclass
class _Cause:
    """The decision event a status event answers (for causation/correlation)."""

    event_id: str
    correlation_id: str | None
    cell: str | None

    @classmethod
    def of(cls, env: Envelope[Event]) -> _Cause:
        return cls(env.event_id, env.correlation_id, env.cell)


@dataclass
class _Acc:
    """One GPU's usage samples of a task since its last ``TaskUsage``."""

    util: float = 0.0
    mem: float = 0.0
    samples: int = 0
    peak_mem: float = 0.0
    exact: bool = True
    """Every sample came from the task's own processes (else no over-use is judged)."""
    pids: set[int] = field(default_factory=set)

    def add(self, util: float, mem: float, exact: bool, pids: tuple[int, ...] = ()) -> None:
        self.util += util
        self.mem += mem
        self.samples += 1
        self.peak_mem = max(self.peak_mem, mem)
        self.exact = self.exact and exact
        self.pids.update(pids)


@dataclass
class _Running:
    run: TaskRun
    backend: Backend
    cause: _Cause
    usage: dict[int, _Acc] = field(default_factory=dict)
    """GPU index -> samples since the last TaskUsage."""
    progress: ProgressWindow = field(default_factory=ProgressWindow)
    """The task's own work count since the last TaskUsage (:mod:`agents.progress`)."""


class Executor:
    """Applies decisions for one node. Create, ``add_backend`` each kind, ``restore``."""

    def __init__(
        self,
        node_id: str,
        journal: Journal,
        publisher: Publisher,
        topics: Topics,
        config: ExecutorSection,
        *,
        gpu_indices: Callable[[], set[int]],
        failed_gpus: Callable[[], set[int]] = set,
        usage_probe: UsageProbe | None = None,
        silenced: Callable[[], bool] = lambda: False,
        sandbox: SandboxPolicy | None = None,
        gpu_memory_mib: Callable[[], dict[int, int]] = dict,
        gpu_samples: Callable[[], Mapping[int, GpuSample]] | None = None,
        task_pids: Callable[[str], set[int]] | None = None,
        process_table: Callable[[], ProcessTable] = read_process_table,
        process_names: Callable[[int], str | None] = process_name,
    ) -> None:
        self.node_id = node_id
        self.journal = journal
        self.publisher = publisher
        self.topics = topics
        self.config = config
        self._gpu_indices = gpu_indices
        self._failed_gpus = failed_gpus
        self._usage_probe = usage_probe
        self._silenced = silenced
        self._sandbox = sandbox
        self._gpu_memory_mib = gpu_memory_mib
        self._gpu_samples = gpu_samples
        """Latest per-GPU samples (with per-process figures when the source has them)."""
        self._task_pids = task_pids
        """Pids of a task that its backend does not record (a simulated node's tasks)."""
        self._process_table = process_table
        self._process_name = process_names
        self._owners: tuple[float, dict[int, str], set[str], frozenset[tuple[str, str]]] | None = (
            None
        )
        self._backends: dict[str, Backend] = {}
        self._running: dict[str, _Running] = {}
        self._usage_task: asyncio.Task[None] | None = None
        self._probe_tasks: set[asyncio.Task[None]] = set()
        self.source = f"executor/{node_id}"

    def add_backend(self, backend: Backend) -> None:
        self._backends[backend.kind] = backend

    def running_task_ids(self) -> list[str]:
        return sorted(self._running)

    # -- decisions ---------------------------------------------------------------

    async def handle(self, env: Envelope[Event]) -> str:
        """Apply one decision event; returns what happened (for logs and tests)."""
        payload = env.payload
        if self.node_id not in decision_nodes(payload) and not self._gang_stop(payload):
            return "other-node"
        if self._silenced():
            return "silenced"
        decision_id = getattr(payload, "decision_id", None)
        task_id = getattr(payload, "task_id", "")
        if decision_id is None:
            return "not-a-decision"
        cause = _Cause.of(env)
        key = self._claim_key(decision_id, payload)
        pending = dict(dataclasses.asdict(cause), node=self.node_id, decision_id=decision_id)
        if not self.journal.claim(key, task_id, env.type, pending):
            log.info("decision already applied", extra=self._ids(task_id, decision_id))
            return "duplicate"
        try:
            outcome = await self._apply(payload, cause)
            DECISIONS_HANDLED.labels(self.node_id, outcome).inc()
        except Exception as exc:  # one bad decision must not stop the node
            log.exception("decision failed", extra=self._ids(task_id, decision_id))
            await self._failed(
                task_id, decision_id, cause, "launch_error", f"{type(exc).__name__}: {exc}"
            )
            outcome = "error"
        # Not in a ``finally``: a cancelled or crashed action stays pending (restore).
        self.journal.done(key)
        return outcome

    def _claim_key(self, decision_id: str, payload: Event) -> str:
        """The journal key of this executor's part of a decision.

        The decision id itself, except for a decision that concerns two nodes (a
        migration): then each node claims its own part, since a simulated cluster's
        executors share one journal and the second node's claim of the bare id was
        refused as "already applied" (the task never started at its destination)."""
        if len(set(decision_nodes(payload))) > 1 or self._gang_stop(payload):
            return f"{decision_id}@{self.node_id}"
        return decision_id

    def _gang_stop(self, payload: Event) -> bool:
        """Is this a stop of a gang whose member runs here? The scheduler sends one
        ``TaskPreempted`` per gang, naming rank 0's node; every member's node obeys it
        (and claims its own part, as for a migration)."""
        return isinstance(payload, TaskPreempted) and self.runs_gang_member(payload.task_id)

    def runs_gang_member(self, task_id: str) -> bool:
        """Does a member of the gang ``task_id`` run here (a stop of it concerns this node
        whatever node it names)?"""
        entry = self._running.get(task_id)
        return entry is not None and bool(entry.run.gang_env)

    async def _apply(self, payload: Event, cause: _Cause) -> str:
        if isinstance(payload, TaskPlaced | TaskProbe):
            gpus, gang_env = payload.gpus, {}
            if isinstance(payload, TaskPlacedV2) and payload.members:
                mine = [m for m in payload.members if m.node_id == self.node_id]
                if len(mine) != 1:
                    await self._failed(payload.task_id, payload.decision_id, cause,
                                       "launch_error", f"gang placement names {self.node_id} "
                                       f"as {len(mine)} members (one expected)")
                    return "rejected"
                gpus, gang_env = mine[0].gpus, gang_environment(payload, self.node_id)
            outcome = await self._start(
                payload.task_id,
                payload.decision_id,
                payload.executor,
                gpus,
                cause,
                cpu_milli=payload.cpu_milli,
                memory_mib=payload.memory_mib,
                gang_env=gang_env,
            )
            if isinstance(payload, TaskProbe) and outcome == "started":
                self._schedule_probe_report(payload.task_id, payload.probe_duration_s)
            return outcome
        if isinstance(payload, TaskPreempted):
            return await self._preempt(payload, cause)
        if isinstance(payload, TaskResized):
            return await self._resize(payload, cause)
        if isinstance(payload, TaskMigrating):
            return await self._migrate(payload, cause)
        return "ignored"

    def _check_gpus(self, gpus: list[GpuAssignment]) -> tuple[str, str] | None:
        """(reason, message) if the assignment cannot run here."""
        have = self._gpu_indices()
        missing = sorted({g.index for g in gpus} - have)
        if missing:
            listing = ", ".join(str(i) for i in sorted(have)) or "none"
            return "launch_error", (
                f"GPU index {', '.join(map(str, missing))} is not on node {self.node_id} "
                f"(it has: {listing})"
            )
        if len({g.index for g in gpus}) != len(gpus):
            return "launch_error", "the same GPU is assigned twice"
        failed = sorted({g.index for g in gpus} & self._failed_gpus())
        if failed:
            return "gpu_failed", f"GPU {', '.join(map(str, failed))} has failed on {self.node_id}"
        return None

    def _policy_refusal(
        self, task_id: str, spec: ExecutorSpec, gpus: list[GpuAssignment]
    ) -> str | None:
        """Why the node's policy refuses to start this (None: allowed). Without a sandbox
        the policy is only that a task's environment cannot choose the code that runs
        nor override the executor's own variables (:func:`env_refusal`)."""
        if self._sandbox is None:
            return env_refusal(spec.env, None)
        start = SimpleNamespace(task_id=task_id, node_id=self.node_id, gpus=gpus, executor=spec)
        inventory = SandboxInventory(self.node_id, self._gpu_memory_mib())
        return check_decision(start, self._sandbox, inventory)

    async def _start(
        self,
        task_id: str,
        decision_id: str,
        spec: ExecutorSpec,
        gpus: list[GpuAssignment],
        cause: _Cause,
        *,
        cpu_milli: int = 0,
        memory_mib: int = 0,
        baseline_share: int = 0,
        progress_s: float = 0.0,
        gang_env: dict[str, str] | None = None,
    ) -> str:
        if task_id in self._running:
            log.warning(
                "placement of a task already running here ignored",
                extra=self._ids(task_id, decision_id),
            )
            return "already-running"
        problem = self._check_gpus(gpus)
        if problem is not None:
            await self._failed(
                task_id,
                decision_id,
                cause,
                problem[0],
                problem[1],
                retryable=problem[0] == "gpu_failed",
            )
            return "rejected"
        refusal = self._policy_refusal(task_id, spec, gpus)
        if refusal is not None:
            await self._failed(
                task_id, decision_id, cause, "launch_error", f"refused by node policy: {refusal}"
            )
            return "rejected"
        backend = self._backends.get(spec.kind)
        if backend is None:
            await self._failed(
                task_id,
                decision_id,
                cause,
                "launch_error",
                f"executor kind {spec.kind!r} is not available on {self.node_id}",
            )
            return "rejected"
        run = TaskRun(
            task_id=task_id,
            decision_id=decision_id,
            spec=spec,
            gpus=tuple(gpus),
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            baseline_share_milli=baseline_share or sum(g.share_milli for g in gpus),
            progress_s=progress_s,
            gang_env=dict(gang_env or {}),
        )
        try:
            await backend.start(run)
        except LaunchError as exc:
            await self._failed(task_id, decision_id, cause, "launch_error", str(exc))
            return "rejected"
        self._running[task_id] = _Running(run, backend, cause)
        self._remember(task_id)
        await self._publish(
            TaskStarted(
                task_id=task_id,
                node_id=self.node_id,
                decision_id=decision_id,
                gpu_indices=run.gpu_indices,
            ),
            cause,
        )
        return "started"

    async def _stop(self, task_id: str, *, grace_s: float, checkpoint: bool) -> ExitInfo | None:
        entry = self._running.pop(task_id, None)
        if entry is None:
            return None
        self.journal.remove_task(task_id)
        return await entry.backend.stop(task_id, grace_s=grace_s, checkpoint=checkpoint)

    async def _preempt(self, d: TaskPreempted, cause: _Cause) -> str:
        grace = d.grace_s if d.grace_s > 0 else self.config.grace_s
        info = await self._stop(d.task_id, grace_s=grace, checkpoint=False)
        if info is None:
            return "not-running"
        by = f" by {d.by_task_id}" if d.by_task_id else ""
        await self._failed(
            d.task_id,
            d.decision_id,
            cause,
            "killed",
            f"preempted{by}",
            exit_code=info.exit_code,
            retryable=d.requeue,
            runtime_s=info.runtime_s,
        )
        return "preempted"

    async def _resize(self, d: TaskResized, cause: _Cause) -> str:
        entry = self._running.get(d.task_id)
        if entry is None:
            return "not-running"
        problem = self._check_gpus(d.gpus)
        if problem is not None:
            await self._failed(
                d.task_id, d.decision_id, cause, problem[0], f"resize refused: {problem[1]}"
            )
            return "rejected"
        progress = getattr(entry.backend, "progress", lambda _: 0.0)(d.task_id)
        old = entry.run
        await self._stop(d.task_id, grace_s=self.config.grace_s, checkpoint=True)
        return await self._start(
            d.task_id,
            d.decision_id,
            old.spec,
            d.gpus,
            cause,
            cpu_milli=old.cpu_milli,
            memory_mib=old.memory_mib,
            baseline_share=old.baseline_share_milli,
            progress_s=progress,
        )

    async def _migrate(self, d: TaskMigrating, cause: _Cause) -> str:
        outcome = "noop"
        if d.from_node_id == self.node_id:
            info = await self._stop(d.task_id, grace_s=self.config.grace_s, checkpoint=True)
            outcome = "migrated-out" if info is not None else "not-running"
        if d.to_node_id == self.node_id:
            outcome = await self._start(d.task_id, d.decision_id, d.executor, d.to_gpus, cause)
        return outcome

    # -- task ends ------------------------------------------------------------------

    async def on_exit(self, run: TaskRun, info: ExitInfo) -> None:
        """Backends call this when a task ends on its own."""
        entry = self._running.get(run.task_id)
        if entry is None or entry.run.decision_id != run.decision_id:
            return  # a run we already stopped or replaced
        del self._running[run.task_id]
        if not self._silenced():
            # Forget the task only once its end is on the bus: a crash before the ack
            # leaves it in the journal, and the restarted executor reports it lost
            # (``restore``) instead of the scheduler believing it runs for ever.
            await self._report_exit(run, info, entry.cause)
        self.journal.remove_task(run.task_id)

    async def _report_exit(self, run: TaskRun, info: ExitInfo, cause: _Cause) -> None:
        if info.fail_reason is None and info.exit_code == 0:
            await self._publish(
                TaskFinished(
                    task_id=run.task_id,
                    node_id=self.node_id,
                    decision_id=run.decision_id,
                    runtime_s=max(0.0, info.runtime_s),
                    exit_code=0,
                ),
                cause,
            )
            return
        reason = info.fail_reason
        if reason is None:
            reason = (
                "killed" if info.exit_code is not None and info.exit_code > 128 else "exit_nonzero"
            )
        await self._failed(
            run.task_id,
            run.decision_id,
            cause,
            reason,
            info.message,
            exit_code=info.exit_code,
            runtime_s=info.runtime_s,
            retryable=reason in ("gpu_failed", "node_failed", "lost"),
        )

    async def _failed(
        self,
        task_id: str,
        decision_id: str | None,
        cause: _Cause,
        reason: Any,
        message: str,
        *,
        exit_code: int | None = None,
        retryable: bool = False,
        runtime_s: float | None = None,
    ) -> None:
        log.warning("task failed: %s: %s", reason, message, extra=self._ids(task_id, decision_id))
        await self._publish(
            TaskFailed(
                task_id=task_id,
                node_id=self.node_id,
                decision_id=decision_id,
                reason=reason,
                exit_code=exit_code,
                message=message[:2000],
                retryable=retryable,
                runtime_s=max(0.0, runtime_s) if runtime_s is not None else None,
            ),
            cause,
        )

    async def _publish(self, payload: Event, cause: _Cause) -> None:
        if self._silenced():
            return
        await self.publisher.publish(
            self.topics.status,
            payload,
            source=self.source,
            cell=cause.cell,
            causation_id=cause.event_id,
            correlation_id=cause.correlation_id,
        )

    # -- accounting -------------------------------------------------------------------

    def _roots(self) -> dict[str, set[int]]:
        """Task id -> the pids its backend launched (or the simulated node gave it)."""
        roots: dict[str, set[int]] = {}
        for task_id, entry in self._running.items():
            pids: set[int] = set()
            record = getattr(entry.backend, "record", None)
            if record is not None:
                with contextlib.suppress(Exception):
                    pid = record(task_id).get("pid")
                    if isinstance(pid, int) and pid > 1:
                        pids.add(pid)
            if self._task_pids is not None:
                pids |= self._task_pids(task_id)
            if pids:
                roots[task_id] = pids
        return roots

    def pid_owners(self, *, fresh: bool = False) -> tuple[dict[int, str], set[str]]:
        """(pid -> task id for every process of every running task, the tasks whose
        processes are known). One ``/proc`` walk serves for ``OWNERS_TTL_S`` while the
        running runs stay the same; ``fresh`` walks again regardless."""
        now = time.monotonic()
        runs = frozenset((t, e.run.decision_id) for t, e in self._running.items())
        cached = self._owners
        if (
            not fresh
            and cached is not None
            and cached[3] == runs
            and now - cached[0] < OWNERS_TTL_S
        ):
            return cached[1], cached[2]
        roots = self._roots()
        owner = owners(roots, self._process_table()) if roots else {}
        self._owners = (now, owner, set(roots), runs)
        return owner, set(roots)

    def _bookings(self) -> list[Booking]:
        gpu_mem = self._gpu_memory_mib()
        return [
            Booking(
                task_id,
                g.index,
                g.share_milli,
                float(g.memory_mib)
                if g.memory_mib
                else gpu_mem.get(g.index, 0) * g.share_milli / 1000.0,
            )
            for task_id, entry in self._running.items()
            for g in entry.run.gpus
        ]

    def foreign_memory(self, samples: Mapping[int, GpuSample]) -> dict[int, float | None]:
        """GPU index -> memory held by processes of no task booked on it (None where the
        sample has no per-process figures): what the agent reports for placement."""
        owner, _ = self.pid_owners()
        if any(p.pid not in owner for s in samples.values() for p in s.processes or ()):
            owner, _ = self.pid_owners(fresh=True)  # a task's new child is not a stranger
        unowned = {p.pid for s in samples.values() for p in s.processes or () if p.pid not in owner}
        mps = frozenset(pid for pid in unowned if self._process_name(pid) == MPS_SERVER)
        booked: dict[int, set[str]] = {}
        for b in self._bookings():
            booked.setdefault(b.gpu_index, set()).add(b.task_id)
        return {
            index: foreign_mib(sample, owner, booked.get(index, set()), mps)
            for index, sample in samples.items()
        }

    # -- usage ------------------------------------------------------------------------

    def _sample_usage(self) -> None:
        samples = dict(self._gpu_samples()) if self._gpu_samples is not None else {}
        attributed = {}
        known: set[str] = set()
        if samples and self._running:
            owner, known = self.pid_owners()
            attributed = attribute(samples, self._bookings(), owner)
        for task_id, entry in self._running.items():
            reading = entry.backend.progress_reading(task_id)
            if reading is not None:
                entry.progress.add(reading)
            backend_usage = entry.backend.usage(task_id)
            for g in entry.run.gpus:
                use = attributed.get((task_id, g.index))
                if use is not None and use.exact and task_id in known:
                    entry.usage.setdefault(g.index, _Acc()).add(
                        use.util_pct, use.mem_mib, True, use.pids
                    )
                elif backend_usage is not None and g.index in backend_usage:
                    util, mem = backend_usage[g.index]
                    entry.usage.setdefault(g.index, _Acc()).add(util, mem, False)
                elif use is not None:
                    entry.usage.setdefault(g.index, _Acc()).add(use.util_pct, use.mem_mib, False)
                elif self._usage_probe is not None:
                    whole = self._usage_probe(g.index)
                    if whole is not None:
                        entry.usage.setdefault(g.index, _Acc()).add(
                            whole[0] * g.share_milli / 1000.0, whole[1], False
                        )

    async def report_usage(self, window_s: float, task_ids: list[str] | None = None) -> int:
        """Publish ``TaskUsage`` for running tasks from the samples since the last
        report; returns how many were sent."""
        sent = 0
        for task_id in task_ids if task_ids is not None else list(self._running):
            entry = self._running.get(task_id)
            if entry is None:
                continue
            progress = entry.progress.report()
            if not entry.usage and progress is None:
                continue
            accs = sorted(entry.usage.items())
            gpus = [
                GpuUsage(
                    gpu_index=index,
                    gpu_util_pct=min(100.0, max(0.0, round(acc.util / acc.samples, 3))),
                    mem_used_mib=max(0, round(acc.mem / acc.samples)),
                )
                for index, acc in accs
            ]
            entry.usage = {}
            usage = TaskUsage(task_id=task_id, node_id=self.node_id, window_s=window_s, gpus=gpus)
            if progress is not None:  # version 2 only when there is progress to carry
                units, rate = progress
                usage = TaskUsageV2(
                    **usage.model_dump(), progress=TaskProgress(units=units, rate_per_s=rate)
                )
            await self._publish(usage, entry.cause)
            await self._report_over_use(entry, accs)
            sent += 1
        return sent

    async def _report_over_use(self, entry: _Running, accs: list[tuple[int, _Acc]]) -> None:
        """``TaskOverUse`` for each GPU where the task's own processes peaked above its
        booking by more than the margin. Only exact (per-process) figures count: a
        share-split guess must not accuse a task of a stranger's memory."""
        margin = self.config.overuse_margin_pct
        booked = {
            b.gpu_index: b.memory_mib for b in self._bookings() if b.task_id == entry.run.task_id
        }
        for index, acc in accs:
            limit = booked.get(index, 0.0)
            if not acc.exact or not over_booking(acc.peak_mem, limit, margin):
                continue
            log.warning(
                "task uses %.0f MiB of GPU %d, booked %.0f MiB",
                acc.peak_mem,
                index,
                limit,
                extra=self._ids(entry.run.task_id, entry.run.decision_id),
            )
            await self._publish(
                TaskOverUse(
                    task_id=entry.run.task_id,
                    node_id=self.node_id,
                    decision_id=entry.run.decision_id,
                    gpu_index=index,
                    observed_mib=round(acc.peak_mem),
                    booked_mib=round(limit),
                    margin_pct=margin,
                    pids=sorted(acc.pids)[:64],
                ),
                entry.cause,
            )

    async def usage_loop(self, sample_s: float = 1.0) -> None:
        """Sample usage every ``sample_s``; report every ``usage_interval_s``."""
        interval = self.config.usage_interval_s
        sample_s = min(sample_s, interval)
        last = time.monotonic()
        while True:
            await asyncio.sleep(sample_s)
            if self._silenced():
                continue
            self._sample_usage()
            now = time.monotonic()
            if now - last >= interval:
                await self.report_usage(now - last)
                last = now

    def _schedule_probe_report(self, task_id: str, after_s: float) -> None:
        async def report() -> None:
            await asyncio.sleep(after_s)
            self._sample_usage()
            await self.report_usage(max(after_s, 1e-3), [task_id])

        task = asyncio.create_task(report())
        self._probe_tasks.add(task)
        task.add_done_callback(self._probe_tasks.discard)

    # -- restart -----------------------------------------------------------------------

    def _remember(self, task_id: str) -> None:
        entry = self._running[task_id]
        run = entry.run
        record: dict[str, Any] = {
            "node_id": self.node_id,
            "decision_id": run.decision_id,
            "spec": run.spec.model_dump(mode="json"),
            "gpus": [g.model_dump(mode="json") for g in run.gpus],
            "cpu_milli": run.cpu_milli,
            "memory_mib": run.memory_mib,
            "baseline_share_milli": run.baseline_share_milli,
            "gang_env": run.gang_env,
            "cause": {
                "event_id": entry.cause.event_id,
                "correlation_id": entry.cause.correlation_id,
                "cell": entry.cause.cell,
            },
        }
        backend_record = getattr(entry.backend, "record", None)
        if backend_record is not None:
            record["backend"] = backend_record(task_id)
        self.journal.put_task(task_id, record)

    async def restore(self) -> dict[str, str]:
        """Re-adopt tasks a previous executor left running; report those it cannot."""
        outcomes: dict[str, str] = {}
        for task_id, record in self.journal.tasks().items():
            if record.get("node_id", self.node_id) != self.node_id:
                continue  # another node's task in a shared journal (sim-cluster): its own
            spec = ExecutorSpec.model_validate(record["spec"])
            run = TaskRun(
                task_id=task_id,
                decision_id=record["decision_id"],
                spec=spec,
                gpus=tuple(GpuAssignment.model_validate(g) for g in record["gpus"]),
                cpu_milli=record.get("cpu_milli", 0),
                memory_mib=record.get("memory_mib", 0),
                baseline_share_milli=record.get("baseline_share_milli", 0),
                gang_env=record.get("gang_env", {}),
            )
            cause = _Cause(**record["cause"])
            backend = self._backends.get(spec.kind)
            adopt = getattr(backend, "adopt", None)
            if backend is not None and adopt is not None and "backend" in record:
                self._running[task_id] = _Running(run, backend, cause)
                if await adopt(run, record["backend"]):
                    outcomes[task_id] = "adopted"
                    continue
                del self._running[task_id]
            await self._failed(
                task_id,
                run.decision_id,
                cause,
                "lost",
                "the executor restarted and the task did not survive",
                retryable=True,
            )
            self.journal.remove_task(task_id)  # after the report, as in ``on_exit``
            outcomes[task_id] = "lost"
        await self._report_cut_short(outcomes)
        return outcomes

    async def _report_cut_short(self, outcomes: dict[str, str]) -> None:
        """Report the decisions a crash interrupted after their claim (``Journal.pending``).

        A task with a journal record was handled above (adopted, or reported lost).
        Any other interrupted decision may have left its task neither running here
        nor reported (a placement claimed but never started), while the scheduler
        believes it runs: ``TaskFailed(lost, retryable)`` makes it queue the task
        again. For a task that did end here before the crash the report is a
        repeat the scheduler ignores (the task is no longer running on this node).
        """
        for key, task_id, kind, cause in self.journal.pending():
            if cause.get("node", self.node_id) != self.node_id:
                continue  # another node's claim in a shared journal: it reports its own
            decision_id = cause.get("decision_id", key)
            if task_id not in outcomes:
                await self._failed(
                    task_id,
                    decision_id,
                    _Cause(cause.get("event_id", decision_id), cause.get("correlation_id"),
                           cause.get("cell")),
                    "lost",
                    f"the executor stopped while applying {kind}; the task is not running here",
                    retryable=True,
                )
                outcomes[task_id] = "lost"
            self.journal.done(key)

    async def start(self) -> None:
        """Adopt survivors and start the usage reporter."""
        await self.restore()
        self._usage_task = asyncio.create_task(self.usage_loop())

    async def close(self) -> None:
        for task in [self._usage_task, *self._probe_tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        stop = self.config.on_exit == "stop"
        if stop:
            for task_id in list(self._running):
                cause = self._running[task_id].cause
                decision_id = self._running[task_id].run.decision_id
                info = await self._stop(
                    task_id, grace_s=min(self.config.grace_s, 10.0), checkpoint=False
                )
                await self._failed(
                    task_id,
                    decision_id,
                    cause,
                    "killed",
                    "the node's executor stopped",
                    exit_code=info.exit_code if info else None,
                    retryable=True,
                )
        for backend in self._backends.values():
            await backend.close(stop_tasks=stop)
        self._running.clear()

    def _ids(self, task_id: str, decision_id: str | None) -> dict[str, Any]:
        return {"node_id": self.node_id, "task_id": task_id, "decision_id": decision_id}
