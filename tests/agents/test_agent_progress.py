"""A task's own progress count: read from its file, turned into a rate, reported in
``TaskUsage`` v2 (issue 35: the scheduler learns how fast a task runs where it runs)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import decisions as d
import pytest
from test_agent_executor import NODE, Harness, VirtualClock

from agents.progress import (
    MAX_LINE_BYTES,
    MAX_READ_BYTES,
    ProgressFile,
    ProgressReading,
    ProgressWindow,
    parse_count,
)
from agents.telemetry.simulated import SimulatedNode
from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import TaskUsage, TaskUsageV2, make_event


@pytest.mark.parametrize(
    ("line", "count"),
    [
        (b"1200", 1200.0),
        (b"1200 samples", 1200.0),
        (b"  3.5\tsteps  ", 3.5),
        (b"0", 0.0),
        (b"", None),
        (b"   ", None),
        (b"step 12", None),
        (b"-1", None),
        (b"nan", None),
        (b"inf", None),
        (b"1e400", None),
    ],
)
def test_a_line_states_a_non_negative_finite_count_then_perhaps_a_unit(
    line: bytes, count: float | None
) -> None:
    assert parse_count(line) == count


def test_the_file_is_read_where_the_last_read_stopped_and_a_half_line_waits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "progress"
    reader = ProgressFile(path, "t")
    assert reader.read() is None  # the task has not created it yet: nothing, no error
    path.write_bytes(b"10\n20\n3")
    assert reader.read() == 20.0  # "3" is being written
    with path.open("ab") as f:
        f.write(b"0\n")
    assert reader.read() == 30.0  # "3" + "0": thirty, not three and not zero
    assert reader.read() == 30.0  # nothing new: the last count stays


def test_a_line_that_is_no_count_is_skipped_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b"5\nepoch 1 done\n7\nloss=0.3\n\n")
    reader = ProgressFile(path, "t-bad")
    with caplog.at_level(logging.WARNING, logger="agents.progress"):
        assert reader.read() == 7.0
    assert reader.bad_lines == 2
    warned = [r for r in caplog.records if "not a count" in r.getMessage()]
    assert len(warned) == 1 and "epoch 1 done" in warned[0].getMessage()


def test_an_endless_line_is_dropped_not_kept_growing(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b"4\n" + b"9" * (MAX_LINE_BYTES + 1))
    reader = ProgressFile(path, "t")
    assert reader.read() == 4.0 and reader.bad_lines == 1
    with path.open("ab") as f:
        f.write(b"\n6\n")
    assert reader.read() == 6.0  # the rest of the dropped line is not a count of 9s
    assert reader.bad_lines == 1


def test_one_read_takes_at_most_its_bound_and_the_rest_comes_next(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    lines = [f"{n}\n".encode() for n in range(MAX_READ_BYTES // 4)]
    path.write_bytes(b"".join(lines))
    assert path.stat().st_size > MAX_READ_BYTES
    reader = ProgressFile(path, "t")
    first = reader.read()
    assert first is not None and first < len(lines) - 1
    assert reader.read() == len(lines) - 1


def test_a_file_that_shrank_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b"100\n200\n")
    reader = ProgressFile(path, "t")
    assert reader.read() == 200.0
    path.write_bytes(b"7\n")  # the task started its file afresh
    assert reader.read() == 7.0


def test_from_end_skips_what_was_there_and_a_line_being_written(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    path.write_bytes(b"100\n200\n12")  # "12" is the start of a line being written
    reader = ProgressFile(path, "t", from_end=True)
    assert reader.read() is None
    with path.open("ab") as f:
        f.write(b"34\n")
    assert reader.read() == 1234.0


def test_the_rate_is_measured_between_the_times_the_count_changed() -> None:
    window = ProgressWindow()
    # A task that writes its count every 60 s, sampled every second: 600 units a minute.
    for t in range(0, 121):
        window.add(ProgressReading(600.0 * (t // 60), float(t)))
    assert window.report() == (1200.0, pytest.approx(10.0))
    assert window.report() is None  # no change since: nothing to say


def test_one_count_has_no_rate_and_a_count_going_back_starts_again() -> None:
    window = ProgressWindow()
    window.add(ProgressReading(50.0, 1.0))
    assert window.report() == (50.0, None)
    window.add(ProgressReading(80.0, 4.0))
    assert window.report() == (80.0, pytest.approx(10.0))
    window.add(ProgressReading(20.0, 5.0))  # restarted from an earlier checkpoint
    assert window.report() == (20.0, None)
    window.add(ProgressReading(30.0, 7.0))
    assert window.report() == (30.0, pytest.approx(5.0))


PROGRESS_SCRIPT = """
import os, sys, time
path = os.environ["HETSCHED_PROGRESS_FILE"]
with open(path, "a") as f:
    for step in (10, 20, 30):
        f.write(f"{step} steps\\n")
        f.flush()
        time.sleep(0.05)
