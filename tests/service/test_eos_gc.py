"""The worker's garbage-collection setting (issue 11, session 6): the first generation's
threshold is raised so that a round's live objects are not walked every few records."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from streams.processors import eos, eos_tuning


@pytest.fixture
def threshold() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


@pytest.mark.usefixtures("threshold")
def test_the_young_threshold_is_raised_from_the_default_and_only_raised():
    gc.set_threshold(700, 10, 10)
    eos_tuning.use_young_collection_threshold()
    assert gc.get_threshold() == (eos_tuning.YOUNG_COLLECTION_THRESHOLD, 10, 10)
    gc.set_threshold(10 * eos_tuning.YOUNG_COLLECTION_THRESHOLD, 5, 5)  # set higher elsewhere
    eos_tuning.use_young_collection_threshold()
    assert gc.get_threshold() == (10 * eos_tuning.YOUNG_COLLECTION_THRESHOLD, 5, 5)
    gc.set_threshold(0, 10, 10)  # collection switched off: left off
    eos_tuning.use_young_collection_threshold()
    assert gc.get_threshold() == (0, 10, 10)


@pytest.mark.usefixtures("threshold")
def test_starting_a_processor_sets_it(monkeypatch: pytest.MonkeyPatch):
    """``on_start`` applies it before anything else can fail (no broker needed)."""
    gc.set_threshold(700, 10, 10)

    class Stop(Exception):
        pass

    def no_client(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(eos, "AIOKafkaConsumer", no_client)
    processor = eos.TransactionalProcessor(name="t", app_id="a", bootstrap="-", topics=["x"],
                                           handler=object())  # type: ignore[arg-type]
    with pytest.raises(Stop):
        asyncio.run(processor.on_start())
    assert gc.get_threshold()[0] == eos_tuning.YOUNG_COLLECTION_THRESHOLD
