"""A profile of a run with a parallel region, folded onto the logical operators
(``refine.fold``, issue 39: an adaptive run re-plans from a phase whose regions are wide)."""

from __future__ import annotations

import math

import pytest

from spadeopt import App
from spadeopt.api import operator_profile
from spadeopt.errors import OptimizeError
from spadeopt.optimize.fatm_problem import check_profile
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.regions import Region
from spadeopt.refine.fold import fold_copies
from spadeopt.refine.profile import KeyCounts, LinkStats, OperatorStats, PortStats, Profile
from spadeopt.toolkit.sources import counter


def _graph():
    a = App("fold")
    s = a.source("s", "seq:int, payload:bytes", generator=counter, args={"n": 9})
    f = a.functor("f", s, output={"seq": "seq", "k:int": "seq % 5"})
    a.sink("o", f)
    return a.build()


def _op(u: float, rate: float, ins: tuple[str, ...], outs: tuple[str, ...]) -> OperatorStats:
    return OperatorStats(u=u, u_raw=u, cpu_per_tuple_s=u / rate, ref_rate=rate, threads=0.0, pes=("pe0",),
                         inputs=ins, outputs=outs, selectivity={p.split(".", 1)[1]: 1.0 for p in outs})


def _port(rate: float, size: float, tuples: int, cpu: float | None) -> PortStats:
    return PortStats(rate=rate, byte_rate=rate * size, size=size, tuples=tuples, cpu_per_tuple_s=cpu, samples=10)


def _wide_profile(graph) -> tuple[Profile, list[str]]:
    """What refine gives for ``f`` at width 2: its copies, the split and merge, by name."""
    region = Region("r", ("f",), 2)
    phys = physical_graph(graph, (region,))
    names = [op.name for op in phys.operators]
    (sp,), (sf,) = [s for s in graph.streams if s.src.op == "s"], [s for s in graph.streams if s.src.op == "f"]
    fin, fout, sout, oin = f"f.{sp.dst.port}", f"f.{sf.src.port}", f"s.{sp.src.port}", f"o.{sf.dst.port}"
    c0, c1 = (lambda p: p.replace("f.", "f__0.")), (lambda p: p.replace("f.", "f__1."))
    ops = {"s": _op(0.2, 250.0, (), (sout,)), "f__0": _op(0.3, 100.0, (c0(fin),), (c0(fout),)),
           "f__1": _op(0.5, 150.0, (c1(fin),), (c1(fout),)), "r__split": _op(0.05, 250.0, ("r__split.in",), ()),
           "r__merge": _op(0.04, 250.0, ("r__merge.in0",), ()), "o": _op(0.1, 250.0, (oin,), ())}
    outs = {sout: _port(250.0, 40.0, 2500, 1e-4), c0(fout): _port(100.0, 30.0, 1000, 2e-5),
            c1(fout): _port(150.0, 32.0, 1500, None)}
    ins = {c0(fin): _port(100.0, 40.0, 1000, 3e-3), c1(fin): _port(150.0, 40.0, 1500, 4e-3), oin: _port(250, 31, 2500, 1e-4)}
    links = (LinkStats(sout, "r__split.in", 250.0, 40.0), LinkStats("r__split.out0", c0(fin), 100.0, 48.0),
             LinkStats(c0(fout), "r__merge.in0", 100.0, 30.0))
    keys = {c0(fin): KeyCounts({7: 5, 9: 1}, 2), c1(fin): KeyCounts({8: 4}, 3)}
    prof = Profile(app="fold", graph_fingerprint=graph.fingerprint, params={}, host="h", cpu_model="c", cores=2,
                   runs=(), operators=ops, inputs=ins, outputs=outs, links=links, keys=keys)
    return prof, names


def test_copies_fold_into_their_operator_and_the_split_and_merge_are_dropped():
    graph = _graph()
    prof, names = _wide_profile(graph)
    assert {"f__0", "f__1", "r__split", "r__merge"} <= set(names)  # the names fission gives
    with pytest.raises(OptimizeError, match="no CPU load for operator"):
        check_profile(graph, operator_profile(prof))  # what made a wide phase unplannable
    folded = fold_copies(prof, graph, (Region("r", ("f",), 2),))
    check_profile(graph, operator_profile(folded))
    assert sorted(folded.operators) == ["f", "o", "s"]
    f = folded.operators["f"]
    assert math.isclose(f.u, 0.8) and math.isclose(f.ref_rate, 250.0)
    assert math.isclose(f.cpu_per_tuple_s, 0.8 / 250.0)
    fin = f.inputs[0]
    assert fin.startswith("f.") and folded.inputs[fin].tuples == 2500
    assert math.isclose(folded.inputs[fin].cpu_per_tuple_s, (1000 * 3e-3 + 1500 * 4e-3) / 2500)
    fout = folded.outputs[f.outputs[0]]
    assert math.isclose(fout.rate, 250.0) and math.isclose(fout.size, (100 * 30 + 150 * 32) / 250)
    assert math.isclose(fout.cpu_per_tuple_s, 2e-5)  # the copy without a sample does not count as 0
    assert [(lk.src_op, lk.dst_op, lk.rate) for lk in folded.links] == [("s", "f", 250.0), ("f", "o", 250.0)]
    assert folded.keys[fin].top == {7: 5, 9: 1, 8: 4} and folded.keys[fin].other == 5
    assert folded.operators["s"] == prof.operators["s"] and folded.source_rate == prof.source_rate


def test_a_profile_without_wide_regions_is_unchanged():
    graph = _graph()
    prof, _ = _wide_profile(graph)
    assert fold_copies(prof, graph, (Region("r", ("f",), 1),)) is prof
