"""Placement: hand cases, infeasibility messages, pins, and invariants on random inputs."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt.errors import PlacementInfeasible, UsageError
from spadeopt.optimize.cost import REL_TOL
from spadeopt.optimize.greedy_fuse import greedy_fuse
from spadeopt.optimize.placement import pe_graph, place
from spadeopt.optimize.problem import FusionProblem, LinearCommModel

PROPS = settings(max_examples=300, deadline=None, derandomize=True)


def test_communicating_pes_that_fit_share_a_node() -> None:
    p = place(
        [("p0", 0.3), ("p1", 0.3), ("p2", 0.3)],
        {("p0", "p1"): 100.0, ("p2", "p1"): 50.0},
        nodes=4,
        cores=1,
    )
    assert dict(p) == {"p0": 0, "p1": 0, "p2": 0}
    assert p.inter_node_rate == 0.0 and p.nodes_used == 1
    assert p.node_load[0] == pytest.approx(0.9)


def test_heaviest_link_is_kept_inside_a_node() -> None:
    # Two cores per node: only two of the three 0.9-load PEs fit together.
    p = place(
        [("a", 0.9), ("b", 0.9), ("c", 0.9)],
        {("a", "b"): 10.0, ("b", "c"): 500.0},
        nodes=2,
        cores=2,
    )
    assert p["b"] == p["c"] != p["a"]
    assert p.inter_node_rate == 10.0


def test_capacity_frac_limits_each_node() -> None:
    links = {("a", "b"): 10.0}
    assert place([("a", 0.5), ("b", 0.5)], links, nodes=2, cores=1).nodes_used == 1
    p = place([("a", 0.5), ("b", 0.5)], links, nodes=2, cores=1, capacity_frac=0.8)
    assert p.nodes_used == 2 and p.capacity == pytest.approx(0.8)


def test_more_clusters_than_nodes_are_packed_first_fit_decreasing() -> None:
    pes = [("a", 0.5), ("b", 0.4), ("c", 0.3), ("d", 0.3), ("e", 0.2)]
    p = place(pes, {}, nodes=2, cores=1)
    # Biggest first: a->0, b->0 (0.9), c->1, d->1 (0.6), e->1 (0.8).
    assert dict(p) == {"a": 0, "b": 0, "c": 1, "d": 1, "e": 1}
    assert max(p.node_load) <= 1.0


def test_few_clusters_get_a_node_each_biggest_first() -> None:
    p = place([("small", 0.1), ("big", 0.6), ("mid", 0.3)], {}, nodes=3, cores=1)
    assert dict(p) == {"small": 2, "big": 0, "mid": 1}


def test_pinned_pes_pull_their_partners() -> None:
    p = place(
        [("a", 0.2), ("b", 0.2), ("c", 0.2)],
        {("a", "b"): 100.0},
        nodes=3,
        cores=1,
        pinned={"a": 2},
    )
    assert p["a"] == p["b"] == 2
    assert p["c"] == 0


def test_pins_on_different_nodes_are_never_merged() -> None:
    p = place(
        [("a", 0.1), ("b", 0.1)], {("a", "b"): 100.0}, nodes=2, cores=1, pinned={"a": 0, "b": 1}
    )
    assert dict(p) == {"a": 0, "b": 1} and p.inter_node_rate == 100.0


def test_total_overload_is_infeasible_with_advice() -> None:
    with pytest.raises(PlacementInfeasible) as info:
        place([("a", 0.9), ("b", 0.9), ("c", 0.9)], {}, nodes=2, cores=1)
    text = str(info.value)
    assert "2.70 cores in total" in text
    assert "2 nodes x 1 cores x capacity_frac 1 = 2.00" in text
    assert "add nodes" in text


def test_single_pe_bigger_than_a_node_is_infeasible() -> None:
    with pytest.raises(PlacementInfeasible, match=re.escape("PE 'a' needs 1.50 cores")):
        place([("a", 1.5)], {}, nodes=4, cores=1)


def test_overloaded_pin_is_infeasible() -> None:
    with pytest.raises(PlacementInfeasible, match="pinned to node 0 need 1.20"):
        place([("a", 0.6), ("b", 0.6)], {}, nodes=2, cores=1, pinned={"a": 0, "b": 0})


def test_ffd_failure_is_reported_as_a_heuristic_limit() -> None:
    # Total 1.8 <= 2 nodes, but three 0.6 PEs cannot pair up on 1-core nodes.
    with pytest.raises(PlacementInfeasible, match="heuristic could not pack it"):
        place([("a", 0.6), ("b", 0.6), ("c", 0.6)], {}, nodes=2, cores=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "nodes must be an int >= 1; got 0"),
        ({"cores": 1.5}, "cores must be an int >= 1; got 1.5"),
        ({"capacity_frac": 0.0}, "capacity_frac must be in (0, 1]"),
        ({"pe_links": {("a", "zz"): 1.0}}, "link (a, zz) names unknown PE(s) ['zz']"),
        ({"pe_links": {("a", "a"): 1.0}}, "joins a PE to itself"),
        ({"pe_links": {("a", "b"): -1.0}}, "rate must be a finite number >= 0"),
        ({"pinned": {"a": 5}}, "PE 'a' is pinned to node 5; nodes are 0..1"),
        ({"pinned": {"q": 0}}, "pinned PE 'q' is not among the PEs"),
        ({"pes": [("a", 0.1), ("a", 0.2)]}, "PE 'a' is listed more than once"),
        ({"pes": [("a", math.inf), ("b", 0.1)]}, "load of PE 'a' must be a finite number"),
    ],
)
def test_bad_input_is_a_usage_error(kwargs: dict, message: str) -> None:
    args: dict = {"pes": [("a", 0.1), ("b", 0.1)], "pe_links": {}, "nodes": 2, "cores": 1}
    args.update(kwargs)
    with pytest.raises(UsageError, match=re.escape(message)):
        place(**args)


def test_pe_graph_feeds_place_from_a_fusion_result() -> None:
    problem = FusionProblem.build(
        list("abcd"),
        dict.fromkeys("abcd", 0.2),
        [
            ("a", "b", 10.0, 8.0),
            ("b", "c", 11.0, 8.0),
            ("c", "d", 10.0, 8.0),
            ("d", None, 5.0, 8.0),
        ],
        LinearCommModel(per_tuple_s=5e-3),
        max_frac=0.6,
    )
    result = greedy_fuse(problem)
    pes, links = pe_graph(result.partitions, problem, pe_ids=["A", "BC", "D"])
    assert [pe for pe, _ in pes] == ["A", "BC", "D"]
    assert links == {("A", "BC"): 10.0, ("BC", "D"): 10.0}
    assert dict(pes)["D"] == pytest.approx(0.2 + 15 * 5e-3)
    p = place(pes, links, nodes=2, cores=1)
    assert sorted(p) == ["A", "BC", "D"]


@st.composite
def placement_inputs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 9))
    ids = [f"p{i}" for i in range(n)]
    loads = draw(
        st.lists(st.sampled_from([0.1, 0.25, 0.5]) | st.floats(0, 1.2), min_size=n, max_size=n)
    )
    pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=2 * n))
    links = {
        (a, b): draw(st.sampled_from([0.0, 1.0, 10.0]) | st.floats(0, 100))
        for a, b in pairs
        if a != b
    }
    nodes = draw(st.integers(1, 4))
    pinned = draw(st.dictionaries(st.sampled_from(ids), st.integers(0, nodes - 1), max_size=2))
    return {
        "pes": list(zip(ids, loads, strict=True)),
        "pe_links": links,
        "nodes": nodes,
        "cores": draw(st.integers(1, 2)),
        "capacity_frac": draw(st.sampled_from([1.0, 0.8])),
        "pinned": pinned,
    }


@PROPS
@given(placement_inputs())
def test_placement_invariants(args: dict) -> None:
    capacity = args["cores"] * args["capacity_frac"]
    try:
        p = place(**args)
    except PlacementInfeasible as exc:
        total = sum(load for _, load in args["pes"])
        assert (
            max(load for _, load in args["pes"]) > capacity
            or total > args["nodes"] * capacity
            or "pinned to node" in str(exc)
            or "heuristic could not pack" in str(exc)
        )
        return
    assert sorted(p) == sorted(pe for pe, _ in args["pes"])
    assert all(0 <= node < args["nodes"] for node in p.values())
    assert all(load <= capacity * (1 + REL_TOL) + REL_TOL for load in p.node_load)
    assert all(p[pe] == node for pe, node in args["pinned"].items())
    total = sum(load for _, load in args["pes"])
    if total <= capacity and not args["pinned"]:
        assert p.inter_node_rate == 0.0
    cut = sum(r for (a, b), r in args["pe_links"].items() if p[a] != p[b])
    assert p.inter_node_rate == pytest.approx(cut)


@PROPS
@given(placement_inputs(), st.integers(1, 40))
def test_one_node_shortcut_is_the_full_placement(args: dict, copies: int) -> None:
    """On one node without pins, :func:`place` skips agglomeration when the total fits with
    room for every summing order; the answer (or the error) is the full algorithm's, field
    for field. ``copies`` repeats the PEs to reach the many-PE plans FATM places."""
    from spadeopt.optimize import placement

    pes = [(f"{pe}_{i}", load / copies) for i in range(copies) for pe, load in args["pes"]]
    links = {(f"{a}_{i}", f"{b}_{i}"): r for i in range(copies) for (a, b), r in args["pe_links"].items()}
    call = {"pes": pes, "pe_links": links, "nodes": 1, "cores": args["cores"],
            "capacity_frac": args["capacity_frac"]}

    def outcome(shortcut: bool):
        keep = placement._surely_fits
        placement._surely_fits = keep if shortcut else (lambda loads, capacity: False)
        try:
            got = place(**call)
            return dict(got), got.node_load, got.capacity, got.inter_node_rate, list(got)
        except PlacementInfeasible as exc:
            return str(exc)
        finally:
            placement._surely_fits = keep

    assert outcome(True) == outcome(False)


def test_one_node_shortcut_leaves_room_for_rounding() -> None:
    """A total that fits only within the sums' rounding goes through the full algorithm."""
    from spadeopt.optimize.placement import _surely_fits

    assert _surely_fits([0.5, 0.5], 2.0)
    assert not _surely_fits([1.0, 1.0], 2.0 * (1 - 1e-17) - REL_TOL * 2.0)
    assert not _surely_fits([1.0, 1.0 + 3e-9], 2.0)


