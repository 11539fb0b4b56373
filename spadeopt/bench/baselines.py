"""Hand-written baselines that the fused-overhead benchmark compares spadeopt against."""

from __future__ import annotations

import multiprocessing as mp
import time
from itertools import islice

import msgpack
import zmq

from spadeopt.toolkit.sources import counter


def forward(t):
    return t


def hand_loop(n_ops: int, tuples: int, size: int, work: int) -> float:
    """A plain Python loop: each tuple goes through ``n_ops`` calls of the operator logic
    (identity, or what the chain app's operators compute when ``work`` > 0: the tuple
    ``(seq, spin(payload, work))``) and is counted. Tuples/s."""
    from apps.chain import spin

    count = 0
    t0 = time.perf_counter()
    if work:
        for t in counter(tuples, size, seed=1):
            for _ in range(n_ops):
                t = (t[0], spin(t[1], work))
            count += 1
    else:
        ops = [forward] * n_ops
        for t in counter(tuples, size, seed=1):
            for op in ops:
                t = op(t)
            count += 1
    return count / (time.perf_counter() - t0)


def _receiver(endpoint: str, q, server_keys: tuple[bytes, bytes] | None = None) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, 32)
    if server_keys is not None:
        s.curve_server = True
        s.curve_publickey, s.curve_secretkey = server_keys
    s.bind(endpoint)
    q.put("bound")
    n = 0
    t0 = None
    while True:
        msg = s.recv()
        if not msg:
            break
        if t0 is None:
            t0 = time.perf_counter()
        n += len(msgpack.unpackb(msg, use_list=False, raw=False))
    q.put((n, time.perf_counter() - t0))


def bare_zmq(tuples: int, size: int, batch: int, endpoint: str, curve: bool = False) -> float:
    """A bare sender/receiver pair over pyzmq PUSH/PULL with msgpack batches. Tuples/s.

    ``curve``: the pair speaks CURVE (fresh keys, no ZAP handler): libzmq's own cost of
    encryption, the floor for any authenticated link."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = zmq.curve_keypair() if curve else None
    p = ctx.Process(target=_receiver, args=(endpoint, q, server))
    p.start()
    q.get()
    zc = zmq.Context()
    s = zc.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, 32)
    if server is not None:
        s.curve_publickey, s.curve_secretkey = zmq.curve_keypair()
        s.curve_serverkey = server[0]
    s.connect(endpoint)
    packer = msgpack.Packer()
    t0 = time.perf_counter()
    it = counter(tuples, size, seed=1)
    while True:
        b = list(islice(it, batch))
        if not b:
            break
        s.send(packer.pack(b), copy=False)
    s.send(b"")
    n, recv_s = q.get()
    sent_s = time.perf_counter() - t0
    p.join()
    s.close()
    zc.term()
    return n / max(sent_s, recv_s)
