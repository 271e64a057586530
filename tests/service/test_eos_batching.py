"""The batching pieces of the transactional loop, without a broker.

Why: per-batch work is what makes the loop fast (one state write per key per
transaction, appends awaited together), and each piece must keep the loop's
guarantees: the last write of a key wins, a failed append fails the batch, and
the aiokafka log level fix never hides DEBUG logs someone asked for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest
from eos_fakes import FakeProducer

from streams.processors.eos_tuning import quiet_client_debug_logs
from streams.processors.eos_txn import Transaction


def test_state_writes_are_coalesced_per_key_and_the_last_value_wins() -> None:
    async def go() -> FakeProducer:
        producer = FakeProducer()
        txn = Transaction(producer, "state", 3)  # type: ignore[arg-type]
        await txn.send("out", b"k", b"1")
        value = {"n": 1}
        await txn.put("a", value)
        value["n"] = 99  # mutating after put must not change what was written
        await txn.put("b", {"n": 2})
        await txn.put("a", {"n": 3})
        await txn.put("b", None)
        assert txn.records == 3  # one output + two distinct state keys
        await txn.flush()
        return producer

    producer = asyncio.run(go())
    state = [(k, v, p) for t, k, v, p in producer.sent if t == "state"]
    assert sorted(state, key=lambda r: r[0] or b"") == [
        (b"a", orjson.dumps({"n": 3}), 3), (b"b", None, 3)]
    assert [(t, k, v) for t, k, v, _ in producer.sent if t == "out"] == [("out", b"k", b"1")]


def test_flush_raises_when_an_append_failed() -> None:
    async def go() -> None:
        txn = Transaction(FakeProducer(fail_topic="out"), "state", 0)  # type: ignore[arg-type]
        await txn.send("out", b"k", b"v")
        await txn.put("a", 1)
        await txn.flush()

    with pytest.raises(RuntimeError, match="delivery failed"):
        asyncio.run(go())


@pytest.fixture
def clean_logging() -> Any:
    root, client = logging.getLogger(), logging.getLogger("aiokafka")
    saved = (root.level, list(root.handlers), client.level)
    yield root, client
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    client.setLevel(saved[2])


class SpinnerHandler(logging.Handler):
    """Stands in for faust's terminal spinner handler (matched by class name)."""

    def emit(self, record: logging.LogRecord) -> None:
        pass


def test_aiokafka_gets_the_level_shown_when_only_the_spinner_wants_debug(
        clean_logging: Any) -> None:
    root, client = clean_logging
    shown = logging.StreamHandler()
    shown.setLevel(logging.WARNING)
    root.handlers[:] = [shown, SpinnerHandler(logging.DEBUG)]
    root.setLevel(logging.DEBUG)
    client.setLevel(logging.NOTSET)
    quiet_client_debug_logs()
    assert client.level == logging.WARNING
    assert not client.isEnabledFor(logging.DEBUG)


def test_debug_logging_asked_for_is_left_alone(clean_logging: Any) -> None:
    root, client = clean_logging
    root.handlers[:] = [logging.StreamHandler()]
    root.setLevel(logging.DEBUG)
    client.setLevel(logging.NOTSET)
    quiet_client_debug_logs()
    assert client.level == logging.NOTSET
    assert client.isEnabledFor(logging.DEBUG)


def test_an_explicit_aiokafka_level_is_kept(clean_logging: Any) -> None:
    root, client = clean_logging
    shown = logging.StreamHandler()
    shown.setLevel(logging.ERROR)
    root.handlers[:] = [shown]
    root.setLevel(logging.DEBUG)
    client.setLevel(logging.INFO)
    quiet_client_debug_logs()
    assert client.level == logging.INFO
