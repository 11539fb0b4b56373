"""The driver's rendezvous of node agents: rounds answered in node order when all came;
strangers and wrong tokens get nothing."""

from __future__ import annotations

import threading

import msgpack
import pytest
import zmq

from spadeopt import control
from spadeopt.deploy.rendezvous import Meeting, Rendezvous, Restart, check_restart
from spadeopt.runtime.security import keypair


def test_three_nodes_meet_three_times_and_get_every_message_in_node_order():
    r = Rendezvous(3, local=True)
    got: dict[int, list] = {}

    def agent(node: int) -> None:
        m = Meeting(r.address(), node, timeout=30)
        try:
            got[node] = [m.gather(f"endpoints of {node}")]
            m.barrier()
            m.barrier()
        finally:
            m.close()

    threads = [threading.Thread(target=agent, args=(n,)) for n in (2, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    r.close()
    assert got == {n: [["endpoints of 0", "endpoints of 1", "endpoints of 2"]] for n in range(3)}
    assert r.rejected == 0 and not r.rounds


def test_a_wrong_token_or_a_malformed_message_is_dropped_and_answers_nobody():
    r = Rendezvous(2, local=True)
    address = dict(r.address(), token="0" * 32)
    stranger = Meeting(address, 0, timeout=1)
    with pytest.raises(TimeoutError, match="meeting 1"):
        stranger.gather("mine")
    stranger.close()
    raw = zmq.Context.instance().socket(zmq.DEALER)
    pub, sec = keypair()
    raw.curve_publickey, raw.curve_secretkey = pub.encode(), sec.encode()
    raw.curve_serverkey = r.server_key.encode()
    raw.connect(r.endpoint)
    for doc in ({"token": r.token, "round": 0, "node": 5, "msg": "x"}, {"token": r.token, "round": 0},
                {"token": r.token, "round": 0, "node": 0, "msg": 7}):
        raw.send(msgpack.packb(doc))
    raw.send(b"\xc1not msgpack")
    raw.send(control.Meet(r.token, 0, 0, 5, "x").to_bytes())  # a well-formed record of a node the run has not
    raw.send(control.Meet("1" * 32, 0, 0, 0, "x").to_bytes())  # of another run
    assert not raw.poll(500)
    raw.close(0)
    r.close()
    assert r.rejected == 7 and not r.rounds


def test_a_client_without_the_servers_key_cannot_talk_to_it():
    r = Rendezvous(1, local=True)
    plain = zmq.Context.instance().socket(zmq.DEALER)
    plain.connect(r.endpoint)
    plain.send(msgpack.packb({"token": r.token, "round": 0, "node": 0, "msg": "x"}))
    assert not plain.poll(500)  # no CURVE handshake: nothing gets through
    plain.close(0)
    r.close()


def _met(r: Rendezvous, nodes: int) -> list[Meeting]:
    """``nodes`` agents that have met once (so the driver knows where they are)."""
    ms = [Meeting(r.address(), n, timeout=30) for n in range(nodes)]
    threads = [threading.Thread(target=m.gather, args=(f"node {m.node}",)) for m in ms]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return ms


@pytest.mark.parametrize(("live", "want"), [((True, False), True), ((False, False), False)])
def test_a_stop_request_reaches_every_agent_and_a_live_node_makes_it_a_stop(live, want):
    r = Rendezvous(2, local=True)
    ms = _met(r, 2)
    result: list[bool] = []
    asker = threading.Thread(target=lambda: result.append(r.request_stop(timeout=20)))
    asker.start()
    try:
        for m, is_live in zip(ms, live, strict=True):  # each agent, as run_node's tick does
            for _ in range(200):
                if m.stop_requested():
                    m.answer_stop(is_live)
                    break
                threading.Event().wait(0.02)
            else:
                raise AssertionError(f"node {m.node} never saw the stop request")
        asker.join(30)
        assert result == [want]  # (a "stopping" answer ends the wait at once)
        for _ in range(200):
            if len(r.answers) == 2:
                break
            threading.Event().wait(0.02)
        assert r.answers == {0: "stopping" if live[0] else "bounded", 1: "bounded"}
        assert not any(m.stop_requested() for m in ms)  # asked once
    finally:
        for m in ms:
            m.close()
        r.close()


def test_a_stop_request_during_a_meeting_is_answered_bounded_and_the_meeting_goes_on():
    r = Rendezvous(2, local=True)
    ms = _met(r, 2)
    got: dict[int, list[str]] = {}
    t0 = threading.Thread(target=lambda: got.setdefault(0, ms[0].gather("end of 0")))
    t0.start()  # node 0 waits in the last meeting; node 1 has not come yet
    try:
        assert r.request_stop(timeout=2) is False  # node 0 answered bounded; node 1 never did
        assert r.answers == {0: "bounded"}
        got[1] = ms[1].gather("end of 1")
        t0.join(30)
        assert got == {0: ["end of 0", "end of 1"], 1: ["end of 0", "end of 1"]}
    finally:
        for m in ms:
            m.close()
        r.close()


def _channel() -> dict:
    pub, _ = keypair()
    return {"endpoint": "tcp://127.0.0.1:5555", "server_key": pub, "token": "ab" * 16, "interval": 1.0}


def test_a_failure_report_restarts_every_agent_in_a_new_generation_and_old_messages_are_dropped():
    channel = _channel()
    asked: list[tuple[int, str]] = []

    def on_failure(node: int, report: str) -> dict:
        asked.append((node, report))
        return {"checkpoint": channel, "delay": 0.25}

    r = Rendezvous(2, local=True, on_failure=on_failure)
    ms = _met(r, 2)
    try:
        restart = ms[1].report_failure('{"pe": "pe3"}', timeout=20)
        assert restart == Restart(1, channel, 0.25) and asked == [(1, '{"pe": "pe3"}')]
        with pytest.raises(Restart) as other:  # the other agent, running, takes it at its next look
            for _ in range(200):
                ms[0].stop_requested()
                threading.Event().wait(0.02)
        assert other.value == restart
        ms[0]._send(1, "a round of generation 0, sent late")  # dropped: not this generation's
        for m in ms:
            m.restarted(restart)
        got: dict[int, list[str]] = {}
        threads = [threading.Thread(target=lambda m=m: got.setdefault(m.node, m.gather(f"g1 {m.node}"))) for m in ms]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert got == {0: ["g1 0", "g1 1"], 1: ["g1 0", "g1 1"]}
        assert r.gen == 1 and r.stale == 1 and r.rejected == 0
    finally:
        for m in ms:
            m.close()
        r.close()


def test_a_refused_restart_answers_the_failed_agent_none():
    r = Rendezvous(1, local=True, on_failure=lambda node, report: None)
    (m,) = _met(r, 1)
    try:
        assert m.report_failure('{"pe": "pe0"}', timeout=20) is None
        assert r.gen == 0 and len(r.failures) == 1
    finally:
        m.close()
        r.close()


@pytest.mark.parametrize("change", [
    {"gen": 0}, {"gen": True}, {"gen": 1.0}, {"t": "fail"}, {"v": 2}, {"delay": -1}, {"delay": 1e9}, {"delay": "1"}, {"extra": 1},
    {"checkpoint": {"endpoint": "ipc:///tmp/x"}}, {"checkpoint": {"endpoint": "tcp://a b:1"}},
    {"checkpoint": {"server_key": "short"}}, {"checkpoint": {"token": "ZZ" * 16}},
    {"checkpoint": {"interval": 0}}, {"checkpoint": {"more": "x"}},
])
def test_a_malformed_restart_is_refused_field_by_field(change):
    doc = control.RestartInPlace(1, _channel(), 0.5).to_doc()
    assert check_restart(control.check(doc, control.RestartInPlace), 0) == Restart(1, doc["checkpoint"], 0.5)
    if "checkpoint" in change:
        doc["checkpoint"] = {**doc["checkpoint"], **change["checkpoint"]}
    else:
        doc.update(change)
    with pytest.raises(ValueError):  # control.ControlError names the field
        check_restart(control.check(doc, control.RestartInPlace), 0)
