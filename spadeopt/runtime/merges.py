"""The merges that close a parallel region (fission), restoring the width-1 order.

``SeqMerge`` (dynamic regions, 002's sequence numbers): every channel delivers tuples
whose last attribute is the sequence number the split stamped on the tuple that
triggered them, in non-decreasing order per channel (channels are FIFO). A tuple may
leave once no live channel can still deliver a smaller number: with ``w`` the smallest
*last buffered* number over the live channels (a live channel with nothing buffered
blocks), everything buffered up to ``w`` is released, sorted by number (stable, so the
several outputs of one trigger keep their channel order), with the number stripped.

``BlockMerge`` (static-rate regions, 004's weighted round robin): the split dealt
blocks of ``block`` tuples to the channels in turn and every channel emits exactly
one tuple per tuple, so taking ``block`` tuples from each channel in turn restores
the order with no sequence number at all.

Pulses (dynamic regions): the split ends every batch to a channel with a pulse, the
1-tuple ``(n,)`` promising that the channel delivers nothing numbered below ``n`` later;
channel operators pass it on last in their batch. ``SeqMerge`` keeps a channel's last
pulse as its floor, so a channel that filters out everything still lets the others'
tuples go. Memory: a merge only buffers what one channel delivers ahead of another;
the split blocks on a full link, so a channel runs ahead of a slower one by at most
what fits in the slower channel's links (ZeroMQ high-water marks).

``ExchangeMerge`` (a key exchange between two regions): ``SeqMerge`` at the head of a
downstream channel, keeping the numbers and passing a pulse on.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator
from itertools import chain, pairwise
from operator import itemgetter

from spadeopt.connectors.contract import IterableSource

_SEQ = itemgetter(-1)
_COMPACT = 4096


class _ChannelQueues:
    """Per-channel queues read from a head index (no per-tuple pops); shared by both merges."""

    def __init__(self, n: int) -> None:
        self.queues: list[list] = [[] for _ in range(n)]
        self.heads = [0] * n
        self.live = [True] * n

    @property
    def buffered(self) -> int:
        return sum(len(q) - h for q, h in zip(self.queues, self.heads, strict=True))

    def _consume(self, i: int, pos: int) -> None:
        """Channel ``i``'s queue is read up to ``pos``: drop it when empty, compact it when long."""
        q = self.queues[i]
        if pos == len(q):
            self.queues[i] = []
            self.heads[i] = 0
        elif pos > _COMPACT:
            del q[:pos]
            self.heads[i] = 0
        else:
            self.heads[i] = pos

    def _end(self, channel: int, why: str = "") -> list:
        self.live[channel] = False
        out = self._release()
        if not any(self.live) and self.buffered:  # pragma: no cover - a bug, never data
            raise RuntimeError(f"fission merge: {self.buffered} tuples left after every channel ended{why}")
        return out

    def _release(self) -> list:
        raise NotImplementedError


