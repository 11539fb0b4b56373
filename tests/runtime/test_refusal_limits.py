"""Limits at a PE's input ports, with real ZeroMQ sockets and processes (no Spark):
refusals are counted exactly but logged at a bounded rate, and frames over
``max_frame`` are dropped by ZeroMQ itself, yet stop the run naming the port and link."""

from __future__ import annotations

import io
import json
import time

import pytest
import zmq

from spadeopt import wire
from spadeopt.api import load_graph
from spadeopt.deploy.agent import ERROR_TAG, PEFailed
from spadeopt.frontend.dsl import App
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.runtime import transport
from spadeopt.runtime.security import (
    LOG_FIRST,
    Guard,
    RefusalLog,
    keypair,
    make_client,
    make_server,
)
from spadeopt.toolkit.sources import counter

DOMAIN = "sink.in"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_refusal_log_writes_the_first_ones_then_one_line_a_minute_then_a_last_one():
    out, clock = io.StringIO(), Clock()
    log = RefusalLog("pe1", out, first=3, every=60.0, clock=clock)
    for i in range(3):
        log.refused("a.in", f"stranger {i}")
    assert out.getvalue().count("\n") == 3 and "(further refusals: one line per 60 s)" in out.getvalue()
    for _ in range(500):  # within the minute: nothing more
        clock.t += 0.01
        log.refused("a.in", "x")
        log.tick()
    assert out.getvalue().count("\n") == 3
    clock.t += 60
    log.tick()
    assert out.getvalue().splitlines()[-1].startswith("spadeopt: PE pe1 refused 500 more connection(s) in the last 65 s")
    log.refused("b.in", "y")
    log.refused("a.in", "z")
    clock.t += 59
    log.tick()
    assert out.getvalue().count("\n") == 4
    log.close()
    assert out.getvalue().splitlines()[-1].endswith("refused 2 more connection(s) in the last 59 s (by input port: a.in 1, b.in 1)")
    log.close()  # nothing left to say
    assert out.getvalue().count("\n") == 5


def test_a_flood_of_one_kind_of_refusal_does_not_hide_the_first_of_another():
    out, clock = io.StringIO(), Clock()
    log = RefusalLog("pe1", out, first=3, every=60.0, clock=clock)
    for i in range(50):  # a peer without keys reconnecting fast
        log.refused("a.in", f"handshake failed {i}", "handshake failed")
    log.refused("a.in", "CURVE key K is not an upstream link of this port", "unknown CURVE key")
    log.refused("a.in", "CURVE key K2 is not an upstream link of this port", "unknown CURVE key")
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].endswith("CURVE key K is not an upstream link of this port")
    log.close()
    assert out.getvalue().splitlines()[-1].endswith("refused 48 more connection(s) in the last 0 s (by input port: a.in 48)")


@pytest.fixture
def port(tmp_path):
    """A real input port as a PE binds it: a PULL socket (max_frame 1000) as a CURVE
    server on ipc and tcp, this PE's ZAP handler and monitor, one admitted link L1."""
    ctx = zmq.Context()
    log = io.StringIO()
    guard = Guard(ctx, "pe2", stream=log)
    server = keypair()
    sock = transport.pull_socket(ctx, 32, max_frame=1000)
    make_server(sock, *server, domain=DOMAIN)
    guard.watch(sock, DOMAIN)
    eps = [f"ipc://{tmp_path}/pe2-{DOMAIN}"]
    sock.bind(eps[0])
    eps.append(f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}")
    guard.start_monitor()
    link = keypair()
    guard.allow({DOMAIN: {link[0]: "L1"}})
    yield ctx, guard, sock, eps, server[0], link, log
    guard.close()
    sock.close(0)
    ctx.destroy(0)


@pytest.mark.slow  # ~8 s of handshakes
def test_ten_thousand_refused_handshakes_are_counted_exactly_and_log_under_1_mib(port):
    """Peers without CURVE, with a stranger's key, and with the wrong server key, over
    ipc and tcp, 64 at a time (each tries once: no reconnects)."""
    ctx, guard, _sock, eps, server_public, _link, log = port
    wrong_server = zmq.curve_keypair()[0]
    total, batch, t0 = 10_000, 64, time.time()
    done = 0
    while done < total:
        peers = []  # the first three one at a time: one of each kind among the lines logged in full
        for i in range(done, min(done + (1 if done < 3 else batch), total)):
            c = ctx.socket(zmq.PUSH)
            c.linger, c.reconnect_ivl = 0, -1
            kind = i % 3
            if kind:  # 1: a stranger's key for the right server; 2: the wrong server key
                c.curve_publickey, c.curve_secretkey = zmq.curve_keypair()
                c.curve_serverkey = server_public.encode() if kind == 1 else wrong_server
            c.connect(eps[i % 2])
            peers.append(c)
        done += len(peers)
        deadline = time.time() + 20
        while sum(guard.refusals().values()) < done and time.time() < deadline:
            time.sleep(0.002)
        for c in peers:
            c.close(0)
        assert sum(guard.refusals().values()) == done, f"{done - sum(guard.refusals().values())} refusals missing"
    time.sleep(0.3)  # nothing counted twice, nothing late
    assert guard.refusals() == {DOMAIN: total}
    assert time.time() - t0 < 60
    guard.close()
    text = log.getvalue()
    assert len(text.encode()) < 1 << 20
    lines = text.splitlines()
    assert len(lines) <= LOG_FIRST + 2, lines[LOG_FIRST:]  # the first ten, at most one a minute, the last
    assert sum(int(ln.split(" refused ")[1].split()[0]) for ln in lines[LOG_FIRST:]) == total - LOG_FIRST
    assert "is not an upstream link of this port" in text and "handshake failed" in text
    assert not guard.dropped


