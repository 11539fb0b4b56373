"""The driver's side of checkpoints: the coordinator, the store, recovery and resume.

* ``Coordinator``: a ZeroMQ ROUTER socket on the driver (CURVE, a fresh server key per
  run; every message carries the run's token, which reaches the PEs through Spark's
  encrypted RPC and their agent's stdin). Each PE says hello and gets its part of the
  checkpoint it restores from (or none); every ``interval`` seconds the coordinator
  triggers the next checkpoint in the PEs that have sources (one at a time: the next
  is triggered when this one completed or after ``TIMEOUT_INTERVALS`` intervals); each
  PE sends its part when it has aligned the barrier. A checkpoint counts when every
  PE's part is stored (``CheckpointStore.write``).
* ``CheckpointStore``: ``DIR/chk-<id>/<pe>.part`` (msgpack, see
  ``runtime.checkpoint``) and ``MANIFEST.json`` written last (atomically): app, graph
  fingerprint, plan fingerprint, each part's size and SHA-256, the committed length of
  every file sink. File sinks' committed lines are in ``DIR/sinks/<sink>.jsonl``:
  each checkpoint appends the lines its barrier closed, so a replay after recovery
  never writes a line twice (exactly once); at the end of a successful run the sink's
  output file is the committed lines, then the lines after the last checkpoint. The
  last ``keep`` complete checkpoints are kept. When a checkpoint is stored the PEs are
  told (``complete``): a transactional sink (Redis) then appends that checkpoint's
  records with a marker of its id in one transaction (``runtime.checkpoint``);
  ``DIR/LINEAGE`` names the directory's checkpoints in those markers.
* ``run``: a run with checkpoints; when it fails (a PE died, an executor was lost, an
  operator raised) it restarts from the last complete checkpoint, up to
  ``restart_attempts`` times with backoff, and reports each restart (cause,
  checkpoint, time to recover, how). A PE that failed while its agent lives is
  restarted *in place*: the agent reports it on the driver's rendezvous, and every
  agent stops its PEs and starts them again (forked by its zygote) from the checkpoint,
  with a new coordinator, in the same Spark stage. An executor lost (its agent gone),
  or an in-place restart that fails before the PEs run again, fails the stage: then the
  whole barrier stage is restarted, every agent and every PE. ``resume`` continues from a checkpoint directory;
  another app's or plan's checkpoint is refused naming the difference, a corrupt or
  partial one is skipped for the previous complete one, loudly.

Nothing read from a checkpoint is unpickled or executed: the manifest is JSON checked
field by field, parts are checked against their SHA-256 here and decoded by the PE
with ``runtime.checkpoint.decode_state`` (msgpack, known types only).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import zmq

from spadeopt.atomic import write_atomic, write_bytes_atomic
from spadeopt.errors import UsageError
from spadeopt.plan.deployment import CheckpointChannel, Deployment

SCHEMA_VERSION = 1
MANIFEST = "MANIFEST.json"
LINEAGE = "LINEAGE"
TIMEOUT_INTERVALS = 10  # a checkpoint not complete after this many intervals is given up
IN_PLACE = "in place"  # a restart by the live agents, in the same Spark stage
NEW_STAGE = "new stage"  # a restart of the whole Spark barrier stage (an executor lost, an in-place restart failed)
_CHK = re.compile(r"chk-(\d{8})")
_SINK = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")


class CheckpointMismatch(UsageError):
    """A checkpoint of another app, graph or plan."""


def pe_cycle(deploy: Deployment) -> list[str] | None:
    """A cycle of PEs along links (``[a, b, ..., a]``), or None. Aligned barriers cannot
    cross one: a PE forwards barrier ``n`` only once it has it on every input link, and
    on a cycle each PE waits for the other (FMAN on bargain fuses the source with the
    final merges, so the source's PE feeds the group PEs that feed it back)."""
    succ: dict[str, set[str]] = {}
    for ln in deploy.links:
        if ln.src_pe != ln.dst_pe:
            succ.setdefault(ln.src_pe, set()).add(ln.dst_pe)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(pe: str) -> list[str] | None:
        state[pe] = 1
        path.append(pe)
        for nxt in sorted(succ.get(pe, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[pe] = 2
        return None

    for pe in sorted({p.pe for p in deploy.pes}):
        if pe not in state and (found := visit(pe)):
            return found
    return None


def plan_fingerprint(deploy: Deployment) -> str:
    """The plan's identity for a resume: which PEs hold which operators, on which links."""
    doc = {"strategy": deploy.strategy, "pes": sorted([p.pe, list(p.operators)] for p in deploy.pes),
           "links": sorted([ln.src_pe, ln.src, ln.dst_pe, ln.dst] for ln in deploy.links)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Checkpoint:
    id: int
    path: Path
    manifest: dict[str, Any]
    parts: dict[str, bytes]


@dataclass
class Restart:
    attempt: int
    cause: str
    checkpoint: int | None
    failed_at: float
    recovered_s: float | None = None  # failure -> every PE restored and running
    first_output_s: float | None = None  # failure -> the first tuple at a sink after the restore
    first_checkpoint_s: float | None = None  # failure -> the first checkpoint after it completed
    how: str = NEW_STAGE  # IN_PLACE: the agents restarted every PE; NEW_STAGE: a new Spark barrier stage

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class CheckpointStore:
    """Complete checkpoints of one app under ``root`` (see the module doc)."""

    def __init__(self, root: Path, keep: int = 3, say=None) -> None:
        import secrets

        self.root = Path(root)
        self.keep = keep
        self.say = say or (lambda line: None)
        self.sinks = self.root / "sinks"
        self.run_id = secrets.token_hex(8)  # this run's (all its restarts'): a resume is another run

    def lineage(self) -> str:
        """The identity of the checkpoints in this directory (``LINEAGE``, made by the
        first run, kept by every resume): a transactional sink's marker of another lineage
        (an earlier, unrelated run into the same stream) does not hold back this one's."""
        import secrets

        path = self.root / LINEAGE
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if not re.fullmatch(r"[0-9a-f]{32}", text):
            self.root.mkdir(parents=True, exist_ok=True)
            text = secrets.token_hex(16)
            write_atomic(path, text + "\n")
        return text

    def ids(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.root.iterdir() if (m := _CHK.fullmatch(p.name)))

    def _dir(self, n: int) -> Path:
        return self.root / f"chk-{n:08d}"

    def write(self, n: int, deploy: Deployment, parts: dict[str, bytes], sinks: dict[str, bytes]) -> Checkpoint:
        """Store checkpoint ``n``: parts, then the sinks' lines, then the manifest (last,
        atomically: a checkpoint without one is partial and never read)."""
        d = self._dir(n)
        d.mkdir(parents=True, exist_ok=True)
        for pe, data in parts.items():
            write_bytes_atomic(d / f"{pe}.part", data)
        lengths = self.commit_sinks(sinks)
        manifest = {"schema_version": SCHEMA_VERSION, "id": n, "time": time.time(), "app": deploy.app,
                    "fingerprint": deploy.fingerprint, "plan": plan_fingerprint(deploy),
                    "strategy": deploy.strategy,
                    "parts": {pe: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                              for pe, b in sorted(parts.items())},
                    "sinks": lengths}
        write_atomic(d / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        self._prune()
        return Checkpoint(n, d, manifest, parts)

    def commit_sinks(self, sinks: dict[str, bytes]) -> dict[str, int]:
        """Append each sink's lines to its committed file (flushed to disk); every
        committed file's length after it."""
        self.sinks.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(sinks.items()):
            if not _SINK.fullmatch(name):
                raise ValueError(f"bad sink name {name!r}")
            if data:
                with open(self.sinks / f"{name}.jsonl", "ab") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
        return {p.stem: p.stat().st_size for p in sorted(self.sinks.glob("*.jsonl"))}

    def _prune(self) -> None:
        complete = [n for n in self.ids() if (self._dir(n) / MANIFEST).is_file()]
        for n in complete[:-self.keep]:
            shutil.rmtree(self._dir(n), ignore_errors=True)
        newest = complete[-1] if complete else 0
        for n in self.ids():  # partial ones older than the newest complete one
            if n < newest and not (self._dir(n) / MANIFEST).is_file():
                shutil.rmtree(self._dir(n), ignore_errors=True)

    def latest(self, deploy: Deployment) -> Checkpoint | None:
        """The newest complete checkpoint that fits ``deploy``: corrupt or partial ones are
        skipped (said loudly); one of another app, graph or plan is refused."""
        for n in reversed(self.ids()):
            try:
                chk = self._read(n)
            except ValueError as exc:
                self._loud(f"WARNING: checkpoint {n} in {self.root} is unusable ({exc}): skipped for the "
                           f"previous complete one")
                continue
            self.check_fits(chk, deploy)
            return chk
        return None

    def _loud(self, line: str) -> None:
        print(f"spadeopt: {line}", file=sys.stderr, flush=True)
        self.say(line)

    def _read(self, n: int) -> Checkpoint:
        d = self._dir(n)
        path = d / MANIFEST
        if not path.is_file():
            raise ValueError("partial: no manifest (the run stopped before every PE's part was stored)")
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"manifest unreadable: {exc}") from None
        want = {"schema_version": int, "id": int, "app": str, "fingerprint": str, "plan": str,
                "strategy": str, "parts": dict, "sinks": dict}
        bad = [k for k, t in want.items() if type(doc.get(k) if type(doc) is dict else None) is not t]
        if bad:
            raise ValueError(f"manifest fields {', '.join(bad)} missing or of the wrong type")
        if doc["schema_version"] != SCHEMA_VERSION or doc["id"] != n:
            raise ValueError(f"manifest of version {doc['schema_version']} / id {doc['id']}")
        parts = {}
        for pe, meta in doc["parts"].items():
            if not _SINK.fullmatch(pe) or type(meta) is not dict:
                raise ValueError(f"bad part entry {pe!r}")
            try:
                data = (d / f"{pe}.part").read_bytes()
            except OSError as exc:
                raise ValueError(f"part of PE {pe} unreadable: {exc.strerror}") from None
            if len(data) != meta.get("bytes") or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
                raise ValueError(f"part of PE {pe} does not match its manifest (size or SHA-256)")
            parts[pe] = data
        for name, length in doc["sinks"].items():
            if not _SINK.fullmatch(name) or type(length) is not int or length < 0:
                raise ValueError(f"bad sink entry {name!r}")
            have = (self.sinks / f"{name}.jsonl")
            if (have.stat().st_size if have.exists() else 0) < length:
                raise ValueError(f"committed output of sink '{name}' is shorter than the checkpoint says")
        return Checkpoint(n, d, doc, parts)

    @staticmethod
    def check_fits(chk: Checkpoint, deploy: Deployment) -> None:
        m = chk.manifest
        diffs = []
        if m["app"] != deploy.app:
            diffs.append(f"it is app '{m['app']}''s, this is app '{deploy.app}'")
        elif m["fingerprint"] != deploy.fingerprint:
            diffs.append(f"the app's graph differs (fingerprint {m['fingerprint'][:12]} there, "
                         f"{deploy.fingerprint[:12]} here: the app's code or parameters changed)")
        if m["plan"] != plan_fingerprint(deploy) or set(m["parts"]) != {p.pe for p in deploy.pes}:
            diffs.append(f"the plan differs (strategy '{m['strategy']}' with PEs {', '.join(sorted(m['parts']))} "
                         f"there; '{deploy.strategy}' with PEs {', '.join(sorted(p.pe for p in deploy.pes))} here)")
        if diffs:
            raise CheckpointMismatch(f"cannot resume from checkpoint {chk.id} in {chk.path.parent}: "
                                     + "; ".join(diffs) + ". Resume with the build that wrote it, or start "
                                     "afresh with another --checkpoint-dir")

    def rewind_sinks(self, chk: Checkpoint | None) -> None:
        """Cut every committed sink file back to what ``chk`` committed (nothing: none)."""
        lengths = chk.manifest["sinks"] if chk else {}
        if not self.sinks.is_dir():
            return
        for p in self.sinks.glob("*.jsonl"):
            with open(p, "r+b") as f:
                f.truncate(lengths.get(p.stem, 0))


class Coordinator:
    """One attempt's coordinator (see the module doc)."""

    def __init__(self, store: CheckpointStore, deploy: Deployment, interval: float,
                 restore: Checkpoint | None, local: bool = True) -> None:
        from spadeopt.runtime.checkpoint import new_token
        from spadeopt.runtime.security import keypair

        self.store, self.deploy, self.interval, self.restore = store, deploy, interval, restore
        self.lineage = store.lineage()
        self.pes = {p.pe for p in deploy.pes}
        self.token = new_token()
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        pub, sec = keypair()
        self.sock.curve_server = True
        self.sock.curve_secretkey, self.sock.curve_publickey = sec.encode(), pub.encode()
        self.server_key = pub
        host = "127.0.0.1" if local else "*"
        port = self.sock.bind_to_random_port(f"tcp://{host}")
        self.endpoint = f"tcp://{'127.0.0.1' if local else socket.getfqdn()}:{port}"
        self.ids: dict[str, bytes] = {}  # PE -> its socket identity
        self.sources: set[str] = set()
        self.parts: dict[int, dict[str, tuple[bytes, dict[str, bytes]]]] = {}
        self.completed: list[int] = []
        self.last = restore.id if restore else 0  # the last checkpoint triggered
        self.t_running: float | None = None
        self.t_first: float | None = None
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
                    self._send(pe, {"t": "trigger", "id": self.last})
                next_at = now + self.interval

    def _send(self, pe: str, doc: dict) -> None:
        self.sock.send_multipart([self.ids[pe], msgpack.packb(doc)])

    def _handle(self, ident: bytes, data: bytes) -> None:
        import hmac

        doc = msgpack.unpackb(data, raw=False)
        if type(doc) is not dict or not hmac.compare_digest(str(doc.get("token", "")), self.token):
            raise ValueError("a message without this run's token")
        pe = doc.get("pe")
        if pe not in self.pes:
            raise ValueError(f"a message from unknown PE {pe!r}")
        kind = doc.get("t")
        if kind == "hello":
            self.ids[pe] = ident
            if doc.get("sources"):
                self.sources.add(pe)
            self._send(pe, {"t": "restore", "part": self.restore.parts.get(pe) if self.restore else None,
                            "lineage": self.lineage, "run": self.store.run_id})
            if set(self.ids) == self.pes:
                self.t_running = time.time()
        elif kind == "output":
            if self.t_output is None:
                self.t_output = time.time()
        elif kind == "part":
            n, state, sinks = doc.get("id"), doc.get("state"), doc.get("sinks")
            if type(n) is not int or type(state) is not bytes or type(sinks) is not dict or \
                    any(type(k) is not str or type(v) is not bytes for k, v in sinks.items()):
                raise ValueError(f"a malformed part from PE {pe}")
            if hashlib.sha256(state).hexdigest() != doc.get("sha256"):
                raise ValueError(f"a part from PE {pe} whose SHA-256 does not match")
            self.parts.setdefault(n, {})[pe] = (state, sinks)
            self._send(pe, {"t": "ack", "id": n})
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
            self._send(pe, {"t": "complete", "id": n})
        self.sizes.append(sum(len(st) for st, _ in got.values()))
        if n in self._triggered_at:
            self.align_s.append(time.time() - self._triggered_at[n])
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


@dataclass(frozen=True)
class CheckpointOptions:
    """``--checkpoint-interval``, ``--checkpoint-dir``, ``--checkpoints-kept``,
    ``--restart-attempts``, ``--resume``."""

    interval: float
    directory: Path
    keep: int = 3
    restart_attempts: int = 0
    resume: bool = False
    backoff: float = 1.0  # seconds before the first restart; doubled each time, at most 30

    def __post_init__(self) -> None:
        if not (self.interval > 0):
            raise UsageError(f"--checkpoint-interval must be a positive number of seconds, got {self.interval!r}")
        if self.keep < 1:
            raise UsageError(f"--checkpoints-kept must be at least 1, got {self.keep}")
        if self.restart_attempts < 0:
            raise UsageError(f"--restart-attempts must be 0 or more, got {self.restart_attempts}")


@dataclass
class CheckpointReport:
    checkpoints: int = 0
    restarts: list[Restart] = field(default_factory=list)
    resumed_from: int | None = None
    mean_size_bytes: float = 0.0
    mean_checkpoint_s: float = 0.0
    stages: int = 0  # Spark barrier stages run (1 + the restarts that needed a new stage)

    def to_json(self) -> dict[str, Any]:
        return {"checkpoints": self.checkpoints, "stages": self.stages,
                "restarts": [r.to_json() for r in self.restarts],
                "resumed_from": self.resumed_from, "mean_size_bytes": self.mean_size_bytes,
                "mean_checkpoint_s": self.mean_checkpoint_s}


def run(build_dir: Path, options: Any, ck: CheckpointOptions) -> Any:
    """Run a checkpointing build (``deploy.launcher.run_build``) with recovery; returns
    its ``RunResult`` with ``checkpoints`` (a ``CheckpointReport``) set."""
    from spadeopt.deploy.launcher import run_build
    from spadeopt.deploy.masters import is_local
    from spadeopt.errors import RunError
    from spadeopt.plan.artefacts import load_deploy

    build_dir = Path(build_dir)
    deploy = load_deploy(build_dir)
    if not deploy.checkpoints:
        raise UsageError(f"build {build_dir} was generated without checkpoints: its operators do not register "
                         f"their state; rebuild it with `spadeopt build --checkpoints` or `spadeopt optimize "
                         f"--checkpoints`, or give `spadeopt run` the app with --checkpoint-interval")
    cycle = pe_cycle(deploy)
    if cycle:
        raise UsageError(f"checkpoints cannot be taken on this plan: its PEs form a cycle ({' -> '.join(cycle)}), and "
                         f"an aligned barrier cannot cross a cycle of PEs (each would wait for the other's). Use a "
                         f"plan whose PE graph is acyclic (--fusion all or none, or fuse() annotations that do not put "
                         f"a source and the operators after its downstream PEs in one PE)")
    if options.insecure_links or deploy.settings.insecure_links:
        raise UsageError("checkpoints need authenticated links (a barrier is told from a tuple by the link it "
                         "came on): drop --insecure-links")
    store = CheckpointStore(ck.directory, ck.keep, options.say)
    restore = None
    if ck.resume:
        if not store.ids():
            raise UsageError(f"--resume {ck.directory}: no checkpoint there")
        restore = store.latest(deploy)
        if restore is None:
            raise UsageError(f"--resume {ck.directory}: no complete checkpoint there (every one was skipped)")
        options.say(f"resuming '{deploy.app}' from checkpoint {restore.id} ({ck.directory})")
    elif store.ids() or (store.sinks.is_dir() and any(store.sinks.iterdir())):
        raise UsageError(f"--checkpoint-dir {ck.directory} holds checkpoints of an earlier run: resume it with "
                         f"--resume {ck.directory}, or choose an empty directory")
    store.root.mkdir(parents=True, exist_ok=True)
    store.rewind_sinks(restore)
    report = CheckpointReport(resumed_from=restore.id if restore else None)
    master = options.master or deploy.spark.master
    rec = Recovery(store, deploy, ck, report, options.say, restore, local=is_local(master))
    while True:
        try:
            report.stages += 1
            result = run_build(build_dir, options, settings={"checkpoint": rec.coord.channel()},
                               restart_in_place=rec.in_place if ck.restart_attempts else None)
        except RunError as exc:
            if rec.restart(exc, time.time(), NEW_STAGE) is None:
                raise
            time.sleep(_backoff(ck, rec.attempt))
            continue
        tails = rec.finish()
        if options.out is not None:
            finish_sinks(store, Path(options.out), tails)
        result.checkpoints = report.to_json()
        for r in report.restarts:
            options.say(f"restart {r.attempt} ({r.how}): {r.cause} -> checkpoint {r.checkpoint}, running again "
                        f"{r.recovered_s:.1f} s after the failure"
                        + (f", first new output after {r.first_output_s:.1f} s" if r.first_output_s is not None
                           else "") if r.recovered_s is not None else
                        f"restart {r.attempt} ({r.how}): {r.cause} -> checkpoint {r.checkpoint}")
        return result


class Recovery:
    """The restarts of one checkpointed run (``run``): the current attempt's
    coordinator, the attempts used, the report's restarts and figures.

    ``restart`` ends the current attempt (its coordinator closed, so no checkpoint
    completes after it) and, while attempts are left, records a restart from the newest
    complete checkpoint, rewinds the committed sinks to it and makes the next attempt's
    coordinator. ``in_place`` is ``run_build``'s ``restart_in_place``: called on the
    rendezvous's thread when an agent reports a failed PE."""

    def __init__(self, store: CheckpointStore, deploy: Deployment, ck: CheckpointOptions,
                 report: CheckpointReport, say, restore: Checkpoint | None, local: bool = True) -> None:
        self.store, self.deploy, self.ck, self.report, self.say, self.local = store, deploy, ck, report, say, local
        self.attempt = 0
        self.sizes: list[int] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        self.coord = Coordinator(store, deploy, ck.interval, restore, local=local)

    def restart(self, exc: BaseException, failed_at: float, how: str) -> Coordinator | None:
        with self._lock:
            coord = self.coord
            coord.close()  # nothing completes after this: the rewind below is final
            _account(coord, self.report, self.sizes, self.times)
            last = self.report.restarts[-1] if self.report.restarts else None
            if last is not None and last.recovered_s is None and coord.t_running:
                _recovered(last, coord)
            if self.attempt >= self.ck.restart_attempts:
                return None
            self.attempt += 1
            chk = self.store.latest(self.deploy)
            self.store.rewind_sinks(chk)
            cause = str(exc).splitlines()[0]
            self.report.restarts.append(Restart(self.attempt, cause, chk.id if chk else None, failed_at, how=how))
            self.say(f"RESTART {self.attempt}/{self.ck.restart_attempts} ({how}): {cause}; restarting from "
                     + (f"checkpoint {chk.id}" if chk else "the beginning (no complete checkpoint yet)"))
            self.coord = Coordinator(self.store, self.deploy, self.ck.interval, chk, local=self.local)
            return self.coord

    def in_place(self, exc: BaseException) -> dict[str, Any] | None:
        """A PE failed while its agent lives: the new coordinator's channel and the
        backoff for every agent, or None (no attempt left: the stage fails with ``exc``)."""
        failed_at = time.time()
        if self.attempt >= self.ck.restart_attempts:
            return None
        coord = self.restart(exc, failed_at, IN_PLACE)
        if coord is None:
            return None
        return {"checkpoint": coord.channel().to_json(), "delay": _backoff(self.ck, self.attempt)}

    def finish(self) -> dict[str, bytes]:
        """The run succeeded: the last coordinator's lines of checkpoints that never
        completed (``Coordinator.finish``); the report's figures filled in."""
        coord = self.coord
        last = self.report.restarts[-1] if self.report.restarts else None
        if last is not None and last.recovered_s is None:
            _recovered(last, coord)
        tails = coord.finish()
        _account(coord, self.report, self.sizes, self.times)
        self.report.mean_size_bytes = sum(self.sizes) / len(self.sizes) if self.sizes else 0.0
        self.report.mean_checkpoint_s = sum(self.times) / len(self.times) if self.times else 0.0
        return tails


def _backoff(ck: CheckpointOptions, attempt: int) -> float:
    return min(ck.backoff * 2 ** (attempt - 1), 30.0)


def _recovered(r: Restart, coord: Coordinator) -> None:
    if coord.t_running:
        r.recovered_s = coord.t_running - r.failed_at
    if coord.t_first:
        r.first_checkpoint_s = coord.t_first - r.failed_at
    if coord.t_output:
        r.first_output_s = coord.t_output - r.failed_at


def _account(coord: Coordinator, report: CheckpointReport, sizes: list[int], times: list[float]) -> None:
    report.checkpoints += len(coord.completed)
    sizes.extend(coord.sizes)
    times.extend(coord.align_s)


def finish_sinks(store: CheckpointStore, out: Path, tails: dict[str, bytes]) -> None:
    """Each file sink's output: its committed lines, the lines of checkpoints that
    never completed, then what the run wrote after its last barrier (already in
    ``out/<sink>.jsonl``: the launcher committed the run's part files)."""
    store.commit_sinks(tails)
    if not store.sinks.is_dir():
        return
    for p in sorted(store.sinks.glob("*.jsonl")):
        target = out / p.name
        tail = target.read_bytes() if target.exists() else b""
        write_bytes_atomic(target, p.read_bytes() + tail)
