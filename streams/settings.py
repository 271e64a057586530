"""Worker settings from the environment, with documented defaults.

Every knob of a scheduler worker is read here once, so the Faust app, the
CLI and the tests agree on names and defaults:

=========================  ==========================  ===================================
variable                   default                     meaning
=========================  ==========================  ===================================
KAFKA_BOOTSTRAP            127.0.0.1:9092              Kafka bootstrap servers
HETSCHED_APP_ID            hetsched-scheduler          Faust app id (consumer group, table prefix)
HETSCHED_WEB_PORT          6066                        worker web server (state JSON, metrics)
HETSCHED_WEB_HOST          127.0.0.1                   address the web server binds
HETSCHED_DATA_DIR          var/worker                  Faust data folder
HETSCHED_CELLS             1                           number of scheduling cells
HETSCHED_PARTITIONS        8                           partitions of the catalog topics (the
                                                       dead-letter topic keeps its 1)
HETSCHED_REPLICATION       1                           replication factor for created topics
HETSCHED_TICK_S            5.0                         Tick interval (wall clock, edge only)
HETSCHED_PROFILE           hetsched                    placement policy profile
HETSCHED_TOPIC_PREFIX      (empty)                     prefix of catalog topic names (isolation)
HETSCHED_COMMIT_S          0.05                        unused since the eos loop (kept for old envs)
HETSCHED_EOS_BATCH         200                         max records per transaction (per fetch)
HETSCHED_SESSION_S         10.0                        consumer session timeout (failover time)
HETSCHED_OBJECTIVES        (empty)                     objectives file (JSON/TOML): weights by
                                                       hour and load (docs/simulation.md)
HETSCHED_EVENT_LOOP        uvloop                      asyncio event loop: uvloop or asyncio
                                                       (schemas/event_loop.py)
HETSCHED_PREDICT_RUNTIMES  0 (off)                     1: a task that declares no runtime is
                                                       taken to run what its past runs ran
                                                       (docs/simulation.md, issue 31)
=========================  ==========================  ===================================
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.kafka import bootstrap_servers


def _int(name: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r}: expected an integer") from None
    if value < minimum:
        raise SystemExit(f"{name}={value}: must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise SystemExit(f"{name}={value}: must be at most {maximum}")
    return value


def flag(name: str, default: bool = False) -> bool:
    """A yes/no setting: 1/true/yes/on or 0/false/no/off (any case); empty: ``default``."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SystemExit(f"{name}={raw!r}: expected 1/true/yes/on or 0/false/no/off")


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r}: expected a number") from None
    if value <= 0:
        raise SystemExit(f"{name}={value}: must be positive")
    return value


PROCESSORS = ("router", "scheduler")
"""The worker's exactly-once processors (:mod:`streams.app`)."""


def _processors(raw: str) -> tuple[str, ...]:
    """``HETSCHED_PROCESSORS``: a comma list of :data:`PROCESSORS`; empty = both.

    Why a process may run only one: the router and the scheduler share a process's one
    event loop and (GIL) one core; run as two processes of the same app id (one
    ``router``, one ``scheduler``) each gets its own, and a long scheduler batch no
    longer delays the router's rounds (BENCHMARKS.md, service section, session 5).
    Each processor is its own consumer group, so the two processes share nothing
    but the topics; together they do what one worker does.
    """
    names = tuple(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
    if not names:
        return PROCESSORS
    unknown = [n for n in names if n not in PROCESSORS]
    if unknown:
        raise SystemExit(f"HETSCHED_PROCESSORS={raw!r}: unknown {', '.join(unknown)} "
                         f"(known: {', '.join(PROCESSORS)})")
    return names


@dataclass(frozen=True)
class WorkerSettings:
    bootstrap: str
    app_id: str
    web_port: int
    web_host: str
    data_dir: Path
    cells: int
    partitions: int
    replication: int
    tick_s: float
    profile: str
    topic_prefix: str = ""
    commit_interval_s: float = 0.05
    session_timeout_s: float = 10.0
    batch_records: int = 200
    objectives: str = ""
    processors: tuple[str, ...] = PROCESSORS
    """Which of the worker's two processors this process runs (``HETSCHED_PROCESSORS``)."""
    predict_runtimes: bool = True
    """``HETSCHED_PREDICT_RUNTIMES``: the queue's ``predict_runtimes`` (part of the
    decisions: audit replay must be run with the same setting)."""

    def topic(self, name: str) -> str:
        """The name of catalog topic ``name`` in this deployment (prefix applied)."""
        return self.topic_prefix + name

    @property
    def cell_names(self) -> list[str]:
        """``cell-0`` .. ``cell-{N-1}``."""
        return [f"cell-{i}" for i in range(self.cells)]

    @classmethod
    def from_env(cls) -> WorkerSettings:
        return cls(
            bootstrap=bootstrap_servers(),
            app_id=os.environ.get("HETSCHED_APP_ID", "hetsched-scheduler"),
            web_port=_int("HETSCHED_WEB_PORT", 6066, maximum=65535),
            web_host=os.environ.get("HETSCHED_WEB_HOST", "127.0.0.1"),
            data_dir=Path(os.environ.get("HETSCHED_DATA_DIR", "var/worker")),
            cells=_int("HETSCHED_CELLS", 1),
            partitions=_int("HETSCHED_PARTITIONS", 8),
            replication=_int("HETSCHED_REPLICATION", 1),
            tick_s=_float("HETSCHED_TICK_S", 5.0),
            profile=os.environ.get("HETSCHED_PROFILE", "hetsched"),
            topic_prefix=os.environ.get("HETSCHED_TOPIC_PREFIX", ""),
            commit_interval_s=_float("HETSCHED_COMMIT_S", 0.05),
            session_timeout_s=_float("HETSCHED_SESSION_S", 10.0),
            batch_records=_int("HETSCHED_EOS_BATCH", 200),
            objectives=os.environ.get("HETSCHED_OBJECTIVES", "").strip(),
            processors=_processors(os.environ.get("HETSCHED_PROCESSORS", "")),
            predict_runtimes=flag("HETSCHED_PREDICT_RUNTIMES", True),
        )


def read_objectives(path: str | Path) -> Any:
    """The raw objectives config (``streams.core.objectives``) of a ``.toml`` or JSON file.

    Read here, at the edge, because the core does no I/O; errors name the file.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        return tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ValueError(f"objectives file {p}: {exc}") from None
