"""``exchange_merge``: the receiving end of a key exchange between two parallel regions,
made by ``plan.fission`` (never by apps). One sits at the head of every channel of the
downstream region and merges what the upstream channels' ``exchange_split`` copies send
it by number (``runtime.merges.ExchangeMerge``: 002's shuffle merger, one pulse per
upstream channel kept as its floor): the channel sees exactly its keys' subsequence of
the width-1 stream, in the width-1 order, numbers kept, and a pulse ends every batch it
sends, so the channel runs as if a split had dealt it. A clocked one
(``runtime.merges.ClockedExchangeMerge``) also orders watermark frames, numbered
``-1 - m``, at ``m`` (``plan.eventtime``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.kind import Imports, Kind
from spadeopt.model.graph import AppGraph, Operator


@dataclass(frozen=True)
class ExchangeMergeParams:
    width: int  # the upstream region's channels (inputs in0 .. in<width-1>)
    clocked: bool = False  # its senders send watermark frames (numbered below zero), ordered by their number


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    return {"width": op.params.width, "clocked": op.params.clocked}


def rescale(op: Operator) -> dict[str, Any] | str:
    """Its queues and floors are per upstream channel: made empty when both regions widen
    from width 1 at a checkpoint (``deploy.checkpoint_rescale``)."""
    return {"slots": ["exchange_merge"], "senders": op.params.width}


KIND = Kind("exchange_merge", None, None, lower, "ops/exchange_merge.py.j2", never_blocks=False,
            fission_made=True,
            passes_pulses=False, rescale=rescale)
