"""What region checks need of a graph, computed once per graph: each operator's streams,
successors and predecessors, its own refusal, and its strongly connected component
(:class:`RegionIndex`, kept in ``AppGraph.memo``). ``plan.regions.check_region`` and
``plan.discover`` (which checks many regions of one graph) read it."""

from __future__ import annotations

from spadeopt.kinds import kind_of
from spadeopt.model.graph import AppGraph, Stream


def operator_problem(graph: AppGraph, op: str) -> str | None:
    """Why operator ``op`` can be in no parallel region at all, whatever the region (its
    kind's ``region_problem``), or None: the per-operator part of :func:`check_region`,
    for callers that form regions (``plan.discover``)."""
    return kind_of(graph.op(op)).region_problem(graph.op(op))


class RegionIndex:
    """What :func:`check_region` needs of a graph, computed once per graph (``AppGraph.memo``,
    :func:`region_index`) so that a check costs O(operators of the region + their streams)
    rather than O(graph): each operator's entering and leaving streams (with their
    position in ``graph.streams``, so lists keep the graph's order), its successors and
    predecessors, the per-operator :func:`operator_problem`, and each operator's strongly
    connected component numbered in a topological order of the component graph (``comp``).

    ``comp`` bounds reachability: ``a`` reaches ``b`` only if ``comp[a] <= comp[b]``, and a
    cycle among some operators needs two of them in one component of more than one
    operator. Used by ``plan.discover``, which checks many regions of one graph."""

    def __init__(self, graph: AppGraph) -> None:
        self.graph = graph
        names = [op.name for op in graph.operators]
        self.ins: dict[str, list[tuple[int, Stream]]] = {n: [] for n in names}
        self.outs: dict[str, list[tuple[int, Stream]]] = {n: [] for n in names}
        self.succ: dict[str, set[str]] = {n: set() for n in names}
        for i, s in enumerate(graph.streams):
            self.outs.setdefault(s.src.op, []).append((i, s))
            self.ins.setdefault(s.dst.op, []).append((i, s))
            self.succ.setdefault(s.src.op, set()).add(s.dst.op)
            self.succ.setdefault(s.dst.op, set())
        self.pred: dict[str, set[str]] = {n: set() for n in self.succ}
        for a, bs in self.succ.items():
            for b in bs:
                self.pred[b].add(a)
        self.comp, self.cyclic = _components(self.succ)
        self._problem: dict[str, str | None] = {}

    def problem(self, op: str) -> str | None:
        """:func:`operator_problem` of ``op``, memoised."""
        if op not in self._problem:
            self._problem[op] = operator_problem(self.graph, op)
        return self._problem[op]

    def reaches(self, starts: list[str], targets: set[str], avoid: set[str]) -> str | None:
        """The first of ``starts`` from which a path through operators not in ``avoid``
        (the start included, the target too) reaches one of ``targets``, or None. Nodes
        whose component comes after every target's are never walked (they reach none)."""
        if not targets:
            return None
        comp = self.comp
        top = max(comp[t] for t in targets)
        dead: set[str] = set()  # walked from an earlier start without reaching a target
        for start in starts:
            if start in dead or comp[start] > top:
                continue
            if start in targets:
                return start
            stack, seen = [start], {start}
            while stack:
                for n in self.succ[stack.pop()]:
                    if n in seen or n in avoid or n in dead or comp[n] > top:
                        continue
                    if n in targets:
                        return start
                    seen.add(n)
                    stack.append(n)
            dead |= seen
        return None


def _components(succ: dict[str, set[str]]) -> tuple[dict[str, int], frozenset[str]]:
    """Each node's strongly connected component, numbered in a topological order of the
    component graph (an edge between components goes to a larger number), and the nodes
    of components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []  # components, in reverse topological order
    for root in succ:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(succ[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work and low[v] < low[work[-1][0]]:
                    low[work[-1][0]] = low[v]
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    found.append(comp)
    n = len(found)
    rank = {v: n - 1 - i for i, comp in enumerate(found) for v in comp}
    return rank, frozenset(v for comp in found if len(comp) > 1 for v in comp)


def region_index(graph: AppGraph) -> RegionIndex:
    """The graph's :class:`RegionIndex`, built once per graph (``AppGraph.memo``)."""
    index = graph.memo.get("region_index")
    if index is None:
        index = graph.memo["region_index"] = RegionIndex(graph)
    return index
