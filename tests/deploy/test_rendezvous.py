"""The driver's rendezvous of node agents: rounds answered in node order when all came;
strangers and wrong tokens get nothing."""

from __future__ import annotations

import threading

import msgpack
import pytest
import zmq

from spadeopt.deploy.rendezvous import Meeting, Rendezvous
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
    assert not raw.poll(500)
    raw.close(0)
    r.close()
    assert r.rejected == 5 and not r.rounds


def test_a_client_without_the_servers_key_cannot_talk_to_it():
    r = Rendezvous(1, local=True)
    plain = zmq.Context.instance().socket(zmq.DEALER)
    plain.connect(r.endpoint)
    plain.send(msgpack.packb({"token": r.token, "round": 0, "node": 0, "msg": "x"}))
    assert not plain.poll(500)  # no CURVE handshake: nothing gets through
    plain.close(0)
    r.close()
