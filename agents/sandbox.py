"""Executor sandbox: what a decision may ask of this node, and how its task is launched.

A decision on ``hetsched.decisions`` becomes a process on this machine, so the
executor checks it against the node's own policy and inventory *before*
anything runs (:func:`check_decision`, pure: a reason string or None), and
launches what passes with as little privilege as the task needs
(:func:`launch_options`, keyword arguments for :class:`subprocess.Popen`):

* as the configured unprivileged user and its group (never root), with no
  supplementary groups;
* in its own session and process group (signals reach all its helpers);
* in its own working directory under the policy's root;
* with an environment scrubbed to a minimal base (``PATH``, ``LANG``,
  ``HOME`` of the task dir) plus what the task declared and the executor adds
  (GPU visibility, task ids) -- nothing of the executor's, in particular no
  Kafka credentials;
* with a declared environment that cannot choose the code that runs nor undo
  the placement (:func:`env_refusal`, with or without a sandbox): ``PATH``,
  ``HOME``, ``BASH_ENV``, ``LD_*`` and ``PYTHON*`` only when ``allowed_env``
  names them, and never a variable the executor sets itself. The command's
  bare name is resolved on the executor's own PATH before the task's
  environment applies (agents/backends/process.py), so even an allowed
  ``PATH`` changes only what the task's own children find;
* with RLIMIT_CPU, RLIMIT_AS and RLIMIT_NOFILE from its booking
  (:func:`limits_for`).

A refused decision runs nothing; the executor reports ``TaskFailed`` with the
reason. Policy defaults are in :class:`SandboxPolicy`.
"""

from __future__ import annotations

import math
import os
import pwd
import resource
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
BASE_ENV_NAMES = ("PATH", "LANG", "LC_ALL", "TZ")
"""Variables taken from the executor's environment; everything else is dropped."""


CODE_CHOOSING_ENV_NAMES = frozenset({"PATH", "HOME", "BASH_ENV"})
CODE_CHOOSING_ENV_PREFIXES = ("LD_", "PYTHON")
"""Variables that decide which file a command name runs (``PATH``) or what code an
allowed program loads (the dynamic loader's ``LD_PRELOAD``/``LD_LIBRARY_PATH``/...,
Python's ``PYTHONPATH``/``PYTHONSTARTUP``/..., the user site-packages under ``HOME``,
bash's ``BASH_ENV``): with one of them an allow-listed ``python`` runs the task's
own code. A task may set one only when the operator names it in ``allowed_env``."""
EXECUTOR_ENV_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HETSCHED_TASK_ID",
        "HETSCHED_DECISION_ID",
        "HETSCHED_NODE_ID",
        "HETSCHED_GPU_SHARE_MILLI",
        "HETSCHED_GPU_MEMORY_MIB",
        "HETSCHED_PROGRESS_FILE",  # agents.progress: the node reads what the task writes
    }
)
EXECUTOR_ENV_PREFIXES = ("CUDA_MPS_",)
"""Variables the executor sets itself (GPU placement, MPS share and memory limit, task
identity; ``agents.backends.process.added_environment``), and the rest of the MPS
client's settings (another pipe directory would leave the MPS limits behind). No task
may set them, whatever ``allowed_env`` says: the executor's value is the placement."""


def executor_owned(name: str) -> bool:
    """Is ``name`` a variable only the executor sets?"""
    return name in EXECUTOR_ENV_NAMES or name.startswith(EXECUTOR_ENV_PREFIXES)


def chooses_code(name: str) -> bool:
    """Can ``name`` change which program runs or what code it loads?"""
    return name in CODE_CHOOSING_ENV_NAMES or name.startswith(CODE_CHOOSING_ENV_PREFIXES)


def env_refusal(declared: Iterable[str], allowed: Iterable[str] | None) -> str | None:
    """Why a task may not declare these environment variable names (None: it may).

    ``allowed`` is the node's ``allowed_env``: None allows any name but those that
    choose code (:func:`chooses_code`); a list allows exactly its names. A variable the
    executor sets (:func:`executor_owned`) is refused either way. The reason names each
    variable, so the operator and the submitter see what to change.
    """
    names = sorted(set(declared))
    permitted = set(allowed) if allowed is not None else None
    owned = [n for n in names if executor_owned(n)]
    if owned:
        return (
            f"environment variable {', '.join(owned)}: set by the executor itself "
            "(GPU placement, MPS limits, task identity); a task cannot set it"
        )
    risky = [n for n in names if chooses_code(n) and (permitted is None or n not in permitted)]
    if risky:
        return (
            f"environment variable {', '.join(risky)}: it can change which program runs "
            "or what code it loads; a task may set it only where the node's "
            "executor.sandbox.allowed_env names it"
        )
    if permitted is not None:
        extra = [n for n in names if n not in permitted]
        if extra:
            return f"environment variables not allowed here: {', '.join(extra)}"
    return None


