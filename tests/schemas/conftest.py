"""Shared fixtures for the integration-API tests: the golden example messages.

``fixtures/<Type>.v<N>.json`` holds one example message per registered event
version. They are golden files, written once and never regenerated: old
messages must stay readable, so a model change that breaks one fails here.
Any test taking a ``golden`` argument runs once per file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURE_DIR = Path(__file__).parent / "fixtures"


def _golden_paths() -> list[Path]:
    return sorted(FIXTURE_DIR.glob("*.v*.json"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``golden`` (a fixture file path) over every golden fixture."""
    if "golden" in metafunc.fixturenames:
        paths = _golden_paths()
        metafunc.parametrize("golden", paths, ids=[p.name for p in paths])


@pytest.fixture(scope="session")
def golden_paths() -> list[Path]:
    """Every golden fixture file, sorted by name."""
    return _golden_paths()


@pytest.fixture(scope="session")
def golden_docs() -> dict[str, bytes]:
    """Raw bytes of every golden fixture by file name."""
    return {p.name: p.read_bytes() for p in _golden_paths()}
