"""Sample groups (issue 14, round 8): a functor without a filter counts what its input's
publisher counts, so it follows that port's countdown instead of keeping its own.

The claim is that nothing a profile says changes: each follower samples the same tuples
(same counts, same sizes, same totals) as a countdown of its own would have, with its
own times. The tests run real instrumented builds of the same app in this process twice,
with groups and without (``sample_groups=False``), and compare every point's samples.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from spadeopt.api import load_graph
from spadeopt.codegen.lower import lower_op
from spadeopt.codegen.pe_spec import links_of, pe_spec
from spadeopt.codegen.render import generate
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.fission import physical_graph
from spadeopt.profiling import Profiler
from spadeopt.runtime import loader
from spadeopt.runtime.loader import APP_ENV
from spadeopt.runtime.pe import PERuntime

APP = "tests/apps/collapse.py"
SIZES = "tests/apps/sizes.py"


def _plan(graph):
    return dataclasses.replace(plan_for(graph, "all"), instrumented=True, collapse=False)


def test_functors_without_filters_follow_their_publisher() -> None:
    graph, _ = load_graph(APP, {})
    plan = _plan(graph)
    physical = physical_graph(graph, plan.regions)
    (pe,) = plan.pes
    spec = pe_spec(physical, plan, pe, links_of(plan, physical), lower_op)
    follows = {o.op.name: o.follows for o in spec.ops if o.follow}
    # 'clean' and 'f2' filter: they lead; everything downstream of a leader without a
    # filter follows the leader at the head of its chain (not its direct publisher)
    assert follows == {"calc": "clean.out", "ident": "clean.out", "use": "clean.out",
                       "tap": "clean.out", "b2": "clean.out", "f1": "src.out", "f3": "f2.out",
                       "w1": "src.out", "w2": "src.out"}
    leads = {o.op.name: o.leads for o in spec.ops if o.leads}
    assert leads == {"src": {"out"}, "clean": {"out"}, "f2": {"out"}}
    off = pe_spec(physical, plan, pe, links_of(plan, physical), lower_op, sample_groups=False)
    assert not any(o.follow or o.leads for o in off.ops)


def _profile(tmp_path: Path, groups: bool, s: float, reservoir: int, tuples: int,
             app: str = APP, batch: int = 512) -> Profiler:
    graph, ref = load_graph(app, {"tuples": str(tuples)})
    build = generate(graph, _plan(graph), tmp_path / f"build-{groups}", ref, sample_groups=groups)
    module_file = str(build.directory / "pe0.py")
    spec = importlib.util.spec_from_file_location(f"spadeopt_groups_{groups}", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prof = Profiler("pe0", sample_rate=s, reservoir_size=reservoir, seed=5)
    rt = PERuntime("pe0", module.OPERATORS, module_file, profiler=prof, batch_size=batch)
    module.build(rt)
    rt.run()
    return prof


def _series(prof: Profiler) -> dict[tuple[str, str | None, str], list[float]]:
    out: dict[tuple[str, str | None, str], list[float]] = defaultdict(list)
    for r in prof.dump():
        out[(f"{r.op}.{r.port}", r.sub, r.metric)].append(r.value)
    return out


@pytest.mark.parametrize(("app", "s", "batch"), [
    (APP, 0.01, 512),  # several samples per batch
    (APP, 0.003, 512),  # a stride that is not whole: windows stay closed
    (APP, 0.5, 512),
    (SIZES, 0.01, 64),  # at most one sample per batch: the inlined paths, in windows
    (SIZES, 0.003, 64),  # ... and in sample_submit
    (SIZES, 0.1, 64),
])
def test_followers_sample_what_their_own_countdown_would(tmp_path, monkeypatch, app, s, batch) -> None:
    """Reservoirs big enough to keep everything: every count, size and total of every
    point is the same with and without groups, and so is the number of CPU samples.
    (In ``sizes`` neighbouring tuples differ in size, so a follower that sampled the
    wrong tuple of its batch would show.)"""
    monkeypatch.setenv(APP_ENV, app)
    monkeypatch.setattr(loader, "_app_modules", {})  # the PE's app is loaded once per process
    tuples = 3000
    grouped = _series(_profile(tmp_path, True, s, 10**6, tuples, app, batch))
    single = _series(_profile(tmp_path, False, s, 10**6, tuples, app, batch))
    assert grouped.keys() == single.keys()
    for key in grouped:
        if key[2] in ("count", "size", "total"):
            assert sorted(grouped[key]) == sorted(single[key]), key
        else:  # times differ from run to run; how many were taken does not
            assert len(grouped[key]) == len(single[key]) > 0, key
            assert all(v >= 0 for v in grouped[key]), key
    if app == APP:
        assert grouped[("tap.out", None, "total")] == [sum(1 for i in range(tuples) if i * 31 % 17)]
    else:
        assert grouped[("grow.out", None, "total")] == [sum(1 for i in range(tuples) if i % 3)]
        assert len(set(grouped[("grow.out", None, "size")])) > 5


def test_a_full_reservoir_keeps_the_same_tuples_for_the_whole_group(tmp_path, monkeypatch) -> None:
    """With a small reservoir the group shares its leader's choices: every follower keeps
    exactly the tuples (counts) its leader keeps, and as many as the reservoir holds."""
    monkeypatch.setenv(APP_ENV, APP)
    monkeypatch.setattr(loader, "_app_modules", {})
    series = _series(_profile(tmp_path, True, 0.05, 20, 4000))
    leader = Counter(series[("clean.out", None, "size")])
    assert sum(leader.values()) == 20
    counts = sorted(series[("clean.out", None, "count")])
    for follower in ("calc.out", "ident.out", "use.out", "tap.out", "b2.out"):
        assert sorted(series[(follower, None, "count")]) == counts, follower
        assert len(series[(follower, None, "size")]) == 20, follower
    # 'ident' passes its tuples on unchanged: it kept the same tuples as 'calc', so the same sizes
    assert sorted(series[("ident.out", None, "size")]) == sorted(series[("calc.out", None, "size")])


def test_tail_followers_time_from_their_start_to_the_group_end(tmp_path, monkeypatch) -> None:
    """In a chain of followers (each one call, a tail call of its publisher's) a follower
    reads the clock only where its submit starts and its time ends at the leader's end
    (``MetricRecorder.follow(tail=True)``): every sampled batch's submit times then shrink
    strictly down the chain, each operator's including everything after it. A wrong slot
    or a missing end would break the order."""
    app = "apps/chain.py"
    monkeypatch.setenv(APP_ENV, app)
    monkeypatch.setattr(loader, "_app_modules", {})
    graph, ref = load_graph(app, {"n": "4", "work": "20", "tuples": "20000"})
    build = generate(graph, _plan(graph), tmp_path / "build", ref)
    code = (build.directory / "pe0.py").read_text()
    assert code.count("tail=True") == 4 and "_gt__3src__out[3] = _pc()" in code
    module_file = str(build.directory / "pe0.py")
    spec = importlib.util.spec_from_file_location("spadeopt_groups_tail", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prof = Profiler("pe0", sample_rate=0.01, reservoir_size=10**6, seed=5)
    rt = PERuntime("pe0", module.OPERATORS, module_file, profiler=prof, batch_size=64)
    module.build(rt)
    rt.run()
    by_ts: dict[float, dict[str, float]] = defaultdict(dict)
    for r in prof.dump():
        if r.metric == "submit_cpu" and r.op.startswith("op"):
            by_ts[r.ts][r.op] = r.value
    assert len(by_ts) >= 100
    for ts, ops in by_ts.items():
        times = [ops[f"op{i}"] for i in range(4)]
        assert all(a > b > 0 for a, b in zip(times, times[1:], strict=False)), (ts, times)
