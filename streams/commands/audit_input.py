"""What the audit commands (replay, explain, check, export) read from the user.

A missing or damaged log file, an unknown profile name or a profile file that
does not parse is the user's to fix, so each becomes a ``CommandError`` that
names the argument (or file and line) and the value: one line, exit status 2,
no traceback.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.command_line import CommandError, yaml_problem
from streams.audit.kafka_source import MissingTopics
from streams.audit.source import DEFAULT_TOPICS, export, parse_time, topic_prefix

if TYPE_CHECKING:
    from streams.audit.integrity import IntegrityReport
    from streams.audit.logfile import Header
    from streams.core.scheduler import Scheduler


@contextmanager
def log_file(args: argparse.Namespace, topics: tuple[str, ...] = DEFAULT_TOPICS
             ) -> Iterator[tuple[Path, str | None]]:
    """(the audit file to read, the name to report it by) for ``args.file`` and
    ``args.topic_prefix``: the file given, or the cluster's ``topics`` (by default its
    input log and decisions) exported to a temporary file (a spool, gzip level 1,
    removed after), so a command reading the cluster holds no more than one reading a
    file does. The name is None for the cluster (a report names its bootstrap)."""
    if args.file:
        yield Path(args.file), args.file
        return
    from streams.progress import advancing, progress_bar

    with tempfile.TemporaryDirectory(prefix="hetsched-audit-") as spool:
        path = Path(spool) / "cluster.jsonl.gz"
        with progress_bar(total=None, unit="rec", desc="read cluster",
                          disable=getattr(args, "no_progress", False)) as bar:
            exported(path, args.topic_prefix, topics, progress=advancing(bar),
                     compresslevel=1, check=False)  # checked as it is read back
        yield path, None


def exported(path: Path, prefix_given: str | None, topics: tuple[str, ...],
             **kwargs: Any) -> tuple[Header, int, IntegrityReport]:
    """``source.export`` of the deployment's topics; a topic the cluster lacks is a
    ``CommandError`` naming it and the prefix (most often the prefix is wrong)."""
    prefix = topic_prefix(prefix_given)
    try:
        return export(path, prefix, topics, **kwargs)
    except MissingTopics as exc:
        raise CommandError(f"{exc} (topic prefix {prefix!r}: give the deployment's with "
                           "--topic-prefix or HETSCHED_TOPIC_PREFIX)") from None


def scheduler_named(name: str, given_by: str) -> Scheduler:
    """The built-in profile ``name``; ``given_by`` says where the name came from."""
    from streams.profiles.service import service_scheduler

    try:
        return service_scheduler(name)
    except ValueError as exc:
        raise CommandError(f"{given_by}: {exc}") from None


def scheduler_from_file(path: str) -> Scheduler:
    """The profile of a YAML/JSON file (``--profile``), compiled as the service compiles."""
    import yaml

    from streams.core.profile import Profile
    from streams.profiles.compile import compile_profile
    from streams.profiles.service import SEED, typical_tasks

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise CommandError(f"--profile {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise CommandError(f"--profile {path}: not YAML/JSON: {yaml_problem(exc)}") from None
    if not isinstance(raw, dict):
        raise CommandError(f"--profile {path}: expected a mapping (name, weights), "
                           f"got {type(raw).__name__}")
    try:
        return compile_profile(Profile.from_config(raw), {"typical": typical_tasks(),
                                                          "seed": SEED})
    except (ValueError, TypeError, KeyError) as exc:
        raise CommandError(f"--profile {path}: {exc}") from None


def time_arg(flag: str, text: str | None) -> int | None:
    """``parse_time`` of a ``--from``/``--to`` value, a bad one naming the flag."""
    try:
        return parse_time(text)
    except ValueError as exc:
        raise CommandError(f"{flag} {text!r}: not a time (RFC 3339 with a zone, or epoch "
                           f"milliseconds): {exc}") from None


def writable_output(flag: str, path: str) -> Path:
    """The file a command will write, checked before any work is done for it."""
    out = Path(path)
    if out.is_dir():
        raise CommandError(f"{flag} {path}: is a directory")
    parent = out.parent
    if not parent.is_dir():
        raise CommandError(f"{flag} {path}: directory {parent} does not exist")
    return out
