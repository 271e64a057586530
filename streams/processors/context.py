"""What every processor of a worker shares: settings, topic names, summaries, ownership.

Built once by :mod:`streams.app` and passed to the processor handlers, so the
processors are plain objects of their inputs instead of importing the app
module (no import cycles, and each processor can be read alone).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.partitioner import murmur2

from schemas.codec import encode_deadletter
from schemas.deadletter import DeadLetter
from schemas.topics import BY_NAME, DEADLETTER, DECISIONS, INPUT_LOG, TopicSpec
from streams.metrics import DEAD_LETTERS
from streams.processors.eos_txn import Transaction
from streams.processors.ingest import RoutedTelemetry
from streams.processors.summaries import SummaryView
from streams.settings import WorkerSettings


@dataclass
class Context:
    settings: WorkerSettings
    summaries: SummaryView
    owned_partitions: Callable[[], set[int]] = set
    """Input-log partitions the scheduler processor owns now (set by :mod:`streams.app`)."""
    local: dict[str, Any] = field(default_factory=dict)
    """Per-worker scratch (not state): e.g. GPUs routed here not yet in the summaries."""
    identity: Any = None
    """The security configuration (``streams.security.identity.Identity``), None = unsecured."""
    signer: Any = None
    """Signs decisions (``schemas.signing.Signer``), None = unsigned."""
    routed: RoutedTelemetry = field(default_factory=RoutedTelemetry)
    """Telemetry envelopes the router appended, for the scheduler of the same worker to
    take instead of validating the record again (``ingest.RoutedTelemetry``)."""

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
        mine = self.owned_partitions()
        return [c for c in self.settings.cell_names if self.cell_partition(c) in mine]

    async def reject(self, txn: Transaction, msg: Any, error: str) -> None:
        """Dead-letter a record whose processing kept failing (``internal_error``)."""
        letter = DeadLetter(reason="internal_error", message=f"processing failed: {error}",
                            original_b64=base64.b64encode(msg.value or b"").decode())
        await self.dead_letter(txn, msg, letter)

    async def dead_letter(self, txn: Transaction, msg: Any, letter: DeadLetter) -> None:
        """Forward a refused record, with its position, inside the batch's transaction."""
        letter = letter.model_copy(update={
            "source_topic": msg.topic, "partition": msg.partition, "offset": msg.offset,
            "timestamp_ms": msg.timestamp if msg.timestamp else None,
            "key_b64": base64.b64encode(msg.key).decode() if msg.key else None,
        })
        DEAD_LETTERS.labels(letter.reason).inc()
        await txn.send(self.deadletter, msg.topic.encode(), encode_deadletter(letter))
