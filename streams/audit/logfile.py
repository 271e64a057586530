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
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from streams.audit.records import Record

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
        doc = r.doc
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
        value = orjson.dumps(line["value"], option=_SORTED)
    if "key_b64" in line:
        key: bytes | None = base64.b64decode(line["key_b64"])
    else:
        key = line["key"].encode() if line.get("key") is not None else None
    return Record(line["topic"], int(line["partition"]), int(line["offset"]),
                  line.get("timestamp_ms"), key, value)


def _bytes_field(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode()}


def write(path: Path, header: Header, records: Iterable[Record]) -> int:
    """Write an audit file (gzip unless ``path`` ends in ``.jsonl``); returns records written."""
    ordered = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    with _open(path, "wb") as f:
        f.write(orjson.dumps(header.to_json()) + b"\n")
        for r in ordered:
            f.write(record_line(r))
    return len(ordered)


def read(path: Path) -> tuple[Header, list[Record]]:
    """Read an audit file: its header and its records, in file order."""
    with _open(path, "rb") as f:
        lines = _lines(f)
        first = next(lines, None)
        if first is None:
            raise ValueError(f"{path}: empty audit file")
        header = Header.from_json(orjson.loads(first))
        return header, [parse_line(line) for line in lines]


def _lines(f: IO[bytes]) -> Iterator[bytes]:
    for line in f:
        if line.strip():
            yield line


def _open(path: Path, mode: str) -> IO[bytes]:
    if path.suffix == ".jsonl":
        return open(path, mode)  # returned into a with-block
    return gzip.open(path, mode, compresslevel=6)  # type: ignore[return-value]
