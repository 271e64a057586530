"""The portable audit file: gzip'd JSON lines, one header line then one line per record.

Header (first line)::

    {"format": "hetsched-audit-log", "format_version": 1, "exported_at": "...",
     "source": {"bootstrap": "...", "topic_prefix": "..."}, "topics": [...],
     "isolation_level": "read_committed", "range": {"from_ms": null, "to_ms": null},
     "partitions": {"<topic>": {"<p>": {"start": 0, "end": 42}}}, "complete": true}

``partitions`` holds the broker's log-start and end offsets at export time
(under read_committed, the end is the last stable offset); ``complete`` says
every exported partition was read from its log start, which replay needs (a
cell's state is the fold of its whole input log). Each record line::

    {"topic": "...", "partition": 0, "offset": 7, "timestamp_ms": 1764417600000,
     "key": "cell-0", "value": {...envelope...}}

``value`` is the JSON object when re-serialising it canonically (sorted keys,
orjson) gives back the exact original bytes, which holds for every record the
scheduler writes; otherwise the bytes are kept as ``value_b64`` (``key_b64``
likewise), so nothing is lost. Records are written sorted by topic, partition,
offset.

Reading fails with one :class:`AuditFileError` naming the file, and the line
for a damaged one, whatever is wrong (missing, not gzip, truncated, not JSON, a
field missing). Writing goes to ``NAME.part`` and renames it when complete, so
an interrupted export never leaves a truncated file under the name asked for.
"""

from __future__ import annotations

import base64
import gzip
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from schemas.codec import trimmed
from streams.audit.records import Record


class AuditFileError(ValueError):
    """A file that cannot be read as an audit log; the message names it (and the line)."""


FORMAT = "hetsched-audit-log"
FORMAT_VERSION = 1
_SORTED = orjson.OPT_SORT_KEYS


@dataclass
class Header:
    """What was exported, from where, and how (see the module docstring)."""

    topics: list[str]
    exported_at: str
    bootstrap: str = ""
    topic_prefix: str = ""
    isolation_level: str = "read_committed"
    from_ms: int | None = None
    to_ms: int | None = None
    partitions: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    complete: bool = True
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "format_version": self.format_version,
            "exported_at": self.exported_at,
            "source": {"bootstrap": self.bootstrap, "topic_prefix": self.topic_prefix},
            "topics": self.topics, "isolation_level": self.isolation_level,
            "range": {"from_ms": self.from_ms, "to_ms": self.to_ms},
            "partitions": self.partitions, "complete": self.complete,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Header:
        if doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (format={doc.get('format')!r})")
        version = doc.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(f"unsupported {FORMAT} format_version {version!r}")
        source, rng = doc.get("source") or {}, doc.get("range") or {}
        return cls(
            topics=list(doc.get("topics", [])), exported_at=str(doc.get("exported_at", "")),
            bootstrap=source.get("bootstrap", ""), topic_prefix=source.get("topic_prefix", ""),
            isolation_level=doc.get("isolation_level", "read_committed"),
            from_ms=rng.get("from_ms"), to_ms=rng.get("to_ms"),
            partitions=doc.get("partitions", {}), complete=bool(doc.get("complete", False)),
            format_version=version,
        )


def record_line(r: Record) -> bytes:
    """One record as a JSON line (lossless, see the module docstring)."""
    line: dict[str, Any] = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                            "timestamp_ms": r.timestamp_ms}
    line.update(_bytes_field("key", r.key))
    if r.value is None:
        line["value"] = None
    else:
        doc = r.parsed()
        if doc is not None and orjson.dumps(doc, option=_SORTED) == r.value:
            line["value"] = doc
        else:
            line["value_b64"] = base64.b64encode(r.value).decode()
    return orjson.dumps(line) + b"\n"


def parse_line(raw: bytes) -> Record:
    """The record of one JSON line (inverse of :func:`record_line`)."""
    line = orjson.loads(raw)
    if "value_b64" in line:
        value: bytes | None = base64.b64decode(line["value_b64"])
    elif line.get("value") is None:
        value = None
    else:
        value = trimmed(orjson.dumps(line["value"], option=_SORTED))  # kept: a whole log
    if "key_b64" in line:
        key: bytes | None = base64.b64decode(line["key_b64"])
    else:
        key = line["key"].encode() if line.get("key") is not None else None
    record = Record(line["topic"], int(line["partition"]), int(line["offset"]),
                    line.get("timestamp_ms"), key, value)
    doc = line.get("value")
    return record.knowing_head(doc) if isinstance(doc, dict) else record


