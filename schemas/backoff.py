"""Waiting for something that is down: exponential backoff with jitter and a cap, quiet logs.

Every long-running process of hetsched (scheduler worker, node agent and
executor) waits for Kafka the same way, so the policy lives here once:

* :class:`Backoff`: the delay before attempt *n* grows ``initial_s * factor**n``
  up to ``max_s``; each delay is shortened by a random fraction up to
  ``jitter`` so that many processes restarted together (a broker outage
  restarts every node's retry at once) do not retry in lock step. The
  randomness is an injectable ``random.Random`` (seed it in tests); the delay
  formula itself, :func:`backoff_delay`, is pure.
* :func:`retry`: run an async operation until it succeeds, sleeping the
  backoff between attempts and logging one line per failed attempt (with a
  capped delay that is one line every ``max_s`` seconds at worst, never a
  flood); cancellation (SIGTERM) stops it at once.
* :class:`LogThrottle`: a logging filter that lets the first of a repeated
  warning through and then at most one per interval, with the count of those
  it held back. aiokafka retries its connections every ``retry_backoff_ms``
  (100 ms) inside every client and logs an error each time: with a broker down
  that was ~400 lines a second from one worker.

Settings (environment, seconds): ``HETSCHED_KAFKA_RETRY_INITIAL_S`` (0.5) and
``HETSCHED_KAFKA_RETRY_MAX_S`` (10).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

DEFAULT_INITIAL_S = 0.5
DEFAULT_MAX_S = 10.0
"""A cap of 10 s: an operator who brings the broker back sees the processes
reconnect within seconds, while a down broker costs one attempt per 10 s."""


def backoff_delay(attempt: int, *, initial_s: float, factor: float, max_s: float,
                  jitter: float, u: float) -> float:
    """The delay after failed attempt ``attempt`` (0-based), for a uniform draw ``u`` in [0, 1).

    ``min(max_s, initial_s * factor**attempt)`` shortened by ``jitter * u`` of
    itself, so the result lies in ``[(1 - jitter) * d, d]`` and never exceeds the cap.
    """
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    exponent = min(attempt, 64)  # factor**1000 overflows; the cap is reached long before
    base = min(max_s, initial_s * factor ** exponent)
    return base * (1.0 - jitter * u)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name}={raw!r}: expected a number of seconds") from None
    if value <= 0:
        raise SystemExit(f"{name}={value}: must be positive")
    return value


@dataclass
class Backoff:
    """Successive retry delays (see the module doc); :meth:`reset` after a success."""

    initial_s: float = DEFAULT_INITIAL_S
    max_s: float = DEFAULT_MAX_S
    factor: float = 2.0
    jitter: float = 0.5
    rng: random.Random = field(default_factory=random.Random, repr=False)
    attempts: int = 0
    """Failed attempts since the last :meth:`reset`."""

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_s):
            raise ValueError("need 0 < initial_s <= max_s")
        if self.factor < 1 or not 0 <= self.jitter < 1:
            raise ValueError("need factor >= 1 and 0 <= jitter < 1")

    @classmethod
    def from_env(cls, rng: random.Random | None = None) -> Backoff:
        """The project's Kafka retry policy, with the environment's overrides."""
        initial = _env_float("HETSCHED_KAFKA_RETRY_INITIAL_S", DEFAULT_INITIAL_S)
        cap = _env_float("HETSCHED_KAFKA_RETRY_MAX_S", DEFAULT_MAX_S)
        return cls(initial_s=min(initial, cap), max_s=cap, rng=rng or random.Random())

    def next(self) -> float:
        """Count one failed attempt; the delay to wait before the next one."""
        delay = backoff_delay(self.attempts, initial_s=self.initial_s, factor=self.factor,
                              max_s=self.max_s, jitter=self.jitter, u=self.rng.random())
        self.attempts += 1
        return delay

    def reset(self) -> None:
        self.attempts = 0


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, short enough for a log line or a health page."""
    name = type(exc).__name__
    text = " ".join(str(exc).split()) or repr(exc)
    if text.startswith(name + ":"):  # aiokafka's errors already start with their name
        return text[:300]
    return f"{name}: {text}"[:300]


async def retry(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    backoff: Backoff,
    log: logging.Logger,
    on_error: Callable[[BaseException], None] | None = None,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """``await operation()`` until it succeeds; between failures, wait ``backoff``.

    One WARNING per failed attempt names ``what``, the attempt, the error and the
    wait. Errors not in ``retry_on`` and cancellation propagate at once. The
    backoff is reset on success, so a later outage starts with short delays again.
    """
    while True:
        try:
            result = await operation()
        except asyncio.CancelledError:
            raise
        except retry_on as exc:
            delay = backoff.next()
            if on_error is not None:
                on_error(exc)
            log.warning("%s: attempt %d failed (%s); retrying in %.1f s",
                        what, backoff.attempts, describe(exc), delay)
            await sleep(delay)
            continue
        backoff.reset()
        return result


class LogThrottle(logging.Filter):
    """Pass a repeated log message at most once per ``interval_s`` (per logger and template).

    Only records at ``min_level`` or above are throttled. The record that
    follows a quiet period carries ``[N similar suppressed]``, so nothing is
    silently lost from the count.
    """

    def __init__(self, interval_s: float = 30.0, *, min_level: int = logging.WARNING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.min_level = min_level
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.min_level:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        suppressed = last[1] if last is not None else 0
        self._seen[key] = (now, 0)
        if suppressed:
            record.msg = f"{record.msg} [{suppressed} similar suppressed]"
        if len(self._seen) > 1000:  # templates are few; bound it anyway
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.interval_s}
        return True


_installed: dict[str, LogThrottle] = {}


def throttle_logs(prefixes: Iterable[str] = ("aiokafka",), interval_s: float = 30.0) -> None:
    """Attach one :class:`LogThrottle` to every existing logger under ``prefixes``.

    Logger filters do not apply to records of child loggers, and aiokafka logs
    through one logger per module, so the filter goes on each of them (they
    exist once aiokafka is imported). Idempotent.
    """
    import aiokafka  # creates aiokafka's module loggers
    import aiokafka.admin  # noqa: F401

    manager = logging.Logger.manager
    for prefix in prefixes:
        names = [prefix] + [n for n in list(manager.loggerDict) if n.startswith(prefix + ".")]
        for name in names:
            if name in _installed:
                continue
            throttle = LogThrottle(interval_s)
            logging.getLogger(name).addFilter(throttle)
            _installed[name] = throttle
