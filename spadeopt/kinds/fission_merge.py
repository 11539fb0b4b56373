"""``fission_merge``: a parallel region's merge, made by ``plan.fission`` (never by apps):
``runtime.merges.BlockMerge`` (static regions: restores the width-1 order), ``SeqMerge``
(dynamic: it consumes the sequence numbers and pulses, so it passes no pulse on), or, in
a region led by a partitioned source (``arrival``), each channel's batches passed on as
they come (the guarantee is each partition key's order, which a channel keeps).

Checkpoints: the static and dynamic merges register their state (queues, heads,
floors); the arrival merge holds none (it forwards each batch in the call that brings
it). Its channels' source copies store their own stream keys' entry IDs, and the PE
holding the merge aligns barrier ``n`` on all its channel inputs before it snapshots
and passes it on, as for any PE with several inputs (``runtime.barrier_alignment``). A restart
replays each channel from its own position, so the interleaving across partition keys
may differ from the failed run's: the guarantee after the merge is per partition key
(``checkpoint_note``;
docs/decisions/040-checkpoints-of-arrival-regions-are-exactly-once-per-key.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.exchange_merge import ExchangeMergeParams
from spadeopt.kinds.exchange_split import ExchangeSplitParams
from spadeopt.kinds.fission_split import FissionSplitParams
from spadeopt.kinds.kind import Imports, Kind
from spadeopt.kinds.source import SourceParams, partitioning
from spadeopt.model.graph import ARRIVAL, STATELESS, AppGraph, Operator, PortRef


@dataclass(frozen=True)
class FissionMergeParams:
    width: int
    ordering: str  # "static": the split's blocks back in turn; "dynamic": by sequence number; "arrival": as they come
    block: int


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"mode": p.ordering, "width": p.width, "block": p.block}


def _partitioned_by(graph: AppGraph, op: Operator) -> tuple[str, ...]:
    """The ``partitioned_by`` of the source leading the arrival region ``op`` merges (its
    channel 0 upstream of ``in0``: a chain of copies back to the source's copy)."""
    at = op
    while at.inputs:
        pubs = graph.publishers(PortRef(at.name, at.inputs[0].name))
        if not pubs:
            return ()
        at = graph.op(pubs[0].op)
    found = partitioning(at) if isinstance(at.params, SourceParams) else None
    return found[1] if found else ()


_REGION_PARTS = (FissionSplitParams, FissionMergeParams, ExchangeSplitParams, ExchangeMergeParams)


def _mixing_after(graph: AppGraph, op: Operator, by: tuple[str, ...]) -> list[str]:
    """Operators after the merge ``op`` (not sinks) whose state is not kept per value of
    ``by``: stateful, or partitioned on a key without every attribute of ``by``. Their
    rows depend on how the channels interleave. The splits, merges and exchanges of
    regions further on are not counted: a region gives its operators' width-1 rows in
    its input's order, so only its operators' own state matters."""
    seen: set[str] = set()
    todo = [op]
    mixing = []
    while todo:
        at = todo.pop()
        for out in at.outputs:
            for sub in graph.subscribers(PortRef(at.name, out.name)):
                nxt = graph.op(sub.op)
                if nxt.name in seen:
                    continue
                seen.add(nxt.name)
                todo.append(nxt)
                if nxt.outputs and nxt.state != STATELESS and not (by and set(by) <= set(nxt.key)) \
                        and not isinstance(nxt.params, _REGION_PARTS):
                    mixing.append(nxt.name)
    return sorted(mixing)


def checkpoint_note(graph: AppGraph, op: Operator) -> str | None:
    """An arrival merge in a checkpointing build: exactly once per partition key, not in one
    order across keys (a restart replays each channel from its own position, so the
    channels interleave differently from the failed run); operators after the merge that
    keep state across keys are named (their rows depend on that interleaving)."""
    if op.params.ordering != ARRIVAL:
        return None
    attrs = _partitioned_by(graph, op)
    by = ", ".join(attrs) or "partition key"
    note = (f"{op.line or f'merge {op.name!r}'} merges its channels by arrival: after a restart from a checkpoint "
            f"the interleaving across {by} values may differ from the failed run's, so the sinks after it that are "
            f"exactly once (files, counts, Redis streams) are exactly once per {by}: each {by} value gets exactly "
            f"the rows a failure-free run gives it, in the same order, none lost or doubled; the order across "
            f"values is not kept")
    mixing = _mixing_after(graph, op, attrs)
    if mixing:
        note += (f"; {', '.join(repr(m) for m in mixing)} after the merge keep{'s' if len(mixing) == 1 else ''} "
                 f"state across {by} values, so {'its' if len(mixing) == 1 else 'their'} rows depend on the "
                 f"interleaving and may differ from a failure-free run's after a restart (as between two runs)")
    return note


def rescale(op: Operator) -> dict[str, Any] | str:
    """A dynamic merge's queues and floors are per channel: resized when the region is
    rescaled, the rows it held kept (``runtime.merges.SeqMerge.resized``). A static
    merge's place in its round of blocks is made only where a region led by a splittable
    source widens from 1 (its blocks are the source's splits: the round starts at the
    split the width-1 run stopped in, ``deploy.checkpoint_rescale``). An arrival merge
    holds nothing."""
    if op.params.ordering == "dynamic":
        return {"slots": ["seq_merge"]}
    if op.params.ordering == "static":
        return {"slots": ["block_merge"], "block": op.params.block}
    if op.params.ordering == ARRIVAL:
        return {"slots": []}  # it holds nothing: each batch leaves in the call that brings it
    return f"a {op.params.ordering} merge's place in its channels' order is not moved to another width yet"


KIND = Kind("fission_merge", None, None, lower, "ops/fission_merge.py.j2", never_blocks=False,
            fission_made=True, rescale=rescale,
            passes_pulses=False, checkpoint_note=checkpoint_note)
