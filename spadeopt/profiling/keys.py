"""Which keys a keyed operator's input carries: the hottest keys' share, sampled.

FATM splits a keyed region's work by hashing the key (``protocol.key_channel``); with one
key much hotter than the rest, one channel gets more than ``1/w`` of the tuples and is
the region's bottleneck at any width. A ``KeySampler`` wraps a keyed operator's input
port in an instrumented build (``rt.key_sampler``): about every ``1/rate`` tuples (a
countdown over batches, no per-tuple step on the others; each gap drawn uniformly from
``1 .. 2/rate - 1``, so a stream whose keys repeat with the stride's period is not sampled
at one phase of it) it takes one tuple's key hash
(``protocol.key_hash``, the split's own) and counts it. At most ``TOP`` distinct hashes
are kept; when a new one would make more, the rarest half fold into ``other`` (a
space-saving sketch, rough on the tail and exact enough on the keys that matter: a key
holding a large share is counted from its first samples on). At the PE's end its counts
are sample lines (``dir`` "in", metric ``key``): ``sub`` the hash as a decimal string, or
``"*"`` for the folded tail, ``value`` the count (``profiling.records``).

>>> k = KeySampler(1.0, (0,), ("str",), random.Random(0))
>>> k.take([("a", 1), ("a", 2), ("b", 3)]); k.take([("a", 4)])
>>> sorted(k.counts.values()), k.other
([1, 3], 0)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from spadeopt.protocol import key_hash

TOP = 256  # distinct key hashes a point keeps
OTHER = "*"  # the ``sub`` of the folded tail's count


class KeySampler:
    """One keyed input port's sampled key hashes (the module doc)."""

    __slots__ = ("_every", "_left", "_gap", "_idx", "_types", "_arity", "counts", "other")

    def __init__(self, rate: float, idx: Sequence[int], types: Sequence[str], rng: random.Random,
                 arity: int = 0) -> None:
        self._every = max(1, round(1 / rate)) if rate > 0 else 0
        self._gap = (lambda: rng.randint(1, 2 * self._every - 1)) if self._every > 1 else (lambda: 1)
        self._left = self._gap() if self._every else 0
        self._idx, self._types = tuple(idx), tuple(types)
        # the port's tuples' length: a fission pulse (a 1-tuple, last in its batch) is shorter
        self._arity = max(arity, max(self._idx, default=0) + 1)
        self.counts: dict[int, int] = {}
        self.other = 0

    def take(self, batch: Sequence[tuple]) -> None:
        """Count down ``len(batch)``; when it runs out, sample the tuple it ran out at."""
        every = self._every
        if not every:
            return
        left = self._left - len(batch)
        while left <= 0:
            t = batch[len(batch) - 1 + left]
            if len(t) >= self._arity:  # a pulse carries no key
                self._count(key_hash(tuple(t[i] for i in self._idx), self._types))
            left += self._gap()
        self._left = left

    def _count(self, h: int) -> None:
        counts = self.counts
        if h in counts:
            counts[h] += 1
            return
        if len(counts) >= TOP:
            keep = sorted(counts.items(), key=lambda kv: -kv[1])[:TOP // 2]
            self.other += sum(counts.values()) - sum(n for _, n in keep)
            self.counts = counts = dict(keep)
        counts[h] = 1

    def wrap(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``fn`` (a port's batch function) with its batches sampled first."""
        take = self.take

        def sampled(batch):
            take(batch)
            return fn(batch)

        return sampled

    def records(self) -> list[tuple[str, float, int]]:
        """``(sub, ts, count)`` per kept hash and for the tail (the module doc)."""
        now = time.time()
        out = [(str(h), now, n) for h, n in sorted(self.counts.items())]
        return out + ([(OTHER, now, self.other)] if self.other else [])
