"""CPU cost per tuple of fission's split and merge, for FATM's width choice.

``python -m spadeopt.bench.fission_cost`` times, on this host, the work the generated
split does per tuple (the loops of ``templates/ops/fission_split.py.j2``: block dealing
for static-rate regions; CRC-32 hash routing, sequence-number stamping and pulses for
dynamic ones) and the runtime merges (``spadeopt.runtime.fission.BlockMerge`` and
``SeqMerge``, minus the cost of building their input batches), on 200,000 five-attribute
tuples in batches of 256, width 2, best of 5. It prints nanoseconds per tuple;
``spadeopt.optimize.widths.SPLIT_S`` / ``MERGE_S`` are rounded from its output (the run
is recorded in docs/decisions.md). The transport cost of the split's and merge's links
is not included: FATM costs those links with the calibration, like every other link.
"""

from __future__ import annotations

import json
import random
import time
import zlib
from collections.abc import Callable

from spadeopt.runtime.fission import BlockMerge, SeqMerge

N, BATCH, WIDTH, BLOCK = 200_000, 256, 2, 64


def _best(f: Callable[[], None], reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times) / N


def measure() -> dict[str, float]:
    """Seconds per tuple: split and merge, static and dynamic."""
    rng = random.Random(1)
    tuples = [(i, 10.0 + rng.random(), f"S{rng.randrange(100):03d}", 2.0, i) for i in range(N)]
    batches = [tuples[i:i + BATCH] for i in range(0, N, BATCH)]

    def split_static() -> None:
        i = 0
        for batch in batches:
            outs = [[] for _ in range(WIDTH)]
            pos, total = 0, len(batch)
            while pos < total:
                take = min(BLOCK - i % BLOCK, total - pos)
                outs[(i // BLOCK) % WIDTH].extend(batch[pos:pos + take])
                pos += take
                i += take

    def split_dynamic() -> None:
        i = 0
        for batch in batches:
            outs = [[] for _ in range(WIDTH)]
            route = [o.append for o in outs]
            for t in batch:
                route[zlib.crc32(t[2].encode()) % WIDTH](t + (i,))
                i += 1
            for o in outs:
                o.append((i,))

    dealt = []
    i = 0
    for batch in batches:
        per = [[] for _ in range(WIDTH)]
        for t in batch:
            per[(i // BLOCK) % WIDTH].append(t)
            i += 1
        dealt.append(per)
    stamped = []
    i = 0
    for batch in batches:
        per = [[] for _ in range(WIDTH)]
        for t in batch:
            per[zlib.crc32(t[2].encode()) % WIDTH].append(t + (i,))
            i += 1
        for p in per:
            p.append((i,))
        stamped.append(per)

    def copies(data) -> Callable[[], None]:
        def run() -> None:
            for per in data:
                for c in range(WIDTH):
                    list(per[c])
        return run

    def merge(data, make) -> Callable[[], None]:
        def run() -> None:
            m = make()
            for per in data:
                for c in range(WIDTH):
                    if per[c]:
                        m.push(c, list(per[c]))
        return run

    return {
        "split_static": _best(split_static),
        "split_dynamic": _best(split_dynamic),
        "merge_static": max(0.0, _best(merge(dealt, lambda: BlockMerge(WIDTH, BLOCK))) - _best(copies(dealt))),
        "merge_dynamic": max(0.0, _best(merge(stamped, lambda: SeqMerge(WIDTH))) - _best(copies(stamped))),
    }


if __name__ == "__main__":
    got = measure()
    print(json.dumps({k: f"{v * 1e9:.0f} ns/tuple" for k, v in got.items()}, indent=2))
