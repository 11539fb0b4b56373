"""Constants of the parallel-region (fission) protocol that generated code and the runtime share.

This module is below both compile-time code (``plan.fission``, ``kinds``, ``codegen``)
and the runtime (``runtime.merges``, ``runtime.pe``): both import the protocol from
here, so compiling an app never imports the runtime. It imports nothing of spadeopt.

In a dynamic region every tuple in a channel carries the split's sequence number as a
hidden last attribute named ``SEQ``; a 1-tuple ``(n,)`` is a *pulse* (nothing numbered
below ``n`` follows on that channel). Rows an operator flushes at end of stream are
numbered from ``FINAL_BASE`` up, so they sort after every tuple. A tuple numbered below
zero is a *watermark frame* (``WATERMARK``): a copy of tuple ``n``, numbered ``-1 - n``,
sent by a split or an exchange split to a channel that does not own it, telling it that
the stream reached its event time (``plan.eventtime``); a clocked exchange merge orders it
at ``n``, and the channel's event-time window advances on it and drops it.
"""

from zlib import crc32

SEQ = "_fission_seq"
"""The hidden sequence-number attribute of a dynamic region's channels (its wire name)."""

FINAL_BASE = 1 << 62
"""Sequence numbers of rows flushed at end of stream start here: after every tuple."""

WATERMARK = -1
"""A tuple numbered ``WATERMARK - n`` (below zero) is a watermark frame: a copy of tuple ``n``."""


def _float_hash(v: float) -> int:
    return hash(v) if v == v else 0  # hash() of NaN is per object since Python 3.10


KEY_HASHES = {
    "str": ("_crc32({0}.encode())", lambda v: crc32(v.encode())),
    "bytes": ("_crc32({0})", crc32),
    "float": ("(hash({0}) if {0} == {0} else 0)", _float_hash),
}
"""How a dynamic region's split hashes a key attribute of each schema type, the same in
every process: as Python source over an expression (what generated code spells,
``kinds.lowering.key_hash``) and as a function of the value (``key_channel``), side by
side so the two cannot drift. A type not listed (int, bool) is its own hash."""


def key_hash_source(expr: str, typ: str) -> str:
    """Python source hashing ``expr``, a key attribute of schema type ``typ`` (:data:`KEY_HASHES`).

    >>> key_hash_source("t[2]", "float"), key_hash_source("t[0]", "int")
    ('(hash(t[2]) if t[2] == t[2] else 0)', 't[0]')
    """
    form = KEY_HASHES.get(typ)
    return form[0].format(expr) if form else expr


def combined_source(parts: list[str]) -> str:
    """Python source of a key's hash from its attributes' (``key_hash_source``): one as
    it is, several by ``hash`` of their tuple (a tuple of ints does not depend on
    PYTHONHASHSEED)."""
    return parts[0] if len(parts) == 1 else f"hash(({', '.join(parts)}))"


def key_channel(values: tuple, types: tuple[str, ...], width: int) -> int:
    """The channel of ``width`` a dynamic region's split routes a tuple to, from the values
    of the region key's attributes (``types``: their schema types): what the generated
    split computes (:data:`KEY_HASHES`, :func:`combined_source`), for moving a key's state
    to the channel that owns it at another width (``deploy.checkpoint_rescale``).

    >>> [key_channel(("k3",), ("str",), w) for w in (1, 2, 3)]
    [0, 1, 2]
    >>> key_channel((7, "a"), ("int", "str"), 4) == hash((7, 3904355907)) % 4
    True
    """
    return key_hash(values, types) % width


def key_hash(values: tuple, types: tuple[str, ...]) -> int:
    """The hash a dynamic region's split takes of a key (``key_channel`` is it mod the width).

    >>> key_hash(("k3",), ("str",)) % 3 == key_channel(("k3",), ("str",), 3)
    True
    """
    parts = [KEY_HASHES[t][1](v) if t in KEY_HASHES else v for v, t in zip(values, types, strict=True)]
    return parts[0] if len(parts) == 1 else hash(tuple(parts))


def channel_shares(top: dict[int, int], other: int, width: int) -> list[float]:
    """Each of ``width`` channels' share of a keyed stream, from sampled key hashes: ``top``
    the hottest hashes' counts (each goes to channel ``hash % width``, as the split routes
    it), ``other`` the sampled tuples of every other key (spread evenly: many keys, none
    hot). All zeros when nothing was sampled.

    >>> channel_shares({7: 60, 8: 20}, 20, 2)
    [0.3, 0.7]
    """
    total = sum(top.values()) + other
    if total <= 0:
        return [0.0] * width
    shares = [other / width] * width
    for h, n in top.items():
        shares[h % width] += n
    return [x / total for x in shares]

