"""FATM end to end: profile -> refine -> optimize -> run, legality, explain, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spadeopt import api
from spadeopt.errors import OptimizeError
from spadeopt.optimize.fatm import OperatorProfile, fuse_auto, unfusable_pairs
from spadeopt.optimize.problem import LinearCommModel
from spadeopt.plan.explain import explain_text
from spadeopt.plan.plan import check_plan
from tests.cli.clitools import cli

ROOT = Path(__file__).resolve().parents[2]


def _synthetic(graph, u: float, rate: float) -> OperatorProfile:
    links = tuple((s.src.op, s.dst.op, rate, 100.0) for s in graph.streams)
    return OperatorProfile(graph.name, graph.fingerprint, {op.name: u for op in graph.operators}, links)


def test_fatm_plan_goes_through_the_same_plan_code_and_honours_annotations():
    graph, _ = api.load_graph("apps/chain.py", {"n": "6"})
    auto = fuse_auto(graph, _synthetic(graph, 0.01, 10_000), LinearCommModel(2e-6), nodes=1, cores=2)
    assert auto.plan.strategy == "auto"
    check_plan(auto.plan, graph)  # colocation pairs of the chain app hold
    assert len(auto.plan.pes) == 1, "near-free forwarders fuse into one PE"
    heavy = fuse_auto(graph, _synthetic(graph, 0.3, 10_000), LinearCommModel(2e-6), nodes=1, cores=4)
    assert all(len(pe.operators) <= 2 for pe in heavy.plan.pes), "heavy operators stay (nearly) apart"
    assert heavy.explain["pes"] and heavy.explain["not_merged"]
    assert any("MaxFrac" in r["why"] for r in heavy.explain["not_merged"])


def test_feedback_loop_into_a_tuple_generating_port_is_never_fused():
    graph, _ = api.load_graph("tests/apps/loop.py")
    assert frozenset({"tag", "echo"}) in unfusable_pairs(graph)
    auto = fuse_auto(graph, _synthetic(graph, 0.001, 1000), LinearCommModel(1e-5), nodes=1, cores=2)
    pe_of = auto.plan.pe_of
    assert pe_of["tag"] != pe_of["echo"]


def test_profile_of_another_graph_is_refused():
    graph, _ = api.load_graph("apps/chain.py", {"n": "6"})
    other, _ = api.load_graph("apps/chain.py", {"n": "7"})
    with pytest.raises(OptimizeError, match="graph"):
        fuse_auto(graph, _synthetic(other, 0.01, 100), LinearCommModel(1e-6), 1, 2)


@pytest.fixture(scope="module")
def chain_profile(tmp_path_factory):
    """A real profile of the chain app: profiled unfused on Spark, refined on Spark."""
    from spadeopt.refine.job import refine

    d = tmp_path_factory.mktemp("fatm")
    params = {"n": "6", "work": "40", "tuples": "40000"}
    api.profile("apps/chain.py", d / "run", "none", params, sample_rate=0.02, production_probe=False)
    refine([d / "run"], d / "profile.json")
    return d, params


def _calibration(path: Path, per_tuple_s: float = 2e-7) -> Path:
    from spadeopt.profiling import host_info

    rates, sizes = [0.0, 1e4, 1e6], [16.0, 1024.0, 65536.0]
    v = [[r * per_tuple_s * (1 + s / 4096) for s in sizes] for r in rates]
    path.write_text(json.dumps({"schema_version": 1, "kind": "spadeopt-calibration", "host": "test",
                                "cpu_model": host_info().cpu_model, "grid": {"rates": rates, "sizes": sizes, "v": v},
                                "cpu_score": {"value": 1.0}}))
    return path


def _cli(*args: str):
    return cli(*args)


@pytest.mark.spark
def test_optimize_explain_and_run_the_build(chain_profile, tmp_path):
    d, params = chain_profile
    cal = _calibration(tmp_path / "cal.json")
    # cores=8: this checks the path, not capacity (measured loads vary with the machine's speed)
    build, explain = api.optimize("apps/chain.py", d / "profile.json", tmp_path / "auto", cal, cores=8, exact=True)
    assert (build.directory / "explain.json").is_file() and build.plan.strategy == "auto"
    # where FATM widens chain's region on 8 cores, the physical graph outgrows what the exact
    # optimizer enumerates: explain says so instead of failing the optimize
    if sum(len(pe.operators) for pe in build.plan.pes) > 12:  # exact_fuse's default max_units
        assert "exact optimum: skipped" in explain_text(build.directory) and explain["exact"]["skipped"]
    else:
        assert 0 <= explain["exact"]["gap"] <= 1
    narrow, doc = api.optimize("apps/chain.py", d / "profile.json", tmp_path / "w1", cal, cores=8, exact=True,
                               fission=False)
    assert 0 <= doc["exact"]["gap"] <= 1 and "exact optimum: objective" in explain_text(narrow.directory)
    text = explain_text(build.directory)
    assert "OperLoad" in text and "EffUtil" in text and "objective" in text
    res = api.run(str(build.directory))
    assert res.tuples == 40000 and res.sinks == {"sink": 40000}
    proc = _cli("explain", str(build.directory))
    assert proc.returncode == 0 and "pe0" in proc.stdout


@pytest.mark.parametrize("extra,expect", [
    (["--max-frac", "0"], "--max-frac"),
    (["--min-util", "1.5"], "--min-util"),
    (["--nodes", "1", "--cores", "1", "--max-frac", "5", "--rate", "profiled"], None),
    (["--rate", "fast"], "--rate"),
])
@pytest.mark.spark
def test_optimize_bad_input_exits_2(chain_profile, tmp_path, extra, expect):
    d, _ = chain_profile
    cal = _calibration(tmp_path / "cal.json", per_tuple_s=4e-4 if expect is None else 2e-7)
    proc = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "--calibration", str(cal),
                *extra, "-o", str(tmp_path / "b"))
    if expect is None:  # a huge comm cost: the load at the profiled rate cannot fit on 1 node x 1 core
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    else:
        assert proc.returncode == 2 and expect in proc.stderr, proc.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.spark
def test_optimize_refuses_foreign_profile_and_bad_calibration(chain_profile, tmp_path):
    d, _ = chain_profile
    proc = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "-p", "n=7",
                "--calibration", str(_calibration(tmp_path / "c.json")), "-o", str(tmp_path / "b"))
    assert proc.returncode == 2 and "graph" in proc.stderr, proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "--calibration", str(bad),
                "-o", str(tmp_path / "b"))
    assert proc.returncode == 2 and "bad.json" in proc.stderr, proc.stderr
    missing = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "--calibration",
                   str(tmp_path / "nope.json"), "-o", str(tmp_path / "b"))
    assert missing.returncode == 2 and "nope.json" in missing.stderr


@pytest.mark.spark
def test_a_profile_plans_a_longer_run_and_warns_on_other_source_arguments(chain_profile, tmp_path):
    """A profile of 40,000 tuples plans a run of 4 M (only the generator's length differs:
    silent); another source argument (the payload size) plans with a warning; another
    operator graph (n=7 forwarders) is still refused."""
    d, _ = chain_profile
    cal = str(_calibration(tmp_path / "c.json"))
    longer = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "-p", "tuples=4000000",
                  "--calibration", cal, "-o", str(tmp_path / "long"))
    assert longer.returncode == 0 and "warning" not in longer.stderr, longer.stderr
    doc = json.loads((tmp_path / "long" / "explain.json").read_text())
    assert doc["inputs"]["params"]["tuples"] == 4000000 and "profile_warnings" not in doc
    other = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "-p", "size=64",
                 "--calibration", cal, "-o", str(tmp_path / "size"))
    assert other.returncode == 0, other.stderr
    assert "warning: source 'src': size is 64 here but 100 in the profiled run" in other.stderr, other.stderr
    assert json.loads((tmp_path / "size" / "explain.json").read_text())["profile_warnings"]
    shape = _cli("optimize", "apps/chain.py", "--profile", str(d / "profile.json"), "-p", "n=7",
                 "--calibration", cal, "-o", str(tmp_path / "n7"))
    assert shape.returncode == 2 and "another operator graph" in shape.stderr and not (tmp_path / "n7").exists()


@pytest.mark.spark
def test_a_profile_of_another_app_names_both_apps(chain_profile, tmp_path):
    d, _ = chain_profile
    proc = _cli("optimize", "apps/outlier.py", "--profile", str(d / "profile.json"),
                "--calibration", str(_calibration(tmp_path / "c.json")), "-o", str(tmp_path / "b"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "profile of app 'chain'" in proc.stderr and "not of app 'outlier'" in proc.stderr, proc.stderr
    assert "unknown parameter" not in proc.stderr and not (tmp_path / "b").exists()


@pytest.mark.spark
def test_a_very_large_cluster_still_plans(chain_profile, tmp_path):
    """The rate search has no arbitrary floor: on 100,000 nodes the bound is one operator's MaxFrac."""
    d, _ = chain_profile
    build, explain = api.optimize("apps/chain.py", d / "profile.json", tmp_path / "big",
                                  _calibration(tmp_path / "c.json"), nodes=100_000, cores=2)
    assert explain["rate"]["planned"] > 0 and build.plan.nodes == 100_000


