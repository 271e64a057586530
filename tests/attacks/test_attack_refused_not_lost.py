"""Attack aftermath: a refused submission is counted as refused, not lost.

On the attack suite's cluster (the secured broker, the real worker): alice submits
one task for her own tenant and one claiming bob's. The router dead-letters the
forged one (``tenant_forged``) and it never reaches a cell, which is right; but
``hetsched check --settled`` read only the submissions, the reports, the input log
and the decisions, and called the forged task ``task_lost``, so an attack looked
like the scheduler losing work. Now check reads the dead-letter topic too (live,
and in a file ``hetsched export --topic hetsched.deadletter`` wrote): the forged
task is ``refused`` with its reason, and ``task_lost`` means lost.

node-a is only registered (A100s, no agent) and the tasks ask for an A100, so the
suite's node-b (T4s) never takes them. Alice cancels her task at the end, so a later
worker of the session that re-reads the topics (tests/security) does not place it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from attack_cluster import AttackCluster, a100_node, cancellation, run_id, whole_a100

from schemas.events import Envelope, TaskPlaced
from schemas.topics import DEADLETTER, DECISIONS, INPUT_LOG, NODES, TASK_STATUS, TASKS
from streams.audit.logfile import LogFile
from streams.check.invariants import check

pytestmark = pytest.mark.integration


async def test_a_forged_submission_is_refused_with_its_reason_not_lost(
        attack_cluster: AttackCluster, tmp_path: Path) -> None:
    cluster, run = attack_cluster, run_id()
    node_a = "node-a"
    own = whole_a100(f"own-{run}", "vision")
    forged = whole_a100(f"forged-{run}", "nlp")  # alice claims nlp
    ours = {own.payload.task_id, forged.payload.task_id}
    try:
        await cluster.produce("node-a", NODES, a100_node(node_a, gpus=2))
        cluster.wait(lambda: any(n["node"] == node_a for c in cluster.state()["cells"].values()
                                 for n in c["nodes"]), f"{node_a} in the worker's state")
        await cluster.produce("alice", TASKS, own, forged)

        def placed(envs: list[Envelope[Any]]) -> bool:
            return any(isinstance(e.payload, TaskPlaced)
                       and e.payload.task_id == own.payload.task_id for e in envs)

        await cluster.events(DECISIONS, placed)
        letter = await cluster.dead_letter(forged.event_id)
        assert letter.message.startswith("tenant_forged:"), letter.message
        # Settled for this test's tasks: one placed, one dead-lettered; the suite's worker
        # runs on (it is shared), and nothing more is decided about either.

        # The live check, a real command as the read-only dashboard principal.
        live = cluster.hetsched("grafana", "check", "--settled", "--json", "--no-progress")
        assert live.returncode in (0, 1), live.stderr
        report = orjson.loads(live.stdout)
        assert [v for v in report["violations"] if v["task_id"] in ours] == [], report
        assert report["refused_reasons"].get("tenant_forged", 0) >= 1, report
        assert report["counts"][DEADLETTER] >= 1

        # The same from an export that includes the dead letters, task by task.
        audit = tmp_path / "audit.jsonl.gz"
        topics = (TASKS, TASK_STATUS, INPUT_LOG, DECISIONS, DEADLETTER)
        exported = cluster.hetsched("grafana", "export", "-o", str(audit), "--no-progress",
                                    *(arg for t in topics for arg in ("--topic", t)))
        assert exported.returncode == 0, exported.stderr
        assert "missing records" not in exported.stderr, exported.stderr
        from_file = cluster.hetsched("grafana", "check", str(audit), "--settled", "--json")
        assert orjson.loads(from_file.stdout)["refused_reasons"] == report["refused_reasons"]
        accounted = check(LogFile(audit), "", settled=True)
        assert accounted.task_states[forged.payload.task_id] == "refused"
        assert accounted.task_states[own.payload.task_id] == "running"
        assert not [v for v in accounted.violations if v.task_id in ours]
    finally:
        await cluster.produce("alice", TASKS, cancellation(own.payload.task_id))
    cluster.wait(lambda: own.payload.task_id not in cluster.running(), "alice's cancellation")
    await cluster.assert_nothing_lost()