@dataclass(frozen=True)
class SandboxPolicy:
    """What this node lets decisions run. Loaded from the node configuration."""

    user: str | None = None
    """Unprivileged account tasks run as; None runs as the executor (tests, dev only)."""
    allowed_commands: tuple[str, ...] = ()
    """Executables a ``process`` task may start, matched exactly against argv[0]:
    a bare name (looked up on the executor's PATH) or an absolute path. Empty: none."""
    allowed_images: tuple[str, ...] = ()
    """Container images (exact ``repo:tag``, or a ``repo/`` prefix ending in ``/``)."""
    allowed_env: tuple[str, ...] | None = None
    """Variable names a task may declare; None allows any name except those that
    choose code (``PATH``, ``LD_*``, ``PYTHON*``, ...: :func:`env_refusal`)."""
    workdir_root: Path = Path("/var/lib/hetsched/tasks")
    """Tasks run in ``<root>/<task_id>`` or in a declared workdir under the root."""
    cpu_time_per_core_s: int = 24 * 3600
    """RLIMIT_CPU per booked core (a booking of 0 counts as one core)."""
    memory_headroom_mib: int = 512
    """Added to the booked memory for RLIMIT_AS (interpreters, shared libraries)."""
    default_memory_mib: int | None = None
    """RLIMIT_AS for tasks that booked no memory; None leaves it unlimited."""
    max_open_files: int = 4096


@dataclass(frozen=True)
class NodeInventory:
    """This node as registered: its id and its GPUs by index."""

    node_id: str
    gpu_memory_mib: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def from_gpus(cls, node_id: str, gpus: Iterable[Any]) -> NodeInventory:
        """From ``NodeRegistered.gpus`` (objects with ``index`` and ``memory_mib``)."""
        return cls(node_id, {int(g.index): int(g.memory_mib) for g in gpus})


@dataclass(frozen=True)
class Limits:
    """Resource limits of one task process."""

    cpu_time_s: int
    address_space_bytes: int | None
    open_files: int


def _command_allowed(argv: list[str], allowed: Iterable[str]) -> bool:
    # Exact match only: a bare name is then found on the executor's own PATH, before
    # the task's environment applies (process backend), so a PATH the task declares
    # cannot redirect it; an absolute path is that file; "/tmp/python" never passes
    # for "python".
    exe = argv[0] if argv else ""
    return bool(exe) and exe in set(allowed)


def _image_allowed(image: str | None, allowed: Iterable[str]) -> bool:
    return image is not None and any(
        image == entry or (entry.endswith("/") and image.startswith(entry)) for entry in allowed
    )


def check_decision(decision: Any, policy: SandboxPolicy, inventory: NodeInventory) -> str | None:
    """Why this node must refuse ``decision`` (a decision payload), or None to run it.

    Checks, in order: the node id, the GPU indices (known, not repeated), each
    share (1..1000) and memory reservation (within the GPU), then for decisions
    that start something the executor spec: the command or image against the
    allow-lists, the declared environment names and the working directory.
    """
    node_id = getattr(decision, "node_id", None)
    if node_id != inventory.node_id:
        return f"decision is for node {node_id!r}, this is {inventory.node_id!r}"
    seen: set[int] = set()
    for gpu in getattr(decision, "gpus", None) or ():
        if gpu.index not in inventory.gpu_memory_mib:
            return f"GPU index {gpu.index} is not in this node's inventory"
        if gpu.index in seen:
            return f"GPU index {gpu.index} is assigned twice"
        seen.add(gpu.index)
        if not 0 < gpu.share_milli <= 1000:
            return f"GPU {gpu.index}: share {gpu.share_milli} outside 1..1000"
        if gpu.memory_mib is not None and gpu.memory_mib > inventory.gpu_memory_mib[gpu.index]:
            return (
                f"GPU {gpu.index}: {gpu.memory_mib} MiB reserved, the GPU has "
                f"{inventory.gpu_memory_mib[gpu.index]} MiB"
            )
    spec = getattr(decision, "executor", None)
    if spec is None:
        return None
    if spec.kind == "process" and not _command_allowed(spec.argv, policy.allowed_commands):
        return f"command {spec.argv[0] if spec.argv else ''!r} is not on this node's allow-list"
    if spec.kind == "container" and not _image_allowed(spec.image, policy.allowed_images):
        return f"image {spec.image!r} is not on this node's allow-list"
    env_problem = env_refusal(spec.env, policy.allowed_env)
    if env_problem is not None:
        return env_problem
    return workdir_refusal(getattr(decision, "task_id", None), spec.workdir, policy)


