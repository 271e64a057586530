"""Real GPU utilisation and memory curves from the public Alibaba GenAI trace.

Simulated GPUs (``agents.telemetry.simulated``) and the trigger benchmark
(``bench/triggers.py``) replay these curves so that what the scheduler sees
from a simulated node looks like production serving load, not a sine wave.

The archives are read in place with :mod:`tarfile` (never extracted or copied
into the repo). They are found in ``$HETSCHED_TRACES`` if set, else in a
``shared/traces`` directory beside the repository root (``../shared/traces/``
from the repo), else beside the current directory.
"""

from __future__ import annotations

import csv
import io
import os
import tarfile
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

TRACES_ENV = "HETSCHED_TRACES"
GENAI_UTIL = "genai/pod_gpu_duty_cycle_anon.tar.gz"
GENAI_MEMORY = "genai/pod_gpu_memory_used_bytes_anon.tar.gz"
_MIB = 1024 * 1024


def traces_dir() -> Path:
    """Locate the shared traces directory, or explain where it was looked for."""
    explicit = os.environ.get(TRACES_ENV, "").strip()
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            return path
        raise FileNotFoundError(f"{TRACES_ENV}={explicit} is not a directory")
    repo_root = Path(__file__).resolve().parents[2]
    candidates = [repo_root.parent / "shared" / "traces", Path.cwd().parent / "shared" / "traces"]
    for path in candidates:
        if path.is_dir():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"no shared traces directory (looked in {looked}; set {TRACES_ENV})")


@dataclass(frozen=True, slots=True)
class Curve:
    """One container's samples: ``t_s`` seconds since the trace start, ascending."""

    t_s: np.ndarray
    values: np.ndarray

    def at(self, t_s: float) -> float:
        """Step-hold value at ``t_s`` (the last sample at or before it; clamps at the ends)."""
        i = int(np.searchsorted(self.t_s, t_s, side="right")) - 1
        return float(self.values[max(i, 0)])

    @property
    def span_s(self) -> float:
        return float(self.t_s[-1] - self.t_s[0]) if len(self.t_s) else 0.0


@dataclass(frozen=True, slots=True)
class GenaiCurves:
    """Per-container utilisation (percent) and memory (MiB) curves on one time axis."""

    util_pct: dict[str, Curve]
    mem_mib: dict[str, Curve]
    span_s: float

    def containers(self) -> list[str]:
        """Containers with both curves, sorted so that picks are deterministic."""
        return sorted(self.util_pct.keys() & self.mem_mib.keys())


def _read_csv_member(archive: Path) -> list[dict[str, str]]:
    with tarfile.open(archive, "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.isfile() and m.name.endswith(".csv"))
        raw = tar.extractfile(member)
        if raw is None:
            raise OSError(f"{archive}: cannot read {member.name}")
        with io.TextIOWrapper(raw, encoding="utf-8") as text:
            return list(csv.DictReader(text))


def _curves(rows: list[dict[str, str]], scale: float, t0: float) -> dict[str, Curve]:
    by_container: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        by_container[row["container_ip"]].append(
            (float(row["timestamp_anon"]), float(row["value"]) * scale)
        )
    out: dict[str, Curve] = {}
    for container, points in by_container.items():
        points.sort()
        arr = np.asarray(points, dtype=np.float64)
        out[container] = Curve(arr[:, 0] - t0, arr[:, 1])
    return out


@lru_cache(maxsize=2)
def load_genai(root: Path | None = None) -> GenaiCurves:
    """Load both GenAI curve archives (about a second; cached per process)."""
    base = root or traces_dir()
    util_rows = _read_csv_member(base / GENAI_UTIL)
    mem_rows = _read_csv_member(base / GENAI_MEMORY)
    stamps = [float(r["timestamp_anon"]) for r in util_rows]
    stamps += [float(r["timestamp_anon"]) for r in mem_rows]
    t0, t1 = min(stamps), max(stamps)
    return GenaiCurves(
        util_pct=_curves(util_rows, 1.0, t0),
        mem_mib=_curves(mem_rows, 1.0 / _MIB, t0),
        span_s=t1 - t0,
    )
