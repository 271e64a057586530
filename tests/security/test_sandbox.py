"""Executor sandbox: decisions outside the policy run nothing; permitted tasks run confined."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.sandbox import (
    NodeInventory,
    SandboxPolicy,
    check_decision,
    launch_options,
    limits_for,
)
from schemas.events import ExecutorSpec, GpuAssignment

SANDBOX_USER = "hetsched-task"
INVENTORY = NodeInventory("node-a", {0: 40960, 1: 40960})
POLICY = SandboxPolicy(
    allowed_commands=("python", "/bin/sh"),
    allowed_images=("registry.example/ml/",),
    allowed_env=("EPOCHS", "WANDB_MODE"),
    workdir_root=Path("/srv/tasks"),
)


def placed(**overrides):
    fields = {
        "node_id": "node-a",
        "gpus": [GpuAssignment(index=0, share_milli=500, memory_mib=20000)],
        "executor": ExecutorSpec(kind="process", argv=["python", "train.py"], env={"EPOCHS": "3"}),
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


@pytest.mark.parametrize(
    ("decision", "reason"),
    [
        (placed(), None),
        (placed(node_id="node-b"), "is for node 'node-b'"),
        (placed(gpus=[GpuAssignment(index=7)]), "GPU index 7 is not in this node's inventory"),
        (placed(gpus=[GpuAssignment(index=0), GpuAssignment(index=0)]), "assigned twice"),
        (placed(gpus=[GpuAssignment(index=1, memory_mib=80000)]), "80000 MiB reserved"),
        (placed(executor=ExecutorSpec(kind="process", argv=["curl", "evil.sh"])), "allow-list"),
        (placed(executor=ExecutorSpec(kind="process", argv=["/tmp/python"])), "allow-list"),
        (placed(executor=ExecutorSpec(kind="process", argv=["/bin/sh", "-c", "x"])), None),
        (placed(executor=ExecutorSpec(kind="container", argv=["x"], image="evil/miner:1")),
         "image 'evil/miner:1'"),
        (placed(executor=ExecutorSpec(kind="container", argv=["x"],
                                      image="registry.example/ml/train:2")), None),
        (placed(executor=ExecutorSpec(kind="process", argv=["python"],
                                      env={"LD_PRELOAD": "/x.so"})), "LD_PRELOAD"),
        (placed(executor=ExecutorSpec(kind="process", argv=["python"], workdir="../../etc")),
         "outside"),
    ],
    ids=[
        "a decision within the policy passes",
        "a decision for another node is refused",
        "a GPU the node does not have is refused",
        "the same GPU twice is refused",
        "more GPU memory than the GPU has is refused",
        "a command outside the allow-list is refused",
        "an allowed name at another path is refused",
        "an allowed absolute path passes",
        "an image outside the allow-list is refused",
        "an image under an allowed prefix passes",
        "an undeclared environment name is refused",
        "a workdir escaping the root is refused",
    ],
)
def test_check_decision(decision, reason: str | None) -> None:
    verdict = check_decision(decision, POLICY, INVENTORY)
    if reason is None:
        assert verdict is None
    else:
        assert verdict is not None and reason in verdict


DEFAULT_ENV_POLICY = SandboxPolicy(allowed_commands=("python",))
"""A sandbox whose operator left ``allowed_env`` unset (any name, but not all)."""


def _with_env(env: dict[str, str]) -> SimpleNamespace:
    return placed(executor=ExecutorSpec(kind="process", argv=["python"], env=env))


@pytest.mark.parametrize(
    ("policy", "env", "refused"),
    [
        (DEFAULT_ENV_POLICY, {"EPOCHS": "3"}, None),
        (DEFAULT_ENV_POLICY, {"PATH": "/tmp/attacker"}, "PATH"),
        (DEFAULT_ENV_POLICY, {"LD_LIBRARY_PATH": "/tmp/attacker"}, "LD_LIBRARY_PATH"),
        (DEFAULT_ENV_POLICY, {"PYTHONPATH": "/tmp/attacker"}, "PYTHONPATH"),
        (DEFAULT_ENV_POLICY, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100"},
         "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
        (SandboxPolicy(allowed_commands=("python",), allowed_env=("PATH", "PYTHONPATH")),
         {"PATH": "/opt/ml/bin", "PYTHONPATH": "/opt/ml/lib"}, None),
        (SandboxPolicy(allowed_commands=("python",), allowed_env=("CUDA_VISIBLE_DEVICES",)),
         {"CUDA_VISIBLE_DEVICES": "0,1"}, "CUDA_VISIBLE_DEVICES"),
    ],
    ids=[
        "with allowed_env unset an ordinary name passes",
        "with allowed_env unset PATH is refused",
        "with allowed_env unset an LD_ variable is refused",
        "with allowed_env unset a PYTHON variable is refused",
        "an MPS variable is refused",
        "names the operator lists pass",
        "a variable the executor sets is refused even when listed",
    ],
)
def test_a_tasks_environment_cannot_choose_its_code_unless_the_operator_allows(
    policy: SandboxPolicy, env: dict[str, str], refused: str | None
) -> None:
    verdict = check_decision(_with_env(env), policy, INVENTORY)
    if refused is None:
        assert verdict is None
    else:
        assert verdict is not None and refused in verdict


def test_limits_come_from_the_booking() -> None:
    limits = limits_for(cpu_milli=2500, memory_mib=1024, policy=POLICY)
    assert limits.cpu_time_s == 3 * POLICY.cpu_time_per_core_s
    assert limits.address_space_bytes == (1024 + POLICY.memory_headroom_mib) * 1024 * 1024
    assert limits.open_files == POLICY.max_open_files
    assert limits_for(0, 0, POLICY).address_space_bytes is None


@pytest.fixture
def sandbox_user() -> str:
    if os.geteuid() != 0:
        pytest.skip("creating the unprivileged sandbox user needs root")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not available")
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SANDBOX_USER],
        check=False, capture_output=True,
    )
    return SANDBOX_USER


@pytest.fixture
def world_traversable_root() -> Iterator[Path]:
    """pytest's tmp dirs are 0700 (root only); the task user must reach its workdir."""
    root = Path(tempfile.mkdtemp(prefix="hetsched-sandbox-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_permitted_task_runs_as_the_unprivileged_user_with_its_limits(
    sandbox_user: str, world_traversable_root: Path
) -> None:
    import pwd

    policy = SandboxPolicy(
        user=sandbox_user, allowed_commands=("/bin/sh",), allowed_env=("EPOCHS",),
        workdir_root=world_traversable_root / "tasks", max_open_files=256,
        cpu_time_per_core_s=120,
    )
    decision = placed(executor=ExecutorSpec(kind="process", argv=["/bin/sh"], env={"EPOCHS": "3"}))
    assert check_decision(decision, policy, INVENTORY) is None
    limits = limits_for(cpu_milli=1000, memory_mib=256, policy=policy)
    script = (
        "id -u; id -g; id -G; ulimit -n; ulimit -t; ulimit -v; pwd; "
        "ps -o pgid= -p $$ | tr -d ' '; echo $$; env | sort"
    )
    os.environ["KAFKA_SASL_PASSWORD"] = "executor-secret-must-not-leak"
    try:
        options = launch_options(
            task_id="t-1", spec_workdir=None, declared_env={"EPOCHS": "3"},
            added_env={"CUDA_VISIBLE_DEVICES": "0"}, limits=limits, policy=policy,
        )
    finally:
        del os.environ["KAFKA_SASL_PASSWORD"]
    out = subprocess.run(
        ["/bin/sh", "-c", script], capture_output=True, text=True, check=True, **options
    ).stdout.splitlines()
    account = pwd.getpwnam(sandbox_user)
    uid, gid, groups, nofile, cpu, vmem, cwd, pgid, pid = out[:9]
    env_lines = out[9:]
    assert int(uid) == account.pw_uid != 0
    assert int(gid) == account.pw_gid and groups.split() == [gid]
    assert int(nofile) == 256
    assert int(cpu) == 120
    assert int(vmem) == (256 + policy.memory_headroom_mib) * 1024  # ulimit -v is in KiB
    assert cwd == str(world_traversable_root / "tasks" / "t-1")
    assert pgid == pid, "the task leads its own process group"
    names = {line.split("=", 1)[0] for line in env_lines if "=" in line}
    assert {"EPOCHS", "CUDA_VISIBLE_DEVICES", "HOME", "PATH"} <= names
    assert not any(n.startswith(("KAFKA_", "HETSCHED_SIGNING")) for n in names)
    assert "executor-secret-must-not-leak" not in "\n".join(env_lines)


def test_the_sandbox_user_must_not_be_root(world_traversable_root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    policy = SandboxPolicy(user="root", workdir_root=world_traversable_root)
    with pytest.raises(PermissionError):
        launch_options(
            task_id="t", spec_workdir=None, declared_env={}, added_env={},
            limits=limits_for(0, 0, policy), policy=policy,
        )
