"""Placement: assign PEs to nodes, minimising inter-node traffic under CPU capacity.

The paper only says SPADE "uses a form of clustering (PEs into nodes) with the goal of
minimizing inter-node communication" (digest §5.4). This module implements the digest's
suggested heuristic, greedy agglomerative clustering:

0. Each node offers ``capacity = cores x capacity_frac`` CPUs. Placement is infeasible
   (``PlacementInfeasible``) when one PE needs more than that, when the PEs pinned to one
   node need more, or when all PEs together need more than ``nodes x capacity``.
1. Start with one cluster per PE; PEs pinned to the same node start as one cluster.
2. Agglomerate: repeatedly merge the two linked clusters with the largest inter-cluster
   rate whose combined load fits one node and whose pins do not disagree. Ties go to the
   pair with the lexicographically smallest (first PE id, first PE id). Stop when no
   linked pair fits. Zero-rate links do not attract.
3. Map clusters to nodes, deterministically:

   * at most ``nodes`` clusters: pinned clusters on their nodes, the others biggest first
     (ties: first PE id) on the free nodes in increasing order;
   * more clusters than nodes: first-fit decreasing. Pinned clusters go first; then each
     other cluster, biggest first, goes to the node it exchanges the most traffic with
     among those where it fits, else to the lowest-numbered node where it fits. This
     merges clusters that share no (affordable) link. FFD is a heuristic: if a cluster
     fits nowhere although the total fits, ``PlacementInfeasible`` says so.

On one node (no pins) whose capacity holds the PEs' total with room for any order of
summing it (:func:`_surely_fits`), steps 1-3 can only put every PE on that node: FATM's
many-core searches place thousands of candidate plans on one node, so that answer is
given without the agglomeration (the same :class:`Placement`, field for field).

As in the paper's radio-astronomy result, PEs that fit on one node end up on one node
and some nodes may stay idle. Loads are CPU fractions in cores (a PE's CompLoad). The
rate may be tuples/s or bytes/s, whichever the caller passes; :func:`pe_graph` gives
tuples/s. Link direction is ignored: ``(a, b)`` and ``(b, a)`` add up.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from spadeopt.errors import PlacementInfeasible, UsageError
from spadeopt.optimize.cost import REL_TOL, metrics
from spadeopt.optimize.problem import FusionProblem


@dataclass(frozen=True)
class Placement(Mapping[str, int]):
    """PE id -> node index (``0 .. nodes-1``), plus what the placement costs.

    ``node_load[k]`` is the summed load on node ``k``; ``capacity`` the per-node limit
    used; ``inter_node_rate`` the rate of PE links whose ends sit on different nodes.
    """

    node_of: Mapping[str, int] = field(hash=False)
    node_load: tuple[float, ...]
    capacity: float
    inter_node_rate: float

    def __getitem__(self, pe_id: str) -> int:
        return self.node_of[pe_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.node_of)

    def __len__(self) -> int:
        return len(self.node_of)

    @property
    def nodes_used(self) -> int:
        """How many nodes host at least one PE."""
        return len(set(self.node_of.values()))


class _Cluster:
    """Working state of one cluster during agglomeration."""

    __slots__ = ("pes", "key", "load", "pin", "nbr")

    def __init__(self, pes: list[str], load: float, pin: int | None) -> None:
        self.pes = pes
        self.key = min(pes)
        self.load = load
        self.pin = pin
        self.nbr: dict[int, float] = {}


def place(
    pes: Sequence[tuple[str, float]],
    pe_links: Mapping[tuple[str, str], float],
    nodes: int,
    cores: int,
    capacity_frac: float = 1.0,
    *,
    pinned: Mapping[str, int] | None = None,
) -> Placement:
    """Place ``pes`` (``(pe_id, comp_load)`` pairs) on ``nodes`` nodes of ``cores`` cores.

    ``pe_links`` maps PE id pairs to the rate between them; ``pinned`` fixes some PEs to a
    node (host annotations). See the module docstring for the algorithm. Raises
    ``UsageError`` for malformed input and ``PlacementInfeasible`` when the PEs do not fit.

    >>> p = place([("a", 0.4), ("b", 0.4), ("c", 0.4)], {("a", "b"): 10.0}, nodes=2, cores=1)
    >>> dict(p), p.inter_node_rate
    ({'a': 0, 'b': 0, 'c': 1}, 0.0)
    """
    pins = dict(pinned or {})
    rates = _validate(pes, pe_links, nodes, cores, capacity_frac, pins)
    capacity = cores * capacity_frac
    loads = dict(pes)
    _check_capacity(loads, pins, nodes, cores, capacity_frac)
    if nodes == 1 and not pins and _surely_fits(loads.values(), capacity):
        node_of = dict.fromkeys(loads, 0)  # one node: steps 1-3 put every PE on it (see _surely_fits)
    else:
        clusters = _initial_clusters(loads, rates, pins)
        _agglomerate(clusters, capacity)
        cluster_node = _assign(clusters, nodes, capacity)
        node_of = {pe: cluster_node[cid] for cid, c in clusters.items() for pe in c.pes}
        node_of = {pe: node_of[pe] for pe, _ in pes}
    per_node: dict[int, list[float]] = {}  # sparse: a big cluster has mostly empty nodes
    for pe, load in pes:
        per_node.setdefault(node_of[pe], []).append(load)
    node_load = [0.0] * nodes
    for k, ls in per_node.items():
        node_load[k] = math.fsum(ls)
    cut = math.fsum(r for (a, b), r in rates.items() if node_of[a] != node_of[b])
    return Placement(
        node_of=node_of,
        node_load=tuple(node_load),
        capacity=capacity,
        inter_node_rate=cut,
    )


def round_robin(pes: Sequence[tuple[str, float]], pe_links: Mapping[tuple[str, str], float], nodes: int,
                cores: int, capacity_frac: float = 1.0) -> Placement:
    """``pes`` dealt over the nodes in turn, whatever they load: the placement of a plan
    that :func:`place` finds infeasible at the rate it was asked about (FATM still scores
    it, by the prediction, at the rate where it fits).

    >>> p = round_robin([("a", 0.4), ("b", 0.4), ("c", 0.4)], {("a", "b"): 10.0}, nodes=2, cores=1)
    >>> dict(p), p.node_load, p.inter_node_rate
    ({'a': 0, 'b': 1, 'c': 0}, (0.8, 0.4), 10.0)
    """
    node_of = {pe: i % nodes for i, (pe, _) in enumerate(pes)}
    node_load = [0.0] * nodes
    for pe, load in pes:
        node_load[node_of[pe]] += load
    cut = math.fsum(r for (a, b), r in pe_links.items() if node_of[a] != node_of[b])
    return Placement(node_of=node_of, node_load=tuple(node_load), capacity=cores * capacity_frac,
                     inter_node_rate=cut)


def pe_graph(
    partitions: Sequence[Sequence[str]],
    problem: FusionProblem,
    pe_ids: Sequence[str] | None = None,
    comp_loads: Sequence[float] = (),
) -> tuple[tuple[tuple[str, float], ...], dict[tuple[str, str], float]]:
    """Inputs for :func:`place` from a partitioning: PE CompLoads and inter-PE tuple rates.

    PE ``i`` is named ``pe_ids[i]`` (default ``"pe<i>"``); link keys are ordered pairs of
    ids (smaller first) with the total tuple rate between the two PEs. External links
    (imported/exported streams) do not appear. ``comp_loads`` are the partitions'
    CompLoads when the caller has them (``FusionResult.comp_loads``); else computed.
    """
    ids = list(pe_ids) if pe_ids is not None else [f"pe{i}" for i in range(len(partitions))]
    if len(ids) != len(partitions) or len(set(ids)) != len(ids):
        msg = f"pe_ids must be {len(partitions)} distinct names; got {ids!r}"
        raise UsageError(msg)
    if comp_loads and len(comp_loads) != len(partitions):
        msg = f"comp_loads must give {len(partitions)} loads; got {len(comp_loads)}"
        raise UsageError(msg)
    owner = {op: ids[i] for i, part in enumerate(partitions) for op in part}
    loads = tuple(zip(ids, comp_loads, strict=True)) if comp_loads else tuple(
        (ids[i], metrics(frozenset(part), problem).comp_load) for i, part in enumerate(partitions)
    )
    acc: dict[tuple[str, str], list[float]] = {}
    for link in problem.links:
        if link.src is None or link.dst is None:
            continue
        a, b = owner[link.src], owner[link.dst]
        if a != b:
            acc.setdefault((min(a, b), max(a, b)), []).append(link.rate)
    return loads, {pair: math.fsum(rs) for pair, rs in sorted(acc.items())}


def _fits(load: float, capacity: float) -> bool:
    return load <= capacity + REL_TOL * max(1.0, capacity)


def one_node_holds(loads: Collection[float], nodes: int, cores: int, capacity_frac: float) -> bool:
    """Whether :func:`place` puts PEs of these ``loads`` all on one node without looking at
    their links: ``nodes`` is 1, the arguments are valid and the loads surely fit
    (:func:`_surely_fits`). Callers may then pass no PE links (only placement across nodes
    reads them: the inter-node rate is 0 either way)."""
    valid = (type(cores) is int and cores >= 1 and isinstance(capacity_frac, int | float)
             and 0 < capacity_frac <= 1 and all(type(u) is float and 0.0 <= u < math.inf for u in loads))
    return nodes == 1 and valid and _surely_fits(loads, cores * capacity_frac)


def _surely_fits(loads: Collection[float], capacity: float) -> bool:
    """Whether every partial sum of ``loads`` (>= 0), added in any order, :func:`_fits`
    ``capacity``: their exact total is at most ``fsum x (1 + 2^-53)``, and float sums of
    ``n`` of them in any order at most ``(1 + n 2^-52)`` times their exact sum, so a margin
    of ``(1 + 2 n 2^-52)`` covers every order. Then placement on one node puts every PE on it
    whatever steps 1-3 do (agglomeration and first-fit only ever add loads of the PEs, each
    such sum fits): the shortcut of :func:`place` for one node, O(PEs) instead of the
    agglomeration's heap."""
    return math.fsum(loads) * (1.0 + 2.0 * (len(loads) + 1) * 2.0 ** -52) < capacity + REL_TOL * max(1.0, capacity)