def _bytes_field(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode()}


def write(path: Path, header: Header, records: Iterable[Record]) -> int:
    """Write an audit file (gzip unless ``path`` ends in ``.jsonl``); returns records written.

    The records are sorted first (held: :func:`writing` writes them one at a time)."""
    ordered = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    with writing(path, header) as add:
        for r in ordered:
            add(r)
    return len(ordered)


@contextmanager
def writing(path: Path, header: Header, compresslevel: int = 6) -> Iterator[Callable[[Record],
                                                                                     None]]:
    """An audit file written one record at a time, by calling what this yields, in
    (topic, partition, offset) order (ValueError naming the record otherwise).

    Written as ``path`` + ``.part`` and renamed when the block ends without an error:
    ``path`` is either the complete file or untouched. ``compresslevel`` (gzip) 1 is
    about three times faster to write than 6 for a somewhat larger file (a spool)."""
    part = path.with_name(path.name + ".part")
    last: tuple[str, int, int] | None = None
    try:
        with _open(part, "wb", gz=_gzipped(path), compresslevel=compresslevel) as f:
            f.write(orjson.dumps(header.to_json()) + b"\n")

            def add(r: Record) -> None:
                nonlocal last
                key = (r.topic, r.partition, r.offset)
                if last is not None and key <= last:
                    raise ValueError(f"audit file {path}: record {r.topic}[{r.partition}]@"
                                     f"{r.offset} written after {last[0]}[{last[1]}]@{last[2]}")
                last = key
                f.write(record_line(r))

            yield add
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


class LogFile:
    """An audit file read lazily: the header at once, the records by iterating, each
    iteration a new pass over the file, so a long log need not be held in memory
    (``hetsched replay`` reads a file twice: decisions and checks, then the inputs).

    Raises :class:`AuditFileError` (naming the file, and the line when one is damaged),
    when opened and while iterated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with _reading(path) as lines:
            first = next(lines, None)
            if first is None:
                raise AuditFileError(f"{path}: empty audit file")
            self.header: Header = _parsed(
                path, *first, lambda raw: Header.from_json(orjson.loads(raw)), "header")

    def __iter__(self) -> Iterator[Record]:
        with _reading(self.path) as lines:
            if next(lines, None) is None:
                raise AuditFileError(f"{self.path}: empty audit file")
            for n, raw in lines:
                yield _parsed(self.path, n, raw, parse_line, "record")


def read(path: Path) -> tuple[Header, list[Record]]:
    """Read an audit file: its header and its records, in file order (:class:`LogFile`)."""
    log = LogFile(path)
    return log.header, list(log)


@contextmanager
def _reading(path: Path) -> Iterator[Iterator[tuple[int, bytes]]]:
    """The numbered lines of ``path``; what goes wrong reading it is an AuditFileError."""
    try:
        with _open(path, "rb", gz=_gzipped(path)) as f:
            yield _lines(f)
    except FileNotFoundError:
        raise AuditFileError(f"{path}: no such file") from None
    except gzip.BadGzipFile:
        raise AuditFileError(f"{path}: not a gzip file (a plain JSON-lines audit file is "
                             f"named .jsonl)") from None
    except (EOFError, zlib.error) as exc:
        raise AuditFileError(f"{path}: damaged or truncated gzip data ({exc})") from None
    except OSError as exc:
        raise AuditFileError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _parsed(path: Path, number: int, raw: bytes, parse: Callable[[bytes], Any],
            kind: str) -> Any:
    """``parse(raw)``, or an AuditFileError naming the file and line of what is wrong."""
    try:
        return parse(raw)
    except KeyError as exc:
        what = f"field {exc.args[0]!r} missing"
    except (TypeError, ValueError, AttributeError) as exc:
        what = str(exc) or type(exc).__name__
    raise AuditFileError(f"{path}: line {number}: not an audit {kind}: {what}")


def _lines(f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the non-blank lines."""
    for number, line in enumerate(f, 1):
        if line.strip():
            yield number, line


def _gzipped(path: Path) -> bool:
    return path.suffix != ".jsonl"


def _open(path: Path, mode: str, gz: bool, compresslevel: int = 6) -> IO[bytes]:
    if not gz:
        return open(path, mode)  # returned into a with-block
    return gzip.open(path, mode, compresslevel=compresslevel)  # type: ignore[return-value]
