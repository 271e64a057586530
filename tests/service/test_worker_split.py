"""The worker as two processes, one per processor (``HETSCHED_PROCESSORS``).

Why: the router and the scheduler share one event loop and one core in a worker; run
apart, a long scheduler batch no longer delays the router (BENCHMARKS.md, service
section, session 5). Split, they must still do what one worker does: every decision,
the same as the pure core replaying the input log, and the router process holds no
cell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from service_builders import TASK_MIX
from service_kafka import Deployment, get_json, wait_healthy
from test_service_end_to_end import assert_decisions_match_replay, place_the_task_mix

from schemas.codec import decode
from streams.settings import PROCESSORS, _processors


def test_processors_default_to_both_and_accept_one_or_both_by_name() -> None:
    assert _processors("") == PROCESSORS == ("router", "scheduler")
    assert _processors("router") == ("router",)
    assert _processors(" scheduler , router,scheduler") == ("scheduler", "router")
    with pytest.raises(SystemExit, match="unknown sequencer"):
        _processors("router,sequencer")


@pytest.mark.parametrize(("processors", "runs", "paced"), [
    ("router", "['router']", "False"), ("scheduler", "['scheduler']", "True"),
    ("", "['router', 'scheduler']", "True")])
def test_the_app_starts_the_named_processors_and_paces_the_router_only_beside_a_scheduler(
        processors: str, runs: str, paced: str) -> None:
    """The router waits for its worker's scheduler's backlog (``eos._pace``) only where a
    scheduler runs in the same process."""
    code = ("import streams.app as a; print([p.name for p in a.PROCESSORS], "
            "a.router_processor.downstream_backlog is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, HETSCHED_PROCESSORS=processors), timeout=120,
                         check=True).stdout.strip().splitlines()[-1]
    assert out == f"{runs} {paced}"


@pytest.mark.integration
async def test_a_router_process_and_a_scheduler_process_decide_like_one_worker(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    router = dep.start_worker(processes, "router", HETSCHED_PROCESSORS="router")
    scheduler = dep.start_worker(processes, "scheduler", HETSCHED_PROCESSORS="scheduler")
    wait_healthy(router, processes)
    wait_healthy(scheduler, processes)
    raw = await place_the_task_mix(dep, scheduler.web_port)
    assert sorted(decode(r).payload.task_id for r in raw) == sorted(t[0] for t in TASK_MIX), \
        processes.log_of(scheduler) + processes.log_of(router)
    await assert_decisions_match_replay(dep, raw)
    assert get_json(router.web_port, "/state")["cells"] == {}
    assert get_json(scheduler.web_port, "/state")["cells"]
