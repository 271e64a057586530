"""Record origin: which authenticated principal produced a record, provably.

Kafka authenticates the producer and checks topic ACLs, but it does not write
the producer's principal into the record, and an ACL cannot look at a record's
key or body. So "node principals write telemetry only for their own node id"
and "a submission's tenant is the submitter's" cannot be enforced by the broker
alone. Each producing principal therefore signs its records with its own
HMAC-SHA256 key (a file next to its Kafka credentials) and names itself in a
header; the scheduler's sequencer holds the verification keyring, checks the
signature and then binds the record to that principal (node ids, tenant).

The signature covers the topic, the record key and the value, so a signed
record cannot be moved to another topic or re-keyed, and nobody without the
key can produce a record that verifies as another principal. Replaying a
recorded message verbatim yields the same event id, which consumers already
treat as a duplicate.

Headers (both ASCII)::

    hetsched-principal: <principal name, e.g. node-a>      (SASL user name)
    hetsched-signature: hmac-sha256=<64 hex digits>

Producers: ``Signer.from_env()`` (``HETSCHED_SIGNING_KEY_FILE``; the principal is
``HETSCHED_SIGNING_PRINCIPAL`` or else ``KAFKA_SASL_USERNAME``) and pass
``signer.headers(topic, key, value)`` to ``send``; :func:`schemas.consume.produce_event`
does it by itself. Verifiers: :func:`verify_origin`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from schemas.deadletter import DeadLetter, FieldError

HEADER_PRINCIPAL = "hetsched-principal"
HEADER_SIGNATURE = "hetsched-signature"
SCHEME = "hmac-sha256"
MIN_KEY_BYTES = 32
"""256-bit keys, the HMAC-SHA256 block-size guidance; shorter keys are refused."""

Headers = Iterable[tuple[str, bytes]]


class SigningKeyError(ValueError):
    """A signing key file is missing, unreadable or too short (never shows the key)."""


@dataclass(frozen=True)
class Refusal:
    """Why a record is refused on security grounds; becomes a dead letter's reason.

    ``code`` is stable for tooling (``unsigned``, ``bad_signature``,
    ``unknown_principal``, ``tenant_forged``, ``node_forged``, ...).
    """

    code: str
    message: str
    field: str = ""
    value: str | None = None

    def dead_letter(
        self,
        raw: bytes,
        *,
        topic: str,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        event_type: str | None = None,
        event_id: str | None = None,
    ) -> DeadLetter:
        """The dead letter for the refused record (reason ``validation_failed``).

        The dead-letter reason enum is part of the v1 contract; the security
        code is the message's first word and the field error's location.
        """
        import base64

        return DeadLetter(
            reason="validation_failed",
            message=f"{self.code}: {self.message}"[:1000],
            errors=[FieldError(field=self.field or "headers", value=self.value, error=self.code)],
            source_topic=topic,
            partition=partition,
            offset=offset,
            key_b64=base64.b64encode(key).decode() if key is not None else None,
            original_b64=base64.b64encode(raw).decode(),
            event_type=event_type,
            event_id=event_id,
        )


def record_signature(key: bytes, topic: str, record_key: bytes | None, value: bytes) -> str:
    """``hmac-sha256=<hex>`` over topic, key and value (length-prefixed, unambiguous)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (topic.encode(), record_key or b"", value):
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return f"{SCHEME}={mac.hexdigest()}"


def read_key_file(path: str | Path) -> bytes:
    """The key in a file (surrounding whitespace ignored); at least 32 bytes."""
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise SigningKeyError(f"cannot read signing key file {path} ({exc.strerror})") from None
    if len(key) < MIN_KEY_BYTES:
        raise SigningKeyError(f"signing key in {path} is shorter than {MIN_KEY_BYTES} bytes")
    return key


@dataclass(frozen=True)
class Signer:
    """Signs the records of one principal."""

    principal: str
    key: bytes = field(repr=False)

    def headers(
        self, topic: str, record_key: bytes | None, value: bytes
    ) -> list[tuple[str, bytes]]:
        """Kafka record headers naming the principal and carrying the signature."""
        return [
            (HEADER_PRINCIPAL, self.principal.encode()),
            (HEADER_SIGNATURE, record_signature(self.key, topic, record_key, value).encode()),
        ]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Signer | None:
        """The process's signer, or None when ``HETSCHED_SIGNING_KEY_FILE`` is unset."""
        environ = os.environ if env is None else env
        path = environ.get("HETSCHED_SIGNING_KEY_FILE", "").strip()
        if not path:
            return None
        principal = (
            environ.get("HETSCHED_SIGNING_PRINCIPAL", "").strip()
            or environ.get("KAFKA_SASL_USERNAME", "").strip()
        )
        if not principal:
            raise SigningKeyError(
                "HETSCHED_SIGNING_KEY_FILE needs HETSCHED_SIGNING_PRINCIPAL or KAFKA_SASL_USERNAME"
            )
        return cls(principal, read_key_file(path))


@functools.lru_cache(maxsize=4)
def _cached_signer(path: str, principal: str, user: str) -> Signer | None:
    return Signer.from_env(
        {
            "HETSCHED_SIGNING_KEY_FILE": path,
            "HETSCHED_SIGNING_PRINCIPAL": principal,
            "KAFKA_SASL_USERNAME": user,
        }
    )


def default_signer() -> Signer | None:
    """:meth:`Signer.from_env` on the process environment, read once per setting."""
    return _cached_signer(
        os.environ.get("HETSCHED_SIGNING_KEY_FILE", "").strip(),
        os.environ.get("HETSCHED_SIGNING_PRINCIPAL", "").strip(),
        os.environ.get("KAFKA_SASL_USERNAME", "").strip(),
    )


def verify_origin(
    topic: str,
    record_key: bytes | None,
    value: bytes,
    headers: Headers | None,
    keyring: Mapping[str, bytes],
) -> str | Refusal:
    """The principal that provably produced the record, or why that is unknown.

    Pure: ``keyring`` maps principal names to their keys. The comparison is
    constant-time; a refusal never contains a key or the expected signature.
    """
    found: dict[str, bytes] = {}
    for name, data in headers or ():
        if name in (HEADER_PRINCIPAL, HEADER_SIGNATURE):
            if name in found:
                return Refusal("bad_signature", f"header {name} appears twice", "headers")
            found[name] = data
    principal_raw, signature_raw = found.get(HEADER_PRINCIPAL), found.get(HEADER_SIGNATURE)
    if principal_raw is None or signature_raw is None:
        return Refusal(
            "unsigned",
            f"record has no {HEADER_PRINCIPAL}/{HEADER_SIGNATURE} headers",
            "headers",
        )
    principal = principal_raw.decode("utf-8", errors="replace")
    key = keyring.get(principal)
    if key is None:
        return Refusal(
            "unknown_principal",
            f"no verification key for principal {principal!r}",
            f"headers.{HEADER_PRINCIPAL}",
            principal,
        )
    expected = record_signature(key, topic, record_key, value).encode()
    if not hmac.compare_digest(expected, signature_raw):
        return Refusal(
            "bad_signature",
            f"signature does not verify for principal {principal!r} on {topic}",
            f"headers.{HEADER_SIGNATURE}",
            principal,
        )
    return principal
