"""Process-task attacks through the real executor: a tenant's task spec trying to run
code the node did not allow, or to run it outside the node's task folder.

Alice submits each task to the live scheduler, which places it on ``node-b``, a real
``hetsched-node`` with ``executor.sandbox`` (only ``/bin/sh`` allowed, tasks under
``workdir_root``). Every attack's command would leave a mark if it ran (a file in a
folder beside the task root); the node must refuse it before anything runs, report
``TaskFailed(launch_error)`` with "refused by node policy" and what was refused, and
go on running honest tasks. ``hetsched check`` then finds the task failed with that
reason, nothing lost and nothing booked twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from attack_cluster import AttackCluster, run_id, submission

from schemas.events import ExecutorSpec, TaskFailed, TaskFinished, TaskStarted
from schemas.topics import TASK_STATUS, TASKS

pytestmark = pytest.mark.integration


def _mark(cluster: AttackCluster, name: str) -> tuple[Path, str]:
    """A file the attack would create if it ran, and the shell line creating it."""
    path = cluster.outside / name
    return path, f"echo ran > {path}"


async def _refused(cluster: AttackCluster, task_id: str, spec: ExecutorSpec) -> TaskFailed:
    """Submit ``spec`` as alice's task ``task_id``; the node's report of it (waited for),
    after which an honest task must still run to its end on the same node."""
    await cluster.produce("alice", TASKS, submission(task_id, "vision", spec))
    honest_id = f"honest-after-{task_id.strip('.') or 'dots'}-{run_id()}"
    honest = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", "exit 0"])
    await cluster.produce("alice", TASKS, submission(honest_id, "vision", honest))

    def ended(events) -> bool:
        ids = {e.payload.task_id for e in events
               if isinstance(e.payload, TaskFailed | TaskFinished)}
        return {task_id, honest_id} <= ids

    events = await cluster.events(TASK_STATUS, ended, 90)
    ours = [e.payload for e in events if e.payload.task_id == task_id]
    assert not [p for p in ours if isinstance(p, TaskStarted | TaskFinished)], ours
    (failed,) = [p for p in ours if isinstance(p, TaskFailed)]
    assert [type(e.payload) for e in events if e.payload.task_id == honest_id
            and isinstance(e.payload, TaskFinished)] == [TaskFinished]
    return failed


def _assert_policy_refusal(failed: TaskFailed, *names: str) -> None:
    assert failed.reason == "launch_error", failed
    assert failed.message.startswith("refused by node policy: "), failed.message
    for name in names:
        assert name in failed.message, failed.message


ENV_ATTACKS = {
    "PATH": "/tmp/attacker-bin",
    "LD_PRELOAD": "/tmp/attacker.so",
    "PYTHONPATH": "/tmp/attacker-lib",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
}


@pytest.mark.parametrize("variable", list(ENV_ATTACKS),
                         ids=[f"a task sets {v}" for v in ENV_ATTACKS])
async def test_a_task_setting_a_variable_that_chooses_its_code_is_refused_naming_it(
    attack_cluster: AttackCluster, variable: str,
) -> None:
    cluster, run = attack_cluster, run_id()
    mark, line = _mark(cluster, f"env-{variable}-{run}")
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", line],
                        env={variable: ENV_ATTACKS[variable]})
    failed = await _refused(cluster, f"env-{variable.lower()}-{run}", spec)
    _assert_policy_refusal(failed, f"environment variable {variable}")
    assert not mark.exists()
    report = await cluster.assert_nothing_lost()
    assert report["failure_reasons"].get("launch_error", 0) >= 1


async def test_a_workdir_climbing_out_with_dotdot_is_refused(
    attack_cluster: AttackCluster,
) -> None:
    cluster, run = attack_cluster, run_id()
    mark, line = _mark(cluster, f"dotdot-{run}")
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", line],
                        workdir=f"../{cluster.outside.name}")
    failed = await _refused(cluster, f"dotdot-{run}", spec)
    _assert_policy_refusal(failed, "workdir", "outside")
    assert not mark.exists()
    await cluster.assert_nothing_lost()


async def test_a_workdir_through_a_symlink_out_of_the_task_root_is_refused(
    attack_cluster: AttackCluster,
) -> None:
    """A link inside the task root (left there by an earlier task, say) to a folder
    outside it: the declared workdir is judged where it resolves, not by its name."""
    cluster, run = attack_cluster, run_id()
    link = cluster.workdir_root / f"link-{run}"
    link.symlink_to(cluster.outside, target_is_directory=True)
    mark, line = _mark(cluster, f"symlink-{run}")
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", line], workdir=link.name)
    failed = await _refused(cluster, f"symlink-{run}", spec)
    _assert_policy_refusal(failed, "workdir", "outside")
    assert not mark.exists()
    await cluster.assert_nothing_lost()


@pytest.mark.parametrize("task_name", ["..", "link"],
                         ids=["the task id is '..'", "the task id names a symlink out"])
async def test_a_task_id_that_would_make_its_own_folder_outside_the_root_is_refused(
    attack_cluster: AttackCluster, task_name: str,
) -> None:
    """Without a declared workdir a task runs in ``<root>/<task id>``: a task id ``..``
    (any string is a task id) or the name of a link in the root must not take it out."""
    cluster, run = attack_cluster, run_id()
    task_id = task_name
    if task_name == "link":
        task_id = f"idlink-{run}"
        (cluster.workdir_root / task_id).symlink_to(cluster.outside, target_is_directory=True)
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", f"echo ran > escaped-{run}"])
    failed = await _refused(cluster, task_id, spec)
    _assert_policy_refusal(failed, "outside")
    escaped = [p for p in cluster.workdir_root.parent.rglob(f"escaped-{run}")]
    assert escaped == []
    await cluster.assert_nothing_lost()


async def test_a_workdir_that_is_the_task_root_itself_is_refused(
    attack_cluster: AttackCluster,
) -> None:
    """The root is every task's parent: a task running there (as the sandbox user, who
    would own it) could plant the links above for the tasks after it."""
    cluster, run = attack_cluster, run_id()
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", f"ln -s / planted-{run}"],
                        workdir=".")
    failed = await _refused(cluster, f"rootdir-{run}", spec)
    _assert_policy_refusal(failed, "workdir", "outside")
    assert not os.path.lexists(cluster.workdir_root / f"planted-{run}")
    await cluster.assert_nothing_lost()


@pytest.mark.parametrize("command", ["./evil", "../bin/x", "/usr/bin/env", "sh"],
                         ids=["a relative path ./evil", "a relative path ../bin/x",
                              "an absolute path off the allow-list",
                              "the allowed program's bare name"])
async def test_a_command_off_the_allow_list_is_refused_naming_it(
    attack_cluster: AttackCluster, command: str,
) -> None:
    """Only ``/bin/sh`` is allowed. Each command given exists and would leave the mark:
    ``./evil`` in the task's own folder, ``../bin/x`` beside it."""
    cluster, run = attack_cluster, run_id()
    task_id = f"cmd-{run}"
    mark, line = _mark(cluster, f"cmd-{run}")
    for planted in (cluster.workdir_root / task_id / "evil",
                    cluster.workdir_root / "bin" / "x"):
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_text(f"#!/bin/sh\n{line}\n")
        planted.chmod(0o755)
    argv = [command, "-c", line] if command in ("sh", "/usr/bin/env") else [command]
    if command == "/usr/bin/env":
        argv = [command, "sh", "-c", line]
    spec = ExecutorSpec(kind="process", argv=argv)
    failed = await _refused(cluster, task_id, spec)
    _assert_policy_refusal(failed, f"command {command!r}", "allow-list")
    assert not mark.exists()
    await cluster.assert_nothing_lost()
