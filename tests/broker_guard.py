"""A test that needs the broker must say so: the ``integration`` mark is checked before
any fixture is set up.

Why: ``pytest -m "not integration"`` is how a run without Kafka is asked for (a
laptop without Java, the quick loop of a change). A test that reaches the
broker through a fixture but carries no mark silently starts one there, and
the run takes minutes instead of seconds or hangs where no broker can start.
The hook below fails such a test at once, naming the fixture and the mark,
before the session's broker fixture runs; registered by the tests' root
conftest.
"""

from __future__ import annotations

import pytest

BROKER_FIXTURES = ("kafka_bootstrap", "secure_cluster")
"""Fixtures that start or reach a real broker (directly or through another fixture)."""


def unmarked_broker_fixtures(item: pytest.Item) -> list[str]:
    """The broker fixtures ``item`` uses although it has no ``integration`` mark."""
    if item.get_closest_marker("integration") is not None:
        return []
    used = set(getattr(item, "fixturenames", ()))
    return [name for name in BROKER_FIXTURES if name in used]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    unmarked = unmarked_broker_fixtures(item)
    if unmarked:
        pytest.fail(f"{item.nodeid} uses {', '.join(unmarked)} (a real Kafka broker) but "
                    "has no integration mark: add @pytest.mark.integration (or a module's "
                    "pytestmark) so that `-m \"not integration\"` leaves it out",
                    pytrace=False)
