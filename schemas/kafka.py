"""Where the Kafka cluster is: one place for every client of the project.

``KAFKA_BOOTSTRAP`` (comma-separated host:port list) points every process at an
existing cluster; without it the project's embedded broker on 127.0.0.1 is used,
on ``HETSCHED_KAFKA_PORT`` (default 9092).

How clients authenticate (TLS, SASL/SCRAM, SASL/PLAIN) comes from the
environment too: :func:`aiokafka_kwargs` and :func:`faust_settings` turn it into
client arguments, so every process of the project is secured by one call (see
docs/security.md).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from schemas.kafka_pacing import pace_failed_metadata_updates

T = TypeVar("T")

DEFAULT_PORT = 9092


def bootstrap_servers() -> str:
    """Return the bootstrap server list clients should connect to."""
    explicit = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if explicit:
        return explicit
    port = os.environ.get("HETSCHED_KAFKA_PORT", "").strip() or str(DEFAULT_PORT)
    return f"127.0.0.1:{port}"


def faust_broker_url(servers: str | None = None) -> str:
    """Faust wants ``kafka://host:port;host:port``."""
    hosts = (servers or bootstrap_servers()).split(",")
    return ";".join(f"kafka://{h.strip()}" for h in hosts if h.strip())


# --- Client security -------------------------------------------------------
#
# Every Kafka client of the project (Faust app, agents, executors, CLI, tools)
# takes its security settings from here, so a deployment switches all of them
# to TLS and SASL with the same environment. Names follow the Kafka client
# properties they stand for:
#
#   KAFKA_SECURITY_PROTOCOL    PLAINTEXT (default) | SSL | SASL_SSL | SASL_PLAINTEXT
#   KAFKA_SSL_CAFILE           PEM CA bundle that signed the brokers' certificates
#   KAFKA_SSL_CERTFILE         PEM client certificate (mutual TLS; optional)
#   KAFKA_SSL_KEYFILE          PEM private key of that certificate
#   KAFKA_SSL_KEY_PASSWORD_FILE  file holding the key's passphrase, if encrypted
#   KAFKA_SASL_MECHANISM       SCRAM-SHA-512 (default with SASL) | SCRAM-SHA-256 | PLAIN
#   KAFKA_SASL_USERNAME        the principal's name
#   KAFKA_SASL_PASSWORD_FILE   file holding the password (preferred)
#   KAFKA_SASL_PASSWORD        the password itself (env only; never a flag)
#   KAFKA_CLIENT_CONFIG        optional KEY=VALUE file with any of the names
#                              above except KAFKA_SASL_PASSWORD; the environment wins
#
# Secrets never reach a command line, a log line or a repr: the password is a
# :class:`Secret` whose str/repr are redacted, and errors name files, not contents.

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
CONFIG_KEYS = (
    "KAFKA_SECURITY_PROTOCOL",
    "KAFKA_SSL_CAFILE",
    "KAFKA_SSL_CERTFILE",
    "KAFKA_SSL_KEYFILE",
    "KAFKA_SSL_KEY_PASSWORD_FILE",
    "KAFKA_SASL_MECHANISM",
    "KAFKA_SASL_USERNAME",
    "KAFKA_SASL_PASSWORD_FILE",
)
REDACTED = "***"


class SecurityConfigError(ValueError):
    """The security settings are inconsistent or a referenced file is unusable."""


