"""BENCHMARKS.md stays a page for readers: current figures, each with how and when measured.

Why: the file had grown to 2,660 lines of session-by-session history, where the current
figure of a measure was hard to find and its command and date were pages away. Now each
area (a `## ` section) holds its newest figures in a table with the command that made
them, the date and the machine; the history lives in git. These checks keep it so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
MAX_LINES = 400
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMAND = re.compile(
    r"`(?:[A-Z_]+=\S+ |env |taskset -c \d+ )*(?:\.venv/bin/)?(?:python|hetsched)\b[^`]*`"
    r"|^```\n(?:[A-Z_]+=\S+ |env |taskset -c \d+ )*(?:\.venv/bin/)?(?:python|hetsched)\b",
    re.MULTILINE,
)
MACHINE = re.compile(r"\bmachine\b|\bVM\b|x86_64", re.IGNORECASE)


def areas(text: str) -> dict[str, str]:
    """Each `## ` heading with the text up to the next one."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def table_rows(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("|")]


TEXT = BENCHMARKS.read_text(encoding="utf-8")
AREAS = areas(TEXT)


def test_benchmarks_stays_under_four_hundred_lines() -> None:
    lines = TEXT.count("\n")
    assert lines < MAX_LINES, f"BENCHMARKS.md has {lines} lines (keep the history in git)"


def test_the_page_has_the_areas_it_summarises() -> None:
    expected = ["Packing", "Scheduling in time", "Scheduler service", "Load and scale",
                "Reliability", "Audit replay", "Audit memory", "Adaptation",
                "Threshold triggers"]
    missing = [name for name in expected if not any(a.startswith(name) for a in AREAS)]
    assert missing == []


@pytest.mark.parametrize("area", sorted(AREAS))
def test_each_area_has_a_table_with_its_command_date_and_machine(area: str) -> None:
    body = AREAS[area]
    assert len(table_rows(body)) >= 3, f"{area}: no table of figures (header, rule, a row)"
    assert COMMAND.search(body), f"{area}: names no command that made its figures"
    assert DATE.search(body), f"{area}: gives no date (YYYY-MM-DD) for its figures"
    assert MACHINE.search(body), f"{area}: does not say on what machine"


def test_the_checks_reject_an_area_without_command_or_date() -> None:
    body = "| a | b |\n|---|---|\n| 1 | 2 |\nMeasured on a machine.\n"
    assert not COMMAND.search(body)
    assert not DATE.search(body)
    assert COMMAND.search("`.venv/bin/python bench/x.py`")
    assert COMMAND.search("`taskset -c 0 env PYTHONPATH=$PWD .venv/bin/python bench/replay.py`")
    assert COMMAND.search("```\nhetsched simulate --out x\n```")
