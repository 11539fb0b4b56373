"""Automatic parallel regions: candidate regions from the graph alone, no annotation.

Papers 000 and 002 form parallel regions without the developer's help: start as close
to the sources as possible and keep adding operators while the region stays safe (002
§3.3's left-to-right greedy; 000's canonical regions, the longest legal sequence from
the first operator not yet covered, on a chain). This module does the same on any
graph, with one judge of what is safe: :func:`spadeopt.plan.regions.check_region`
(and the width-2 rewrite of :func:`spadeopt.plan.fission.rewrite_region`, which adds
what only the rewrite knows: names, annotations, schemas). No rule is restated here,
so relaxing a rule there (a kind's ``region_problem`` or ``forwards``, a shape rule)
widens the regions found here with no change: a Redis Streams source of several keys
that declares ``partitioned_by`` seeds a candidate led by it (ordering ``arrival``, each
channel reading its own stream keys; its width is at most the number of keys).

Algorithm::

    free  <- operators not in a declared region (App.parallel pins those)
    for seed in declaration order (left to right; sources first in a DAG):
        skip it if it is in a region, if operator_problem(seed) says it can be in none,
        or if {seed} alone is illegal
        R <- [seed]; rejected <- {}
        loop:
            frontier <- free operators connected to R (not in a region, not rejected),
                        taken in declaration order by a best-first walk from R
            none left: retry each rejected neighbour n alone against R; if R + [n] is legal
                       add n, clear rejected and loop again; else stop
            gallop: try R + frontier[:k] for k = 1, 2, 4, ... (all of it last) and keep
                    the largest legal k, then bisect up towards the first larger k that failed
            some k legal: R <- R + frontier[:k]
            none:         rejected[frontier[0]] <- why R + [frontier[0]] is illegal
        record R as candidate region ``auto_<first operator>`` (width 1) and, for each
        operator next to R outside it, the reason it is outside (the rule, from the
        legality check, or the region that holds it)

The gallop accepts several operators at once, which one-at-a-time growth cannot: a
diamond ``a -> (b, c) -> d`` is legal whole but not as ``{a, b}`` (two exits).

Invariants: regions are disjoint, connected, and each is legal (``check_region`` and
the width-2 rewrite accept it); each is maximal: adding any one neighbouring operator
that is in no other region makes it illegal (the last pass checks every such neighbour
against the final region); a declared region's operators are never in a discovered
one; the result depends only on the graph (declaration order breaks every tie).

Cost: a check is one ``check_region``, O(|R| + the streams touching R) with the graph's
``region_index.RegionIndex`` (built once per graph: streams per operator, strongly connected
components in topological order, which prune the feedback-loop walk), and, when that
passes, one width-2 rewrite (O(V + E)). A region that is legal as a whole component
costs O(log |R|) checks; each operator added or rejected costs O(log |frontier|) more, so
a graph whose components are cut c times costs O((regions + c) log V) checks (bargain,
204 operators: 1,173 checks, 154 rewrites, about 0.1 s).

>>> from spadeopt.frontend.dsl import App, count_window
>>> from spadeopt.toolkit.sources import counter
>>> app = App("demo")
>>> s = app.functor("parse", app.source("read", "k:int, v:bytes", generator=counter, args={"n": 9}))
>>> s = app.functor("score", s, output={"k": "k", "n:int": "k * 2"})
>>> s = app.aggregate("total", s, window=count_window(2), output={"n": "sum(n)"})  # no by=: a cut
>>> app.sink("write", app.functor("fmt", s), mode="count")
>>> found = discover_regions(app.build())
>>> [(c.region.name, c.region.operators) for c in found.candidates]
[('auto_parse', ('parse', 'score')), ('auto_fmt', ('fmt', 'write'))]
>>> for b in found.candidates[0].boundaries:
...     print(b.outside, "|", b.reason)
read | operator 'read' is a source whose generator is not splittable: ...
total | operator 'total' is stateful (an aggregate without by= keeps one state for all tuples)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.model.graph import AppGraph
from spadeopt.plan.fission import rewrite_region
from spadeopt.plan.region_index import operator_problem
from spadeopt.plan.regions import Region, check_region

PREFIX = "auto_"  # discovered regions are named PREFIX + their first operator


@dataclass(frozen=True)
class Boundary:
    """Why operator ``outside``, next to the region's operator ``inside``, is not in it."""

    outside: str
    inside: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"outside": self.outside, "inside": self.inside, "reason": self.reason}


