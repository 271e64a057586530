"""Invalid records on the worker's topics go to the dead-letter topic; the worker goes on."""

from __future__ import annotations

from typing import Any

import pytest
from service_builders import node, task
from service_kafka import Deployment, wait_for_nodes, wait_healthy

from schemas.codec import decode_deadletter, encode

pytestmark = pytest.mark.integration


async def test_bad_records_are_dead_lettered_and_valid_ones_still_decided(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    await dep.produce("hetsched.nodes", [node("node-0", "A100", 8)])
    wait_for_nodes([worker.web_port], 1)
    await dep.produce_raw("hetsched.tasks", b"junk", b"{not json")
    await dep.produce_raw("hetsched.tasks", b"node-x", encode(node("node-x", "T4", 1)))
    await dep.produce_raw("hetsched.tasks", b"t", b'{"type": "TaskSubmitted", "version": 1}')
    await dep.produce("hetsched.tasks", [task("after-the-junk", 1, seed=dep.prefix)])
    letters = await dep.read("hetsched.deadletter", lambda r: len(r) >= 3, 60, raw=True)
    reasons = sorted(decode_deadletter(r).reason for r in letters)
    assert reasons == ["invalid_json", "validation_failed", "wrong_topic"]
    assert all(decode_deadletter(r).source_topic == dep.topic("hetsched.tasks")
               for r in letters)
    decisions = await dep.read("hetsched.decisions", lambda r: len(r) >= 1, 60)
    assert decisions[0].payload.task_id == "after-the-junk"
    assert worker.poll() is None
