"""Stride sampling: which tuples of a point's stream are measured.

Metrics are collected only for every ``1/s``-th tuple (paper §3.1). ``StrideSampler``
takes exactly ``floor(n*s)`` samples of ``n`` tuples, however they were batched, with
``s`` read as the exact decimal it was written as (``sampling_fraction``: 0.001 is
1/1000, not its binary approximation). ``stride_of(s)`` is the nominal stride the CLI
reports.

Cost: the generated code keeps each point's countdown itself (one subtraction and one
comparison per batch) and calls in only when a sample is due, about once every ``1/s``
tuples; ``advance`` is integer arithmetic only. ``MetricRecorder`` and the timing
window inline ``advance``'s one-sample case; tests/profiling/test_recorder.py checks
those copies against this class.
"""

from __future__ import annotations

import math
from fractions import Fraction

from spadeopt.errors import UsageError


def sampling_fraction(s: object) -> Fraction:
    """Validate a sampling fraction and return it as an exact fraction of its decimal form."""
    if isinstance(s, bool) or not isinstance(s, int | float | Fraction):
        msg = f"sampling fraction s must be a number in (0, 1]; got {s!r}"
        raise UsageError(msg)
    if isinstance(s, float) and not math.isfinite(s):
        msg = f"sampling fraction s must be a number in (0, 1]; got {s!r}"
        raise UsageError(msg)
    # repr() of a float is the shortest decimal that reads back as the same float, so
    # s=0.001 becomes exactly 1/1000 rather than the binary approximation.
    frac = Fraction(repr(float(s))) if isinstance(s, float) else Fraction(s)
    if not 0 < frac <= 1:
        msg = (
            f"sampling fraction s must be in (0, 1] (1 = every tuple, 0.001 = one in "
            f"1000); got {s!r}"
        )
        raise UsageError(msg)
    return frac


def stride_of(s: float) -> int:
    """Return the nominal stride ``1/s`` rounded half up: one sample every that many tuples.

    Raises ``UsageError`` unless ``0 < s <= 1``.

    >>> stride_of(0.001), stride_of(1), stride_of(0.3)
    (1000, 1, 3)
    """
    frac = sampling_fraction(s)
    return math.floor(1 / frac + Fraction(1, 2))


class StrideSampler:
    """Count-based stride sampling over batches: exactly ``floor(n*s)`` samples of n tuples.

    The j-th sample (j = 1, 2, ...) is taken at the tuple with 1-based cumulative index
    ``ceil(j/s)``, ``s`` read as the exact decimal it was written as. So after n tuples
    ``floor(n*s)`` samples have been taken, however the tuples were batched. When
    ``1/s`` is an integer this is exactly one sample every ``stride_of(s)`` tuples;
    otherwise the gaps alternate between ``floor(1/s)`` and ``ceil(1/s)`` so that the
    long-run fraction is ``s`` itself (rounding the stride would give ``1/stride_of(s)``).

    A batch of k tuples yields one sample per boundary crossed, usually 0 or 1, but
    several when ``k > 1/s``. ``advance`` returns the offsets inside the batch of the
    sampled tuples. Per-tuple quantities that can only be measured per batch (CPU time)
    are recorded as ``batch total / k`` once per sampled tuple, so every tuple has the
    same chance of being represented, and a reservoir mean estimates the mean over tuples
    (total CPU / total tuples), which is what the refinement's ``c * t`` needs.

    The countdown protocol: ``countdown`` is what the generated code decrements by
    ``len(batch)``; when the result is ``<= 0`` it calls ``advance(cd, len(batch))``,
    which re-arms ``countdown``. ``offer(k)`` does both, for tests and pure-Python callers.
    """

    __slots__ = ("_num", "_den", "seen", "taken", "countdown", "_seen_at_arm", "_cd")

    def __init__(self, s: float) -> None:
        frac = sampling_fraction(s)
        self._num = frac.numerator
        self._den = frac.denominator
        self.seen = 0
        """Tuples accounted for so far (exact at each ``advance``)."""
        self.taken = 0
        """Samples taken so far."""
        self._seen_at_arm = 0
        self.countdown = self._boundary(1)
        """Tuples left until the next sample, as last armed."""
        self._cd = self.countdown  # the running countdown of ``offer``

    def _boundary(self, j: int) -> int:
        """1-based cumulative index of the tuple taken as the j-th sample: ceil(j/s)."""
        return -((-j * self._den) // self._num)

    def total(self, cd: int) -> int:
        """Tuples seen in all, given the generated code's current countdown ``cd``."""
        return self._seen_at_arm + self.countdown - cd

    def advance(self, cd: int, k: int) -> range | list[int]:
        """Account for tuples up to ``cd``; return the in-batch offsets of the sampled tuples.

        ``cd`` is the countdown after the generated code subtracted the last batch's
        length ``k``. Returns an empty range if no boundary was crossed (``cd > 0``).
        """
        seen = self._seen_at_arm + self.countdown - cd
        num = self._num
        den = self._den
        taken = self.taken
        due = seen * num // den - taken
        self.seen = self._seen_at_arm = seen
        if due == 1:  # the common case, with _boundary inlined (it runs once per sample)
            self.taken = taken + 1
            self.countdown = -((-(taken + 2) * den) // num) - seen
            return [-((-(taken + 1) * den) // num) - seen + k - 1]
        first = taken + 1
        self.taken = taken = taken + max(due, 0)
        self.countdown = self._boundary(taken + 1) - seen
        if due <= 0:
            return range(0)
        start = seen - k  # cumulative index of the tuple before the batch
        # _boundary(j) - start - 1, inlined: this runs once per sample at high rates
        return [-((-j * den) // num) - start - 1 for j in range(first, first + due)]

    def offer(self, k: int) -> range | list[int]:
        """Reference path: take a batch of ``k`` tuples, return the sampled offsets."""
        self._cd -= k
        if self._cd > 0:
            self.seen += k
            return range(0)
        offsets = self.advance(self._cd, k)
        self._cd = self.countdown
        return offsets
