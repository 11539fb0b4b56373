"""The receiving end of a link (docs/decisions/007-inter-pe-link-cost.md): every tuple's
arity is still checked wherever it sits in a batch, the types of the first and last
tuples still are, and a PE's main loop (one input port: a blocking recv; several: a
poller) takes every frame, counts finals and honours ``stop``."""

from __future__ import annotations

import threading
import time

import msgpack
import pytest
import zmq

from spadeopt.runtime import pe_inputs
from spadeopt.runtime.pe import PERuntime
from spadeopt.wire import WireError, decode_batch, final_frame, pack, wire_types

TYPES = wire_types([["seq", "int"], ["ts", "float"], ["key", "str"], ["value", "int"], ["payload", "bytes"]])


def _rows(n: int) -> list[tuple]:
    return [(i, i / 4, f"k{i}", -i, b"x" * (i % 7)) for i in range(n)]


@pytest.mark.parametrize("at", [1, 17, 255, 510])  # between the sampled tuples (every 16th) too
@pytest.mark.parametrize("bad", [(1, 0.5, "k", 2), (1, 0.5, "k", 2, b"", 9), ()])
def test_every_tuple_of_a_large_batch_has_its_arity_checked(at, bad):
    rows = _rows(512)
    rows[at] = bad
    with pytest.raises(WireError, match=f"wrong arity: a tuple of {len(bad)} attributes"):
        decode_batch(pack(rows), TYPES)


@pytest.mark.parametrize("at,attr,value,name", [(0, 2, b"k", "bytes"), (-1, 1, "1.5", "str"), (-1, 4, 3, "int"),
                                                (0, 0, 1.5, "float")])
def test_the_first_and_last_tuples_have_their_types_checked(at, attr, value, name):
    rows = _rows(300)
    t = list(rows[at])
    t[attr] = value
    rows[at] = tuple(t)
    with pytest.raises(WireError, match=f"wrong type: attribute {attr} is a {name}"):
        decode_batch(pack(rows), TYPES)


def test_a_valid_large_batch_passes_unchanged():
    rows = _rows(512)
    assert decode_batch(memoryview(pack(rows)), TYPES) == tuple(rows)
    assert decode_batch(msgpack.packb([(None, None, None, None, None)]), TYPES) == ((None,) * 5,)


def _runtime(tmp_path, ports: list[str]) -> tuple[PERuntime, dict[str, list], dict[str, str]]:
    rt = PERuntime("pe1", ("sink",), __file__, secure=False)
    got: dict[str, list] = {p: [] for p in ports}
    for p in ports:
        rt.input(f"sink.{p}", got[p].extend, lambda port: None, links=1)
    schema = [list(x) for x in (("seq", "int"), ("ts", "float"), ("key", "str"), ("value", "int"), ("payload", "bytes"))]
    eps = rt.bind(str(tmp_path), None, {f"sink.{p}": schema for p in ports})
    return rt, got, {p: eps[f"sink.{p}"]["ipc"] for p in ports}


@pytest.mark.parametrize("ports", [["in"], ["a", "b"]])
def test_the_main_loop_takes_every_frame_until_every_port_is_final(tmp_path, ports):
    rt, got, eps = _runtime(tmp_path, ports)
    ctx = zmq.Context()
    socks = []
    try:
        for i, p in enumerate(ports):
            s = ctx.socket(zmq.PUSH)
            s.connect(eps[p])
            socks.append(s)
            for k in range(20):
                s.send(pack(_rows(100 + i + k)))
            s.send(final_frame(f"L{i}"))
        rt._main_loop()
        for i, p in enumerate(ports):
            assert got[p] == [t for k in range(20) for t in _rows(100 + i + k)]
            assert rt.inputs[f"sink.{p}"].finals == 1
        assert rt.received == 21 * len(ports)
    finally:
        for s in socks:
            s.close(linger=0)
        ctx.term()
        rt.close()


@pytest.mark.parametrize("ports", [["in"], ["a", "b"]])
def test_the_main_loop_ends_soon_after_stop_with_no_frame_coming(tmp_path, ports):
    rt, _, _ = _runtime(tmp_path, ports)
    try:
        timer = threading.Timer(0.2, lambda: setattr(rt, "stop", True))
        timer.start()
        t0 = time.monotonic()
        rt._main_loop()
        assert time.monotonic() - t0 < 0.2 + 3 * pe_inputs.WAIT_MS / 1000
    finally:
        rt.close()


def test_the_link_benchmark_measures_each_end_of_a_secure_link():
    """``spadeopt bench fused-overhead``'s CPU-per-tuple case: one run of its link."""
    from spadeopt.bench.baselines import rows5
    from spadeopt.bench.fused_overhead import _link5_cpu

    assert len(pack(rows5(1)[0])) == 100 and len(set(rows5(5000))) == 4096
    got = _link5_cpu(20_000)
    assert got["tuples_per_s"] > 0 and 0 < got["send_us"] < 1e3 and 0 < got["receive_us"] < 1e3
