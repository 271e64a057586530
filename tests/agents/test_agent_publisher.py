"""The agent loop without a broker: registration, telemetry, failures, heartbeats."""

from __future__ import annotations

from types import ModuleType

import fake_pynvml
import pytest

from agents.agent import NodeAgent
from agents.bus import MemoryPublisher, Topics
from agents.config import NodeSection
from agents.inventory import match_catalog
from agents.telemetry.faults import parse_fault
from agents.telemetry.nvml import NvmlSource
from agents.telemetry.simulated import SimulatedNode
from agents.triggers import BandSpec, TriggerConfig, TriggerEngine
from schemas.codec import decode, encode


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _agent(source: object, clock: Clock, **config: object) -> tuple[NodeAgent, MemoryPublisher]:
    publisher = MemoryPublisher()
    agent = NodeAgent(
        NodeSection(node_id="n1", cell="cell-a", cpu_milli=8000, memory_mib=65536),
        source,  # type: ignore[arg-type]
        TriggerEngine(TriggerConfig(**config)),  # type: ignore[arg-type]
        publisher,
        Topics("p."),
        clock=clock,
        running_tasks=lambda: ["t2", "t1"],
    )
    return agent, publisher


@pytest.mark.parametrize(
    ("product", "memory_mib", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", 81920, "A100"),
        ("Tesla V100-SXM2-32GB", 32768, "V100M32"),
        ("Tesla V100-SXM2-16GB", 16160, "V100M16"),
        ("Tesla T4", 15360, "T4"),
        ("NVIDIA H100 80GB HBM3", 81559, "H100"),
        ("NVIDIA L4", 23034, "L4"),
        ("NVIDIA GeForce RTX 4090", 24564, None),
        # issue 35: the research-cluster cards; product names NVML reports for them
        ("Tesla K80", 11441, "K80"),
        ("NVIDIA GeForce RTX 2080 Ti", 11019, "RTX2080Ti"),
        ("Quadro RTX 6000", 24220, "RTX6000"),
        ("NVIDIA RTX A6000", 48685, None),  # Ampere, not the Quadro RTX 6000
        ("NVIDIA GeForce RTX 2080", 7982, None),  # not the Ti
        ("NVIDIA RTX A1000", 8188, None),  # not an A100
    ],
)
def test_nvml_product_names_map_to_catalog_models(
    product: str, memory_mib: int, expected: str | None
) -> None:
    spec = match_catalog(product, memory_mib)
    assert (spec.name if spec else None) == expected


async def test_registration_carries_the_inventory_with_catalog_figures(
    fake_nvml: ModuleType,
) -> None:
    agent, publisher = _agent(NvmlSource(fake_nvml, hostname="n1"), Clock())
    event = await agent.register()
    assert [t for t, _ in publisher.sent] == ["p.hetsched.nodes", "p.hetsched.node-inventory"]
    assert event.node_id == "n1" and event.cell == "cell-a" and event.cpu_milli == 8000
    gpu = event.gpus[0]
    assert (gpu.model, gpu.fp16_tflops, gpu.memory_mib) == ("A100", 312.0, 81920)
    assert gpu.nvlink_peers == [1] and gpu.pcie_bus_id == "0000:07:00.0"
    assert event.labels["gpu-product"] == "NVIDIA A100-SXM4-80GB"
    _, envelope = publisher.sent[0]
    assert envelope.source == "agent/n1" and envelope.cell == "cell-a"
    assert decode(encode(envelope)) == envelope  # valid on the wire


async def test_only_crossings_are_published_and_heartbeats_list_running_tasks(
    fake_nvml: ModuleType,
) -> None:
    clock = Clock()
    util = BandSpec(edges=(30.0, 80.0), hysteresis=10.0)
    agent, publisher = _agent(
        NvmlSource(fake_nvml), clock, gpu_util_pct=util, min_interval_s=0, heartbeat_s=10
    )
    await agent.register()
    publisher.sent.clear()
    for t in range(0, 30):
        clock.now = float(t)
        fake_pynvml._gpus[0].util_gpu = 90 if 10 <= t < 20 else 5
        await agent.step()
    kinds = [(e.type, getattr(e.payload, "gpu_index", None)) for _, e in publisher.sent]
    assert kinds.count(("GpuTelemetry", 0)) == 3  # snapshot, rising at 10, falling at 20
    assert kinds.count(("GpuTelemetry", 1)) == 1  # snapshot only: GPU 1 stayed idle
    beats = publisher.payloads("NodeHeartbeat")
    assert [b.seq for b in beats] == [0, 1] and beats[0].running_task_ids == ["t1", "t2"]
    rising = next(p for p in publisher.payloads("GpuTelemetry") if p.triggers)
    assert rising.triggers[0].metric == "gpu_util_pct" and rising.triggers[0].direction == "rising"
    assert rising.gpu_util_pct == 90 and rising.gpu_uuid == "GPU-a"
    assert all(t == "p.hetsched.telemetry" for t, e in publisher.sent if e.type == "GpuTelemetry")


async def test_a_lost_gpu_is_published_once_as_gpu_failed(fake_nvml: ModuleType) -> None:
    clock = Clock()
    agent, publisher = _agent(NvmlSource(fake_nvml), clock)
    await agent.register()
    await agent.step()
    fake_pynvml._gpus[1].lost = True
    for t in range(1, 5):
        clock.now = float(t)
        await agent.step()
    (failed,) = publisher.payloads("GpuFailed")
    assert (failed.gpu_index, failed.gpu_uuid, failed.reason) == (1, "GPU-b", "fell_off_bus")
    assert agent.failed_gpus() == {1}


async def test_a_lost_simulated_node_goes_silent() -> None:
    clock = Clock()
    node = SimulatedNode("T4", 1, hostname="n1", start_s=0.0, faults=[parse_fault("node-loss@5")])
    agent, publisher = _agent(node, clock, heartbeat_s=1)
    await agent.register()
    for t in range(0, 10):
        clock.now = float(t)
        await agent.step()
    beats = publisher.payloads("NodeHeartbeat")
    assert len(beats) == 4 and agent.silenced()  # heartbeats at 1..4, then nothing


async def test_a_publishing_failure_resyncs_the_next_report() -> None:
    clock = Clock()
    node = SimulatedNode("T4", 1, hostname="n1", start_s=0.0)
    agent, publisher = _agent(node, clock)
    await agent.register()
    await agent.step()

    async def broken(*_: object, **__: object) -> None:
        raise ConnectionError("broker away")

    real = publisher.publish
    publisher.publish = broken  # type: ignore[method-assign,assignment]
    clock.now = 1.0
    agent.engine.resync()  # force something to send
    with pytest.raises(ConnectionError):
        await agent.step()
    publisher.publish = real  # type: ignore[method-assign]
    clock.now = 2.0
    await agent.step()
    snapshots = [p for p in publisher.payloads("GpuTelemetry") if not p.triggers]
    assert len(snapshots) == 2  # the first, and the full resend after the failure
