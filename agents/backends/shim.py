"""Tiny supervisor between the executor and a task process.

Why: only a process's parent can read its exit status. If the executor is
restarted (upgrade, crash) while tasks run, their exit codes would be lost and
every such task would have to be reported as "lost". The executor therefore
starts each task through this shim, in its own session: the shim survives the
executor, forwards the signals it receives to the task's process group, waits
for the task and writes the exit status to a small JSON file the (new)
executor reads.

Run (by the process backend): ``python -I .../shim.py --status FILE -- ARGV...``
(standard library only, so it runs by path whatever the task's environment).
The shim exits with the task's exit code (128+N when signal N killed it).

When the task runs as another account than the node (agents/task_user.py), the
shim stays the node's user and starts only the task as that account
(``--user UID --group GID``, no supplementary groups). Why not start the shim as
the task's account: the interpreter and this file may not be readable by it (a
Python under /root), and the status file stays where the task cannot rewrite
its own exit code. A shim that keeps the node's privileges must not read a
variable of the task's (``GCONV_PATH``, ``LOCPATH``, ``GLIBC_TUNABLES``... steer
the C library of a root process), so it is started with the node's own base
environment and the task's comes in a file only the node can read
(``--env-file``), removed once read.

When the shim itself fails (its status file cannot be written, an unexpected
error), the status it has goes to its stderr, which is the task's log, as one
line starting with :data:`STATUS_LINE` and carrying the error under
``shim_error``: the executor reads it from there, so the task's failure names
the cause instead of being an empty ``exit_nonzero``. It checks that the status
file can be written before it starts the task, so a task never runs unrecorded.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


STATUS_LINE = "hetsched-shim-status: "
"""Prefix of the status line the shim writes to the task's log when the file fails."""


def write_status(path: Path, status: dict[str, object]) -> None:
    """Atomically write the status file (rename over a temp file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status), encoding="utf-8")
    os.replace(tmp, path)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def report(path: Path, status: dict[str, object]) -> None:
    """Record ``status`` in the file, or, when that fails, in the task's log with why."""
    try:
        write_status(path, status)
    except OSError as exc:
        problem = f"cannot write the exit status file {path}: {_describe(exc)}"
        report_to_log(dict(status, shim_error=problem))


def report_to_log(status: dict[str, object]) -> None:
    """The status as one line on stderr (the task's log), where the executor finds it."""
    print(STATUS_LINE + json.dumps(status), file=sys.stderr, flush=True)


def _status_file_problem(path: Path) -> str | None:
    """Why the status file cannot be written (None: it can), tried before the task runs."""
    probe = path.with_suffix(".tmp")
    try:
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        return f"cannot write the exit status file {path}: {_describe(exc)}"
    return None


@dataclass(frozen=True)
class RunAs:
    """The account the task runs as when it is not the shim's own."""

    uid: int
    gid: int



def read_env_file(path: Path) -> dict[str, str]:
    """The task's environment from the node's file, which is then removed (it may hold
    the task's settings; nothing else needs it)."""
    env = json.loads(path.read_text(encoding="utf-8"))
    path.unlink()
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("not a JSON object of strings")
    return env


def supervise(
    status_path: Path,
    command: list[str],
    *,
    run_as: RunAs | None = None,
    env_file: Path | None = None,
) -> int:
    """Run ``command`` (as ``run_as`` when given, with the environment of ``env_file``
    when given, else the shim's own), wait for it, record how it ended; the shim's exit
    code."""
    started = time.time()
    problem = _status_file_problem(status_path)
    if problem is not None:
        report_to_log({"launch_error": f"task supervisor: {problem}", "started": started})
        return 127
    env: dict[str, str] | None = None
    if env_file is not None:
        try:
            env = read_env_file(env_file)
        except (OSError, ValueError) as exc:
            problem = f"cannot read the task's environment file {env_file}: {_describe(exc)}"
            report(status_path, {"launch_error": f"task supervisor: {problem}", "started": started})
            return 127
    # The executor signals the whole process group (shim and task). The shim must
    # outlive the task to record its status, so it only notes the signals;
    # Python handlers, unlike SIG_IGN, are reset to the default in the child on exec.
    for sig in FORWARDED:
        signal.signal(sig, lambda *_: None)
    try:
        if run_as is None:
            child = subprocess.Popen(command, env=env)
        else:  # no supplementary groups: root's would follow the task otherwise
            child = subprocess.Popen(
                command, env=env, user=run_as.uid, group=run_as.gid, extra_groups=[]
            )
    except OSError as exc:
        who = f" (running as uid {run_as.uid})" if run_as is not None else ""
        report(status_path, {"launch_error": f"{exc}{who}", "started": started})
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
    exit_code = 128 - code if code < 0 else code
    status: dict[str, object] = {
        "exit_code": exit_code,
        "signal": -code if code < 0 else None,
        "pid": child.pid,
        "started": started,
        "ended": time.time(),
    }
    report(status_path, status)
    return exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agents.backends.shim")
    parser.add_argument("--status", type=Path, required=True)
    parser.add_argument("--user", type=int, help="uid the task runs as (needs root)")
    parser.add_argument("--group", type=int, help="its primary gid (with --user)")
    parser.add_argument("--env-file", type=Path, help="JSON object: the task's environment")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if (args.user is None) != (args.group is None):
        parser.error("--user and --group go together")
    run_as = RunAs(args.user, args.group) if args.user is not None else None
    try:
        return supervise(args.status, command, run_as=run_as, env_file=args.env_file)
    except Exception as exc:  # the last word must reach the executor, whatever it is
        report_to_log({"shim_error": f"task supervisor failed: {_describe(exc)}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