class Secret:
    """A string that never shows itself: str, repr and format print ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself; pass it straight to the client that needs it."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, spec: str) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret is not picklable")


@dataclass(frozen=True)
class KafkaSecurity:
    """Validated client security settings; see the table above for the sources."""

    protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: Secret | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"KAFKA_SECURITY_PROTOCOL={self.protocol!r}: expected one of {SECURITY_PROTOCOLS}"
            )
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise SecurityConfigError("KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE go together")
        for name, path in (
            ("KAFKA_SSL_CAFILE", self.ssl_cafile),
            ("KAFKA_SSL_CERTFILE", self.ssl_certfile),
            ("KAFKA_SSL_KEYFILE", self.ssl_keyfile),
        ):
            if path and not os.path.isfile(path):
                raise SecurityConfigError(f"{name}: no such file {path}")
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise SecurityConfigError(
                    f"KAFKA_SASL_MECHANISM={self.sasl_mechanism!r}: expected one of "
                    f"{SASL_MECHANISMS}"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise SecurityConfigError(
                    f"{self.protocol} needs KAFKA_SASL_USERNAME and a password "
                    "(KAFKA_SASL_PASSWORD_FILE or KAFKA_SASL_PASSWORD)"
                )
            if self.protocol == "SASL_PLAINTEXT" and self.sasl_mechanism == "PLAIN":
                raise SecurityConfigError(
                    "SASL/PLAIN sends the password as is: use it over SASL_SSL only"
                )

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def principal(self) -> str | None:
        """The Kafka principal these settings authenticate as (``User:name``), if SASL."""
        return f"User:{self.sasl_username}" if self.sasl and self.sasl_username else None

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={REDACTED if name.endswith('password') and value is not None else value!r}"
            for name, value in (
                ("protocol", self.protocol),
                ("ssl_cafile", self.ssl_cafile),
                ("ssl_certfile", self.ssl_certfile),
                ("ssl_keyfile", self.ssl_keyfile),
                ("ssl_key_password", self.ssl_key_password),
                ("sasl_mechanism", self.sasl_mechanism),
                ("sasl_username", self.sasl_username),
                ("sasl_password", self.sasl_password),
            )
        )
        return f"KafkaSecurity({shown})"

    __str__ = __repr__

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying TLS context (hostname checked) or None without TLS."""
        if not self.tls:
            return None
        from aiokafka.helpers import create_ssl_context

        key_password = self.ssl_key_password
        return create_ssl_context(
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            password=key_password.reveal if key_password is not None else None,
        )

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client (producer, consumer, admin)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        if self.sasl:
            assert self.sasl_password is not None  # checked in __post_init__
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password.reveal()
        return kwargs

    def faust_settings(self) -> dict[str, Any]:
        """Settings for ``faust.App(...)``: ``broker_credentials`` when secured, else {}."""
        if self.protocol == "PLAINTEXT":
            return {}
        import faust

        context = self.ssl_context()
        if self.sasl:
            assert self.sasl_password is not None
            return {
                "broker_credentials": faust.SASLCredentials(
                    username=self.sasl_username,
                    password=self.sasl_password.reveal(),
                    mechanism=self.sasl_mechanism,
                    ssl_context=context,
                )
            }
        return {"broker_credentials": faust.SSLCredentials(context)}


def _read_secret_file(name: str, path: str) -> Secret:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SecurityConfigError(f"{name}: cannot read {path} ({exc.strerror})") from None
    value = text.strip("\r\n")
    if not value:
        raise SecurityConfigError(f"{name}: {path} is empty")
    return Secret(value)


def _read_config_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines (``#`` comments); a password literal is refused."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SecurityConfigError(
            f"KAFKA_CLIENT_CONFIG: cannot read {path} ({exc.strerror})"
        ) from None
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        key = key.strip()
        if not sep or key not in CONFIG_KEYS:
            hint = " (use KAFKA_SASL_PASSWORD_FILE)" if key == "KAFKA_SASL_PASSWORD" else ""
            raise SecurityConfigError(f"{path}:{number}: unknown or forbidden key {key!r}{hint}")
        values[key] = value.strip()
    return values


