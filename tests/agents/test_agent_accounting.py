"""Booked against observed on the node: per-process GPU accounting, attribution of
processes to tasks, foreign memory and over-use (issue 8's reconciliation)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import decisions as d
import fake_pynvml
import pytest

from agents.accounting import (
    Booking,
    attribute,
    foreign_mib,
    over_booking,
    owners,
    read_process_table,
)
from agents.agent import NodeAgent
from agents.backends.process import ProcessBackend
from agents.backends.simulated import SimulatedBackend
from agents.bus import MemoryPublisher, Topics
from agents.config import ExecutorSection, NodeSection
from agents.executor import Executor
from agents.journal import Journal
from agents.telemetry.base import GpuFault, GpuSample, ProcessUsage
from agents.telemetry.faults import parse_fault
from agents.telemetry.nvml import NvmlSource
from agents.telemetry.simulated import SimulatedNode
from agents.triggers import TriggerConfig, TriggerEngine, TriggerKind

GIB = 1024**3
MIB = 1024**2
NODE = "node-acc"
UNLISTED = {
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
}


def _sample(source: NvmlSource, index: int = 0) -> GpuSample:
    reading = source.sample(0.0)[index]
    assert isinstance(reading, GpuSample), reading
    return reading


# -- the NVML source ---------------------------------------------------------------------


def test_nvml_lists_each_process_with_its_memory_and_sm_share(fake_nvml: ModuleType) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.processes = [
        fake_pynvml.FakeProcess(101, 6 * GIB, sm_util=35, mem_util=20),
        fake_pynvml.FakeProcess(102, 2 * GIB),  # idle: NVML has no utilisation sample for it
        fake_pynvml.FakeProcess(103, 3 * GIB, sm_util=10, mps_client=True),
    ]
    s = _sample(NvmlSource(fake_nvml))
    assert s.processes == (
        ProcessUsage(101, 6144.0, 35.0, 20.0),
        ProcessUsage(102, 2048.0, 0.0, 0.0),
        ProcessUsage(103, 3072.0, 10.0, 0.0),
    )
    assert _sample(NvmlSource(fake_nvml), 1).processes == ()  # listed, nobody there


def test_nvml_uses_the_older_utilisation_call_when_the_newer_is_unsupported(
    fake_nvml: ModuleType,
) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.unsupported = {"nvmlDeviceGetProcessesUtilizationInfo"}
    gpu.processes = [fake_pynvml.FakeProcess(7, GIB, sm_util=55)]
    source = NvmlSource(fake_nvml)
    assert _sample(source).processes == (ProcessUsage(7, 1024.0, 55.0, 0.0),)
    assert "nvmlDeviceGetProcessUtilization" in fake_pynvml.calls


def test_without_process_lists_the_source_says_so_once_and_reports_none(
    fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = fake_pynvml.FakeGpu(unsupported=set(UNLISTED), memory_used=5 * GIB)
    gpu.processes = [fake_pynvml.FakeProcess(7, GIB)]
    fake_pynvml.reset([gpu])
    source = NvmlSource(fake_nvml)
    with caplog.at_level(logging.INFO, logger="agents.telemetry.nvml"):
        samples = [_sample(source) for _ in range(3)]
    assert all(s.processes is None for s in samples)
    assert samples[-1].mem_used_mib == 5120  # the rest of the sample is intact
    said = [r for r in caplog.records if "per-process GPU memory" in r.getMessage()]
    assert len(said) == 1
    calls = fake_pynvml.calls.count("nvmlDeviceGetComputeRunningProcesses")
    assert calls == 1  # unsupported is remembered, not asked every second


def test_without_per_process_utilisation_memory_is_still_per_process(
    fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.unsupported = {
        "nvmlDeviceGetProcessesUtilizationInfo",
        "nvmlDeviceGetProcessUtilization",
    }
    gpu.processes = [fake_pynvml.FakeProcess(7, GIB, sm_util=50)]
    source = NvmlSource(fake_nvml)
    with caplog.at_level(logging.INFO, logger="agents.telemetry.nvml"):
        s, _ = _sample(source), _sample(source)
    assert s.processes == (ProcessUsage(7, 1024.0, None, None),)
    assert sum("per-process utilisation" in r.getMessage() for r in caplog.records) == 1


def test_a_transient_process_listing_error_costs_only_that_round(fake_nvml: ModuleType) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.processes = [fake_pynvml.FakeProcess(7, GIB)]
    gpu.fail_next = {"nvmlDeviceGetComputeRunningProcesses": fake_pynvml.NVML_ERROR_TIMEOUT}
    source = NvmlSource(fake_nvml)
    first = _sample(source)
    assert first.processes is None  # not "nobody": that would hide the task's memory
    assert first.mem_used_mib == 0 and not isinstance(first, GpuFault)
    assert _sample(source).processes == (ProcessUsage(7, 1024.0, 0.0, 0.0),)


def test_a_gpu_lost_while_listing_processes_is_a_fatal_fault(fake_nvml: ModuleType) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.fail_next = {"nvmlDeviceGetComputeRunningProcesses": fake_pynvml.NVML_ERROR_GPU_IS_LOST}
    reading = NvmlSource(fake_nvml).sample(0.0)[0]
    assert isinstance(reading, GpuFault) and reading.fatal


# -- process trees -------------------------------------------------------------------------


def test_owners_follow_descendants_and_the_session_but_not_strangers() -> None:
    table = {  # pid: (ppid, pgrp, sid)
        500: (1, 500, 500),  # the task's shim, its own session
        501: (500, 500, 500),  # the task
        502: (501, 500, 500),  # a worker it forked
        503: (1, 503, 500),  # a daemonised child: re-parented to init, same session
        600: (1, 600, 600),  # somebody else
        601: (600, 600, 600),
    }
    got = owners({"t1": {500}, "t-sim": {5_000_000}}, table)
    assert got == {500: "t1", 501: "t1", 502: "t1", 503: "t1", 5_000_000: "t-sim"}


def test_the_real_process_table_has_our_children_under_us() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        table = read_process_table()
        assert table[child.pid][0] == os.getpid()
        assert owners({"me": {os.getpid()}}, table)[child.pid] == "me"
    finally:
        child.kill()
        child.wait()


# -- attribution ----------------------------------------------------------------------------


def _gpu(processes: tuple[ProcessUsage, ...] | None, util: float = 80.0, mem: float = 30000.0):  # type: ignore[no-untyped-def]
    return GpuSample(0, util, mem, 81920.0, processes=processes)


def test_per_process_attribution_is_exact_and_strangers_are_foreign() -> None:
    sample = _gpu(
        (
            ProcessUsage(11, 8000.0, 30.0),
            ProcessUsage(12, 2000.0, 5.0),
            ProcessUsage(21, 4000.0, 20.0),
            ProcessUsage(99, 12000.0, 25.0),
        )
    )
    bookings = [Booking("a", 0, 500, 40960.0), Booking("b", 0, 250, 20480.0)]
    owner = {11: "a", 12: "a", 21: "b"}
    use = attribute({0: sample}, bookings, owner)
    assert (use[("a", 0)].mem_mib, use[("a", 0)].util_pct, use[("a", 0)].pids) == (
        10000.0,
        35.0,
        (11, 12),
    )
    assert use[("b", 0)].exact and use[("b", 0)].mem_mib == 4000.0
    assert foreign_mib(sample, owner, {"a", "b"}) == 12000.0
    # one of ours on a GPU it never booked holds memory nobody booked there
    assert foreign_mib(sample, owner, {"a"}) == 16000.0


def test_without_process_figures_the_gpu_is_split_by_booked_share() -> None:
    bookings = [Booking("a", 0, 600, 0.0), Booking("b", 0, 200, 0.0)]
    use = attribute({0: _gpu(None, util=80.0, mem=32000.0)}, bookings, {})
    assert not use[("a", 0)].exact
    assert use[("a", 0)].mem_mib == pytest.approx(24000.0)  # 600 / 800 of the memory
    assert use[("b", 0)].util_pct == pytest.approx(16.0)  # 80 % x 200/1000
    assert foreign_mib(_gpu(None), {}, {"a"}) is None


def test_over_booking_needs_more_than_the_margin() -> None:
    assert not over_booking(11000.0, 10240.0, 10.0)
    assert over_booking(11400.0, 10240.0, 10.0)
    assert not over_booking(50000.0, 0.0, 10.0)  # unknown booking: never accused


# -- agent + executor over a fake NVML, with a real task process -----------------------------

CHILD = (  # the task forks a worker (the one "on the GPU"), writes its pid, then waits
    "import subprocess, sys, time, pathlib; "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "pathlib.Path(sys.argv[1]).write_text(str(c.pid)); time.sleep(60)"
)


class Node:
    """An NVML agent and a process executor in one process, as ``hetsched-node run``."""

    def __init__(self, tmp: Path, nvml: ModuleType) -> None:
        self.publisher = MemoryPublisher()
        self.clock = 0.0
        self.source = NvmlSource(nvml, hostname=NODE)
        self.agent = NodeAgent(
            NodeSection(node_id=NODE),
            self.source,
            TriggerEngine(TriggerConfig(min_interval_s=0.0, heartbeat_s=3600)),
            self.publisher,
            Topics("t."),
            clock=lambda: self.clock,
        )
        self.agent.discover()
        self.executor = Executor(
            NODE,
            Journal(tmp / "journal.sqlite"),
            self.publisher,
            Topics("t."),
            ExecutorSection(state_dir=tmp, grace_s=2, usage_interval_s=3600),
            gpu_indices=self.agent.gpu_indices,
            gpu_memory_mib=self.agent.gpu_memory_mib,
            gpu_samples=self.agent.gpu_samples,
        )
        self.executor.add_backend(ProcessBackend(NODE, tmp, self.executor.on_exit))
        self.agent.foreign_memory = self.executor.foreign_memory

    async def step(self) -> None:
        self.clock += 1.0
        await self.agent.step()
        self.executor._sample_usage()

    def sent(self, event_type: str) -> list:
        return self.publisher.payloads(event_type)


@pytest.fixture
async def node(tmp_path: Path, fake_nvml: ModuleType) -> AsyncIterator[Node]:
    n = Node(tmp_path, fake_nvml)
    yield n
    n.executor.config = n.executor.config.model_copy(update={"on_exit": "stop"})
    await n.executor.close()


async def _start_task(node: Node, tmp: Path, task_id: str, **gpus: int) -> int:
    """Start a real process task; return the pid of the worker it forked."""
    marker = tmp / f"{task_id}.pid"
    spec = d.python(CHILD)
    spec = spec.model_copy(update={"argv": [*spec.argv, str(marker)]})
    outcome = await node.executor.handle(d.placed(task_id, NODE, spec, d.gpus(0, **gpus)))
    assert outcome == "started"
    deadline = time.monotonic() + 20
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the task never forked its worker"
        await asyncio.sleep(0.05)
    return int(marker.read_text())


async def test_a_stranger_is_reported_as_foreign_and_a_task_over_its_booking_raises_an_event(
    node: Node, tmp_path: Path
) -> None:
    worker = await _start_task(node, tmp_path, "t-over", share=500, memory_mib=10240)
    gpu = fake_pynvml._gpus[0]
    stranger = os.getpid()  # a real process outside the task's tree
    gpu.processes = [
        fake_pynvml.FakeProcess(worker, 16 * GIB, sm_util=40, mem_util=30),
        fake_pynvml.FakeProcess(stranger, 20 * GIB),
    ]
    gpu.memory_used, gpu.util_gpu = 36 * GIB + 500 * MIB, 45
    await node.step()
    snapshot = [t for t in node.sent("GpuTelemetry") if t.gpu_index == 0][-1]
    assert snapshot.foreign_mem_mib == 20480
    assert [t.foreign_mem_mib for t in node.sent("GpuTelemetry") if t.gpu_index == 1] == [0]

    assert await node.executor.report_usage(1.0) == 1
    (usage,) = node.sent("TaskUsage")
    assert (usage.gpus[0].mem_used_mib, usage.gpus[0].gpu_util_pct) == (16384, 40.0)
    (over,) = node.sent("TaskOverUse")
    assert (over.task_id, over.gpu_index, over.observed_mib, over.booked_mib) == (
        "t-over",
        0,
        16384,
        10240,
    )
    assert over.pids == [worker] and over.margin_pct == 10.0

    # the stranger leaves: the agent reports the change (no threshold crossed)
    gpu.processes = gpu.processes[:1]
    await node.step()
    last = [t for t in node.sent("GpuTelemetry") if t.gpu_index == 0][-1]
    assert last.foreign_mem_mib == 0 and last.triggers == []


async def test_a_task_within_its_booking_raises_nothing(node: Node, tmp_path: Path) -> None:
    worker = await _start_task(node, tmp_path, "t-ok", share=500)  # 40 GiB of an A100
    fake_pynvml._gpus[0].processes = [fake_pynvml.FakeProcess(worker, 30 * GIB, sm_util=60)]
    await node.step()
    await node.executor.report_usage(1.0)
    assert node.sent("TaskUsage")[0].gpus[0].mem_used_mib == 30720
    assert node.sent("TaskOverUse") == []
    assert node.sent("GpuTelemetry")[0].foreign_mem_mib == 0


async def test_without_per_process_accounting_usage_is_split_and_nobody_is_accused(
    node: Node, tmp_path: Path
) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.unsupported = set(UNLISTED)
    worker = await _start_task(node, tmp_path, "t-split", share=250, memory_mib=4096)
    gpu.processes = [fake_pynvml.FakeProcess(worker, 30 * GIB, sm_util=90)]
    gpu.memory_used, gpu.util_gpu = 30 * GIB, 80
    await node.step()
    await node.executor.report_usage(1.0)
    (usage,) = node.sent("TaskUsage")
    assert usage.gpus[0].mem_used_mib == 30720  # alone on the GPU: all of it
    assert usage.gpus[0].gpu_util_pct == pytest.approx(20.0)  # 80 % x 250/1000
    assert node.sent("TaskOverUse") == []
    assert [t.foreign_mem_mib for t in node.sent("GpuTelemetry") if t.gpu_index == 0] == [None]


# -- the simulated node takes the same path ----------------------------------------------------


async def test_simulated_tasks_and_strangers_go_through_per_process_attribution(
    tmp_path: Path,
) -> None:
    sim = SimulatedNode(
        "A100", 2, hostname=NODE, faults=[parse_fault("foreign-mem:1:12000@0")], start_s=0.0
    )
    publisher = MemoryPublisher()
    ex = Executor(
        NODE,
        Journal(tmp_path / "j.sqlite"),
        publisher,
        Topics("t."),
        ExecutorSection(state_dir=tmp_path, usage_interval_s=3600),
        gpu_indices=lambda: {0, 1},
        gpu_memory_mib=lambda: {0: 81920, 1: 81920},
        gpu_samples=lambda: {r.index: r for r in sim.sample(1.0) if isinstance(r, GpuSample)},
        task_pids=sim.task_pids,
    )
    ex.add_backend(SimulatedBackend(ex.on_exit, node=sim))
    try:
        # books a quarter of GPU 0 (20 GiB) and uses 30 000 MiB; GPU 1 holds a stranger
        await ex.handle(
            d.placed("t-sim", NODE, d.simulated(3600, util=80, mem=30000), d.gpus(0, share=250))
        )
        assert sim.task_pids("t-sim")
        samples = {r.index: r for r in sim.sample(1.0) if isinstance(r, GpuSample)}
        assert ex.foreign_memory(samples) == {0: 0.0, 1: 12000.0}
        ex._sample_usage()
        await ex.report_usage(1.0)
        (usage,) = publisher.payloads("TaskUsage")
        assert usage.gpus[0].mem_used_mib == 30000
        (over,) = publisher.payloads("TaskOverUse")
        assert (over.observed_mib, over.booked_mib) == (30000, 20480)
    finally:
        await ex.close()


def test_the_trigger_engine_reports_foreign_memory_moves_beyond_its_step() -> None:
    engine = TriggerEngine(TriggerConfig(min_interval_s=0.0, foreign_mem_step_mib=256))

    def at(t: float, foreign: float) -> list:
        return engine.observe(t, [GpuSample(0, 10.0, 1000.0, 81920.0, foreign_mem_mib=foreign)])

    assert [t.kind for t in at(0, 0.0)] == [TriggerKind.SNAPSHOT]
    assert at(1, 200.0) == []  # noise
    (moved,) = at(2, 4096.0)
    assert moved.kind is TriggerKind.TELEMETRY and moved.crossings == ()
    assert at(3, 4100.0) == []


def test_a_stranger_taking_memory_is_reported_at_once_and_leaving_within_the_interval() -> None:
    engine = TriggerEngine(TriggerConfig(min_interval_s=30.0))

    def at(t: float, foreign: float) -> list:
        return engine.observe(t, [GpuSample(0, 10.0, 1000.0, 81920.0, foreign_mem_mib=foreign)])

    assert len(at(0, 0.0)) == 1  # snapshot
    assert [t.kind for t in at(1, 8000.0)] == [TriggerKind.TELEMETRY]  # not held 30 s
    assert at(2, 0.0) == []  # a fall waits for the interval...
    assert [t.state.sample.foreign_mem_mib for t in at(31, 0.0) if t.state] == [0.0]


def test_the_foreign_mem_fault_parses_and_ends_after_its_duration() -> None:
    fault = parse_fault("foreign-mem:1:12000@5+30")
    assert (fault.kind, fault.gpu, fault.mem_mib, fault.at_s, fault.duration_s) == (
        "foreign-mem",
        1,
        12000,
        5.0,
        30.0,
    )
    for bad in ("foreign-mem:1@5", "foreign-mem@5", "gpu-fail:1@5+3"):
        with pytest.raises(ValueError):
            parse_fault(bad)
    sim = SimulatedNode("T4", 2, hostname=NODE, faults=[fault], start_s=0.0)

    def gpu1(t: float) -> GpuSample:
        reading = sim.sample(t)[1]
        assert isinstance(reading, GpuSample)
        return reading

    assert gpu1(1.0).processes == ()
    during = gpu1(10.0)
    assert during.mem_used_mib == 12000 and [p.mem_used_mib for p in during.processes or ()] == [
        12000.0
    ]
    assert gpu1(40.0).processes == () and gpu1(40.0).mem_used_mib == 0


def test_foreign_memory_is_a_prometheus_gauge_where_known() -> None:
    from types import SimpleNamespace

    from agents.metrics import NodeCollector

    agent = SimpleNamespace(
        node=SimpleNamespace(node_id=NODE),
        inventory=None,
        published={},
        last_samples={
            0: GpuSample(0, 1.0, 3000.0, 81920.0, foreign_mem_mib=2048.0),
            1: GpuSample(1, 1.0, 0.0, 81920.0),
        },
    )
    families = {
        m.name: m
        for m in NodeCollector(lambda: [SimpleNamespace(agent=agent, executor=None)]).collect()
    }
    samples = families["hetsched_gpu_foreign_memory_used_bytes"].samples
    assert [(s.labels["gpu"], s.value) for s in samples] == [("0", 2048.0 * MIB)]


async def test_the_mps_server_is_not_a_stranger(tmp_path: Path) -> None:
    """Fractional tasks are MPS clients; the server's memory (all of theirs before Volta)
    must not be reserved a second time as foreign."""
    server, stranger = 4_100_001, 4_100_002
    names = {server: "nvidia-cuda-mps-server", stranger: "python3"}
    ex = Executor(
        NODE, Journal(tmp_path / "j.sqlite"), MemoryPublisher(), Topics("t."),
        ExecutorSection(state_dir=tmp_path), gpu_indices=lambda: {0},
        process_table=dict, process_names=names.get,
    )  # fmt: skip
    sample = GpuSample(
        0, 50.0, 9000.0, 81920.0,
        processes=(ProcessUsage(server, 6000.0), ProcessUsage(stranger, 3000.0)),
    )  # fmt: skip
    assert ex.foreign_memory({0: sample}) == {0: 3000.0}
    await ex.close()
