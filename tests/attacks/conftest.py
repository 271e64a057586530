"""The attack suite's one live cluster (worker + node on the session's secured broker).

Started by the first test of this folder that asks for it and stopped as soon as the
next test is outside the folder. Not a ``scope="package"`` fixture: this folder is no
Python package, and pytest keeps such a fixture until the session ends, so the suite's
worker would go on placing the tasks of the tests after it (tests/security runs its own
worker on the same topics and expects to be the only one).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from attack_cluster import AttackCluster, running_cluster

HERE = Path(__file__).resolve().parent


class _Shared:
    """The running cluster, if any, and how to stop it."""

    cluster: AttackCluster | None = None
    stack: contextlib.ExitStack | None = None


def _stop(*, retire: bool) -> None:
    cluster, stack = _Shared.cluster, _Shared.stack
    _Shared.cluster = _Shared.stack = None
    if stack is None:
        return
    with stack:
        if retire and cluster is not None:
            cluster.retire()


@pytest.fixture
def attack_cluster(secure_cluster, tmp_path_factory: pytest.TempPathFactory) -> AttackCluster:
    """The scheduler worker and node ``node-b`` running on ``secure_cluster``, shared by
    every attack test of this folder."""
    if _Shared.cluster is None:
        stack = contextlib.ExitStack()
        _Shared.cluster = stack.enter_context(
            running_cluster(secure_cluster, tmp_path_factory.mktemp("attacks")))
        _Shared.stack = stack
    return _Shared.cluster


@pytest.hookimpl(tryfirst=True)  # before the session's fixtures (the broker) are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or HERE not in Path(nextitem.path).resolve().parents:
        _stop(retire=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _stop(retire=False)  # an interrupted run: the processes, not the broker, are left
