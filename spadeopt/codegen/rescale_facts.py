"""What a checkpointing build tells a resume about moving its regions' state to other widths.

``rescale.json`` (written next to ``deploy.json`` by a checkpointing build of a plan with
parallel regions) holds, per region: its width and logical operators and, when wider
than 1, its key's attributes and types (what the split hashes, ``protocol.key_channel``)
and, for each operator, how its channel copies' state moves to another width (its kind's ``rescale``
fact: a spec, or why it cannot), and the same for the split and merge fission made.
A resume from a checkpoint taken under other widths (``deploy.checkpoint_rescale``)
reads it instead of the compiler: the runner never builds a graph (record 065).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from spadeopt.kinds import kind_of
from spadeopt.model.graph import AppGraph
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import Region

VERSION = 1


def _region_facts(physical: AppGraph, r: Region) -> dict[str, Any]:
    """One region's facts; ``physical`` has it wider than 1 (a region of width 1 is told
    from its rewrite at width 2: what its copies, split and merge would hold)."""
    doc: dict[str, Any] = {"width": r.width, "operators": list(r.operators), "fed": r.fed,
                           "ordering": r.ordering, "key": [], "copies": {}, "fission": {}}
    if r.key:  # the key's types: from what the split takes, or (fed by an exchange) the first copy's input
        head = physical.op(r.split) if r.has_split else physical.op(r.channel_op(r.operators[0], 0))
        schema = next((p.schema for p in head.inputs if p.schema is not None and all(a in p.schema for a in r.key)),
                      None)
        doc["key"] = [[a, schema.type_of(a)] for a in r.key] if schema is not None else []
    for op in r.operators:
        copy = physical.op(r.channel_op(op, 0))
        doc["copies"][op] = kind_of(copy).rescale(copy)
    ops = physical.by_name
    entries = [r.split_of(i) for i in range(len(ops)) if r.split_of(i) in ops]
    exchange = [x for c in range(len(ops)) for x in (r.exchange_split(c), r.exchange_merge(c)) if x in ops]
    for name in [*entries, *exchange, r.merge]:  # the exchange's parts first: a merge's state comes last
        if name in ops:
            doc["fission"][name] = kind_of(ops[name]).rescale(ops[name])
    if r.after:
        doc["after"] = r.after
    return doc


def rescale_facts(graph: AppGraph, plan: Plan) -> dict[str, Any] | None:
    """The ``rescale.json`` document of a checkpointing plan with regions (any width), else None."""
    if not plan.checkpoints or not plan.regions:
        return None
    physical = physical_graph(graph, plan.regions)
    regions = {}
    for r in plan.regions:
        if r.width > 1:
            regions[r.name] = _region_facts(physical, r)
            continue
        try:  # the region as it would be at width 2
            wider = tuple(replace(x, width=2) if x.name == r.name else x for x in plan.regions)
            regions[r.name] = {**_region_facts(physical_graph(graph, wider), r), "width": 1}
        except Exception:  # noqa: BLE001 - not legal at width 2 (a partitioned source's key count...): no facts
            # to move by; a resume widening it is refused as another set of operators
            regions[r.name] = {"width": 1, "operators": list(r.operators), "fed": r.fed, "ordering": r.ordering,
                               "key": [], "copies": {}, "fission": {}}
    return {"version": VERSION, "regions": regions}
