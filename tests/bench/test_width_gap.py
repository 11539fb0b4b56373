"""`bench optimizer` part (c): the width heuristic against the exhaustive width search."""

from __future__ import annotations

import pytest

from spadeopt.bench.width_gap import width_gap_study


def test_width_gap_compares_ascent_with_every_vector():
    doc = width_gap_study(n_graphs=2, seed=7, nodes=1, cores=2)
    assert doc["summary"]["graphs"] == 2
    for case in doc["cases"]:
        assert case["vectors_exhaustive"] == 2 ** case["regions"]  # widths 1..2 per region
        assert 1 <= case["vectors_ascent"] <= case["vectors_exhaustive"]
        assert case["exhaustive_rate"] >= case["ascent_rate"] > 0
        assert case["gap"] == pytest.approx(1 - case["ascent_rate"] / case["exhaustive_rate"], abs=1e-12)
    assert doc["summary"]["max"] == max(c["gap"] for c in doc["cases"])
