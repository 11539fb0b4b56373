"""Where the node agents of a multi-node run meet: on the driver, not through Spark's barrier calls.

A node agent meets the others three times per run (``agent.run_node``): to exchange PE
endpoints and public keys, to start the sources together, and once every node's PEs
are done. ``BarrierTaskContext.allGather()`` / ``barrier()`` did this, but each call
whose reply is not there at the first look costs a whole second (the JVM side sleeps
1 s between looks at the RPC; measured 1.00 s or 0.002 s per call), and on several
nodes some node always waits: up to 3 s per run, and per restart of a checkpointed run.

``Rendezvous`` is a ZeroMQ ROUTER socket on the driver, CURVE with a fresh server key
per run; every message carries the run's token. The key and token reach the agents only
inside the job's task closure, over Spark's authenticated, encrypted RPC (issue 25), as
the checkpoint coordinator's do. ``meet(address, node, nodes)`` gives an agent its
``gather(msg) -> [every node's msg, in node order]`` and ``barrier()``; round ``r`` is
answered when every node sent its ``r``-th message. A node that never comes is a failed
Spark task, and a barrier stage kills its other tasks; an agent also gives up after
``timeout`` seconds of a round that has a deadline (the first two), naming the round.

It is also the driver's way to the agents while a run goes on: a stop request (Ctrl-C or
SIGTERM on a non-local master, where the PEs cannot see the driver's stop file) is sent
to every agent (``Rendezvous.request_stop``); an agent whose PEs read a live, unbounded
source ends them as a local run's stop file does and answers ``stopping``, any other
answers ``bounded`` (round ``STATUS``, answered by nobody). The driver then lets the run
drain, or cancels it when no node is live, as a local run does.

And it is how a checkpointed run recovers *in place* (``deploy.checkpointed_run``): an agent
whose PE failed after every PE of the node had started kills its PEs and reports the
failure (round ``FAILED``, the agent's report as JSON); the driver (``on_failure``)
answers every agent with a restart (generation ``g + 1``, the new checkpoint
coordinator's channel, the backoff) or, when it will not restart in place, with a
refusal (the failed agent then fails its Spark task as before). On a restart each agent
stops its PEs and starts them again from the checkpoint, and the generation's meetings
start again at round 0; messages of an older generation are dropped.

Nothing received is trusted before it is checked: a message to the driver is a
``control.Meet`` record (token, compared in constant time; generation, round and node,
ints in range; msg, a string); anything else is dropped and counted. An agent takes from
the driver only a ``spadeopt.control`` record: a round's answer (``Gathered``), the stop
request (``StopRequest``), a refusal (``Refusal``) or a restart (``RestartInPlace``) whose every
field ``control`` checked, to a later generation (``check_restart``), on a CURVE link
whose server key came with the job. A failure report is a ``control.NodeFailure`` line.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from spadeopt import control
from spadeopt.runtime.security import driver_server, keypair

POLL_MS = 20
STATUS = 15  # the round of an agent's answer to a stop request: recorded, never answered
FAILED = 14  # the round of an agent's failure report (a checkpointed run restarting in place)
MAX_GEN, MAX_DELAY_S = control.MAX_GEN, control.MAX_DELAY_S  # generations of a run; the longest backoff


@dataclass
class Restart(Exception):  # noqa: N818 - a request, raised out of the agent's waits
    """The driver's request to restart every PE in place: generation ``gen``, the new
    coordinator's channel (``plan.deployment.CheckpointChannel`` as JSON), ``delay``
    seconds of backoff after the PEs are stopped."""

    gen: int
    checkpoint: dict[str, Any]
    delay: float


def check_restart(msg: control.RestartInPlace, gen: int) -> Restart:
    """The restart in ``msg`` (its fields checked by ``control``); ``ValueError`` if it
    is not to a generation after ``gen``."""
    if not gen < msg.gen:
        raise ValueError(f"a restart to generation {msg.gen!r} after {gen}")
    return Restart(msg.gen, dict(msg.checkpoint), float(msg.delay))


class Rendezvous:
    """The driver's side for one run of ``nodes`` nodes (a thread answering rounds).

    ``on_failure(node, report)`` (a checkpointed run that may restart in place) is
    called on a thread of its own with the first failure report of a generation (the
    agent's JSON report) and returns ``{"checkpoint": channel, "delay": s}`` to restart
    every agent's PEs in place, or None to refuse (the agent fails its task)."""

    def __init__(self, nodes: int, local: bool,
                 on_failure: Callable[[int, str], dict[str, Any] | None] | None = None) -> None:
        self.nodes = nodes
        self.on_failure = on_failure
        self.gen = 0  # the current generation (in-place restarts so far)
        self.stale = 0  # messages of an older generation, dropped
        self.failures: list[tuple[int, int, str]] = []  # (gen, node, report) as they came
        self._deciding: threading.Thread | None = None
        self._outbox: list[control.Record] = []  # for every agent, sent by the loop thread
        self._lock = threading.Lock()
        self.token = secrets.token_hex(16)
        self.ctx = zmq.Context.instance()
        # endpoint tables: far less than 16 MiB
        self.sock, self.server_key, self.endpoint = driver_server(zmq.ROUTER, local, 16 << 20)
        self.rounds: dict[int, dict[int, tuple[bytes, str]]] = {}
        self.rejected = 0
        self.idents: dict[int, bytes] = {}  # node -> its agent's socket identity
        self.answers: dict[int, str] = {}  # node -> its answer to the stop request
        self.decide_error: str | None = None
        self._answered = threading.Condition()
        self._stop_asked = threading.Event()  # sent by the loop thread (the socket is its own)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="node-rendezvous")
        self._thread.start()

    def address(self) -> dict[str, str]:
        """What an agent needs to meet the others (travels in the task closure only)."""
        return {"endpoint": self.endpoint, "server_key": self.server_key, "token": self.token}

    def _loop(self) -> None:
        sent_stop: set[int] = set()
        while not self._stop.is_set():
            if self._stop_asked.is_set():
                for node, ident in list(self.idents.items()):
                    if node not in sent_stop:
                        self.sock.send_multipart([ident, control.StopRequest().to_bytes()])
                        sent_stop.add(node)
            with self._lock:
                outbox, self._outbox = self._outbox, []
            for msg in outbox:
                if isinstance(msg, control.RestartInPlace):  # the next generation's meetings start afresh
                    self.gen = msg.gen
                    self.rounds.clear()
                for ident in list(self.idents.values()):
                    self.sock.send_multipart([ident, msg.to_bytes()])
            if not self.sock.poll(POLL_MS):
                continue
            try:
                ident, data = self.sock.recv_multipart(zmq.NOBLOCK)
                gen, r, node, msg = self._check(data)
            except (zmq.Again, ValueError):
                self.rejected += 1
                continue
            self.idents.setdefault(node, ident)
            if r == STATUS:
                with self._answered:
                    self.answers[node] = msg
                    self._answered.notify_all()
                continue
            if gen != self.gen:  # sent before that agent took the restart
                self.stale += 1
                continue
            if r == FAILED:
                self._failed(node, msg)
                continue
            got = self.rounds.setdefault(r, {})
            got[node] = (ident, msg)
            if len(got) == self.nodes:
                reply = control.Gathered([got[n][1] for n in range(self.nodes)]).to_bytes()
                for ident_n, _ in got.values():
                    self.sock.send_multipart([ident_n, reply])
                del self.rounds[r]

    def _check(self, data: bytes) -> tuple[int, int, int, str]:
        m = control.decode(data, control.Meet)  # ControlError (a ValueError) names the field refused
        if not hmac.compare_digest(m.token.encode(), self.token.encode()):
            raise ValueError("wrong token")
        if not m.node < self.nodes:
            raise ValueError(f"node {m.node} of a run of {self.nodes}")
        return m.gen, m.round, m.node, m.msg

    def _failed(self, node: int, report: str) -> None:
        """A failure report of the current generation: the first one is decided (on a
        thread of its own: ``on_failure`` may wait for the backoff), the others of the
        same generation are only recorded (the decision answers every agent)."""
        self.failures.append((self.gen, node, report))
        if self._deciding is not None and self._deciding.is_alive():
            return
        if sum(1 for g, _, _ in self.failures if g == self.gen) > 1:
            return  # this generation's failure is decided already
        gen = self.gen

        def decide() -> None:
            decision = None
            if self.on_failure is not None and len(self.idents) == self.nodes:  # every agent reachable
                try:
                    decision = self.on_failure(node, report)
                except Exception as exc:  # noqa: BLE001 - then no restart in place: the task fails
                    decision = None
                    self.decide_error = f"{type(exc).__name__}: {exc}"
            msg = control.Refusal(gen) if decision is None else \
                control.RestartInPlace(gen + 1, decision["checkpoint"], float(decision["delay"]))
            with self._lock:
                self._outbox.append(msg)

        self._deciding = threading.Thread(target=decide, daemon=True, name="rendezvous-restart")
        self._deciding.start()

    def request_stop(self, timeout: float = 5.0) -> bool:
        """Ask every agent to end its PEs' live sources; True when a node answered that it
        is stopping (its PEs read a live, unbounded source), False when every node
        answered ``bounded`` or not within ``timeout`` seconds (the caller cancels)."""
        self._stop_asked.set()
        with self._answered:
            self._answered.wait_for(lambda: "stopping" in self.answers.values()
                                    or len(self.answers) == self.nodes, timeout)
            return "stopping" in self.answers.values()

    def close(self) -> None:
        if self._deciding is not None:  # a restart being decided completes (the caller reads its outcome)
            self._deciding.join(timeout=120)
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close(0)


class Meeting:
    """An agent's side: ``gather`` and ``barrier`` for ``agent.run_node``; the stop
    request, and (a run that restarts in place) the failure report and the restart.
    A restart that comes while the agent waits (``gather``, ``stop_requested``) is
    raised as :class:`Restart`."""

    def __init__(self, address: dict[str, str], node: int, timeout: float) -> None:
        self.node, self.token, self.timeout = node, address["token"], timeout
        self.round = 0
        self.gen = 0
        self.refused = -1  # the last generation whose failure the driver will not restart in place
        self.stop_asked = False  # a stop request came and was not yet taken (stop_requested)
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        pub, sec = keypair()
        self.sock.curve_publickey, self.sock.curve_secretkey = pub.encode(), sec.encode()
        self.sock.curve_serverkey = address["server_key"].encode()
        self.sock.connect(address["endpoint"])

    def gather(self, msg: str, deadline: bool = True) -> list[str]:
        r = self.round
        self.round += 1
        self._send(r, msg)
        waited = 0.0
        while True:
            while not self.sock.poll(1000):
                waited += 1.0
                if deadline and waited >= self.timeout:
                    raise TimeoutError(f"node {self.node}: the other nodes did not reach meeting {r + 1} of the "
                                       f"run within {self.timeout:.0f} s "
                                       f"(driver {self.sock.getsockopt_string(zmq.LAST_ENDPOINT)})")
            got = self._take()
            if got is not None:
                return got
            if self.stop_asked:
                self.stop_asked = False  # this node's PEs are done (or not started): nothing to stop
                self.answer_stop(False)

    def stop_requested(self) -> bool:
        """Has the driver asked for a stop since the last call? (Never blocks; raises
        :class:`Restart` when the driver restarts the PEs in place.)"""
        while self.sock.poll(0):
            self._take()  # a round's answer cannot come while the run goes on: none is asked
        asked, self.stop_asked = self.stop_asked, False
        return asked

    def answer_stop(self, stopping: bool) -> None:
        self._send(STATUS, "stopping" if stopping else "bounded")

    def report_failure(self, report: str, timeout: float = MAX_DELAY_S + 60.0) -> Restart | None:
        """Tell the driver this node's PEs failed (``report``: the agent's JSON report);
        the restart it answers, or None (it will not restart in place, or said nothing
        within ``timeout`` seconds)."""
        self._send(FAILED, report)
        gen = self.gen
        waited = 0.0
        while waited < timeout:
            if not self.sock.poll(1000):
                waited += 1.0
                continue
            try:
                self._take()  # a round's answer of this generation is of no use now
            except Restart as restart:
                return restart
            if self.refused >= gen:
                return None
            if self.stop_asked:
                self.stop_asked = False
                self.answer_stop(False)
        return None

    def restarted(self, restart: Restart) -> None:
        """This agent's PEs restart as generation ``restart.gen``: its meetings start afresh."""
        self.gen, self.round = restart.gen, 0

    def _send(self, r: int, msg: str) -> None:
        self.sock.send(control.Meet(self.token, self.gen, r, self.node, msg).to_bytes())

    def _take(self) -> list[str] | None:
        """The next message from the driver: a round's answer; None for a stop request or
        a refusal; a restart is raised."""
        msg = control.decode(self.sock.recv(), *control.TO_AGENT)  # ControlError (a ValueError) names the field
        if isinstance(msg, control.Gathered):  # a round's answer
            return msg.msgs
        if isinstance(msg, control.StopRequest):
            self.stop_asked = True
            return None
        if isinstance(msg, control.Refusal):
            self.refused = max(self.refused, msg.gen)
            return None
        raise check_restart(msg, self.gen)

    def barrier(self) -> None:
        self.gather("", deadline=self.round < 2)  # the last waits for the slowest node's PEs: no deadline

    def close(self) -> None:
        self.sock.close(0)


def meet(address: dict[str, Any] | None, node: int, timeout: float) -> Meeting | None:
    """The agent's meeting for ``address`` (None: a one-node run, nobody to meet)."""
    return None if address is None else Meeting(address, node, timeout)
