"""Learning link costs from bench scale runs: the fit recovers known factors, refuses
runs that show nothing, and the learned calibration scales the model's link, split and
merge costs (and nothing else)."""

from __future__ import annotations

import pytest

from spadeopt.bench.learn_links import Sample, fit, learned
from spadeopt.errors import UsageError
from spadeopt.optimize.predict import DEFAULT_MODEL, model_from_calibration


def _samples(a: float, b: float) -> list[Sample]:
    parts = [(1.0, 0.1), (0.5, 0.4), (0.2, 0.8), (0.9, 0.0)]
    return [Sample("x:FATM-16", f"pe{i}", o, c, a * o + b * c) for i, (o, c) in enumerate(parts)]


def test_the_fit_recovers_the_factors_the_runs_were_made_with():
    got = fit(_samples(1.2, 2.5))
    assert got.oper == pytest.approx(1.2) and got.link == pytest.approx(2.5) and got.pes == 4
    assert got.rms_after < 1e-9 < got.rms_before


def test_a_negative_factor_is_not_fitted():
    got = fit([Sample("x", "a", 1.0, 1.0, 0.5), Sample("x", "b", 1.0, 2.0, 0.2)])  # more links, less CPU
    assert got.oper >= 0 and got.link >= 0


def test_runs_with_no_links_teach_nothing():
    with pytest.raises(UsageError, match="at least 2 measured PEs"):
        fit(_samples(1.0, 1.0)[:1])
    with pytest.raises(UsageError, match="no PE whose links"):
        fit([Sample("x", "a", 1.0, 0.0, 0.5), Sample("x", "b", 2.0, 0.0, 3.0), Sample("x", "c", 1.0, 0.0, -1.0)])


def test_the_learned_calibration_scales_links_splits_and_merges_only():
    cal = {"perf_model": {"comm_scale": 1.5, "oper_scale": 0.9}}
    doc = learned(cal, fit(_samples(1.1, 2.0)), ["out/scale16/peer"])
    model = model_from_calibration(doc, "learned")
    assert model.comm_scale == pytest.approx(3.0) and model.oper_scale == 0.9
    assert model.merge_dynamic_s == pytest.approx(2.0 * DEFAULT_MODEL.merge_dynamic_s)
    assert doc["learned_links"]["from"] == ["out/scale16/peer"] and cal["perf_model"]["comm_scale"] == 1.5
