"""A source's tuples are cut into batches the same way whatever the iterable: a list or
tuple by slicing, anything else through islice; counts and fresh lists either way."""

from __future__ import annotations

import pytest

from spadeopt.runtime.pe import PERuntime


@pytest.mark.parametrize("kind", [list, tuple, iter])
def test_batches_are_the_same_for_lists_tuples_and_iterators(kind) -> None:
    rt = PERuntime("pe0", ("src",), "pe0.py")
    rt.batch_size = 4
    data = [(i, str(i)) for i in range(10)]
    batches = list(rt.source_batches("src", kind(data)))
    assert batches == [data[0:4], data[4:8], data[8:10]]
    assert all(type(b) is list for b in batches)
    assert rt.source_stats["src"][0] == 10
    batches[0].append("pulse")  # consumers may append to a batch: never the source's list
    assert len(data) == 10 and data[3] == (3, "3")


def test_an_empty_source_gives_no_batch() -> None:
    rt = PERuntime("pe0", ("src",), "pe0.py")
    assert list(rt.source_batches("src", [])) == []
    assert list(rt.source_batches("src2", iter(()))) == []
