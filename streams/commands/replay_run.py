"""What ``hetsched replay`` does (its arguments and help: :mod:`streams.commands.replay`).

Apart from the arguments so that ``hetsched replay --help`` does not import the
whole audit path (the worker's step, the codec, the checker) to print its options.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from schemas.command_line import CommandError, check_limits
from schemas.topics import INPUT_LOG
from streams.audit.diff import format_diff
from streams.audit.integrity import INFO, WARNING, Checker, IntegrityReport
from streams.audit.logfile import AuditFileError, Header, LogFile
from streams.audit.records import Record, logical_topic
from streams.audit.source import recorded_profile
from streams.commands.audit_input import log_file, scheduler_from_file, scheduler_named
from streams.replay import ReplayReport, replay

_CAUSE_CHARS = 600


def run(args: argparse.Namespace) -> int:
    check_limits([("--jobs", args.jobs, args.jobs >= 1, "at least 1"),
                  ("--restore-every", args.restore_every, args.restore_every >= 0,
                   "0 (never) or more")])
    with log_file(args) as (path, source):
        header, integrity, decisions, inputs, sizes = _file_in_two_passes(path)
        count = sum(sizes.values())
        base = _baseline(args, decisions)
        if args.policy or args.profile:
            alt = (scheduler_named(args.policy, "--policy") if args.policy
                   else scheduler_from_file(args.profile))
            return _what_if(args, inputs, count, base, alt)
        # The worker's objectives file and queue settings are part of its decisions:
        # replay with the same ones.
        objectives = _objectives()
        config = _queue_config(decisions)
        with _bar(args, count, "replay") as bar:
            try:
                report = replay(inputs, decisions, base, progress=bar.update,
                                jobs=args.jobs, objectives=objectives,
                                restore_every=args.restore_every, cell_sizes=sizes,
                                config=config)
            except AuditFileError as exc:  # the file went bad between the two passes
                raise CommandError(str(exc)) from None
    engine = _engine(decisions)
    if args.json:
        print(orjson.dumps({"replay": report.to_json(), "engine": engine, "integrity": [
            f.__dict__ for f in integrity.findings if f.severity != INFO]},
            option=orjson.OPT_INDENT_2).decode())
    else:
        print(summary(source or header.bootstrap, report, integrity, header.complete, engine))
    if not report.ok:
        return 3 if engine["recorded"] != engine["replayed"] else 1
    return 2 if not integrity.ok else 0


def _engine(decisions: list[Record]) -> dict[str, Any]:
    """The engine version that recorded the log, this one's, and what changed between
    them (``streams.core.engine_version``); a log without placements counts as this
    version's: nothing in it tells another."""
    from streams.audit.source import recorded_engine
    from streams.core.engine_version import CHANGES, ENGINE_VERSION, changes_since

    recorded = recorded_engine(decisions)
    recorded = ENGINE_VERSION if recorded is None else recorded
    changes = (changes_since(recorded) if recorded < ENGINE_VERSION
               else [CHANGES.get(v, f"version {v}, unknown to this engine")
                     for v in range(ENGINE_VERSION + 1, recorded + 1)])
    return {"recorded": recorded, "replayed": ENGINE_VERSION, "changes": changes}


def _file_in_two_passes(path: Path) -> tuple[Header, IntegrityReport, list[Record],
                                             Iterable[Record], dict[str, int]]:
    """(header, integrity, decisions, inputs, inputs per cell) of an audit file, holding the
    decisions but not the inputs: a first pass checks the file and keeps the decisions;
    ``inputs`` reads the file again each time it is iterated, while a replay goes. A
    file whose inputs are not in (topic, partition, offset) order (not one ``export``
    wrote) is read whole, so that the replay sorts it as it sorts any list."""
    try:
        log = LogFile(path)
        checker = Checker(log.header)
        prefix, in_order, last = log.header.topic_prefix, True, None
        sizes: Counter[str] = Counter()
        for r in log:
            checker.add(r)
            if logical_topic(r.topic, prefix) == INPUT_LOG:
                key = (r.topic, r.partition, r.offset)
                in_order = in_order and (last is None or last <= key)
                last = key
                sizes[r.cell or ""] += 1
        integrity = checker.report()
        inputs: Iterable[Record] = _InputsOf(log)
        if not in_order:
            inputs = list(inputs)
    except AuditFileError as exc:
        raise CommandError(str(exc)) from None
    return log.header, integrity, checker.decisions, inputs, sizes


class _InputsOf:
    """The input-log records of an audit file, read anew by each iteration."""

    def __init__(self, log: LogFile) -> None:
        self.log = log

    def __iter__(self) -> Iterator[Record]:
        prefix = self.log.header.topic_prefix
        return (r for r in self.log if logical_topic(r.topic, prefix) == INPUT_LOG)


def _baseline(args: argparse.Namespace, decisions: list[Record]) -> Any:
    """The profile the recorded run used: ``--baseline``, else the one its decisions
    name, else the deployment's ``HETSCHED_PROFILE``, else hetsched."""
    if args.baseline:
        return scheduler_named(args.baseline, "--baseline")
    recorded = recorded_profile(decisions)
    if recorded:
        return scheduler_named(recorded, "the profile the log's decisions name (give "
                                         "--baseline to override)")
    env = os.environ.get("HETSCHED_PROFILE")
    if env:
        return scheduler_named(env, "HETSCHED_PROFILE")
    return scheduler_named("hetsched", "the default profile")


