"""The physical plan IR: a partition of an app's operators into PEs and a placement.

``plan.json`` is this object as JSON (schema_version 1). Every fusion strategy
(NONE, FALL, FMAN, FATM) produces a ``Plan``; codegen and deployment only read it.

A plan may carry parallel regions (``spadeopt.plan.regions``): its PEs then partition
the *physical* graph (``spadeopt.plan.fission.physical_graph``: each region of width
k > 1 rewritten into a split, k channels and a merge), while its fingerprint stays the
logical graph's. ``plan.json`` records each region's operators, width, key and
ordering, and every channel copy's PE and node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.errors import PlanError, UsageError
from spadeopt.model.analysis import recursion_cycles_by_pe
from spadeopt.model.graph import AppGraph
from spadeopt.plan.artefacts import MAX_CORES, MAX_NODES, check_plan_json
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.regions import EXCHANGE, Region

SCHEMA_VERSION = 1
ANNOTATIONS = frozenset({"fuse", "colocate", "exlocate", "place"})
"""What an app can ask of its plans. Which of them a plan must keep is its strategy's
fact (``spadeopt.optimize.strategies.Strategy.honours``), passed here as data
(``honours``): NONE and FALL, defined by their shape, keep none; FMAN keeps all;
``check_plan`` checks ``fuse``, ``colocate`` and ``exlocate`` (``place`` pins are
the strategy's to follow; docs/decisions/064-one-strategy-interface.md)."""
KEPT_BY_DEFAULT = frozenset({"colocate", "exlocate"})
"""What a plan keeps when its caller does not say (FATM's plans; a hand-written
plan.json under a strategy name of its own): colocate() and exlocate() are constraints,
fuse() a suggestion only FMAN follows."""


@dataclass(frozen=True)
class PE:
    pe_id: str
    operators: tuple[str, ...]
    node: int


@dataclass(frozen=True)
class Plan:
    app: str
    fingerprint: str
    strategy: str
    nodes: int
    cores: int
    pes: tuple[PE, ...]
    instrumented: bool = False
    regions: tuple[Region, ...] = ()
    collapse: bool = True  # compile static-rate functor runs into one loop (codegen.collapse)
    checkpoints: bool = False  # generated code registers operator state (runtime.checkpoint_codec)
    batch: int | None = None  # tuples per source batch (optimize.batching, a profiled plan's); None: the default

    @property
    def pe_of(self) -> dict[str, str]:
        return {op: pe.pe_id for pe in self.pes for op in pe.operators}

    def pe(self, pe_id: str) -> PE:
        return next(p for p in self.pes if p.pe_id == pe_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "app": self.app,
            "fingerprint": self.fingerprint,
            "strategy": self.strategy,
            "nodes": self.nodes,
            "cores": self.cores,
            "instrumented": self.instrumented,
            "collapse": self.collapse,
            "pes": [{"pe": p.pe_id, "operators": list(p.operators), "node": p.node} for p in self.pes],
            "regions": [self._region_json(r) for r in self.regions],
            **({"checkpoints": True} if self.checkpoints else {}),
            **({"batch": self.batch} if self.batch is not None else {}),
        }

    def _region_json(self, r: Region) -> dict[str, Any]:
        doc = r.to_json()
        if r.width > 1:
            pe_of = self.pe_of
            node = {p.pe_id: p.node for p in self.pes}
            if r.has_split:
                doc["split"] = {"operator": r.split, "pe": pe_of.get(r.split), "node": node.get(pe_of.get(r.split))}
            if r.merge in pe_of:  # none when the region ends in counting sinks or sends by key exchange
                doc["merge"] = {"operator": r.merge, "pe": pe_of.get(r.merge), "node": node.get(pe_of.get(r.merge))}
            if r.fed == EXCHANGE:  # the senders at the end of region r.after's channels, the receivers at r's
                up = next((u.width for u in self.regions if u.name == r.after), 0)
                senders = [r.exchange_split(c) for c in range(up)]
                doc["exchange"] = {
                    "from": r.after,
                    "splits": [{"operator": o, "pe": pe_of.get(o), "node": node.get(pe_of.get(o))} for o in senders],
                    "merges": [{"operator": r.exchange_merge(c), "pe": pe_of.get(r.exchange_merge(c)),
                                "node": node.get(pe_of.get(r.exchange_merge(c)))} for c in range(r.width)]}
            doc["routing"] = r.routing
            doc["channels"] = [
                {f"{o}@{c}": {"operator": Region.channel_op(o, c), "pe": pe_of.get(Region.channel_op(o, c)),
                              "node": node.get(pe_of.get(Region.channel_op(o, c)))} for o in r.operators}
                for c in range(r.width)
            ]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any], source: str = "plan") -> Plan:
        """The plan ``doc`` read from ``source``, checked field by field first
        (``plan.artefacts.check_plan_json``: ``ArtefactError`` naming each bad field)."""
        check_plan_json(doc, source)
        pes = tuple(PE(p["pe"], tuple(p["operators"]), p["node"]) for p in doc["pes"])
        regions = tuple(Region.from_json(r) for r in doc.get("regions", []))
        return cls(doc["app"], doc["fingerprint"], doc["strategy"], doc["nodes"], doc["cores"], pes,
                   doc.get("instrumented", False), regions, doc.get("collapse", True),
                   doc.get("checkpoints", False), doc.get("batch"))

    @classmethod
    def load(cls, path: Path) -> Plan:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            msg = f"cannot read plan {path}: {exc}"
            raise PlanError(msg) from None
        return cls.from_json(doc, str(path))


