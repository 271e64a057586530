"""Small hand-made clusters for core tests (no traces, no Kafka)."""

from __future__ import annotations

import pytest

from streams.core.state import ClusterState


def make_cluster(*nodes: tuple[str, int, int, int, str | None]) -> ClusterState:
    """Nodes as (name, cpu_milli, memory_mib, gpus, model); ranks = order given."""
    state = ClusterState(capacity=4)
    for name, cpu, mem, gpus, model in nodes:
        state.add_node(name, cpu, mem, gpus, model)
    return state


@pytest.fixture
def cluster_factory():
    return make_cluster
