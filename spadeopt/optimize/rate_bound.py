"""An upper bound on the predicted source rate of every plan of one physical problem.

FATM's width search (:func:`spadeopt.optimize.widths.choose_widths`) scores a width
vector by the best plan it makes for it (GreedyFuse rate searches at every MaxFrac rung
and the channel-symmetric plans), each scored by :func:`spadeopt.optimize.predict.predict`.
:func:`rate_bound` answers, without fusing anything, how high that prediction can be
for *any* plan of the vector's physical problem that keeps every channel of a region in
PEs of its own (the rule every plan FATM makes obeys, :mod:`spadeopt.optimize.legality`).
A vector whose bound cannot beat the search's incumbent needs no rate search at all
(branch and bound, in ``choose_widths``).

Algorithm. The prediction's factor ``k`` (rate over the profiled rate) is feasible only
if every PE's load is at most ``pe_cap`` and every node's at most its capacity. Per unit
``k`` the bound uses, for every plan:

* each operator's least load: ``oper_scale x`` its load, or its inlined load when it is
  the downstream end of a collapsible link (``predict._inlined_load``; collapse only
  lowers it), whichever is less; the call cost of internal links (``call_s >= 0``) is left
  out;
* each link end's least communication cost: ``comm_scale x`` the flat-out cost
  (``predict._flat_comm`` of that link alone) when ``model.batch > 0``, else 0; a link
  with an end outside the app always crosses (one end);
* *forced crossings*: an operator's PE holds at most one channel of a region, so of its
  links to (or, for an operator in no channel, from) the channels of one region all but
  the most expensive channel's cross; a link between two channels of one region always
  crosses;
* *connected groups*: the operators joined by links whose ends are alike (same channel
  of the same region, or both in no channel) form connected groups; a group of least
  load ``T_G`` spreads over at least ``m = ceil(k T_G / pe_cap)`` PEs, so at least
  ``m - 1`` of its own links cross: at least its ``m - 1`` cheapest;
* PEs: at least ``ceil(k T / pe_cap)``, the widest region's channel count, and each
  group's ``m``; on one node with ``busy <= 0`` (every PE counts), that node offers
  ``cores / (1 + sched (N - cores))`` for ``N > cores`` PEs (predict's rule), else
  ``nodes x cores`` in all.

The sets of links charged (forced, each group's own, external) are disjoint, every
crossing link costs at both ends, and so ``k (T + crossing)`` is at most what any plan's
PEs need in total. Feasibility is monotone in ``k`` (every term grows with it, the node
capacity shrinks), so the bound is the largest feasible ``k``, found by bisection and
returned as its infeasible end, widened by ``SAFETY`` for rounding.

Invariant: ``rate_bound(...) >= predict(...).rate`` for every plan of the problem whose
PEs hold no two channels of one region (``tests/optimize/test_rate_bound.py`` checks it
on random graphs for every plan the search scores). Cost: O(L log L) for ``L`` links,
then O(groups) per bisection step; no GreedyFuse, no placement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import accumulate

from spadeopt.optimize.predict import PerfModel, _flat_comm, _inlined_load
from spadeopt.optimize.problem import FusionProblem

BISECT_STEPS = 60
SAFETY = 1e-6  # relative: the bound's own sums are in another order than the prediction's


def rate_bound(problem: FusionProblem, nodes: int, cores: int, profiled_rate: float, model: PerfModel,
               call_s: float, inlinable: frozenset[str], inlined_frac: float,
               batches: Mapping[tuple[str | None, str | None], float] | None) -> float:
    """The upper bound (module docstring) on the predicted source rate of any plan of
    ``problem`` (at the profiled rate, as :func:`spadeopt.optimize.predict.predict` takes
    it) on ``nodes`` x ``cores``; ``inlinable`` are the operators a collapse may inline;
    ``math.inf`` when nothing bounds it (no load, or a negative call cost)."""
    if call_s < 0 or not (profiled_rate > 0 and math.isfinite(profiled_rate)):
        return math.inf
    least = {op: model.oper_scale * (min(u, _inlined_load(problem, op, model.collapse_saves_s, inlined_frac))
                                     if op in inlinable else u) for op, u in problem.load.items()}
    total = math.fsum(least.values())
    if total <= 0:
        return math.inf
    fixed, groups = _crossings(problem, model, batches, least)
    widest = max((len(r) for r in problem.channels), default=1)
    one_node = nodes == 1 and model.busy <= 0
    pe_cap = model.pe_cap

    def feasible(k: float) -> bool:
        pes = max(widest, math.ceil(k * total / pe_cap * (1 - 1e-12)))
        crossing = fixed
        for t_g, prefix in groups:
            m = max(1, math.ceil(k * t_g / pe_cap * (1 - 1e-12)))
            pes = max(pes, m)
            crossing += prefix[min(m - 1, len(prefix) - 1)]
        cap = cores / (1.0 + model.sched * max(0, pes - cores)) if one_node else nodes * cores
        return k * (total + crossing) <= cap

    hi = min(nodes * cores / total, pe_cap / max(least.values()) if max(least.values()) > 0 else math.inf)
    if not feasible(hi):
        lo = 0.0
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2
            if feasible(mid):
                lo = mid
            else:
                hi = mid
    return hi * (1 + SAFETY) * profiled_rate


def capacity_bound(load: Mapping[str, float], nodes: int, cores: int, profiled_rate: float, model: PerfModel,
                   inlined_frac: float) -> float:
    """A cheaper and looser bound than :func:`rate_bound`, from the operators' loads
    alone (no problem, no links): every operator at ``oper_scale x (1 - inlined_frac)`` of
    its load at least (``math.inf`` when ``model.collapse_saves_s`` could take more), all
    of them within ``nodes x cores``, the heaviest within one PE's ``pe_cap``."""
    if model.collapse_saves_s > 0 or not (profiled_rate > 0 and math.isfinite(profiled_rate)):
        return math.inf
    keep = model.oper_scale * max(0.0, min(1.0, 1.0 - inlined_frac))
    total, top = math.fsum(load.values()) * keep, max(load.values(), default=0.0) * keep
    if total <= 0:
        return math.inf
    k = min(nodes * cores / total, model.pe_cap / top if top > 0 else math.inf)
    return k * (1 + SAFETY) * profiled_rate


