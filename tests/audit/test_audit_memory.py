"""A loaded audit log holds about its bytes: the audit tools keep every record of a log
in memory, so each record must not carry its encoder's spare buffer (``codec.trimmed``)
or a cached parse of the whole envelope (``Record.head``)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from audit_builders import export, recorded

from streams.audit import logfile
from streams.audit.integrity import check


def test_a_loaded_and_checked_log_holds_about_its_bytes(tmp_path: Path) -> None:
    path = export(tmp_path / "run.jsonl.gz", recorded(40))
    tracemalloc.start()
    try:
        header, records = logfile.read(path)
        check(header, records)  # reads every record's head
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    payload = sum(len(r.value or b"") for r in records)
    # The bytes, plus a record's fields and head (~800 B); an untrimmed orjson value alone
    # holds 4 KiB, a cached envelope several times its bytes.
    assert held < payload + 1500 * len(records), (held, payload, len(records))
