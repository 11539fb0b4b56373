"""Constants of the parallel-region (fission) protocol that generated code and the runtime share.

This module is below both compile-time code (``plan.fission``, ``kinds``, ``codegen``)
and the runtime (``runtime.merges``, ``runtime.pe``): both import the protocol from
here, so compiling an app never imports the runtime. It imports nothing.

In a dynamic region every tuple in a channel carries the split's sequence number as a
hidden last attribute named ``SEQ``; a 1-tuple ``(n,)`` is a *pulse* (nothing numbered
below ``n`` follows on that channel). Rows an operator flushes at end of stream are
numbered from ``FINAL_BASE`` up, so they sort after every tuple. A tuple numbered below
zero is a *watermark frame* (``WATERMARK``): a copy of tuple ``n``, numbered ``-1 - n``,
sent by a split or an exchange split to a channel that does not own it, telling it that
the stream reached its event time (``plan.eventtime``); a clocked exchange merge orders it
at ``n``, and the channel's event-time window advances on it and drops it.
"""

SEQ = "_fission_seq"
"""The hidden sequence-number attribute of a dynamic region's channels (its wire name)."""

FINAL_BASE = 1 << 62
"""Sequence numbers of rows flushed at end of stream start here: after every tuple."""

WATERMARK = -1
"""A tuple numbered ``WATERMARK - n`` (below zero) is a watermark frame: a copy of tuple ``n``."""


def key_channel(values: tuple, types: tuple[str, ...], width: int) -> int:
    """The channel of ``width`` a dynamic region's split routes a tuple to, from the values
    of the region key's attributes (``types``: their schema types): exactly what the
    generated split computes (``kinds.lowering.stable_hash``, ``kinds.fission_split``), in
    Python, for moving a key's state to the channel that owns it at another width
    (``deploy.checkpoint_rescale``). A str hashes by CRC-32 of its UTF-8, bytes by CRC-32,
    a float by ``hash`` (NaN: 0), an int or bool as itself; several attributes by ``hash``
    of the tuple of those (a tuple of ints does not depend on PYTHONHASHSEED).

    >>> [key_channel(("k3",), ("str",), w) for w in (1, 2, 3)]
    [0, 1, 2]
    >>> key_channel((7, "a"), ("int", "str"), 4) == hash((7, 3904355907)) % 4
    True
    """
    from zlib import crc32

    parts = []
    for v, typ in zip(values, types, strict=True):
        if typ == "str":
            parts.append(crc32(v.encode()))
        elif typ == "bytes":
            parts.append(crc32(v))
        elif typ == "float":
            parts.append(hash(v) if v == v else 0)
        else:
            parts.append(v)
    return (parts[0] if len(parts) == 1 else hash(tuple(parts))) % width
