"""The Redis Streams sink (the connector contract of ``spadeopt.connectors.contract``).

It appends a batch with one pipelined send of XADDs and reads its replies after sending
the next batch (``flush``/``close``: the last). With checkpoints
(``runtime.barrier_alignment``) it is exactly once: each checkpoint's entries and a
marker of its id in one MULTI/EXEC, skipping an id already committed (the markers are a
hash beside the stream, ``MARKER_SUFFIX``). Build artefacts name it
``spadeopt.connectors.redis_streams:RedisStreamSink`` (that module re-exports it);
the source is ``connectors.redis_streams``. Semantics and options: ``docs/connectors.md``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from spadeopt.connectors.contract import ConnectorError, Sink
from spadeopt.connectors.formats import encoder
from spadeopt.connectors.redis_conn import BrokerAddress, connect
from spadeopt.connectors.redis_conn import reply_text as _text

MARKER_SUFFIX = ":spadeopt-commits"  # the hash of checkpoint markers beside a sink's stream
_WATCH_TRIES = 50


XADD_ALL = """local key, field, maxlen, id = KEYS[1], ARGV[1], ARGV[2], false
for i = 3, #ARGV do
  if maxlen == '' then id = redis.call('XADD', key, '*', field, ARGV[i])
  else id = redis.call('XADD', key, 'MAXLEN', '~', maxlen, '*', field, ARGV[i]) end
