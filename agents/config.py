"""Node configuration: one validated model, from defaults, a file and flags.

Precedence, lowest first: the defaults below (each documented where it is
declared), a YAML or JSON file (``--config``), then command-line flags
(dedicated ones such as ``--node-id``, and ``--set section.key=value`` for
anything else). ``hetsched-node config`` prints the effective result, so an
operator can see every knob and its value without reading code.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.sandbox import SandboxPolicy, executor_owned
from agents.triggers import TriggerConfig
from schemas.command_line import yaml_problem


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeSection(_Section):
    """Who this node is, as the scheduler will know it."""

    node_id: str = Field(default_factory=socket.gethostname)
    """Unique node id; the hostname unless set."""
    cell: str | None = None
    """Requested scheduling cell; None lets the scheduler's router choose. When
    set, the executor reads only that cell's partition of the decisions topic."""
    pool: str | None = None
    rack: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    cpu_milli: int | None = Field(default=None, gt=0)
    """Allocatable CPU; all cores of the machine unless set."""
    memory_mib: int | None = Field(default=None, gt=0)
    """Allocatable host memory; all of the machine's unless set."""


class TelemetrySection(_Section):
    """How often GPUs are read. Reading is cheap; publishing is what triggers limit."""

    interval_s: float = Field(default=1.0, gt=0)
    """Sampling period. NVML's utilisation counter averages over up to 1 s, so faster
    sampling adds no information."""


class SimulationSection(_Section):
    """Simulated GPUs instead of NVML (``--simulate``)."""

    gpus: str | None = None
    """``MODEL[xCOUNT]`` from the GPU catalog, e.g. ``A100x8``; None = real NVML GPUs."""
    time_scale: float = Field(default=1.0, gt=0)
    """Simulated seconds per wall second: tasks progress and trace curves replay this
    much faster (60 replays a trace hour in a minute)."""
    faults: list[str] = Field(default_factory=list)
    """Fault injections, e.g. ``gpu-fail:1@30``, ``throttle:0@10+60``, ``node-loss@120``,
    ``xid:0:79@20``, ``foreign-mem:0:8000@5`` (times in wall seconds after start; see
    agents/telemetry/faults.py)."""
    reference_model: str = "V100M32"
    """GPU on which a simulated task's ``duration_s`` is measured."""
    seed: int = 0
    """Varies which trace curve each GPU and task replays; same seed, same run."""


class SandboxSection(_Section):
    """Confinement of ``process`` tasks (see agents/sandbox.py). Absent = tasks run with
    the executor's environment minus node secrets, as ``executor.run_as`` when the node
    runs as root: dev and tests only."""

    user: str | None = None
    """Unprivileged account tasks run as (never root); None = ``executor.run_as`` when
    the node runs as root, the node's own user otherwise."""
    allowed_commands: list[str] = Field(default_factory=list)
    """Exact argv[0] values a task may run (bare names on the sandbox PATH, or
    absolute paths). Empty: no process task may run."""
    allowed_images: list[str] = Field(default_factory=list)
    """Container images (exact ``repo:tag`` or a ``repo/`` prefix)."""
    allowed_env: list[str] | None = None
    """Variable names a task may declare; None allows any name except those that choose
    which code runs (``PATH``, ``HOME``, ``BASH_ENV``, ``LD_*``, ``PYTHON*``), which a
    task may set only when named here. Variables the executor sets itself
    (``CUDA_VISIBLE_DEVICES``, ``CUDA_MPS_*``, ``HETSCHED_TASK_ID``, ...) cannot be
    named: the executor's value is the placement."""
    workdir_root: Path = Path("/var/lib/hetsched/tasks")
    """Tasks run in ``<root>/<task_id>`` (or a declared workdir under it)."""
    cpu_time_per_core_s: int = Field(default=24 * 3600, gt=0)
    memory_headroom_mib: int = Field(default=512, ge=0)
    default_memory_mib: int | None = Field(default=None, gt=0)
    max_open_files: int = Field(default=4096, gt=0)

    @field_validator("allowed_env")
    @classmethod
    def _no_executor_variables(cls, names: list[str] | None) -> list[str] | None:
        owned = [n for n in names or () if executor_owned(n)]
        if owned:
            raise ValueError(
                f"{', '.join(owned)}: set by the executor itself (GPU placement, MPS "
                "limits, task identity); a task cannot be allowed to set it"
            )
        return names

    def policy(self) -> SandboxPolicy:
        return SandboxPolicy(
            user=self.user,
            allowed_commands=tuple(self.allowed_commands),
            allowed_images=tuple(self.allowed_images),
            allowed_env=tuple(self.allowed_env) if self.allowed_env is not None else None,
            workdir_root=self.workdir_root,
            cpu_time_per_core_s=self.cpu_time_per_core_s,
            memory_headroom_mib=self.memory_headroom_mib,
            default_memory_mib=self.default_memory_mib,
            max_open_files=self.max_open_files,
        )


