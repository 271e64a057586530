"""``bench/service.py --trace``'s per-round summary over the worker's trace files.

Why: with ``--split`` each processor's rounds come from its own process, and every
process opens a (possibly empty) file for each processor it builds; the summary must
merge them, count a round once however many partitions it read, and keep to the
measured window.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson

_BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))  # bench/service.py imports its neighbour chaos_cluster
_spec = importlib.util.spec_from_file_location("bench_service", _BENCH / "service.py")
assert _spec is not None and _spec.loader is not None
bench_service = importlib.util.module_from_spec(_spec)
sys.modules["bench_service"] = bench_service  # its dataclasses look their module up
_spec.loader.exec_module(bench_service)
round_summary = bench_service.round_summary


def _write(path: Path, rows: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def test_rounds_are_merged_across_processes_counted_once_and_windowed(tmp_path: Path) -> None:
    def row(end: float, records: int, p: int = 0) -> dict:
        return {"p": p, "begin": end - 0.01, "processed": end - 0.005, "end": end,
                "cpu_ms": 1.0, "records": records, "recs": []}

    _write(tmp_path / "router-1.jsonl", [])  # the router process's idle scheduler file...
    _write(tmp_path / "router-2.jsonl", [row(10.0, 2, 0), row(10.0, 2, 1), row(11.0, 4)])
    _write(tmp_path / "scheduler-1.jsonl", [row(10.5, 3), row(99.0, 7)])  # 99: outside
    _write(tmp_path / "scheduler-2.jsonl", [])
    _write(tmp_path / "gc-1.jsonl", [{"gen": 2, "end": 10.2, "ms": 12.0}])
    _write(tmp_path / "gc-2.jsonl", [{"gen": 0, "end": 10.3, "ms": 3.0}])

    out = round_summary(tmp_path, (9.0, 12.0))
    assert out["router"]["rounds"] == 2  # the round that read two partitions counts once
    assert out["router"]["records"]["max"] == 4
    assert out["scheduler"]["rounds"] == 1
    assert out["gc_pauses"] == {"count": 2, "ms": {"p50": 12.0, "p99": 12.0, "max": 12.0},
                                "gen2": 1}
