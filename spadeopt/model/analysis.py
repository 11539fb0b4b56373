"""Queries on a frozen ``AppGraph`` that several stages ask: which operators the
annotations tie together, and which in-PE cycles would recurse forever."""

from __future__ import annotations

from collections.abc import Iterable

from spadeopt.model.graph import AppGraph


def colocation_groups(graph: AppGraph, manual: bool = False) -> list[frozenset[str]]:
    """Connected groups of the colocation annotations (singletons omitted); with
    ``manual``, of colocation and the developer's manual fusion together (FMAN's PEs)."""
    import networkx as nx  # a PE imports the model, never analyses it: kept off its start-up

    uf = nx.utils.UnionFind([op.name for op in graph.operators])
    for g in (*graph.annotations.colocate, *(graph.annotations.fuse if manual else ())):
        uf.union(*g)
    return sorted((frozenset(s) for s in uf.to_sets() if len(s) > 1), key=min)


def recursion_cycles(graph: AppGraph, members: Iterable[str]) -> list[list[str]]:
    """Cycles inside one PE made only of links into tuple-generating ports.

    A direct-call PE recurses around such a cycle forever; a link into a
    non-tuple-generating port breaks the recursion (paper 003 §2.6).
    """
    import networkx as nx

    members = set(members)
    g = nx.DiGraph()
    for s in graph.streams:
        if s.src.op in members and s.dst.op in members:
            if graph.op(s.dst.op).in_port(s.dst.port).tuple_generating:
                g.add_edge(s.src.op, s.dst.op, port=str(s.dst))
    out = []
    for comp in nx.strongly_connected_components(g):
        if len(comp) > 1 or any(g.has_edge(n, n) for n in comp):
            ports = sorted(d["port"] for u, v, d in g.edges(data=True) if u in comp and v in comp)
            out.append(ports)
    return sorted(out)
