"""A node that registers again (its agent restarted) is a fresh inventory: the marks its
records forget must leave the cell's free capacity too, exactly as a cell rebuilt from
those records has it.

Found in the short chaos run (session 6, ``nodes_kill``): ``on_registered`` dropped the
node's phantom bookings and failed GPUs from its record but left their milli taken, so
the running cell kept capacity that nothing held (an idle GPU never whole again, a failed
GPU never offered again) while a worker that restored the cell from its records had it
back: the two decided differently, and replaying the log did not reproduce the run.
"""

from __future__ import annotations

import orjson
from adapt_builders import cell, gpu_failed, kinds, node, run, task, telemetry, tick

from streams.core.cell import Cell


def _restored(c: Cell) -> Cell:
    """The cell a worker rebuilds from the records ``CellStore`` wrote (JSON round trip)."""
    def rt(x):  # type: ignore[no-untyped-def]
        return orjson.loads(orjson.dumps(x))
    return Cell.restore(c.name, c.scheduler, rt(c.meta_record()),
                        [(n, rt(c.node_record(n))) for n in c.nodes],
                        [(t, rt(c.task_record(t))) for t in c.tasks])


def _free(c: Cell) -> list[int]:
    return c.state.gpu_free[0, : int(c.state.gpu_count[0])].tolist()


def test_a_strangers_booking_is_given_back_when_the_node_registers_again():
    c = cell()
    run(c, node("n1", "A100", gpus=2, t=0), telemetry("n1", 0, 1, mem_mib=8192))
    assert _free(c) == [900, 1000]  # 8 GiB of a stranger: 100 milli kept out
    run(c, node("n1", "A100", gpus=2, t=2))  # the agent restarted: a fresh inventory
    assert not c.nodes["n1"].extra["adapt"].get("phantom")
    assert _free(c) == _free(_restored(c)) == [1000, 1000]
    assert kinds(run(c, task("pair", gpus=2, share=1000, t=3))) == ["TaskPlaced"]


def test_a_failed_gpu_is_offered_again_when_the_node_registers_again():
    c = cell()
    run(c, node("n1", "A100", gpus=2, t=0), gpu_failed("n1", 1, 1))
    assert _free(c) == [1000, 0]
    run(c, node("n1", "A100", gpus=2, t=2))
    assert _free(c) == _free(_restored(c)) == [1000, 1000]
    assert kinds(run(c, task("pair", gpus=2, share=1000, t=3))) == ["TaskPlaced"]


def test_what_runs_on_the_node_stays_booked_and_a_new_sample_books_the_stranger_again():
    c = cell()
    run(c, node("n1", "A100", gpus=2, t=0))
    assert kinds(run(c, task("half", gpus=1, share=500, t=1))) == ["TaskPlaced"]
    gpu = c.tasks["half"].gpus[0]
    other = 1 - gpu
    run(c, telemetry("n1", other, 2, mem_mib=8192))
    run(c, node("n1", "A100", gpus=2, t=3), tick(1, 4))
    free = _free(c)
    assert free[gpu] == 500 and free[other] == 1000
    run(c, telemetry("n1", other, 5, mem_mib=8192))
    assert _free(c)[other] == 900
    assert _free(c) == _free(_restored(c))
