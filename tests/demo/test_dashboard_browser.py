"""The worker's dashboard in headless Chromium (Debian's ``chromium``).

A worker and three simulated nodes run on an isolated topic prefix; the page
must show the three nodes, then show the placement of a submitted task. With the
cluster full of tasks sharing a long run prefix, each task's link must show its
middle-shortened id whole (not cut by its cell), the chart must label its axes
with units, and clicking a queued task must open its view with the verdicts of
its latest decision (driven over the DevTools protocol: ``browser_session``).
The screenshots are kept as artefacts in the tests' tmp dirs (``dashboard.png``,
``task-view.png``).
Without chromium the test fails: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from browser_session import evaluate
from demo_helpers import free_port

from streams.dashboard.short_id import short_id

pytestmark = pytest.mark.integration


def chromium(url: str, tmp: Path, *extra: str) -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (apt-get install chromium)"
    profile = tmp / f"profile-{uuid.uuid4().hex[:6]}"
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=4000",
            "--window-size=1400,900", *extra, url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    return done.stdout


def get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return json.loads(r.read())


def poll(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"no {what} within {timeout_s}s")


async def submit(bootstrap: str, prefix: str, *task_ids: str) -> None:
    from aiokafka import AIOKafkaProducer

    from schemas.consume import PRODUCER_DEFAULTS, produce_event
    from schemas.events import TaskSubmitted, make_event
    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import BY_NAME, TASKS

    spec = dataclasses.replace(BY_NAME[TASKS], name=prefix + TASKS)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_DEFAULTS,
                                **aiokafka_kwargs())
    await producer.start()
    try:
        for task_id in task_ids:
            task = TaskSubmitted.model_validate({
                "task_id": task_id, "tenant": "serving", "resources": {"gpu_count": 1},
                "executor": {"kind": "simulated", "simulated": {
                    "duration_s": 600, "gpu_util_pct": 80, "gpu_mem_used_mib": 1024}}})
            await produce_event(producer, spec, make_event(task, source="test",
                                                           occurred_at=datetime.now(UTC)))
    finally:
        await producer.stop()


def start_cluster(project_env: dict[str, str], processes: Any,
                  tmp_path: Path) -> tuple[str, int, dict[str, str], Any, list[dict[str, Any]]]:
    """A worker and three simulated nodes on a fresh topic prefix: (prefix, web port,
    environment, the worker's process, the dashboard's nodes)."""
    prefix, port = f"t{uuid.uuid4().hex[:8]}.", free_port()
    env = dict(project_env, HETSCHED_APP_ID=f"{prefix}scheduler", HETSCHED_TOPIC_PREFIX=prefix,
               HETSCHED_WEB_PORT=str(port), HETSCHED_DATA_DIR=str(tmp_path / "worker"),
               HETSCHED_PARTITIONS="2", HETSCHED_TICK_S="1.0")
    worker = processes.start("worker", [sys.executable, "-m", "streams.cli", "worker", "-l",
                                        "warn"], env)
    poll(lambda: get_json(port, "/health"), 120, "healthy worker")
    processes.start("nodes", [sys.executable, "-m", "agents.cli", "sim-cluster", "--nodes", "3",
                              "--seed", "7", "--topic-prefix", prefix, "--time-scale", "1",
                              "--state-dir", str(tmp_path / "nodes"), "--log-level",
                              "WARNING"], env)
    nodes = poll(lambda: get_json(port, "/dashboard/data")["nodes"]
                 if len(get_json(port, "/dashboard/data")["nodes"]) == 3 else None, 90,
                 "three nodes")
    return prefix, port, env, worker, nodes


def test_the_dashboard_shows_the_clusters_nodes_and_a_placement(
        project_env: dict[str, str], processes: Any, tmp_path: Path) -> None:
    prefix, port, env, worker, shown = start_cluster(project_env, processes, tmp_path)
    nodes = [n["node"] for n in shown]
    url = f"http://127.0.0.1:{port}/dashboard"
    dom = chromium(url, tmp_path, "--dump-dom")
    assert 'data-nodes="3"' in dom, dom[:2000]
    for name in nodes:
        assert f'data-node="{name}"' in dom
    assert 'data-placed="0"' in dom

    task_id = f"{prefix}browser-1"
    asyncio.run(submit(env["KAFKA_BOOTSTRAP"], prefix, task_id))
    poll(lambda: get_json(port, "/dashboard/data")["placed"] >= 1, 60, "placement")
    dom = chromium(url, tmp_path, "--dump-dom")
    assert re.search(r'data-placed="[1-9]', dom), dom[:2000]
    assert f'class="TaskPlaced" data-task="{task_id}"' in dom
    shot = tmp_path / "dashboard.png"
    chromium(url, tmp_path, f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 10_000, processes.log_of(worker)
    print(f"dashboard screenshot: {shot}")


SEE_AND_OPEN = """(async () => {
  const until = async (check, what) => {
    for (let i = 0; i < 600; i++) {
      const got = check();
      if (got) return got;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    throw new Error("not within 60 s: " + what);
  };
  const link = (id) => [...document.querySelectorAll("a.task")].find((a) => a.title === id);
  const links = {};
  for (const id of %s) {
    const a = await until(() => link(id), id);
    const box = a.closest("td, li");
    links[id] = {text: a.textContent, clipped: box.scrollWidth > box.clientWidth};
  }
  const axes = [...document.querySelectorAll("#curves .axis-label")].map((t) => t.textContent);
  link(%s).click();
  const panel = document.getElementById("task-panel");
  await until(() => !panel.hidden && panel.dataset.state === "pending", "the task's view");
  return {links, axes, panel: panel.innerText, hash: location.hash};
})()"""
"""Finds the links of the given tasks (what each shows, whether its cell cuts it),
reads the chart's axis labels, clicks the queued task and reads the view it opens."""


def task_path(task_id: str) -> str:
    """``/task/`` and the id as the page's ``encodeURIComponent`` writes it."""
    return "/task/" + urllib.parse.quote(task_id, safe="-_.!~*'()")


def test_tasks_of_one_run_are_told_apart_and_a_queued_task_says_why_it_waits(
        project_env: dict[str, str], processes: Any, tmp_path: Path) -> None:
    """Why: ids were cut to their run prefix, the chart had no axes, and a queued task
    could not be opened to see why it waits."""
    prefix, port, env, worker, nodes = start_cluster(project_env, processes, tmp_path)
    gpus = sum(len(n["gpus"]) for n in nodes)
    run = f"{prefix}6960c703a1b2c3d4-openb-"  # a long prefix every task shares
    running = [f"{run}pod-{i:04d}" for i in range(gpus)]  # one GPU each: the cluster is full
    asyncio.run(submit(env["KAFKA_BOOTSTRAP"], prefix, *running))
    poll(lambda: get_json(port, "/dashboard/data")["placed"] >= gpus, 90, f"{gpus} placements")
    queued = f"{run}queued/job 50%-pod-9999"  # a slash, a space and a percent sign
    asyncio.run(submit(env["KAFKA_BOOTSTRAP"], prefix, queued))
    poll(lambda: queued in [q["task"] for q in get_json(port, "/dashboard/data")["queue"]], 60,
         "the task queued")
    doc = poll(lambda: (d := get_json(port, task_path(queued)))["pending"] and d, 60,
               "the queued task's verdicts at /task/<id>")
    assert doc["task"] == queued and doc["now"]["status"] == "queued", doc
    verdicts = [f"{v['policy']}: {v['code']}: {'; '.join(v['reasons'])}"
                for v in doc["pending"]["verdicts"]]
    assert verdicts and doc["timeline"][0]["step"] == "submitted", doc
    with pytest.raises(urllib.error.HTTPError) as unknown:
        get_json(port, task_path(f"{prefix}no/such%20task"))
    assert unknown.value.code == 404
    assert f"unknown task '{prefix}no/such%20task'" in json.loads(unknown.value.read())["error"]

    first, second = running[:2]
    assert short_id(first) != short_id(second)
    seen = evaluate(f"http://127.0.0.1:{port}/dashboard", tmp_path,
                    SEE_AND_OPEN % (json.dumps([first, second, queued]), json.dumps(queued)))
    for task in (first, second, queued):  # each link shows its short id whole, not cut
        assert seen["links"][task] == {"text": short_id(task), "clipped": False}, seen
    assert seen["axes"] == ["time (s, 0 = latest sample)", "GPUs allocated (%)",
                            "queue (tasks)"], seen
    assert seen["hash"] == "#task=" + task_path(queued).removeprefix("/task/"), seen
    for line in verdicts:  # the click opened the queued task's view with its verdicts
        assert line in seen["panel"], seen
    assert "submitted" in seen["panel"] and "queued" in seen["panel"], seen

    shot = tmp_path / "task-view.png"
    chromium(f"http://127.0.0.1:{port}/dashboard{seen['hash']}", tmp_path,
             f"--screenshot={shot}")
    assert shot.exists(), processes.log_of(worker)
    print(f"task view screenshot: {shot}")
