"""hetsched's integration API: event models, envelope, topic catalog, codec.

This package imports nothing else of the project's; every other side (the
scheduler in ``streams`` and the node side in ``agents``) depends on it.
Faust-specific codecs live in :mod:`schemas.faust_codec` and Kafka I/O helpers
in :mod:`schemas.admin` / :mod:`schemas.consume`, so importing ``schemas``
stays light: the names below are loaded on first use (PEP 562), so a program that
needs one module of the package (the command line's table, say) does not build
every event model first.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and a reader see; at run time see __getattr__
    from schemas.codec import (  # noqa: F401
        DecodeError,
        decode,
        decode_deadletter,
        decode_event,
        decode_or_deadletter,
        encode,
        encode_deadletter,
    )
    from schemas.deadletter import DeadLetter, FieldError  # noqa: F401
    from schemas.events import *  # noqa: F403 -- the event models are the public API
    from schemas.ids import derive_event_id, event_id_ms, new_event_id  # noqa: F401
    from schemas.topics import CATALOG, TopicSpec, key_for  # noqa: F401

_HOMES = {
    "schemas.codec": (
        "DecodeError",
        "decode",
        "decode_deadletter",
        "decode_event",
        "decode_or_deadletter",
        "encode",
        "encode_deadletter",
    ),
    "schemas.deadletter": ("DeadLetter", "FieldError"),
    "schemas.ids": ("derive_event_id", "event_id_ms", "new_event_id"),
    "schemas.topics": ("CATALOG", "TopicSpec", "key_for"),
}
"""module -> the names of it this package exports; the event models come from
:mod:`schemas.events` and its ``__all__``."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use (and ``__all__`` itself), and
    keep it in the package, so each name is looked up here once.

    A submodule's name is left to the import system (``from schemas import kafka``
    asks this first), without building the event models.
    """
    home = _HOME_OF.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
    elif ((name.startswith("__") and name != "__all__")
          or importlib.util.find_spec(f"schemas.{name}") is not None):
        raise AttributeError(f"module 'schemas' has no attribute {name!r}")
    else:
        events = importlib.import_module("schemas.events")
        if name == "__all__":
            value = [*events.__all__, *_HOME_OF]
        elif name in events.__all__:
            value = getattr(events, name)
        else:
            raise AttributeError(f"module 'schemas' has no attribute {name!r}")
    globals()[name] = value
    return value
