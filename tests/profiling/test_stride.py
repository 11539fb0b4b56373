"""Stride sampling: floor(n*s) samples of n tuples, whatever the batching."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadeopt.errors import UsageError
from spadeopt.profiling.stride import StrideSampler, stride_of

RATES = st.sampled_from([1, 0.5, 0.3, 0.25, 0.1, 0.037, 0.01, 0.001, 1 / 3, 2 / 3]) | st.floats(
    min_value=1e-4, max_value=1.0, exclude_min=True
)
BATCHES = st.lists(st.integers(min_value=1, max_value=3000), max_size=200)


def test_stride_of_rounds_one_over_s() -> None:
    assert stride_of(0.001) == 1000
    assert stride_of(0.01) == 100
    assert stride_of(1) == 1
    assert stride_of(0.3) == 3
    assert stride_of(0.4) == 3  # 2.5 rounds half up
    assert stride_of(0.7) == 1


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.0001, 2, float("nan"), float("inf"), True, "0.1"])
def test_stride_of_rejects_s_outside_0_1(bad: object) -> None:
    with pytest.raises(UsageError, match="sampling fraction s"):
        stride_of(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        StrideSampler(bad)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(s=RATES, batches=BATCHES)
def test_n_tuples_give_floor_n_s_samples(s: float, batches: list[int]) -> None:
    sampler = StrideSampler(s)
    taken = sum(len(sampler.offer(k)) for k in batches)
    n = sum(batches)
    assert abs(taken - math.floor(n * s)) <= 1
    # Exactly floor(n*s) for s read as the decimal it was written as.
    assert taken == math.floor(n * Fraction(repr(float(s))))
    assert sampler.taken == taken
    assert sampler.seen == n


@settings(max_examples=200, deadline=None)
@given(s=RATES, batches=BATCHES)
def test_sampled_offsets_are_the_boundary_tuples(s: float, batches: list[int]) -> None:
    """Sample j is the tuple with 1-based index ceil(j/s); offsets lie inside their batch."""
    frac = Fraction(repr(float(s)))
    sampler = StrideSampler(s)
    start = 0
    got = []
    for k in batches:
        offsets = sampler.offer(k)
        assert all(0 <= i < k for i in offsets)
        got.extend(start + i + 1 for i in offsets)
        start += k
    assert got == [math.ceil(j / frac) for j in range(1, len(got) + 1)]


@pytest.mark.parametrize("s", [1, 0.5, 0.1, 0.01, 0.001])
def test_integer_stride_samples_every_stride_tuples(s: float) -> None:
    stride = stride_of(s)
    sampler = StrideSampler(s)
    assert sampler.countdown == stride
    indices = []
    start = 0
    for k in [7, 1, 2500, 13, 999, 1, 1, 4000]:
        indices.extend(start + i for i in sampler.offer(k))
        start += k
    assert indices == list(range(stride - 1, start, stride))


def test_a_batch_crossing_several_boundaries_gives_one_sample_each() -> None:
    sampler = StrideSampler(0.1)
    assert list(sampler.offer(35)) == [9, 19, 29]
    assert list(sampler.offer(4)) == []
    assert list(sampler.offer(1)) == [0]  # tuple 40


@settings(max_examples=200, deadline=None)
@given(s=RATES, batches=BATCHES)
def test_generated_code_countdown_protocol_matches_reference(s: float, batches: list[int]) -> None:
    """The generated hot path only decrements; advance() re-arms and knows the exact count."""
    ref = StrideSampler(s)
    gen = StrideSampler(s)
    cd = gen.countdown
    for k in batches:
        cd -= k
        if cd <= 0:
            assert list(gen.advance(cd, k)) == list(ref.offer(k))
            cd = gen.countdown
            assert gen.seen == ref.seen
        else:
            assert not ref.offer(k)
    assert gen.total(cd) == sum(batches)
    assert gen.taken == ref.taken
