"""A known transient Kafka client error, logged at the level it deserves.

Every consumer group of a worker (Faust's, the router's and the scheduler's)
first looks up its group coordinator. Right after a broker starts, its group
coordinator is still loading ``__consumer_offsets`` and answers
``[Error 15] CoordinatorNotAvailableError``; aiokafka logs
``Group Coordinator Request failed: ...`` at ERROR for that and retries, and
the lookup succeeds a moment later. An operator reads ERROR as "broken", so
:class:`TransientCoordinatorErrors` logs such a retriable failure at INFO with
a sentence saying why it is harmless, as long as the failures last less than
:data:`PATIENCE_S`; a coordinator that stays away longer is a real problem and
is logged at ERROR again, saying for how long. A failure aiokafka does not
retry stays an ERROR.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
TEMPLATE = "Group Coordinator Request failed: %s"
"""aiokafka's message (``GroupCoordinator.ensure_coordinator_known``)."""
PATIENCE_S = 60.0
"""How long failures in a row are expected (a broker's coordinator loading its state)."""
QUIET_S = 60.0
"""A failure this long after the previous one starts a new run of failures."""
EXPLANATION = (" (transient: the broker's group coordinator is not ready yet, usual for "
               "some seconds after a broker starts; the client retries)")


class TransientCoordinatorErrors(logging.Filter):
    """Downgrades aiokafka's retriable coordinator-lookup failures (see the module doc).

    ``clock``: monotonic seconds, to tell a short run of failures from a long one.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._since: float | None = None
        self._last = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != TEMPLATE or record.levelno < logging.ERROR or not _retriable(record):
            return True
        now = self._clock()
        if self._since is None or now - self._last > QUIET_S:
            self._since = now
        self._last = now
        lasted = now - self._since
        if lasted < PATIENCE_S:
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            record.msg = TEMPLATE + EXPLANATION
        else:
            record.msg = (TEMPLATE + f" (for {lasted:.0f} s: the group coordinator stays "
                          "unavailable; check the broker)")
        return True


def _retriable(record: logging.LogRecord) -> bool:
    args = record.args if isinstance(record.args, tuple) else ()
    return bool(args) and bool(getattr(args[0], "retriable", False))


_installed: dict[str, TransientCoordinatorErrors] = {}


def downgrade_transient_client_errors() -> TransientCoordinatorErrors:
    """Attach the filter to aiokafka's coordinator logger (idempotent); the filter.

    A logger's filters see only the records of that very logger, which is the one
    aiokafka logs this message through.
    """
    found = _installed.get(COORDINATOR_LOGGER)
    if found is None:
        found = _installed[COORDINATOR_LOGGER] = TransientCoordinatorErrors()
        logging.getLogger(COORDINATOR_LOGGER).addFilter(found)
    return found