@pytest.mark.spark
def test_the_same_profile_and_calibration_give_the_same_plan(chain_profile, tmp_path, monkeypatch):
    """A calibration from another CPU is rescaled by this host's score, measured once and
    kept; explain.json records it and every other input that decided the plan."""
    d, _ = chain_profile
    monkeypatch.setenv("SPADEOPT_CACHE", str(tmp_path / "cache"))
    cal = _calibration(tmp_path / "cal.json")
    doc = json.loads(cal.read_text())
    cal.write_text(json.dumps({**doc, "cpu_model": "another CPU"}))
    plans, scalings = [], []
    for i in range(3):
        build, explain = api.optimize("apps/chain.py", d / "profile.json", tmp_path / f"b{i}", cal)
        plans.append((build.directory / "plan.json").read_text())
        scalings.append(explain["inputs"]["comm_scaling"])
        assert explain["inputs"]["profile"]["sha256"] and explain["inputs"]["calibration"]["sha256"]
    assert plans[0] == plans[1] == plans[2]
    assert scalings[0]["host_score"] == scalings[1]["host_score"] == scalings[2]["host_score"] > 0
    assert "measured now" in scalings[0]["host_score_source"] and "kept in" in scalings[1]["host_score_source"]
    _, given = api.optimize("apps/chain.py", d / "profile.json", tmp_path / "g", cal, cpu_score=2.0)
    assert given["inputs"]["comm_scaling"]["host_score"] == 2.0
    assert given["inputs"]["comm_scaling"]["scale"] == 0.5  # the test calibration's score is 1.0
