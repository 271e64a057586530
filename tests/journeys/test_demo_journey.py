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

An outside client reaches the run as the banner says: the console consumer and
producer of the Kafka jars, with the banner's lines pasted as they are and the
task.json of docs/api.md, see the task answered on the run's decisions topic.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from doc_blocks import blocks

from schemas.events.envelope import new_event_id
from streams.audit.logfile import LogFile
from streams.cli import main
from streams.demo.outside import CONSOLE_CONSUMER, CONSOLE_PRODUCER
from tests.demo.demo_helpers import free_port, processes_with_env, scrape
from tests.interop.interop_records import check_topics, described_topics, documented_settings

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
    outside_watch: str
    """What the banner's console watch command printed once the outside task was answered."""


OUTSIDE_TASK = "train-43"


def _banner_line(log: Path, program: str, proc: subprocess.Popen[bytes],
                 timeout_s: float) -> str:
    """The command line of the demo's banner that runs ``program``, as printed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text(errors="replace").splitlines():
            if program in line:
                return line.strip()
        time.sleep(0.5)
    raise AssertionError(f"no banner line with {program} within {timeout_s}s:\n"
                         f"{log.read_text(errors='replace')}")


def _docs_task_json(where: Path) -> None:
    """docs/api.md's task.json, with a fresh event id and the current time as it says."""
    text = next(b.text for b in blocks(REPO / "docs" / "api.md")
                if b.mode == "file" and b.marker[1:] == ("task.json",))
    doc = orjson.loads(text)
    assert doc["payload"]["task_id"] == OUTSIDE_TASK
    now = datetime.now(UTC)
    doc["event_id"] = new_event_id(now)
    doc["occurred_at"] = now.isoformat().replace("+00:00", "Z")
    (where / "task.json").write_bytes(orjson.dumps(doc) + b"\n")


def _outside_client(log: Path, proc: subprocess.Popen[bytes], where: Path) -> str:
    """Paste the banner's console watch, then its console submit, as a user would;
    return what the watch printed once it shows the outside task's answer."""
    watch_line = _banner_line(log, CONSOLE_CONSUMER, proc, 180)
    submit_line = _banner_line(log, CONSOLE_PRODUCER, proc, 5)
    _banner_line(log, "registered; replaying", proc, 120)  # a node to place it on
    _docs_task_json(where)
    seen = where / "watch.out"
    with seen.open("wb") as out:
        watch = subprocess.Popen(["bash", "-c", f"exec {watch_line}"], cwd=REPO, stdout=out,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            sent = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", submit_line],
                                  cwd=where, capture_output=True, timeout=120, check=False)
            assert sent.returncode == 0, sent.stderr.decode()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                text = seen.read_text(errors="replace")
                if any(f'"task_id":"{OUTSIDE_TASK}"' in ln for ln in text.splitlines()):
                    return text
                assert watch.poll() is None, text
                time.sleep(1)
            raise AssertionError(f"no decision for {OUTSIDE_TASK} in 120 s:\n{text[-3000:]}")
        finally:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()


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
        outside_watch = _outside_client(tmp_path / "demo.log", proc, tmp_path)
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
    return DemoRun(output, report, summary, node_metrics, worker_metrics, outside_watch)


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


def test_an_outside_client_reaches_the_run_with_the_banners_commands(
        short_demo: DemoRun) -> None:
    """The banner names the run's topics; its console lines, pasted, submit docs/api.md's
    task.json and show the decision answering it, keyed by the cell."""
    prefix = short_demo.summary["settings"]["topic_prefix"]
    assert f"this run's topics are {prefix}hetsched.*" in short_demo.output
    answers = [ln for ln in short_demo.outside_watch.splitlines()
               if f'"task_id":"{OUTSIDE_TASK}"' in ln]
    key, _, value = answers[0].partition("\t")
    decision = orjson.loads(value)
    assert key.startswith("cell-"), answers[0]
    assert decision["type"] in ("TaskPlaced", "TaskUnschedulable"), decision
    assert decision["payload"]["task_id"] == OUTSIDE_TASK


def test_every_record_of_the_run_is_valid_and_on_a_topic_that_lists_its_type(
        short_demo: DemoRun, kafka_bootstrap: str) -> None:
    """Read back with an outside client and validator (tests/interop/interop_records.py)."""
    checked = check_topics(kafka_bootstrap, short_demo.summary["settings"]["topic_prefix"])
    assert checked.problems == [], "\n".join(checked.problems[:20])
    assert sum(checked.records.values()) > 1000, checked.records
    for schema in ("NodeRegistered.v1.json", "GpuTelemetry.v1.json", "TaskSubmitted.v1.json",
                   "TaskPlaced.v1.json", "TaskFinished.v1.json", "Tick.v1.json"):
        assert checked.by_schema[schema] > 0, (schema, checked.by_schema)


def test_the_runs_topics_read_back_with_kafka_topics_match_docs_api_md(
        short_demo: DemoRun, kafka_bootstrap: str) -> None:
    """Issue 34: the demo's dead-letter topic had the run's 2 partitions, where docs/api.md
    says 1 whatever the deployment. Read back with the Kafka admin tool, not our client."""
    settings = short_demo.summary["settings"]
    assert described_topics(kafka_bootstrap, settings["topic_prefix"]) == \
        documented_settings(settings["partitions"])
