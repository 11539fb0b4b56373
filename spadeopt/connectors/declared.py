"""What an app declares about a connector: ``redis_source``, ``redis_sink``,
``tcp_source`` and ``folder_source`` make a ``ConnectorSpec`` (plain data, no socket
opened) that ``App.source(..., connector=)`` / ``App.sink(..., connector=)`` take. The
spec names the factory the PE calls and its keyword arguments, which go into the
generated code as literals: so they hold addresses and file paths, never a password.

Every problem with the arguments is collected (``problems``) and reported with the
app's other problems at build time. Semantics: ``docs/connectors.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from spadeopt.connectors.contract import Source
from spadeopt.connectors.formats import FORMATS
from spadeopt.connectors.redis_conn import project_broker

MODULE = "spadeopt.connectors"
IGNORED = (".", "_")  # a watched folder skips names starting with these ...
UNFINISHED = (".tmp", ".part")  # ... or ending with these (still being written)


@dataclass(frozen=True)
class ConnectorSpec:
    role: str  # "source" | "sink"
    module: str
    qualname: str
    args: tuple[tuple[str, Any], ...]
    describe: str  # for messages: "Redis stream(s) orders:0, orders:1 at redis://127.0.0.1:16379"
    problems: tuple[str, ...] = field(default=())

    @property
    def factory(self) -> str:
        return f"{self.module}:{self.qualname}"

    @property
    def live(self) -> bool:
        return is_live(self.module, self.qualname)


def source_type(module: str, qualname: str) -> type[Source] | None:
    """The connector class ``module:qualname`` names when it is a ``Source`` subclass
    (its module imported: a spadeopt connector or the app's own, already imported by the
    app), else None (a generator function, an iterable, anything not importable)."""
    import importlib
    import sys

    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - not a connector we can ask: the build reports the source itself
            return None
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and issubclass(obj, Source) else None


def is_live(module: str, qualname: str) -> bool:
    """Is ``module:qualname`` a live source's factory (its reads may find nothing now)?
    The connector type says so (``Source.live``), as Bytewax's source classes do."""
    cls = source_type(module, qualname)
    return cls is not None and cls.live


def is_unbounded(module: str, qualname: str, args: dict[str, Any]) -> bool:
    """Is this source live with no end of its own? The type decides
    (``connectors.contract.Source.unbounded_with``): a run of it ends only on a stop request
    or ``--duration``."""
    cls = source_type(module, qualname)
    return cls is not None and cls.unbounded_with(args)


def _broker(broker: str | None, password_file: str | None, problems: list[str]):
    from spadeopt.connectors.redis_conn import parse_url

    if broker is None:
        addr = project_broker()
        if password_file is not None:
            addr = type(addr)(addr.host, addr.port, os.path.abspath(password_file))
        return addr
    try:
        return parse_url(broker, password_file)
    except ValueError as exc:
        problems.append(str(exc))
        return None


def _format(fmt: Any, allowed: tuple[str, ...], problems: list[str]) -> None:
    if fmt not in allowed:
        problems.append(f"format {fmt!r} is not one of {', '.join(allowed)}")


def _count(count: Any, problems: list[str]) -> None:
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        problems.append(f"count must be an integer >= 1 (or None: no limit), got {count!r}")


