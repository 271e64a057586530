"""How an outside client reaches a running demo: its topics and ready-to-paste commands.

Why: each demo run writes to its own topics (``demo-<run>.hetsched.*``) so runs
never mix and a report reads one run only. A client that follows docs/api.md word
for word writes to ``hetsched.tasks``, which no worker of the demo reads, and
nothing tells it so. The demo's banner prints these lines instead: the prefix, and
a submit and a watch command for kcat and for the console tools of the Kafka jars
the embedded broker runs on (docs/api.md, "Reaching a running demo").
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from schemas.topics import DECISIONS, TASKS

KAFKA_JARS = ".cache/kafka/libs"
"""Where ``docker/kafka/kafka.sh fetch`` puts the Kafka jars, from the repository root."""

CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
"""The console tools' main classes in the Kafka 3.9 jars (the consumer moved to the
tools module in 3.7; ``bin/kafka-console-*.sh`` of a distribution run the same)."""


def kafka_jars(environ: dict[str, str] | None = None) -> str:
    """The Kafka jars' folder as a path that works from any directory: the cache
    ``docker/kafka/kafka.sh`` fills (``HETSCHED_KAFKA_CACHE``, else the repository's
    ``.cache/kafka``) when it exists, else the repository-relative default."""
    env = os.environ if environ is None else environ
    cache = env.get("HETSCHED_KAFKA_CACHE") or str(Path(__file__).resolve().parents[2]
                                                   / ".cache" / "kafka")
    libs = Path(cache) / "libs"
    return str(libs) if libs.is_dir() else KAFKA_JARS


def client_commands(prefix: str, bootstrap: str, jars: Path | str = KAFKA_JARS,
                    task_id: str = "train-43") -> list[str]:
    """The banner's lines: which topics this run uses, and how to submit ``task.json``
    (one TaskSubmitted envelope, docs/api.md) and watch the decisions, with kcat and
    with the console tools. Keys keep the Java client's murmur2 partitioner, so a
    task lands in the partition the worker expects; the watch reads committed
    records only, as the scheduler writes its decisions in transactions."""
    tasks, decisions = prefix + TASKS, prefix + DECISIONS
    b, t, d, k = (shlex.quote(x) for x in (bootstrap, tasks, decisions, task_id))
    cp = shlex.quote(f"{jars}/*")
    return [
        f"outside clients: this run's topics are {prefix}hetsched.* (not hetsched.*); "
        f"submit docs/api.md's task.json (keyed by its task_id):",
        f"  kcat -P -b {b} -t {t} -X partitioner=murmur2_random -k {k} task.json",
        f"  printf '%s|%s\\n' {k} \"$(cat task.json)\" | java -cp {cp} {CONSOLE_PRODUCER} "
        f"--bootstrap-server {b} --topic {t} --property parse.key=true "
        f"--property 'key.separator=|'",
        "watch this run's decisions (from its start):",
        f"  kcat -C -b {b} -t {d} -X isolation.level=read_committed -o beginning "
        f"-f '%k %s\\n'",
        f"  java -cp {cp} {CONSOLE_CONSUMER} --bootstrap-server {b} --topic {d} "
        f"--isolation-level read_committed --from-beginning --property print.key=true",
    ]
