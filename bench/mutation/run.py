"""``./dev mutate``: mutation testing of the decision core, and its score per module.

Why a runner around mutmut: the score the project tracks (BENCHMARKS.md) is per
module, with the mutants we judged equivalent (``equivalents.toml``, each with its
reason) taken out of the count, and every other surviving mutant named, so that a
survivor is either killed by a test or written down as harmless, never ignored.
mutmut itself mutates and runs (``[tool.mutmut]`` in pyproject.toml: which files,
which fast unit tests); this script picks the modules, runs it niced (the machine is
shared) and reads its results (``mutants/**/*.py.meta``).

    ./dev mutate                     # streams/core, policies, profiles, check
    ./dev mutate streams/core/queue.py            # one module (or a package folder)
    ./dev mutate streams/core/scheduler.py::_score_feasible_py   # one function
    ./dev mutate --report streams/core/queue.py   # the score of the last run, nothing run
    ./dev mutate --retest streams/core/queue.py   # after adding tests: survivors again
    ./dev mutate native [--report | --retest]     # the compiled core: cargo-mutants (native.py)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EQUIVALENTS = Path(__file__).with_name("equivalents.toml")
DEFAULT_TARGETS = ("streams/core", "streams/policies", "streams/profiles", "streams/check")
KILLED_CODES = {1, 3, -24, 24, 36, 152, 255, -9, -11, 37}
"""mutmut's exit codes of a caught mutant: a failed test, a timeout (an endless loop
is caught too), a crash, or mypy rejecting it."""
SURVIVED, NO_TESTS = 0, {5, 33}


@dataclass
class ModuleScore:
    path: str
    killed: int = 0
    survived: int = 0
    no_tests: int = 0
    equivalent: int = 0
    not_run: int = 0
    listed_but_killed: int = 0
    unexplained: tuple[str, ...] = ()

    @property
    def counted(self) -> int:
        """Mutants that a test could catch: all but the equivalent and the unrun ones."""
        return self.killed + self.survived + self.no_tests

    @property
    def score(self) -> str:
        return f"{self.killed / self.counted:.1%}" if self.counted else "not run"


def equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Mutant name -> why it cannot change behaviour (``equivalents.toml``)."""
    data = tomllib.loads(path.read_text("utf-8"))
    out: dict[str, str] = {}
    for item in data.get("equivalent", []):
        name, reason = item.get("mutant"), item.get("reason", "").strip()
        if not name or not reason:
            raise ValueError(f"{path.name}: every equivalent needs 'mutant' and 'reason', "
                             f"got {item!r}")
        out[name] = reason
    return out


def mutant_prefix(target: str) -> str:
    """``streams/core/queue.py`` -> ``streams.core.queue.`` (mutmut's mutant names); a
    ``path.py::function`` or ``path.py::Class.method`` target narrows it to that code."""
    path, _, code = target.partition("::")
    path = path.removesuffix("/").removesuffix(".py")
    if not (REPO / f"{path}.py").is_file() and not (REPO / path).is_dir():
        raise SystemExit(f"mutate: target {target!r} is neither a module nor a package folder")
    if code and not (REPO / f"{path}.py").is_file():
        raise SystemExit(f"mutate: target {target!r} names code in a folder, not a module")
    module = path.replace("/", ".") + "."
    if not code:
        return module
    cls, _, func = code.rpartition(".")
    return module + (f"x\u01c1{cls}\u01c1{func}__mutmut_" if cls else f"x_{code}__mutmut_")


def scores(targets: list[str], known: dict[str, str]) -> list[ModuleScore]:
    """The last run's results: one row per module under a folder or module target, one
    per ``::`` target."""
    out = []
    metas = sorted((REPO / "mutants").glob("streams/**/*.py.meta"))
    for target in targets:
        prefix = mutant_prefix(target)
        for meta in metas:
            rel = meta.relative_to(REPO / "mutants").as_posix().removesuffix(".meta")
            if not (rel.removesuffix(".py").replace("/", ".") + ".").startswith(
                    prefix if "::" not in target else prefix.rsplit(".", 1)[0] + "."):
                continue
            codes = {name: code for name, code in
                     json.loads(meta.read_text("utf-8"))["exit_code_by_key"].items()
                     if name.startswith(prefix)}
            if codes:
                out.append(_row(target if "::" in target else rel, codes, known))
    return out


