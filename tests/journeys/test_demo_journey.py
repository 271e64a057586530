"""The operator's first journey: the demo end to end, in its short mode, on the real broker.

It must exit 0, report tasks placed and finished, show the GPUs busy (sampled
on the nodes and as reported to the scheduler by threshold telemetry: both
were 0 % while the agents' 5-minute EWMA ran on the wall clock at 300x), serve
Prometheus metrics on the worker and the simulated nodes while it runs, and
leave no process behind. One run serves every test here.

Its report's task counts must be ``hetsched check``'s on the same topics, each
task in one state (it said 1,478 submitted, 1,463 finished, 19 running and 30
failed, where check found 15 running, 1,461 finished and 2 failed), and
``hetsched explain`` must tell every task of the run's export (it crashed on a
third of them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.audit.logfile import LogFile
from streams.cli import main
from tests.demo.demo_helpers import free_port, processes_with_env, scrape

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


@dataclass(frozen=True)
class DemoRun:
    output: str
    report: Path
    summary: dict[str, Any]
    node_metrics: dict[str, Any]
    worker_metrics: dict[str, Any]


@pytest.fixture(scope="module")
def short_demo(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    tmp_path = tmp_path_factory.mktemp("demo")
    project_env = dict(os.environ, KAFKA_BOOTSTRAP=kafka_bootstrap, PYTHONUNBUFFERED="1")
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
        worker_metrics = scrape_until(web, "hetsched_decisions_total", proc, 60)
        assert proc.wait(240) == 0, (tmp_path / "demo.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = (tmp_path / "demo.log").read_text()
    summary = orjson.loads(report.with_suffix(".json").read_bytes())
    return DemoRun(output, report, summary, node_metrics, worker_metrics)


def test_the_short_demo_places_and_finishes_tasks_and_leaves_nothing_behind(
        short_demo: DemoRun) -> None:
    output, report, summary = short_demo.output, short_demo.report, short_demo.summary
    node_metrics, worker_metrics = short_demo.node_metrics, short_demo.worker_metrics
    assert "hetsched_executor_running_tasks" in node_metrics
    assert {s[0]["model"] for s in node_metrics["hetsched_gpu_utilization_ratio"]}
    assert "hetsched_queue_length" in worker_metrics
    assert summary["tasks"]["placed"] > 0, output
    assert summary["tasks"]["by_state"]["finished"] > 0, output
    assert summary["decisions_by_type"]["TaskPlaced"] > 0
    assert summary["utilisation"]["mean"] > 0, summary["utilisation"]
    assert summary["utilisation"]["reported_mean"] > 0, summary["utilisation"]
    assert "## Decisions by type" in report.read_text()
    view = report.with_name("terminal.svg").read_text()  # the live view, saved mid-run
    assert "<svg" in view and "allocation" in view
    run_id = re.search(r"hetsched demo (\w+):", output)
    assert run_id, output
    assert processes_with_env(f"HETSCHED_DEMO_RUN={run_id.group(1)}") == []


def test_the_reports_task_states_are_checks_and_sum_to_the_tasks_submitted(
        short_demo: DemoRun, kafka_bootstrap: str) -> None:
    tasks = short_demo.summary["tasks"]
    prefix = short_demo.summary["settings"]["topic_prefix"]
    assert tasks["by_state"] is not None, tasks
    assert sum(tasks["by_state"].values()) == tasks["submitted"] > 0
    checked = subprocess.run(
        [sys.executable, "-m", "streams.cli", "check", "--topic-prefix", prefix, "--json",
         "--no-progress"], cwd=REPO, capture_output=True, check=False,
        env=dict(os.environ, KAFKA_BOOTSTRAP=kafka_bootstrap))
    assert checked.returncode in (0, 1), checked.stderr.decode()
    by_check = orjson.loads(checked.stdout)
    assert {"submitted": tasks["submitted"], **tasks["by_state"]} == by_check["tasks"]
    assert tasks["failure_reasons"] == by_check["failure_reasons"]
    assert tasks["invariants_hold"] == by_check["ok"]
    assert f"submitted {tasks['submitted']}: " in short_demo.report.read_text()


def test_explain_tells_every_task_of_the_runs_export(
        short_demo: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    audit_file = short_demo.summary["tasks"]["audit_file"]
    log = LogFile(Path(audit_file))
    task_ids = sorted({(r.doc or {})["payload"]["task_id"] for r in log
                       if r.head is not None and r.head.type == "TaskSubmitted"})
    assert len(task_ids) == short_demo.summary["tasks"]["submitted"]
    capsys.readouterr()
    for task_id in task_ids:
        assert main(["explain", task_id, audit_file, "--top", "1"]) == 0, task_id
        out = capsys.readouterr().out
        assert out.startswith(f"task {task_id}\n") and " submitted " in out, out