def redis_source(keys: str | list[str] | tuple[str, ...], *, format: str = "json", field: str = "value",
                 start: str | int = "beginning", start_time: float | None = None,
                 group: str | None = None, consumer: str | None = None, until: str | None = None,
                 count: int | None = None, time_from_id: str | None = None,
                 dead_letter: str | None = None, broker: str | None = None,
                 password_file: str | None = None,
                 partitioned_by: str | list[str] | tuple[str, ...] | None = None) -> ConnectorSpec:
    """Read Redis stream(s) ``keys`` (several keys: several partitions of one feed).

    ``format``: the entry's ``field`` holds a JSON object, a CSV line (schema order) or a
    msgpack map/array; ``"fields"``: each attribute is its own entry field. ``start``:
    ``"beginning"``, ``"end"`` (only entries added after open) or an entry ID (read the
    entries *after* it, as XREAD does); ``start_time``: seconds since the epoch (entries
    from that millisecond on). ``group``/``consumer``: read through a consumer group
    (created at ``start`` if missing), acknowledging each batch once passed on.
    Bounded mode: ``until="end"`` stops at the stream ends observed at open, ``count=N``
    after N entries; neither: a live, unbounded source. ``time_from_id``: an attribute
    set from the entry ID's milliseconds (int) or seconds (float) instead of the value.
    ``dead_letter``: a stream key that receives malformed entries (with the error)
    instead of failing the run. ``broker``: ``redis://host:port`` (default the project's
    broker, ``make broker``); its password from ``password_file`` (default the project
    broker's) or ``SPADEOPT_BROKER_PASSWORD``. ``partitioned_by``: the attributes by which
    the app partitions its records over the keys (every record with the same values is on
    one key, in order); with several keys, a parallel region may then start at the source,
    each channel reading its own keys (``docs/operators.md``, "Parallel regions").
    """
    problems: list[str] = []
    keys = [keys] if isinstance(keys, str) else list(keys) if isinstance(keys, list | tuple) else keys
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        problems.append(f"keys must be a stream key or a non-empty list of them, got {keys!r}")
        keys = []
    elif len(set(keys)) != len(keys):
        problems.append(f"stream keys repeat: {keys}")
    _format(format, FORMATS, problems)
    if not isinstance(start, str) or not (start in ("beginning", "end") or _is_id(start)):
        problems.append(f"start must be 'beginning', 'end' or an entry ID like '1700000000000-0', got {start!r}")
    if start_time is not None:
        if isinstance(start_time, bool) or not isinstance(start_time, int | float) or start_time < 0:
            problems.append(f"start_time must be seconds since the epoch (>= 0), got {start_time!r}")
        elif start != "beginning":
            problems.append("give start or start_time, not both")
    if (group is None) != (consumer is None):
        problems.append("a consumer group needs both group= and consumer=")
    if until not in (None, "end"):
        problems.append(f"until must be None (unbounded) or 'end' (the stream ends observed at open), got {until!r}")
    _count(count, problems)
    if dead_letter is not None and (not isinstance(dead_letter, str) or not dead_letter or dead_letter in keys):
        problems.append(f"dead_letter must be a stream key other than the source's, got {dead_letter!r}")
    partitioned_by = _partitioned_by(partitioned_by, problems)
    addr = _broker(broker, password_file, problems)
    args = {"keys": keys, "format": format, "field": field, "start": start, "start_time": start_time,
            "group": group, "consumer": consumer, "until": until, "count": count,
            "time_from_id": time_from_id, "dead_letter": dead_letter,
            "host": addr.host if addr else "", "port": addr.port if addr else 0,
            "password_file": addr.password_file if addr else ""}
    if partitioned_by is not None:  # only when declared: a source without it builds as before
        args["partitioned_by"] = partitioned_by
    where = f"Redis stream(s) {', '.join(keys)} at {addr.describe() if addr else broker}"
    return ConnectorSpec("source", f"{MODULE}.redis_streams", "RedisStreamSource", tuple(sorted(args.items())),
                         where, tuple(problems))


def _partitioned_by(attrs: Any, problems: list[str]) -> list[str] | None:
    if attrs is None:
        return None
    attrs = [attrs] if isinstance(attrs, str) else list(attrs) if isinstance(attrs, list | tuple) else attrs
    if not isinstance(attrs, list) or not attrs or not all(isinstance(a, str) and a for a in attrs):
        problems.append(f"partitioned_by must be an attribute or a non-empty list of attributes, got {attrs!r}")
        return None
    if len(set(attrs)) != len(attrs):
        problems.append(f"partitioned_by repeats an attribute: {attrs}")
    return attrs


PARTITIONED_READERS = frozenset({f"{MODULE}.redis_streams:RedisStreamSource"})  # take part=, parts=


def partitioning(module: str, qualname: str, args: Any) -> tuple[list[str], list[str] | None] | None:
    """A source connector whose reads split by partition (``part``/``parts``: one reader per
    share of its stream keys): ``(its stream keys, its declared partitioned_by or None)``;
    None for every other connector."""
    if f"{module}:{qualname}" not in PARTITIONED_READERS:
        return None
    args = dict(args)
    return list(args.get("keys", ())), args.get("partitioned_by")


