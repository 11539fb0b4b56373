"""Property tests of the fission merges (no Spark, no processes): a split stamps
sequence numbers and routes (by key hash or in blocks), channels emit 0, 0.3, 1 or 2.5
tuples per tuple on average, batches reach the merge with random boundaries in a
random interleaving, channels end at random moments; the merged stream must be the
width-1 stream exactly."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from spadeopt.runtime.merges import BlockMerge, SeqMerge

SELECTIVITY = {0: (0, 0), 0.3: (0, 1), 1: (1, 1), 2.5: (2, 3)}


def outputs(t: tuple, sel: float) -> list[tuple]:
    """What an operator with average selectivity ``sel`` emits for ``t``
    (deterministic in ``t``, so width 1 and every channel agree)."""
    lo, hi = SELECTIVITY[sel]
    h = (t[0] * 2654435761) % 1000
    if sel == 0.3:
        n = 1 if h < 300 else 0
    elif sel == 2.5:
        n = 2 if h < 500 else 3
    else:
        n = lo
    return [(t[0], t[1], j) for j in range(n)]


def deliver(per_channel: list[list[tuple]], merge, rng: random.Random, max_batch: int) -> list:
    """Cut each channel's output into random batches and push them in a random
    interleaving (FIFO per channel); finish each channel after its last batch."""
    batches = []
    for items in per_channel:
        cut, i = [], 0
        while i < len(items):
            n = rng.randint(1, max_batch)
            cut.append(items[i:i + n])
            i += n
        batches.append(cut)
    out = []
    pending = [c for c in range(len(per_channel))]
    while pending:
        c = rng.choice(pending)
        if batches[c]:
            out.extend(merge.push(c, tuple(batches[c].pop(0))))
        else:
            out.extend(merge.finish(c))
            pending.remove(c)
    return out


@given(n=st.integers(0, 400), width=st.integers(1, 4), sel=st.sampled_from([0, 0.3, 1, 2.5]),
       keyed=st.booleans(), seed=st.integers(0, 2**32), max_batch=st.integers(1, 50))
def test_seq_merge_restores_width_1_order(n, width, sel, keyed, seed, max_batch):
    rng = random.Random(seed)
    stream = [(i, rng.randrange(9)) for i in range(n)]
    want = [o for t in stream for o in outputs(t, sel)]
    channels: list[list[tuple]] = [[] for _ in range(width)]
    for seq, t in enumerate(stream):
        c = t[1] % width if keyed else (seq // 64) % width
        channels[c].extend(o + (seq,) for o in outputs(t, sel))
    merge = SeqMerge(width)
    assert deliver(channels, merge, rng, max_batch) == want
    assert merge.buffered == 0


@given(n=st.integers(0, 600), width=st.integers(1, 4), block=st.sampled_from([1, 7, 64]),
       seed=st.integers(0, 2**32), max_batch=st.integers(1, 90))
def test_block_merge_restores_width_1_order(n, width, block, seed, max_batch):
    rng = random.Random(seed)
    stream = [(i, rng.randrange(100)) for i in range(n)]
    channels: list[list[tuple]] = [[] for _ in range(width)]
    for i, t in enumerate(stream):
        channels[(i // block) % width].append(t)
    merge = BlockMerge(width, block)
    assert deliver(channels, merge, rng, max_batch) == stream
    assert merge.buffered == 0


def test_seq_merge_holds_only_what_a_quiet_channel_may_still_precede():
    m = SeqMerge(2)
    assert m.push(0, ((1, 0), (2, 2))) == []  # channel 1 may still emit seq 1
    assert m.push(1, ((3, 1),)) == [(1,), (3,)]  # up to seq 1; seq 2 waits for channel 1's next
    assert m.buffered == 1
    assert m.finish(1) == [(2,)]
    assert m.finish(0) == []


@given(n=st.integers(1, 300), width=st.integers(2, 4), sel=st.sampled_from([0, 0.3, 1, 2.5]),
       seed=st.integers(0, 2**32), max_batch=st.integers(1, 30))
def test_seq_merge_with_pulses_restores_order(n, width, sel, seed, max_batch):
    """Pulses (1-tuples, last in a batch) promise that the channel sends nothing
    numbered lower later; with them the merge still gives the width-1 stream."""
    rng = random.Random(seed)
    stream = [(i, rng.randrange(9)) for i in range(n)]
    want = [o for t in stream for o in outputs(t, sel)]
    merge = SeqMerge(width)
    got: list = []
    pending: list[list[tuple]] = [[] for _ in range(width)]
    for start in range(0, n, max_batch):  # the split: one batch, then a pulse to every channel
        for seq in range(start, min(n, start + max_batch)):
            t = stream[seq]
            pending[t[1] % width].extend(o + (seq,) for o in outputs(t, sel))
        nxt = min(n, start + max_batch)
        for c in rng.sample(range(width), width):
            got.extend(merge.push(c, (*pending[c], (nxt,))))
            pending[c] = []
    for c in range(width):
        got.extend(merge.finish(c))
    assert got == want


def test_pulses_let_a_silent_channel_release_the_others():
    """A channel that drops everything still advances the merge: without its pulses
    the merge would hold every other channel's tuple until the end."""
    m = SeqMerge(2)
    held = []
    for b in range(100):
        seqs = range(b * 10, b * 10 + 10)
        m.push(0, (*[(s, s) for s in seqs if s % 2 == 0], (b * 10 + 10,)))
        m.push(1, ((b * 10 + 10,),))  # channel 1 filtered out all its tuples
        held.append(m.buffered)
    assert max(held) <= 5, held