end
return id"""
"""The Redis sink's batch: every value appended to the stream as its own entry (field
``field``, capped at ``maxlen`` approximately when given), the last entry ID returned. A
constant script of ours; the broker caches it compiled by its SHA."""


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)


class RedisStreamSink(Sink):
    """XADD every tuple of a batch to ``key`` in one send: the commands are packed here
    (RESP) and sent at once on the sink's own connection (1.7x the rate of redis-py's
    pipeline, whose per-command packing made the sink the slowest PE of a broker -> app
    -> broker pipeline: 36 k vs 21 k tuples/s, medians of 5 interleaved rounds on the
    development VM under load); the replies of a batch are read after the next batch is
    sent, so the broker appends one batch while the PE makes the next (``flush`` and
    ``close`` read the last; ``count`` and ``last_id`` are what the broker confirmed). A
    JSON value is made by ``formats.json_encoder`` (json.dumps's text, one format per
    schema). ``format="fields"`` (a map of fields per entry)
    goes through redis-py's pipeline.

    In a checkpointing run (``stage``) the sink is exactly once: ``write`` keeps the
    encoded entries; ``prepare(n)`` closes epoch ``n`` at checkpoint ``n``'s barrier (the
    epochs not yet committed go into the PE's part); ``commit(n)``, once checkpoint ``n``
    is complete, appends the epochs up to ``n`` and sets this sink's marker in the hash
    ``<key>:spadeopt-commits`` (field ``<pe>/<sink>``: the checkpoint lineage, the last
    epoch id, the run, whether the run's output ended) in one MULTI/EXEC under WATCH of
    the marker, skipping every epoch whose id the marker already holds. So an epoch
    restored from a checkpoint's part (``recover``) and committed again after a restart,
    or a replay of records the marker covers, is never appended twice. ``close`` writes
    the run's tail (the epochs left and the records after the last barrier) the same way
    and marks the output ended: a restart of the same run after that appends nothing."""

    transactional = True

    def __init__(self, *, name: str, names: list[str], types: list[str], key: str, format: str = "json",
                 field: str = "value", maxlen: int | None = None, host: str, port: int,
                 password_file: str = "") -> None:
        self.name, self.key, self.maxlen = name, key, maxlen
        self.addr = BrokerAddress(host, port, password_file)
        self.fields = format == "fields"
        self.field = field
        self.encode = encoder(format, names, types)
        self.client = None
        self.conn = None
        self.count = 0
        self.last_id: str | None = None
        self._owed = 0  # replies of the batch sent last, not read yet (_collect)
        args = [b"XADD", key.encode()]
        if maxlen is not None:
            args += [b"MAXLEN", b"~", str(maxlen).encode()]
        args += [b"*"]
        if self.fields:  # a staged entry: its field/value pairs
            self._staged_head = b"*%d\r\n" % (len(args) + 2 * len(names)) + b"".join(_bulk(a) for a in args)
        args += [field.encode()]
        self._head = b"*%d\r\n" % (len(args) + 1) + b"".join(_bulk(a) for a in args)
        # a plain batch: EVAL XADD_ALL 1 key field maxlen value... (the count goes in at %d)
        self._eval_head = b"*%d\r\n" + b"".join(_bulk(a).replace(b"%", b"%%") for a in (
            b"EVAL", XADD_ALL.encode(), b"1", key.encode(), field.encode(),
            b"" if maxlen is None else str(maxlen).encode()))
        if not self.fields:
            self._staged_head = self._head
        # checkpointing runs (stage): see the class docstring
        self.staging = False
        self.owner = self.lineage = self.run = ""
        self.marker_key = f"{key}{MARKER_SUFFIX}"
        self._staged: list[bytes] = []
        self._pending: dict[int, list[bytes]] = {}
        self._lock = threading.Lock()
        self.commits = self.skipped = 0

    def open(self) -> None:
        if self.client is None:
            self.client = connect(self.addr, f"sink '{self.name}'")

    def write(self, batch: list[tuple]) -> None:
        if self.staging:
            self._staged += map(self._entry, batch)
            return
        if self.client is None:
            self.open()
        if not batch:
            return
        if self.fields:
            pipe = self.client.pipeline(transaction=False)
            for t in batch:
                pipe.xadd(self.key, self.encode(t), maxlen=self.maxlen, approximate=True)
            ids = pipe.execute()
            self.count += len(batch)
            if ids:
                self.last_id = _text(ids[-1])
        else:
            self._write_packed(batch)

    def _write_packed(self, batch: list[tuple]) -> None:
        """Send the batch as one EVAL of ``XADD_ALL`` (one reply per batch, not one per
        entry: reading 512 replies through redis-py cost ~3 us a record, more than
        encoding it), then read the *previous* batch's reply: the broker appends this
        batch while the PE goes on (the last reply is read by ``flush``)."""
        enc = self.encode
        parts = [self._eval_head % (len(batch) + 6)]  # EVAL script 1 key field maxlen, then the values
        for t in batch:
            v = enc(t)
            if type(v) is str:
                v = v.encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(v), v))
        conn = self._connection()
        try:
            conn.send_packed_command([b"".join(parts)], check_health=False)
        except Exception as exc:
            self._owed = 0
            conn.disconnect()  # never reuse this connection's stream
            raise ConnectorError(f"sink '{self.name}': writing to stream '{self.key}' at {self.addr.describe()} "
                                 f"failed: {exc}") from None
        self._collect()
        self._owed = len(batch)

    def _collect(self) -> None:
        """Read the replies owed by the batch sent last (its entry IDs, or the error that
        stopped it)."""
        owed, self._owed = self._owed, 0
        if not owed:
            return
        conn = self.conn
        try:
            last = conn.read_response(disable_decoding=True)  # XADD_ALL's: the batch's last entry ID
        except Exception as exc:
            conn.disconnect()  # replies may be left unread: never reuse this connection's stream
            raise ConnectorError(f"sink '{self.name}': writing to stream '{self.key}' at {self.addr.describe()} "
                                 f"failed: {exc}") from None
        self.count += owed
        self.last_id = _text(last)

    def flush(self) -> None:
        """Wait for the broker to have appended everything written (the last batch's replies)."""
        self._collect()

    def _connection(self):
        if self.client is None:
            self.open()
        if self.conn is None:
            self.conn = self.client.connection_pool.get_connection()
        return self.conn

    # ---- exactly once with checkpoints ---------------------------------------------------
    def _entry(self, t: tuple) -> bytes:
        """The RESP arguments after the XADD head of one staged tuple."""
        v = self.encode(t)
        if self.fields:
            return b"".join(_bulk(k.encode()) + _bulk(x.encode()) for k, x in v.items())
        return _bulk(v.encode() if type(v) is str else v)

    def stage(self, owner: str, lineage: str, run: str) -> None:
        """From now on ``write`` keeps entries for ``commit`` (a checkpointing run).
        ``owner``: this sink's field in the marker hash (``<pe>/<sink>``); ``lineage``:
        the checkpoint directory's identity (a marker of another lineage is stale);
        ``run``: this run's (an ended marker stops only the run that set it)."""
        self.owner, self.lineage, self.run = owner, lineage, run
        self.staging = True

    def prepare(self, n: int) -> list[list]:
        """Close epoch ``n`` (the entries since the previous barrier); every epoch not
        committed yet, ``[[id, [entry, ...]], ...]``, for checkpoint ``n``'s part."""
        with self._lock:
            if self._staged:
                self._pending[n] = self._staged
                self._staged = []
            return [[k, v] for k, v in sorted(self._pending.items())]

    def recover(self, epochs: Any) -> None:
        """Take back the uncommitted epochs a restored checkpoint's part held."""
        if type(epochs) is not list or not all(
                type(e) is list and len(e) == 2 and type(e[0]) is int and type(e[1]) is list
                and all(type(x) is bytes for x in e[1]) for e in epochs):
            raise ValueError(f"sink '{self.name}': the checkpoint's epochs are not [[id, [entry, ...]], ...]")
        with self._lock:
            for k, entries in epochs:
                self._pending.setdefault(k, entries)

    def commit(self, n: int) -> None:
        """Checkpoint ``n`` is complete: append every epoch up to ``n`` (one transaction
        with the marker; epochs the marker holds are skipped)."""
        with self._lock:
            if not self.staging:
                return
            done = sorted(k for k in self._pending if k <= n)
            if done:
                self._transact([(k, self._pending[k]) for k in done], end=False)
                for k in done:
                    del self._pending[k]

    def _marker(self, raw: bytes | None) -> dict[str, Any]:
        """This sink's marker, or an empty one (none yet, another lineage's, unreadable)."""

        try:
            doc = json.loads(raw) if raw is not None else None
        except ValueError:
            doc = None
        if type(doc) is not dict or doc.get("lineage") != self.lineage or type(doc.get("id")) is not int:
            return {"id": 0, "run": None, "end": False}
        return {"id": doc["id"], "run": doc.get("run"), "end": doc.get("end") is True}

    def _transact(self, epochs: list[tuple[int | None, list[bytes]]], end: bool) -> None:
        """Append ``epochs`` (``None``: entries after the last barrier) and set the marker
        in one MULTI/EXEC, under WATCH of the marker hash (read again if it changed)."""

        self._collect()
        conn = self._connection()
        try:
            for _ in range(_WATCH_TRIES):
                conn.send_command("WATCH", self.marker_key)
                conn.read_response()
                conn.send_command("HGET", self.marker_key, self.owner)
                mark = self._marker(conn.read_response())
                if mark["end"] and mark["run"] == self.run:  # this run's output is complete already
                    todo = []
                else:
                    todo = [(k, e) for k, e in epochs if k is None or k > mark["id"]]
                if not todo and (not end or mark["end"] and mark["run"] == self.run):
                    conn.send_command("UNWATCH")
                    conn.read_response()
                    self.skipped += sum(1 for k, _ in epochs if k is not None)
                    return
                last = max([mark["id"]] + [k for k, _ in epochs if k is not None])
                value = json.dumps({"lineage": self.lineage, "id": last, "run": self.run, "end": end})
                head = self._staged_head
                entries = [head + x for _, e in todo for x in e]
                conn.send_packed_command([b"".join([_command(b"MULTI"), *entries,
                                                    _command(b"HSET", self.marker_key.encode(),
                                                             self.owner.encode(), value.encode()),
                                                    _command(b"EXEC")])], check_health=False)
                conn.read_response()  # OK
                for _ in range(len(entries) + 1):
                    conn.read_response()  # QUEUED
                replies = conn.read_response(disable_decoding=True)
                if replies is None:  # the marker changed under WATCH: read it again
                    continue
                bad = [r for r in replies if isinstance(r, Exception)]
                if bad:
                    raise ConnectorError(f"sink '{self.name}': stream '{self.key}' at {self.addr.describe()} "
                                         f"refused checkpoint {last}'s entries: {bad[0]}")
                self.count += len(entries)
                self.commits += 1
                self.skipped += sum(1 for k, _ in epochs if k is not None) - sum(1 for k, _ in todo if k is not None)
                if entries:
                    self.last_id = _text(replies[len(entries) - 1])
                return
            raise ConnectorError(f"sink '{self.name}': the marker {self.marker_key} kept changing "
                                 f"({_WATCH_TRIES} tries): is another run writing to stream '{self.key}'?")
        except ConnectorError:
            raise
        except Exception as exc:
            conn.disconnect()  # replies may be left unread: never reuse this connection's stream
            raise ConnectorError(f"sink '{self.name}': committing to stream '{self.key}' at "
                                 f"{self.addr.describe()} failed: {exc}") from None

    def report(self) -> dict[str, Any]:
        self._collect()  # what the broker appended, the last batch included
        rep = {"stream": self.key, "written": self.count, "last_id": self.last_id}
        if self.owner:
            rep.update(commits=self.commits, skipped=self.skipped)
        return rep

    def close(self) -> None:
        """Release the connection; a staged sink first writes the run's tail (every epoch
        left and the entries after the last barrier) and marks its output ended."""
        try:
            self._collect()
            with self._lock:
                if self.staging:
                    self._transact(sorted(self._pending.items()) + [(None, self._staged)], end=True)
                    self._pending, self._staged = {}, []
                    self.staging = False
        finally:
            if self.conn is not None:
                self.client.connection_pool.release(self.conn)
                self.conn = None
            if self.client is not None:
                self.client.close()
                self.client = None
