"""Static runs: which links of a logical graph compile into one loop when both ends share
a PE (paper 004 §4). The one rule, read by codegen (``codegen.collapse`` compiles the
runs of a plan) and by the optimizer's cost model (``optimize.fatm_fit``,
``optimize.fatm_problem``: a collapsed link costs no delivery, an inlined operator part
of its load), so it lives below both, with the plan.

>>> from spadeopt.frontend.dsl import App
>>> a = App("doc")
>>> from spadeopt.toolkit.sources import counter
>>> s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 10})
>>> f = a.functor("f", s, filter="seq > 0")
>>> g = a.functor("g", f)
>>> a.sink("out", a.functor("h", g))
>>> sorted(collapsible_links(a.build()))
[('f', 'g'), ('g', 'h')]
"""

from __future__ import annotations

from spadeopt.kinds import kind_of, selectivity
from spadeopt.model.graph import STATIC, AppGraph, PortRef


def run_successor(graph: AppGraph, name: str) -> str | None:
    """The operator that ``name`` feeds inside a static run when both share a PE, or None.

    The one rule for a *collapsible link* ``a -> b`` (codegen and the optimizer's cost
    model both read it here): both kinds are collapsible (``Kind.collapsible``), ``b``
    is static-rate (no filter), ``a`` has one output port whose only subscriber is ``b``,
    and ``b`` has no other publisher. Codegen adds what only a plan knows: both in one
    PE, neither locked, ``a``'s port not exposed (``find_runs``)."""
    op = graph.op(name)
    if not kind_of(op).collapsible or len(op.outputs) != 1:
        return None
    subs = graph.subscribers(PortRef(name, op.outputs[0].name))
    if len(subs) != 1:
        return None
    nxt = graph.op(subs[0].op)
    if not kind_of(nxt).collapsible or selectivity(nxt) != STATIC or len(graph.publishers(subs[0])) != 1:
        return None
    return nxt.name


def collapsible_links(graph: AppGraph) -> frozenset[tuple[str, str]]:
    """Every link ``a -> b`` that compiles into one loop when ``a`` and ``b`` share a PE
    (``run_successor``)."""
    return frozenset((op.name, nxt) for op in graph.operators
                     if (nxt := run_successor(graph, op.name)) is not None)
