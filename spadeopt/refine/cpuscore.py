"""The CPU score: a fixed pure-Python benchmark that says how fast a host runs spadeopt's
send/receive path, so a calibration made on one CPU can be rescaled to another (paper 003,
footnote 1). Used by calibration (which stores the score it measured) and by the
comm-cost mapping (which compares it with this host's, measured once and kept).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from spadeopt.errors import UsageError

BENCHMARK = "spadeopt-cpu-1"

def _bench_unit() -> int:
    """One fixed unit of interpreter work: integer arithmetic, containers, strings, msgpack."""
    import msgpack

    acc = 0
    for i in range(2000):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    d = {}
    for i in range(300):
        d[f"k{i}"] = [i, i * 2, str(i)]
    batch = [(i, f"sym{i % 7}", float(i) * 0.5, b"x" * 24) for i in range(200)]
    data = msgpack.packb(batch, use_bin_type=True)
    back = msgpack.unpackb(data, use_list=False, raw=False)
    return acc + len(d) + len(back) + sum(t[0] for t in back if t[1] == "sym3")


def cpu_score(units: int = 40, repeat: int = 5) -> float:
    """Benchmark units per CPU second of this thread: best of ``repeat`` timings.

    A fixed pure-Python workload shaped like the runtime's (interpreter loops, dicts,
    msgpack), so that the ratio of two hosts' scores says how much faster one runs the
    send/receive path. Best-of rather than mean: interference only ever slows it down.
    """
    if units < 1 or repeat < 1:
        raise UsageError("cpu_score needs units >= 1 and repeat >= 1")
    best = math.inf
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(units):
            _bench_unit()
        best = min(best, time.thread_time() - t0)
    return units / max(best, 1e-9)


def peak_cpu_score(samples: int = 3, pause: float = 1.0) -> float:
    """The highest of ``samples`` :func:`cpu_score` readings ``pause`` seconds apart.

    A VM's speed drifts by 20-40 % over seconds; the peak is what the machine can do,
    and comparing peaks of two hosts is what scaling ``v`` between them needs.
    """
    best = 0.0
    for i in range(samples):
        if i:
            time.sleep(pause)
        best = max(best, cpu_score())
    return best


SCORE_CACHE_ENV = "SPADEOPT_CACHE"


def score_cache() -> Path:
    """Where this host's CPU score is kept: ``$SPADEOPT_CACHE`` or ``~/.cache/spadeopt``."""
    root = os.environ.get(SCORE_CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "spadeopt")
    return Path(root) / "cpu-score.json"


def host_cpu_score(cache: Path | None = None) -> tuple[float, str]:
    """This host's peak CPU score, measured once per (host, CPU model) and kept.

    Re-measuring on every ``optimize`` made plans differ between calls (the score drifts
    20-40 % on a VM). Returns the score and where it came from. A cache that cannot be
    written only costs a warning-free re-measurement next time.
    """
    from spadeopt.atomic import write_atomic
    from spadeopt.profiling import host_info

    cache = cache or score_cache()
    info = host_info()
    key = f"{info.host}|{info.cpu_model}"
    try:
        doc = json.loads(cache.read_text())
        entry = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("score"), int | float) and entry["score"] > 0:
            return float(entry["score"]), f"measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(entry.get('measured', 0)))}, kept in {cache}"
    except (OSError, ValueError):
        doc = {}
    score = peak_cpu_score()
    doc = doc if isinstance(doc, dict) else {}
    doc[key] = {"score": score, "measured": time.time()}
    try:
        write_atomic(cache, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return score, f"measured now, kept in {cache}"
    except OSError:
        return score, "measured now (cache not writable)"
