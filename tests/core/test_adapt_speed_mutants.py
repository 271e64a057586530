"""GPU model speed for the core's moves, worked out from ``streams/core/adapt/speed.py``.

The adaptation tests that use it (``tests/adapt``) are outside ``./dev mutate``'s fast
selection, so no test there held the rules: speeds relative to the fastest allowed
model, 1.0 for a node without a model figure, the energy share of a scheduler's
``compute`` and ``energy`` terms, and the cost ranking with its ties. A small
catalog of made-up models keeps the arithmetic exact.
"""

from __future__ import annotations

import pytest

from schemas.gpu_catalog import GpuModelSpec
from streams.core.adapt import speed
from streams.core.profile import Profile
from streams.core.state import ClusterState
from streams.profiles.compile import compile_profile


def spec(name: str, tflops: float, bandwidth: float, tdp: float) -> GpuModelSpec:
    return GpuModelSpec(name, 16384, tflops, tflops, bandwidth, tdp, 85.0, "test")


CATALOG = {s.name: s for s in (
    spec("FAST", 20.0, 1000.0, 400.0),   # compute/W 0.05, bandwidth/W 2.5
    spec("SLOW", 10.0, 2000.0, 100.0),   # compute/W 0.1, bandwidth/W 20
    spec("NOTDP", 5.0, 500.0, 0.0),      # figures, but no TDP
    spec("NOFIG", 0.0, 0.0, 50.0),       # no figures at all
)}


def cluster() -> ClusterState:
    state = ClusterState(capacity=8, catalog=CATALOG)
    for name in ("FAST", "SLOW", "NOTDP", "NOFIG"):
        state.add_node(name.lower(), 8000, 16384, 1, name)
    state.add_node("cpu", 8000, 16384, 0, None)
    return state


def test_work_kind_is_data_for_classified_data_or_a_located_input():
    assert speed.work_kind("data", False) == "data"
    assert speed.work_kind("compute", True) == "data"
    assert speed.work_kind(None, True) == "data"
    assert speed.work_kind("mixed", False) == "compute"
    assert speed.work_kind(None, False) == "compute"


def test_speeds_are_relative_to_the_fastest_allowed_model():
    state = cluster()
    assert speed.speeds(state, "compute") == {"FAST": 1.0, "SLOW": 0.5, "NOTDP": 0.25}
    assert speed.speeds(state, "data") == {"FAST": 0.5, "SLOW": 1.0, "NOTDP": 0.25}
    assert speed.speeds(state, "compute", ("SLOW", "NOTDP")) == {"SLOW": 1.0, "NOTDP": 0.5}
    assert speed.speeds(state, "compute", ("NOFIG",)) == {}
    assert speed.speeds(ClusterState(capacity=1, catalog=CATALOG), "compute") == {}


def test_speed_of_a_node_and_one_without_a_figure():
    state = cluster()
    idx = state.node_index
    assert speed.speed_of(state, idx["slow"], "compute") == 0.5
    assert speed.speed_of(state, idx["fast"], "data") == 0.5  # model id 0 has a speed too
    assert speed.speed_of(state, idx["slow"], "data") == 1.0
    assert speed.speed_of(state, idx["slow"], "compute", ("SLOW", "NOTDP")) == 1.0
    assert speed.speed_of(state, idx["notdp"], "compute", ("SLOW", "NOTDP")) == 0.5
    assert speed.speed_of(state, idx["nofig"], "compute") == 1.0
    assert speed.speed_of(state, idx["cpu"], "compute") == 1.0


def test_the_energy_share_weighs_energy_against_completion_time():
    def share(weights: dict, args: dict | None = None) -> float:
        return speed.energy_share(compile_profile(Profile("p", weights, args or {})))

    # energy's default busy_weight is 0.5: half its weight is about the model
    assert share({"compute": 1.0, "energy": 1.0}) == pytest.approx(0.5 / 1.5)
    assert share({"compute": 2.0, "energy": 1.0, "bestfit": 5.0},
                 {"energy": {"busy_weight": 0.25, "scale": 50.0}}) == pytest.approx(
        0.375 / 2.375)
    assert share({"compute": 2.0, "energy": 1.0},
                 {"compute": {"scale": 200.0}, "energy": {"busy_weight": 0.0}}) == (
        pytest.approx(1.0 / 5.0))
    assert share({"energy": 1.0}) == 1.0
    assert share({"compute": 1.0}) == 0.0
    assert share({"bestfit": 1.0}) == 0.0  # neither: completion first
    assert share({"energy": 1.0}, {"energy": {"busy_weight": 1.0}}) == 0.0


def test_ranked_by_run_time_and_energy_per_work_with_ties_grouped():
    state = cluster()
    # compute: run time rel FAST 1, SLOW 2, NOTDP 4; energy/work rel FAST 2, SLOW 1,
    # NOTDP 1 (no TDP: counted as the most frugal)
    assert speed.ranked(state, "compute", (), 0.0) == [("FAST",), ("SLOW",), ("NOTDP",)]
    assert speed.ranked(state, "compute", (), 1.0) == [("NOTDP", "SLOW"), ("FAST",)]
    assert speed.ranked(state, "compute", (), 0.5) == [("FAST", "SLOW"), ("NOTDP",)]
    assert speed.ranked(state, "compute", (), 0.25) == [("FAST",), ("SLOW",), ("NOTDP",)]
    # data: run time rel FAST 2, SLOW 1, NOTDP 4; energy/work rel FAST 8, SLOW 1, NOTDP 1
    assert speed.ranked(state, "data", (), 0.0) == [("SLOW",), ("FAST",), ("NOTDP",)]
    assert speed.ranked(state, "data", (), 1.0) == [("NOTDP", "SLOW"), ("FAST",)]
    assert speed.ranked(state, "compute", ("FAST", "NOTDP"), 1.0) == [("FAST", "NOTDP")]
    assert speed.ranked(state, "compute", ("NOTDP",), 1.0) == [("NOTDP",)]
    assert speed.ranked(state, "compute", ("NOFIG",), 0.5) == []


def test_costs_within_the_tie_tolerance_share_a_group():
    cat = {s.name: s for s in (spec("A", 10.0, 1.0, 100.0), spec("B", 10.0, 1.0, 100.0),
                               spec("C", 10.0 * (1 - 1e-12), 1.0, 100.0),
                               spec("D", 9.0, 1.0, 100.0))}
    state = ClusterState(capacity=4, catalog=cat)
    for name in cat:
        state.add_node(name.lower(), 1, 1, 1, name)
    assert speed.ranked(state, "compute", (), 0.0) == [("A", "B", "C"), ("D",)]


def test_figures_below_one_still_count():
    cat = {s.name: s for s in (spec("TINY", 0.5, 0.25, 0.5), spec("WEE", 0.25, 0.5, 0.25))}
    state = ClusterState(capacity=2, catalog=cat)
    for name in cat:
        state.add_node(name.lower(), 1, 1, 1, name)
    assert speed.speeds(state, "compute") == {"TINY": 1.0, "WEE": 0.5}
    assert speed.speeds(state, "data") == {"TINY": 0.5, "WEE": 1.0}
    # compute: run time rel TINY 1, WEE 2; energy/work TINY 1, WEE 1 (0.5 / 0.5, 0.25 / 0.25)
    assert speed.ranked(state, "compute", (), 1.0) == [("TINY", "WEE")]
    assert speed.ranked(state, "data", (), 1.0) == [("WEE",), ("TINY",)]
