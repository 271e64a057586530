"""Task ids are shortened in the middle, in the live view as on the dashboard.

Why: ids of one run share a long prefix (``<run id>-openb-pod-0412``); cut at the
end, every row of the live view and the dashboard read the same run prefix and no
two tasks could be told apart. The tail is what tells them apart.
"""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from streams.dashboard.short_id import HEAD, WIDTH, short_id
from streams.demo.live import render
from streams.demo.tracker import Recent, Tracker

RUN = "6960c703a1b2c3d4e5f6-"


def test_a_short_id_is_shown_whole() -> None:
    assert short_id("pod-7") == "pod-7"
    assert short_id("x" * WIDTH) == "x" * WIDTH


def test_a_long_id_keeps_its_head_and_its_tail() -> None:
    shown = short_id(f"{RUN}openb-pod-0412")
    assert shown == "6960c7…-openb-pod-0412"
    assert len(shown) == WIDTH and shown.startswith(RUN[:HEAD])


def test_ids_sharing_a_long_prefix_stay_apart() -> None:
    ids = [f"{RUN}openb-pod-{i:04d}" for i in range(100)]
    assert len({short_id(i) for i in ids}) == len(ids)


def test_a_narrower_width_still_cuts_in_the_middle() -> None:
    assert short_id(f"{RUN}openb-pod-0412", width=12) == "6960c7…-0412"


def test_a_width_too_narrow_for_head_and_tail_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"width must be at least 8.*got 5"):
        short_id("a-very-long-task-identifier", width=5)


@pytest.mark.parametrize("columns", [80, 120])
def test_the_live_view_tells_two_tasks_of_one_run_apart(columns: int) -> None:
    tracker = Tracker()
    tasks = [f"{RUN}openb-pod-0411", f"{RUN}openb-pod-0412"]
    for task in tasks:
        tracker.recent.appendleft(Recent(time.monotonic(), "TaskPlaced", task,
                                         "node-3[0,1]", "best_score fit=0.91 frag=-0.12"))
    out = io.StringIO()
    Console(file=out, width=columns, color_system=None).print(render(tracker, "demo", 0.5))
    text = out.getvalue()
    for task in tasks:
        assert short_id(task) in text, text