def workdir_refusal(task_id: str | None, spec_workdir: str | None,
                    policy: SandboxPolicy) -> str | None:
    """Why the task may not run where it would (None: in a folder strictly inside the
    root). Judged where the folder resolves, links followed: a declared ``../x``, a
    link in the root pointing out, and a task id that is ``..`` or the name of such a
    link (the folder of a task without a workdir is ``<root>/<task id>``) all land
    outside. The root itself is refused too: it is every task's parent, and a task
    running there (as the sandbox user, who would then own it) could plant those links
    for the tasks after it. ``task_id`` None (a caller without one): only a declared
    workdir is judged."""
    if not spec_workdir and task_id is None:
        return None
    root = policy.workdir_root.resolve()
    wanted = task_workdir(task_id or "", spec_workdir, policy)
    if root in wanted.parents:
        return None
    what = f"workdir {spec_workdir!r}" if spec_workdir else f"task id {task_id!r} as workdir"
    return f"{what} is outside the task folders of {policy.workdir_root}"


def limits_for(cpu_milli: int, memory_mib: int, policy: SandboxPolicy) -> Limits:
    """The task's limits from its booking (``cpu_milli``, ``memory_mib``)."""
    cores = max(1, math.ceil(cpu_milli / 1000))
    booked = memory_mib or policy.default_memory_mib
    address_space = (booked + policy.memory_headroom_mib) * MIB if booked else None
    return Limits(cores * policy.cpu_time_per_core_s, address_space, policy.max_open_files)


def task_workdir(task_id: str, spec_workdir: str | None, policy: SandboxPolicy) -> Path:
    """``<root>/<workdir>`` when declared, else ``<root>/<task_id>``, resolved (checked
    by :func:`workdir_refusal`)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
    return (policy.workdir_root / (spec_workdir or safe)).resolve()


def scrubbed_env(
    declared: Mapping[str, str], added: Mapping[str, str], home: Path,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The minimal base, the task's declared variables, then the executor's additions."""
    source = os.environ if base is None else base
    env = {k: source[k] for k in BASE_ENV_NAMES if k in source}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = str(home)
    env.update(declared)
    env.update(added)
    return env


def _preexec(limits: Limits) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        if limits.address_space_bytes is not None:
            resource.setrlimit(
                resource.RLIMIT_AS, (limits.address_space_bytes, limits.address_space_bytes)
            )
        os.umask(0o077)

    return apply


def launch_options(
    *,
    task_id: str,
    spec_workdir: str | None,
    declared_env: Mapping[str, str],
    added_env: Mapping[str, str],
    limits: Limits,
    policy: SandboxPolicy,
) -> dict[str, Any]:
    """Keyword arguments for ``subprocess.Popen`` that start the task sandboxed.

    Creates the working directory (owned by the task user). Refuses to run a
    task as root when a user is configured to be root, and anywhere but a folder
    inside the root (:func:`workdir_refusal`, ``PermissionError``).
    """
    problem = workdir_refusal(task_id, spec_workdir, policy)
    if problem is not None:  # checked with the decision; again here, where it is made
        raise PermissionError(problem)
    cwd = task_workdir(task_id, spec_workdir, policy)
    cwd.mkdir(parents=True, exist_ok=True, mode=0o700)
    options: dict[str, Any] = {
        "cwd": str(cwd),
        "env": scrubbed_env(declared_env, added_env, cwd),
        "start_new_session": True,
        "preexec_fn": _preexec(limits),
        "close_fds": True,
    }
    if policy.user is not None:
        account = pwd.getpwnam(policy.user)
        if account.pw_uid == 0:
            raise PermissionError(f"sandbox user {policy.user!r} is root")
        os.chown(cwd, account.pw_uid, account.pw_gid)
        options.update(user=account.pw_uid, group=account.pw_gid, extra_groups=[])
    return options
