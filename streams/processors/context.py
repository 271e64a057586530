"""What every processor of a worker shares: app, settings, topic names, tables, sender.

Built once by :mod:`streams.app` and passed to the processor factories, so the
processors are plain functions of their inputs instead of importing the app
module (no import cycles, and each processor can be read alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import faust
from aiokafka.partitioner import murmur2

from schemas.deadletter import DeadLetter
from schemas.topics import BY_NAME, DEADLETTER, DECISIONS, INPUT_LOG, TopicSpec
from streams.metrics import DEAD_LETTERS
from streams.processors.txn import TransactionalSender
from streams.settings import WorkerSettings


@dataclass
class Tables:
    node_to_cell: Any
    task_to_cell: Any
    cellnode_to_record: Any
    celltask_to_record: Any
    cell_to_meta: Any
    cell_to_summary: Any
    source_to_offset: Any


@dataclass
class Context:
    app: faust.App
    settings: WorkerSettings
    tables: Tables
    sender: TransactionalSender
    local: dict[str, Any] = field(default_factory=dict)
    identity: Any = None
    """The security configuration (``streams.security.identity.Identity``), None = unsecured."""
    signer: Any = None
    """Signs decisions (``schemas.signing.Signer``), None = unsigned."""
    """Per-worker scratch (not state): e.g. GPUs routed here not yet in the summaries."""

    @property
    def input_log(self) -> str:
        return self.settings.topic(INPUT_LOG)

    @property
    def decisions(self) -> str:
        return self.settings.topic(DECISIONS)

    @property
    def deadletter(self) -> str:
        return self.settings.topic(DEADLETTER)

    def spec_of(self, topic: str) -> TopicSpec | None:
        """The catalog entry of a (prefixed) topic name."""
        prefix = self.settings.topic_prefix
        return BY_NAME.get(topic[len(prefix):] if topic.startswith(prefix) else topic)

    def cell_partition(self, cell: str) -> int:
        """The input-log partition of ``cell`` (the Java client's murmur2 partitioner)."""
        return (murmur2(cell.encode()) & 0x7FFFFFFF) % self.settings.partitions

    def owned_cells(self) -> list[str]:
        """Cells whose input-log partition this worker processes now."""
        actives = self.app.assignor.assigned_actives()
        mine = {tp.partition for tp in actives if tp.topic == self.input_log}
        return [c for c in self.settings.cell_names if self.cell_partition(c) in mine]

    async def dead_letter(self, event: faust.types.EventT, letter: DeadLetter) -> None:
        """Forward a refused record, with its position, inside the event's transaction."""
        msg = event.message
        import base64

        from schemas.codec import encode_deadletter

        letter = letter.model_copy(update={
            "source_topic": msg.topic, "partition": msg.partition, "offset": msg.offset,
            "timestamp_ms": int(msg.timestamp * 1000) if msg.timestamp else None,
            "key_b64": base64.b64encode(msg.key).decode() if msg.key else None,
        })
        DEAD_LETTERS.labels(letter.reason).inc()
        await self.sender.send(event, self.deadletter, msg.topic.encode(),
                               encode_deadletter(letter))
