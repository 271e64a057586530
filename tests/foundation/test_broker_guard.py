"""A test that reaches the broker without the integration mark fails at once, before any
broker starts (tests/broker_guard.py), in a pytest run of its own.

The run below has a stand-in ``kafka_bootstrap`` that notes in a file when it is set
up, so the check sees both what failed and that no broker was asked for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = '''
import os
import pytest
from broker_guard import pytest_runtest_setup  # noqa: F401

@pytest.fixture(scope="session")
def kafka_bootstrap():
    with open(os.environ["BROKER_LOG"], "a") as log:
        log.write("broker started\\n")
    yield "127.0.0.1:1"

@pytest.fixture
def client(kafka_bootstrap):
    return kafka_bootstrap
'''

TESTS_FILE = '''
import pytest

def test_forgot_the_mark(kafka_bootstrap):
    pass

def test_forgot_the_mark_behind_another_fixture(client):
    pass

@pytest.mark.integration
def test_marked(kafka_bootstrap):
    pass

def test_needs_no_broker():
    pass
'''


def _run(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    (tmp / "conftest.py").write_text(CONFTEST)
    (tmp / "test_guarded.py").write_text(TESTS_FILE)
    (tmp / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n"
                                     "markers =\n    integration: needs the broker\n")
    log = tmp / "broker.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(TESTS), BROKER_LOG=str(log))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rfE", "--rootdir", str(tmp), "-c", str(tmp / "pytest.ini"),
                           str(tmp), *args], env=env, cwd=tmp, capture_output=True,
                          text=True, timeout=120, check=False)
    return done, log.read_text() if log.exists() else ""


def test_an_unmarked_broker_test_fails_before_a_broker_starts(tmp_path: Path) -> None:
    done, broker = _run(tmp_path, "-m", "not integration")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 passed, 1 deselected, 2 errors" in out, out
    for name in ("test_forgot_the_mark", "test_forgot_the_mark_behind_another_fixture"):
        assert f"test_guarded.py::{name} uses kafka_bootstrap" in out, out
    assert "has no integration mark" in out, out
    assert broker == "", "the guard let the broker fixture start first"


def test_a_marked_broker_test_gets_its_broker(tmp_path: Path) -> None:
    done, broker = _run(tmp_path, "-k", "marked or needs_no_broker")
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "2 passed" in out, out
    assert broker == "broker started\n"
