"""What an outside reader checks of the records on hetsched's topics, with tools the
project did not write: the ``jsonschema`` package (draft 2020-12, formats checked)
against the checked-in files of ``schemas/json/``, and the topic table of
docs/api.md for which types each topic may carry.

Nothing here imports the project's decoder or models: a record the decoder would
accept but the published schemas refuse is exactly what this is meant to find.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from jsonschema import Draft202012Validator

REPO = Path(__file__).resolve().parents[2]
API_DOC = REPO / "docs" / "api.md"
SCHEMAS = REPO / "schemas" / "json"
DEADLETTER_TOPIC = "hetsched.deadletter"


def documented_types() -> dict[str, set[str]]:
    """Topic -> the schema files (``Type.vN.json``) its row of docs/api.md links."""
    text = API_DOC.read_text(encoding="utf-8")
    table = text[text.index("<!-- topic-table:begin"):text.index("<!-- topic-table:end")]
    out: dict[str, set[str]] = {}
    for row in table.splitlines():
        topic = re.match(r"\| `([^`]+)` \|", row)
        if topic:
            out[topic.group(1)] = set(re.findall(r"\(\.\./schemas/json/([\w.]+\.json)\)", row))
    return out


@functools.cache
def validator(schema_file: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / schema_file).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@dataclass
class TopicCheck:
    """Records read per topic and by schema file, and every problem found, named."""

    records: Counter[str] = field(default_factory=Counter)
    by_schema: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def check_value(topic: str, where: str, value: bytes | None, allowed: set[str],
                result: TopicCheck) -> None:
    """One record: its schema file (from its envelope's type and version, or DeadLetter
    on the dead-letter topic), listed for its topic, and valid against it."""
    result.records[topic] += 1
    if value is None:
        if topic.endswith("hetsched.node-inventory"):
            return  # a tombstone removes a node: documented for this topic alone
        result.problems.append(f"{where}: a null value")
        return
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        result.problems.append(f"{where}: not JSON ({exc})")
        return
    if topic.endswith(DEADLETTER_TOPIC):
        name = f"DeadLetter.v{doc.get('version')}.json"
    else:
        name = f"{doc.get('type')}.v{doc.get('version')}.json"
    result.by_schema[name] += 1
    if name not in allowed:
        result.problems.append(f"{where}: {name} is not among the types docs/api.md lists "
                               f"for this topic ({sorted(allowed)})")
        return
    for error in validator(name).iter_errors(doc):
        result.problems.append(f"{where}: {name}: {error.json_path}: {error.message}")


def check_topics(bootstrap: str, prefix: str = "") -> TopicCheck:
    """Every committed record of every catalog topic under ``prefix``, checked."""
    allowed = documented_types()

    async def read() -> TopicCheck:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
        finally:
            await admin.close()
        result = TopicCheck()
        for name, types in sorted(allowed.items()):
            topic = prefix + name
            if topic not in existing:
                continue
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        isolation_level="read_committed")
            await consumer.start()
            try:
                while batches := await consumer.getmany(timeout_ms=1500):
                    for records in batches.values():
                        for r in records:
                            check_value(name, f"{topic}[{r.partition}]@{r.offset}", r.value,
                                        types, result)
            finally:
                await consumer.stop()
        return result

    return asyncio.run(read())


KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
"""kafka-topics.sh's class in the jars of the embedded broker (Kafka 3.9)."""

_RETENTION_MS = {"forever": -1, "1 d": 86_400_000, "7 d": 604_800_000,
                 "30 d": 2_592_000_000}
"""The retention cells of docs/api.md's table, in Kafka's ``retention.ms``."""


@dataclass(frozen=True)
class TopicSettings:
    """What matters of a topic to a reader: partition count, cleanup policy, retention."""

    partitions: int
    cleanup: str
    retention_ms: int


def documented_settings(partitions: int) -> dict[str, TopicSettings]:
    """Topic -> its settings as docs/api.md's table states them, for a deployment whose
    ``HETSCHED_PARTITIONS`` is ``partitions`` (a "(fixed)" count holds whatever it is)."""
    text = API_DOC.read_text(encoding="utf-8")
    table = text[text.index("<!-- topic-table:begin"):text.index("<!-- topic-table:end")]
    out: dict[str, TopicSettings] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        topic = re.fullmatch(r"`([^`]+)`", cells[0])
        if not topic or not topic.group(1).startswith("hetsched."):
            continue
        count, cleanup, retention = cells[2], cells[3], cells[4]
        fixed = re.fullmatch(r"(\d+) \(fixed\)", count)
        out[topic.group(1)] = TopicSettings(
            partitions=int(fixed.group(1)) if fixed else partitions, cleanup=cleanup,
            retention_ms=_RETENTION_MS[retention])
    return out


def described_topics(bootstrap: str, prefix: str = "") -> dict[str, TopicSettings]:
    """Catalog topic name -> its settings as the Kafka admin tool (kafka-topics
    ``--describe``, from the jars) reads them back from the broker, under ``prefix``."""
    done = subprocess.run(
        ["java", "-cp", f"{KAFKA_LIBS}/*", TOPIC_COMMAND, "--bootstrap-server", bootstrap,
         "--describe", "--topic", re.escape(prefix) + r"hetsched\..*"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, TopicSettings] = {}
    for line in done.stdout.splitlines():
        head = re.match(r"Topic: (\S+)\s+TopicId: \S+\s+PartitionCount: (\d+)\s+"
                        r"ReplicationFactor: \d+\s+Configs: (\S*)", line)
        if head is None or not head.group(1).startswith(prefix):
            continue
        configs = dict(kv.split("=", 1) for kv in head.group(3).split(",") if "=" in kv)
        out[head.group(1).removeprefix(prefix)] = TopicSettings(
            partitions=int(head.group(2)), cleanup=configs.get("cleanup.policy", "?"),
            retention_ms=int(configs.get("retention.ms", "0")))
    return out