def test_zeromq_drops_a_frame_over_max_frame_and_the_guard_names_the_link(port):
    """A frame just over max_frame still arrives (decode_batch's clear error); one over
    the socket's MAXMSGSIZE never does: the link reconnects and is admitted again."""
    ctx, guard, sock, eps, server_public, link, _log = port
    c = ctx.socket(zmq.PUSH)
    c.linger = 0
    make_client(c, *link, server_public=server_public)
    c.connect(eps[1])
    c.send(wire.pack([(1, b"x")]))
    assert sock.poll(5000) and sock.recv(copy=False).get("User-Id") == "L1"
    c.send(b"\x91" + b"\xc4" * 1000)  # 1001 bytes
    assert sock.poll(5000)
    with pytest.raises(wire.WireError, match="oversized frame: 1,001 bytes, the limit is 1,000"):
        wire.decode_batch(sock.recv(), None, max_frame=1000)
    assert not guard.dropped
    c.send(b"x" * (1000 + transport.FRAME_MARGIN))
    c.send(b"lost")  # behind it
    deadline = time.time() + 5
    while not guard.dropped and time.time() < deadline:
        time.sleep(0.01)
    assert guard.dropped == {DOMAIN: "L1"}
    c.send(b"after")
    got = []  # "lost" is dropped with the connection or, when it was still queued in the
    while sock.poll(5000):  # PUSH socket at the drop, sent again on the new one: either is fine
        got.append(sock.recv())
        if got[-1] == b"after":
            break
    assert got and got[-1] == b"after" and set(got) <= {b"lost", b"after"}, got
    assert guard.refusals() == {}
    c.close(0)


def _pe_failure(exc: PEFailed) -> dict:
    return json.loads(str(exc).split(ERROR_TAG)[1])


def test_a_pe_that_is_sent_an_oversized_frame_stops_naming_its_port_and_the_link(tmp_path):
    """The real malformed app: PE pe1 pushes one 2 MiB frame past its sender at PE pe2,
    whose max_frame is 1 MiB: ZeroMQ drops it unread, and pe2 stops saying so."""
    graph, ref = load_graph("tests/apps/malformed.py", {"mode": "oversize"})
    with pytest.raises(PEFailed) as exc:
        build_and_run(graph, "none", app_ref=ref, workdir=tmp_path, settings={"max_frame": 1 << 20})
    report = _pe_failure(exc.value)
    assert report["pe"] == "pe2" and report["op"] == "sink" and report["port"] == "in", report
    assert ("malformed frame on input port 'sink.in' of PE pe2, from link L1 of PE pe1 (bad.out): "
            "oversized frame: ZeroMQ dropped the link's connection") in report["message"], report


def test_a_tuple_over_max_frame_stops_the_operator_that_made_it(tmp_path):
    """An honest PE never sends a frame its receiver would drop: a 2-MB tuple is refused
    where it is made (a batch of smaller tuples is cut into frames instead)."""
    a = App("big")
    a.sink("sink", a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 20, "size": 2_000_000}))
    with pytest.raises(PEFailed) as exc:
        build_and_run(a, "none", workdir=tmp_path, settings={"max_frame": 1 << 20})
    report = _pe_failure(exc.value)
    assert report["pe"] == "pe0" and report["op"] == "src", report
    assert "FrameTooLarge: a tuple for output port src.out encodes to" in report["message"], report
    assert "over max_frame (1,048,576 bytes)" in report["message"], report


def test_a_batch_of_large_tuples_goes_as_several_frames_under_max_frame(tmp_path):
    """2,048 tuples of 4 KB (8 MB a batch) reach the sink whole and in order through a
    link whose max_frame is 1 MiB: the sender cuts the batch into frames by bytes."""
    a = App("big")
    a.sink("sink", a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 5000, "size": 4000}))
    res = build_and_run(a, "none", workdir=tmp_path, settings={"max_frame": 1 << 20})
    assert [r["seq"] for r in res.sinks["sink"]] == list(range(5000))
