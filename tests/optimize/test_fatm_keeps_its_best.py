"""FATM returns the best plan under its own model: resuming the chosen candidate's rate
search never trades it for a plan the prediction ranks lower (fatm._resumed), and the
manual fusion's shape (split with the producer, merge with the consumer) is among the
channel-symmetric candidates (symmetric.outside_ends).

The profile is keyed_window's from a 2-core compare run (2026-11-28): there the resumed
search turned the chosen 3-PE plan (predicted 137 k/s) into a 5-PE one (125 k/s), below
FMAN's plan under the same model (132 k/s), and FMAN measured 1.11x FATM."""

from __future__ import annotations

import json
from pathlib import Path

from spadeopt import api
from spadeopt.optimize.fatm_fit import collapse_fraction, fit_production
from spadeopt.optimize.fatm_physical import predict_physical
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.plan import Plan
from spadeopt.refine.comm import CommCost
from spadeopt.refine.profile import Profile

HERE = Path(__file__).parent
PROFILE = HERE / "data" / "keyed_window_profile.json"
CALIBRATION = Path("profiles/calibration/vm.json")


def test_fatm_keeps_the_candidate_its_model_ranks_best(tmp_path):
    score = json.loads(CALIBRATION.read_text())["cpu_score"]["value"]  # no MIPS scaling: the same numbers anywhere
    api.optimize("apps/keyed_window.py", PROFILE, tmp_path / "b", CALIBRATION, cores=2, cpu_score=score)
    explain = json.loads((tmp_path / "b" / "explain.json").read_text())
    got = explain["rate"]["predicted"]
    tried = max(t["predicted"] for t in explain["max_frac_search"] if t["predicted"] is not None)
    assert got >= tried / 1.03  # the ladder's tie window (2 %) at most below its best rung
    assert explain["fission"]["kept_scored"]["resumed"] < got  # the resumed plan was the worse one here

    # and FATM's plan ranks at least as high as FMAN's and FALL's under the same model
    graph, _ = api.load_graph("apps/keyed_window.py", {})
    opprof, _ = api._profile_for_run("apps/keyed_window.py", Profile.load_file(PROFILE), graph)
    comm = CommCost.for_this_host(CALIBRATION, score)
    model = fit_production(graph, opprof, api.perf_model(CALIBRATION, comm.scale))
    frac = collapse_fraction(graph, opprof, model)
    mine = predict_physical(graph, opprof, Plan.load(tmp_path / "b" / "plan.json"), comm, model, frac).rate
    assert mine == got
    for other in ("manual", "all"):
        theirs = predict_physical(graph, opprof, plan_for(graph, other, 1, 2), comm, model, frac).rate
        assert mine >= theirs, other
