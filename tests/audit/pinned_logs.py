"""Pinned recorded runs: export files whose decisions and hash head are frozen in the tests.

Why: replay speed work (issue 9) rewrites the decode path, the hash and the
core's hot loops; none of it may change a decision by one byte. A recording
made by the code *before* such work, checked in, is the reference: replaying
it must reproduce every decision and the same chain head
(``test_audit_pinned.py``). Recording again with the new code would prove
nothing, since both sides would change together.

The files were written by ``python tests/audit/pinned_logs.py`` from a clean
checkout of the commit named in ``PINNED_AT`` (run from the repository root).
Regenerate them only for a deliberate change of decisions (a new policy
term, a changed profile, a new engine version: ``streams.core.engine_version``),
and say so in the commit.

``pinned/engine1/`` keeps the same runs as engine version 1 recorded them (at
``ENGINE1_AT``): the older logs a replay must recognise, and tell apart from a
mismatch, after the rules changed (``test_audit_engine_versions.py``).

Each run mixes what the placement path does: openb GPU nodes (several models),
fractional, whole-GPU and model-constrained tasks, more tasks running than the
cell holds (so tasks queue, are refused with reasons, and start later on
finishes and ticks).
"""

from __future__ import annotations

import sys
from pathlib import Path

from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.workload import record_run
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler
from streams.sim.traces import read_nodes, read_tasks

HERE = Path(__file__).resolve().parent / "pinned"
ENGINE1 = HERE / "engine1"
PINNED_AT = "2d9afeb"
"""The commit whose code recorded the files: the one that introduced engine version 2."""
ENGINE1_AT = "4a32679"
"""The commit whose code recorded ``engine1/`` (before the replay speed-ups)."""

RUNS: dict[str, tuple[str, int, int, int]] = {
    # profile: (pod list, nodes, tasks, running limit)
    "hetsched": ("openb_pod_list_default.csv", 12, 500, 90),
    "fgd": ("openb_pod_list_gpuspec25.csv", 24, 400, 90),
    "bestfit": ("openb_pod_list_multigpu20.csv", 24, 300, 60),
    "balanced": ("openb_pod_list_gpushare40.csv", 16, 300, 70),
}


def path_of(profile: str, folder: Path = HERE) -> Path:
    return folder / f"{profile}.jsonl.gz"


def _tasks(pods: str, n: int) -> list[TaskRequest]:
    # Every third task of the trace: more shapes than the first n alone would give.
    return read_tasks(pods)[: 3 * n : 3]


def record(profile: str) -> Path:
    pods, n_nodes, n_tasks, running = RUNS[profile]
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:: 8][:n_nodes]]
    rec = record_run(nodes, _tasks(pods, n_tasks), service_scheduler(profile),
                     running_limit=running, tick_every=25, prefix="pin.")
    path = path_of(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    logfile.write(path, Header(topics=["pin.hetsched.input-log", "pin.hetsched.decisions"],
                               exported_at="2026-11-29T14:00:00+00:00", topic_prefix="pin."),
                  rec.records)
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or list(RUNS):
        print(record(name))