def _row(label: str, codes: dict[str, int | None], known: dict[str, str]) -> ModuleScore:
    row, unexplained = ModuleScore(label), []
    for name, code in sorted(codes.items()):
        if code is None:
            row.not_run += 1
        elif name in known and code not in KILLED_CODES:
            row.equivalent += 1
        elif code in KILLED_CODES:
            row.killed += 1
            if name in known:  # a test tells it apart after all: the entry is wrong
                row.listed_but_killed += 1
        elif code == SURVIVED:
            row.survived += 1
            unexplained.append(name)
        elif code in NO_TESTS:
            row.no_tests += 1
            unexplained.append(name)
        else:
            row.not_run += 1  # interrupted or skipped
    row.unexplained = tuple(unexplained)
    return row


def forget_survivors(targets: list[str]) -> int:
    """Mark the targets' surviving (and untested) mutants unrun, so the next run tests
    them again: mutmut keeps a verdict until the mutated function changes, so a test
    added to kill a survivor would otherwise not be tried on it."""
    prefixes = tuple(mutant_prefix(t) for t in targets)
    count = 0
    for meta in (REPO / "mutants").glob("streams/**/*.py.meta"):
        data = json.loads(meta.read_text("utf-8"))
        codes = data["exit_code_by_key"]
        stale = [n for n, c in codes.items()
                 if n.startswith(prefixes) and (c == SURVIVED or c in NO_TESTS)]
        if stale:
            codes.update(dict.fromkeys(stale))
            meta.write_text(json.dumps(data, indent=4), "utf-8")
            count += len(stale)
    return count


def render(rows: list[ModuleScore]) -> str:
    lines = ["| module | mutants | killed | survived | no test | equivalent | not run | score |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    total = Counter[str]()
    for r in rows:
        lines.append(f"| {r.path} | {r.counted + r.equivalent + r.not_run} | {r.killed} | "
                     f"{r.survived} | {r.no_tests} | {r.equivalent} | {r.not_run} | "
                     f"{r.score} |")
        total.update(killed=r.killed, counted=r.counted)
    if len(rows) > 1 and total["counted"]:
        lines.append(f"| all | | {total['killed']} | | | | | "
                     f"{total['killed'] / total['counted']:.1%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["native"]:
        # The compiled core is Rust: cargo-mutants mutates it, not mutmut (native.py).
        native = Path(__file__).with_name("native.py")
        return subprocess.run([sys.executable, str(native), *argv[1:]], check=False).returncode
    parser = argparse.ArgumentParser(prog="./dev mutate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS),
                        help="modules, package folders or module.py::function "
                             "(default: %(default)s)")
    parser.add_argument("--report", action="store_true",
                        help="only print the scores of the last run")
    parser.add_argument("--retest", action="store_true",
                        help="test the last run's survivors again (after adding tests)")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                        help="mutants tested at once (default: %(default)s)")
    args = parser.parse_args(argv)
    globs = [mutant_prefix(t) + "*" for t in args.targets]
    known = equivalents()
    if args.retest and not args.report:
        print(f"mutate: testing {forget_survivors(args.targets)} survivors again", flush=True)
    if not args.report:
        mutmut = Path(sys.executable).with_name("mutmut")
        cmd = [str(mutmut), "run", "--max-children", str(args.jobs), *globs]
        print("mutate:", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=REPO, check=False)
    rows = scores(args.targets, known)
    if not rows:
        print("mutate: no results for these targets yet (run without --report)")
        return 1
    print(render(rows))
    for r in rows:
        for name in r.unexplained:
            print(f"survivor: {name}  (mutmut show {name})")
        if r.listed_but_killed:
            print(f"mutate: {r.listed_but_killed} mutants of {r.path} listed in "
                  f"{EQUIVALENTS.name} were killed: take them off the list")
    return 0


if __name__ == "__main__":
    sys.exit(main())