def redis_sink(key: str, *, format: str = "json", field: str = "value", maxlen: int | None = None,
               broker: str | None = None, password_file: str | None = None) -> ConnectorSpec:
    """Append every tuple to Redis stream ``key`` (XADD, one pipeline per batch), encoded
    as ``format`` in ``field`` (or ``"fields"``: one field per attribute); ``maxlen``
    caps the stream's length (approximately, as ``XADD MAXLEN ~``)."""
    problems: list[str] = []
    if not isinstance(key, str) or not key:
        problems.append(f"key must be a stream key, got {key!r}")
    _format(format, FORMATS, problems)
    if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1):
        problems.append(f"maxlen must be an integer >= 1 (or None: uncapped), got {maxlen!r}")
    addr = _broker(broker, password_file, problems)
    args = {"key": key, "format": format, "field": field, "maxlen": maxlen,
            "host": addr.host if addr else "", "port": addr.port if addr else 0,
            "password_file": addr.password_file if addr else ""}
    return ConnectorSpec("sink", f"{MODULE}.redis_streams", "RedisStreamSink", tuple(sorted(args.items())),
                         f"Redis stream {key} at {addr.describe() if addr else broker}", tuple(problems))


def tcp_source(port: int, *, host: str = "127.0.0.1", format: str = "json", until: str | None = None,
               count: int | None = None) -> ConnectorSpec:
    """Listen on ``host:port`` for clients sending newline-delimited records (``format``:
    ``json`` objects or ``csv`` lines in schema order). Only complete lines count: an
    unterminated last line of a client that disconnects is dropped (and counted).
    Bounded mode: ``until="disconnect"`` ends once a client has connected and every
    client has gone; ``count=N`` after N records."""
    problems: list[str] = []
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        problems.append(f"port must be a TCP port 1-65535, got {port!r}")
    if not isinstance(host, str) or not host:
        problems.append(f"host must be an address to listen on, got {host!r}")
    _format(format, ("json", "csv"), problems)
    if until not in (None, "disconnect"):
        problems.append(f"until must be None (unbounded) or 'disconnect', got {until!r}")
    _count(count, problems)
    args = {"host": host, "port": port, "format": format, "until": until, "count": count}
    return ConnectorSpec("source", f"{MODULE}.tcp", "TcpLineSource", tuple(sorted(args.items())),
                         f"tcp://{host}:{port}", tuple(problems))


def folder_source(path: str, *, format: str = "jsonl", existing: bool = True, until: str | None = None,
                  count: int | None = None, poll: float = 0.1) -> ConnectorSpec:
    """Read each new file of directory ``path`` once, in name order (``format``: ``jsonl``
    or ``csv`` with a header). A file is ready when its name does not start with '.' or
    '_' and does not end with '.tmp' or '.part': write it under such a name and rename
    it when complete. ``existing=False`` skips the files already there at open. Bounded
    mode: ``until="empty"`` ends when no unread ready file is left; ``count=N`` after N
    records. The folder is listed at most every ``poll`` seconds."""
    problems: list[str] = []
    if not isinstance(path, str | os.PathLike) or not str(path):
        problems.append(f"path must be a directory, got {path!r}")
        path = ""
    _format(format, ("jsonl", "csv"), problems)
    if until not in (None, "empty"):
        problems.append(f"until must be None (unbounded) or 'empty', got {until!r}")
    _count(count, problems)
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not poll > 0:
        problems.append(f"poll must be a number of seconds > 0, got {poll!r}")
    path = os.path.abspath(path) if path else ""  # PEs may run elsewhere: resolve against the builder's cwd
    args = {"path": path, "format": format, "existing": bool(existing), "until": until, "count": count,
            "poll": poll}
    return ConnectorSpec("source", f"{MODULE}.folder", "FolderSource", tuple(sorted(args.items())),
                         f"folder {path}", tuple(problems))


def _is_id(text: str) -> bool:
    ms, sep, seq = text.partition("-")
    return ms.isdigit() and (not sep or seq.isdigit())
