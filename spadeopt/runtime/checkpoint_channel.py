"""The PE's channel to the driver's checkpoint coordinator, and ``attach``.

``Channel`` is the PE's end of the coordinator link (``deploy.checkpoint_coordinator``
is the other): every message is a ``spadeopt.control`` record, refused when unknown or
malformed. ``attach`` makes a ``PERuntime`` take part in checkpoints
(``runtime.barrier_alignment``): restore, stage the sinks, take triggers.
"""

from __future__ import annotations

import hashlib
import os
import queue
import secrets
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from spadeopt import control
from spadeopt.runtime.barrier_alignment import Checkpointer
from spadeopt.runtime.checkpoint_codec import CheckpointError


class Channel:
    """A DEALER socket to the coordinator (CURVE, the coordinator's server key; every
    message carries the run's token). ``hello`` is synchronous (the restore part comes
    back); afterwards one thread owns the socket: it takes triggers and sends parts.

    The thread sleeps in a poll of the socket and of a wake-up pipe (``send_part``,
    ``finish`` write a byte to it), not in a 20 ms poll loop: each wake-up takes the GIL
    from the thread running the operators, and on a loaded machine a GIL hand-off can
    wait for the scheduler (docs/decisions/041-checkpoint-cost-and-running-value-windows.md)."""

    IDLE_MS = 1000  # the longest sleep once there is nothing to watch (a wake-up ends it)
    WATCH_MS = 20  # the sleep while waiting for the first output (a restart's)

    def __init__(self, pe: str, cfg: dict[str, Any]) -> None:
        from spadeopt.runtime.security import keypair

        self.pe = pe
        self.token = cfg["token"]
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 10_000)
        pub, sec = keypair()
        self.sock.curve_secretkey, self.sock.curve_publickey = sec.encode(), pub.encode()
        self.sock.curve_serverkey = cfg["server_key"].encode()
        self.sock.connect(cfg["endpoint"])
        self.out: queue.Queue = queue.Queue()
        self.unacked: set[int] = set()
        self.acked = threading.Condition()
        self.on_trigger: Callable[[int], None] = lambda n: None
        self.on_complete: Callable[[int], None] = lambda n: None
        self.lineage = self.run = ""  # the checkpoint directory's identity and this run's (hello)
        self.outputs: Callable[[], int] | None = None  # tuples the PE's sinks took (attach)
        self._outputs_at_start = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):  # full: a wake-up is pending anyway; closed: finished
            pass

    def _send(self, msg: control.Record) -> None:
        self.sock.send(msg.to_bytes())

    def _recv(self, timeout: float) -> control.Record | None:
        """The coordinator's next message (``control.TO_PE``); ``ControlError`` if refused."""
        if not self.sock.poll(int(timeout * 1000)):
            return None
        return control.decode(self.sock.recv(), *control.TO_PE)

    def hello(self, has_sources: bool, timeout: float = 60.0) -> bytes | None:
        self._send(control.Hello(self.pe, self.token, has_sources))
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                msg = self._recv(1.0)
            except control.ControlError as exc:
                raise CheckpointError(f"PE {self.pe}: the coordinator's message was refused: {exc}") from None
            if isinstance(msg, control.Restore):
                self.lineage, self.run = msg.lineage, msg.run
                return msg.part
        raise CheckpointError(f"PE {self.pe}: the checkpoint coordinator did not answer within {timeout:.0f} s")

    def start(self, outputs: Callable[[], int] | None = None) -> None:
        """Take triggers and send parts from now on; ``outputs()`` (the tuples this PE's
        sinks took) is watched, and the coordinator told once when it first grows (the
        time to the first new output after a restart)."""
        if outputs is not None:
            self.outputs, self._outputs_at_start = outputs, outputs()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="checkpoints")
        self._thread.start()

    def send_part(self, n: int, part: tuple[bytes, dict[str, bytes]]) -> None:
        with self.acked:
            self.unacked.add(n)
        self.out.put(control.Part(self.pe, self.token, n, part[0], part[1], hashlib.sha256(part[0]).hexdigest()))
        self._wake()

    def _loop(self) -> None:
        outputs = self.outputs
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        while True:
            stopping = self._stop.is_set()  # a run that ended fast still reports its first output
            if outputs is not None and outputs() > self._outputs_at_start:  # once: a restart's first new output
                self.out.put(control.FirstOutput(self.pe, self.token))
                outputs = None
            try:
                while True:
                    self._send(self.out.get_nowait())
            except queue.Empty:
                pass
            if stopping:
                return
            ready = dict(poller.poll(self.WATCH_MS if outputs is not None else self.IDLE_MS))
            if self._wake_r in ready:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            if self.sock in ready:
                self._take_all()

    def _take_all(self) -> None:
        """Act on every message waiting (channel thread); a refused one is logged and dropped."""
        while True:
            try:
                msg = self._recv(0)
            except control.ControlError as exc:
                print(f"spadeopt: PE {self.pe}: refused a message from the checkpoint coordinator: {exc}",
                      file=sys.stderr, flush=True)
                continue
            if msg is None:
                return
            if isinstance(msg, control.Trigger):
                self.on_trigger(msg.id)
            elif isinstance(msg, control.Complete):
                self.on_complete(msg.id)
            elif isinstance(msg, control.Ack):
                with self.acked:
                    self.unacked.discard(msg.id)
                    self.acked.notify_all()

    def finish(self, timeout: float = 60.0) -> None:
        """Wait until the coordinator has every part this PE sent (end of the run)."""
        deadline = time.time() + timeout
        with self.acked:
            while (self.unacked or not self.out.empty()) and time.time() < deadline:
                self.acked.wait(0.05)
        if self.unacked:
            print(f"spadeopt: PE {self.pe}: checkpoint part(s) {sorted(self.unacked)} not acknowledged by "
                  f"the coordinator", file=sys.stderr, flush=True)
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(2.0)
        self.sock.close(linger=0)
        if self._thread is None or not self._thread.is_alive():
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for fd in fds:
                os.close(fd)


def attach(rt: Any, cfg: dict[str, Any]) -> Checkpointer:
    """Make ``rt`` take part in checkpoints (``cfg``: the coordinator's endpoint,
    server key and token): restore its state if the coordinator has a checkpoint,
    stage its file sinks, and start taking triggers."""
    channel = Channel(rt.pe_id, cfg)
    ck = Checkpointer(rt, channel)
    rt.checkpoints = ck
    part = channel.hello(bool(rt.sources))
    n = None
    if part is not None:
        n = ck.restore(part)
        print(f"spadeopt: PE {rt.pe_id} restored checkpoint {n}", file=sys.stderr, flush=True)
    for name, s in rt.sinks.items():
        s.stage()
        conn = s.connector
        if conn is not None and getattr(conn, "transactional", False):  # exactly once (the Redis sink)
            conn.stage(f"{rt.pe_id}/{name}", channel.lineage, channel.run)
            ck.transactional[name] = conn
    if n is not None:  # the restored checkpoint is complete: its epochs are committed (once) now
        for name, epochs in sorted(ck.recovered.items()):
            try:
                ck.transactional[name].recover(epochs)
            except ValueError as exc:
                raise CheckpointError(f"PE {rt.pe_id}: {exc}") from None
        for conn in ck.transactional.values():
            conn.commit(n)
        ck.recovered = {}
    channel.on_trigger = ck.on_trigger
    channel.on_complete = ck.complete
    sinks = list(rt.sinks.values())
    channel.start((lambda: sum(s.count for s in sinks)) if sinks else None)
    return ck


def new_token() -> str:
    return secrets.token_hex(16)
