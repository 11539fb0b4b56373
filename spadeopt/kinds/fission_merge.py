"""``fission_merge``: a parallel region's order-restoring merge, made by ``plan.fission``
(never by apps): ``runtime.fission.BlockMerge`` (static regions) or ``SeqMerge``
(dynamic: it consumes the sequence numbers and pulses, so it passes no pulse on)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.base import Imports, Kind
from spadeopt.model.graph import AppGraph, Operator


@dataclass(frozen=True)
class FissionMergeParams:
    width: int
    ordering: str  # "static": take the split's blocks back in turn; "dynamic": by sequence number
    block: int


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p = op.params
    return {"mode": p.ordering, "width": p.width, "block": p.block}


KIND = Kind("fission_merge", None, None, lower, "ops/fission_merge.py.j2", never_blocks=False,
            passes_pulses=False)