class ExecutorSection(_Section):
    """How decisions become running tasks."""

    state_dir: Path = Path("var/hetsched-node")
    """Journal of applied decisions and consumer positions (survives restarts), and
    task logs under ``logs/``. Use a persistent path such as /var/lib/hetsched-node."""
    grace_s: float = Field(default=30.0, ge=0)
    """SIGTERM -> SIGKILL grace when stopping a task (a decision's own grace wins)."""
    checkpoint_signal: str = "SIGUSR1"
    """Sent before a resize or migration so the task can checkpoint."""
    checkpoint_grace_s: float = Field(default=10.0, ge=0)
    """Wait after the checkpoint signal before stopping the task."""
    usage_interval_s: float = Field(default=30.0, gt=0)
    """Period of ``TaskUsage`` reports for running tasks."""
    overuse_margin_pct: float = Field(default=10.0, ge=0)
    """A task whose own processes hold more GPU memory than it booked by more than this
    (percent of the booking) gets a ``TaskOverUse`` each usage window. 10 matches the
    scheduler's tolerance (``overuse_tolerance``), so both sides call the same thing
    over-use."""
    start_at: Literal["end", "beginning"] = "end"
    """Where a first start (no journal yet) begins reading decisions. ``end``: from the
    node's start (a new node has no past decisions, but the scheduler may place work on
    it as soon as it registers, before the feed is ready); ``beginning`` re-reads the
    topic (safe: idempotent)."""
    trusted_schedulers: dict[str, Path] = Field(default_factory=dict)
    """Principal -> HMAC key file (schemas/signing.py) of the schedulers whose signed
    decisions this node runs. Empty: any decision on the topic is trusted (Kafka ACLs
    alone decide who may write it). Set it in production: a decision runs commands."""
    sandbox: SandboxSection | None = None
    """Task confinement and the node's policy on what decisions may run (allow-listed
    commands, images, env names; unprivileged user; rlimits from the booking). Set it
    on every production node."""
    run_as: str = Field(default="nobody", min_length=1)
    """Account process tasks run as when the node runs as root and ``sandbox.user`` is
    unset (agents/task_user.py): a tenant's command never runs as root by default.
    ``nobody`` exists on every Debian/Ubuntu machine and CI image; a name that does not
    exist stops the node at start. ``root`` is the one opt-out: tasks run as root (a
    development machine only). Ignored when the node itself is not root: it cannot
    switch users, so its tasks run as its own user."""
    on_exit: Literal["leave", "stop"] = "leave"
    """What a stopping executor does to running process tasks. ``leave`` lets them run
    on and re-adopts them on restart (like a kubelet restart); ``stop`` stops them."""


class KafkaSection(_Section):
    """Where the events go."""

    bootstrap: str | None = None
    """host:port list; ``KAFKA_BOOTSTRAP`` or the embedded broker when unset."""
    topic_prefix: str = Field(default_factory=lambda: os.environ.get("HETSCHED_TOPIC_PREFIX", ""))
    """Prepended to every catalog topic name (isolates tests and demos); defaults to
    ``HETSCHED_TOPIC_PREFIX``, the variable the scheduler's deployment reads too."""
    create_topics: bool = True
    """Create missing catalog topics at start (idempotent). On a production cluster the
    scheduler's deployment usually owns topics: set false, or raise the replication."""
    replication_factor: int = Field(default=1, ge=1)
    """Replication of topics this node creates: 1 suits the local broker, use 3 in
    production. Security (TLS/SASL) comes from the KAFKA_* environment, see
    docs/security.md."""


class NodeConfig(_Section):
    """Everything ``hetsched-node`` reads. See each section's fields for defaults."""

    node: NodeSection = Field(default_factory=NodeSection)
    telemetry: TelemetrySection = TelemetrySection()
    triggers: TriggerConfig = TriggerConfig()
    simulate: SimulationSection = SimulationSection()
    executor: ExecutorSection = ExecutorSection()
    kafka: KafkaSection = KafkaSection()


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML (or JSON, a subset of YAML) config file into a dict."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML/JSON: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping")
    return data


def parse_set(item: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (['a', 'b', 'c'], value parsed as a YAML scalar or list)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set expects section.key=value, got {item!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {item!r}: the value is not YAML: {yaml_problem(exc)}") from None
    return key.strip().split("."), value


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge mappings; values of ``override`` win."""
    out: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    node: Any = value
    for part in reversed(path):
        node = {part: node}
    return node


def build_config(
    file: str | os.PathLike[str] | None = None,
    sets: Iterable[str] = (),
    overrides: Mapping[str, Any] | None = None,
) -> NodeConfig:
    """Defaults < file < ``--set`` items < dedicated flags (``overrides``, nested dict).

    Everything is merged onto the dumped defaults, so setting one field of a nested
    setting (``triggers.gpu_util_pct.smoothing_s``) keeps its siblings' defaults.
    """
    data: dict[str, Any] = NodeConfig().model_dump()
    if file:
        data = merge(data, load_file(file))
    for item in sets:
        path, value = parse_set(item)
        data = merge(data, _nest(path, value))
    if overrides:
        data = merge(data, overrides)
    return NodeConfig.model_validate(data)


def _absolute(value: Any, base: Path) -> Any:
    """``value`` with every relative :class:`Path` in it (nested settings, mappings,
    lists) joined onto ``base``; everything else unchanged."""
    if isinstance(value, Path):
        return value if value.is_absolute() else Path(os.path.normpath(base / value))
    if isinstance(value, BaseModel):
        changed = {
            name: _absolute(getattr(value, name), base) for name in type(value).model_fields
        }
        return value.model_copy(update=changed)
    if isinstance(value, dict):
        return {key: _absolute(item, base) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_absolute(item, base) for item in value)
    return value


def with_absolute_paths(config: NodeConfig, base: Path) -> NodeConfig:
    """``config`` with every path setting (state dir, sandbox workdir root, key files,
    any path added later) made absolute against ``base``, the directory the node was
    started from.

    Why: a task runs in the node's own folder, not where the node was started, and its
    supervisor (agents/backends/shim.py) writes the exit status to a path the node hands
    it. A relative default (``var/hetsched-node``) meant a file that did not exist from
    there, and every process task failed with an empty message. Resolved once at start,
    a path means the same file to the node and to everything it starts.
    """
    resolved = _absolute(config, base)
    assert isinstance(resolved, NodeConfig)
    return resolved


def dump(config: NodeConfig) -> str:
    """The effective config as YAML (what ``hetsched-node config`` prints)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
