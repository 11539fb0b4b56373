"""A port shared by threads sends each control frame between whole batches."""

from __future__ import annotations

import sys
import threading

import zmq

from spadeopt.runtime import transport
from spadeopt.wire import BARRIER_TAG, parse_barrier, unpack


def _stream(sock: zmq.Socket) -> list:
    """What one link delivered: batch first values and ('barrier', id), in arrival order."""
    seen = []
    while sock.poll(200):
        data = sock.recv()
        if data[:1] == BARRIER_TAG:
            seen.append(("barrier", parse_barrier(data)[0]))
        else:
            seen.append(unpack(data)[0][0])
    return seen


def test_barriers_sent_by_another_thread_fall_between_batches_on_every_link():
    """Without the lock around ``barrier`` the two threads share the sockets: the links
    disagree on where the barrier falls, or libzmq crashes (tried)."""
    ctx = zmq.Context()
    sender = transport.Sender("op.out0", locked=True)
    pulls = []
    for i in range(2):
        pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
        for s, opt in ((pull, zmq.RCVHWM), (push, zmq.SNDHWM)):
            s.setsockopt(opt, 0)
        pull.bind(f"inproc://link{i}")
        push.connect(f"inproc://link{i}")
        sender.sockets.append(push)
        sender.links.append(f"link{i}")
        pulls.append(pull)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can

    def batches():
        for i in range(20000):
            sender([(i,)])

    try:
        t = threading.Thread(target=batches)
        t.start()
        for c in range(2000):
            sender.barrier(c)
        t.join()
    finally:
        sys.setswitchinterval(old)
    streams = [_stream(p) for p in pulls]
    for s in sender.sockets + pulls:
        s.close(0)
    ctx.term()
    assert len(streams[0]) == 22000
    assert streams[0] == streams[1]
