"""The worker does not log a starting broker's coordinator lookup as an ERROR.

aiokafka logs ``Group Coordinator Request failed: [Error 15]
CoordinatorNotAvailableError`` at ERROR while the broker's group coordinator is
still loading, at nearly every worker start on a fresh broker, and retries; an
operator read ERROR as broken. The worker's logging now shows it at INFO with
why, unless it lasts (then ERROR again, saying for how long).
"""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import CoordinatorNotAvailableError, GroupAuthorizationFailedError

COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
TEMPLATE = "Group Coordinator Request failed: %s"  # aiokafka's message


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def coordinator_log():
    """aiokafka's coordinator logger with a handler that keeps what reaches it."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield logger, handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_workers_logging_shows_a_coordinator_still_loading_at_info(
        coordinator_log) -> None:
    logger, handler = coordinator_log
    import streams.app  # noqa: F401 - the worker's app: its logging setup

    logger.error(TEMPLATE, CoordinatorNotAvailableError())  # aiokafka's very call
    (record,) = handler.records
    assert record.levelno == logging.INFO and record.levelname == "INFO"
    text = record.getMessage()
    assert text.startswith("Group Coordinator Request failed: [Error 15] "
                           "GroupCoordinatorNotAvailableError")
    assert "transient: the broker's group coordinator is not ready yet" in text


def test_a_coordinator_that_stays_away_is_an_error_again_and_a_fatal_one_always() -> None:
    from streams.transient_logs import TransientCoordinatorErrors

    now = [0.0]
    keep = TransientCoordinatorErrors(clock=lambda: now[0])

    def record(exc: Exception) -> logging.LogRecord:
        r = logging.LogRecord(COORDINATOR_LOGGER, logging.ERROR, __file__, 1, TEMPLATE,
                              (exc,), None)
        assert keep.filter(r)
        return r

    assert record(CoordinatorNotAvailableError()).levelno == logging.INFO
    now[0] = 59.0
    assert record(CoordinatorNotAvailableError()).levelno == logging.INFO
    now[0] = 61.0
    lasting = record(CoordinatorNotAvailableError())
    assert lasting.levelno == logging.ERROR
    assert "(for 61 s: the group coordinator stays unavailable" in lasting.getMessage()
    now[0] = 200.0  # a new run of failures after a quiet minute: transient again
    assert record(CoordinatorNotAvailableError()).levelno == logging.INFO
    assert record(GroupAuthorizationFailedError()).levelno == logging.ERROR  # not retried
