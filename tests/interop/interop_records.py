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
