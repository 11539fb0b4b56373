"""The fusion strategies, all producing a ``Plan`` through ``make_plan``.

NONE: one PE per operator, spread round-robin over the nodes.
FALL: one PE holding everything, on node 0.
FMAN: the developer's manual fusion: each group joined by ``fuse()`` or ``colocate()``
is one PE, every other operator its own PE; ``place()`` pins PEs, the rest go round-robin.
FATM (the optimizer) lives in its own module and uses the same ``make_plan``.

Parallel regions (``spadeopt.plan.regions``) are resolved first: each declared region
at its width (``widths`` from ``--width``; the developer's declared width under FMAN;
else 1), then every strategy partitions the *physical* graph (``fission``), in which
split, channels and merge are ordinary operators: NONE gives each its own PE, FALL
fuses them all, FMAN makes each channel one PE, fuses the split with its producer and
the merge with its consumer (fuse groups added by the rewrite).
"""

from __future__ import annotations

from spadeopt.errors import UsageError
from spadeopt.model.analysis import colocation_groups
from spadeopt.model.graph import AppGraph
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan, make_plan
from spadeopt.plan.regions import Region, resolve_regions

STRATEGIES = ("none", "all", "manual")


def _check(nodes: int, cores: int) -> None:
    if nodes < 1 or cores < 1:
        msg = f"--nodes and --cores must be >= 1 (got nodes={nodes}, cores={cores})"
        raise UsageError(msg)


def fuse_none(graph: AppGraph, nodes: int = 1, cores: int = 2, instrumented: bool = False,
              regions: tuple[Region, ...] = ()) -> Plan:
    _check(nodes, cores)
    logical, graph = graph, physical_graph(graph, regions)
    groups = [[op.name] for op in graph.operators]
    return make_plan(logical, "none", groups, [i % nodes for i in range(len(groups))], nodes, cores,
                     instrumented, regions)


def fuse_all(graph: AppGraph, nodes: int = 1, cores: int = 2, instrumented: bool = False,
             regions: tuple[Region, ...] = ()) -> Plan:
    _check(nodes, cores)
    logical, graph = graph, physical_graph(graph, regions)
    return make_plan(logical, "all", [[op.name for op in graph.operators]], [0], nodes, cores, instrumented,
                     regions)


def fuse_manual(graph: AppGraph, nodes: int = 1, cores: int = 2, instrumented: bool = False,
                regions: tuple[Region, ...] = ()) -> Plan:
    _check(nodes, cores)
    logical, graph = graph, physical_graph(graph, regions)
    grouped = colocation_groups(graph, manual=True)
    in_group = {op for g in grouped for op in g}
    order = {op.name: i for i, op in enumerate(graph.operators)}
    groups = [sorted(g, key=order.__getitem__) for g in grouped]
    groups += [[op.name] for op in graph.operators if op.name not in in_group]
    groups.sort(key=lambda g: order[g[0]])
    host = dict(graph.annotations.host)
    placed, rr = [], 0
    for g in groups:
        pinned = [host[o] for o in g if o in host]
        if pinned:
            if pinned[0] >= nodes:
                msg = (f"app '{graph.name}' places '{g[0]}' on node {pinned[0]}, but only {nodes} "
                       f"node(s) were given; pass --nodes {pinned[0] + 1} or more")
                raise UsageError(msg)
            placed.append(pinned[0])
        else:
            placed.append(rr % nodes)
            rr += 1
    return make_plan(logical, "manual", groups, placed, nodes, cores, instrumented, regions)


def check_hosts(graph: AppGraph, nodes: int) -> None:
    """Every ``place()`` names a node of the cluster. NONE and FALL do not follow the
    annotations, but an app placed for a larger cluster than the one given is a mistake
    under any strategy, so it is refused rather than silently ignored."""
    outside = sorted((node, op) for op, node in graph.annotations.host if node >= nodes)
    if outside:
        where = ", ".join(f"'{op}' on node {node}" for node, op in outside[:5])
        msg = (f"app '{graph.name}' places {where}, but only {nodes} node(s) were given (nodes are "
               f"numbered from 0); pass --nodes {outside[-1][0] + 1} or more, or change its place() calls")
        raise UsageError(msg)


def plan_for(graph: AppGraph, strategy: str, nodes: int = 1, cores: int = 2, instrumented: bool = False,
             widths: dict[str, int] | None = None) -> Plan:
    table = {"none": fuse_none, "all": fuse_all, "manual": fuse_manual}
    if strategy not in table:
        msg = f"unknown fusion strategy '{strategy}'; use one of {', '.join(table)}"
        raise UsageError(msg)
    _check(nodes, cores)
    check_hosts(graph, nodes)
    regions = resolve_regions(graph, strategy, widths)
    return table[strategy](graph, nodes, cores, instrumented, regions)
