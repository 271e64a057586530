"""Event ids are ULIDs: unique, sortable by event time, deterministic when seeded."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from schemas.events.base import EVENT_ID_PATTERN
from schemas.ids import derive_event_id, event_id_ms, new_event_id

times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
)


@given(at=times)
def test_an_id_is_a_ulid_that_encodes_its_time(at: datetime) -> None:
    event_id = new_event_id(at)
    assert re.fullmatch(EVENT_ID_PATTERN, event_id)
    assert event_id_ms(event_id) == int(at.timestamp() * 1000)


@given(a=times, b=times)
def test_ids_sort_like_their_times(a: datetime, b: datetime) -> None:
    if int(a.timestamp() * 1000) < int(b.timestamp() * 1000):
        assert new_event_id(a) < new_event_id(b)


def test_ids_at_the_same_millisecond_are_unique() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    assert len({new_event_id(at) for _ in range(10_000)}) == 10_000


def test_a_seeded_id_is_deterministic_and_seed_specific() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    assert derive_event_id(at, "x/1") == derive_event_id(at, "x/1")
    assert derive_event_id(at, "x/1") != derive_event_id(at, "x/2")
    assert derive_event_id(at, "x/1") < derive_event_id(at + timedelta(milliseconds=1), "x/0")


def _digit_by_digit(value: int) -> str:
    """The ULID text written one 5-bit digit at a time (the plain definition)."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(value >> (5 * (25 - i))) & 31] for i in range(26))


@given(value=st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_ids_are_written_digit_for_digit_as_the_plain_definition(value: int) -> None:
    from schemas.ids import _encode

    assert _encode(value) == _digit_by_digit(value)


def test_a_derived_id_is_unchanged_across_versions() -> None:
    # Replayed decisions carry these ids: a different spelling would break every audit
    # (the value written by the code of d72dfe8).
    at = datetime(2026, 11, 29, 14, tzinfo=UTC)
    assert derive_event_id(at, "cause/0") == "01M8KSP0R03GMSWVFD39HHBS71"
