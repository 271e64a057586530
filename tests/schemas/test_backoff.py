"""The shared retry policy (schemas/backoff.py) and the Kafka health state (schemas/kafka.py)."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from aiokafka.errors import KafkaConnectionError
from hypothesis import given
from hypothesis import strategies as st

from schemas.backoff import Backoff, LogThrottle, backoff_delay, describe, retry
from schemas.kafka import KafkaHealth, is_unreachable, unreachable_message


@given(attempt=st.integers(0, 10_000), u=st.floats(0, 1, exclude_max=True),
       initial=st.floats(0.01, 5), cap=st.floats(5, 120), jitter=st.floats(0, 0.99))
def test_delay_is_positive_capped_and_within_the_jitter_band(
        attempt: int, u: float, initial: float, cap: float, jitter: float) -> None:
    d = backoff_delay(attempt, initial_s=initial, factor=2.0, max_s=cap, jitter=jitter, u=u)
    base = min(cap, initial * 2.0 ** min(attempt, 64))
    assert 0 < d <= cap
    assert (1 - jitter) * base - 1e-9 <= d <= base + 1e-9


def test_delays_grow_exponentially_to_the_cap_and_reset() -> None:
    b = Backoff(initial_s=0.5, max_s=10, jitter=0.0)
    assert [b.next() for _ in range(8)] == [0.5, 1, 2, 4, 8, 10, 10, 10]
    assert b.attempts == 8
    b.reset()
    assert b.next() == 0.5


def test_jitter_is_seeded_and_spreads_processes_apart() -> None:
    one = [Backoff(rng=random.Random(7)).next() for _ in range(1)]
    again = [Backoff(rng=random.Random(7)).next() for _ in range(1)]
    assert one == again
    firsts = {round(Backoff(rng=random.Random(seed)).next(), 6) for seed in range(50)}
    assert len(firsts) > 40  # 50 restarted nodes do not retry in lock step


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETSCHED_KAFKA_RETRY_MAX_S", "2")
    monkeypatch.setenv("HETSCHED_KAFKA_RETRY_INITIAL_S", "5")
    b = Backoff.from_env()
    assert (b.initial_s, b.max_s) == (2, 2)
    monkeypatch.setenv("HETSCHED_KAFKA_RETRY_MAX_S", "soon")
    with pytest.raises(SystemExit, match="HETSCHED_KAFKA_RETRY_MAX_S"):
        Backoff.from_env()


def test_retry_sleeps_the_backoff_logs_each_attempt_and_returns(
        caplog: pytest.LogCaptureFixture) -> None:
    calls, slept, errors = [], [], []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 1)]")
        return "up"

    async def sleep(s: float) -> None:
        slept.append(s)

    caplog.set_level(logging.WARNING)
    got = asyncio.run(retry(flaky, what="kafka at 127.0.0.1:1", log=logging.getLogger("t"),
                            backoff=Backoff(jitter=0.0), on_error=errors.append, sleep=sleep))
    assert got == "up"
    assert slept == [0.5, 1.0, 2.0]
    assert len(errors) == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all("kafka at 127.0.0.1:1" in line for line in lines)
    assert "attempt 3 failed (KafkaConnectionError: Unable to bootstrap" in lines[2]


def test_retry_lets_other_errors_through() -> None:
    async def refused() -> None:
        raise PermissionError("SASL authentication failed")

    with pytest.raises(PermissionError):
        asyncio.run(retry(refused, what="x", log=logging.getLogger("t"), backoff=Backoff(),
                          retry_on=(KafkaConnectionError,)))


def test_throttle_passes_one_repeat_per_interval_and_counts_the_rest() -> None:
    now = [0.0]
    throttle = LogThrottle(30, clock=lambda: now[0])

    def record(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("aiokafka", level, __file__, 1, msg, ("x",), None)

    passed = []
    for i in range(400):  # 40 s of one error every 100 ms
        now[0] = i * 0.1
        r = record("Unable connect to node with id %s")
        if throttle.filter(r):
            passed.append(r.getMessage())
    assert passed == ["Unable connect to node with id x",
                      "Unable connect to node with id x [299 similar suppressed]"]
    assert throttle.filter(record("another message"))
    assert all(throttle.filter(record("Discovered coordinator %s", logging.INFO))
               for _ in range(5))  # below WARNING: never throttled


def test_health_reports_state_since_and_last_error() -> None:
    now = [1_800_000_000.0]
    health = KafkaHealth("b1:9092", clock=lambda: now[0])
    assert health.http_status() == 503  # not reached yet
    health.mark_ok()
    assert health.http_status() == 200 and health.as_dict()["last_error"] is None
    now[0] += 10
    health.mark_failed(KafkaConnectionError("Unable to bootstrap from [('b1', 9092)]"))
    now[0] += 5
    health.mark_failed(KafkaConnectionError("Unable to bootstrap from [('b1', 9092)]"))
    d = health.as_dict()
    assert health.http_status() == 503
    assert d["state"] == "unreachable" and d["bootstrap"] == "b1:9092"
    assert d["since"] == "2027-01-15T08:00:10Z" and d["for_s"] == 5.0
    assert d["failed_attempts"] == 2
    assert d["last_error"] == "KafkaConnectionError: Unable to bootstrap from [('b1', 9092)]"
    health.mark_ok()
    assert health.as_dict()["state"] == "ok" and health.as_dict()["failed_attempts"] == 0


def test_unreachable_errors_and_message() -> None:
    exc = KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 19392)]")
    assert is_unreachable(exc) and is_unreachable(TimeoutError())
    assert not is_unreachable(ValueError("bad topic config"))
    assert describe(exc).startswith("KafkaConnectionError: Unable")
    assert "cannot reach Kafka at 127.0.0.1:19392" in unreachable_message("127.0.0.1:19392", exc)


def test_watch_marks_unreachable_and_backs_off_without_a_broker() -> None:
    """Against a port where nothing listens: unreachable after one probe, then it waits."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    health = KafkaHealth(f"127.0.0.1:{port}", state="ok")

    async def run() -> None:
        task = asyncio.ensure_future(health.watch(backoff=Backoff(initial_s=0.2, max_s=0.4)))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert health.state == "unreachable"
    assert 2 <= health.failures <= 6  # paced by the backoff, not a loop
