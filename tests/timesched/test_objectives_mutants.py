"""The objectives file's rules, read as docs/simulation.md and ``objectives.py`` document them.

``./dev mutate`` found that no test read a rule that gives a placement ``profile``
(only ``objectives``), passed policy ``args`` with objectives, named the compiled
profile after its rule, set a load maximum, used the edges of the 0..24 hour range,
gave a non-positive tenant weight, or used ``peak_offpeak``, the documented default
schedule. Each case here follows the module docstring's rules.
"""

from __future__ import annotations

import pytest

from streams.core.profile import Profile
from streams.profiles.objectives import objectives_profile, peak_offpeak, schedule_from_config

H = 3600.0


def only_rule(item: dict) -> object:
    (rule,) = schedule_from_config({"rules": [item]}).rules
    return rule


def test_a_rule_may_give_a_placement_profile_instead_of_objectives():
    rule = only_rule({"name": "packed", "profile": {"name": "tight",
                                                    "weights": {"bestfit": 2.0}}})
    assert rule.scheduler.profile.name == "tight"
    assert dict(rule.scheduler.profile.weights) == {"bestfit": 2.0}
    assert [p.name for p in rule.scheduler.policies] == ["bestfit"]


def test_a_rule_with_objectives_is_a_profile_named_after_the_rule():
    rule = only_rule({"name": "fast", "objectives": {"completion_time": 1.0}})
    assert rule.scheduler.profile.name == "fast"
    assert dict(rule.scheduler.profile.weights) == {"compute": 1.0}


def test_policy_args_reach_the_enabled_objectives_policies_only():
    args = {"energy": {"busy_weight": 0.25}}
    on = only_rule({"name": "green", "objectives": {"energy": 1.0}, "args": args})
    assert dict(on.scheduler.profile.args) == args
    assert on.scheduler.policies[0].busy_weight == 0.25
    # energy weighted 0 is not a placement term: its args are dropped, not an error
    off = only_rule({"name": "fast", "objectives": {"completion_time": 1.0, "energy": 0.0},
                     "args": args})
    assert dict(off.scheduler.profile.args) == {}
    assert dict(off.scheduler.profile.weights) == {"compute": 1.0}


def test_objectives_profile_keeps_args_of_enabled_policies():
    p = objectives_profile("r", {"energy": 2.0, "locality": 0.0},
                           {"energy": {"busy_weight": 0.0}, "locality": {}})
    assert p == Profile("r", {"energy": 2.0}, {"energy": {"busy_weight": 0.0}})


def test_error_messages_name_the_known_objectives_and_the_missing_weight():
    with pytest.raises(ValueError, match=r"^unknown objectives \['speed'\] \(known: "
                                         r"utilisation, completion_time, energy, locality, "
                                         r"fairness\)$"):
        objectives_profile("x", {"speed": 1.0})
    with pytest.raises(ValueError, match=r"^objectives rule 'w': no placement objective has "
                                         r"a positive weight$"):
        schedule_from_config([{"name": "w", "objectives": {"fairness": 1}}])


def test_tenant_weights_must_be_positive_and_may_be_below_one():
    rule = only_rule({"name": "t", "objectives": {"energy": 1}, "tenant_weights": {"a": 0.5}})
    assert dict(rule.tenant_weights) == {"a": 0.5}
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^objectives rule 't': tenant weights must be "
                                             r"positive$"):
            only_rule({"name": "t", "objectives": {"energy": 1}, "tenant_weights": {"a": bad}})


@pytest.mark.parametrize("hours", [[24, 6], [20, 0], [0, 24]])
def test_hours_at_the_edges_of_the_day_are_valid(hours):
    rule = only_rule({"name": "h", "hours": hours, "objectives": {"energy": 1}})
    assert (rule.start_h, rule.end_h) == (float(hours[0]), float(hours[1]))


@pytest.mark.parametrize("hours", [[24.5, 6], [20, 24.5], [-1, 6], [6, -0.5]])
def test_hours_outside_the_day_are_refused(hours):
    with pytest.raises(ValueError, match=r"^objectives rule 'h': hours must be within 0\.\.24"):
        only_rule({"name": "h", "hours": hours, "objectives": {"energy": 1}})


def test_a_load_window_with_a_maximum():
    rule = only_rule({"name": "l", "load": [0.25, 0.75], "objectives": {"energy": 1}})
    assert (rule.min_load, rule.max_load) == (0.25, 0.75)
    assert rule.matches(0.0, 0.25) and not rule.matches(0.0, 0.75)
    unbounded = only_rule({"name": "u", "load": [0.5, None], "objectives": {"energy": 1}})
    assert unbounded.max_load == float("inf")


def test_peak_offpeak_uses_peak_weights_at_peak_hours_or_high_load():
    peak, off = Profile("peak", {"compute": 1.0}), Profile("off", {"energy": 1.0})
    schedule = peak_offpeak(peak, off)
    assert [r.name for r in schedule.rules] == ["peak-hours", "high-load", "off-peak"]
    names = {(h, load): schedule.rule_name(h * H, load)
             for h in (7.99, 8.0, 19.99, 20.0) for load in (0.0, 0.79, 0.8)}
    assert names == {
        (7.99, 0.0): "off-peak", (7.99, 0.79): "off-peak", (7.99, 0.8): "high-load",
        (8.0, 0.0): "peak-hours", (8.0, 0.79): "peak-hours", (8.0, 0.8): "peak-hours",
        (19.99, 0.0): "peak-hours", (19.99, 0.79): "peak-hours", (19.99, 0.8): "peak-hours",
        (20.0, 0.0): "off-peak", (20.0, 0.79): "off-peak", (20.0, 0.8): "high-load",
    }
    fast = schedule.rules[0].scheduler
    assert schedule.rules[1].scheduler is fast  # one compiled profile for both peak rules
    assert fast.profile is peak and schedule.rules[2].scheduler.profile is off
    assert schedule.rules[1].min_load == 0.8 and schedule.rules[1].max_load == float("inf")
    assert (schedule.rules[2].start_h, schedule.rules[2].end_h) == (0.0, 24.0)
    assert schedule.rules[2].min_load == 0.0


def test_peak_offpeak_takes_its_hours_load_and_context():
    peak, off = Profile("peak", {"random": 1.0}), Profile("off", {"random": 2.0})
    schedule = peak_offpeak(peak, off, {"seed": 7}, peak_hours=(9.0, 17.0), high_load=0.5)
    assert (schedule.rules[0].start_h, schedule.rules[0].end_h) == (9.0, 17.0)
    assert schedule.rules[1].min_load == 0.5
    assert schedule.rules[0].scheduler.policies[0].seed == 7
    assert schedule.rules[2].scheduler.policies[0].seed == 7
    assert schedule.rule_name(8.5 * H, 0.49) == "off-peak"
    assert schedule.rule_name(8.5 * H, 0.5) == "high-load"
    assert schedule.rule_name(16.99 * H, 0.0) == "peak-hours"
