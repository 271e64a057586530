"""``hetsched demo`` checks its arguments and its trace before it starts a worker, nodes
or anything else: one line naming the flag and value, exit status 2, and no run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.cli import main


@pytest.mark.parametrize(("argv", "expected"), [
    (["--nodes", "0"], "--nodes 0: must be at least 1"),
    (["--speedup", "-1"], "--speedup -1.0: must be above 0"),
    (["--metrics-port", "70000"], "--metrics-port 70000: must be a TCP port, or 0 for none"),
    (["--trace", "no-such-pods.csv"], "--trace: no-such-pods.csv: no such file (traces "),
    (["--node-list", "no-such-nodes.csv"], "--node-list: no-such-nodes.csv: no such file"),
    (["--trace", "{pods}"], "--trace: {pods}: column 'num_gpu' missing"),
    (["--report", "{file}/report.md"], "--report {file}/report.md: {file} is not a directory"),
], ids=["no nodes", "a negative speed-up", "a port out of range", "a missing pod list",
        "a missing node list", "a pod list without its columns", "a report under a file"])
def test_a_bad_argument_is_refused_before_anything_starts(
        argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods, file = tmp_path / "pods.csv", tmp_path / "a-file"
    pods.write_text("name,cpu_milli\nx,1\n")
    file.write_text("")
    monkeypatch.chdir(tmp_path)  # a started demo would leave var/demo/<run> here
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "127.0.0.1:1")
    argv = [a.format(pods=pods, file=file.resolve()) for a in argv]
    assert main(["demo", "--no-live", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"hetsched demo: {expected.format(pods=pods, file=file.resolve())}")
    assert err.count("\n") == 1, err
    assert not (tmp_path / "var").exists()
