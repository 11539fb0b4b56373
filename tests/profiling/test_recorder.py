"""MetricRecorder and Profiler: what a sampled submit, process call or thread records."""

from __future__ import annotations

import random
from collections import Counter

import msgpack
import pytest

from spadeopt.errors import ProfileError, UsageError
from spadeopt.profiling import (
    MetricRecorder,
    PointKey,
    Profiler,
    StrideSampler,
)
from spadeopt.profiling.records import METRICS, SampleRecord

OUT = PointKey("B", "out0", "out")


def _metrics(records: list[SampleRecord]) -> Counter[tuple[str, str | None]]:
    return Counter((r.metric, r.sub) for r in records)


def _drive(rec: MetricRecorder, batches: list[list[object]], *, submit_ns: int = 0) -> int:
    """Run batches through an out point the way the generated hot path does."""
    cd = rec.countdown
    for batch in batches:
        cd -= len(batch)
        if cd <= 0:
            timings = tuple(100 * (i + 1) * len(batch) for i in range(len(rec.subscribers)))
            cd = rec.sample_submit(cd, batch, submit_ns or 1000 * len(batch), timings)
    return cd


def test_fig3_submit_with_two_subscribers_records_three_timings() -> None:
    prof = Profiler("pe_1", sample_rate=1, seed=7)
    rec = prof.point(OUT, subscribers=("C.in0", "D.in0"))
    batch = [(1, "a"), (2, "bb")]
    cd = rec.countdown - len(batch)
    # One submit of 2 tuples: the whole submit took 10 us, C's process 3 us, D's 5 us.
    cd = rec.sample_submit(cd, batch, 10_000, (3_000, 5_000))
    timings = [r for r in prof.dump() if r.metric.endswith("_cpu")]
    # s = 1: both tuples are sampled, each with the per-tuple time (batch total / 2).
    assert sorted((r.metric, r.sub, r.value) for r in timings) == [
        ("process_cpu", "C.in0", pytest.approx(1.5e-6)),
        ("process_cpu", "C.in0", pytest.approx(1.5e-6)),
        ("process_cpu", "D.in0", pytest.approx(2.5e-6)),
        ("process_cpu", "D.in0", pytest.approx(2.5e-6)),
        ("submit_cpu", None, pytest.approx(5e-6)),
        ("submit_cpu", None, pytest.approx(5e-6)),
    ]
    assert len({r.ts for r in timings}) == 1


def test_fig3_one_sample_gives_one_submit_and_two_process_timings() -> None:
    prof = Profiler("pe_1", sample_rate=0.01, seed=7)
    rec = prof.point(OUT, subscribers=("C.in0", "D.in0"))
    _drive(rec, [[0] * 10] * 10)  # 100 tuples, stride 100: one sample
    assert _metrics(prof.dump()) == {
        ("count", None): 1,
        ("size", None): 1,
        ("submit_cpu", None): 1,
        ("process_cpu", "C.in0"): 1,
        ("process_cpu", "D.in0"): 1,
    }


def test_size_is_measured_on_the_boundary_tuple() -> None:
    prof = Profiler("pe_1", sample_rate=0.1, seed=7)
    rec = prof.point(OUT)
    batch = ["x" * i for i in range(35)]  # boundaries at tuples 10, 20, 30
    _drive(rec, [batch])
    sizes = [r.value for r in prof.dump() if r.metric == "size"]
    assert sorted(sizes) == [len(msgpack.packb("x" * i)) for i in (9, 19, 29)]


def test_counts_are_exact_and_first_and_last_survive_the_reservoir() -> None:
    prof = Profiler("pe_1", sample_rate=0.01, reservoir_size=2, seed=7)
    rec = prof.point(OUT)
    cd = _drive(rec, [[0] * 30] * 1000)  # 30_000 tuples, 300 samples
    counts = [r for r in prof.dump() if r.metric == "count"]
    values = [r.value for r in counts]
    # The generated code sees a sample due at the batch that crosses tuple 100; the count
    # is taken after that batch: 120 tuples. The last crossing batch ends at 30_000.
    assert min(values) == 120
    assert max(values) == 30_000
    assert len(counts) <= 2 + 2  # reservoir of 2, plus first and last
    assert min(counts, key=lambda r: r.ts).value == 120
    rec.close(cd)
    totals = [r.value for r in prof.dump() if r.metric == "total"]
    assert totals == [30_000]


def test_close_counts_tuples_after_the_last_sample() -> None:
    prof = Profiler("pe_1", sample_rate=0.001)
    rec = prof.point(PointKey("A", "in0", "in"))
    cd = rec.countdown
    cd -= 250
    rec.close(cd)
    assert [(r.metric, r.value) for r in prof.dump()] == [("total", 250)]