def _crossings(problem: FusionProblem, model: PerfModel,
               batches: Mapping[tuple[str | None, str | None], float] | None,
               least: Mapping[str, float]) -> tuple[float, list[tuple[float, list[float]]]]:
    """Per unit factor: the crossing cost every plan pays (external link ends, forced
    crossings at both ends), and each connected group's least load with the prefix sums
    of its own links' costs at both ends, cheapest first (``prefix[j]``: the ``j``
    cheapest)."""
    chan = problem.channel_of
    fixed = 0.0
    toward: dict[tuple[str, str, int], dict[int, float]] = {}  # (op, side, region) -> channel -> cost
    parent = {op: op for op in problem.operators}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    own: list[tuple[str, float]] = []  # (an end, cost) of links whose ends are alike
    for lk in problem.links:
        cost = model.comm_scale * _flat_comm(problem, [lk], model, batches) if batches is not None else 0.0
        a, b = lk.src, lk.dst
        if a is None or b is None:
            fixed += cost
            continue
        ca, cb = chan.get(a), chan.get(b)
        if ca == cb:
            parent[find(a)] = find(b)
            own.append((a, 2.0 * cost))
        elif ca is not None and cb is not None and ca[0] == cb[0]:
            fixed += 2.0 * cost  # two channels of one region never share a PE
        elif cb is not None:
            side = toward.setdefault((a, "out", cb[0]), {})
            side[cb[1]] = side.get(cb[1], 0.0) + 2.0 * cost
        else:  # ca is not None, cb is None
            side = toward.setdefault((b, "in", ca[0]), {})
            side[ca[1]] = side.get(ca[1], 0.0) + 2.0 * cost
    for side in toward.values():
        fixed += math.fsum(side.values()) - max(side.values())
    costs: dict[str, list[float]] = {}
    for end, cost in own:
        costs.setdefault(find(end), []).append(cost)
    loads: dict[str, float] = {}
    for op in problem.operators:
        root = find(op)
        loads[root] = loads.get(root, 0.0) + least[op]
    groups = [(loads[root], [0.0, *accumulate(sorted(costs.get(root, ())))]) for root in sorted(loads)]
    return fixed, groups
