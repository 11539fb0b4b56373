"""Redis Streams source and sink (the connector contract of ``spadeopt.connectors.contract``).

The source reads with XREAD (or XREADGROUP) *without* BLOCK, so a read returns at once:
``[]`` when no stream has a new entry. Its position is the last entry ID read per
stream key; its lag the entries behind the streams' ends. Records of one key keep the
key's order; across keys a batch takes each key's new entries in key order (arrival
interleaving, as a union). Malformed values stop the run naming the stream, entry ID and
value, or go to ``dead_letter`` when the app asks. The source reads on its own
connection and keeps the reply undecoded; a JSON value is scanned straight into the
record (``_records``). The sink appends a batch with one pipelined send of XADDs and
reads its replies after sending the next batch (``flush``/``close``: the last). With checkpoints (``runtime.barrier_alignment``) the source is
resumable (a checkpoint holds the last entry ID passed on per key, ``resume_state``) and
the sink exactly once (each checkpoint's entries and a marker of its id in one
MULTI/EXEC, skipping an id already committed). Semantics and options:
``docs/connectors.md``.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any

from spadeopt.connectors.contract import ConnectorError, Source
from spadeopt.connectors.formats import LIVE_CASTS, decoder, row_caster, typed_picker
from spadeopt.connectors.redis_conn import BrokerAddress, connect
from spadeopt.connectors.redis_conn import reply_text as _text
from spadeopt.connectors.redis_stream_sink import RedisStreamSink  # noqa: F401 (build artefacts name it here)

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


def check(spec_args: dict[str, Any], what: str) -> None:
    """Preflight: the broker of a Redis connector answers and takes its password."""
    client = connect(BrokerAddress(spec_args["host"], spec_args["port"], spec_args["password_file"]), what,
                     timeout=3.0)
    client.close()
