"""A new fusion strategy in one module (the worked example of docs/architecture.md,
"Adding a strategy"): PAIRS fuses consecutive operators two by two, in declaration
order, and spreads the pairs round-robin over the nodes. It is one :class:`Strategy`:
its ``partition`` says which operators share a PE and where each PE runs; everything
else, parallel regions resolved first (at width 1 unless ``--width``, as it does not set
``declared_widths``), PE naming, and the legality check (``plan.plan.check_plan``, which
refuses a pair that would fuse a loop into recursion) is the interface's. Its plans keep
none of the app's annotations (``honours=frozenset()``): like NONE and FALL, it is
defined by its shape. ``register(PAIRS)`` makes it ``--fusion pairs`` everywhere; the
test registers it for itself only (tests/optimize/test_new_strategy.py)."""

from __future__ import annotations

from spadeopt.model.graph import AppGraph
from spadeopt.optimize.strategies import Strategy


def in_pairs(graph: AppGraph, nodes: int) -> tuple[list[list[str]], list[int]]:
    """Operators of the (physical) graph two by two in declaration order; pair i on node
    i mod ``nodes``."""
    names = [op.name for op in graph.operators]
    groups = [names[i:i + 2] for i in range(0, len(names), 2)]
    return groups, [i % nodes for i in range(len(groups))]


PAIRS = Strategy("pairs", "FPAIR", "consecutive operators two by two", partition=in_pairs,
                 honours=frozenset(), colour="#c9c")
