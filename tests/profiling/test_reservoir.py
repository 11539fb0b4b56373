"""Reservoir sampling (Algorithm R, probability S/(i+1)): bounded, and uniform."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from spadeopt.errors import UsageError
from spadeopt.profiling import PointKey, Profiler, Reservoir


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 50), n=st.integers(0, 500), seed=st.integers(0, 2**32))
def test_reservoir_never_holds_more_than_s(size: int, n: int, seed: int) -> None:
    res = Reservoir(size, random.Random(seed))
    for v in range(n):
        res.add(v)
        assert len(res.values) <= size
    assert len(res.values) == min(n, size)
    assert res.seen == n
    assert len(set(res.values)) == len(res.values)
    assert set(res.values) <= set(range(n))


@given(size=st.integers(1, 50), seed=st.integers(0, 2**32))
def test_first_s_values_are_all_kept(size: int, seed: int) -> None:
    res = Reservoir(size, random.Random(seed))
    for v in range(size):
        res.add(v)
    assert res.values == list(range(size))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, None])
def test_reservoir_size_below_one_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="reservoir size S"):
        Reservoir(bad, random.Random(0))  # type: ignore[arg-type]


# --- uniformity --------------------------------------------------------------------------

S, N, RUNS = 4, 20, 4000


def _algorithm_r(size: int, n: int, rng: random.Random) -> list[int]:
    res = Reservoir(size, rng)
    for v in range(n):
        res.add(v)
    return res.values


def _paper_literal(size: int, n: int, rng: random.Random) -> list[int]:
    """The paper's printed rule: for 0-based i >= S, keep with probability S/i."""
    values: list[int] = []
    for i in range(n):
        if i < size:
            values.append(i)
        elif rng.random() < size / i:
            values[rng.randrange(size)] = i
    return values


def _keep_last_slot(size: int, n: int, rng: random.Random) -> list[int]:
    """Right probability, but always evicts the last slot: early values stick."""
    values: list[int] = []
    for i in range(n):
        if i < size:
            values.append(i)
        elif rng.randrange(i + 1) < size:
            values[-1] = i
    return values


def _uniformity_p_value(sample: Callable[[int, int, random.Random], list[int]]) -> float:
    """Chi-square p-value of 'every value is kept equally often' over seeded runs.

    Each run keeps exactly S of N values, so cell counts are negatively correlated and the
    statistic is a little smaller than chi-square(N-1) under uniformity: conservative.
    """
    rng = random.Random(20091102)
    counts = [0] * N
    for _ in range(RUNS):
        for v in sample(S, N, rng):
            counts[v] += 1
    expected = [RUNS * S / N] * N
    return float(stats.chisquare(counts, expected).pvalue)


def _point_reservoir(size: int, n: int, rng: random.Random) -> list[int]:
    """A recorder's own reservoir (one record per sampled tuple, Algorithm R inlined in
    ``MetricRecorder._record``): value v is the tuple whose msgpack size is v + 1."""
    rec = Profiler("pe_1", sample_rate=1, reservoir_size=size, seed=rng.getrandbits(32)).point(
        PointKey("B", "out0", "out")
    )
    cd = rec.countdown
    for v in range(n):
        cd = rec.sample_submit(cd - 1, ["x" * v], 1)
    return [int(value) - 1 for _, metric, (_, value) in rec.samples() if metric == "size"]


def test_reservoir_contents_are_uniform() -> None:
    assert _uniformity_p_value(_algorithm_r) > 0.01


def test_point_reservoir_contents_are_uniform() -> None:
    assert _uniformity_p_value(_point_reservoir) > 0.01


@pytest.mark.parametrize("biased", [_paper_literal, _keep_last_slot])
def test_uniformity_test_rejects_biased_reservoirs(
    biased: Callable[[int, int, random.Random], list[int]],
) -> None:
    assert _uniformity_p_value(biased) < 1e-6