def security_settings(env: Mapping[str, str] | None = None) -> KafkaSecurity:
    """Read the client security settings from the environment (and its config file)."""
    environ = os.environ if env is None else env
    config_path = environ.get("KAFKA_CLIENT_CONFIG", "").strip()
    merged = _read_config_file(config_path) if config_path else {}
    merged.update({k: environ[k].strip() for k in CONFIG_KEYS if environ.get(k, "").strip()})
    protocol = merged.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").upper()
    sasl = protocol.startswith("SASL_")
    password: Secret | None = None
    if merged.get("KAFKA_SASL_PASSWORD_FILE"):
        password = _read_secret_file("KAFKA_SASL_PASSWORD_FILE", merged["KAFKA_SASL_PASSWORD_FILE"])
    elif environ.get("KAFKA_SASL_PASSWORD"):
        password = Secret(environ["KAFKA_SASL_PASSWORD"])
    key_password = None
    if merged.get("KAFKA_SSL_KEY_PASSWORD_FILE"):
        key_password = _read_secret_file(
            "KAFKA_SSL_KEY_PASSWORD_FILE", merged["KAFKA_SSL_KEY_PASSWORD_FILE"]
        )
    return KafkaSecurity(
        protocol=protocol,
        ssl_cafile=merged.get("KAFKA_SSL_CAFILE") or None,
        ssl_certfile=merged.get("KAFKA_SSL_CERTFILE") or None,
        ssl_keyfile=merged.get("KAFKA_SSL_KEYFILE") or None,
        ssl_key_password=key_password,
        sasl_mechanism=(merged.get("KAFKA_SASL_MECHANISM") or "SCRAM-SHA-512").upper()
        if sasl
        else None,
        sasl_username=merged.get("KAFKA_SASL_USERNAME") or None,
        sasl_password=password if sasl else None,
    )


