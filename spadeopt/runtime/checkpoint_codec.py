"""The checkpoint state codec and operator state: what crosses to the driver and back.

State crosses to the driver and back as msgpack (``encode_state``), never pickle:
tuples, deques and big ints are extension types, and so are collections of flat rows
(a window's groups, packed in one call: ``_fast``), everything else is msgpack's own;
``decode_state`` builds only those types, and a restore checks the snapshot's shape
against the PE before changing anything (``restore_ops``). ``snapshot_ops`` /
``restore_ops`` take and put back the objects a checkpointing build's operators
registered (``rt.state``). The protocol that uses them: ``runtime.barrier_alignment``.
"""

from __future__ import annotations

import threading
from collections import deque
from itertools import chain
from typing import Any

import msgpack

from spadeopt import wire

_TUPLE, _DEQUE, _GROUPS, _ROWS = 2, 3, 4, 5
_FLAT = frozenset({str, int, float, bool, bytes, type(None)})  # what a row's field may be on the fast path
_JUST_TUPLE, _JUST_LIST = frozenset({tuple}), frozenset({list})
MAX_STATE = 1 << 31  # bytes: msgpack's own limits are per object; a snapshot part is one blob


class CheckpointError(RuntimeError):
    """A snapshot that cannot be taken, read or restored; names the PE and what was wrong."""



# ---- the state codec -------------------------------------------------------------------

_depth = threading.local()  # per thread: the nesting depth and a reused Packer per depth (not reentrant)


def _nested(data: Any) -> bytes:
    """``data`` packed by this depth's reused Packer (half the time of ``packb`` per
    tuple: a window's state is mostly small tuples)."""
    d = getattr(_depth, "d", 0)
    packers = getattr(_depth, "packers", None)
    if packers is None:
        packers = _depth.packers = []
    if d == len(packers):
        packers.append(msgpack.Packer(default=_encode_other, strict_types=True))
    _depth.d = d + 1
    try:
        return packers[d].pack(data)
    finally:
        _depth.d = d


def _encode_other(obj: object) -> msgpack.ExtType:
    t = type(obj)
    if t is tuple:
        return msgpack.ExtType(_TUPLE, _nested(list(obj)))
    if t is deque:
        return msgpack.ExtType(_DEQUE, _nested([obj.maxlen, list(obj)]))
    if t is int:  # only ints past 64 bits get here
        return msgpack.ExtType(wire.BIGINT_EXT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
    raise CheckpointError(f"a {t.__name__} ({obj!r:.60}) cannot be checkpointed: state is made of None, bool, "
                          f"int, float, str, bytes, list, tuple, dict and deque")


# The fast path. A window's state is a dict of key -> list (or deque) of rows, a row a
# tuple of scalars; packing each row through ``default`` (an ExtType per tuple, a Python
# call each) cost ~35 ms for 26 k rows. A collection of flat rows (checked at C speed:
# the set of the types of its items, then of their fields) is packed in one call by a
# Packer that writes tuples as arrays, inside one extension (``_ROWS``: a list of rows;
# ``_GROUPS``: a dict of key -> list of rows, keys scalars or flat tuples; a list may
# also hold scalars: a tumbling window's running values), and unpacked
# with every array as a tuple (``use_list=False``): 3-4x less CPU both ways, and the
# decoded value is the same as on the slow path.

def _loose(data: Any) -> bytes | None:
    """``data`` (flat rows: only scalars inside) packed with tuples as arrays; None for
    an int past 64 bits (the slow path packs it)."""
    packer = getattr(_depth, "loose", None)
    if packer is None:
        packer = _depth.loose = msgpack.Packer(strict_types=False, autoreset=True)
    try:
        return packer.pack(data)
    except (OverflowError, ValueError):  # an int past 64 bits
        packer.reset()
        return None


def _flat_keys(d: dict) -> bool:
    kinds = {*map(type, d)}
    if kinds <= _FLAT:
        return True
    return kinds <= _FLAT | _JUST_TUPLE and {*map(type, chain.from_iterable(k for k in d if type(k) is tuple))} <= _FLAT


def _flat_items(vals: Any) -> bool:
    """Every list in ``vals`` holds flat items: scalars, or tuples of scalars (a window's
    rows, or a tumbling window's running values: a count, sums, its first tuple)."""
    kinds = {*map(type, chain.from_iterable(vals))}
    if kinds <= _JUST_TUPLE:
        return {*map(type, chain.from_iterable(chain.from_iterable(vals)))} <= _FLAT
    if kinds <= _FLAT:
        return True
    return kinds <= _FLAT | _JUST_TUPLE and \
        {*map(type, chain.from_iterable(x for x in chain.from_iterable(vals) if type(x) is tuple))} <= _FLAT


def _fast(obj: Any) -> Any:
    """``obj`` with its collections of flat rows replaced by ``_ROWS`` / ``_GROUPS``
    extensions; everything else as it is (``_encode_other`` packs it). Every container on
    the way is copied or packed, never changed."""
    t = type(obj)
    if t is dict:
        vals = obj.values()
        if obj and {*map(type, vals)} == _JUST_LIST and _flat_items(vals) and _flat_keys(obj):
            data = _loose(obj)
            if data is not None:
                return msgpack.ExtType(_GROUPS, data)
        return {k: _fast(v) if type(v) in _CONTAINERS else v for k, v in obj.items()}
    if t is list or t is deque:
        if obj and {*map(type, obj)} == _JUST_TUPLE and {*map(type, chain.from_iterable(obj))} <= _FLAT:
            data = _loose(obj if t is list else list(obj))
            if data is not None:
                rows = msgpack.ExtType(_ROWS, data)
                return rows if t is list else msgpack.ExtType(_DEQUE, _nested([obj.maxlen, rows]))
        if t is list:
            return [_fast(v) if type(v) in _CONTAINERS else v for v in obj]
    return obj


_CONTAINERS = frozenset({dict, list, deque})


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code} inside flat rows")


