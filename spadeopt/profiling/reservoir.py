"""Reservoir sampling: a uniform sample of at most ``S`` values of an unbounded stream.

``Reservoir`` is Vitter's Algorithm R (paper §3.2). Invariant: after ``n`` values, each
value offered is in the reservoir with probability exactly ``min(1, S/n)``.
``Cumulative`` keeps, besides a reservoir, the exact first and last sample of a
cumulative quantity (a thread's CPU time), which rates are computed from. A reservoir
draws from the ``random.Random`` it is given (``recorder.point_rng`` derives one per
reservoir from the run's seed), so a run's choices are reproducible.

Cost: per value offered, at most one ``random()`` call and one list store; memory:
``S`` values. ``MetricRecorder`` inlines ``Reservoir.add`` on its record path;
tests/profiling/test_recorder.py checks that copy against this class.
"""

from __future__ import annotations

import random
from typing import Any

from spadeopt.errors import UsageError

Sample = tuple[float, float]
"""A timestamped sample: (wall-clock seconds from ``time.time()``, value)."""


def check_reservoir_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        msg = f"reservoir size S must be an integer >= 1; got {size!r}"
        raise UsageError(msg)


class Reservoir:
    """Reservoir sampling, Vitter's Algorithm R: a uniform sample of at most ``size`` values.

    The i-th value offered (0-based) is kept with probability ``S/(i+1)``, replacing a
    uniformly chosen slot. This deviates from the paper's printed ``S/i``, which is an
    off-by-one for 0-based ``i`` (the value at i = S would always enter, and the first S
    values end up under-represented); with ``S/(i+1)`` every value offered so far is in
    the reservoir with probability exactly ``min(1, S/seen)``.

    >>> r = Reservoir(2, random.Random(0))
    >>> for v in "abc":
    ...     r.add(v)
    >>> len(r.values), r.seen
    (2, 3)
    """

    __slots__ = ("size", "values", "seen", "_rng")

    def __init__(self, size: int, rng: random.Random) -> None:
        check_reservoir_size(size)
        self.size = size
        self.values: list[Any] = []
        self.seen = 0
        self._rng = rng

    def add(self, value: Any) -> None:
        """Offer one value."""
        i = self.seen
        self.seen = i + 1
        if i < self.size:
            self.values.append(value)
            return
        # int(random() * n) instead of randrange(n): 5x cheaper, and its bias (below
        # 2**-53 * n) is far under anything the chi-square test or refinement can see.
        j = int(self._rng.random() * (i + 1))
        if j < self.size:
            self.values[j] = value


class Cumulative:
    """Samples of a cumulative quantity: a reservoir plus the exact first and last sample."""

    __slots__ = ("reservoir", "first", "last")

    def __init__(self, reservoir: Reservoir) -> None:
        self.reservoir = reservoir
        self.first: Sample | None = None
        self.last: Sample | None = None

    def add(self, sample: Sample) -> None:
        if self.first is None:
            self.first = sample
        self.last = sample
        self.reservoir.add(sample)

    def kept(self) -> list[Sample]:
        """Reservoir contents plus first and last, each sample once."""
        out = list(self.reservoir.values)
        ids = {id(s) for s in out}
        for s in (self.first, self.last):
            if s is not None and id(s) not in ids:
                ids.add(id(s))
                out.append(s)
        return out
