"""Redis Streams source and sink (the connector contract of ``spadeopt.connectors.base``).

The source reads with XREAD (or XREADGROUP) *without* BLOCK, so a read returns at once:
``[]`` when no stream has a new entry. Its position is the last entry ID read per
stream key; its lag the entries behind the streams' ends. Records of one key keep the
key's order; across keys a batch takes each key's new entries in key order (arrival
interleaving, as a union). Malformed values stop the run naming the stream, entry ID and
value, or go to ``dead_letter`` when the app asks. The source reads on its own
connection and keeps the reply undecoded; a JSON value is scanned straight into the
record (``_records``). The sink appends a batch with one pipelined send of XADDs and
reads its replies after sending the next batch (``flush``/``close``: the last). With checkpoints (``runtime.checkpoint``) the source is
resumable (a checkpoint holds the last entry ID passed on per key, ``resume_state``) and
the sink exactly once (each checkpoint's entries and a marker of its id in one
MULTI/EXEC, skipping an id already committed). Semantics and options:
``docs/connectors.md``.
"""

from __future__ import annotations

import json
import json.scanner
import threading
from typing import Any

from spadeopt.connectors.base import ConnectorError, Sink, Source
from spadeopt.connectors.formats import LIVE_CASTS, decoder, encoder, row_caster, typed_picker
from spadeopt.connectors.redis_conn import BrokerAddress, connect

MAX_SEQ = 18446744073709551615


def parse_id(entry_id: str | bytes) -> tuple[int, int]:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def _is_id(text: str) -> bool:
    ms, sep, seq = text.partition("-")
    return ms.isdigit() and (not sep or seq.isdigit())


def _get(info: dict | None, name: str, default: Any) -> Any:
    """A field of an XINFO reply (redis-py gives its names as str, or bytes)."""
    if not info:
        return default
    return info.get(name, info.get(name.encode(), default))


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _pairs(fields: list | dict) -> dict:
    """An entry's fields as a dict (XREAD's reply gives them as a flat list)."""
    return fields if isinstance(fields, dict) else dict(zip(fields[::2], fields[1::2], strict=True))


def _flat(fields: list | dict) -> list:
    return [x for kv in fields.items() for x in kv] if isinstance(fields, dict) else fields


def _nowhere() -> str:
    return ""


