"""``fusion-tradeoff``'s findings are read off the measured sweeps, not asserted."""

from __future__ import annotations

from spadeopt.bench.tradeoff import findings


def _doc(chain_length, computation):
    return {"sweeps": {
        "chain_length": {"x": [1, 2, 4], "throughput": chain_length},
        "computation": {"x": [0, 20, 200], "throughput": computation},
    }}


def test_findings_follow_the_numbers():
    doc = _doc({"1": [5.0, 3.0, 2.0], "2": [None, 4.0, 3.0], "4": [None, None, 6.0]},
               {"1": [1.0, 3.0, 9.0], "2": [2.0, 5.0, 8.0], "16": [10.0, 4.0, 3.0]})
    f = findings(doc)
    assert f["fig6_fall_fastest_at"] == [1, 2, 4] and f["fig6_fall_always_fastest"]
    assert f["fig8_fall_wins_without_computation"]
    assert f["fig8_partial_overtakes_at"] == 20
    assert [r["best_partial_k"] for r in f["fig8"]] == [2, 2, 1]


def test_findings_say_so_when_the_paper_is_not_reproduced():
    doc = _doc({"1": [5.0, 6.0, 7.0], "2": [None, 4.0, 3.0], "4": [None, None, 6.0]},
               {"1": [11.0, 3.0, 2.0], "16": [10.0, 4.0, 3.0]})
    f = findings(doc)
    assert f["fig6_fall_fastest_at"] == [1] and not f["fig6_fall_always_fastest"]
    assert not f["fig8_fall_wins_without_computation"] and f["fig8_partial_overtakes_at"] is None
