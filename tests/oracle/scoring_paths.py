"""Run a test package twice: through the core's scoring pass and through the Python paths.

The scheduler scores a batch of nodes in the compiled core (``hetsched_core.score_feasible``)
when every policy of the profile is in it, else in Python (``_score_feasible_python``),
which is also the core pass's oracle. A package whose conftest uses
:func:`scoring_path` runs each of its tests once per path, so every behaviour its tests
hold is held by the core and by the oracle alike (issue 37: the compiled core inherits
the tests).
"""

from __future__ import annotations

import pytest

from streams.core import scheduler


@pytest.fixture(autouse=True, params=["core", "python"])
def scoring_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``core``: as shipped; ``python``: every core pass answered by the Python paths."""
    if request.param == "python":
        monkeypatch.setattr(scheduler, "_score_feasible_native",
                            scheduler._score_feasible_python)
    return str(request.param)
