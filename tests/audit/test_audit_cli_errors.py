"""The audit commands refuse bad input with one line naming the argument or file (and the
line of a damaged file), exit status 2, and no traceback; export checks its arguments
before it reads any topic, and never leaves a partial file under the name asked for."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from audit_builders import export, recorded

from streams.audit import logfile
from streams.audit.logfile import AuditFileError, Header
from streams.cli import main


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export(tmp_path_factory.mktemp("log") / "run.jsonl.gz", recorded(12))


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command prints (exit 2, nothing on stdout)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line, no traceback
    assert lines[0].startswith(f"hetsched {argv[0]}: ")
    return lines[0]


def _plain(log: Path, tmp_path: Path) -> list[bytes]:
    """The log as plain JSON lines (header first)."""
    return gzip.decompress(log.read_bytes()).splitlines(keepends=True)


@pytest.mark.parametrize("command", [["replay"], ["explain", "task-001"], ["check"]])
def test_a_missing_log_file_is_named(command: list[str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.jsonl.gz"
    assert refused([*command, str(missing)], capsys) == (
        f"hetsched {command[0]}: {missing}: no such file")


def test_a_damaged_record_line_is_named_with_its_line_number(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _plain(log, tmp_path)
    lines[4] = b'{"topic": "t.hetsched.input-log", "partition": 0}\n'
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    line = refused(["replay", str(damaged)], capsys)
    assert line == (f"hetsched replay: {damaged}: line 5: not an audit record: "
                    "field 'offset' missing")


def test_a_line_that_is_not_json_and_a_foreign_header_are_refused(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _plain(log, tmp_path)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:3]) + lines[3][:20] + b"\n")
    assert f"{cut}: line 4: not an audit record: " in refused(["replay", str(cut)], capsys)
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_bytes(b'{"format": "something-else"}\n' + b"".join(lines[1:]))
    assert refused(["explain", "task-001", str(foreign)], capsys) == (
        f"hetsched explain: {foreign}: line 1: not an audit header: "
        "not a hetsched-audit-log file (format='something-else')")


def test_a_file_that_is_not_gzip_or_is_truncated_is_refused(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_bytes(b"".join(_plain(log, tmp_path)))
    assert "not a gzip file" in refused(["replay", str(plain)], capsys)
    truncated = tmp_path / "truncated.jsonl.gz"
    truncated.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    assert "damaged or truncated gzip data" in refused(["check", str(truncated)], capsys)


def test_profile_names_and_files_are_checked(log: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["replay", str(log), "--policy", "nosuch"], capsys)
    assert line.startswith("hetsched replay: --policy: unknown profile 'nosuch' (built-in: ")
    line = refused(["replay", str(log), "--baseline", "nosuch"], capsys)
    assert line.startswith("hetsched replay: --baseline: unknown profile 'nosuch'")
    missing = tmp_path / "mine.yaml"
    assert refused(["replay", str(log), "--profile", str(missing)], capsys) == (
        f"hetsched replay: --profile {missing}: No such file or directory")
    cases = {
        "a: [1\n": "not YAML/JSON: expected ',' or ']', but got '<stream end>' at line 2",
        "- 1\n": "expected a mapping (name, weights), got list",
        "weights: {fgd: 1}\n": "bad profile config: field 'name' missing",
        "name: x\nweights: {nosuch: 1}\n": "unknown policy 'nosuch'",
    }
    for text, message in cases.items():
        missing.write_text(text)
        line = refused(["replay", str(log), "--profile", str(missing)], capsys)
        assert line.startswith(f"hetsched replay: --profile {missing}: {message}"), line


@pytest.mark.parametrize(("argv", "expected"), [
    (["replay", "{log}", "--jobs", "0"], "--jobs 0: must be at least 1"),
    (["replay", "{log}", "--restore-every", "-1"],
     "--restore-every -1: must be 0 (never) or more"),
    (["explain", "task-001", "{log}", "--top", "-1"],
     "--top -1: must be 0 (no candidates) or more"),
], ids=["no processes", "a negative restore period", "a negative number of candidates"])
def test_counts_out_of_range_are_refused(log: Path, capsys: pytest.CaptureFixture[str],
                                         argv: list[str], expected: str) -> None:
    """They were taken as 1, as 0 and as 'all but the last' before."""
    argv = [a.format(log=log) for a in argv]
    assert refused(argv, capsys) == f"hetsched {argv[0]}: {expected}"


def test_explain_shows_no_candidates_with_top_0(log: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "task-001", str(log), "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "placed" in out and "candidates (--top to list them)" in out
    assert not [line for line in out.splitlines()  # no table, not even its head
                if line.split()[:3] == ["node", "GPUs", "score"]]


def test_export_checks_its_arguments_before_reading_any_topic(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_kafka(*args: object, **kwargs: object) -> None:
        raise AssertionError("export read the topics before checking its arguments")

    monkeypatch.setattr("streams.commands.audit_input.export", no_kafka)
    out = tmp_path / "audit.jsonl.gz"
    assert refused(["export", "-o", str(out), "--from", "yesterday"], capsys).startswith(
        "hetsched export: --from 'yesterday': not a time (RFC 3339 with a zone, or epoch "
        "milliseconds)")
    assert refused(["export", "-o", str(out), "--to", "2026-11-29T14:00:00"], capsys) == (
        "hetsched export: --to '2026-11-29T14:00:00': not a time (RFC 3339 with a zone, or "
        "epoch milliseconds): '2026-11-29T14:00:00': give a time zone (Z or +hh:mm)")
    nowhere = tmp_path / "no-such-dir" / "audit.jsonl.gz"
    assert refused(["export", "-o", str(nowhere)], capsys) == (
        f"hetsched export: --output {nowhere}: directory {nowhere.parent} does not exist")
    assert refused(["export", "-o", str(tmp_path)], capsys) == (
        f"hetsched export: --output {tmp_path}: is a directory")


def test_an_interrupted_write_leaves_no_file_under_the_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = recorded(12)
    path = tmp_path / "audit.jsonl.gz"
    written = []
    line_of = logfile.record_line

    def stops_after_five(r):  # the export is stopped half-way through the file
        if len(written) == 5:
            raise KeyboardInterrupt
        written.append(r)
        return line_of(r)

    monkeypatch.setattr(logfile, "record_line", stops_after_five)
    with pytest.raises(KeyboardInterrupt):
        logfile.write(path, Header(topics=[], exported_at=""), rec.records)
    assert len(written) == 5
    assert list(tmp_path.iterdir()) == []  # no audit file, no .part left behind
    monkeypatch.setattr(logfile, "record_line", line_of)
    logfile.write(path, Header(topics=[], exported_at=""), rec.records)
    assert logfile.read(path)[1] == sorted(rec.records,
                                           key=lambda r: (r.topic, r.partition, r.offset))
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl.gz"]


def test_reading_raises_one_error_type_naming_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    with pytest.raises(AuditFileError, match=f"^{empty}: empty audit file$"):
        logfile.read(empty)


def test_an_objectives_file_that_cannot_be_read_is_named(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "objectives.toml"
    monkeypatch.setenv("HETSCHED_OBJECTIVES", str(missing))
    assert refused(["replay", str(log)], capsys).startswith(
        f"hetsched replay: HETSCHED_OBJECTIVES: objectives file {missing}: ")
    missing.write_text("weights = [")
    assert refused(["replay", str(log)], capsys).startswith(
        f"hetsched replay: HETSCHED_OBJECTIVES: objectives file {missing}: ")
