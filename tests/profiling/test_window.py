"""Timing windows (issue 14, round 3): nested samples read the wall clock, scaled to CPU.

A thread's outermost sampled submit reads the thread CPU clock around itself; sampled
submits nested inside it read only the wall clock, and the window scales their times by
its own CPU/wall ratio when it closes (``CpuWindow``). Codegen gives windows only to
operators under which nothing can block (``codegen.pe_spec.assign_windows``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import random
from collections import defaultdict
from pathlib import Path

import pytest

from spadeopt.api import load_graph
from spadeopt.codegen.lower import lower_op
from spadeopt.codegen.pe_spec import links_of, pe_spec
from spadeopt.codegen.render import generate
from spadeopt.optimize.strategies import plan_for
from spadeopt.plan.fission import physical_graph
from spadeopt.profiling import CpuWindow, PointKey, Profiler
from spadeopt.profiling.window import window_stride
from spadeopt.runtime.loader import APP_ENV
from spadeopt.runtime.pe import PERuntime

OUT = PointKey("B", "out0", "out")


def _recorder(subs: tuple[str, ...] = ("C.in0",), size: int = 100):
    prof = Profiler("pe_1", sample_rate=1, reservoir_size=size, seed=1, sizeof=lambda t: 1)
    return prof, prof.point(OUT, subscribers=subs)


def _values(prof: Profiler, metric: str, sub: str | None = None) -> list[float]:
    return [r.value for r in prof.dump() if r.metric == metric and r.sub == sub]


def _nested(win: CpuWindow, rec, cd: int, batch: list, submit_ns: float, process_ns: tuple) -> int:
    """What generated code does for a sampled submit nested in an open window."""
    win.log.append((rec, cd, batch, submit_ns, process_ns if len(process_ns) > 1 else None, None))
    return cd % win.stride or win.stride


def test_close_scales_the_nested_records_by_cpu_over_wall() -> None:
    prof, rec = _recorder(("C.in0", "D.in0"))
    win = CpuWindow(1)
    win.open = True
    cd = _nested(win, rec, rec.countdown - 2, [1, 2], 8_000, (2_000, 6_000))  # wall ns
    assert not _values(prof, "size")  # logged, not yet recorded
    assert win.close(cpu_ns=30_000, wall_ns=40_000) == 0.75 and not win.open and not win.log
    assert rec.countdown == cd  # close re-arms the recorder exactly as the inline step did
    rec.sample_submit(cd - 2, [3, 4], 8_000, (2_000, 6_000))  # outside any window: as given
    # s = 1: both tuples of each batch are sampled; times are per tuple (batch total / 2);
    # the first batch's records are scaled by 0.75, the second batch's are untouched
    assert _values(prof, "submit_cpu") == pytest.approx([3e-6] * 2 + [4e-6] * 2)
    assert _values(prof, "process_cpu", "C.in0") == pytest.approx([0.75e-6] * 2 + [1e-6] * 2)
    assert _values(prof, "process_cpu", "D.in0") == pytest.approx([2.25e-6] * 2 + [3e-6] * 2)
    assert _values(prof, "size") == [1] * 4  # only times are scaled


def test_a_window_never_scales_up() -> None:
    prof, rec = _recorder(size=1)  # one slot: later records overwrite it (Algorithm R)
    win = CpuWindow(1)
    win.open = True
    cd = rec.countdown
    for _ in range(40):
        cd = _nested(win, rec, cd - 1, [0], 1_000, (1_000,))
    assert win.close(cpu_ns=500, wall_ns=1_000) == 0.5
    assert _values(prof, "submit_cpu") == pytest.approx([0.5e-6])
    win.open = True
    _nested(win, rec, cd - 1, [0], 1_000, (1_000,))
    assert win.close(cpu_ns=1_200, wall_ns=1_000) == 1.0  # CPU read outside the wall clock


@pytest.mark.parametrize(("s", "size"), [(0.001, 10_000), (0.01, 30), (0.5, 10_000), (1, 7)])
def test_window_records_exactly_what_sample_submit_records(s: float, size: int) -> None:
    """The window's inlined recording and inline re-arm are sample_submit's, batch for batch:
    same sampled tuples, counts, sizes and times (r = 1), same reservoir choices, also
    when a batch holds several samples or the reservoir is full (its fallback path)."""
    rng = random.Random(11)
    batches, start = [], 0
    for _ in range(400):
        k = rng.choice([1, 5, 64, 512, 2500])
        batches.append([(i, "x" * (i % 13)) for i in range(start, start + k)])
        start += k
    direct = Profiler("pe_1", sample_rate=s, reservoir_size=size, seed=4)
    logged = Profiler("pe_1", sample_rate=s, reservoir_size=size, seed=4)
    win = CpuWindow(window_stride(s))
    # a submit of one call (its time is the submit's) and one of two calls
    for subs, times in ((("C.in0",), lambda n: (100 + n,)), (("C.in0", "D.in0"), lambda n: (40 + n, 60 + n))):
        key = PointKey(f"B{len(subs)}", "out0", "out")
        a, b = direct.point(key, subscribers=subs), logged.point(key, subscribers=subs)
        cda, cdb = a.countdown, b.countdown
        for n, batch in enumerate(batches):
            cda -= len(batch)
            cdb -= len(batch)
            assert cda == cdb
            if cda <= 0:
                cda = a.sample_submit(cda, batch, sum(times(n)), times(n))
                win.open = True
                cdb = _nested(win, b, cdb, batch, sum(times(n)), times(n))
                win.close(cpu_ns=5, wall_ns=5)
        a.close(cda)
        b.close(cdb)
    strip = [(r.op, r.metric, r.sub, r.value) for r in direct.dump()]
    assert strip == [(r.op, r.metric, r.sub, r.value) for r in logged.dump()]
    assert sum(1 for m in strip if m[1] == "size") == 2 * min(size, int(start * s))


def test_windows_stay_closed_unless_the_stride_is_whole() -> None:
    assert (window_stride(0.001), window_stride(0.01), window_stride(1)) == (1000, 100, 1)
    assert window_stride(0.3) == window_stride(0.007) == 0


def _specs(app: str, params: dict[str, str], fusion: str):
    graph, _ = load_graph(app, params)
    plan = dataclasses.replace(plan_for(graph, fusion), instrumented=True, collapse=False)
    physical = physical_graph(graph, plan.regions)
    links = links_of(plan, physical)
    return {pe.pe_id: pe_spec(physical, plan, pe, links, lower_op) for pe in plan.pes}


def test_windows_only_where_nothing_below_can_block() -> None:
    (pe,) = _specs("apps/chain.py", {"n": "3"}, "all").values()
    assert pe.windows == ["_win_0"]
    assert {o.op.name: o.window for o in pe.ops} == {
        "src": "_win_0", "op0": "_win_0", "op1": "_win_0", "op2": "_win_0", "sink": None}
    # every port of FNONE sends to another PE: no windows at all
    assert all(not s.windows and all(o.window is None for o in s.ops)
               for s in _specs("apps/chain.py", {"n": "3"}, "none").values())
    # burn: 'route' is a custom operator (opaque code), so it and everything upstream of
    # it time their own CPU; heavy and light (and the union below them) share a window
    (pe,) = _specs("tests/apps/burn.py", {}, "all").values()
    windowed = {o.op.name for o in pe.ops if o.window}
    assert windowed == {"heavy", "light", "u"}


def _run_in_process(tmp_path: Path, n: int, s: float, reservoir: int) -> Profiler:
    """Build the FALL instrumented PE of a chain and run it in this process, for real."""
    graph, ref = load_graph("apps/chain.py", {"n": str(n), "tuples": "60000"})
    plan = dataclasses.replace(plan_for(graph, "all"), instrumented=True, collapse=False)
    build = generate(graph, plan, tmp_path / "build", ref)
    module_file = str(build.directory / "pe0.py")
    spec = importlib.util.spec_from_file_location("spadeopt_pe_window_test", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prof = Profiler("pe0", sample_rate=s, reservoir_size=reservoir, seed=3)
    rt = PERuntime("pe0", module.OPERATORS, module_file, profiler=prof)
    module.build(rt)
    rt.run()
    return prof


def test_nested_samples_stay_nested_and_inside_their_window(tmp_path, monkeypatch) -> None:
    """In a chain every point samples the same batch, so one window holds them all: the
    source's submit (exact CPU) contains op0's, which contains op1's, and so on. Scaling
    all nested wall times by one ratio r = min(1, C/W) keeps that order, and no nested
    time exceeds the window's own CPU; a wrong ratio (e.g. r > 1) or an unscaled sample
    would break it."""
    monkeypatch.setenv(APP_ENV, "apps/chain.py")
    n = 6
    prof = _run_in_process(tmp_path, n, 0.002, 10_000)
    per_point: dict[str, list[float]] = defaultdict(list)
    for r in prof.dump():  # sorted by time within a point: the k-th sample is batch k's
        if r.metric == "submit_cpu":
            per_point[r.op].append(r.value)
    chain = ["src"] + [f"op{i}" for i in range(n)]
    assert {op: len(v) for op, v in per_point.items()} == {op: 120 for op in chain}
    for k in range(120):
        times = [per_point[op][k] for op in chain]
        assert all(a >= b > 0 for a, b in zip(times, times[1:], strict=False)), (k, times)