def test_in_point_records_count_size_and_its_own_process_time() -> None:
    prof = Profiler("pe_1", sample_rate=0.5, seed=1)
    rec = prof.point(PointKey("C", "in0", "in"))
    cd = rec.countdown - 4
    cd = rec.sample_process(cd, [1, 2, 3, 4], 8_000)
    assert cd == 2
    records = prof.dump()
    assert _metrics(records) == {("count", None): 1, ("size", None): 2, ("process_cpu", None): 2}
    assert [r.value for r in records if r.metric == "process_cpu"] == [pytest.approx(2e-6)] * 2
    assert all(r.metric in METRICS["in"] and r.dir == "in" for r in records)


def test_thread_point_keeps_first_and_last_cpu_time() -> None:
    prof = Profiler("pe_1", reservoir_size=1, seed=1)
    rec = prof.point(PointKey("Src", "source", "thread"))
    for cpu_ns in (0, 1_000_000, 2_000_000, 3_000_000):
        rec.sample_thread(cpu_ns)
    rec.sample_thread()  # reads this thread's CPU clock itself
    values = sorted(r.value for r in prof.dump())
    assert values[0] == 0.0
    assert len(values) <= 3
    assert all(r.metric == "thread_cpu" and r.sub is None for r in prof.dump())


@pytest.mark.parametrize(
    ("key", "call"),
    [
        (OUT, lambda r: r.sample_submit(0, [1], 1, (1,))),  # no subscriber declared
        (OUT, lambda r: r.sample_process(0, [1], 1)),
        (PointKey("C", "in0", "in"), lambda r: r.sample_submit(0, [1], 1)),
        (PointKey("C", "in0", "in"), lambda r: r.sample_thread(1)),
        (PointKey("S", "t", "thread"), lambda r: r.close(0)),
    ],
)
def test_wrong_sample_method_is_a_usage_error(key: PointKey, call: object) -> None:
    rec = Profiler("pe_1").point(key)
    with pytest.raises(UsageError, match="codegen bug"):
        call(rec)  # type: ignore[operator]


def test_point_is_created_once_per_key() -> None:
    prof = Profiler("pe_1")
    rec = prof.point(OUT, subscribers=("C.in0",))
    assert prof.point(PointKey("B", "out0", "out"), ["C.in0"]) is rec
    with pytest.raises(UsageError, match="already exists"):
        prof.point(OUT, subscribers=("D.in0",))


