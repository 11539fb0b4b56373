"""Adding a connector takes one module (``sample_connector.py``, defined only here) plus
its docs: the build knows from the type alone that the source is live and when it is
unbounded, and a bounded one runs with real PEs under every fusion."""

from __future__ import annotations

import pytest

from spadeopt import App
from spadeopt.connectors.declared import is_live, is_unbounded
from spadeopt.kinds.source import unbounded
from tests.toolkit import sample_connector
from tests.toolkit.harness import run_fusions

MOD = sample_connector.__name__


def ticker_app(**kw) -> App:
    a = App("ticks")
    s = a.source("tick", "i:int, v:int", connector=sample_connector.ticker_source(50, step=3, **kw))
    a.sink("out", a.functor("f", s, filter="i % 2 == 0"))
    return a


def test_the_type_says_live_and_which_arguments_end_it():
    assert is_live(MOD, "Ticker") and not is_live(MOD, "ticker_source")  # a function is no source type
    assert is_unbounded(MOD, "Ticker", {"until": None, "count": None})
    assert not is_unbounded(MOD, "Ticker", {"until": "done"}) and not is_unbounded(MOD, "Ticker", {"count": 5})
    assert unbounded(ticker_app().build().op("tick")) and not unbounded(ticker_app(until="done").build().op("tick"))


def test_its_declaration_is_checked_at_build_time():
    with pytest.raises(Exception, match="until must be None \\(unbounded\\) or 'done'"):
        ticker_app(until="later").build()


@pytest.mark.parametrize("fusion", ["none", "all"])
def test_a_bounded_ticker_runs_under_every_fusion(tmp_path, fusion):
    got = run_fusions(ticker_app(until="done"), tmp_path, fusions=(fusion,))[fusion]["out"]
    assert got == [{"i": i, "v": 3 * i} for i in range(0, 50, 2)]
