"""Rack links, rack membership and the transfer-price vector, as ``topology.py`` documents them.

``./dev mutate`` found that no test measured a rack link from the *source* node to
the destination's rack (only the other direction), asked ``same_rack`` about a node
that registered no rack, read the error of an unknown link scope, or priced the same
source for a longer node list without a topology change in between (the vector and
its rack ids are cached per node count).
"""

from __future__ import annotations

import pytest

from streams.core.topology import (
    DEFAULT_CROSS_LINK,
    DEFAULT_RACK_LINK,
    GBIT_PER_MIB,
    Link,
    Topology,
)


def topo() -> Topology:
    t = Topology()
    t.add_node("a", "r1")
    t.add_node("b", "r2")
    t.add_node("c", "r2")
    return t


def test_a_rack_link_is_found_from_either_node_to_the_others_rack():
    t = topo()
    fast = Link(400.0, 1.0)
    t.set_link("a", "r2", "rack", fast)  # measured from a to b's rack
    assert t.link("a", "b") == fast
    assert t.link("b", "a") == fast
    assert t.link("a", "c") == fast
    assert t.link("b", "c") == DEFAULT_RACK_LINK  # same rack, not a's link


def test_same_rack_needs_both_nodes_in_one_known_rack():
    t = topo()
    assert t.same_rack("b", "c")
    assert not t.same_rack("a", "b")
    assert not t.same_rack("a", "elsewhere")  # a registered; the other did not
    assert not t.same_rack("elsewhere", "nowhere")


def test_an_unknown_link_scope_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^unknown link scope 'zone'$"):
        topo().set_link("a", "b", "zone", Link(1.0, 1.0))


def test_transfer_prices_follow_the_node_list_even_when_it_grows_without_a_change():
    t = Topology()  # nodes never registered: racks from their names
    size = 1024.0
    rack = DEFAULT_RACK_LINK.seconds(size)
    cross = DEFAULT_CROSS_LINK.seconds(size)
    assert t.transfer_s(["rack1-a", "rack1-b"], 0, size).tolist() == [0.0, rack]
    assert t.transfer_s(["rack1-a", "rack1-b", "rack2-c"], 0, size).tolist() == [
        0.0, rack, cross]
    assert t.transfer_s(["rack1-a", "rack1-b"], 1, size).tolist() == [rack, 0.0]
    assert t.transfer_s(["rack1-a", "rack1-b", "rack2-c"], 2, size).tolist() == [
        cross, cross, 0.0]


def test_a_measured_node_link_prices_only_its_pair():
    t = topo()
    t.set_link("c", "a", "node", Link(10.0, 100.0))  # stored under the sorted pair
    out = t.transfer_s(["a", "b", "c"], 0, 1.0).tolist()
    assert out == pytest.approx([0.0, DEFAULT_CROSS_LINK.seconds(1.0),
                                 100e-6 + GBIT_PER_MIB / 10.0], rel=1e-12)


def test_a_capped_vector_is_the_capped_cost_cached_per_cap_and_read_only():
    t = topo()
    names = ["rack1-a", "rack1-b", "rack2-c"]
    size = 1024.0
    rack, cross = DEFAULT_RACK_LINK.seconds(size), DEFAULT_CROSS_LINK.seconds(size)
    cap = (rack + cross) / 2  # between the two: caps the cross-rack cost only
    capped = t.transfer_s(names, 0, size, cap)
    assert capped.tolist() == [0.0, rack, cap]
    assert t.transfer_s(names, 0, size, cap) is capped  # asked again: the same array
    assert t.transfer_s(names, 0, size, 2 * cross).tolist() == [0.0, rack, cross]
    assert t.transfer_s(names, 0, size).tolist() == [0.0, rack, cross]
    with pytest.raises(ValueError, match="read-only"):
        capped[0] = 1.0
    t.set_link("rack1-a", "rack2-c", "node", Link(1000.0, 1.0))  # a change clears the cache
    assert t.transfer_s(names, 0, size, cap)[2] < cap
