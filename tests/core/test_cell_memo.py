"""The cell's memos (issue 31, part 5) change no decision.

``Cell._place`` remembers failed placements and ``Cell._reserve_gang`` a gang's plan
until the state changes (``ClusterState.free_version``, which reservation masks put
back), ``Cell._node_frees`` what a reservation reads of a node until that node changes,
and a dispatch pass stops once every queued shape failed (``FairQueue.shapes``).
Two cells fed the same random inputs, one with ``memo`` off, must give the same
outcomes, input for input, under each queue the simulator runs.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from streams.core.cell import RUNNING, Cell
from streams.core.events import NodeAdded, NodeHealthChanged, TaskArrived, TaskEnded
from streams.core.profile import Profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.policies import backfill, static
from streams.profiles.compile import compile_profile

CONFIGS = {
    "fair": QueueConfig(),
    "predict": QueueConfig(predict_runtimes=True),
    "backfill": backfill.QUEUE,
    "fifo": static.QUEUE,
}


def _cells(config: QueueConfig) -> tuple[Cell, Cell]:
    sched = compile_profile(Profile("bf", {"bestfit": 1.0}))
    cached, fresh = (Cell("c", sched, config, explain=False) for _ in range(2))
    fresh.memo = False
    return cached, fresh


def _request(rng: random.Random, i: int) -> TaskRequest:
    gpus = rng.choice((0, 1, 1, 1, 2, 4, 8, 16, 24))
    milli = rng.choice((250, 500, 1000)) if gpus == 1 else 1000
    return TaskRequest(f"t{i}", rng.choice((1000, 4000)), rng.choice((1024, 8192)), gpus,
                       milli if gpus else 0)


@pytest.mark.parametrize("health", [False, True])
@pytest.mark.parametrize("queue", sorted(CONFIGS))
@pytest.mark.parametrize("seed", range(6))
def test_memos_change_no_outcome(queue: str, seed: int, health: bool) -> None:
    """``health``: nodes also fail and come back (a node that changes without a task
    starting or ending there: ``_node_frees`` must see it)."""
    rng = random.Random(seed)
    cells = _cells(CONFIGS[queue])
    now = 0.0
    for c in cells:
        for n in range(6):
            c.add_node(NodeAdded(f"n{n}", f"node-{n}", 32000, 131072, 8 if n % 5 else 4,
                                 "A100" if n % 2 else "V100"), now_s=now)
    tick = 0
    for i in range(260):
        now += rng.choice((0.0, 1.0, 30.0, 60.0, 400.0))
        roll = rng.random()
        running = sorted(t for t, r in cells[0].unfinished.items() if r.status == RUNNING)
        if roll < 0.5:
            req = _request(rng, i)
            meta = TaskMeta(tenant=f"u{rng.randrange(3)}", priority=rng.choice((0, 0, 600)),
                            expected_s=rng.choice((None, 300.0, 3600.0)),
                            name=rng.choice(("a", "b")))
            outs = [c.submit(TaskArrived(f"a{i}", req), None, meta, now_s=now) for c in cells]
        elif roll < 0.8 and running:
            victim = running[rng.randrange(len(running))]
            outs = [c.end(TaskEnded(f"e{i}", victim), now_s=now) for c in cells]
        elif health and roll < 0.86:
            node = f"node-{rng.randrange(6)}"
            healthy = not cells[0].nodes[node].healthy
            outs = [c.set_health(NodeHealthChanged(f"h{i}", node, healthy), now_s=now)
                    for c in cells]
        else:
            tick += 1
            outs = [c.tick(f"k{tick}", tick, now_s=now) for c in cells]
        assert outs[0] == outs[1], (queue, seed, i)
        for c in cells:
            shapes = Counter(c.tasks[t].request.key for t in c.queue.entries)
            assert dict(shapes) == c.queue.shapes
    assert cells[0].place_seq == cells[1].place_seq
