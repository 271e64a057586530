"""Attack aftermath: a refused submission is counted as refused, not lost.

On the secured broker, with the real worker: alice submits one task for her own
tenant and one claiming bob's. The router dead-letters the forged one
(``tenant_forged``) and it never reaches a cell, which is right; but
``hetsched check --settled`` read only the submissions, the reports, the input log
and the decisions, and called the forged task ``task_lost``, so an attack looked
like the scheduler losing work. Now check reads the dead-letter topic too (live,
and in a file ``hetsched export --topic hetsched.deadletter`` wrote): the forged
task is ``refused`` with its reason, and ``task_lost`` means lost.

It lives in tests/security, not tests/attacks, because it runs a worker of its own:
the attack suite's shared worker reads the same topics of the session broker and
would decide this test's tasks too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from secured_worker import (
    envelope_of,
    hetsched,
    letter_of,
    produce,
    read_until,
    registration,
    start_worker,
    submission,
)

from schemas.events import TaskPlaced
from schemas.topics import DEADLETTER, DECISIONS, INPUT_LOG, NODES, TASK_STATUS, TASKS
from streams.audit.logfile import LogFile
from streams.check.invariants import check

pytestmark = pytest.mark.integration


async def test_a_forged_submission_is_refused_with_its_reason_not_lost(
        secure_cluster: Any, processes: Any, tmp_path: Path) -> None:
    cluster = secure_cluster
    worker = start_worker(cluster, processes, tmp_path)
    node_a = worker.node("node-a")
    await produce(cluster, "node-a", NODES, [registration(node_a, gpus=2)])
    worker.wait_for_node(node_a)
    own = submission(f"own-{worker.run}", worker.tenant("alice"))
    forged = submission(f"forged-{worker.run}", worker.tenant("bob"))  # alice claims nlp
    await produce(cluster, "alice", TASKS, [own, forged])

    def placed(records: list[Any]) -> bool:
        return any((e := envelope_of(r)) is not None and isinstance(e.payload, TaskPlaced)
                   and e.payload.task_id == own.payload.task_id for r in records)

    await read_until(cluster, DECISIONS, placed)
    letters = await read_until(cluster, DEADLETTER, lambda rs: any(
        (d := letter_of(r)) is not None and d.event_id == forged.event_id for r in rs))
    (letter,) = [d for r in letters if (d := letter_of(r)) is not None
                 and d.event_id == forged.event_id]
    assert letter.message.startswith("tenant_forged:"), letter.message
    processes.stop_all()  # settled: nothing more will be decided

    # The live check, a real command as the read-only dashboard principal.
    live = hetsched(cluster, "grafana", "check", "--settled", "--json", "--no-progress")
    assert live.returncode in (0, 1), live.stderr
    report = orjson.loads(live.stdout)
    ours = {own.payload.task_id, forged.payload.task_id}
    assert [v for v in report["violations"] if v["task_id"] in ours] == [], report
    assert report["refused_reasons"].get("tenant_forged", 0) >= 1, report
    assert report["counts"][DEADLETTER] >= 1

    # The same from an export that includes the dead letters, task by task.
    audit = tmp_path / "audit.jsonl.gz"
    topics = (TASKS, TASK_STATUS, INPUT_LOG, DECISIONS, DEADLETTER)
    exported = hetsched(cluster, "grafana", "export", "-o", str(audit), "--no-progress",
                        *(arg for t in topics for arg in ("--topic", t)))
    assert exported.returncode == 0, exported.stderr
    assert "missing records" not in exported.stderr, exported.stderr
    from_file = hetsched(cluster, "grafana", "check", str(audit), "--settled", "--json")
    assert orjson.loads(from_file.stdout)["refused_reasons"] == report["refused_reasons"]
    accounted = check(LogFile(audit), "", settled=True)
    assert accounted.task_states[forged.payload.task_id] == "refused"
    assert accounted.task_states[own.payload.task_id] == "running"
    assert not [v for v in accounted.violations if v.task_id in ours]