class SeqMerge(_ChannelQueues):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.floor = [-1] * n  # per channel: its last pulse (no later tuple has a smaller number)
        self.taken: int | None = None  # the mark of the last take: nothing buffered is at or below it
        self.above = False  # every tuple pushed since that take is numbered above it

    @staticmethod
    def held(fields: dict) -> list[tuple]:
        """The tuples a snapshot of this merge (``vars``) holds, in number order."""
        if set(fields) != set(vars(SeqMerge(1))):
            raise ValueError(f"not a sequence-number merge's snapshot (fields {sorted(fields)})")
        return sorted(chain.from_iterable(q[h:] for q, h in zip(fields["queues"], fields["heads"], strict=True)),
                      key=_SEQ)

    @staticmethod
    def resized(fields: dict, width: int) -> dict:
        """A snapshot of this merge (``vars``, as a checkpoint holds it) for ``width``
        channels, for a resume under another width of its region (``deploy.checkpoint_rescale``).
        Its floors start at -1 (no promise) until each new channel's first pulse. The
        tuples it held (channels delivered them ahead of another) wait in one more,
        ended, channel: ``_take`` releases an ended channel's queue up to the live
        channels' mark, as any other, so they leave in number order among the new
        channels' tuples (no input port feeds that channel).

        >>> SeqMerge.resized(vars(SeqMerge(2)), 3)["floor"]
        [-1, -1, -1]
        >>> m = SeqMerge(2); _ = m.push(0, [("a", 5), ("b", 7), (4,)])
        >>> r = SeqMerge(3); vars(r).update(SeqMerge.resized(vars(m), 3))
        >>> r.push(0, [(6,)]), r.push(1, [("c", 6), (9,)]), r.push(2, [(8,)]), r.push(0, [(10,)])
        ([], [], [('a',), ('c',)], [('b',)])
        """
        held = SeqMerge.held(fields)
        out = vars(SeqMerge(width + bool(held)))
        if held:
            out["queues"][width], out["live"][width] = held, False
        return out

    def push(self, channel: int, batch) -> list[tuple]:
        if len(batch[-1]) == 1:  # a pulse travels last in its batch
            self.floor[channel] = batch[-1][0]
            batch = batch[:-1]
        if batch:
            self.queues[channel].extend(batch)
            self.above = self.taken is not None and self._key(batch[0]) > self.taken
        else:
            self.above = True
        return self._release()

    def finish(self, channel: int, stopping=None) -> list[tuple]:
        self.above = False
        return self._end(channel)

    def _release(self) -> list[tuple]:
        return [t[:-1] for t in self._take()[0]]

    _key = staticmethod(_SEQ)  # a tuple's place in the width-1 order (ClockedExchangeMerge: frames too)

    def _take(self) -> tuple[list[tuple], int | None]:
        """The tuples that may leave now, in number order (numbers kept), and the mark:
        the smallest number a live channel may still deliver (None: every channel ended)."""
        queues, heads, key = self.queues, self.heads, self._key
        mark = None
        for q, h, live, floor in zip(queues, heads, self.live, self.floor, strict=True):
            if live:
                last = key(q[-1]) if len(q) > h and key(q[-1]) > floor else floor
                if mark is None or last < mark:
                    mark = last
        if mark is not None and (mark < 0 or (self.above and mark == self.taken)):
            return [], mark  # nothing can leave: the channels' scan below is most of a merge's cost
        self.taken = mark
        parts = []
        for i, q in enumerate(queues):
            h = heads[i]
            n = len(q)
            if h == n:
                continue
            end = n if mark is None or key(q[-1]) <= mark else bisect_right(q, mark, lo=h, key=key)
            if end == h:
                continue
            parts.append(q[h:end] if h or end < n else q)
            self._consume(i, end)
        if not parts:
            return [], mark
        return (parts[0] if len(parts) == 1 else _merge_runs(parts, key)), mark


def _merge_runs(parts: list[list], key) -> list:
    """The channels' sorted runs ``parts`` as one list in ``key`` order, stable by channel.

    Channels usually hold disjoint blocks of numbers (a split deals whole batches, an
    exchange keeps each block's numbers together), so the runs are put in order by their
    first keys and, when each ends before the next begins, concatenated: two key calls per
    run instead of one per tuple (the sort's key calls were half a window channel's CPU
    behind a 12-sender exchange). Runs that interleave are sorted as before.

    >>> _merge_runs([[(5,), (6,)], [(1,), (2,)]], itemgetter(-1))
    [(1,), (2,), (5,), (6,)]
    >>> _merge_runs([[(1, "a"), (3, "a")], [(2, "b")], [(3, "c")]], itemgetter(0))
    [(1, 'a'), (2, 'b'), (3, 'a'), (3, 'c')]
    """
    runs = sorted((key(p[0]), key(p[-1]), i) for i, p in enumerate(parts))
    if any(first <= last for (_, last, _), (first, _, _) in pairwise(runs)):
        return sorted(chain.from_iterable(parts), key=key)
    return list(chain.from_iterable(parts[i] for _, _, i in runs))


