"""CPU cost per tuple of fission's split and merge (paper 000's ``c_p``), for FATM.

``spadeopt calibrate`` (and ``python -m spadeopt.refine.fission_cost``) times, on this
host, the work the generated split does per tuple (the loops of ``templates/ops/fission_split.py.j2``: block dealing
for static-rate regions; CRC-32 hash routing, sequence-number stamping and pulses for
dynamic ones) and the runtime merges (``spadeopt.runtime.merges.BlockMerge`` and
``SeqMerge``, minus the cost of building their input batches), on 200,000 five-attribute
tuples in batches of 256, width 2, best of 5. The calibration stores the median of its
sweeps' measurements as the ``split_*_s`` / ``merge_*_s`` of its ``perf_model``
(``spadeopt.optimize.predict.PerfModel``; without one, the defaults there are this
module's figures on the 2-core VM, docs/decisions/021-fatm-chooses-region-widths.md). The
transport cost of the split's
and merge's links is not included: FATM costs those links with the calibration, like
every other link.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import zlib
from collections.abc import Callable

from spadeopt.runtime.merges import BlockMerge, SeqMerge

N, BATCH, WIDTH, BLOCK = 200_000, 256, 2, 64


def _best(f: Callable[[], None], reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times) / N


def measure() -> dict[str, float]:
    """Seconds per tuple: split and merge, static and dynamic (keys ``split_static`` ...)."""
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


def perf_model_block(runs: list[dict[str, float]]) -> dict[str, float]:
    """The calibration's ``perf_model`` entries from several :func:`measure` runs: the
    median of each (``PerfModel.split_static_s`` ...).

    >>> perf_model_block([{"split_static": 1.0, "split_dynamic": 2.0, "merge_static": 3.0, "merge_dynamic": 4.0},
    ...                   {"split_static": 3.0, "split_dynamic": 2.0, "merge_static": 1.0, "merge_dynamic": 0.0}])
    {'split_static_s': 2.0, 'split_dynamic_s': 2.0, 'merge_static_s': 2.0, 'merge_dynamic_s': 2.0}
    """
    return {f"{k}_s": statistics.median(r[k] for r in runs)
            for k in ("split_static", "split_dynamic", "merge_static", "merge_dynamic")}


if __name__ == "__main__":
    got = measure()
    print(json.dumps({k: f"{v * 1e9:.0f} ns/tuple" for k, v in got.items()}, indent=2))
