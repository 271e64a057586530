"""The demo's banner for outside clients (streams/demo/outside.py): the run's topics,
and submit and watch lines that keep the partitioner and read committed records."""

from __future__ import annotations

import re
from pathlib import Path

from streams.demo.outside import KAFKA_JARS, client_commands, kafka_jars

REPO = Path(__file__).resolve().parents[2]


def test_the_lines_name_the_runs_topics_and_never_the_bare_ones() -> None:
    lines = client_commands("demo-ab12.", "127.0.0.1:9092")
    assert "demo-ab12.hetsched.*" in lines[0]
    commands = [ln for ln in lines if ln.startswith("  ")]
    assert len(commands) == 4
    for line in commands:
        topics = re.findall(r"--?t(?:opic)? (\S+)", line)
        assert topics and all(t.startswith("demo-ab12.hetsched.") for t in topics), line
    submits, watches = commands[:2], commands[2:]
    assert all("demo-ab12.hetsched.tasks" in ln and "train-43" in ln for ln in submits)
    assert "partitioner=murmur2_random" in submits[0]  # kcat's default would differ
    assert all("demo-ab12.hetsched.decisions" in ln for ln in watches)
    assert "isolation.level=read_committed" in watches[0]
    assert "--isolation-level read_committed" in watches[1]


def test_odd_addresses_and_ids_are_quoted_for_the_shell() -> None:
    lines = client_commands("demo-x.", "a:9092,b:9092", jars="/opt/my kafka/libs",
                            task_id="job 7")
    assert "-k 'job 7'" in lines[1]
    assert "'/opt/my kafka/libs/*'" in lines[2]


def test_the_jars_are_the_cache_kafka_sh_fills_else_the_repository_default(
        tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    assert kafka_jars({"HETSCHED_KAFKA_CACHE": str(tmp_path)}) == str(tmp_path / "libs")
    assert kafka_jars({"HETSCHED_KAFKA_CACHE": str(tmp_path / "none")}) == KAFKA_JARS


def test_docs_api_shows_the_lines_the_demo_prints() -> None:
    text = (REPO / "docs" / "api.md").read_text()
    for line in client_commands("demo-1a2b3c4d.", "127.0.0.1:9092"):
        assert line in text, line
