"""A cluster started the way docs/service.md and docs/node.md tell an operator to.

The fixtures of the operator journeys (tests/journeys) and of the interop suite
(tests/interop), whose conftest files import them from here.

One scheduler worker (``hetsched worker``) and one ``hetsched-node sim-cluster``
(20 simulated openb nodes, each running process and simulated tasks), both with
every default: the catalog's topic names, the default app id, web port 6066,
metrics port 9101, relative state folders under the operator's own folder. The
default topics are deleted first so that an earlier run on a kept broker cannot
leak into this one, and again at the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from operator_tools import Operator, wait_until, web_json

from schemas.admin import delete_topics_with_prefix

DEFAULT_PREFIXES = ("hetsched.", "hetsched-scheduler")
"""The catalog's topics and the default app's internal ones."""

WORKER_URL = "http://127.0.0.1:6066"
"""Where the documented commands find the worker with default settings."""

NODES = 20
"""``hetsched-node sim-cluster``'s default node count."""


def delete_default_topics(bootstrap: str) -> None:
    async def delete() -> None:
        for prefix in DEFAULT_PREFIXES:
            await delete_topics_with_prefix(bootstrap, prefix)
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            deadline = time.monotonic() + 60
            while any(t.startswith(DEFAULT_PREFIXES) for t in await admin.list_topics()):
                assert time.monotonic() < deadline, "default topics still listed after 60 s"
                await asyncio.sleep(0.3)
        finally:
            await admin.close()

    asyncio.run(delete())


@pytest.fixture(scope="module")
def operator(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """An operator's folder and commands; every process it started is stopped at the end."""
    home: Path = tmp_path_factory.mktemp("operator")
    op = Operator(home, kafka_bootstrap)
    try:
        yield op
    finally:
        op.stop_all()


@pytest.fixture(scope="module")
def cluster(operator: Operator) -> Operator:
    """The worker and the simulated nodes running with defaults, all nodes registered."""
    delete_default_topics(operator.bootstrap)
    worker = operator.start("worker", "hetsched", "worker")

    def healthy() -> bool:
        assert worker.poll() is None, operator.log("worker")
        body = web_json(f"{WORKER_URL}/health")
        return bool(body and body.get("status") == "ok")

    wait_until("the worker's /health", healthy, timeout_s=120)
    nodes = operator.start("nodes", "hetsched-node", "sim-cluster")

    def registered() -> bool:
        assert nodes.poll() is None, operator.log("nodes")
        listed = operator.run("nodes")
        return listed.returncode == 0 and len(listed.stdout.splitlines()) == NODES + 1

    wait_until(f"{NODES} nodes in `hetsched nodes`", registered, timeout_s=120, every_s=1)
    return operator


@pytest.fixture(scope="module", autouse=True)
def _clean_default_topics_after(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a module whose selected tests include broker tests; a module run without
    them (``-m "not integration"``) must not start a broker just to clean it."""
    module_items = [i for i in request.session.items if i.module is request.module]
    if not any(i.get_closest_marker("integration") for i in module_items):
        yield
        return
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    yield
    delete_default_topics(bootstrap)