open("done", "w").close()
time.sleep(60)
"""


async def test_a_process_task_writes_its_count_to_the_file_the_executor_names(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    spec = d.python(PROGRESS_SCRIPT).model_copy(update={"workdir": str(work)})
    assert await h.executor.handle(d.placed("t-prog", NODE, spec, d.gpus(0))) == "started"
    await h.until(lambda: (work / "done").exists())
    path = tmp_path / "progress" / "t-prog"
    assert path.read_text() == "10 steps\n20 steps\n30 steps\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    h.executor._sample_usage()
    assert await h.executor.report_usage(1.0) == 1
    (usage,) = h.status("TaskUsage", "t-prog")
    assert isinstance(usage, TaskUsageV2) and usage.progress is not None
    assert usage.progress.units == 30.0
    await h.executor.handle(d.preempted("t-prog", NODE, grace_s=1))
    await h.until(lambda: not h.executor.running_task_ids())
    assert not path.exists()  # one file per run: gone with it
    await h.executor.close()


async def test_a_simulated_task_reports_its_speed_where_it_runs(tmp_path: Path) -> None:
    clock = VirtualClock()
    node = SimulatedNode("A100", 4, hostname=NODE, time_scale=10.0)
    h = Harness(tmp_path, sim_node=node, clock=clock)
    await h.executor.handle(d.placed("t-sim", NODE, d.simulated(3600, util=90), d.gpus(0)))
    h.executor._sample_usage()
    clock.now += 2.0
    await h.simulated.tick()
    h.executor._sample_usage()
    assert await h.executor.report_usage(2.0) == 1
    (usage,) = h.status("TaskUsage", "t-sim")
    assert isinstance(usage, TaskUsageV2) and usage.progress is not None
    speed = h.simulated._speed(h.simulated._tasks["t-sim"], clock.now)[0]
    assert speed > 1.0  # an A100 runs the V100-referenced work faster
    # 2 clock seconds at time scale 10: 20 simulated seconds, at the A100's speed.
    assert usage.progress.units == pytest.approx(20.0 * speed)
    assert usage.progress.rate_per_s == pytest.approx(speed)
    await h.executor.close()


async def test_usage_without_progress_stays_version_1(tmp_path: Path) -> None:
    clock = VirtualClock()
    h = Harness(tmp_path, clock=clock)  # the clock stands still: no work is done
    await h.executor.handle(d.placed("t-v1", NODE, d.simulated(3600, util=80), d.gpus(1)))
    h.executor._sample_usage()
    assert await h.executor.report_usage(1.0) == 1
    (first,) = h.status("TaskUsage", "t-v1")
    assert isinstance(first, TaskUsageV2) and first.progress is not None
    assert (first.progress.units, first.progress.rate_per_s) == (0.0, None)
    h.publisher.sent.clear()
    h.executor._sample_usage()  # the same count: no progress to carry
    assert await h.executor.report_usage(1.0) == 1
    (usage,) = h.status("TaskUsage", "t-v1")
    assert type(usage) is TaskUsage
    await h.executor.close()


def test_a_version_2_usage_report_round_trips_and_a_version_1_reader_sees_its_fields() -> None:
    usage = TaskUsageV2(task_id="t", node_id="n", window_s=30.0, gpus=[],
                        progress={"units": 1200.0, "rate_per_s": 4.0})
    envelope = make_event(usage, source="test", cell="0",
                          occurred_at=datetime(2026, 12, 5, tzinfo=UTC))
    back = decode(encode(envelope))
    assert not isinstance(back, DeadLetter) and isinstance(back.payload, TaskUsageV2)
    assert back.payload.progress is not None and back.payload.progress.rate_per_s == 4.0
    assert isinstance(back.payload, TaskUsage)  # what reads version 1 reads this


@pytest.mark.parametrize("units", [-1.0, float("nan"), float("inf")])
def test_a_negative_or_not_finite_progress_is_refused_by_field(units: float) -> None:
    with pytest.raises(ValueError, match=r"progress\.units"):
        TaskUsageV2(task_id="t", node_id="n", window_s=30.0, gpus=[],
                    progress={"units": units})
