"""Built-in sources: file replay and a seeded tuple counter; splittable sources.

Every source is called in the PE's source thread and gives a source connector
(``spadeopt.connectors.contract``) or an iterable of tuples, which the runtime reads as an
``IterableSource``; either way the runtime reads it in batches. The file replays
(``read_csv``, ``read_jsonl``, ``read_parquet``) are ``FileSource`` connectors; the casts
of their values are ``spadeopt.connectors.formats``'s, shared with the live connectors.

A *splittable* generator (:func:`splittable`) cuts its stream into *splits* of a fixed
number of records, numbered 0, 1, 2, ...: called with ``part=p, parts=n`` it yields,
in order, the splits ``p, p + n, p + 2n, ...``, each as a list (or tuple) of records,
every split full except the stream's last. With ``part=0, parts=1`` it yields the
whole stream. Such a source may lead a parallel region (fission): each channel's copy
reads its own share of the splits, with no split operator and no link in front of it,
and the region's merge takes the splits back in order, so the answer is the width-1
answer. Data-parallel readers in the style of Spark's input splits or Flink's source
splits; the runtime checks the sizes it can (a short split that is not a copy's last
stops the job naming the source).
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterator

from spadeopt.connectors.files import FileSource, read_csv, read_jsonl, read_parquet
from spadeopt.connectors.formats import CASTS

__all__ = ["CASTS", "FileSource", "counter", "length", "read_csv", "read_jsonl", "read_parquet", "split_size",
           "splittable"]

SPLIT_ATTR = "__spadeopt_split__"
LENGTH_ATTR = "__spadeopt_length__"
LENGTH_NAMES = frozenset({"n", "tuples", "records", "events", "samples", "count", "limit", "stop"})
"""Argument names taken to bound a generator's length when it declares none (:func:`length`)."""


def length(*names: str) -> Callable[[Callable], Callable]:
    """Declare which of a generator's arguments only bound how many records it yields: a
    profile taken with one value plans runs with any other (``spadeopt optimize -p
    tuples=4000000`` with a profile of 1 M tuples). Without it, the arguments named in
    :data:`LENGTH_NAMES` count as such; any other argument that differs from the profile's
    run gets a warning.

    >>> @length("rows")
    ... def table(rows, width=3):
    ...     yield from ((i,) * width for i in range(rows))
    >>> sorted(getattr(table, LENGTH_ATTR))
    ['rows']
    """
    bad = [n for n in names if not (isinstance(n, str) and n.isidentifier())]
    if bad or not names:
        raise ValueError(f"length(*names): give the generator's argument names, got {names!r}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, LENGTH_ATTR, frozenset(names))
        return fn

    return mark


def declared_length_args(module: str, qualname: str) -> frozenset[str]:
    """The length arguments of the generator ``module.qualname`` (:func:`length`), else
    those of :data:`LENGTH_NAMES` it takes; empty when it cannot be imported."""
    import importlib

    try:
        fn: object = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError):
        return frozenset()
    declared = getattr(fn, LENGTH_ATTR, None)
    if declared is not None:
        return frozenset(declared)
    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return frozenset()
    return frozenset(p for p in params if p in LENGTH_NAMES)


def splittable(size: int | str) -> Callable[[Callable], Callable]:
    """Declare a generator splittable into splits of ``size`` records (module docstring);
    ``size`` may name one of the generator's arguments that holds the split size.

    >>> @splittable(2)
    ... def numbers(n, *, part=0, parts=1):
    ...     for s in range(part, -(-n // 2), parts):
    ...         yield list(range(2 * s, min(2 * s + 2, n)))
    >>> list(numbers(5, part=1, parts=2))
    [[2, 3]]
    >>> split_size(numbers, {"n": 5})
    2
    """
    if isinstance(size, bool) or not (isinstance(size, str) and size.isidentifier()
                                      or isinstance(size, int) and size >= 1):
        raise ValueError(f"splittable(size): size must be an integer >= 1 or an argument's name, got {size!r}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, SPLIT_ATTR, size)
        return fn

    return mark


def split_size(fn: Callable, args: dict) -> int:
    """Records per split of a :func:`splittable` generator called with ``args``; 0 when it
    is not splittable. ``ValueError`` when the size argument is not an integer >= 1."""
    size = getattr(fn, SPLIT_ATTR, 0)
    if isinstance(size, str):
        name = size
        if name in args:
            size = args[name]
        else:
            param = inspect.signature(fn).parameters.get(name)
            size = None if param is None else param.default
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"the split size argument {name!r} must be an integer >= 1, got {size!r}")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def counter(n: int, size: int = 100, seed: int = 0) -> Iterator[tuple]:
    """``n`` tuples ``(seq, payload)`` whose msgpack encoding is about ``size`` bytes."""
    rng = random.Random(seed)
    payload_len = max(0, size - 12)
    payload = bytes(rng.getrandbits(8) for _ in range(payload_len))
    for i in range(n):
        yield (i, payload)