@dataclass(frozen=True)
class Candidate:
    """One discovered region (at width 1) and the reasons for each of its boundaries."""

    region: Region
    boundaries: tuple[Boundary, ...]

    def to_json(self) -> dict[str, Any]:
        r = self.region
        return {"name": r.name, "operators": list(r.operators), "key": list(r.key), "ordering": r.ordering,
                "fed": r.fed, "boundaries": [b.to_json() for b in self.boundaries]}


@dataclass(frozen=True)
class Discovery:
    """Every candidate region of a graph, and the operators in none with the reason."""

    candidates: tuple[Candidate, ...]
    outside: tuple[tuple[str, str], ...] = field(default=())  # (operator, why it is in no region)
    checks: int = 0  # legality checks made (for the cost, not the answer)

    @property
    def regions(self) -> tuple[Region, ...]:
        return tuple(c.region for c in self.candidates)

    def to_json(self) -> dict[str, Any]:
        return {"candidates": [c.to_json() for c in self.candidates],
                "outside": [{"operator": o, "reason": why} for o, why in self.outside]}


class _Judge:
    """``check_region`` + the width-2 rewrite of a set of operators, counted."""

    def __init__(self, graph: AppGraph) -> None:
        self.graph = graph
        self.order = {op.name: i for i, op in enumerate(graph.operators)}
        self.checks = 0

    def problems(self, ops: Iterable[str]) -> list[str]:
        """Why ``ops`` cannot be a region (empty: it can)."""
        self.checks += 1
        names = tuple(sorted(set(ops), key=self.order.__getitem__))
        try:
            shape = check_region(self.graph, "candidate", names)
            rewrite_region(self.graph, Region("candidate", names, 2, shape.key, shape.ordering, shape.fed))
        except UsageError as exc:
            return _reasons(str(exc))
        return []


def _reasons(message: str) -> list[str]:
    """The problem lines of a legality error (``check_region`` lists them as ``  - ...``)."""
    lines = [ln[4:] for ln in message.splitlines() if ln.startswith("  - ")]
    return lines or [message.replace("parallel region 'candidate'", "the region")]


def discover_regions(graph: AppGraph, exclude: Iterable[str] = (), taken: Iterable[str] = ()) -> Discovery:
    """The candidate parallel regions of ``graph`` (module docstring), each at width 1.

    ``exclude``: operators that are in no discovered region (those of declared regions);
    ``taken``: region names already in use (declared), which a discovered name avoids."""
    judge = _Judge(graph)
    order = judge.order
    excluded = set(exclude)
    names_used = set(taken)
    neighbours: dict[str, set[str]] = {op.name: set() for op in graph.operators}
    for s in graph.streams:
        if s.src.op != s.dst.op:
            neighbours[s.src.op].add(s.dst.op)
            neighbours[s.dst.op].add(s.src.op)
    why_not: dict[str, str] = {}
    for op in graph.operators:
        if op.name not in excluded:
            why = operator_problem(graph, op.name)
            if why:
                why_not[op.name] = why
    owner: dict[str, str] = {o: "" for o in excluded}  # operator -> the region holding it ('' declared)
    found: list[tuple[str, list[str]]] = []
    outside: list[tuple[str, str]] = []
    for op in graph.operators:
        seed = op.name
        if seed in owner or seed in why_not:
            continue
        alone = judge.problems([seed])
        if alone:
            outside.append((seed, "alone: " + "; ".join(alone)))
            continue
        region = _grow(judge, seed, neighbours, lambda o: o not in owner and o not in why_not)
        if all(not graph.op(o).outputs for o in region):  # policy, not legality: nothing worth replicating
            for o in region:
                owner[o] = ""
                outside.append((o, "a region of counting sinks alone would replicate only the count"))
            continue
        name = _name(region[0], names_used)
        names_used.add(name)
        for o in region:
            owner[o] = name
        found.append((name, region))
    for o in why_not:
        outside.append((o, why_not[o]))
    outside.sort(key=lambda x: order[x[0]])
    candidates = []
    declared = {o: n for n, ops, _ in graph.annotations.parallel for o in ops}
    for name, ops in found:
        ops = sorted(ops, key=order.__getitem__)
        shape = check_region(graph, name, tuple(ops))
        region = Region(name, tuple(ops), 1, shape.key, shape.ordering, shape.fed)
        candidates.append(Candidate(region, _boundaries(judge, ops, neighbours, why_not, owner, declared)))
    return Discovery(tuple(candidates), tuple(outside), judge.checks)