def _validate(
    pes: Sequence[tuple[str, float]],
    pe_links: Mapping[tuple[str, str], float],
    nodes: int,
    cores: int,
    capacity_frac: float,
    pins: dict[str, int],
) -> dict[tuple[str, str], float]:
    """Check the arguments; return the undirected link rates keyed by sorted id pair."""
    problems: list[str] = []
    for name, value in (("nodes", nodes), ("cores", cores)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"{name} must be an int >= 1; got {value!r}")
    if not (isinstance(capacity_frac, int | float) and 0 < capacity_frac <= 1):
        problems.append(f"capacity_frac must be in (0, 1]; got {capacity_frac!r}")
    ids: set[str] = set()
    for pe, load in pes:
        if pe in ids:
            problems.append(f"PE '{pe}' is listed more than once")
        ids.add(pe)
        if not (isinstance(load, int | float) and math.isfinite(load) and load >= 0):
            problems.append(f"load of PE '{pe}' must be a finite number >= 0; got {load!r}")
    acc: dict[tuple[str, str], list[float]] = {}
    for (a, b), r in pe_links.items():
        unknown = [x for x in (a, b) if x not in ids]
        if unknown:
            problems.append(f"link ({a}, {b}) names unknown PE(s) {unknown}")
        elif a == b:
            problems.append(f"link ({a}, {b}) joins a PE to itself")
        elif not (isinstance(r, int | float) and math.isfinite(r) and r >= 0):
            problems.append(f"link ({a}, {b}) rate must be a finite number >= 0; got {r!r}")
        else:
            acc.setdefault((min(a, b), max(a, b)), []).append(float(r))
    for pe, node in pins.items():
        if pe not in ids:
            problems.append(f"pinned PE '{pe}' is not among the PEs")
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < max(nodes, 1):
            problems.append(f"PE '{pe}' is pinned to node {node!r}; nodes are 0..{nodes - 1}")
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        msg = f"invalid placement input ({len(problems)} problem(s)):\n{lines}"
        raise UsageError(msg)
    return {pair: math.fsum(rs) for pair, rs in acc.items()}


