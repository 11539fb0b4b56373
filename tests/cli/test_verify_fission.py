"""What ``--verify-fission`` refuses before anything runs (no Spark)."""

from __future__ import annotations

import pytest

from spadeopt.runtime.merges import read_splits
from spadeopt.runtime.pe import PERuntime
from tests.cli.clitools import cli


def test_a_live_source_cannot_be_verified(tmp_path):
    r = cli("run", "apps/orders.py", "--fusion", "none", "--verify-fission", "100", "--build-dir", tmp_path / "b")
    assert r.returncode == 2
    assert "read a live stream" in r.stderr and "verify on a recorded copy" in r.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("n", ["0", "-3"])
def test_the_record_count_must_be_positive(n, tmp_path):
    r = cli("run", "tests/apps/declared_state.py", "--verify-fission", n, "--build-dir", tmp_path / "b")
    assert r.returncode == 2 and "--verify-fission needs a positive number of records" in r.stderr
    assert not (tmp_path / "b").exists()


def _numbered(n, size, part, parts):
    for s in range(part, -(-n // size), parts):
        yield [(i,) for i in range(s * size, min(n, (s + 1) * size))]


@pytest.mark.parametrize("limit", [1, 6, 7, 8, 20, 1000])
def test_a_limited_splittable_source_reads_the_same_records_at_every_width(limit):
    """The first ``limit`` records, rounded up to whole splits, however many copies read them."""
    n, size = 45, 7
    want = list(range(min(n, -(-limit // size) * size)))
    for parts in (1, 2, 3, 4):
        got = []
        for part in range(parts):
            rt = PERuntime.__new__(PERuntime)
            rt.source_limit, rt._split_sources = limit, set()
            got += [t[0] for t in rt.read_splits("s", _numbered(n, size, part, parts), part, parts, size, False)]
        assert sorted(got) == want, parts
    assert list(read_splits("s", _numbered(n, size, 0, 1), 0, 1, size, False))[:3] == [(0,), (1,), (2,)]
