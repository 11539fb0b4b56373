"""``exchange_split``: the sending end of a key exchange between two parallel regions,
made by ``plan.fission`` (never by apps). One sits at the end of every channel of the
upstream region and deals that channel's tuples to the downstream region's channels by
a stable hash of the downstream key (the same hash as ``fission_split``'s), or in
blocks round robin when the downstream region has no key.

It renumbers each tuple ``(n << EXCHANGE_BITS) | i`` (``kinds.numbering``): ``n`` the
upstream number (comparable across the upstream channels), ``i`` its index among this
channel's tuples numbered ``n``, so the numbers entering the downstream region are
distinct and in the width-1 order. Every output batch ends with a pulse, the smallest
number the channel may still send (``protocol``'s pulse: a 1-tuple); the receiving
``exchange_merge`` merges by number.

With a clock (an event-time window behind it, ``plan.eventtime``), whenever a tuple moves
this channel's stream into a later window, every other downstream channel gets a
watermark frame: a copy of the tuple numbered ``-1 - m`` (``m`` its new number), which the
clocked ``exchange_merge`` orders at ``m``. The same split sits in front of a window with
a window exchange; there the key is the region's, so every tuple stays in its channel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadeopt.kinds.fission_split import clock_context
from spadeopt.kinds.kind import Imports, Kind
from spadeopt.kinds.lowering import key_hash
from spadeopt.kinds.numbering import EXCHANGE_BITS
from spadeopt.kinds.windows import Window
from spadeopt.model.graph import AppGraph, Operator


@dataclass(frozen=True)
class ExchangeSplitParams:
    width: int  # the downstream region's channels
    key: tuple[str, ...]  # hash these attributes; empty: deal blocks round robin
    block: int  # tuples per round-robin block
    clock: tuple[str, Window | None, bool] | None = None  # an event-time window's clock: send watermark
    #   frames; with no window, a join side's: a frame whenever the order value passes the channel's maximum


def lower(graph: AppGraph, op: Operator, imports: Imports) -> dict[str, Any]:
    p, schema = op.params, op.in_port("in").schema  # the number is last: key positions as without it
    h = key_hash(p.key, schema) if p.key else None
    return {"hash": h, "width": p.width, "block": p.block, "bits": EXCHANGE_BITS,
            "clock": clock_context(p.clock, schema)}


def number_bits(op: Operator) -> int:
    """A tuple's number becomes ``(n << EXCHANGE_BITS) | i``."""
    return EXCHANGE_BITS


def rescale(op: Operator) -> dict[str, Any] | str:
    """Its state (the last upstream number, the tuples sent with it, the tuples dealt, and
    with a clock the latest event-time window) starts afresh when both regions widen from
    width 1 at a checkpoint (``deploy.checkpoint_rescale``): the upstream numbers after it
    are larger than any it could have seen, the window the downstream window's own."""
    return {"slots": ["exchange_split"], "clock": op.params.clock is not None}


KIND = Kind("exchange_split", None, None, lower, "ops/exchange_split.py.j2", never_blocks=False,
            fission_made=True,
            passes_pulses=False, number_bits=number_bits, rescale=rescale)
