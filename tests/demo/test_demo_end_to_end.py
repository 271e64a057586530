"""The demo command end to end, in its short mode, on the real broker.

It must exit 0, report tasks placed and finished, show the GPUs busy (sampled
on the nodes and as reported to the scheduler by threshold telemetry: both
were 0 % while the agents' 5-minute EWMA ran on the wall clock at 300x), serve
Prometheus metrics on the worker and the simulated nodes while it runs, and
leave no process behind.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from demo_helpers import free_port, processes_with_env, scrape

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def scrape_until(port: int, series: str, proc: subprocess.Popen[bytes], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            got = scrape(port)
            if series in got:
                return got
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"no {series} at :{port} within {timeout_s}s")


def test_the_short_demo_places_and_finishes_tasks_and_leaves_nothing_behind(
        project_env: dict[str, str], tmp_path: Path) -> None:
    web, metrics = free_port(), free_port()
    report = tmp_path / "report.md"
    log = (tmp_path / "demo.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", "demo", "--short", "--no-live", "--web-port",
         str(web), "--metrics-port", str(metrics), "--report", str(report)],
        cwd=REPO, env=project_env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        # GPU series appear with the agents' first samples, just after the endpoint.
        node_metrics = scrape_until(metrics, "hetsched_gpu_temperature_celsius", proc, 120)
        assert "hetsched_executor_running_tasks" in node_metrics
        assert {s[0]["model"] for s in node_metrics["hetsched_gpu_utilization_ratio"]}
        worker_metrics = scrape_until(web, "hetsched_decisions_total", proc, 60)
        assert "hetsched_queue_length" in worker_metrics
        assert proc.wait(240) == 0, (tmp_path / "demo.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = (tmp_path / "demo.log").read_text()
    summary = orjson.loads(report.with_suffix(".json").read_bytes())
    assert summary["tasks"]["placed"] > 0, output
    assert summary["tasks"]["finished"] > 0, output
    assert summary["decisions_by_type"]["TaskPlaced"] > 0
    assert summary["utilisation"]["mean"] > 0, summary["utilisation"]
    assert summary["utilisation"]["reported_mean"] > 0, summary["utilisation"]
    assert "## Decisions by type" in report.read_text()
    view = report.with_name("terminal.svg").read_text()  # the live view, saved mid-run
    assert "<svg" in view and "allocation" in view
    run_id = re.search(r"hetsched demo (\w+):", output)
    assert run_id, output
    assert processes_with_env(f"HETSCHED_DEMO_RUN={run_id.group(1)}") == []
