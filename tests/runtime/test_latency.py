"""Latency markers (spadeopt.runtime.latency): the frame, the bookkeeping, the thread rule
of a port, and markers through real PEs (one PE, a pipeline, a parallel region)."""

from __future__ import annotations

import math
import threading

import pytest
import zmq

from spadeopt.runtime import latency
from spadeopt.runtime.latency import Latency, summary
from spadeopt.runtime.transport import Sender
from spadeopt.wire import MARKER_TAG, WireError, decode_batch, marker_frame, parse_marker


def test_a_marker_frame_round_trips_and_is_never_a_batch():
    frame = marker_frame("src__c1", 7, 1_764_000_000.25)
    assert frame[:1] == MARKER_TAG
    assert parse_marker(frame) == ("src__c1", 7, 1_764_000_000.25)
    with pytest.raises(WireError, match="not a"):
        decode_batch(frame, None)  # 0xc3 is msgpack's true: a port never takes it as tuples


@pytest.mark.parametrize("frame", [
    MARKER_TAG + b"\x00" * 8,  # too short for a time
    MARKER_TAG + b"\x00" * 16 + b"x" * 300,  # an origin over 256 bytes
    MARKER_TAG + b"\x00" * 16 + b"\xff\xfe",  # an origin that is not UTF-8
    marker_frame("s", 1, math.nan),
    marker_frame("s", 1, math.inf),
])
def test_a_malformed_marker_is_refused(frame):
    with pytest.raises(WireError, match="malformed latency marker"):
        parse_marker(frame)


def test_a_marker_is_taken_once_and_an_older_one_never():
    lat = Latency()
    assert lat.take("a", 1) and lat.take("a", 2)
    assert not lat.take("a", 2)  # the copy that came through another channel
    assert not lat.take("a", 1)  # late
    assert lat.take("b", 1)  # another origin has its own numbers
    assert [lat.next_seq("s"), lat.next_seq("s"), lat.next_seq("t")] == [1, 2, 1]


def test_origins_followed_are_bounded(monkeypatch):
    monkeypatch.setattr(latency, "MAX_ORIGINS", 3)
    lat = Latency()
    assert all(lat.take(o, 1) for o in "abc")
    assert not lat.take("d", 1)  # a fourth origin is dropped ...
    assert lat.take("a", 2)  # ... the ones followed still count


def test_samples_are_a_bounded_reservoir(monkeypatch):
    monkeypatch.setattr(latency, "CAP", 100)
    lat = Latency()
    for i in range(1000):
        lat.record(float(i))
    assert lat.recorded == 1000 and len(lat.samples) == 100
    assert max(lat.samples) > 100  # later samples replaced early ones (Algorithm R), not dropped


def test_summary_gives_percentiles_and_none_without_samples():
    assert summary([]) is None
    s = summary(float(i) for i in range(1, 101))
    assert (s["p50_ms"], s["p99_ms"], s["max_ms"], s["markers"]) == (51.0, 100.0, 100.0, 100)


def _pair():
    ctx = zmq.Context.instance()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    return push, pull


def _frames(pull) -> list[bytes]:
    out = []
    while pull.poll(200):
        out.append(pull.recv())
    return out


def test_a_port_sends_markers_only_from_the_thread_that_sends_its_batches():
    push, pull = _pair()
    s = Sender("f.out", locked=False)
    s.sockets.append(push)
    s.links.append("l0")
    frame = marker_frame("src", 1, 1.0)
    s.marker(frame)  # nothing sent on it yet: no owner, skipped
    s([(1,)])
    t = threading.Thread(target=s.marker, args=(frame,))
    t.start()
    t.join()  # another thread: skipped (ZeroMQ sockets are not thread-safe)
    s.marker(frame)  # the owner: sent behind the batch
    got = _frames(pull)
    assert [g[:1] for g in got] == [b"\x91", MARKER_TAG]
    push.close(0)
    pull.close(0)


def test_a_locked_port_sends_markers_from_any_thread():
    push, pull = _pair()
    s = Sender("f.out", locked=True)
    s.sockets.append(push)
    s.links.append("l0")
    t = threading.Thread(target=s.marker, args=(marker_frame("src", 1, 1.0),))
    t.start()
    t.join()
    assert [g[:1] for g in _frames(pull)] == [MARKER_TAG]
    push.close(0)
    pull.close(0)


APP = "apps/keyed_window.py"


@pytest.mark.parametrize("fusion", ["all", "none", "manual"])
def test_markers_reach_the_sinks_through_real_pes(tmp_path, fusion):
    """One PE (the source's own markers), a pipeline of four PEs, and a width-2 region
    (split, two channels, merge): the PE holding the sink records samples, each between
    0 and the run's length, and no other PE records any."""
    from spadeopt import api
    from spadeopt.orchestrate.build_local import build_and_run

    graph, _ = api.load_graph(APP, {"tuples": "30000", "work": "50", "width": "2"})
    res = build_and_run(graph, fusion, app_ref=APP, workdir=tmp_path)
    pes = res.report["pes"]
    with_sink = [p for p in pes if p["sinks"]]
    assert len(with_sink) == 1
    samples = with_sink[0]["latency_ms"]
    assert samples, f"no marker reached the sink's PE under {fusion}"
    wall_ms = max(p["wall_s"] for p in pes) * 1000.0
    assert all(0.0 <= ms <= wall_ms for ms in samples)
    assert all(not p["latency_ms"] for p in pes if not p["sinks"])
    if fusion != "all":
        assert len(pes) > 1
