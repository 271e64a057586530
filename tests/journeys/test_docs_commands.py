"""Docs that cannot rot: every command block of README.md and docs/*.md is run, or
says why it cannot be and is checked for structure (see doc_blocks.py for the
markers).

The structure of every block, run or not: bash parses it, every ``hetsched`` and
``hetsched-node`` command in it parses with the real command-line parsers (a
renamed flag fails here), and every benchmark script accepts the flags it is
shown with. The ``run`` and ``serve`` blocks then run in document order, each
document in its own scratch folder (with the repository's ``.venv`` and
``.cache`` linked in, as the docs assume you stand in a checkout), the
``cluster`` ones against a default cluster started as docs/service.md says.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doc_blocks import REPO, SKIP_REASONS, Block, blocks, command_lines, documents
from operator_tools import BIN, Operator

from agents.cli import build_parser as node_parser
from streams.cli import build_parser as scheduler_parser

ALL_BLOCKS = [b for d in documents() for b in blocks(d)]
COMMAND_BLOCKS = [b for b in ALL_BLOCKS if b.is_command]

SERVE_UP_S = 12.0
"""How long a long-running command must stay up before it is stopped with Ctrl-C."""

CLUSTER_ORDER = ("service.md", "api.md", "README.md", "auditing.md", "guarantees.md",
                 "node.md")
"""Cluster documents in the order a reader meets them: service.md submits train-42,
the task the others explain and check."""


def test_every_command_block_says_what_the_docs_test_does_with_it() -> None:
    problems = []
    for block in ALL_BLOCKS:
        if block.mode == "file":
            if len(block.marker) != 2:
                problems.append(f"{block.where}: `file` takes one file name")
            continue
        if not block.is_command:
            continue
        if block.mode in ("run", "serve"):
            extra = set(block.marker[1:]) - {"cluster", "repo"}
            if extra:
                problems.append(f"{block.where}: unknown words {sorted(extra)}")
        elif block.mode == "skip":
            if block.marker[1:2] == () or block.marker[1] not in SKIP_REASONS:
                problems.append(f"{block.where}: skip needs a reason of {sorted(SKIP_REASONS)}")
        else:
            problems.append(f"{block.where}: no `<!-- doc-test: run|serve|skip ... -->` above "
                            "it (a diagram or sample output takes the language `text`)")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("block", COMMAND_BLOCKS, ids=[b.where for b in COMMAND_BLOCKS])
def test_a_command_block_parses_and_so_does_every_hetsched_command_in_it(block: Block) -> None:
    syntax = subprocess.run(["bash", "-n"], input=block.text, text=True, capture_output=True,
                            check=False)
    assert syntax.returncode == 0, f"{block.where}: {syntax.stderr}"
    for argv in command_lines(block.text):
        program = Path(argv[0]).name
        parser = {"hetsched": scheduler_parser, "hetsched-node": node_parser}.get(program)
        if parser is None:
            continue
        try:
            parser().parse_args(argv[1:])
        except SystemExit as exc:
            if argv[1:] != ["--help"] or exc.code != 0:
                raise AssertionError(f"{block.where}: `{' '.join(argv)}` does not parse "
                                     f"(exit {exc.code})") from None


DEV_SCRIPTS = {"mutate": "bench/mutation/run.py"}
"""``./dev`` commands that run a benchmark script with the words after them (dev)."""


def bench_argv(argv: list[str]) -> list[str] | None:
    """``argv`` as ``PYTHON SCRIPT ARGS`` when it runs a benchmark script (directly, or
    through ``./dev mutate``), else None."""
    if len(argv) > 1 and Path(argv[0]).name == "dev" and argv[1] in DEV_SCRIPTS:
        return [argv[0], DEV_SCRIPTS[argv[1]], *argv[2:]]
    if len(argv) > 1 and argv[1].startswith("bench/"):
        return argv
    return None


BENCH_LINES = [(b, bench) for b in COMMAND_BLOCKS for argv in command_lines(b.text)
               if (bench := bench_argv(argv)) is not None]


def test_dev_mutate_lines_are_checked_as_the_mutation_script() -> None:
    assert bench_argv(["./dev", "mutate", "--report", "x.py"]) == [
        "./dev", "bench/mutation/run.py", "--report", "x.py"]
    assert bench_argv(["./dev", "lint"]) is None
    assert any(a[1] == "bench/mutation/run.py" and "--retest" in a for _, a in BENCH_LINES)


@pytest.mark.parametrize(("block", "argv"), BENCH_LINES,
                         ids=[f"{b.where} {a[1]}" for b, a in BENCH_LINES])
def test_a_benchmark_in_the_docs_accepts_its_flags(block: Block, argv: list[str]) -> None:
    words = argv[2:]
    subcommand = words[:1] if words and not words[0].startswith("-") else []
    shown = subprocess.run([sys.executable, argv[1], *subcommand, "--help"], cwd=REPO,
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, f"{block.where}: {shown.stderr}"
    for flag in (w for w in argv[2:] if w.startswith("--")):
        assert flag.split("=")[0] in shown.stdout, f"{block.where}: {argv[1]} has no {flag}"


def _runnable(cluster: bool) -> list[Path]:
    """The documents with blocks to run (with or without a cluster), in reading order."""
    docs = sorted({b.path for b in COMMAND_BLOCKS
                   if b.mode in ("run", "serve") and b.has("cluster") == cluster},
                  key=lambda p: CLUSTER_ORDER.index(p.name) if p.name in CLUSTER_ORDER else 99)
    return docs


def _scratch(tmp_path: Path) -> Path:
    """A folder standing in for the checkout the docs assume, linking what they use."""
    for name in (".venv", ".cache"):
        if (REPO / name).exists():
            (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def _env(bootstrap: str) -> dict[str, str]:
    operator = Operator(Path("."), bootstrap)
    return dict(operator.env, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def _addresses(text: str, bootstrap: str) -> str:
    """The docs name the embedded broker's default address; a test broker may differ."""
    return text.replace("127.0.0.1:9092", bootstrap)


