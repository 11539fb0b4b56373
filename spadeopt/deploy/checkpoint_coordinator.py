"""The driver's checkpoint coordinator: one attempt's ROUTER socket to every PE.

A ZeroMQ ROUTER socket on the driver (CURVE, a fresh server key per run; every message
carries the run's token, which reaches the PEs through Spark's encrypted RPC and their
agent's stdin). Each PE says hello and gets its part of the checkpoint it restores from
(or none); every ``interval`` seconds the coordinator triggers the next checkpoint in
the PEs that have sources (one at a time: the next is triggered when this one completed
or after ``TIMEOUT_INTERVALS`` intervals); each PE sends its part when it has aligned
the barrier. A checkpoint counts when every PE's part is stored
(``checkpoint_store.CheckpointStore.write``); the PEs are then told (``complete``): a
transactional sink (Redis) appends that checkpoint's records with a marker of its id in
one transaction. Every message is a ``spadeopt.control`` record; the PE's end is
``runtime.checkpoint_channel``.
"""

from __future__ import annotations

import hashlib
import threading
import time

import zmq

from spadeopt import control
from spadeopt.deploy.checkpoint_store import Checkpoint, CheckpointStore
from spadeopt.plan.deployment import CheckpointChannel, Deployment

TIMEOUT_INTERVALS = 10  # a checkpoint not complete after this many intervals is given up


class Coordinator:
    """One attempt's coordinator (see the module doc)."""

    def __init__(self, store: CheckpointStore, deploy: Deployment, interval: float,
                 restore: Checkpoint | None, local: bool = True) -> None:
        from spadeopt.runtime.checkpoint_channel import new_token
        from spadeopt.runtime.security import driver_server

        self.store, self.deploy, self.interval, self.restore = store, deploy, interval, restore
        self.lineage = store.lineage()
        self.pes = {p.pe for p in deploy.pes}
        self.token = new_token()
        self.ctx = zmq.Context.instance()
        self.sock, self.server_key, self.endpoint = driver_server(zmq.ROUTER, local)
        self.ids: dict[str, bytes] = {}  # PE -> its socket identity
        self.sources: set[str] = set()
        self.parts: dict[int, dict[str, tuple[bytes, dict[str, bytes]]]] = {}
        self.completed: list[int] = []
        self.last = restore.id if restore else 0  # the last checkpoint triggered
        self.t_running: float | None = None
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.t_output: float | None = None  # when a PE's sinks first took a tuple (driver's clock)
        self.sizes: list[int] = []
        self.align_s: list[float] = []
        self._triggered_at: dict[int, float] = {}
        self._stop = threading.Event()
        self.error: str | None = None
        self.rejected = 0
        self._thread = threading.Thread(target=self._loop, daemon=True, name="checkpoint-coordinator")
        self._thread.start()

    def channel(self) -> CheckpointChannel:
        return CheckpointChannel(self.endpoint, self.server_key, self.token, self.interval)

    def _loop(self) -> None:
        next_at = None
        while not self._stop.is_set():
            if self.sock.poll(20):
                while True:
                    try:
                        ident, data = self.sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    except ValueError:
                        self.rejected += 1
                        continue
                    try:
                        self._handle(ident, data)
                    except Exception as exc:  # noqa: BLE001 - a message we cannot use is refused, counted
                        self.rejected += 1
                        self.error = f"{type(exc).__name__}: {exc}"
            now = time.time()
            if self.t_running is None:
                continue
            if next_at is None:
                next_at = self.t_running + self.interval
            pending = self.last not in self.completed and self.last in self._triggered_at
            stale = pending and now - self._triggered_at[self.last] > TIMEOUT_INTERVALS * self.interval
            if now >= next_at and (not pending or stale):
                self.last += 1
                self._triggered_at[self.last] = now
                for pe in sorted(self.sources):
                    self._send(pe, control.Trigger(self.last))
                next_at = now + self.interval

    def _send(self, pe: str, msg: control.Record) -> None:
        self.sock.send_multipart([self.ids[pe], msg.to_bytes()])

    def _handle(self, ident: bytes, data: bytes) -> None:
        import hmac

        msg = control.decode(data, *control.FROM_PE)  # every field checked; ControlError names the one refused
        if not hmac.compare_digest(msg.token.encode(), self.token.encode()):
            raise ValueError("a message without this run's token")
        pe = msg.pe
        if pe not in self.pes:
            raise ValueError(f"a message from unknown PE {pe!r}")
        if isinstance(msg, control.Hello):
            self.ids[pe] = ident
            if msg.sources:
                self.sources.add(pe)
            self._send(pe, control.Restore(self.restore.parts.get(pe) if self.restore else None, self.lineage,
                                           self.store.run_id))
            if set(self.ids) == self.pes:
                self.t_running = time.time()
        elif isinstance(msg, control.FirstOutput):
            if self.t_output is None:
                self.t_output = time.time()
        elif isinstance(msg, control.Part):
            n = msg.id
            if hashlib.sha256(msg.state).hexdigest() != msg.sha256:
                raise ValueError(f"a part from PE {pe} whose SHA-256 does not match")
            self.parts.setdefault(n, {})[pe] = (msg.state, msg.sinks)
            self._send(pe, control.Ack(n))
            if set(self.parts[n]) == self.pes:
                self._complete(n)

    def _complete(self, n: int) -> None:
        got = self.parts.pop(n)
        for old in [k for k in self.parts if k < n]:  # never complete now: their lines come with n's
            older = self.parts.pop(old)
            for pe, (_, sinks) in older.items():
                got[pe] = (got[pe][0], _join(sinks, got[pe][1]))
        sinks: dict[str, bytes] = {}
        for _pe, (_, s) in sorted(got.items()):
            for name, data in s.items():
                sinks[name] = sinks.get(name, b"") + data
        self.store.write(n, self.deploy, {pe: st for pe, (st, _) in got.items()}, sinks)
        self.completed.append(n)
        for pe in sorted(self.ids):  # transactional sinks (Redis) commit their epochs up to n now
            self._send(pe, control.Complete(n))
        self.sizes.append(sum(len(st) for st, _ in got.values()))
        if n in self._triggered_at:
            self.align_s.append(time.time() - self._triggered_at[n])
        self.t_last = time.time()  # the live metrics' checkpoint age
        if self.t_first is None:
            self.t_first = time.time()

    def finish(self) -> dict[str, bytes]:
        """The run succeeded: the lines of checkpoints that never completed (they were
        taken after a source ended), in checkpoint order, per sink."""
        self.close()
        out: dict[str, bytes] = {}
        for n in sorted(self.parts):
            for _pe, (_, s) in sorted(self.parts[n].items()):
                for name, data in s.items():
                    out[name] = out.get(name, b"") + data
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.sock.close(linger=0)


def _join(a: dict[str, bytes], b: dict[str, bytes]) -> dict[str, bytes]:
    return {k: a.get(k, b"") + b.get(k, b"") for k in sorted(set(a) | set(b))}
