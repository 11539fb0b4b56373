"""The connector contract: what every source and sink looks like to a PE.

A **source** is opened at a position, then read a batch at a time *without blocking*:

* ``open()``: connect, find the start position; raises ``ConnectorError`` naming the
  source and what to do when it cannot (a broker that does not answer, a port in use).
* ``read(n)``: at most ``n`` records (tuples of the schema's types), now. ``[]`` means
  "nothing at the moment" (a live source; the PE gives its turn to its other sources
  and backs off for a millisecond when none has anything), ``None`` means the source
  has ended (a bounded source: a file's end, a stream's end observed at open, a count).
* ``position()``: where the next read starts, as a JSON-able value (a line number, an
  entry ID per stream key, the files done), so a run can report it and a checkpoint
  could store it.
* ``resumable``, ``resume_state()``, ``resume(state)``: a source that can be reopened
  just after a position (a broker: the last entry ID per stream key) is ``resumable``;
  ``resume_state()`` is where the records read so far end (JSON-able), and
  ``resume(state)``, called before ``open()``, makes the source start just after it.
  A checkpoint stores a resumable source's state at the last record passed on to the
  operators and restores it this way; any other source is replayed by count (it gives
  the same records in the same order every time: a generator, a file).
* ``arrived()``: optional, when the oldest record of the last read came in by the
  feed's clock (a broker entry's ID time), for latency markers (``runtime.latency``).
* ``lag()``: records known to be waiting behind the position (entries behind a
  stream's end, bytes of ready files not yet read), or None when the source cannot
  know (a socket).
* ``close()``: release sockets and files; called once, also after a failure.
* Channels: a source that can be split takes ``part`` and ``parts`` (``0`` and ``1``
  outside a parallel region) and reads only its share (for Redis Streams: the stream
  keys ``part, part + parts, ...``).

A **sink** takes batches: ``open()``, ``write(batch)``, ``flush()`` (make everything
written so far durable / visible downstream), ``report()`` (a JSON-able summary:
counts, last entry ID) and ``close()`` (flushes). A ``transactional`` sink can be
exactly once in a checkpointing run (``runtime.barrier_alignment`` drives it): ``stage(owner,
lineage, run)`` makes ``write`` keep the records; ``prepare(n)`` closes epoch ``n`` (the
records since the previous barrier) and returns every epoch not yet committed, which the
checkpoint's part holds; ``commit(n)`` writes the epochs up to ``n`` once checkpoint ``n``
is complete, each with a marker of its id in one transaction, skipping an id already
committed; ``recover(epochs)`` takes back a restored part's epochs (committed at once:
the restored checkpoint is complete); ``close()`` writes what is left as the run's tail.

A generator or any iterable is a bounded source through ``IterableSource``; the file
replays (``toolkit.sources.read_csv`` and friends) are ``RecordSource``s; the live
connectors (``connectors.redis_streams``, ``connectors.tcp``, ``connectors.folder``)
implement the same methods, so the generated PE code runs every source through the
one loop ``PERuntime.source_batches``. Described for users in ``docs/connectors.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from spadeopt.errors import SpadeoptError


class ConnectorError(SpadeoptError):
    """A connector cannot open, read or write: names the operator, the endpoint and what to do."""


class Source:
    """Base of every source connector (see the module docstring for the contract)."""

    live = False  # True: read() may return [] (nothing now); False: only records or None (ended)
    resumable = False  # True: resume(state) reopens it just after a resume_state() (checkpoints)
    ENDS_BY: tuple[str, ...] = ("until", "count")  # the constructor arguments that give a live source an end

    @classmethod
    def unbounded_with(cls, args: Mapping[str, Any]) -> bool:
        """Whether a source of this type made with ``args`` is live with no end of its own
        (none of ``ENDS_BY`` given): a run that has one ends only on a stop request
        (Ctrl-C, SIGTERM), ``--duration`` or a failure, and a stop request is then its
        normal end (``deploy.launcher.run_build``). The one definition: the PE asks an
        open source (:attr:`unbounded`), the build asks the type (``connectors.declared``)."""
        return cls.live and all(args.get(a) is None for a in cls.ENDS_BY)

    @property
    def unbounded(self) -> bool:
        """:meth:`unbounded_with` of this source's own arguments (``until``; ``count`` kept
        as ``limit``)."""
        return self.unbounded_with({"until": getattr(self, "until", None), "count": getattr(self, "limit", None)})

    def open(self) -> None:  # noqa: B027 - optional hook
        pass

    def read(self, n: int) -> list[tuple] | None:
        raise NotImplementedError

    def position(self) -> Any:
        return None

    def lag(self) -> int | None:
        return None

    def arrived(self) -> float | None:
        """When the oldest record of the last read that returned records came in, in
        seconds since the epoch by the feed's own clock (a broker: the entry's ID time),
        or None when the source cannot tell: the PE then counts latency from its read
        (``runtime.latency``)."""
        return None

    def resume_state(self) -> Any:
        """Where the records read so far end, for ``resume`` (JSON-able): ``position()``."""
        return self.position()

    def resume(self, state: Any) -> None:
        """Before ``open()``: start just after ``state`` (a ``resume_state()`` value), not at
        the configured start; ``ValueError`` when ``state`` is not one of this source's."""
        raise NotImplementedError(f"{type(self).__name__} cannot resume from a position")

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __iter__(self) -> Iterator[tuple]:
        """Every record, for code that treats a bounded source as an iterable (tests,
        the in-process simulator). A live source's idle reads are skipped, so iterating an
        unbounded one never ends."""
        self.open()
        try:
            while (batch := self.read(512)) is not None:
                yield from batch
        finally:
            self.close()


