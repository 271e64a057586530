"""The checked telemetry step decides and persists exactly what the straightforward one did.

``engine.on_telemetry`` skips what a sample does not change (health already right, phantom
booking already right) and marks the node dirty only when its record changed (issue 11:
telemetry is most of the input log). ``_reference`` below is the step as it was before
(commit 26e7caa), kept verbatim apart from names and the GPU's own memory reserve that
both leave unbooked since session 6 (``AdaptConfig.gpu_reserved_pct``). On seeded random
sequences of telemetry (temperatures across the hysteresis band, throttling, memory around
and above the bookings, memory bandwidth, foreign memory, fatal and harmless XIDs, ECC
errors) mixed with
submissions, finishes, ticks and heartbeats, two cells, one per step, must give the same
decisions, records (byte for byte, key order included), free capacity and counters after
every event, and every record the checked step changed must have been marked dirty (what
``CellStore`` writes then equals the cell's record, so a restore gives the same cell).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import pytest
from adapt_builders import T0, _ev, cell, finished, heartbeat, node, task, tick

from schemas.codec import encode
from schemas.events import GpuTelemetry, TaskPlaced
from streams.adapter import apply
from streams.core.adapt import engine, membership, reconcile, thermal
from streams.core.cell import Cell, Outcome


def _reference(cell: Cell, cause: str, node: str, gpu: int, now_s: float, *,
               temperature_c: float, throttle: list[str], mem_used_mib: int,
               mem_util_pct: float | None, xids: list[int], ecc_dbe: int,
               foreign_mem_mib: int | None = None) -> list[Outcome]:
    ns = engine._node(cell, node)
    if ns is None:
        return []
    i = cell.state.node_index[node]
    if gpu >= int(cell.state.gpu_count[i]):
        return []
    dbe: dict[str, int] = ns.setdefault("dbe", {})
    fatal = membership.fatal_gpu_signal(xids, ecc_dbe, dbe.get(str(gpu), ecc_dbe))
    dbe[str(gpu)] = ecc_dbe
    if mem_util_pct is not None:
        ns.setdefault("bw", {})[str(gpu)] = mem_util_pct
    cell.dirty_nodes.add(node)
    if fatal is not None:
        return engine.on_gpu_failed(cell, cause, node, gpu, fatal)
    out: list[Outcome] = []
    spec = cell.state.catalog.get(cell.state.model_names[int(cell.state.model[i])]) if (
        cell.state.model[i] >= 0) else None
    if spec is not None:
        margin = cell.adapt.config.thermal_margin_c
        hot: list[int] = ns.setdefault("hot", [])
        if thermal.is_hot(temperature_c, throttle, spec.throttle_temp_c, margin):
            if gpu not in hot:
                hot.append(gpu)
                hot.sort()
                cell.adapt.count("thermal_alerts")
        elif gpu in hot and thermal.is_cool(temperature_c, throttle, spec.throttle_temp_c,
                                             margin):
            hot.remove(gpu)
        if not hot:
            ns.pop("hot")
        out += engine._refresh_health(cell, node, cause)
        booked = sum(engine._booked_mib(cell, r, spec.memory_mib)
                     for r in engine._running_on(cell, node) if gpu in r.gpus)
        cfg = cell.adapt.config
        stray = reconcile.to_reserve(
            reconcile.unaccounted_mib(mem_used_mib, booked, cfg.overuse_tolerance,
                                      reconcile.driver_reserve_mib(spec.memory_mib,
                                                                   cfg.gpu_reserved_pct)),
            foreign_mem_mib)
        engine._set_phantom(cell, node, gpu, reconcile.share_of(stray, spec.memory_mib))
    return out


@contextmanager
def _stepping_with(step: Callable[..., list[Outcome]]) -> Iterator[None]:
    saved = engine.on_telemetry
    engine.on_telemetry = step  # the adapter calls it through the module
    try:
        yield
    finally:
        engine.on_telemetry = saved


NODES = (("a1", "A100", 4), ("a2", "A100", 2), ("t1", "T4", 4))


def _sample(rng: random.Random, t: float, dbe: dict[tuple[str, int], int]) -> Any:
    node_id, _, gpus = rng.choice(NODES)
    gpu = rng.randrange(gpus + 1)  # one past the last GPU now and then: ignored
    r = rng.random()
    temp = rng.uniform(78.0, 90.0) if r < 0.3 else rng.uniform(70.0, 78.0) if r < 0.5 \
        else rng.choice([40.0, 55.0, 55.0, 60.0])
    extra: dict[str, Any] = {}
    if rng.random() < 0.5:
        extra["mem_util_pct"] = rng.choice([10.0, 10.0, 50.0, 75.5])
    if rng.random() < 0.3:
        extra["foreign_mem_mib"] = rng.choice([0, 0, 2048, 30000])
    if rng.random() < 0.1:
        extra["throttle_reasons"] = [rng.choice(["sw_power_cap", "gpu_idle", "hw_slowdown"])]
    if rng.random() < 0.03:
        extra["xid_errors"] = [rng.choice([13, 31, 79, 48])]
    key = (node_id, gpu)
    if rng.random() < 0.02:
        dbe[key] = dbe.get(key, 0) + 1
    if key in dbe:
        extra["ecc_dbe_total"] = dbe[key]
    mem = rng.choice([0, 0, 1024, 8192, 20480, 40960, 61440, 81920, 15000])
    payload = GpuTelemetry(node_id=node_id, gpu_index=gpu, gpu_uuid=f"GPU-{node_id}-{gpu}",
                           gpu_util_pct=50.0, mem_used_mib=mem, temperature_c=round(temp, 1),
                           power_w=100.0, **extra)
    return _ev(payload, t, f"tel/{node_id}")


def _log(seed: int, length: int) -> list[Any]:
    """Registrations, then a seeded mix in which telemetry dominates."""
    rng = random.Random(seed)
    events = [node(n, m, g, t=i * 0.1) for i, (n, m, g) in enumerate(NODES)]
    dbe: dict[tuple[str, int], int] = {}
    t, tasks, ticks = 1.0, 0, 0
    for _ in range(length):
        t += rng.choice([0.05, 0.5, 3.0])
        r = rng.random()
        if r < 0.08:
            tasks += 1
            events.append(task(f"x{tasks}", share=rng.choice([250, 500, 1000]), t=t,
                               profile=rng.choice(["compute", None])))
        elif r < 0.11:
            ticks += 1
            events.append(tick(ticks, t))
        elif r < 0.13:
            events.append(heartbeat(rng.choice(NODES)[0], t))
        else:
            events.append(_sample(rng, t, dbe))
    return events


def _records(c: Cell) -> tuple[dict[str, bytes], dict[str, bytes]]:
    return ({n: orjson.dumps(c.node_record(n)) for n in c.nodes},
            {k: orjson.dumps(c.task_record(k)) for k in c.tasks})


@pytest.mark.parametrize("seed", range(12))
def test_checked_step_matches_the_straightforward_one(seed: int) -> None:
    checked, reference = cell(), cell()
    persisted: dict[str, bytes] = {}
    placed: dict[str, tuple[str, str]] = {}
    rng = random.Random(1000 + seed)
    kinds: set[str] = set()
    for env in _log(seed, 600):
        # a running task sometimes finishes (the same one in both cells)
        if placed and rng.random() < 0.05:
            tid = sorted(placed)[rng.randrange(len(placed))]
            node_id, did = placed.pop(tid)
            fin = finished(tid, node_id, did, (env.occurred_at - T0).total_seconds())
            assert [encode(d) for d in apply(checked, fin)] == [
                encode(d) for d in apply(reference, fin)]
        got = apply(checked, env)
        with _stepping_with(_reference):
            want = apply(reference, env)
        assert [encode(d) for d in got] == [encode(d) for d in want]
        for d in got:
            kinds.add(d.type)
            if isinstance(d.payload, TaskPlaced):
                placed[d.payload.task_id] = (d.payload.node_id, d.event_id)
        assert _records(checked) == _records(reference)
        assert np.array_equal(checked.state.gpu_free, reference.state.gpu_free)
        assert checked.adapt.meta == reference.adapt.meta
        assert checked.now_s == reference.now_s
        for n in sorted(checked.dirty_nodes):
            persisted[n] = orjson.dumps(checked.node_record(n))
        checked.dirty_nodes.clear()
        assert persisted == _records(checked)[0]  # every change was marked dirty
    counters = checked.adapt.meta.get("counters", {})
    # the sequences reach what the step acts on, not only the quiet path
    assert counters.get("thermal_alerts", 0) > 0
    assert counters.get("phantom_reservations", 0) > 0
    assert "TaskPlaced" in kinds


def test_a_quiet_sample_leaves_the_node_clean() -> None:
    """The same sample twice: the second changes no record, so nothing is written."""
    c = cell()
    apply(c, node("a1", "A100", 4, t=0.0))
    sample = _ev(GpuTelemetry(node_id="a1", gpu_index=1, gpu_uuid="GPU-a1-1",
                              gpu_util_pct=50.0, mem_used_mib=1024, temperature_c=55.0,
                              power_w=100.0, mem_util_pct=20.0), 1.0, "tel/a1")
    apply(c, sample)
    assert c.dirty_nodes == {"a1"}  # first sample of the GPU: its ECC and bandwidth noted
    c.dirty_nodes.clear()
    before = orjson.dumps(c.node_record("a1"))
    assert apply(c, sample) == []
    assert c.dirty_nodes == set()
    assert orjson.dumps(c.node_record("a1")) == before
    hotter = _ev(sample.payload.model_copy(update={"temperature_c": 84.0}), 2.0, "tel/a1")
    apply(c, hotter)
    assert c.dirty_nodes == {"a1"} and c.nodes["a1"].healthy is False
