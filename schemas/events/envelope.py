"""The envelope every message carries, and the registry of event types.

On the wire a message is one JSON object: envelope fields plus ``payload``.
``type`` and ``version`` select the payload model; the registry maps each
(type, version) to a concrete message model (``Envelope[Payload]`` with
``type``/``version`` fixed), so the decoder validates the whole message in one
pass and every old version stays readable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Literal, TypeVar

from pydantic import Field, create_model

from schemas.events.base import CellId, Event, EventId, Name, StrictModel, UtcDatetime
from schemas.ids import derive_event_id, new_event_id

P = TypeVar("P", bound=Event)


class Envelope(StrictModel, Generic[P]):
    """Metadata common to every event; the payload is the event itself."""

    event_id: EventId
    """ULID, unique and sortable by event time."""
    type: Name
    """Event type, e.g. ``TaskSubmitted``."""
    version: int = Field(ge=1)
    """Schema version of ``type``; readers keep every version they ever knew."""
    source: Name
    """Producer, e.g. ``agent/node-17``, ``scheduler/cell-a``, ``cli``."""
    occurred_at: UtcDatetime
    """Event time (RFC 3339 with offset). The only clock the scheduler reads."""
    cell: CellId | None = None
    """Scheduling cell; None on inputs a router has not assigned yet."""
    causation_id: EventId | None = None
    """Id of the event that directly caused this one."""
    correlation_id: EventId | None = None
    """Id shared by every event of one chain (e.g. a task's life)."""
    payload: P


_MESSAGES: dict[tuple[str, int], type[Envelope[Event]]] = {}
_PAYLOADS: dict[tuple[str, int], type[Event]] = {}
_BY_PAYLOAD: dict[type[Event], type[Envelope[Event]]] = {}
"""The message models built so far, by payload class (``make_event``'s one lookup)."""


def build_message_model(payload_cls: type[Event]) -> type[Envelope[Event]]:
    """The concrete message model for a payload class (without registering it)."""
    event_type, version = payload_cls.EVENT_TYPE, payload_cls.EVENT_VERSION
    if not event_type:
        raise ValueError(f"{payload_cls.__name__} has no EVENT_TYPE")
    return create_model(
        f"{event_type}V{version}Message",
        __base__=Envelope[payload_cls],  # type: ignore[valid-type]
        __doc__=f"A ``{event_type}`` event, version {version}: envelope and payload.",
        __module__=__name__,
        type=(Literal[event_type], ...),  # type: ignore[arg-type, valid-type]
        version=(Literal[version], ...),  # type: ignore[arg-type, valid-type]
    )


def register(payload_cls: type[Event]) -> None:
    """Register a payload model; its message model is built on first use.

    Why lazily: building the ~40 message models (a generic envelope specialised per
    payload) took most of a process's start-up, and most processes handle a few.
    """
    key = (payload_cls.EVENT_TYPE, payload_cls.EVENT_VERSION)
    if key in _PAYLOADS:
        raise ValueError(f"{key} is already registered")
    _PAYLOADS[key] = payload_cls


def _message_for(payload_cls: type[Event]) -> type[Envelope[Event]]:
    """The one message model of a registered payload class, built once."""
    key = (payload_cls.EVENT_TYPE, payload_cls.EVENT_VERSION)
    message_cls = _MESSAGES.get(key)
    if message_cls is None:
        message_cls = _MESSAGES.setdefault(key, build_message_model(payload_cls))
        _BY_PAYLOAD[payload_cls] = message_cls
    return message_cls


def message_model(event_type: str, version: int) -> type[Envelope[Event]] | None:
    """The message model for (type, version), or None if unknown (one lookup once
    built: every decoded message asks)."""
    built = _MESSAGES.get((event_type, version))
    if built is not None:
        return built
    payload_cls = _PAYLOADS.get((event_type, version))
    return None if payload_cls is None else _message_for(payload_cls)


def known_versions(event_type: str) -> list[int]:
    """Every registered version of ``event_type``, ascending."""
    return sorted(v for (t, v) in _PAYLOADS if t == event_type)


def registered() -> list[tuple[str, int]]:
    """All registered (type, version) pairs in a stable order."""
    return sorted(_PAYLOADS)


def make_event(
    payload: Event,
    *,
    source: str,
    occurred_at: datetime,
    cell: str | None = None,
    causation_id: str | None = None,
    correlation_id: str | None = None,
    event_id: str | None = None,
    id_seed: str | bytes | None = None,
) -> Envelope[Event]:
    """Wrap ``payload`` in its envelope.

    ``event_id`` wins if given; else ``id_seed`` derives a deterministic ULID
    (what the pure core must use); else a random ULID is drawn (edge
    producers). A root event (no ``causation_id``) starts a chain, so its
    ``correlation_id`` defaults to its own id; a caused event should pass its
    cause's ``correlation_id`` on.
    """
    message_cls = _BY_PAYLOAD.get(type(payload))
    if message_cls is None:
        payload_cls = type(payload)
        if _PAYLOADS.get((payload_cls.EVENT_TYPE, payload_cls.EVENT_VERSION)) is not payload_cls:
            raise TypeError(f"{payload_cls.__name__} is not a registered event")
        message_cls = _message_for(payload_cls)
    if event_id is None:
        event_id = (
            derive_event_id(occurred_at, id_seed)
            if id_seed is not None
            else new_event_id(occurred_at)
        )
    return message_cls(
        event_id=event_id,
        type=payload.EVENT_TYPE,
        version=payload.EVENT_VERSION,
        source=source,
        occurred_at=occurred_at,
        cell=cell,
        causation_id=causation_id,
        correlation_id=correlation_id if causation_id is not None else correlation_id or event_id,
        payload=payload,
    )