def _queue_config(decisions: list[Record]) -> Any:
    """The queue settings the worker ran with: ``HETSCHED_PREDICT_RUNTIMES`` when set, else
    what the log's placements say (older logs, without the mark, ran without prediction),
    else the worker's default."""
    from streams.audit.source import recorded_predicts_runtimes
    from streams.core.queue import QueueConfig
    from streams.settings import WorkerSettings, flag

    recorded = recorded_predicts_runtimes(decisions)
    default = WorkerSettings.predict_runtimes if recorded is None else recorded
    try:
        return QueueConfig(predict_runtimes=flag("HETSCHED_PREDICT_RUNTIMES", default))
    except SystemExit as exc:
        raise CommandError(str(exc)) from None


def _objectives() -> Any:
    """The compiled ``HETSCHED_OBJECTIVES`` file the worker ran with, or None."""
    from streams.profiles.service import service_objectives
    from streams.settings import read_objectives

    path = os.environ.get("HETSCHED_OBJECTIVES", "").strip()
    if not path:
        return None
    try:
        return service_objectives(read_objectives(path))
    except ValueError as exc:
        raise CommandError(f"HETSCHED_OBJECTIVES: {exc}") from None


def _bar(args: argparse.Namespace, total: int, desc: str) -> Any:
    """A progress bar over the input records (stderr only; stdout keeps the report)."""
    from streams.progress import progress_bar

    return progress_bar(total=total, unit="event", desc=desc,
                        disable=getattr(args, "no_progress", False))


def summary(source: str, report: ReplayReport, integrity: IntegrityReport,
            complete: bool, engine: dict[str, Any] | None = None) -> str:
    rate = report.events / report.elapsed_s if report.elapsed_s else 0.0
    same = "EQUAL" if report.recorded_hash == report.replayed_hash else "DIFFERENT"
    warnings = sum(1 for f in integrity.findings if f.severity == WARNING)
    lines = [
        f"replay of {source} (profile {report.profile})",
        f"  events      {report.events} replayed, {report.skipped} skipped (undecodable) "
        f"in {report.elapsed_s:.2f} s ({rate:,.0f} events/s)",
        f"  decisions   {report.recorded} recorded, {report.replayed} replayed, "
        f"{report.matches} match, {report.mismatches} mismatch",
        f"  hash chain  recorded {report.recorded_hash[:16]}  replayed "
        f"{report.replayed_hash[:16]}  {same}",
        f"  integrity   {len(integrity.errors)} errors, {warnings} warnings, "
        f"{integrity.counts['transactional gap']} transactional gaps (normal), "
        f"{integrity.counts['time regression']} event-time regressions (normal)",
    ]
    lines += [f"    {f}" for f in integrity.findings if f.severity != INFO][:20]
    if not complete:
        lines.append("  note: the log does not start at the cells' beginning; a replay from "
                     "nothing cannot rebuild their state")
    other = engine is not None and engine["recorded"] != engine["replayed"]
    if engine is not None and other:
        newer = "newer than" if engine["recorded"] > engine["replayed"] else "older than"
        lines.append(f"  engine      recorded by version {engine['recorded']}, {newer} this "
                     f"replay's {engine['replayed']}; the rules that changed:")
        lines += [f"    - {c}" for c in engine["changes"]]
    if report.first is None:
        if report.ok and report.events == 0:
            lines.append("OK: the log has no input records: there is nothing to reproduce")
        else:
            lines.append("OK: every recorded decision was reproduced" if report.ok
                         else "OTHER ENGINE: the hash chains differ where the rules changed"
                         if other else "MISMATCH: the hash chains differ")
        return "\n".join(lines)
    f = report.first
    if other:
        lines.append(f"OTHER ENGINE: {report.mismatches} decision(s) differ where the rules "
                     f"changed, not a mismatch of this engine (replay with the version that "
                     f"recorded the log to check it); first in {f.cell}, decision "
                     f"#{f.position}: {f.problem}")
    else:
        lines.append(f"MISMATCH: {report.mismatches} decision(s); first in {f.cell}, "
                     f"decision #{f.position}: {f.problem}")
    lines += _cause_lines(f.cause)
    doc = f.recorded or f.replayed or {}
    lines.append(f"  decision {doc.get('event_id')} {doc.get('type')} task "
                 f"{(doc.get('payload') or {}).get('task_id')}")
    lines += format_diff(f.diffs)
    return "\n".join(lines)


def _cause_lines(cause: Record | None) -> list[str]:
    if cause is None:
        return ["  caused by: an event that is not in the input log"]
    doc = cause.doc or {}
    text = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS).decode()
    if len(text) > _CAUSE_CHARS:
        text = text[:_CAUSE_CHARS] + "..."
    return [f"  caused by: {doc.get('type')} {doc.get('event_id')} at "
            f"{cause.where} "
            f"({doc.get('source')}, {doc.get('occurred_at')})", f"    {text}"]


def _what_if(args: argparse.Namespace, inputs: Iterable[Record], count: int, base: Any,
             alt: Any) -> int:
    from streams.audit.whatif import Metrics, compare

    m1, m2 = Metrics(), Metrics()
    try:
        with _bar(args, count, f"baseline {base.profile.name}") as bar:
            replay(inputs, None, base, m1, progress=bar.update)
        with _bar(args, count, f"what-if {alt.profile.name}") as bar:
            replay(inputs, None, alt, m2, progress=bar.update)
    except AuditFileError as exc:  # the file went bad between the passes
        raise CommandError(str(exc)) from None
    result = compare(m1, m2) | {"baseline_profile": base.profile.name,
                                "what_if_profile": alt.profile.name}
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"what-if: {alt.profile.name} instead of {base.profile.name} over "
          f"{count} input records")
    print(f"  decisions that differ: {result['decisions_differ']} of "
          f"{result['baseline']['decisions']}")
    for key, value in result["baseline"].items():
        print(f"  {key:26} {value!s:>14}  ->  {result['what_if'][key]!s:>14}")
    return 0