class RedisStreamSource(Source):
    live = True
    resumable = True  # a checkpoint stores the last entry ID passed on per key (resume_state)

    def __init__(self, *, name: str, schema: list, keys: list[str], format: str = "json",
                 field: str = "value", start: str = "beginning", start_time: float | None = None,
                 group: str | None = None, consumer: str | None = None, until: str | None = None,
                 count: int | None = None, time_from_id: str | None = None,
                 dead_letter: str | None = None, host: str, port: int, password_file: str = "",
                 part: int = 0, parts: int = 1, partitioned_by: list[str] | None = None) -> None:
        # partitioned_by: the app's declaration, read by the planner (parallel regions), not here
        self.name = name
        self.what = f"source '{name}'"
        self.keys = list(keys)[part::parts]  # this channel's share of the stream keys
        self.addr = BrokerAddress(host, port, password_file)
        self.format, self.field = format, field
        self.start, self.start_time = start, start_time
        self.group, self.consumer = group, consumer
        self.until, self.limit = until, count
        self.dead_letter = dead_letter
        names = [n for n, _ in schema]
        self.arity = len(names)
        self.id_index = names.index(time_from_id) if time_from_id else None
        self.id_float = bool(time_from_id) and dict(map(tuple, schema))[time_from_id] == "float"
        value_schema = [a for a in schema if a[0] != time_from_id]
        self.decode = decoder(format, value_schema, field)
        self._field_b = field.encode()
        # JSON values are scanned straight (no json.loads wrapper, no encoding detection per
        # value); a value the scan does not take whole goes through ``decode`` (and its errors)
        self._scan = json.scanner.make_scanner(json.JSONDecoder()) if format == "json" else None
        self._names = [n for n, _ in value_schema]
        self._cast = row_caster(value_schema, LIVE_CASTS)
        self._pick = typed_picker(value_schema)  # the values already of their types: no cast
        self.client = None
        self.conn = None  # the connection XREAD goes through (``_xread``)
        self._ahead: tuple | None = None  # the XREAD sent ahead: (keys, count, positions)
        self.pos: dict[str, str] = {}  # key -> last ID read (exclusive start of the next read)
        self.end: dict[str, tuple[int, int]] = {}  # until="end": key -> last ID at open
        self.done: set[str] = set()
        self.read_count = 0
        self._arrived: float | None = None  # arrived(): the oldest entry's ID time, last read
        self.dead = 0
        self._unacked: dict[str, list[bytes]] = {}
        self._base: dict[str, tuple[int, int]] = {}  # key -> (entries after the start at open, entries-added at open)
        self._read_per_key: dict[str, int] = {}
        self._resume: dict[str, Any] | None = None  # resume(): where a checkpoint left off

    # ---- contract -------------------------------------------------------------------
    def open(self) -> None:
        if self.client is not None:
            return
        if not self.keys:  # a channel with no key of its own
            return
        import redis

        self.client = connect(self.addr, self.what)
        c = self.client
        resume = self._resume
        if resume is not None:
            self.read_count = resume["read"]
        for key in self.keys:
            info = self._info(key)
            last = _text(_get(info, "last-generated-id", "0-0"))
            length = int(_get(info, "length", 0))
            added = int(_get(info, "entries-added", length))
            if resume is not None:  # just after the last entry a checkpoint's records came from
                start = resume["ids"][key]
            elif self.start_time is not None:
                ms = int(self.start_time * 1000)
                start = f"{ms - 1}-{MAX_SEQ}" if ms > 0 else "0-0"
            else:
                start = {"beginning": "0-0", "end": last}.get(self.start, self.start)
            self.pos[key] = start
            after = 0 if start == last else (length if start == "0-0" else
                                             len(c.xrange(key, min=f"({start}", max="+")))
            self._base[key] = (after, added)
            self._read_per_key[key] = 0
            if self.until == "end":  # the end seen by the first open, also after a resume
                self.end[key] = parse_id(resume["end"][key] if resume is not None else last)
                if parse_id(start) >= self.end[key]:
                    self.done.add(key)
            if self.group:
                try:
                    c.xgroup_create(key, self.group, id=start, mkstream=True)
                except redis.ResponseError as exc:
                    if "BUSYGROUP" not in str(exc):
                        raise ConnectorError(f"{self.what}: cannot create consumer group {self.group!r} "
                                             f"on stream {key!r}: {exc}") from None
                    if resume is not None:  # the group delivers again what came after the checkpoint
                        c.xgroup_setid(key, self.group, id=start)

    def _info(self, key: str) -> dict | None:
        import redis

        try:
            return self.client.xinfo_stream(key)
        except redis.ResponseError:  # no such key (yet)
            return None

    def read(self, n: int) -> list[tuple] | None:
        if self.client is None:
            self.open()
            if self.client is None:
                return None
        self._ack()
        active = [k for k in self.keys if k not in self.done]
        if not active or (self.limit is not None and self.read_count >= self.limit):
            return None
        want = n if self.limit is None else min(n, self.limit - self.read_count)
        per_key = max(1, want // len(active))
        if self.group:
            reply = self.client.xreadgroup(self.group, self.consumer, dict.fromkeys(active, ">"), count=per_key)
            got = {_text(k): [(i, _flat(f)) for i, f in entries]
                   for k, entries in (reply.items() if isinstance(reply, dict) else reply or [])}
        else:
            got = self._xread(active, per_key)
        if self.until == "end":  # a key with nothing after its position has no entry left before its end
            self.done.update(k for k in active if not got.get(k))
            if len(self.done) == len(self.keys):
                return None
        out: list[tuple] = []
        oldest = None  # ms of the oldest entry ID read (arrived())
        for key in active:
            entries = got.get(key)
            if not entries:
                continue
            ms = parse_id(entries[0][0])[0]
            if oldest is None or ms < oldest:
                oldest = ms
            end = self.end.get(key)
            if end is not None and parse_id(entries[-1][0]) >= end:  # IDs grow: only the tail can pass the end
                self.done.add(key)
                k = len(entries)
                while k and parse_id(entries[k - 1][0]) > end:
                    k -= 1
                entries = entries[:k]
                if not entries:
                    continue
            if self.limit is not None:  # every entry makes a record but a dead letter: never past the limit
                entries = entries[:self.limit - self.read_count - len(out)]
                if not entries:
                    break
            out += self._records(key, entries)
            self.pos[key] = _text(entries[-1][0])
            self._read_per_key[key] += len(entries)
            if self.group:
                self._unacked.setdefault(key, []).extend(i for i, _ in entries)
        self.read_count += len(out)
        if out and oldest is not None:
            self._arrived = oldest / 1000.0
        return out

    def arrived(self) -> float | None:
        """The ID time of the oldest entry of the last read that returned records: when
        the broker took it (its clock), for latency markers."""
        return self._arrived

    def _xread(self, keys: list[str], count: int) -> dict[str, list]:
        """XREAD COUNT ``count`` of ``keys`` after their positions, on the source's own
        connection, the reply undecoded (no per-entry dict: each entry's fields stay a
        flat list): key -> [(entry ID, [field, value, ...]), ...]. When a key's reply is
        full (a backlog) the next XREAD is sent at once, after the entries returned; the
        next call takes its reply if it asks for those very positions (the caller kept
        every entry), else reads and drops it. A source that is caught up sends nothing
        ahead, so a slow feed's next entry is never read late."""
        conn = self.conn
        if conn is None:
            conn = self.conn = self.client.connection_pool.get_connection()
        asked = (tuple(keys), count, tuple(self.pos[k] for k in keys))
        try:
            ahead, self._ahead = self._ahead, None
            if ahead != asked:  # none sent, or for other positions (a key ended, a limit cut)
                if ahead is not None:
                    conn.read_response(disable_decoding=True)  # its reply, unused
                conn.send_command("XREAD", "COUNT", count, "STREAMS", *keys, *asked[2])
            reply = conn.read_response(disable_decoding=True)
            if isinstance(reply, dict):  # RESP3
                reply = list(reply.items())
            got = {_text(k): entries for k, entries in reply or ()}
            if any(len(e) == count for e in got.values()):
                # a backlog: ask for the next batch now, after this one's last entries, so
                # the broker reads it while this one is decoded and passed on
                after = tuple(_text(got[k][-1][0]) if got.get(k) else self.pos[k] for k in keys)
                conn.send_command("XREAD", "COUNT", count, "STREAMS", *keys, *after)
                self._ahead = (tuple(keys), count, after)
        except Exception as exc:
            self._ahead = None
            conn.disconnect()  # a reply may be left unread: never reuse this connection's stream
            raise ConnectorError(f"{self.what}: reading stream(s) {', '.join(keys)} at {self.addr.describe()} "
                                 f"failed: {exc}") from None
        return got

    def _records(self, key: str, entries: list) -> list[tuple]:
        """The records of ``entries`` (entry ID, flat field list): a value in the one
        field ``field`` is decoded straight; anything else (other fields, an error,
        ``time_from_id``, ``fields``) goes through ``_record`` entry by entry."""
        if self.format == "fields" or self.id_index is not None:
            recs = [self._record(key, i, parse_id(i), _pairs(f)) for i, f in entries]
        elif self._scan is not None:
            recs, scan, names, cast, pick, fb = [], self._scan, self._names, self._cast, self._pick, self._field_b
            for i, f in entries:
                if len(f) == 2 and f[0] == fb:
                    try:
                        text = f[1].decode()
                        obj, at = scan(text, 0)
                        if at == len(text):
                            rec = pick(obj)
                            recs.append(rec if rec is not None else cast([obj[n] for n in names], _nowhere))
                            continue
                    except (StopIteration, ValueError, KeyError, TypeError, AttributeError):
                        pass  # not a whole JSON object of the schema: decode() says why
                recs.append(self._record(key, i, parse_id(i), _pairs(f)))
        else:
            recs, dec, fb = [], self.decode, self._field_b
            for i, f in entries:
                if len(f) == 2 and f[0] == fb:
                    try:
                        recs.append(dec(f[1], _nowhere))
                        continue
                    except ValueError:
                        pass
                recs.append(self._record(key, i, parse_id(i), _pairs(f)))
        return [r for r in recs if r is not None] if self.dead_letter is not None else recs

    def _record(self, key: str, entry_id: bytes, eid: tuple[int, int], fields: dict) -> tuple | None:
        def where() -> str:
            return f"stream '{key}' entry {_text(entry_id)}"

        try:
            if self.format == "fields":
                value = fields
            else:
                value = fields.get(self.field.encode())
                if value is None:
                    have = ", ".join(_text(f) for f in fields) or "no field"
                    raise ValueError(f"{where()}: no field '{self.field}' (the entry has: {have}): {fields!r:.200}")
            rec = self.decode(value, where)
        except ValueError as exc:
            if self.dead_letter is None:
                raise ValueError(f"{self.what}: {exc}") from None
            self.client.xadd(self.dead_letter, {"stream": key, "id": _text(entry_id), "error": str(exc),
                                                **{_text(k): v for k, v in fields.items()}})
            self.dead += 1
            return None
        if self.id_index is not None:
            t = eid[0] / 1000.0 if self.id_float else eid[0]
            rec = rec[:self.id_index] + (t,) + rec[self.id_index:]
        return rec

    def _ack(self) -> None:
        """Acknowledge what the previous read passed on (a consumer group's at-least-once)."""
        if self._unacked:
            for key, ids in self._unacked.items():
                self.client.xack(key, self.group, *ids)
            self._unacked = {}

    def position(self) -> dict[str, str]:
        return dict(self.pos)

    def resume_state(self) -> dict[str, Any]:
        """The last entry ID read per stream key (``ids``), the records read (``read``, for
        ``count=``) and, with ``until="end"``, the ends seen at the first open (``end``)."""
        state: dict[str, Any] = {"ids": dict(self.pos), "read": self.read_count}
        if self.until == "end":
            state["end"] = {k: f"{ms}-{seq}" for k, (ms, seq) in self.end.items()}
        return state

    def resume(self, state: Any) -> None:
        """Read the entries *after* ``state["ids"]`` (XREAD's exclusive start; with a
        consumer group, the group's last-delivered ID is set there: XGROUP SETID)."""
        ok = (type(state) is dict and type(state.get("ids")) is dict and set(state["ids"]) == set(self.keys)
              and all(type(v) is str and _is_id(v) for v in state["ids"].values())
              and type(state.get("read")) is int and state["read"] >= 0)
        if ok and self.until == "end":
            end = state.get("end")
            ok = type(end) is dict and set(end) == set(self.keys) and all(type(v) is str and _is_id(v)
                                                                           for v in end.values())
        if not ok:
            raise ValueError(f"{self.what}: {state!r:.120} is not a position of stream(s) {', '.join(self.keys)}")
        self._resume = state

    def lag(self) -> int | None:
        """Entries behind the streams' ends (a consumer group's own lag when reading through one)."""
        if self.client is None:
            return None
        total = 0
        for key in self.keys:
            if self.group:
                groups = {_text(_get(g, "name", "")): g for g in self.client.xinfo_groups(key)}
                total += int(_get(groups.get(self.group), "lag", 0) or 0)
                continue
            info = self._info(key)
            after, added0 = self._base[key]
            added = int(_get(info, "entries-added", added0))
            total += max(0, after + (added - added0) - self._read_per_key[key])
        return total

    def close(self) -> None:
        if self.client is not None:
            try:
                self._ack()
            finally:
                if self.conn is not None:
                    if self._ahead is not None:  # a reply still owed: never reuse this connection's stream
                        self._ahead = None
                        self.conn.disconnect()
                    self.client.connection_pool.release(self.conn)
                    self.conn = None
                self.client.close()
                self.client = None


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
        import json

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
        import json

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


def check(spec_args: dict[str, Any], what: str) -> None:
    """Preflight: the broker of a Redis connector answers and takes its password."""
    client = connect(BrokerAddress(spec_args["host"], spec_args["port"], spec_args["password_file"]), what,
                     timeout=3.0)
    client.close()
