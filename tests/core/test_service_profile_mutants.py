"""The service's compiled scheduler: the profile alone, plus ``locality`` for located tasks.

``service_scheduler`` documents that a task naming its input's node is placed with the
profile plus ``locality`` (weight ``LOCALITY_WEIGHT``) and every other task with the
profile alone. ``./dev mutate`` found no test in the fast selection that looked at the
located scheduler at all (the service's tests that do run only with the broker).
"""

from __future__ import annotations

import pytest

from streams.core.profile import BUILTIN_PROFILES
from streams.profiles.service import LOCALITY_WEIGHT, SEED, service_scheduler


@pytest.mark.parametrize("name", ["bestfit", "hetsched", "balanced"])
def test_located_tasks_get_the_profile_plus_locality(name):
    sched = service_scheduler(name)
    base = BUILTIN_PROFILES[name]
    assert sched.profile is base
    assert sched.located is not None
    located = sched.located.profile
    assert located.name == name
    assert dict(located.weights) == {**base.weights, "locality": LOCALITY_WEIGHT}
    assert dict(located.args) == dict(base.args)
    assert [p.name for p in sched.located.policies] == [*base.weights, "locality"]
    assert sched.located.weights == (*base.weights.values(), LOCALITY_WEIGHT)
    assert sched.located.located is None


def test_the_service_seed_reaches_the_seeded_policy():
    sched = service_scheduler("random")
    assert sched.policies[0].seed == SEED
    assert sched.located is not None and sched.located.policies[0].seed == SEED


def test_the_typical_workload_is_the_documented_mix_all_of_it():
    from streams.profiles.service import DEFAULT_MIX, typical_tasks

    typical = typical_tasks()
    got = sorted(zip(typical.cpu_milli.tolist(), typical.gpu_milli.tolist(),
                     typical.num_gpu.tolist(), typical.prob.tolist(), strict=True))
    # every shape of the mix (coverage 1.0), GPUs as declared, p = count / 100
    want = sorted((cpu, milli, n, pytest.approx(count / 100))
                  for cpu, _, n, milli, count in DEFAULT_MIX)
    assert got == want