def _rows(data: bytes) -> list:
    rows = msgpack.unpackb(data, ext_hook=_no_ext, raw=False, use_list=False, strict_map_key=False)
    if type(rows) is not tuple or not {*map(type, rows)} <= _JUST_TUPLE:
        raise ValueError("bad rows")
    return list(rows)


def _groups(data: bytes) -> dict:
    groups = msgpack.unpackb(data, ext_hook=_no_ext, raw=False, use_list=False, strict_map_key=False)
    if type(groups) is not dict or not {*map(type, groups.values())} <= _JUST_TUPLE or \
            not _flat_items(groups.values()):
        raise ValueError("bad groups")
    return {k: list(v) for k, v in groups.items()}


def _decode_ext(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _DEQUE:
        maxlen, items = _unpack(data)
        if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
            raise ValueError(f"bad deque maxlen {maxlen!r}")
        return deque(items, maxlen)
    if code == _ROWS:
        return _rows(data)
    if code == _GROUPS:
        return _groups(data)
    if code == wire.BIGINT_EXT:
        return int.from_bytes(data, "big", signed=True)
    raise ValueError(f"unknown extension type {code}")


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=True, strict_map_key=False)


def encode_state(obj: Any) -> bytes:
    """``obj`` as msgpack: tuples stay tuples, deques keep their maxlen (collections of
    flat rows take the fast path, ``_fast``).

    >>> decode_state(encode_state({(1, "a"): [deque([(2**70,)], 3), None]}))
    {(1, 'a'): [deque([(1180591620717411303424,)], maxlen=3), None]}
    """
    return msgpack.packb(_fast(obj), default=_encode_other, strict_types=True)


def decode_state(data: bytes) -> Any:
    """The value ``encode_state`` made; ``CheckpointError`` for anything else."""
    try:
        return _unpack(data)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several kinds for garbage
        raise CheckpointError(f"not a spadeopt snapshot ({type(exc).__name__}: {exc or 'no detail'})") from None


# ---- operator state: what the generated code registers --------------------------------

def _take(obj: Any) -> Any:
    """The state of one registered object: a dict or list as it is, an object with
    ``snapshot()`` (a custom operator) its answer, any other object its attributes."""
    if type(obj) in (dict, list):
        return obj
    snap = getattr(obj, "snapshot", None)
    if callable(snap):
        return snap()
    return dict(vars(obj))


def _put(obj: Any, value: Any, where: str) -> None:
    """Restore ``obj`` in place (the generated code holds references to it)."""
    if type(obj) is dict:
        if type(value) is not dict:
            raise CheckpointError(f"{where}: expected a dict in the snapshot, found a {type(value).__name__}")
        obj.clear()
        obj.update(value)
    elif type(obj) is list:
        if type(value) is not list or len(value) != len(obj):
            raise CheckpointError(f"{where}: expected a list of {len(obj)} in the snapshot, found {value!r:.60}")
        obj[:] = value
    elif callable(getattr(obj, "snapshot", None)):
        obj.restore(value)
    else:
        if type(value) is not dict or set(value) != set(vars(obj)):
            raise CheckpointError(f"{where}: the snapshot's fields {sorted(value) if type(value) is dict else value!r:.80} "
                                  f"are not {type(obj).__name__}'s {sorted(vars(obj))}")
        vars(obj).update(value)


def snapshot_ops(states: dict[str, tuple]) -> dict[str, list]:
    return {op: [_take(o) for o in objs] for op, objs in states.items()}


def restore_ops(pe: str, states: dict[str, tuple], snap: Any) -> None:
    if type(snap) is not dict or set(snap) != set(states):
        have = sorted(snap) if type(snap) is dict else type(snap).__name__
        raise CheckpointError(f"PE {pe}: the snapshot holds operators {have}, the PE {sorted(states)}")
    for op, objs in states.items():
        vals = snap[op]
        if type(vals) is not list or len(vals) != len(objs):
            raise CheckpointError(f"PE {pe}, operator '{op}': the snapshot holds {vals!r:.60}, "
                                  f"expected {len(objs)} state value(s)")
        for i, (o, v) in enumerate(zip(objs, vals, strict=True)):
            _put(o, v, f"PE {pe}, operator '{op}' (state {i})")
