"""``./dev mutate native``: mutation testing of the compiled core (``native/``).

Why cargo-mutants: it is the maintained mutation tool for Rust. It changes the crate's
source one mutant at a time (an operator, a constant, a whole function body replaced
by a default value) and runs ``cargo test`` on each. The crate's one test,
``native/tests/python_oracle.rs``, runs the project's differential tests (the core
against its Python oracle in ``tests/oracle/``) against the mutated build. So a Rust
mutant is judged by the tests that hold the core's decisions, the same way mutmut
judges the Python (``run.py``), and nothing is tested by Rust-only tests written
beside it.

    ./dev mutate native                     # every mutant of the crate
    ./dev mutate native --file src/score.rs # one source file (a cargo-mutants glob)
    ./dev mutate native --retest            # only what the last run did not catch
    ./dev mutate native --report            # the last run's scores, nothing run

A mutant that does not compile ("unviable") is left out of the score, as cargo-mutants
itself does; one that hangs until the timeout counts as caught. Every missed mutant
is killed by a new test or listed under ``[[native_equivalent]]`` in
``equivalents.toml`` with the reason it cannot change behaviour. Results are kept in
``mutants/native/`` (ignored by git): cargo-mutants' output of the last run, and
``RECORD``, every mutant's latest outcome (a ``--retest`` updates the ones it ran; a
full run starts it again). The tests import the project from this checkout while the
run lasts: do not edit it meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "native"
OUT = REPO / "mutants" / "native"
RECORD = OUT / "outcomes-all.json"
EQUIVALENTS = Path(__file__).with_name("equivalents.toml")
CAUGHT = {"CaughtMutant", "Timeout"}
MISSED = "MissedMutant"
UNVIABLE = "Unviable"


@dataclass
class FileScore:
    path: str
    caught: int = 0
    missed: int = 0
    equivalent: int = 0
    unviable: int = 0
    listed_but_caught: int = 0
    survivors: list[str] = field(default_factory=list)

    @property
    def counted(self) -> int:
        return self.caught + self.missed

    @property
    def score(self) -> str:
        return f"{self.caught / self.counted:.1%}" if self.counted else "not run"


def equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """cargo-mutants' mutant name -> why it cannot change behaviour."""
    out: dict[str, str] = {}
    for item in tomllib.loads(path.read_text("utf-8")).get("native_equivalent", []):
        name, reason = item.get("mutant"), item.get("reason", "").strip()
        if not name or not reason:
            raise ValueError(f"{path.name}: every native_equivalent needs 'mutant' and "
                             f"'reason', got {item!r}")
        out[name] = reason
    return out


def outcomes(out: Path = OUT) -> list[tuple[str, str, str]]:
    """(file, mutant name, summary) of every mutant of the last run."""
    path = out / "mutants.out" / "outcomes.json"
    if not path.is_file():
        return []
    rows = []
    for o in json.loads(path.read_text("utf-8"))["outcomes"]:
        mutant = o["scenario"].get("Mutant") if isinstance(o["scenario"], dict) else None
        if mutant:  # the baseline is a scenario too
            rows.append((mutant["file"], mutant["name"], o["summary"]))
    return rows


def record(found: list[tuple[str, str, str]], retest: bool, path: Path = RECORD) -> None:
    """Keep each mutant's latest outcome: a full run's replace the record, a retest's
    update it (cargo-mutants' own output of an ``--iterate`` run holds only what it ran)."""
    kept: dict[str, list[str]] = {}
    if retest and path.is_file():
        kept = json.loads(path.read_text("utf-8"))
    kept.update({name: [file, summary] for file, name, summary in found})
    path.write_text(json.dumps(kept, indent=1, sort_keys=True), "utf-8")


def recorded(path: Path = RECORD) -> list[tuple[str, str, str]]:
    """The record as (file, name, summary) rows; the last run's output without one."""
    if not path.is_file():
        return outcomes()
    return [(file, name, summary)
            for name, (file, summary) in json.loads(path.read_text("utf-8")).items()]


def scores(found: list[tuple[str, str, str]], known: dict[str, str]) -> list[FileScore]:
    by_file: dict[str, FileScore] = {}
    for file, name, summary in found:
        row = by_file.setdefault(file, FileScore(file))
        if summary == UNVIABLE:
            row.unviable += 1
        elif summary in CAUGHT:
            row.caught += 1
            row.listed_but_caught += name in known
        elif name in known:
            row.equivalent += 1
        elif summary == MISSED:
            row.missed += 1
            row.survivors.append(name)
        else:
            raise ValueError(f"cargo-mutants outcome {summary!r} of {name!r} is not known here")
    return [by_file[f] for f in sorted(by_file)]


def render(rows: list[FileScore]) -> str:
    lines = ["| file | mutants | caught | missed | equivalent | unviable | score |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    total = Counter[str]()
    for r in rows:
        lines.append(f"| native/{r.path} | {r.counted + r.equivalent + r.unviable} "
                     f"| {r.caught} | {r.missed} | {r.equivalent} | {r.unviable} "
                     f"| {r.score} |")
        total.update(caught=r.caught, counted=r.counted)
    if len(rows) > 1 and total["counted"]:
        lines.append(f"| all | | {total['caught']} | | | | "
                     f"{total['caught'] / total['counted']:.1%} |")
    return "\n".join(lines)


def run(jobs: int, files: list[str], retest: bool) -> None:
    if shutil.which("cargo") is None or subprocess.run(
            ["cargo", "mutants", "--version"], capture_output=True, check=False).returncode:
        raise SystemExit("mutate: cargo-mutants is not installed "
                         "(cargo install --locked cargo-mutants)")
    cmd = ["cargo", "mutants", "--jobs", str(jobs), "--output", str(OUT)]
    cmd += [arg for f in files for arg in ("--file", f)]
    if retest:
        cmd.append("--iterate")
    print("mutate:", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=CRATE, env={**os.environ, "HETSCHED_REPO": str(REPO)}, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev mutate native", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", action="append", default=[], metavar="GLOB",
                        help="only these source files of the crate (repeatable)")
    parser.add_argument("--report", action="store_true",
                        help="only print the scores of the last run")
    parser.add_argument("--retest", action="store_true",
                        help="only the mutants the last run did not catch")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                        help="mutants built and tested at once (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.report:
        run(args.jobs, args.file, args.retest)
        record(outcomes(), retest=args.retest)
    known = equivalents()
    rows = scores(recorded(), known)
    if not rows:
        print("mutate: no results of the compiled core yet (run without --report)")
        return 1
    print(render(rows))
    for r in rows:
        for name in r.survivors:
            print(f"survivor: {name}")
        if r.listed_but_caught:
            print(f"mutate: {r.listed_but_caught} mutants of native/{r.path} listed in "
                  f"{EQUIVALENTS.name} were caught: take them off the list")
    return 0


if __name__ == "__main__":
    sys.exit(main())
