"""Queries on a frozen ``AppGraph`` that several stages ask: which operators the
annotations tie together, and which in-PE cycles would recurse forever."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def recursion_cycles_by_pe(graph: AppGraph, pe_of: Mapping[str, str]) -> dict[str, list[list[str]]]:
    """:func:`recursion_cycles` of every PE at once (``pe_of``: operator -> PE), in one pass
    over the streams: a PE's cycles are those of the links into tuple-generating ports with
    both ends in it, so they are the strongly connected components of the graph of all
    such links, each inside one PE. Only PEs that have a cycle are keys."""
    import networkx as nx

    if graph.acyclic:
        return {}
    g = nx.DiGraph()
    for s in graph.streams:
        pe = pe_of.get(s.src.op)
        if pe is not None and pe == pe_of.get(s.dst.op) and graph.op(s.dst.op).in_port(s.dst.port).tuple_generating:
            g.add_edge(s.src.op, s.dst.op, port=str(s.dst))
    out: dict[str, list[list[str]]] = {}
    for comp in nx.strongly_connected_components(g):
        if len(comp) > 1 or any(g.has_edge(n, n) for n in comp):
            ports = sorted(d["port"] for u, v, d in g.edges(data=True) if u in comp and v in comp)
            out.setdefault(pe_of[next(iter(comp))], []).append(ports)
    return {pe: sorted(cycles) for pe, cycles in out.items()}
