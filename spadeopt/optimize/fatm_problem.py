"""FATM's input: the profile it reads, and the fusion problem of an app graph under it.

This is where the app graph's annotations become GreedyFuse's legality constraints:
colocation and exlocation groups, the channels of a parallel region (never two in one
PE), and feedback loops into tuple-generating ports (:func:`unfusable_pairs`: both ends
may never be fused). Streams that carried no tuple while profiling become zero-rate
links, so they still connect their operators (:func:`unseen_streams`). Which links
codegen compiles into one loop when fused is codegen's one rule,
:func:`spadeopt.plan.static_runs.collapsible_links`; :func:`collapsed_links` keeps those
whose ends share a PE of a plan.

Invariants: :func:`problem_for` refuses a profile of another graph (fingerprint) or one
missing an operator's load before anything is built (:func:`check_profile`); links come
in the profile's order, then the unseen streams in the graph's order, so the problem
(and every plan made from it) depends only on the graph and the profile.

Cost: :func:`problem_for` is O(n + L) for ``n`` operators and ``L`` links, plus one
strongly-connected-components pass (networkx) for the unfusable pairs. Its ``memo``
keeps the profile check, unseen streams and unfusable pairs for profiles of the same
operators and links (the rate and width searches build hundreds of problems).

>>> from spadeopt.frontend.dsl import App
>>> from spadeopt.optimize.problem import LinearCommModel
>>> app = App("doc")
>>> s = app.source("src", "x:int", generator=range, args={"stop": 3})
>>> app.sink("out", app.functor("g", app.functor("f", s)), mode="count")
>>> graph = app.build()
>>> prof = OperatorProfile("doc", graph.fingerprint, {"src": 0.1, "f": 0.2, "g": 0.2, "out": 0.05},
...                        (("src", "f", 1000.0, 20.0), ("f", "g", 1000.0, 20.0)), 1000.0)
>>> [(lk.src, lk.dst, lk.rate) for lk in problem_for(graph, prof, LinearCommModel(1e-6), 0.5, 0.95).links]
[('src', 'f', 1000.0), ('f', 'g', 1000.0), ('g', 'out', 0.0)]
>>> from spadeopt.optimize.strategies import plan_for
>>> sorted(collapsed_links(graph, plan_for(graph, "all", 1, 1)))
[('f', 'g')]
>>> collapsed_links(graph, plan_for(graph, "none", 1, 4))
frozenset()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.errors import OptimizeError
from spadeopt.model.graph import AppGraph
from spadeopt.optimize.problem import CommModel, FusionProblem
from spadeopt.plan.plan import Plan
from spadeopt.plan.static_runs import collapsible_links


@dataclass(frozen=True)
class OperatorProfile:
    """What the optimizer needs from a refined profile."""

    app: str
    fingerprint: str
    load: Mapping[str, float]  # u per operator (CPU fraction, in cores)
    links: tuple[tuple[str, str, float, float], ...]  # (src op, dst op, tuples/s, bytes/tuple)
    source_rate: float = 0.0  # aggregate source rate (tuples/s) the loads were measured at
    one_pe_run: bool = False  # profiled in one run of one PE (FALL, one node): that PE ran one core flat out
    production_fall_rate: float = 0.0  # steady source rate of the production FALL build (0: not measured)
    production_fall_cpu_s: float = 0.0  # its CPU seconds per source tuple (0: not measured: pe_cap / rate)
    profiled_busy: float = 0.0  # cores the one profiled PE used (its sources thread; 0: not measured: pe_cap)
    # keyed operator -> its input's sampled key hashes: (hottest hashes' counts, the rest's count)
    # (``profiling.keys``); empty: keys assumed uniform
    keys: Mapping[str, tuple[Mapping[int, int], int]] = field(default_factory=dict)


def unfusable_pairs(graph: AppGraph) -> tuple[frozenset[str], ...]:
    """Both ends of every stream that closes a loop into a tuple-generating port (none, and
    no strongly connected components computed, when the graph has no loop or no stream
    ends at such a port)."""
    import networkx as nx

    if graph.acyclic or not any(graph.op(s.dst.op).in_port(s.dst.port).tuple_generating for s in graph.streams):
        return ()
    g = nx.DiGraph()
    g.add_nodes_from(op.name for op in graph.operators)
    for s in graph.streams:
        g.add_edge(s.src.op, s.dst.op)
    comp = {n: i for i, c in enumerate(nx.strongly_connected_components(g)) for n in c}
    pairs = set()
    for s in graph.streams:
        same_scc = comp[s.src.op] == comp[s.dst.op]
        if same_scc and graph.op(s.dst.op).in_port(s.dst.port).tuple_generating:
            if s.src.op == s.dst.op:
                continue  # a self-loop cannot be split by any partition; validation refuses it
            pairs.add(frozenset((s.src.op, s.dst.op)))
    return tuple(sorted(pairs, key=sorted))


def check_profile(graph: AppGraph, prof: OperatorProfile) -> None:
    """Refuse a profile of another graph, or one missing operators."""
    if prof.fingerprint != graph.fingerprint:
        raise OptimizeError(
            f"the profile is of app '{prof.app}' graph {prof.fingerprint}, but '{graph.name}' with these "
            f"parameters is graph {graph.fingerprint}; profile this app (same -p parameters) with "
            f"`spadeopt profile` and refine it again")
    names = [op.name for op in graph.operators]
    missing = [n for n in names if n not in prof.load]
    if missing:
        raise OptimizeError(f"the profile has no CPU load for operator(s) {', '.join(missing[:5])}; refine again")


def unseen_streams(graph: AppGraph, prof: OperatorProfile) -> list[tuple[str, str, float, float]]:
    """Streams of the graph that carried no tuple while profiling (the profile has no link
    for them), as zero-rate links: they still connect their operators."""
    seen = Counter((a, b) for a, b, _, _ in prof.links)
    out = []
    for s in graph.streams:
        key = (s.src.op, s.dst.op)
        if seen[key] > 0:
            seen[key] -= 1
        elif s.src.op != s.dst.op:
            out.append((s.src.op, s.dst.op, 0.0, 0.0))
    return out


def problem_for(graph: AppGraph, prof: OperatorProfile, comm: CommModel, max_frac: float,
                min_util: float, memo: dict[str, Any] | None = None, acyclic: bool | None = None) -> FusionProblem:
    """The fusion problem of ``graph`` under ``prof``. ``memo`` (a dict owned by the
    caller) keeps what depends only on the graph and on which operators and links the
    profile names: pass the same one only for profiles derived from one another by
    :func:`spadeopt.optimize.rate.scale` or new loads of the same operators (the profile
    check, unseen streams and unfusable pairs are then done once). ``acyclic``: the
    plan takes checkpoints (``FusionProblem.acyclic``); ``None``: ``memo["acyclic"]``, as
    FATM's ``PhysicalCache`` sets it for every problem of a run with checkpoints."""
    if memo is None or "unseen" not in memo:
        check_profile(graph, prof)
        parts = {"unseen": unseen_streams(graph, prof), "unfusable": list(unfusable_pairs(graph))}
        if memo is not None:
            memo.update(parts)
    else:
        parts = memo
    names = [op.name for op in graph.operators]
    return FusionProblem.build(
        names, {n: prof.load[n] for n in names}, list(prof.links) + parts["unseen"], comm,
        max_frac=max_frac, min_util=min_util,
        colocate=[frozenset(g) for g in graph.annotations.colocate],
        exlocate=[frozenset(g) for g in graph.annotations.exlocate],
        unfusable=parts["unfusable"],
        channels=graph.annotations.channels,
        apart=graph.annotations.apart,
        acyclic=bool(memo and memo.get("acyclic")) if acyclic is None else acyclic,
    )


def collapsed_links(graph: AppGraph, plan: Plan) -> frozenset[tuple[str, str]]:
    """The :func:`collapsible_links` of ``graph`` whose two ends share a PE of ``plan``
    (the links its build compiles into one loop, locks and exposed ports aside)."""
    pe_of = plan.pe_of
    return frozenset((a, b) for a, b in collapsible_links(graph) if pe_of.get(a) == pe_of.get(b))
