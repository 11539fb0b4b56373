"""Runtime behaviour the operator tests rely on, including known bugs in files outside
the toolkit (marked xfail with a precise reason)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt import App
from spadeopt.runtime.ordered import Ordered
from spadeopt.runtime.transport import Sender
from tests.toolkit.gens import span
from tests.toolkit.harness import same_under_fusions


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ins=st.lists(st.lists(st.integers(0, 5), max_size=10).map(sorted), min_size=1, max_size=4),
       seed=st.integers(0, 10**6))
def test_ordered_releases_in_key_then_input_order_whatever_the_arrival(ins, seed):
    """Merge and join rely on this: any interleaving of pushes (in any batch sizes) and
    finishes yields the stable sort by (key, input), and nothing is released early."""
    rng = random.Random(seed)
    o = Ordered(len(ins), [0] * len(ins))
    pending = [[(k, i, j) for j, k in enumerate(d)] for i, d in enumerate(ins)]
    open_ = set(range(len(ins)))
    out = []
    while open_:
        i = rng.choice(sorted(open_))
        if pending[i] and rng.random() < 0.8:
            n = rng.randint(1, 3)
            batch, pending[i] = pending[i][:n], pending[i][n:]
            got = o.push(i, batch)
        elif not pending[i]:
            open_.discard(i)
            got = o.finish(i)
        else:
            continue
        out += got
        # released tuples are final: nothing smaller may still arrive on a live input
        for port, t in got:
            for p in open_:
                head = o.queues[p][0][0] if o.queues[p] else (pending[p][0][0] if pending[p] else None)
                assert head is None or (head, p) >= (t[0], port) or p == port
    want = sorted(((k, i, j) for i, d in enumerate(ins) for j, k in enumerate(d)), key=lambda t: (t[0], t[1]))
    assert [t for _, t in out] == want
    assert [p for p, _ in out] == [t[1] for t in want]
    assert o.buffered == 0


class _CheckLock:
    def __init__(self, sender: Sender) -> None:
        self.sender = sender
        self.held = []

    def send(self, data, copy=False):
        self.held.append(self.sender._lock.locked())


def test_locked_sender_holds_its_lock_while_sending():
    s = Sender("u.out", locked=True)
    sock = _CheckLock(s)
    s.sockets = [sock]
    s([(1,)])
    assert sock.held == [True]


def test_big_ints_give_the_same_answer_under_every_fusion(tmp_path):
    a = App("bigint")
    s = a.source("src", "i:int", generator=span, args={"n": 3})
    a.sink("big", a.functor("f", s, output={"b:int": "(i + 1) * 10 ** 20 * (1 - 2 * (i % 2))"}))
    got = same_under_fusions(a, tmp_path, fusions=("all", "none"))  # 'none': each int crosses a PE
    assert got["big"] == [{"b": (i + 1) * 10**20 * (1 - 2 * (i % 2))} for i in range(3)]
