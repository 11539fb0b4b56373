"""Hand-written baselines that the fused-overhead benchmark compares spadeopt against."""

from __future__ import annotations

import multiprocessing as mp
import time
from itertools import islice

import msgpack
import zmq

from spadeopt.toolkit.sources import counter

ROWS5_SCHEMA = "seq:int, ts:float, key:str, value:int, payload:bytes"
"""The 5-attribute tuple of the link benchmark's CPU-per-tuple case."""


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


def rows5(n: int, size: int = 100, block: int = 4096) -> list[tuple]:
    """``n`` tuples of ``ROWS5_SCHEMA`` whose msgpack encoding is about ``size`` bytes:
    one block of ``block`` distinct tuples, repeated (a list: a source reads it by
    slicing, a few ns a tuple, so the sending PE's CPU is what the link costs).

    >>> len(msgpack.packb(rows5(1)[0])) in range(95, 106)
    True
    """
    base = 3_000_000_000  # sequence numbers and values take their usual 5 bytes (uint32)
    head = len(msgpack.packb((base, 0.5, "user-00000", base, b"")))
    payload = bytes(i % 251 for i in range(max(0, size - head)))
    rows = [(base + i, i * 0.25, f"user-{i:05d}", base - i, payload) for i in range(min(n, block))]
    return (rows * (n // block + 1))[:n] if rows else []


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
    c0 = time.process_time()  # the process's CPU (every thread, ZeroMQ's I/O thread too)
    while True:
        msg = s.recv()
        if not msg:
            break
        if t0 is None:
            t0 = time.perf_counter()
        n += len(msgpack.unpackb(msg, use_list=False, raw=False))
    q.put((n, time.perf_counter() - t0, time.process_time() - c0))


def _bare_pair(endpoint: str, curve: bool):
    """The bare receiver (a spawned process reporting on a queue) and a PUSH socket
    connected to it, with CURVE (fresh keys, no ZAP handler) when ``curve``."""
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
    return p, q, zc, s


def bare_zmq(tuples: int, size: int, batch: int, endpoint: str, curve: bool = False) -> float:
    """A bare sender/receiver pair over pyzmq PUSH/PULL with msgpack batches. Tuples/s.

    ``curve``: the pair speaks CURVE (fresh keys, no ZAP handler): libzmq's own cost of
    encryption, the floor for any authenticated link."""
    p, q, zc, s = _bare_pair(endpoint, curve)
    packer = msgpack.Packer()
    t0 = time.perf_counter()
    it = counter(tuples, size, seed=1)
    while True:
        b = list(islice(it, batch))
        if not b:
            break
        s.send(packer.pack(b), copy=False)
    s.send(b"")
    n, recv_s, _ = q.get()
    sent_s = time.perf_counter() - t0
    p.join()
    s.close()
    zc.term()
    return n / max(sent_s, recv_s)


def bare_link_cpu(rows: list[tuple], batch: int, endpoint: str, curve: bool = False) -> dict[str, float]:
    """The bare pair of ``bare_zmq`` sending ``rows`` (a list, cut by slicing as a
    spadeopt source cuts it): tuples/s and each end's process CPU microseconds per tuple
    (``time.process_time``: every thread of the process, libzmq's I/O thread included,
    which is where CURVE encrypts and decrypts)."""
    p, q, zc, s = _bare_pair(endpoint, curve)
    packer = msgpack.Packer()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(rows), batch):
        s.send(packer.pack(rows[i:i + batch]), copy=False)
    s.send(b"")
    n, recv_s, recv_cpu = q.get()
    sent_s, send_cpu = time.perf_counter() - t0, time.process_time() - c0
    p.join()
    s.close()
    zc.term()
    return {"tuples_per_s": n / max(sent_s, recv_s), "send_us": send_cpu / n * 1e6, "receive_us": recv_cpu / n * 1e6}