def test_a_plan_placement_refuses_is_dealt_round_robin_as_a_placement() -> None:
    """FATM scores channel-symmetric plans that do not fit at the rate the family is
    built at; their placement is then round robin, and is still a ``Placement`` (explain
    reads its node loads: a dict here crashed ``spadeopt optimize`` on a 200-operator
    chain planned for 16 cores)."""
    from spadeopt.optimize.placement import Placement
    from spadeopt.optimize.symmetric import placed

    problem = FusionProblem.build(["a", "b", "c"], {"a": 0.9, "b": 0.9, "c": 0.9},
                                  [("a", "b", 100.0, 50.0), ("b", "c", 100.0, 50.0)], LinearCommModel(1e-6, 0.0),
                                  max_frac=1.0)
    with pytest.raises(PlacementInfeasible):
        place(list(zip(["p0", "p1", "p2"], [0.9, 0.9, 0.9], strict=True)), {}, nodes=2, cores=1)
    ids, where = placed([["a"], ["b"], ["c"]], problem, nodes=2, cores=1, capacity_frac=0.5)
    assert isinstance(where, Placement) and ids == ("p0", "p1", "p2")
    assert dict(where) == {"p0": 0, "p1": 1, "p2": 0}
    assert len(where.node_load) == 2 and where.node_load[0] > where.node_load[1] > 0.9
    assert where.inter_node_rate == pytest.approx(200.0)
