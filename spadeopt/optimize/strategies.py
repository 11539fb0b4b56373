"""The fusion strategies: one :class:`Strategy` interface, and the registry of them.

A strategy is everything the rest of spadeopt asks about one way of fusing an app: its
``name`` (``--fusion NAME``, plan.json's ``"strategy"``), its ``label`` in reports
(NONE, FALL, FMAN, FATM), which of the app's annotations its plans honour, the width a
declared parallel region runs at by default, whether it plans from a profile, its colour
in plots, and :meth:`Strategy.plan`, which returns the ``Plan``. Nothing outside this
module compares a strategy's name with a literal (``tests/test_layering.py`` checks);
it asks :data:`STRATEGY_BY_NAME` instead, so a new strategy is one :class:`Strategy`
registered here (``tests/toolkit/sample_strategy.py`` is a worked example;
docs/decisions/064-one-strategy-interface.md).

The registered strategies:

NONE (``none``): one PE per operator, spread round-robin over the nodes.
FALL (``all``): one PE holding everything, on node 0.
FMAN (``manual``): the developer's manual fusion: each group joined by ``fuse()`` or
``colocate()`` is one PE, every other operator its own PE; ``place()`` pins PEs, the
rest go round-robin.
FATM (``auto``): the optimizer (:func:`spadeopt.optimize.fatm.fuse_auto`), from a
refined profile and a communication model; it chooses region widths itself.
FIXED (``fixed``): a partition a benchmark gives (``bench.tradeoff``); never made here.

Legality is not a strategy's business: every plan is checked by
``spadeopt.plan.plan.check_plan`` (a partition, nodes in range, no recursion through a
fused loop), which the strategy's facts only tell which annotations to hold it to.

Parallel regions (``spadeopt.plan.regions``) are resolved first: each declared region
at its width (``widths`` from ``--width``; the developer's declared width under a
strategy with ``declared_widths``, FMAN; else 1), then a strategy with a ``partition``
partitions the *physical* graph (``fission``), in which split, channels and merge are
ordinary operators: NONE gives each its own PE, FALL fuses them all, FMAN makes each
channel one PE, fuses the split with its producer and the merge with its consumer (fuse
groups added by the rewrite).

>>> [s.label for s in STRATEGY_BY_NAME.values()]
['NONE', 'FALL', 'FMAN', 'FATM', 'FIXED']
>>> selectable()
('none', 'all', 'manual')
>>> sorted(strategy_named("manual").honours), strategy_named("all").honours
(['colocate', 'exlocate', 'fuse', 'place'], frozenset())
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.model.analysis import colocation_groups
from spadeopt.model.graph import AppGraph
from spadeopt.model.schema import FILE_NAME_RULE, is_file_name
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import ANNOTATIONS, KEPT_BY_DEFAULT, Plan, make_plan
from spadeopt.plan.regions import Region, resolve_regions

Partition = Callable[[AppGraph, int], tuple[list[list[str]], list[int]]]
"""``(physical graph, nodes) -> (groups of operator names, the node of each group)``."""

Planner = Callable[..., Plan]
"""``(graph, nodes, cores, widths, instrumented=..., **inputs) -> Plan``: a strategy
that resolves its own regions (FATM chooses their widths)."""


@dataclass(frozen=True)
class Strategy:
    """One fusion strategy. It makes plans through ``partition`` (the common path:
    regions resolved, then the physical graph partitioned and placed) or ``planner``
    (everything its own); with neither, its plans are given, never made (FIXED)."""

    name: str  # --fusion NAME, plan.json's "strategy", build/<app>/<name>
    label: str  # in reports and plots
    summary: str  # what its plans look like, for --fusion's help
    partition: Partition | None = None
    planner: Planner | None = None
    honours: frozenset[str] = KEPT_BY_DEFAULT  # which annotations its plans keep (plan.ANNOTATIONS)
    declared_widths: bool = False  # a declared region runs at the app's width unless --width (else 1)
    needs_profile: bool = False  # plans from a refined profile (spadeopt optimize), not from --fusion
    colour: str = "#888"  # in plots

    @property
    def makes_plans(self) -> bool:
        return self.partition is not None or self.planner is not None

    def plan(self, graph: AppGraph, nodes: int = 1, cores: int = 2, widths: Mapping[str, int] | None = None, *,
             instrumented: bool = False, **inputs: Any) -> Plan:
        """This strategy's plan of ``graph`` on ``nodes`` x ``cores``; ``widths`` pins
        regions' widths (``--width``); ``inputs`` are what a ``planner`` needs besides
        (FATM: ``profile``, ``comm``, options of ``fuse_auto``)."""
        _check(nodes, cores)
        check_hosts(graph, nodes)
        if self.planner is not None:
            return self.planner(graph, nodes, cores, dict(widths or {}), instrumented=instrumented, **inputs)
        if inputs:
            raise UsageError(f"strategy '{self.name}' takes no {', '.join(sorted(inputs))}")
        regions = resolve_regions(graph, widths, declared_widths=self.declared_widths)
        return self.partitioned(graph, regions, nodes, cores, instrumented)

    def partitioned(self, graph: AppGraph, regions: tuple[Region, ...], nodes: int = 1, cores: int = 2,
                    instrumented: bool = False) -> Plan:
        """The plan of a ``partition`` strategy with ``regions`` already resolved (a
        script or test that changes them first)."""
        if self.partition is None:
            raise UsageError(f"'{self.name}' plans are given as a plan.json, not made; use one of "
                             f"{', '.join(selectable())}")
        groups, placed = self.partition(physical_graph(graph, regions), nodes)
        return make_plan(graph, self.name, groups, placed, nodes, cores, instrumented, regions,
                         honours=self.honours)


def _check(nodes: int, cores: int) -> None:
    if nodes < 1 or cores < 1:
        msg = f"--nodes and --cores must be >= 1 (got nodes={nodes}, cores={cores})"
        raise UsageError(msg)


def one_per_operator(graph: AppGraph, nodes: int) -> tuple[list[list[str]], list[int]]:
    """NONE's partition: each operator its own PE, round-robin over the nodes."""
    groups = [[op.name] for op in graph.operators]
    return groups, [i % nodes for i in range(len(groups))]