def aiokafka_kwargs(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Security keyword arguments for an aiokafka client, from the environment.

    ``AIOKafkaProducer(bootstrap_servers=bootstrap_servers(), **aiokafka_kwargs())``

    Every client of this project gets its options here, so this is also where the
    busy-loop guard of :mod:`schemas.kafka_pacing` is installed, before any client runs.
    """
    pace_failed_metadata_updates()
    return security_settings(env).aiokafka_kwargs()


def faust_settings(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Security settings for a Faust app, from the environment.

    ``faust.App(app_id, broker=faust_broker_url(), **faust_settings())``

    Also installs :mod:`schemas.kafka_pacing`'s guard (Faust's clients are aiokafka's).
    """
    pace_failed_metadata_updates()
    return security_settings(env).faust_settings()


# --- Reachability ----------------------------------------------------------
#
# What a long-running process does while the cluster is away (docs/guarantees.md,
# "When Kafka is unreachable"): it stays up, retries with the backoff of
# :mod:`schemas.backoff`, and says so on its health endpoint.

OK = "ok"
UNREACHABLE = "unreachable"
PROBE_TIMEOUT_S = 5.0
WATCH_INTERVAL_S = 5.0
"""While the cluster answers, one metadata probe every 5 s: an outage shows on
/health within seconds, at the cost of one tiny request."""


def unreachable_errors() -> tuple[type[BaseException], ...]:
    """The exception types that mean "could not talk to the brokers": worth waiting out.

    Not, e.g., a failed SASL login or a refused topic config: waiting does not fix those.
    """
    from aiokafka.errors import KafkaConnectionError, NodeNotReadyError, RequestTimedOutError

    return (KafkaConnectionError, NodeNotReadyError, RequestTimedOutError, ConnectionError,
            TimeoutError)


def is_unreachable(exc: BaseException) -> bool:
    """Does ``exc`` mean "could not talk to the brokers" (as opposed to a refusal)?"""
    return isinstance(exc, unreachable_errors())


LOGIN_CHECK_TIMEOUT_S = 5.0


class LoginRefused(Exception):
    """The brokers answer but refuse this client's credentials (SASL) or TLS handshake:
    not worth waiting out, unlike an unreachable cluster. Its text is for the operator."""


async def refused_login(bootstrap: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the brokers refused this client's login (SASL or TLS), or None.

    aiokafka's bootstrap logs each broker's SASL or TLS error and raises only "Unable to
    bootstrap", which reads as a broker that is down. When a secured client cannot
    bootstrap, this asks the brokers once more, directly, what the matter was. The
    message names the principal and mechanism, never the password.
    """
    import asyncio
    import ssl

    from aiokafka.conn import create_conn
    from aiokafka.errors import (
        AuthenticationFailedError,
        SaslAuthenticationFailed,
        UnsupportedSaslMechanismError,
    )

    settings = security_settings(env)
    if settings.protocol == "PLAINTEXT":
        return None
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        host, _, port = address.rpartition(":")
        try:
            conn = await asyncio.wait_for(
                create_conn(host.strip("[]") or address, int(port or 9092),
                            client_id="hetsched-login-check", **settings.aiokafka_kwargs()),
                LOGIN_CHECK_TIMEOUT_S)
        except (SaslAuthenticationFailed, AuthenticationFailedError,
                UnsupportedSaslMechanismError) as exc:
            return (f"authentication failed at {address} for principal "
                    f"{settings.sasl_username!r} with {settings.sasl_mechanism}: the broker "
                    f"refused the login ({type(exc).__name__}); check KAFKA_SASL_USERNAME, "
                    "KAFKA_SASL_MECHANISM and the password in KAFKA_SASL_PASSWORD_FILE")
        except ssl.SSLError as exc:
            return (f"TLS handshake with {address} failed ({exc.reason or exc}); check "
                    "KAFKA_SSL_CAFILE and the broker's certificate")
        except Exception:  # nothing answered there, or not a login error: try the next
            continue
        conn.close()
        return None
    return None


class NotAuthorized(Exception):
    """The brokers refused a request by their ACLs: the principal lacks the grant. A
    refusal, not a fault: one line for the operator naming who was refused what."""


_AUTHORIZATION_ERRORS = {
    "TopicAuthorizationFailedError": "a topic",
    "GroupAuthorizationFailedError": "a consumer group",
    "ClusterAuthorizationFailedError": "a cluster operation (IDEMPOTENT_WRITE: a producer id)",
    "TransactionalIdAuthorizationFailed": "a transactional id",
}


def not_authorized(exc: BaseException, what: str | None = None,
                   env: Mapping[str, str] | None = None) -> NotAuthorized | None:
    """The :class:`NotAuthorized` for an aiokafka authorization error, else None.

    ``what`` says what the client was doing ("to write hetsched.tasks"); without it the
    error's own resource is named (a topic error carries the topic names, a producer-id
    refusal none, so a command that knows its topic passes it). aiokafka's exception
    prints as ``[Error 31] ClusterAuthorizationFailedError`` under a traceback, which
    names neither the principal nor the topic."""
    kind = _AUTHORIZATION_ERRORS.get(type(exc).__name__)
    if kind is None:
        return None
    principal = security_settings(env).principal or "this client (no SASL login)"
    if what is None:
        names = exc.args[0] if exc.args else None
        what = (f"access to {', '.join(sorted(map(str, names)))}"
                if isinstance(names, set | frozenset | list | tuple) and names
                else f"access to {kind}")
    return NotAuthorized(f"not authorized: the brokers refused {principal} {what} "
                         f"({type(exc).__name__}); the principal's role has no ACL for it "
                         "(hetsched acl print; docs/security.md)")


def unreachable_message(bootstrap: str, exc: BaseException) -> str:
    """One line for an operator: which address, what failed, what to check."""
    from schemas.backoff import describe

    return (f"cannot reach Kafka at {bootstrap} ({describe(exc)}); is the broker running? "
            "(KAFKA_BOOTSTRAP or HETSCHED_KAFKA_PORT choose the address)")


async def probe(bootstrap: str, *, timeout_s: float = PROBE_TIMEOUT_S,
                client_kwargs: Mapping[str, Any] | None = None) -> int:
    """Fetch cluster metadata once through a fresh connection; the number of brokers.

    Raises what aiokafka raises (``KafkaConnectionError`` when nothing answers)
    or ``TimeoutError`` after ``timeout_s``.
    """
    import asyncio

    from aiokafka.client import AIOKafkaClient

    kwargs = aiokafka_kwargs() if client_kwargs is None else dict(client_kwargs)
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="hetsched-probe",
                            request_timeout_ms=int(timeout_s * 1000), **kwargs)
    try:
        await asyncio.wait_for(client.bootstrap(), timeout_s)
        return len(client.cluster.brokers())
    finally:
        await client.close()


class KafkaHealth:
    """Whether this process can reach the cluster, since when, and the last error.

    One per process, read by its health endpoint (the worker's ``/health``, a
    node's ``/health`` on ``--metrics-port``): ``state`` is ``ok`` or
    ``unreachable``, ``since`` the wall-clock time of the last change, and
    :meth:`http_status` 200 or 503. :meth:`watch` keeps it current.
    """

    def __init__(self, bootstrap: str, *, state: str = UNREACHABLE,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.bootstrap = bootstrap
        self._clock = clock or time.time
        self.state = state
        self.since = self._clock()
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.failures = 0
        """Failed attempts since the cluster last answered."""

    @property
    def ok(self) -> bool:
        return self.state == OK

    def mark_ok(self) -> None:
        if self.state != OK:
            self.state, self.since = OK, self._clock()
        self.failures = 0

    def mark_failed(self, exc: BaseException | str) -> None:
        from schemas.backoff import describe

        now = self._clock()
        if self.state != UNREACHABLE:
            self.state, self.since = UNREACHABLE, now
        self.failures += 1
        self.last_error = exc if isinstance(exc, str) else describe(exc)
        self.last_error_at = now

    def http_status(self) -> int:
        """200 while the cluster answers, 503 (Service Unavailable) while it does not."""
        return 200 if self.ok else 503

    def as_dict(self) -> dict[str, Any]:
        """The ``kafka`` part of a health page (times as ISO 8601 UTC)."""
        return {
            "state": self.state,
            "bootstrap": self.bootstrap,
            "since": _iso(self.since),
            "for_s": round(max(0.0, self._clock() - self.since), 1),
            "last_error": self.last_error,
            "last_error_at": _iso(self.last_error_at),
            "failed_attempts": self.failures,
        }

    async def connect(self, operation: Callable[[], Awaitable[T]], *, what: str,
                      backoff: Any = None, log: Any = None) -> T:
        """Run ``operation`` (which connects) until it succeeds, with backoff; track state.

        Only "unreachable" errors (:func:`unreachable_errors`) are retried: a
        refused SASL login (:class:`LoginRefused`, which aiokafka reports as a failed
        bootstrap) or a bad topic config does not get better by waiting and fails at
        once.
        """
        import logging

        from schemas.backoff import Backoff, retry

        async def attempt() -> T:
            try:
                return await operation()
            except Exception as exc:
                why = await refused_login(self.bootstrap) if is_unreachable(exc) else None
                if why is not None:
                    self.mark_failed(why)
                    raise LoginRefused(why) from exc
                raise

        result = await retry(
            attempt, what=f"{what}: kafka at {self.bootstrap}",
            backoff=backoff or Backoff.from_env(), log=log or logging.getLogger(__name__),
            on_error=self.mark_failed, retry_on=unreachable_errors())
        self.mark_ok()
        return result

    async def watch(self, *, interval_s: float = WATCH_INTERVAL_S, backoff: Any = None,
                    log: Any = None) -> None:
        """Probe forever (until cancelled): every ``interval_s`` while reachable, with
        backoff while not. Logs once when the cluster goes away, once per failed
        attempt after that (at the backoff's pace), and once when it is back."""
        import asyncio
        import logging

        from schemas.backoff import Backoff, describe

        log = log or logging.getLogger(__name__)
        backoff = backoff or Backoff.from_env()
        while True:
            try:
                await probe(self.bootstrap)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure to get metadata = not reachable
                was_ok = self.ok
                self.mark_failed(exc)
                delay = backoff.next()
                if was_ok:
                    log.warning("kafka at %s is unreachable (%s); retrying in %.1f s",
                                self.bootstrap, describe(exc), delay)
                else:
                    log.warning("kafka at %s still unreachable after %.0f s (attempt %d: %s); "
                                "retrying in %.1f s", self.bootstrap, self._clock() - self.since,
                                backoff.attempts, describe(exc), delay)
                await asyncio.sleep(delay)
                continue
            if not self.ok:
                log.warning("kafka at %s is reachable again after %.0f s", self.bootstrap,
                            self._clock() - self.since)
            self.mark_ok()
            backoff.reset()
            await asyncio.sleep(interval_s)


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