def run_document(path: Path, scratch: Path, bootstrap: str, cluster: bool) -> None:
    env = _env(bootstrap)
    for block in blocks(path):  # the example files first: a command may come before one
        if block.mode == "file":
            (scratch / block.marker[1]).write_text(block.text)
    for block in blocks(path):
        if not block.is_command or block.mode not in ("run", "serve") or \
                block.has("cluster") != cluster:
            continue
        cwd = REPO if block.has("repo") else scratch
        text = _addresses(block.text, bootstrap)
        if block.mode == "run":
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, (f"{block.where} exited {done.returncode}:\n"
                                          f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        else:
            for line in (ln for ln in text.splitlines() if ln.strip()):
                serve(block, line, cwd, env)


def serve(block: Block, line: str, cwd: Path, env: dict[str, str]) -> None:
    """Start a long-running command, see it stay up, stop it as Ctrl-C does."""
    log = cwd / f"serve-{os.getpid()}-{time.monotonic_ns()}.log" if cwd != REPO else \
        Path(os.environ.get("TMPDIR", "/tmp")) / f"doc-serve-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            time.sleep(SERVE_UP_S)
            assert proc.poll() is None, (f"{block.where}: `{line}` ended with "
                                         f"{proc.returncode}:\n{log.read_text()[-3000:]}")
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(90)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert code in (0, 130), f"{block.where}: `{line}` stopped with {code}:\n" \
                             f"{log.read_text()[-3000:]}"


@pytest.mark.integration
@pytest.mark.parametrize("path", _runnable(cluster=False), ids=lambda p: p.name)
def test_the_documents_commands_run(path: Path, kafka_bootstrap: str, tmp_path: Path) -> None:
    run_document(path, _scratch(tmp_path), kafka_bootstrap, cluster=False)


@pytest.mark.integration
def test_the_documents_commands_run_on_a_default_cluster_in_reading_order(
        cluster: Operator, tmp_path: Path) -> None:
    """One test, not one per document: later documents use what earlier ones made
    (service.md submits train-42, the task the audit commands explain)."""
    docs = _runnable(cluster=True)
    assert [p.name for p in docs] == [n for n in CLUSTER_ORDER if REPO.joinpath(
        "README.md" if n == "README.md" else f"docs/{n}") in docs], docs
    for path in docs:
        scratch = tmp_path / path.stem
        scratch.mkdir()
        run_document(path, _scratch(scratch), cluster.bootstrap, cluster=True)
