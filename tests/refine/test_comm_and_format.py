"""The comm-cost mapping v, the profile file format and `spadeopt show` (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spadeopt.errors import ProfileError
from spadeopt.optimize.problem import CommModel
from spadeopt.refine.calibrate import Point, cpu_score, grid_from
from spadeopt.refine.comm import CommCost, monotone_grid
from spadeopt.refine.profile import Profile
from spadeopt.refine.show import format_profile
from tests.cli.clitools import cli
from tests.refine.test_estimate import fused_chain, profile

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted((ROOT / "profiles" / "calibration").glob("*.json"))

RATES = [0.0, 1e3, 1e4, 1e5]
SIZES = [16.0, 256.0, 4096.0]


def linear_grid(a=1e-6, b=1e-9) -> list[list[float]]:
    return [[r * (a + b * s) for s in SIZES] for r in RATES]


def test_bilinear_lookup_is_exact_for_a_linear_cost_and_extends_monotonically():
    v = CommCost(RATES, SIZES, linear_grid(), score=100.0)
    assert isinstance(v, CommModel)
    for r, s in [(500, 16), (5e3, 100), (7e4, 4000), (1e5, 4096)]:
        assert v.cost(r, s) == pytest.approx(r * (1e-6 + 1e-9 * s))
    assert v.cost(0, 100) == 0.0
    assert v.cost(4e5, 256) == pytest.approx(4 * v.cost(1e5, 256))  # above the grid: proportional
    assert v.cost(1e4, 8) == v.cost(1e4, 16)  # below the smallest size: clamped
    assert v.cost(1e4, 8192) == pytest.approx(1e4 * (1e-6 + 1e-9 * 8192))  # last size segment extended


def test_scaling_by_the_cpu_score_ratio():
    v = CommCost(RATES, SIZES, linear_grid(), score=100.0)
    assert v.scaled_to(200.0).cost(1e4, 256) == pytest.approx(v.cost(1e4, 256) / 2)
    assert v.scaled_to(50.0).cost(1e4, 256) == pytest.approx(v.cost(1e4, 256) * 2)


@given(st.lists(st.lists(st.floats(0, 1), min_size=3, max_size=3), min_size=4, max_size=4),
       st.floats(0, 2e5), st.floats(0, 2e5), st.floats(0, 1e4), st.floats(0, 1e4))
def test_v_is_monotone_in_rate_and_size_for_any_measured_grid(raw, r1, r2, s1, s2):
    raw[0] = [0.0, 0.0, 0.0]
    v = CommCost(RATES, SIZES, monotone_grid(raw), score=1.0)
    lo_r, hi_r = sorted((r1, r2))
    lo_s, hi_s = sorted((s1, s2))
    assert v.cost(lo_r, lo_s) <= v.cost(hi_r, lo_s) + 1e-12
    assert v.cost(lo_r, lo_s) <= v.cost(lo_r, hi_s) + 1e-12
    assert np.all(np.asarray(monotone_grid(raw)) >= np.asarray(raw))


def test_grid_from_points_takes_medians_and_the_fastest_run_beyond_the_link():
    def pt(target, size, rate, per_tuple):
        n = 1000
        return Point(target, size, rate, n, n / rate, 4 * n * per_tuple, 0.0, size)

    points = [pt(1e3, 16, 1e3, 2e-6), pt(1e3, 16, 1e3, 9e-6), pt(1e3, 16, 1e3, 1e-6),  # median 2e-6
              pt(1e4, 16, 1e4, 1e-6), pt(1e3, 4096, 1e3, 3e-6),
              pt(1e4, 4096, 5e3, 4e-6)]  # 4096 B: 10k/s not reached, 3e4 not tried
    grid = grid_from(points, (1000, 10000, 30000), (16, 4096))
    assert grid[0] == [0.0, 0.0]
    assert grid[1] == pytest.approx([1e3 * 2e-6, 1e3 * 3e-6])
    # beyond the link: the per-tuple cost of the fastest run of that size, times the rate
    assert grid[2] == pytest.approx([1e4 * 1e-6, 1e4 * 4e-6])
    assert grid[3] == pytest.approx([3e4 * 1e-6, 3e4 * 4e-6])


def write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def calibration_doc(**over):
    doc = {"schema_version": 1, "kind": "spadeopt-calibration", "host": "h", "cpu_model": "m", "cores": 2,
           "cpu_score": {"value": 10.0}, "grid": {"rates": RATES, "sizes": SIZES, "v": linear_grid()}}
    doc.update(over)
    return doc


@pytest.mark.parametrize("content,expect", [
    (None, "no such calibration file"),
    ("{\"schema_version\": 1, \"kind\": ", "not valid JSON"),
    (calibration_doc(schema_version=7), "schema_version 7 is not supported"),
    (calibration_doc(kind="x"), "not a spadeopt calibration"),
    (calibration_doc(grid={"rates": RATES, "sizes": SIZES, "v": [[0, 0, 0]]}), "rows"),
    (calibration_doc(grid={"rates": RATES, "sizes": SIZES, "v": linear_grid()[::-1]}), "0 at rate 0"),
    (calibration_doc(grid={"rates": RATES, "sizes": SIZES,
                           "v": [[0, 0, 0], [1, 0.5, 2], [2, 2, 2], [3, 3, 3]]}), "non-decreasing"),
    (calibration_doc(cpu_score={"value": -1}), "CPU score"),
])
def test_bad_calibration_files_are_named(tmp_path, content, expect):
    path = tmp_path / "cal.json"
    if content is not None:
        write(path, content)
    with pytest.raises(ProfileError, match=expect) as err:
        CommCost.load(path)
    assert str(path) in str(err.value)


def test_committed_calibrations_load_and_are_monotone():
    assert COMMITTED, "profiles/calibration/ holds no calibration"
    for path in COMMITTED:
        v = CommCost.load(path)
        doc = json.loads(path.read_text())
        assert doc["quick"] is False, path
        g = np.asarray(doc["grid"]["v"])
        assert np.all(np.diff(g, axis=0) >= 0) and np.all(np.diff(g, axis=1) >= 0), path
        assert 0 < v.cost(1e5, 100) < v.cost(1e6, 100) <= v.cost(1e6, 1000), path


def test_cpu_score_is_positive_and_repeatable():
    a, b = cpu_score(units=10, repeat=3), cpu_score(units=10, repeat=3)
    assert a > 0 and 0.5 < a / b < 2


# ---- profile.json ------------------------------------------------------------------------
def test_profile_round_trip_and_optimizer_view(tmp_path):
    p = profile(fused_chain())
    path = p.save(tmp_path / "sub" / "profile.json")
    assert not list(path.parent.glob(".*tmp"))
    q = Profile.load_file(path)
    assert q.to_json() == p.to_json()
    assert q.load == pytest.approx({"a": 0.005, "b": 0.005, "sink": 0.00005, "src": 0.002})
    assert ("a", "b", pytest.approx(500), 40) in q.link_tuples()
    text = format_profile(q)
    lines = text.splitlines()
    order = [ln.split()[0] for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("operator "))) + 2:]
             if ln and ln.split()[0] in q.operators]
    assert order == ["a", "b", "src", "sink"]  # by u, descending (ties by name)
    assert "src.out -> a.in" in text


@pytest.mark.parametrize("mutate,expect", [
    (lambda d: d.update(schema_version=99), "schema_version 99 is not supported"),
    (lambda d: d.update(kind="plan"), "not a spadeopt profile"),
    (lambda d: d["operators"]["a"].pop("u"), "'operators.a.u' is missing"),
    (lambda d: d["operators"]["a"].update(u=-1), "'operators.a.u' must be"),
    (lambda d: d["links"].append({"src": "zz.out", "dst": "a.in", "rate": 1, "size": 1}), "zz.out"),
])
def test_bad_profiles_are_refused_with_the_file_named(tmp_path, mutate, expect):
    doc = profile(fused_chain()).to_json()
    mutate(doc)
    path = write(tmp_path / "p.json", doc)
    with pytest.raises(ProfileError, match=expect) as err:
        Profile.load_file(path)
    assert str(path) in str(err.value)


def test_show_cli(tmp_path):
    path = profile(fused_chain()).save(tmp_path / "p.json")
    proc = cli("show", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "operators by CPU fraction u" in proc.stdout and "links by tuple rate" in proc.stdout
    doc = json.loads(path.read_text())
    doc["schema_version"] = 2
    path.write_text(json.dumps(doc))
    proc = cli("show", str(path))
    assert proc.returncode == 2 and str(path) in proc.stderr and "schema_version 2" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = cli("show", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "missing.json" in proc.stderr


def test_show_top_keeps_the_heaviest_and_the_source_rate_is_the_sources_output():
    q = profile(fused_chain())
    text = format_profile(q, top=2)
    assert "and 2 more operator(s)" in text and "sink " not in text
    assert q.source_rate == pytest.approx(sum(q.outputs[p].rate for p in q.operators["src"].outputs))
    assert q.source_rate > 0