class Sink:
    """Base of every sink connector (see the module docstring for the contract)."""

    transactional = False  # True: stage/prepare/commit/recover make it exactly once with checkpoints

    def open(self) -> None:  # noqa: B027 - optional hook
        pass

    def write(self, batch: list[tuple]) -> None:
        raise NotImplementedError

    def flush(self) -> None:  # noqa: B027 - optional hook
        pass

    def report(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.flush()


class IterableSource(Source):
    """A generator, list or tuple as a bounded source. Lists and tuples are cut by
    slicing (a fresh list of references), anything else through ``islice``; position is
    the number of records read."""

    def __init__(self, iterable: Iterable) -> None:
        self._data = iterable
        self._it: Iterator | None = None
        self._at = 0

    def read(self, n: int) -> list[tuple] | None:
        data = self._data
        if isinstance(data, list | tuple):
            batch = list(data[self._at:self._at + n])
        else:
            if self._it is None:
                self._it = iter(data)
            batch = list(islice(self._it, n))
        if not batch:
            return None
        self._at += len(batch)
        return batch

    def position(self) -> int:
        return self._at

    def lag(self) -> int | None:
        return len(self._data) - self._at if isinstance(self._data, list | tuple) else None


class RecordSource(Source):
    """A bounded source over a record iterator made when it opens (the file replays):
    ``records()`` yields the tuples; ``where()`` says the position (e.g. ``path:line``)."""

    def __init__(self) -> None:
        self._it: Iterator[tuple] | None = None
        self._count = 0

    def records(self) -> Iterator[tuple]:
        raise NotImplementedError

    def open(self) -> None:
        if self._it is None:
            self._it = self.records()

    def read(self, n: int) -> list[tuple] | None:
        if self._it is None:
            self.open()
        batch = list(islice(self._it, n))
        if not batch:
            return None
        self._count += len(batch)
        return batch

    def position(self) -> int:
        return self._count

    def close(self) -> None:
        it, self._it = self._it, None
        if it is not None and hasattr(it, "close"):
            it.close()  # a generator's finally: the file closes


class LimitedSource(Source):
    """The first ``limit`` records of ``source``, then its end (``run --verify-fission
    N``): the connector itself is still what opens, reports its position and closes, so a
    file keeps its ``path:line`` errors and a limited source is still one connector.

    >>> src = LimitedSource(IterableSource(range(10)), 3)
    >>> src.read(2), src.read(2), src.read(2), src.position()
    ([0, 1], [2], None, 3)
    """

    def __init__(self, source: Source, limit: int) -> None:
        if source.live:
            raise ValueError("a live source cannot be limited by a record count")
        self.source, self.left = source, limit

    def open(self) -> None:
        self.source.open()

    def read(self, n: int) -> list[tuple] | None:
        if self.left <= 0:
            return None
        batch = self.source.read(min(n, self.left))
        if batch:
            self.left -= len(batch)
        return batch

    def position(self) -> Any:
        return self.source.position()

    def lag(self) -> int | None:
        return None

    def close(self) -> None:
        self.source.close()


def as_source(obj: Any) -> Source:
    """``obj`` itself when it is a source connector, else the iterable as an ``IterableSource``."""
    return obj if isinstance(obj, Source) else IterableSource(obj)
