"""hetsched's integration API: event models, envelope, topic catalog, codec.

This package imports nothing else of the project's; every other side (the
scheduler in ``streams`` and the node side in ``agents``) depends on it.
Faust-specific codecs live in :mod:`schemas.faust_codec` and Kafka I/O helpers
in :mod:`schemas.admin` / :mod:`schemas.consume`, so importing ``schemas``
stays light.
"""

from schemas.codec import (
    DecodeError,
    decode,
    decode_deadletter,
    decode_event,
    decode_or_deadletter,
    encode,
    encode_deadletter,
)
from schemas.deadletter import DeadLetter, FieldError
from schemas.events import *  # noqa: F403 -- the event models are the public API
from schemas.events import __all__ as _event_names
from schemas.ids import derive_event_id, event_id_ms, new_event_id
from schemas.topics import CATALOG, TopicSpec, key_for

__all__ = [
    *_event_names,
    "CATALOG",
    "DeadLetter",
    "DecodeError",
    "FieldError",
    "TopicSpec",
    "decode",
    "decode_deadletter",
    "decode_event",
    "decode_or_deadletter",
    "derive_event_id",
    "encode",
    "encode_deadletter",
    "event_id_ms",
    "key_for",
    "new_event_id",
]
