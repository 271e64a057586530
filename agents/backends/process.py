"""Process backend: run a task's command as a child process on the placed GPUs.

* GPUs: ``CUDA_VISIBLE_DEVICES`` lists the placed indices and
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA number GPUs as NVML does (its
  default, fastest first, may differ). A fractional task (share < 1000) also
  gets ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (its share of the SMs under MPS)
  and, with a memory reservation, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (MPS's
  per-client memory cap) plus ``HETSCHED_GPU_MEMORY_MIB`` for frameworks that
  cap themselves (e.g. PyTorch's per-process memory fraction).
* Output: stdout and stderr go to ``<state>/logs/<task_id>.log`` (appended
  across restarts of the task, each start headed by a line saying why).
* Progress: ``HETSCHED_PROGRESS_FILE`` names ``<state>/progress/<task_id>``, new
  for each run and owned by the task's account, where the task may append its
  work count (:mod:`agents.progress`); it is removed when the run ends.
* Stop, resize and migrate are signals with grace: the checkpoint signal
  (SIGUSR1 by default) first when the task should save its state, then
  SIGTERM, then SIGKILL after the grace period, always to the task's whole
  process group so helpers die with it.
* With ``executor.sandbox`` configured, the task is launched by
  :func:`agents.sandbox.launch_options`: as the unprivileged task user, in its
  own directory, with a scrubbed environment and rlimits from its booking (the
  executor has already refused decisions outside the node's policy). Without
  it (development, tests) the task gets the executor's environment minus the
  node's own ``KAFKA_*``/``HETSCHED_*``.
* The account: a node running as root never runs a task as root unless its
  operator says so (``executor.run_as``, resolved by :mod:`agents.task_user`
  and handed here as ``run_as``). The task then runs as that account, in its
  own directory ``<state>/tasks/<task_id>`` (also its ``HOME``) unless it
  declared a workdir; the shim stays the node's user and drops privileges for
  the task alone (see :mod:`agents.backends.shim` for why), so the log (opened
  here) and the exit-status file (written by the shim) work whatever the task's
  account may read.
* The command's bare name is resolved on the executor's own PATH before the task's
  environment applies, and that absolute path is what runs and what the log shows;
  a declared environment that could choose the code or undo the placement is
  refused (:func:`agents.sandbox.env_refusal`).
* Each task runs under :mod:`agents.backends.shim`, which records the exit
  status in a file, so tasks outlive an executor restart and are re-adopted
  with their exit code (see :meth:`ProcessBackend.adopt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.backends.base import ExitInfo, LaunchError, OnExit, TaskRun
from agents.backends.shim import STATUS_LINE
from agents.progress import PROGRESS_ENV, ProgressFile, ProgressReading
from agents.sandbox import (
    BASE_ENV_NAMES,
    SandboxPolicy,
    env_refusal,
    launch_options,
    limits_for,
)
from agents.task_user import TaskAccount

log = logging.getLogger(__name__)
SHIM = str(Path(__file__).with_name("shim.py"))
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []
"""Tasks deliberately left running at close: kept referenced so that Popen's
finaliser does not warn about (or try to reap) them while this process lives."""
_POLL_S = 0.1
"""How often running tasks are checked for exit (a waitpid with WNOHANG)."""


@dataclass
class _Proc:
    run: TaskRun
    pid: int
    status_path: Path
    started: float
    log_path: Path | None = None
    log_offset: int = 0
    """Where this run's output starts in the task's log (appended across runs)."""
    waiter: asyncio.Task[None] | None = None
    process: subprocess.Popen[bytes] | None = None
    stopping: bool = False
    progress: ProgressFile | None = None


@dataclass
class _Launch:
    """How one task starts: its directory and environment, the account it runs as
    (None: the node's), and further ``Popen`` options for the shim (sandbox rlimits)."""

    cwd: Path
    env: dict[str, str]
    account: TaskAccount | None = None
    popen: dict[str, Any] = field(default_factory=dict)


PRIVATE_ENV_PREFIXES = ("KAFKA_", "HETSCHED_")
"""The node's own settings (Kafka credentials above all) are not passed to tasks."""


def added_environment(run: TaskRun, node_id: str) -> dict[str, str]:
    """What the executor adds to every task's environment (GPU placement, ids, and a
    gang member's rendezvous variables, which win over the task's own)."""
    env = {
        **run.gang_env,
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in run.gpu_indices),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "HETSCHED_TASK_ID": run.task_id,
        "HETSCHED_DECISION_ID": run.decision_id,
        "HETSCHED_NODE_ID": node_id,
    }
    shares = [g.share_milli for g in run.gpus]
    if shares:
        env["HETSCHED_GPU_SHARE_MILLI"] = ",".join(str(s) for s in shares)
    if any(s < 1000 for s in shares):
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(min(shares) / 10)))
    limits = [(n, g.memory_mib) for n, g in enumerate(run.gpus) if g.memory_mib]
    if limits:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(f"{n}={mib}M" for n, mib in limits)
        env["HETSCHED_GPU_MEMORY_MIB"] = ",".join(str(mib) for _, mib in limits)
    return env


