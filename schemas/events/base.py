"""Shared building blocks for every event model: strictness, units, ids, time.

Why one base: the Kafka topics are a public API read from Go, Java and Python,
so every model must reject what it does not understand (unknown fields, a
string where a number belongs, ``NaN``) instead of guessing. The config lives
here once so no event can quietly be laxer than the others.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints


class StrictModel(BaseModel):
    """Immutable, strict model: no unknown fields, no type coercion, no NaN/inf.

    ``strict=True`` means JSON ``"5"`` is not an int and ``true`` is not a
    number. Lists are used instead of tuples because strict mode would refuse
    JSON arrays for tuple fields. ``defer_build`` builds a model's validator on its
    first use, not at import: a process pays for the events it handles, not for all
    of them (building every message model took about 0.6 s at each start).
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
        defer_build=True,
    )


class Event(StrictModel):
    """A payload carried in an :class:`~schemas.events.envelope.Envelope`.

    Subclasses set ``EVENT_TYPE`` (the ``type`` on the wire, past tense) and
    ``EVENT_VERSION``. A new version is a new class registered next to the old
    one, so old messages stay readable forever.
    """

    EVENT_TYPE: ClassVar[str] = ""
    EVENT_VERSION: ClassVar[int] = 1


def _parse_utc(value: Any) -> Any:
    """Accept an RFC 3339 string with an offset (or an aware datetime); return UTC.

    JSON has no datetime type, so the wire form is a string. Naive times are
    rejected: an event time without a zone cannot be ordered against others.
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"not an ISO-8601 date-time: {exc}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("date-time must carry a UTC offset (e.g. 'Z')")
        return value.astimezone(UTC)
    raise ValueError("expected an ISO-8601 date-time string with offset")


UtcDatetime = Annotated[datetime, BeforeValidator(_parse_utc)]
"""Event time: RFC 3339 with offset on the wire, a UTC-aware datetime in Python."""

Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
"""An identifier chosen by a producer (node id, task id, tenant, cell, model)."""

NodeId = Name
TaskId = Name
CellId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]

EVENT_ID_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"
EventId = Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]
"""A ULID: 26 Crockford base-32 characters, sortable by its millisecond time."""

NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0)]
Pct = Annotated[float, Field(ge=0, le=100)]
ShareMilli = Annotated[int, Field(ge=1, le=1000)]
"""Share of one GPU in thousandths: 1000 is a whole GPU, 250 a quarter."""
