"""Fixtures shared by the node-side tests."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import fake_pynvml
import pytest


@pytest.fixture
def fake_nvml() -> Iterator[ModuleType]:
    """The fake ``pynvml`` module with two idle A100s; tests reset it as they need."""
    fake_pynvml.reset(
        [
            fake_pynvml.FakeGpu(
                uuid="GPU-a", bus_id="00000000:07:00.0", nvlinks=["00000000:0F:00.0"]
            ),
            fake_pynvml.FakeGpu(
                uuid="GPU-b", bus_id="00000000:0F:00.0", nvlinks=["00000000:07:00.0"]
            ),
        ],
        topology={(0, 1): fake_pynvml.NVML_TOPOLOGY_SINGLE},
    )
    yield fake_pynvml
    fake_pynvml.reset([])
