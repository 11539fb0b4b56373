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