def make_plan(graph: AppGraph, strategy: str, groups: list[list[str]], nodes: list[int],
              n_nodes: int, cores: int, instrumented: bool = False, regions: tuple[Region, ...] = (), *,
              honours: frozenset[str] = KEPT_BY_DEFAULT) -> Plan:
    """Name PEs deterministically (``pe0``, ``pe1``, ... in declaration order of their
    first operator) and keep operators inside a PE in declaration order. With
    ``regions``, ``groups`` partition the physical graph. The plan is checked
    (:func:`check_plan`), held to the annotations in ``honours``."""
    order = {op.name: i for i, op in enumerate(physical_graph(graph, regions).operators)}
    pairs = sorted(
        ((sorted(g, key=order.__getitem__), n) for g, n in zip(groups, nodes, strict=True)),
        key=lambda gn: order[gn[0][0]],
    )
    pes = tuple(PE(f"pe{i}", tuple(g), n) for i, (g, n) in enumerate(pairs))
    plan = Plan(graph.name, graph.fingerprint, strategy, n_nodes, cores, pes, instrumented, tuple(regions))
    check_plan(plan, graph, honours)
    return plan


def check_plan(plan: Plan, graph: AppGraph, honours: frozenset[str] = KEPT_BY_DEFAULT) -> None:
    """Raise ``PlanError`` listing everything that makes ``plan`` illegal for ``graph``,
    or breaks one of the annotations in ``honours`` (:data:`ANNOTATIONS`; the caller
    asks the plan's strategy, ``optimize.strategies.honours_of``)."""
    problems = []
    if plan.app != graph.name or plan.fingerprint != graph.fingerprint:
        problems.append(f"plan is for app '{plan.app}' graph {plan.fingerprint}, but the app is "
                        f"'{graph.name}' graph {graph.fingerprint}; rebuild the plan")
    try:
        graph = physical_graph(graph, plan.regions)
    except UsageError as exc:
        raise PlanError(f"plan '{plan.strategy}' for app '{graph.name}' is invalid: {exc}") from None
    if not (1 <= plan.nodes <= MAX_NODES and 1 <= plan.cores <= MAX_CORES):
        problems.append(f"plan has {plan.nodes} node(s) x {plan.cores} core(s); at most {MAX_NODES} nodes "
                        f"x {MAX_CORES} cores")
    ids = [pe.pe_id for pe in plan.pes]
    if len(set(ids)) < len(ids):
        problems.append(f"PE ids are not unique: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
    seen: dict[str, str] = {}
    for pe in plan.pes:
        if not pe.operators:
            problems.append(f"PE {pe.pe_id} holds no operators")
        if not 0 <= pe.node < plan.nodes:
            problems.append(f"PE {pe.pe_id} is placed on node {pe.node}, but the plan has {plan.nodes} node(s)")
        for op in pe.operators:
            if op not in graph.by_name:
                problems.append(f"PE {pe.pe_id} names unknown operator '{op}'")
            elif op in seen:
                problems.append(f"operator '{op}' is in both {seen[op]} and {pe.pe_id}")
            seen[op] = pe.pe_id
    for op in graph.by_name:
        if op not in seen:
            problems.append(f"operator '{op}' is in no PE")
    if not problems:
        pe_of = plan.pe_of
        colocated = graph.annotations.colocate if "colocate" in honours else ()
        fused = graph.annotations.fuse if "fuse" in honours else ()
        for group in (*colocated, *fused):
            if len({pe_of[o] for o in group}) > 1:
                problems.append(f"colocate({', '.join(group)}) is split across PEs "
                                f"{sorted({pe_of[o] for o in group})}")
        for group in graph.annotations.exlocate if "exlocate" in honours else ():
            pes = [pe_of[o] for o in group]
            if len(set(pes)) < len(pes):
                problems.append(f"exlocate({', '.join(group)}) has operators sharing a PE")
        for before, after in graph.annotations.apart:  # a key exchange's two sides (plan.fission)
            both = {pe_of[o] for o in before} & {pe_of[o] for o in after}
            if both and len({pe_of[o] for o in (*before, *after)}) > 1:  # all in one PE (FALL) sends to no PE
                pe = min(both)
                a = next(o for o in before if pe_of[o] == pe)
                b = next(o for o in after if pe_of[o] == pe)
                problems.append(f"PE {pe} holds both sides of a key exchange ({a} and {b}): PEs holding both "
                                f"send to each other, and such a cycle of PEs can deadlock; keep what is before "
                                f"the exchange and what is after it in different PEs")
    if not problems:
        cycles = recursion_cycles_by_pe(graph, plan.pe_of)
        for pe in plan.pes:
            for cyc in cycles.get(pe.pe_id, ()):
                problems.append(f"PE {pe.pe_id} fuses a loop through tuple-generating port(s) "
                                f"{', '.join(cyc)}: direct calls would recurse forever")
    if problems:
        raise PlanError(f"plan '{plan.strategy}' for app '{graph.name}' is invalid:\n"
                        + "\n".join(f"  - {p}" for p in problems))