def one_pe(graph: AppGraph, nodes: int) -> tuple[list[list[str]], list[int]]:
    """FALL's partition: every operator in one PE, on node 0."""
    return [[op.name for op in graph.operators]], [0]


def as_annotated(graph: AppGraph, nodes: int) -> tuple[list[list[str]], list[int]]:
    """FMAN's partition: the app's fuse()/colocate() groups, place() pins, round-robin."""
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
    return groups, placed


def optimized(graph: AppGraph, nodes: int, cores: int, widths: dict[str, int], *, instrumented: bool = False,
              profile: Any = None, comm: Any = None, **options: Any) -> Plan:
    """FATM's planner: :func:`spadeopt.optimize.fatm.fuse_auto`'s plan from ``profile``
    (an ``OperatorProfile``) and ``comm`` (a ``CommModel``); ``options`` are its other
    arguments. ``spadeopt optimize`` (``api.optimize``) calls ``fuse_auto`` itself, for
    the explanation it writes beside the build."""
    if profile is None or comm is None:
        raise UsageError("FATM plans from a refined profile: run `spadeopt profile`, `spadeopt refine`, then "
                         f"`spadeopt optimize` (--fusion takes {', '.join(selectable())} or a plan.json)")
    from spadeopt.optimize.fatm import fuse_auto

    plan = fuse_auto(graph, profile, comm, nodes, cores, widths=widths, **options).plan
    return replace(plan, instrumented=True) if instrumented else plan


NONE = Strategy("none", "NONE", "one PE per operator", partition=one_per_operator, honours=frozenset(),
                colour="#999")
FALL = Strategy("all", "FALL", "one PE", partition=one_pe, honours=frozenset(), colour="#c66")
FMAN = Strategy("manual", "FMAN", "the app's annotations", partition=as_annotated, honours=ANNOTATIONS,
                declared_widths=True, colour="#69c")
FATM = Strategy("auto", "FATM", "the optimizer, from a profile", planner=optimized, needs_profile=True,
                colour="#4a4")
FIXED = Strategy("fixed", "FIXED", "a partition given by a benchmark", honours=frozenset())

STRATEGY_BY_NAME: dict[str, Strategy] = {s.name: s for s in (NONE, FALL, FMAN, FATM, FIXED)}
"""Every strategy by name, in the order reports list them."""


def register(strategy: Strategy) -> Strategy:
    """Add ``strategy`` to :data:`STRATEGY_BY_NAME` (a name already taken, or one that
    cannot name a build directory, is refused) and return it."""
    if not is_file_name(strategy.name):
        raise UsageError(f"strategy name {strategy.name!r} must be a file name ({FILE_NAME_RULE})")
    if strategy.name in STRATEGY_BY_NAME:
        raise UsageError(f"a strategy named '{strategy.name}' is registered already")
    STRATEGY_BY_NAME[strategy.name] = strategy
    return strategy


def selectable() -> tuple[str, ...]:
    """The names ``--fusion`` takes: strategies that make plans without a profile."""
    return tuple(n for n, s in STRATEGY_BY_NAME.items() if s.makes_plans and not s.needs_profile)


def strategy_named(name: str) -> Strategy:
    """The registered strategy ``name``, or ``UsageError`` listing the ``--fusion`` choices."""
    if name not in STRATEGY_BY_NAME:
        raise UsageError(f"unknown fusion strategy '{name}'; use one of {', '.join(selectable())}")
    return STRATEGY_BY_NAME[name]


def honours_of(name: str) -> frozenset[str]:
    """The annotations a plan of strategy ``name`` must keep (``check_plan``'s
    ``honours``): the registered strategy's, else ``plan.KEPT_BY_DEFAULT`` (a hand-written
    plan.json under a name of its own)."""
    found = STRATEGY_BY_NAME.get(name)
    return found.honours if found is not None else KEPT_BY_DEFAULT


def label_of(name: str) -> str:
    """The report label of strategy ``name`` (the name itself when not registered)."""
    found = STRATEGY_BY_NAME.get(name)
    return found.label if found is not None else name


def fusion_help() -> str:
    """``--fusion``'s choices for help texts: ``none (one PE per operator), all (...)``."""
    return ", ".join(f"{n} ({STRATEGY_BY_NAME[n].summary})" for n in selectable())


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
             widths: Mapping[str, int] | None = None, **inputs: Any) -> Plan:
    """The plan of the registered strategy named ``strategy`` (:meth:`Strategy.plan`)."""
    return strategy_named(strategy).plan(graph, nodes, cores, widths, instrumented=instrumented, **inputs)