class ExchangeMerge(SeqMerge):
    """The receiving end of a key exchange (``kinds.exchange_merge``): the upstream
    channels' tuples for this downstream channel merged by number as ``SeqMerge`` does,
    but the numbers are kept (the channel's operators carry them on) and every batch
    released ends with a pulse, the mark (no upstream channel can still send a smaller
    number), whenever it grew: 002's shuffle merger, each upstream channel's pulses kept
    as its floor, so the downstream channel's own pulses are one per batch, not one per
    upstream channel. The exchange numbers every tuple distinctly, so ties cannot occur."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.sent = -1  # the last pulse passed on

    def _release(self) -> list[tuple]:
        out, mark = self._take()
        if mark is not None and mark > self.sent:
            self.sent = mark
            out = [*out, (mark,)]
        return out


def _position(t) -> int:
    """A tuple's place in the width-1 order: its number, or ``m`` for a watermark frame
    numbered ``-1 - m`` (``plan.eventtime``)."""
    n = t[-1]
    return n if n >= 0 else -1 - n


class ClockedExchangeMerge(ExchangeMerge):
    """An ``ExchangeMerge`` whose senders also send watermark frames: copies of tuples
    numbered ``-1 - m`` (``m`` the copied tuple's number, held by another channel), merged
    at ``m`` and passed on as they are, so the event-time window behind it sees, in
    width-1 order, every tuple that moves the stream into a later window. A frame leaves
    only once every sender has passed its number: the channel's watermark is the minimum
    over its senders."""

    _key = staticmethod(_position)


class BlockMerge(_ChannelQueues):
    def __init__(self, n: int, block: int) -> None:
        super().__init__(n)
        self.n, self.block = n, block
        self.cur = 0
        self.left = block

    def push(self, channel: int, batch) -> list:
        self.queues[channel].extend(batch)
        return self._release()

    def finish(self, channel: int, stopping=None) -> list:
        """Channel ``channel`` ended. When every channel has and tuples are left, the run
        was stopped mid-stream (``stopping()`` true: ``--duration``, Ctrl-C, an adaptive
        switch), the copies of a splittable source having ended at different splits: what
        was released is a prefix of the width-1 stream and the rest, after the first
        missing block, is dropped (said on stderr). Otherwise it is a bug: an error.

        >>> m = BlockMerge(2, 2)
        >>> m.push(0, [1, 2, 5, 6]), m.push(1, [3]), m.finish(1, lambda: True), m.finish(0, lambda: True)
        ([1, 2], [3], [], [])
        """
        self.live[channel] = False
        out = self._release()
        if not any(self.live) and self.buffered and stopping is not None and stopping():
            import sys

            print(f"spadeopt: a static merge dropped {self.buffered} tuple(s) after the stop: they follow a block "
                  f"the stopped channels never read, so the output is the width-1 stream's prefix",
                  file=sys.stderr, flush=True)
            self.queues = [[] for _ in self.queues]
            self.heads = [0] * len(self.heads)
            return out
        return self._end(channel, " (a channel did not emit one tuple per tuple)")

    def _release(self) -> list:
        out: list = []
        queues, heads = self.queues, self.heads
        cur, left = self.cur, self.left
        while True:
            q = queues[cur]
            h = heads[cur]
            avail = len(q) - h
            if not avail:
                break
            take = avail if avail < left else left
            out.extend(q[h:h + take])
            h += take
            self._consume(cur, h)
            left -= take
            if not left:
                cur = (cur + 1) % self.n
                left = self.block
        self.cur, self.left = cur, left
        return out


_HALF = 1 << 63
_TOP = 1 << 64
_LOW63 = _HALF - 1
_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def join_number(t, side: int, seq: int, base: int, is_float: bool) -> int:
    """A join's match number in a channel (``kinds.numbering``): its width-1 processing
    position ``(order value t, side, number of the triggering tuple)`` packed into one int,
    ``((key << 1 | side) * base) | seq`` (``base`` a power of two above every ``seq``:
    ``plan.fission.final_base``), ``key`` the order value mapped monotonically
    into ``[0, 2**64)`` (ints as they are, offset by ``2**63``; floats by their IEEE bits,
    ``-0.0`` as ``0.0``, so equal values share a key exactly as the join's merge ties them).

    >>> [join_number(t, s, 5, 256, True) < join_number(u, v, 3, 256, True)
    ...  for (t, s), (u, v) in [((-1.5, 1), (-1.0, 0)), ((2.0, 0), (2.0, 1)), ((-0.0, 0), (0.0, 0))]]
    [True, True, False]
    """
    if is_float:
        b = _Q.unpack(_D.pack(float(t) + 0.0))[0]
        key = (b if b >= 0 else b ^ _LOW63) + _HALF
    else:
        key = t + _HALF
        if not 0 <= key < _TOP:
            raise ValueError(f"a join in a parallel region orders by {t!r}, beyond 64 bits (from -2**63 to "
                             f"2**63 - 1)")
    return (((key << 1) | side) * base) | seq


def read_splits(source: str, splits, part: int, parts: int, size: int, stamp: bool) -> SplitRecords:
    """The records of a splittable source's copy (``toolkit.sources.splittable``), flat.

    ``splits`` yields splits ``part, part + parts, ...`` of ``size`` records each, the
    stream's last possibly short; a short split must be the copy's last (checked: a
    merge taking back whole splits in turn would otherwise reorder the stream). With
    ``stamp`` (a dynamic region) every record gets its position in the width-1 stream
    as the hidden sequence number. Iterating gives the records one by one; the PE reads
    them as a source (:class:`SplitRecords`), a batch at a time.

    >>> list(read_splits("s", iter([[(0,), (1,)], [(4,)]]), 0, 2, 2, stamp=True))
    [(0, 0), (1, 1), (4, 4)]
    >>> r = read_splits("s", iter([[(0,), (1,)], [(4,)]]), 0, 2, 2, stamp=True)
    >>> r.read(3), r.read(3), r.position()
    ([(0, 0), (1, 1), (4, 4)], None, 3)
    """
    return SplitRecords(source, splits, part, parts, size, stamp)


class SplitRecords(IterableSource):
    """:func:`read_splits` as a bounded source: ``read(n)`` slices the splits (across
    them when a batch ends in the next) and stamps a slice in one ``map`` over
    ``tuple.__add__`` and ``zip(range(...))``, with no Python step per record (flattening
    through a generator and cutting with ``islice``: 120 ns a YSB record; this: 102-111
    ns; the new tuple per record is most of what is left). Position: records read, as
    ``IterableSource``."""

    def __init__(self, source: str, splits, part: int, parts: int, size: int, stamp: bool) -> None:
        super().__init__(())
        self._source, self._splits, self._part, self._parts, self._size = source, iter(splits), part, parts, size
        self._stamp = stamp
        self._cur: list = []
        self._off = 0
        self._base = 0
        self._k = 0
        self._short: int | None = None

    def _next_split(self) -> bool:
        split = next(self._splits, None)
        if split is None:
            return False
        n, size = len(split), self._size
        if self._short is not None or n > size:
            what = (f"split {self._short} of {self._part} of {self._parts} held fewer than {size} records but was "
                    f"not its last" if self._short is not None else f"a split of {n} records, more than the "
                    f"declared {size}")
            raise ValueError(f"splittable source '{self._source}' broke its contract: {what} "
                             f"(see spadeopt.toolkit.sources.splittable)")
        if n < size:
            self._short = self._k
        self._cur = split if type(split) is list else list(split)
        self._off = 0
        self._base = (self._part + self._k * self._parts) * size
        self._k += 1
        return True

    def read(self, n: int) -> list[tuple] | None:
        out: list = []
        while len(out) < n:
            off, cur = self._off, self._cur
            if off >= len(cur):
                if not self._next_split():
                    break
                continue
            take = min(n - len(out), len(cur) - off)
            chunk = cur[off:off + take]
            if self._stamp:
                b = self._base + off
                chunk = list(map(tuple.__add__, chunk, zip(range(b, b + take))))
            if out:
                out.extend(chunk)
            else:
                out = chunk
            self._off = off + take
        if not out:
            return None
        self._at += len(out)
        return out

    def skip(self, n: int) -> int:
        """Pass over the next ``n`` records unread (no slice, no stamp: a resume's replay
        by count, ``runtime.barrier_alignment.Tracked``); how many there were.

        >>> r = read_splits("s", iter([[(0,), (1,)], [(4,), (5,)]]), 0, 2, 2, stamp=True)
        >>> r.skip(3), r.read(5), r.position()
        (3, [(5, 5)], 4)
        """
        done = 0
        while done < n:
            left = len(self._cur) - self._off
            if left <= 0:
                if not self._next_split():
                    break
                continue
            take = min(n - done, left)
            self._off += take
            done += take
        self._at += done
        return done

    def __iter__(self) -> Iterator[tuple]:
        while (batch := self.read(4096)) is not None:
            yield from batch

    def lag(self) -> int | None:
        return None


def foreign_submit(pe: str, op: str, owner: int | None) -> RuntimeError:
    """The error for a replicated custom operator's ``submit`` called from a thread that is
    not inside its ``process``/``on_final`` (``owner``: the thread that is, None: none is).
    A tuple submitted so has no input tuple to take its sequence number from, so the merge
    could not put it in the width-1 order."""
    import threading

    where = (f"while thread {owner} runs its process()/on_final()" if owner is not None
             else "outside process()/on_final()")
    return RuntimeError(f"PE {pe}: custom operator '{op}' (channel copy in a parallel region) called submit "
                        f"from thread '{threading.current_thread().name}' {where}; in a parallel region a "
                        f"custom operator may submit only from process() or on_final(), on the thread that "
                        f"called them, so each tuple takes the number of the input it answers")
