"""A YSB-style keyed pipeline (the Yahoo Streaming Benchmark's shape), undeclared.

``tuples`` ad events ``(user:int, ad:int, etype:int, ts:int)`` (event time in ms, ``gap``
ms apart, in order; each split of ``split`` events seeded on its own, so the source is
splittable) are filtered to views (``etype == 0``, a third of them), joined to their
campaign through the opaque Python function :func:`campaign_of` (the benchmark's Redis
lookup, here a table in memory), and counted per campaign in 10 s event-time tumbling
windows. The counts go to a counting sink (``sink="file"``: the window rows, whose order
is part of the answer). Nothing is declared parallel: FATM finds the regions.

The default of 1 M events makes a run last about a second on one core, as the other
apps' defaults do: at 200 k (0.2 s) a plan's start and drain were most of what
``compare`` timed (FATM's 3-PE plan on 2 cores 0.91x FALL at 200 k, 1.97x at 1 M, the
same day; docs/results/compare/ysb-s44*).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from spadeopt import App, app, time_window
from spadeopt.toolkit.sources import splittable

CAMPAIGNS = 100
ADS_PER_CAMPAIGN = 10


@splittable("split")
def events(n: int, gap: int = 1, split: int = 4096, *, part: int = 0, parts: int = 1) -> Iterator[list]:
    """Splits ``part, part + parts, ...`` of ``n`` events ``(user, ad, etype, ts)``."""
    for s in range(part, -(-n // split), parts):
        rand = random.Random(1_000_003 * s + 7).random
        yield [(int(rand() * 100_000), int(rand() * CAMPAIGNS * ADS_PER_CAMPAIGN), int(rand() * 3), i * gap)
               for i in range(s * split, min(n, (s + 1) * split))]


def campaign_of(ad: int) -> int:
    """The campaign an ad belongs to (the benchmark's lookup; opaque to spadeopt)."""
    return _TABLE[ad]


_TABLE = [ad // ADS_PER_CAMPAIGN for ad in range(CAMPAIGNS * ADS_PER_CAMPAIGN)]


@app
def ysb(tuples: int = 1_000_000, window: int = 10_000, gap: int = 1, sink: str = "count", split: int = 4096) -> App:
    a = App("ysb")
    ev = a.source("events", "user:int, ad:int, etype:int, ts:int", generator=events,
                  args={"n": tuples, "gap": gap, "split": split})
    views = a.functor("views", ev, filter="etype == 0")
    joined = a.functor("campaign", views, output={"campaign:int": "campaign_of(ad)", "ts": "ts"},
                       functions=[campaign_of])
    counts = a.aggregate("counts", joined, window=time_window("ts", window), by=["campaign"],
                         output={"campaign": "campaign", "start": "wstart()", "views": "count()"})
    a.sink("out", counts, mode=sink)
    return a


app = ysb