def account_environment(account: TaskAccount, home: Path) -> dict[str, str]:
    """Who the task is, for programs that ask the environment: the node's own ``HOME``
    (/root) would be a directory the task's account cannot use."""
    return {"HOME": str(home), "USER": account.name, "LOGNAME": account.name}


def task_environment(
    run: TaskRun, node_id: str, base: dict[str, str], identity: dict[str, str] | None = None
) -> dict[str, str]:
    """A task's environment without a sandbox: the executor's minus node settings,
    then ``identity`` (:func:`account_environment`, when the task runs as another
    account), then the task's own variables, then :func:`added_environment`."""
    env = {k: v for k, v in base.items() if not k.startswith(PRIVATE_ENV_PREFIXES)}
    env.update(identity or {})
    env.update(run.spec.env)
    env.update(added_environment(run, node_id))
    return env


def _resolve(argv: list[str], cwd: Path) -> str:
    """The file the command runs: a bare name found on the *executor's* PATH, before the
    task's environment applies (a PATH of the task's could otherwise point an allowed
    ``python`` at a file of its own), a relative path from the task's directory. Also
    makes a typo a clear launch error."""
    if not argv or not argv[0].strip():
        raise LaunchError("empty command")
    exe = argv[0]
    if os.sep in exe:
        path = os.path.abspath(cwd / exe)  # the task's cwd may itself be relative
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise LaunchError(f"command not found or not executable: {exe}")
        return path
    found = shutil.which(exe, path=os.environ.get("PATH", os.defpath))
    if found is None:
        raise LaunchError(f"command not found on PATH: {exe}")
    return os.path.abspath(found)


