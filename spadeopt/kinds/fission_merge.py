"""``fission_merge``: a parallel region's merge, made by ``plan.fission`` (never by apps):
``runtime.fission.BlockMerge`` (static regions: restores the width-1 order), ``SeqMerge``
(dynamic: it consumes the sequence numbers and pulses, so it passes no pulse on), or, in
a region led by a partitioned source (``arrival``), each channel's batches passed on as
they come (the guarantee is each partition key's order, which a channel keeps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.base import Imports, Kind
from spadeopt.model.graph import ARRIVAL, AppGraph, Operator


@dataclass(frozen=True)
class FissionMergeParams:
    width: int
    ordering: str  # "static": the split's blocks back in turn; "dynamic": by sequence number; "arrival": as they come
    block: int


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"mode": p.ordering, "width": p.width, "block": p.block}


def checkpoint_problem(op: Operator) -> str | None:
    if op.params.ordering == ARRIVAL:
        return (f"parallel region merge '{op.name}' interleaves channels led by a partitioned source by "
                f"arrival, and checkpoints of such a region are not supported yet; run without "
                f"--checkpoint-interval, or at width 1 (--width REGION=1)")
    return None


KIND = Kind("fission_merge", None, None, lower, "ops/fission_merge.py.j2", never_blocks=False,
            passes_pulses=False, checkpoint_problem=checkpoint_problem)
