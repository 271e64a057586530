"""The attack suite's one live cluster (worker + node on the session's secured broker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from attack_cluster import AttackCluster, running_cluster


@pytest.fixture(scope="package")
def attack_cluster(secure_cluster, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[AttackCluster]:
    """The scheduler worker and node ``node-b`` running on ``secure_cluster``, shared by
    every attack module of this folder and stopped after the last (so no other test of
    the session meets this worker)."""
    with running_cluster(secure_cluster, tmp_path_factory.mktemp("attacks")) as cluster:
        yield cluster