def _check_capacity(
    loads: dict[str, float], pins: dict[str, int], nodes: int, cores: int, frac: float
) -> None:
    capacity = cores * frac
    offer = f"one node offers {cores} cores x capacity_frac {frac:g} = {capacity:.2f}"
    for pe, load in sorted(loads.items()):
        if not _fits(load, capacity):
            msg = (
                f"PE '{pe}' needs {load:.2f} cores but {offer}; use bigger nodes, raise "
                "capacity_frac, or re-fuse with a smaller MaxFrac"
            )
            raise PlacementInfeasible(msg)
    for node in sorted(set(pins.values())):
        pinned_load = math.fsum(loads[pe] for pe, n in pins.items() if n == node)
        if not _fits(pinned_load, capacity):
            names = sorted(pe for pe, n in pins.items() if n == node)
            msg = (
                f"PEs {names} pinned to node {node} need {pinned_load:.2f} cores but {offer}; "
                "pin fewer PEs there or use bigger nodes"
            )
            raise PlacementInfeasible(msg)
    total = math.fsum(loads.values())
    if not _fits(total, nodes * capacity):
        msg = (
            f"the PEs need {total:.2f} cores in total but {nodes} nodes x {cores} cores x "
            f"capacity_frac {frac:g} = {nodes * capacity:.2f} are available; add nodes, use "
            "bigger nodes or raise capacity_frac"
        )
        raise PlacementInfeasible(msg)