def _name(first: str, used: set[str]) -> str:
    name, i = f"{PREFIX}{first}", 2
    while name in used:
        name, i = f"{PREFIX}{first}_{i}", i + 1
    return name


def _grow(judge: _Judge, seed: str, neighbours: Mapping[str, set[str]], free) -> list[str]:
    """The region grown from ``seed`` (legal alone) by galloping and a last pass over the
    rejected neighbours (module docstring)."""
    order = judge.order
    region = [seed]
    members = {seed}
    rejected: dict[str, list[str]] = {}
    while True:
        frontier = _frontier(members, neighbours, order, lambda o: free(o) and o not in rejected)
        if not frontier:
            added = False
            for n in sorted(rejected, key=order.__getitem__):
                if not judge.problems(region + [n]):
                    region.append(n)
                    members.add(n)
                    rejected.clear()
                    added = True
                    break
            if not added:
                return region
            continue
        k = _gallop(judge, region, frontier, rejected)
        if k:
            region += frontier[:k]
            members.update(frontier[:k])


def _gallop(judge: _Judge, region: list[str], frontier: list[str], rejected: dict[str, list[str]]) -> int:
    """The largest ``k`` found for which ``region + frontier[:k]`` is legal (0: none, and
    ``frontier[0]`` is rejected with its reasons). All of the frontier is tried first
    (the common case: the whole component is one region), then k = 1, 2, 4, ..., then a
    bisection between the largest legal k and the next larger one that failed."""
    n = len(frontier)
    legal = {n: not judge.problems(region + frontier)}
    if legal[n]:
        return n
    k, first = 1, []
    while k < n:
        problems = judge.problems(region + frontier[:k])
        legal[k] = not problems
        if k == 1:
            first = problems
        k *= 2
    best = max((k for k, ok in legal.items() if ok), default=0)
    if not best:
        rejected[frontier[0]] = first
        return 0
    lo, hi = best, min((k for k, ok in legal.items() if not ok and k > best), default=None)
    while hi is not None and hi - lo > 1:  # heuristic: legality need not be monotone in k
        mid = (lo + hi) // 2
        if judge.problems(region + frontier[:mid]):
            hi = mid
        else:
            lo = mid
    return lo


def _frontier(members: set[str], neighbours: Mapping[str, set[str]], order: Mapping[str, int],
              free) -> list[str]:
    """Free operators connected to ``members`` through free operators, in the order a
    best-first walk from ``members`` meets them (smallest declaration index first), so
    every prefix is connected to ``members``."""
    heap: list[tuple[int, str]] = []
    seen = set(members)
    for m in members:
        for n in neighbours[m]:
            if n not in seen and free(n):
                seen.add(n)
                heapq.heappush(heap, (order[n], n))
    out = []
    while heap:
        _, o = heapq.heappop(heap)
        out.append(o)
        for n in neighbours[o]:
            if n not in seen and free(n):
                seen.add(n)
                heapq.heappush(heap, (order[n], n))
    return out


def _boundaries(judge: _Judge, ops: list[str], neighbours: Mapping[str, set[str]], why_not: Mapping[str, str],
                owner: Mapping[str, str], declared: Mapping[str, str]) -> tuple[Boundary, ...]:
    """For each operator next to region ``ops``: why it is outside."""
    order = judge.order
    members = set(ops)
    out = []
    for o in sorted({n for m in ops for n in neighbours[m]} - members, key=order.__getitem__):
        inside = min((m for m in neighbours[o] if m in members), key=order.__getitem__)
        if o in why_not:
            reason = why_not[o]
        elif o in declared and owner.get(o) == "":
            reason = f"in declared region '{declared[o]}' (App.parallel pins its operators)"
        else:
            problems = judge.problems([*ops, o])
            if problems:
                reason = "; ".join(problems)
            elif owner.get(o):
                reason = f"in region '{owner[o]}', formed first (left to right)"
            else:  # cannot happen: the last pass of _grow checked every free neighbour
                reason = "not added"
        out.append(Boundary(o, inside, reason))
    return tuple(out)
