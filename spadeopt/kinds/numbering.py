"""How large the sequence numbers in a parallel region's channel can grow, operator by
operator (``protocol.SEQ``), so that every number an operator makes sorts where width 1
puts its row.

The split numbers tuples below ``2**SPLIT_BITS`` (``protocol.FINAL_BASE``). An operator
that emits at end of stream (``Kind.final_rows``) numbers those rows ``2**b + n``, ``b``
the bits of its inputs' numbers and ``n`` one of them: after everything its upstream can
send, and below ``2**(b + 1)``. A join in a region (``Kind.number_bits``) numbers a
match by its processing position at width 1: ``(order value, side, number of the tuple
that triggered it)`` packed into one int, ``((key << 1 | side) << b) | n`` with ``key``
the order value (its side's high-water mark: ``kinds.join``) mapped monotonically into
``[0, 2**64)``, so below ``2**(65 + b)``.
A key exchange between two regions (``kinds.exchange_split``) renumbers each tuple leaving
the upstream region ``(n << EXCHANGE_BITS) | i``, ``i`` its index among the tuples of
that channel numbered ``n`` (one trigger's several rows), so every number entering the
downstream region is distinct and ordered as width 1: ``EXCHANGE_BITS`` more bits.
Numbers from ``2**64`` up cross PEs as big ints (``wire``). ``plan.fission.final_base``
is ``2**b`` for an operator; codegen gives it to every operator that flushes or
renumbers (``ctx["final_base"]``).
"""

from __future__ import annotations

from collections.abc import Callable

from spadeopt.kinds.kind import Kind
from spadeopt.model.graph import AppGraph, Operator, PortRef
from spadeopt.protocol import FINAL_BASE, SEQ

SPLIT_BITS = FINAL_BASE.bit_length() - 1  # the split numbers tuples below 2**62
EXCHANGE_BITS = 24  # rows one upstream number may carry through a key exchange: below 2**24


def input_bits(graph: AppGraph, op: Operator, kind_of: Callable[[Operator], Kind]) -> int:
    """Bits of every number that can reach ``op``'s inputs in its channel (``SPLIT_BITS``
    when only the split's do); ``kind_of`` is the registry's (``spadeopt.kinds``, which
    imports this package's modules, so it is passed in)."""
    memo: dict[str, int] = {}

    def bits_in(name: str) -> int:
        if name not in memo:
            memo[name] = SPLIT_BITS  # no loops inside a region; guards a malformed graph
            here = graph.op(name)
            b = SPLIT_BITS
            for p in here.inputs:
                for src in graph.publishers(PortRef(name, p.name)):
                    pub = graph.op(src.op)
                    schema = pub.out_port(src.port).schema
                    if schema is None or SEQ not in schema:
                        continue  # outside the channel
                    kind = kind_of(pub)
                    b = max(b, bits_in(src.op) + (1 if kind.final_rows(pub) else 0) + kind.number_bits(pub))
            memo[name] = b
        return memo[name]

    return bits_in(op.name)