def _initial_clusters(
    loads: dict[str, float], rates: dict[tuple[str, str], float], pins: dict[str, int]
) -> dict[int, _Cluster]:
    groups: dict[object, list[str]] = {}
    for pe in sorted(loads):
        groups.setdefault(("pin", pins[pe]) if pe in pins else ("pe", pe), []).append(pe)
    ordered = sorted(groups.values(), key=min)
    clusters = {
        cid: _Cluster(pes, math.fsum(loads[p] for p in pes), pins.get(pes[0]))
        for cid, pes in enumerate(ordered)
    }
    owner = {pe: cid for cid, c in clusters.items() for pe in c.pes}
    acc: dict[tuple[int, int], list[float]] = {}
    for (a, b), r in rates.items():
        ca, cb = owner[a], owner[b]
        if ca != cb and r > 0:
            acc.setdefault((min(ca, cb), max(ca, cb)), []).append(r)
    for (ca, cb), rs in acc.items():
        clusters[ca].nbr[cb] = clusters[cb].nbr[ca] = math.fsum(rs)
    return clusters


def _agglomerate(clusters: dict[int, _Cluster], capacity: float) -> None:
    """Step 2: merge linked clusters, heaviest link first, while they fit. In place."""
    heap: list[tuple[float, str, str, int, int]] = []

    def offer(a: int, b: int) -> None:
        ca, cb = clusters[a], clusters[b]
        if ca.pin is not None and cb.pin is not None and ca.pin != cb.pin:
            return
        if not _fits(ca.load + cb.load, capacity):
            return
        first, second = sorted((ca.key, cb.key))
        heapq.heappush(heap, (-ca.nbr[b], first, second, a, b))

    for a in sorted(clusters):
        for b in clusters[a].nbr:
            if a < b:
                offer(a, b)
    next_id = max(clusters, default=-1) + 1
    while heap:
        _, _, _, a, b = heapq.heappop(heap)
        if a not in clusters or b not in clusters:
            continue
        ca, cb = clusters.pop(a), clusters.pop(b)
        new = _Cluster(ca.pes + cb.pes, ca.load + cb.load, ca.pin if ca.pin is not None else cb.pin)
        for k in (ca.nbr.keys() | cb.nbr.keys()) - {a, b}:
            value = ca.nbr.get(k, 0.0) + cb.nbr.get(k, 0.0)
            new.nbr[k] = value
            knbr = clusters[k].nbr
            knbr.pop(a, None)
            knbr.pop(b, None)
            knbr[next_id] = value
        clusters[next_id] = new
        for k in new.nbr:
            offer(next_id, k)
        next_id += 1


def _assign(clusters: dict[int, _Cluster], nodes: int, capacity: float) -> dict[int, int]:
    """Step 3: cluster id -> node index."""
    result: dict[int, int] = {cid: c.pin for cid, c in clusters.items() if c.pin is not None}
    free = sorted(
        (cid for cid, c in clusters.items() if c.pin is None),
        key=lambda cid: (-clusters[cid].load, clusters[cid].key),
    )
    if len(clusters) <= nodes:
        taken = set(result.values())
        open_nodes = (k for k in range(nodes) if k not in taken)
        result.update(zip(free, open_nodes, strict=False))
        return result
    node_load = [0.0] * nodes
    for cid, node in result.items():
        node_load[node] += clusters[cid].load
    for cid in free:
        c = clusters[cid]
        affinity = [0.0] * nodes
        for k, r in c.nbr.items():
            if k in result:
                affinity[result[k]] += r
        fitting = [k for k in range(nodes) if _fits(node_load[k] + c.load, capacity)]
        if not fitting:
            msg = (
                f"first-fit decreasing found no node for PEs {sorted(c.pes)} (load "
                f"{c.load:.2f}); node loads are {[round(x, 2) for x in node_load]} of "
                f"{capacity:.2f} each. The total fits but this heuristic could not pack it; "
                "add a node or raise capacity_frac"
            )
            raise PlacementInfeasible(msg)
        node = max(fitting, key=lambda k: (affinity[k], -k))
        result[cid] = node
        node_load[node] += c.load
    return result
