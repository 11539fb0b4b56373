"""What the optimizer benchmarks share: the summary of a list of gaps, and their JSON writer.

:mod:`spadeopt.bench.optimizer_bench` (GreedyFuse vs exact) and
:mod:`spadeopt.bench.width_gap` (width ascent vs exhaustive) both report a gap per
graph and summarise them the same way; both write their figures with
:func:`write_report`. Neither imports the other.

>>> s = gap_summary([0.0, 0.0, 0.1, 0.3])
>>> s["zero_gap"], s["max"], round(s["mean"], 3), round(s["p90"], 2)
(2, 0.3, 0.1, 0.24)
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic


def gap_summary(gaps: Sequence[float]) -> dict[str, Any]:
    """How many gaps are zero, their mean, median, 90th percentile, max, and the mean of
    the nonzero ones (every figure 0 for no gaps)."""
    return {
        "graphs": len(gaps),
        "zero_gap": sum(1 for g in gaps if g == 0.0),
        "mean": statistics.fmean(gaps) if gaps else 0.0,
        "median": statistics.median(gaps) if gaps else 0.0,
        "p90": quantile(gaps, 0.9),
        "max": max(gaps, default=0.0),
        "mean_of_nonzero": statistics.fmean([g for g in gaps if g > 0] or [0.0]),
    }


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def write_report(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON, atomically (:func:`spadeopt.atomic.write_atomic`),
    readable by all (0644)."""
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    os.chmod(path, 0o644)