def _alive(pid: int, status_path: Path) -> bool:
    """Is ``pid`` still our shim (not a reused pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return str(status_path).encode() in cmdline


class ProcessBackend:
    """Runs ``ExecutorSpec(kind="process")`` tasks as process groups."""

    kind = "process"

    def __init__(
        self,
        node_id: str,
        state_dir: Path,
        on_exit: OnExit,
        *,
        checkpoint_signal: str = "SIGUSR1",
        checkpoint_grace_s: float = 10.0,
        sandbox: SandboxPolicy | None = None,
        run_as: TaskAccount | None = None,
    ) -> None:
        """``run_as``: the account tasks run as (:func:`agents.task_user.task_account`;
        None: the node's own). With a sandbox it is the sandbox's user."""
        self.node_id = node_id
        # Absolute: the shim runs in the task's directory, not ours, and must find
        # its status file from there.
        state_dir = state_dir.absolute()
        self.logs = state_dir / "logs"
        self.status_dir = state_dir / "status"
        self.progress_dir = state_dir / "progress"
        """Each task's progress file (:mod:`agents.progress`), named by its id."""
        self.tasks_dir = state_dir / "tasks"
        """Each task's own directory (and HOME) when it runs as another account."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self.status_dir.mkdir(parents=True, exist_ok=True)
        self._on_exit = on_exit
        self._checkpoint = signal.Signals[checkpoint_signal]
        self._checkpoint_grace_s = checkpoint_grace_s
        self._procs: dict[str, _Proc] = {}
        if sandbox is not None and sandbox.user is None and run_as is not None:
            sandbox = replace(sandbox, user=run_as.name)
        self.sandbox = sandbox
        self.run_as = run_as

    # -- Backend ---------------------------------------------------------------

    async def start(self, run: TaskRun) -> None:
        if run.task_id in self._procs:
            raise LaunchError(f"task {run.task_id} is already running here")
        refusal = env_refusal(run.spec.env, self.sandbox.allowed_env if self.sandbox else None)
        if refusal is not None:  # the executor checks first; a backend used alone too
            raise LaunchError(f"refused by node policy: {refusal}")
        launch = self._launch(run)
        progress_path = self._progress_file(run.task_id, launch.account)
        launch.env[PROGRESS_ENV] = str(progress_path)
        argv = [_resolve(run.spec.argv, launch.cwd), *run.spec.argv[1:]]
        status_name = f"{_safe(run.task_id)}.{_safe(run.decision_id)}.json"
        # The shim always runs as the node's user (it drops privileges for the task
        # alone), so the status file lives in the node's own directory.
        status_path = self.status_dir / f".hetsched-status.{status_name}"
        status_path.unlink(missing_ok=True)
        shim_env = launch.env
        as_account: list[str] = []
        env_file = self.status_dir / f".hetsched-env.{status_name}"
        if launch.account is not None:
            _write_private(env_file, json.dumps(launch.env))
            as_account = [
                "--user", str(launch.account.uid), "--group", str(launch.account.gid),
                "--env-file", str(env_file),
            ]  # fmt: skip
            shim_env = {k: os.environ[k] for k in BASE_ENV_NAMES if k in os.environ}
        log_path = self.logs / f"{_safe(run.task_id)}.log"
        with log_path.open("ab") as out:
            user = f" user={launch.account.name}" if launch.account is not None else ""
            out.write(
                f"=== {time.strftime('%Y-%m-%dT%H:%M:%S%z')} start decision={run.decision_id} "
                f"gpus={run.gpu_indices}{user} argv={argv!r}\n".encode()
            )
            out.flush()
            log_offset = out.tell()
            try:
                # Plain Popen, not asyncio's subprocess: closing an asyncio subprocess
                # transport (at loop shutdown) kills the child, and tasks must outlive
                # an executor restart. It is reaped by polling (see _wait).
                # The shim runs by path in isolated mode (-I): it needs only the
                # standard library, and the task's PYTHON* variables must not affect it.
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        SHIM,
                        "--status",
                        str(status_path),
                        *as_account,
                        "--",
                        *argv,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    cwd=str(launch.cwd),
                    env=shim_env,
                    start_new_session=True,
                    **launch.popen,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                env_file.unlink(missing_ok=True)  # the shim would have removed it
                raise LaunchError(f"cannot start: {exc}") from exc
        proc = _Proc(
            run, process.pid, status_path, time.monotonic(), log_path, log_offset, process=process,
            progress=ProgressFile(progress_path, run.task_id),
        )
        self._procs[run.task_id] = proc
        proc.waiter = asyncio.create_task(self._wait(proc))
        log.info("task started", extra={"task_id": run.task_id, "pid": process.pid})

    def _launch(self, run: TaskRun) -> _Launch:
        """The sandbox's launch when configured (user, scrubbed env, rlimits, own
        workdir), else the executor's environment in the state dir, or, as another
        account (``run_as``), in the task's own directory."""
        if self.sandbox is None:
            return self._unsandboxed(run)
        try:
            options = launch_options(
                task_id=run.task_id,
                spec_workdir=run.spec.workdir,
                declared_env=run.spec.env,
                added_env=added_environment(run, self.node_id),
                limits=limits_for(run.cpu_milli, run.memory_mib, self.sandbox),
                policy=self.sandbox,
            )
        except (OSError, KeyError) as exc:  # KeyError: the sandbox user does not exist
            raise LaunchError(f"sandbox: {exc}") from exc
        account = None
        if "user" in options:  # the shim drops to it for the task (see the shim)
            uid, gid = options.pop("user"), options.pop("group")
            options.pop("extra_groups", None)
            account = TaskAccount(self.sandbox.user or str(uid), uid, gid)
        cwd, env = Path(options.pop("cwd")), options.pop("env")
        options.pop("start_new_session", None)
        return _Launch(cwd, env, account, options)

    def _unsandboxed(self, run: TaskRun) -> _Launch:
        account = self.run_as
        home = None
        if account is not None:
            home = self._own_directory(run.task_id, account)
        cwd = Path(run.spec.workdir) if run.spec.workdir else home or self.logs.parent
        if not cwd.is_dir():
            raise LaunchError(f"workdir does not exist: {cwd}")
        identity = account_environment(account, home) if account and home else None
        env = task_environment(run, self.node_id, dict(os.environ), identity)
        return _Launch(cwd, env, account)

    def _progress_file(self, task_id: str, account: TaskAccount | None) -> Path:
        """``<state>/progress/<task_id>``, new and empty for each run (removed when it
        ends) and writable by the account the task runs as: the directory is the
        node's (others may only pass through it), the file the task's. The count in
        it is the task's own: a restarted task goes on from its checkpoint's count."""
        path = self.progress_dir / _safe(task_id)
        try:
            self.progress_dir.mkdir(mode=0o711, exist_ok=True)
            path.unlink(missing_ok=True)
            path.touch(mode=0o600)
            if account is not None:
                os.chown(path, account.uid, account.gid)
        except OSError as exc:
            raise LaunchError(f"cannot prepare the task's progress file {path}: {exc}") from exc
        return path

    def _own_directory(self, task_id: str, account: TaskAccount) -> Path:
        """``<state>/tasks/<task_id>``, owned by the task's account and private to it:
        the node's state dir is the node's (journal, logs), not writable by tasks."""
        try:
            self.tasks_dir.mkdir(mode=0o711, exist_ok=True)
            home = self.tasks_dir / _safe(task_id)
            home.mkdir(mode=0o700, exist_ok=True)
            os.chown(home, account.uid, account.gid)
        except OSError as exc:
            raise LaunchError(f"cannot prepare the task's directory as {account.name}: {exc}") \
                from exc
        return home

    async def stop(self, task_id: str, *, grace_s: float, checkpoint: bool) -> ExitInfo | None:
        proc = self._procs.get(task_id)
        if proc is None:
            return None
        proc.stopping = True
        if checkpoint:
            self._signal(proc, self._checkpoint)
            if await self._exited(proc, self._checkpoint_grace_s):
                return await self._finish(proc)
        self._signal(proc, signal.SIGTERM)
        if not await self._exited(proc, grace_s):
            self._signal(proc, signal.SIGKILL)
            await self._exited(proc, 30.0)
        return await self._finish(proc)

    def running(self) -> list[str]:
        return sorted(self._procs)

    def usage(self, task_id: str) -> dict[int, tuple[float, float]] | None:
        return None  # per-process GPU accounting needs NVML; the executor fills in

    def progress_reading(self, task_id: str) -> ProgressReading | None:
        proc = self._procs.get(task_id)
        if proc is None or proc.progress is None:
            return None
        units = proc.progress.read()
        return None if units is None else ProgressReading(units, time.monotonic())

    async def close(self, *, stop_tasks: bool) -> None:
        for task_id in list(self._procs):
            proc = self._procs[task_id]
            if stop_tasks:
                await self.stop(task_id, grace_s=5.0, checkpoint=False)
            else:
                if proc.waiter is not None:
                    proc.waiter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await proc.waiter
                if proc.process is not None:
                    _LEFT_RUNNING.append(proc.process)
        self._procs.clear()

    # -- restart ---------------------------------------------------------------

    def record(self, task_id: str) -> dict[str, object]:
        """What the journal keeps to re-adopt the task after an executor restart."""
        proc = self._procs[task_id]
        return {
            "pid": proc.pid,
            "status_path": str(proc.status_path),
            "started_wall": time.time() - (time.monotonic() - proc.started),
            "log_path": str(proc.log_path) if proc.log_path is not None else None,
            "log_offset": proc.log_offset,
        }

    async def adopt(self, run: TaskRun, record: dict[str, object]) -> bool:
        """Watch a task a previous executor started; False if its pid is gone with no
        status (then it is lost). A task that ended while we were away reports now."""
        pid = int(record["pid"])  # type: ignore[call-overload]
        status_path = Path(str(record["status_path"]))
        started = time.monotonic() - max(0.0, time.time() - float(record["started_wall"]))  # type: ignore[arg-type]
        if not _alive(pid, status_path) and not status_path.exists():
            return False
        log_path = record.get("log_path")
        offset = record.get("log_offset")
        proc = _Proc(
            run,
            pid,
            status_path,
            started,
            Path(log_path) if isinstance(log_path, str) else None,
            offset if isinstance(offset, int) else 0,
            progress=ProgressFile(self.progress_dir / _safe(run.task_id), run.task_id,
                                  from_end=True),
        )
        self._procs[run.task_id] = proc
        proc.waiter = asyncio.create_task(self._wait(proc))
        return True

    # -- internals -------------------------------------------------------------

    def _signal(self, proc: _Proc, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    async def _exited(self, proc: _Proc, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._done(proc):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _done(self, proc: _Proc) -> bool:
        if proc.process is not None:
            return proc.process.poll() is not None
        return not _alive(proc.pid, proc.status_path)

    async def _wait(self, proc: _Proc) -> None:
        while not self._done(proc):
            await asyncio.sleep(_POLL_S)
        if proc.stopping:
            return  # stop() reports
        info = await self._finish(proc)
        await self._on_exit(proc.run, info)

    async def _finish(self, proc: _Proc) -> ExitInfo:
        self._procs.pop(proc.run.task_id, None)
        while not self._done(proc):
            await asyncio.sleep(_POLL_S)
        if proc.progress is not None:
            proc.progress.path.unlink(missing_ok=True)
        runtime = time.monotonic() - proc.started
        status = _read_status(proc.status_path) or _status_in_log(proc.log_path, proc.log_offset)
        supervisor = f"task supervisor: {status['shim_error']}" if "shim_error" in status else ""
        if "launch_error" in status:
            return ExitInfo(None, runtime, "launch_error", str(status["launch_error"]))
        if "exit_code" in status:
            code = int(str(status["exit_code"]))
            sig = status.get("signal")
            killed = f"killed by {signal.Signals(int(str(sig))).name}" if sig else ""
            return ExitInfo(code, runtime, message=_sentences(killed, supervisor))
        # No status: the shim itself was killed (SIGKILL to the group) or vanished.
        rc = proc.process.returncode if proc.process is not None else None
        if rc is not None and rc < 0:
            killed = f"killed by {signal.Signals(-rc).name}"
            return ExitInfo(128 - rc, runtime, message=_sentences(killed, supervisor))
        if rc is not None:
            return ExitInfo(rc, runtime, message=supervisor)
        return ExitInfo(
            None, runtime, "lost", supervisor or "exit status unknown (supervisor gone)"
        )


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file only the node's user can read."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)


def _sentences(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


_LOG_TAIL_BYTES = 64 * 1024
"""How much of a task's log is searched for the shim's status line (its last words)."""


def _status_in_log(log_path: Path | None, offset: int) -> dict[str, object]:
    """The status the shim wrote to the task's log because it could not write its file
    (``shim.STATUS_LINE``): the last such line of this run's output, or {}."""
    if log_path is None:
        return {}
    try:
        with log_path.open("rb") as log_file:
            size = log_file.seek(0, os.SEEK_END)
            log_file.seek(max(offset, size - _LOG_TAIL_BYTES))
            tail = log_file.read().decode("utf-8", errors="replace")
    except OSError:
        return {}
    for line in reversed(tail.splitlines()):
        if line.startswith(STATUS_LINE):
            try:
                found = json.loads(line[len(STATUS_LINE) :])
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    return {}


def _read_status(path: Path) -> dict[str, object]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _safe(name: str) -> str:
    """A task id as a file name (ids are producer-chosen strings)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]
