"""The worker's event loop choice (``HETSCHED_EVENT_LOOP``)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from schemas.event_loop import use_event_loop


@pytest.fixture(autouse=True)
def _restore_policy():
    before = asyncio.get_event_loop_policy()
    yield
    asyncio.set_event_loop_policy(before)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL", "SASL_SSL"])
def test_uvloop_is_the_default_on_any_cluster(
    monkeypatch: pytest.MonkeyPatch, protocol: str,
) -> None:
    monkeypatch.delenv("HETSCHED_EVENT_LOOP", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_CONFIG", raising=False)
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", protocol)
    assert use_event_loop() == "uvloop"
    assert isinstance(asyncio.get_event_loop_policy(), uvloop.EventLoopPolicy)


def test_the_standard_loop_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETSCHED_EVENT_LOOP", "asyncio")
    assert use_event_loop() == "asyncio"
    assert type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy


def test_an_unknown_loop_is_refused_with_the_variable_and_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HETSCHED_EVENT_LOOP", "trio")
    with pytest.raises(SystemExit, match=r"HETSCHED_EVENT_LOOP='trio'.*uvloop, asyncio"):
        use_event_loop()
