"""The connector contract's own classes (``spadeopt.connectors.contract``)."""

from __future__ import annotations

import pytest

from spadeopt.connectors.contract import LimitedSource, RecordSource, Source


class Lines(RecordSource):
    """A file-like replay whose generator notes when it was closed."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.closed = n, False

    def records(self):
        try:
            for i in range(self.n):
                yield (i,)
        finally:
            self.closed = True


def test_a_limited_source_ends_after_its_limit_and_closes_the_connector_it_wraps():
    inner = Lines(1000)
    src = LimitedSource(inner, 700)
    src.open()
    got = []
    while (batch := src.read(512)) is not None:
        got += batch
    assert got == [(i,) for i in range(700)]
    assert src.position() == 700 == inner.position()
    assert not inner.closed  # its generator is still open until the PE closes the source
    src.close()
    assert inner.closed


def test_a_limit_larger_than_the_source_gives_the_whole_source():
    src = LimitedSource(Lines(5), 700)
    assert src.read(512) == [(i,) for i in range(5)] and src.read(512) is None


def test_a_live_source_is_not_limited_by_a_count():
    class Live(Source):
        live = True

    with pytest.raises(ValueError, match="live source"):
        LimitedSource(Live(), 3)
