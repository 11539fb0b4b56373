"""The driver's live metrics (issue 38): records in, the job state out.

A real ``Collector`` on a real build's deployment, fed ``control.PEMetrics`` records over
its real CURVE channel (and, for the arithmetic, handed records directly): totals carry
over a PE process's replacement and never go down, rates come from the last two
records, and a record with the wrong token, of an unknown PE or malformed is dropped
and counted, never read.
"""

from __future__ import annotations

import time

import pytest
import zmq

from spadeopt import api, control
from spadeopt.deploy.live_metrics import Collector
from spadeopt.plan.artefacts import load_deploy
from spadeopt.runtime.latency import BUCKETS_MS
from spadeopt.runtime.security import keypair


@pytest.fixture(scope="module")
def deploy(tmp_path_factory):
    b = api.build("apps/chain.py", "none", {"n": "2", "tuples": "100"}, out=tmp_path_factory.mktemp("b") / "b")
    return load_deploy(b.directory)


def _rec(pe: str, token: str, *, pid=1, seq=1, at=100.0, cpu=1.0, wall=2.0, idle=0.5, sent=1000, blocked=0.25,
         took=900, final=False) -> control.PEMetrics:
    lat = [0] * (len(BUCKETS_MS) + 1)
    lat[3] = 4
    return control.PEMetrics(pe, token, "h", pid, seq, at, final, cpu, wall, idle,
                             {"op0.out": [sent, 10 * sent, sent // 100, blocked]}, {"op0.in": took},
                             {"op0": {"out": sent}}, {}, {}, {}, {}, [*lat, 30.0])


def test_totals_carry_over_a_restart_and_rates_come_from_the_last_two_records(deploy):
    c = Collector(deploy, local=True)
    try:
        pe = c.pes["pe1"]
        pe.take(_rec("pe1", c.token, seq=1, at=100.0, cpu=1.0, sent=1000))
        pe.take(_rec("pe1", c.token, seq=2, at=101.0, cpu=1.5, sent=3000))
        assert pe.rate(("out", "op0.out", 0)) == pytest.approx(2000.0)
        assert pe.rate(("cpu_s",)) == pytest.approx(0.5)
        pe.take(_rec("pe1", c.token, seq=1, pid=2, at=103.0, cpu=0.2, sent=500))  # a new process
        assert pe.restarts == 1
        assert pe.get(("out", "op0.out", 0)) == 3500 and pe.get(("cpu_s",)) == pytest.approx(1.7)
        busy_before = pe.busy_s
        # a long wait credited at its end: wall - idle - blocked falls, the busy total does not
        pe.take(_rec("pe1", c.token, seq=2, pid=2, at=104.0, cpu=0.3, wall=2.5, blocked=2.0, sent=600))
        assert pe.busy_s >= busy_before
        state = c.state()
        row = {p["pe"]: p for p in state["pes"]}["pe1"]
        assert row["tuples_out"] == 3600 and row["restarts"] == 1 and state["restarts"] == 1
        assert state["latency"]["count"] == 8 and state["latency"]["buckets_ms"][-1] == ["+Inf", 8]
        assert 5.0 <= state["latency"]["p50_ms"] <= 10.0  # inside the bucket that holds it
    finally:
        c.close()


def _push(channel: dict[str, str]) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.PUSH)
    pub, sec = keypair()
    sock.curve_secretkey, sock.curve_publickey = sec.encode(), pub.encode()
    sock.curve_serverkey = channel["server_key"].encode()
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(channel["endpoint"])
    return sock


def test_records_come_over_the_channel_and_forged_ones_are_dropped(deploy):
    c = Collector(deploy, local=True)
    sock = _push(c.channel())
    try:
        sock.send(_rec("pe0", "0" * 32).to_bytes())  # the wrong token
        sock.send(_rec("pe99", c.token).to_bytes())  # no such PE
        sock.send(b"\x81\xa1t\xa5hello")  # not a record
        sock.send(_rec("pe0", c.token, sent=42).to_bytes())
        deadline = time.time() + 10
        while c.pes["pe0"].last is None and time.time() < deadline:
            time.sleep(0.02)
        assert c.pes["pe0"].get(("out", "op0.out", 0)) == 42
        assert c.rejected == 3 and c.state()["status"] == "running"
    finally:
        sock.close()
        c.close()


def test_a_taken_port_is_a_clear_error_and_leaves_no_collector(deploy, tmp_path):
    import socket

    from spadeopt.deploy import live_metrics
    from spadeopt.deploy.options import RunOptions
    from spadeopt.errors import UsageError

    build_dir = tmp_path / "b"
    api.build("apps/chain.py", "none", {"n": "2", "tuples": "100"}, out=build_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"127.0.0.1:{port} .*--metrics-port"):
            live_metrics.start(load_deploy(build_dir), True, build_dir, RunOptions(metrics_port=port))
    live = live_metrics.start(load_deploy(build_dir), True, build_dir, RunOptions(metrics_port=0))
    try:
        assert live.server.url.startswith("http://127.0.0.1:") and live.channel()["endpoint"].startswith("tcp://")
    finally:
        live.close()
