"""The time simulator's failure layer: a failed node's jobs all finish, none is lost."""

from __future__ import annotations

from streams.core.queue import QueueConfig
from streams.core.service_profile import service_scheduler
from streams.sim.time.adapt import attach_failures
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import make_job
from streams.sim.traces import NodeSpec


def test_jobs_on_failed_nodes_are_re_placed_and_every_job_finishes():
    nodes = [NodeSpec(f"n{i}", 32000, 262144, 4, "A100") for i in range(4)]
    jobs = [make_job(f"j{i}", 60.0 * i, 1800.0, 1, 1000) for i in range(24)]
    sim = Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig()),
                    nodes, jobs)
    log = attach_failures(sim, fraction=0.5, seed=1, repair_s=600.0)
    rec = sim.run()
    assert log.failures == 2 and log.evictions > 0
    assert all(s.status == "finished" for s in rec.jobs.values())