@pytest.mark.parametrize(
    ("key", "subs", "match"),
    [
        (PointKey("B", "out0", "sideways"), (), "dir must be"),
        (PointKey("", "out0", "out"), (), "operator id"),
        (PointKey("C", "in0", "in"), ("D.in0",), "only 'out' points"),
        (OUT, ("Din0",), "op.port"),
        (OUT, ("C.in0", "C.in0"), "duplicate"),
    ],
)
def test_invalid_points_are_usage_errors(key: PointKey, subs: tuple[str, ...], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        Profiler("pe_1").point(key, subs)


@pytest.mark.parametrize(
    "kwargs",
    [{"sample_rate": 0}, {"sample_rate": 1.5}, {"reservoir_size": 0}, {"seed": "x"}],
)
def test_invalid_profiler_parameters_are_usage_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Profiler("pe_1", **kwargs)  # type: ignore[arg-type]


def test_pe_id_must_name_a_file() -> None:
    with pytest.raises(UsageError, match="cannot name a file"):
        Profiler("../pe")


def test_unencodable_tuple_size_is_a_profile_error() -> None:
    rec = Profiler("pe_1", sample_rate=1).point(OUT)
    with pytest.raises(ProfileError, match="msgpack"):
        rec.sample_submit(0, [object()], 1)


def _values(prof: Profiler) -> list[tuple[object, ...]]:
    return [(r.op, r.port, r.sub, r.metric, r.value) for r in prof.dump() if r.metric != "count"]


def _profile(pe: str, seed: int) -> Profiler:
    prof = Profiler(pe, sample_rate=0.1, reservoir_size=5, seed=seed)
    rec = prof.point(OUT, subscribers=("C.in0",))
    batches = [[i] * (1 + i % 13) for i in range(400)]
    cd = rec.countdown
    for i, batch in enumerate(batches):
        cd -= len(batch)
        if cd <= 0:
            cd = rec.sample_submit(cd, batch, 1000 * i, (500 * i,))
    return prof


def test_same_seed_same_reservoirs_whatever_the_pe() -> None:
    assert _values(_profile("pe_1", 3)) == _values(_profile("pe_1", 3))
    # Reservoir RNGs are derived from (seed, point, metric), not from the PE they run in.
    assert _values(_profile("pe_1", 3)) == _values(_profile("pe_9", 3))
    assert _values(_profile("pe_1", 3)) != _values(_profile("pe_1", 4))


def test_dump_is_sorted_by_point_then_metric() -> None:
    prof = Profiler("pe_1", sample_rate=1)
    for key in (PointKey("Z", "out0", "out"), PointKey("A", "out0", "out")):
        rec = prof.point(key)
        rec.sample_submit(rec.countdown - 1, [1], 1)
    assert [r.op for r in prof.dump()] == ["A"] * 3 + ["Z"] * 3


# --- issue 14: one reservoir per point, cheaper bookkeeping ------------------------------


@pytest.mark.parametrize("s", [1, 0.5, 0.3, 0.1, 0.007, 0.001])
def test_recorder_samples_the_same_tuples_as_the_stride_sampler(s: float) -> None:
    """The recorder's inlined stride step picks exactly the tuples StrideSampler picks."""
    rng = random.Random(5)
    batches, start = [], 0
    for _ in range(300):
        k = rng.choice([1, 3, 7, 64, 512, 2000])
        batches.append(list(range(start, start + k)))
        start += k
    ref = StrideSampler(s)
    expected = [b[i] for b in batches for i in ref.offer(len(b))]
    prof = Profiler("pe_1", sample_rate=s, reservoir_size=10**6, sizeof=lambda t: t)
    rec = prof.point(OUT)  # the size of tuple i is i: sizes name the sampled tuples
    cd = _drive(rec, batches)
    assert sorted(int(r.value) for r in prof.dump() if r.metric == "size") == expected
    rec.close(cd)
    assert [r.value for r in prof.dump() if r.metric == "total"] == [start]


def test_one_record_per_sampled_tuple_keeps_metrics_together() -> None:
    """Every kept record holds all of a sampled tuple's metrics: same ts, in every series."""
    prof = Profiler("pe_1", sample_rate=0.01, reservoir_size=7, seed=3)
    rec = prof.point(OUT, subscribers=("C.in0", "D.in0"))
    _drive(rec, [[0] * 50] * 400)  # 20_000 tuples, 200 samples, 7 kept
    by_metric = Counter((r.metric, r.sub) for r in prof.dump())
    assert by_metric[("size", None)] == by_metric[("submit_cpu", None)] == 7
    assert by_metric[("process_cpu", "C.in0")] == by_metric[("process_cpu", "D.in0")] == 7
    ts = {m: sorted(r.ts for r in prof.dump() if (r.metric, r.sub) == m) for m in by_metric}
    assert ts[("size", None)] == ts[("submit_cpu", None)] == ts[("process_cpu", "D.in0")]


def test_sizes_are_msgpack_lengths_and_bad_tuples_still_raise() -> None:
    prof = Profiler("pe_1", sample_rate=1)
    rec = prof.point(OUT)
    tuples = [(1, b"x" * 300, "y", 2.5, [1, 2], {"k": None})]
    rec.sample_submit(rec.countdown - 1, tuples, 1)
    assert [r.value for r in prof.dump() if r.metric == "size"] == [
        len(msgpack.packb(tuples[0], use_bin_type=True))
    ]
    with pytest.raises(ProfileError, match="msgpack"):
        rec.sample_submit(rec.countdown - 1, [{1, 2}], 1)


@pytest.mark.parametrize("batch_len,window", [(1, False), (7, False), (1, True)])
def test_a_full_reservoir_keeps_what_algorithm_r_keeps(batch_len: int, window: bool) -> None:
    """Past its size the recorder draws Algorithm R's decision before sizing a record
    (issue 14: only kept records are sized and built); it must keep exactly the records
    ``Reservoir`` keeps with the same random stream: one and several samples a batch,
    and samples recorded by a closing timing window (``_record_nested``)."""
    from spadeopt.profiling import CpuWindow, Reservoir
    from spadeopt.profiling.recorder import point_rng

    prof = Profiler("pe_1", sample_rate=1, reservoir_size=5, seed=11)
    rec = prof.point(OUT, subscribers=("C.in0",) if window else ())  # a window's submit is one call
    tuples = ["x" * i for i in range(300)]  # every size distinct
    batches = [tuples[i:i + batch_len] for i in range(0, len(tuples), batch_len)]
    if window:
        w, cd = CpuWindow(1), rec.countdown
        for batch in batches:
            w.open = True
            cd = w.close_submit(900, 1000, rec, cd - len(batch), batch)
    else:
        _drive(rec, batches)
    ref = Reservoir(5, point_rng(11, OUT, None, "record"))
    for t in tuples:
        ref.add(len(msgpack.packb(t)))
    kept = sorted(int(r.value) for r in prof.dump() if r.metric == "size")
    assert kept == sorted(ref.values) and ref.seen == 300
    assert max(kept) > len(msgpack.packb(tuples[4])), "records past the reservoir's size were kept"
