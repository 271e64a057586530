"""Which account process tasks run as: never root by default (agents/task_user.py), and
the shim that starts the task as that account while it stays the node's user."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from agents.backends.base import ExitInfo, TaskRun
from agents.backends.process import SHIM, ProcessBackend
from agents.config import ExecutorSection, build_config
from agents.sandbox import SandboxPolicy
from agents.task_user import TaskAccount, TaskUserError, task_account
from schemas.events import ExecutorSpec

ROOT = 0
NODE_USER = 1000
ACCOUNTS = {
    "root": pwd.struct_passwd(("root", "x", 0, 0, "", "/root", "/bin/sh")),
    "nobody": pwd.struct_passwd(("nobody", "x", 65534, 65534, "", "/nonexistent", "/bin/false")),
    "tasks": pwd.struct_passwd(("tasks", "x", 990, 991, "", "/nonexistent", "/bin/false")),
    "toor": pwd.struct_passwd(("toor", "x", 0, 0, "", "/root", "/bin/sh")),
}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def _lookup(name: str) -> pwd.struct_passwd:
    return ACCOUNTS[name]


def _executor(*sets: str) -> ExecutorSection:
    return build_config(sets=list(sets)).executor


def test_a_root_node_without_a_sandbox_runs_tasks_as_nobody() -> None:
    assert task_account(_executor(), euid=ROOT, lookup=_lookup) == TaskAccount(
        "nobody", 65534, 65534
    )


def test_the_default_account_exists_on_this_machine() -> None:
    """``nobody`` is the default because Debian/Ubuntu and CI images have it: a node
    started with defaults (the demo, ./dev test, CI) must start."""
    account = task_account(_executor(), euid=ROOT)
    assert account is not None and account.name == "nobody" and account.uid != ROOT


def test_a_node_that_is_not_root_runs_tasks_as_itself() -> None:
    assert task_account(_executor(), euid=NODE_USER, lookup=_lookup) is None


def test_run_as_names_another_unprivileged_account() -> None:
    account = task_account(_executor("executor.run_as=tasks"), euid=ROOT, lookup=_lookup)
    assert account == TaskAccount("tasks", 990, 991)


@pytest.mark.parametrize("name", ["root", "toor"])
def test_run_as_root_is_the_opt_out(name: str) -> None:
    """Any uid-0 account: the operator asked for root, explicitly."""
    assert task_account(_executor(f"executor.run_as={name}"), euid=ROOT, lookup=_lookup) is None


def test_a_missing_account_is_named_with_the_setting() -> None:
    with pytest.raises(TaskUserError) as refused:
        task_account(_executor("executor.run_as=ghost"), euid=ROOT, lookup=_lookup)
    message = str(refused.value)
    assert message.startswith("executor.run_as: user 'ghost' does not exist on this machine")
    assert "executor.run_as=root" in message and "\n" not in message


def test_the_sandbox_user_wins_and_a_sandbox_without_one_uses_run_as() -> None:
    sandboxed = _executor("executor.sandbox={user: tasks}", "executor.run_as=nobody")
    assert task_account(sandboxed, euid=ROOT, lookup=_lookup) == TaskAccount("tasks", 990, 991)
    bare = _executor("executor.sandbox={allowed_commands: [sh]}")
    assert task_account(bare, euid=ROOT, lookup=_lookup) == TaskAccount("nobody", 65534, 65534)


@pytest.mark.parametrize(
    ("user", "expected"),
    [("ghost", "executor.sandbox.user: user 'ghost' does not exist"),
     ("root", "executor.sandbox.user: 'root' is root")],
)
def test_a_bad_sandbox_user_is_named(user: str, expected: str) -> None:
    with pytest.raises(TaskUserError, match=expected):
        task_account(_executor(f"executor.sandbox={{user: {user}}}"), euid=ROOT, lookup=_lookup)


@needs_root
def test_the_shim_runs_the_task_as_the_account_with_the_environment_of_its_file(
    tmp_path: Path,
) -> None:
    """The shim stays root (its status file is the node's) and starts the task as the
    account, without root's supplementary groups, with the environment from the file."""
    nobody = pwd.getpwnam("nobody")
    env_file = tmp_path / "task.env"
    env_file.write_text(json.dumps({"PATH": "/usr/bin:/bin", "TASK_SETTING": "42"}))
    status = tmp_path / "status.json"
    script = 'id -u; id -G; echo "setting=$TASK_SETTING"; test "$(id -u)" -ne 0'
    done = subprocess.run(
        [sys.executable, "-I", SHIM, "--status", str(status),
         "--user", str(nobody.pw_uid), "--group", str(nobody.pw_gid),
         "--env-file", str(env_file), "--", "/bin/sh", "-c", script],
        capture_output=True, text=True, check=False, cwd="/", env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    uid, groups, setting = done.stdout.splitlines()
    assert (int(uid), groups.split(), setting) == (
        nobody.pw_uid, [str(nobody.pw_gid)], "setting=42"
    )
    assert json.loads(status.read_text())["exit_code"] == 0
    assert not env_file.exists(), "the task's environment file is removed once read"


@needs_root
@pytest.mark.parametrize("sandboxed", [False, True], ids=["no sandbox", "sandbox, no user"])
async def test_the_process_backend_runs_the_task_as_its_account(
    tmp_path: Path, sandboxed: bool
) -> None:
    """With or without a sandbox (a sandbox without a user used to run tasks as the
    node's user too), the task runs as the account; the log and exit code still reach
    the node although the account cannot read the node's state dir (pytest's 0700)."""
    nobody = pwd.getpwnam("nobody")
    account = TaskAccount("nobody", nobody.pw_uid, nobody.pw_gid)
    policy = SandboxPolicy(allowed_commands=("sh",), workdir_root=tmp_path / "tasks-root")
    ended: list[ExitInfo] = []

    async def on_exit(_run: TaskRun, info: ExitInfo) -> None:
        ended.append(info)

    backend = ProcessBackend("n", tmp_path / "state", on_exit, run_as=account,
                             sandbox=policy if sandboxed else None)  # fmt: skip
    spec = ExecutorSpec(kind="process", argv=["sh", "-c", "id -u; exit 4"])
    await backend.start(TaskRun("t", "d", spec, ()))
    deadline = asyncio.get_running_loop().time() + 30
    while not ended:
        assert asyncio.get_running_loop().time() < deadline, "the task never ended"
        await asyncio.sleep(0.05)
    assert ended[0].exit_code == 4
    log_lines = (tmp_path / "state" / "logs" / "t.log").read_text().splitlines()
    assert log_lines[0].startswith("=== ") and " user=nobody " in log_lines[0]
    assert log_lines[1:] == [str(nobody.pw_uid)]
    assert list((tmp_path / "state" / "status").glob(".hetsched-env.*")) == []
