"""A log recorded on one CPU replays to the same decisions with another CPU's arithmetic.

Why: an auditor replays on their own machine, not the scheduler's. The scores go
through OpenBLAS ``gemv``, whose kernel is chosen per CPU at start-up: a Haswell-class
kernel (FMA) and an older SSE one (no FMA) give different last bits for the same rows.
The recorded decisions must not depend on those bits. The test records a run here,
then replays its export in a child process forced onto the other kernel family
(``OPENBLAS_CORETYPE``), after checking that the two kernels really differ.

numpy also picks code by CPU: its ``argpartition``, which chose a reason's candidates
until engine version 2, selects different nodes among tied totals with AVX-512, with
AVX2 only and with neither. A log of a 600-node cluster is replayed in a child with
every vector path numpy dispatched to here turned off (``NPY_DISABLE_CPU_FEATURES``).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.workload import record_run
from streams.profiles.service import service_scheduler
from streams.sim.traces import read_nodes, read_tasks

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="OPENBLAS_CORETYPE names x86-64 kernels")

OLD_KERNEL = "Prescott"
"""SSE3, no FMA: available on every x86-64 CPU, unlike the AVX-512 kernels."""

GEMV_FINGERPRINT = """
import hashlib, numpy as np
rng = np.random.default_rng(1)
h = hashlib.sha256()
for n in (3, 7, 20, 64, 200):
    for k in (2, 5, 9, 17, 40):
        a, x = rng.random((n, k)), rng.random(k)
        h.update((a @ x).tobytes())
print(h.hexdigest())
"""


def _child(args: list[str], kernel: str | None,
           numpy_off: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    if kernel:
        env["OPENBLAS_CORETYPE"] = kernel
    if numpy_off:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(numpy_off)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_forced_kernel_computes_gemv_differently() -> None:
    here = _child(["-c", GEMV_FINGERPRINT], None)
    old = _child(["-c", GEMV_FINGERPRINT], OLD_KERNEL)
    assert here.returncode == old.returncode == 0, here.stderr + old.stderr
    if here.stdout == old.stdout:
        pytest.skip(f"this CPU's OpenBLAS kernel computes gemv as {OLD_KERNEL} does")
    assert here.stdout != old.stdout


@pytest.mark.parametrize("profile", ["hetsched", "fgd"])
def test_a_run_recorded_here_replays_equal_on_the_older_kernel(profile: str,
                                                               tmp_path: Path) -> None:
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:200]]
    tasks = read_tasks("openb_pod_list_default.csv")[:1500]
    rec = record_run(nodes, tasks, service_scheduler(profile))
    path = tmp_path / f"{profile}.jsonl.gz"
    logfile.write(path, Header(topics=[], exported_at=""), rec.records)
    done = _child(["-m", "streams.cli", "replay", str(path), "--no-progress"], OLD_KERNEL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "EQUAL" in done.stdout
    assert "every recorded decision was reproduced" in done.stdout


TIES_FINGERPRINT = """
import numpy as np
t = np.random.default_rng(1).integers(0, 5, 5000).astype(np.float64)
print(sorted((-t).argpartition(2)[:3].tolist()))
"""


def _numpy_vector_paths() -> list[str]:
    """The CPU features numpy dispatches to on this machine (all on: the CPU has them)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


def test_numpy_without_its_vector_paths_picks_other_nodes_among_ties() -> None:
    off = _numpy_vector_paths()
    if not off:
        pytest.skip("numpy dispatches to no vector path on this CPU: nothing to turn off")
    here, plain = _child(["-c", TIES_FINGERPRINT], None), _child(["-c", TIES_FINGERPRINT],
                                                                  None, off)
    assert here.returncode == plain.returncode == 0, here.stderr + plain.stderr
    assert here.stdout != plain.stdout


def test_a_large_cluster_replays_equal_without_numpys_vector_paths(tmp_path: Path) -> None:
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:600]]
    tasks = read_tasks("openb_pod_list_default.csv")[:300]
    rec = record_run(nodes, tasks, service_scheduler("hetsched"))
    path = tmp_path / "large.jsonl.gz"
    logfile.write(path, Header(topics=[], exported_at=""), rec.records)
    done = _child(["-m", "streams.cli", "replay", str(path), "--no-progress"], None,
                  _numpy_vector_paths())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "EQUAL" in done.stdout
    assert "every recorded decision was reproduced" in done.stdout
