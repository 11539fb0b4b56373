"""Tuple sizes as profiles record them: the bytes of the tuple's wire encoding.

The default estimator, ``msgpack_size``, is the length of the tuple's encoding in
``spadeopt.wire`` (msgpack, ints past 64 bits as an extension), so a profiled size is
what a link between PEs would carry whatever the fusion. A ``Profiler`` may be given
another ``sizeof``; a tuple the wire cannot encode is a ``ProfileError`` naming its type.
``packer_size`` is the same function with a ``msgpack.Packer`` of its own, about 4x
cheaper than ``packb``; a Packer is not thread-safe, so each recorder makes its own.

The size memo (``new_size_memo``) is shared by the recorders of one PE, so the points
of a chain of operators that pass tuples (or whole batches) on unchanged size a sampled
tuple once. It is a list of two items: ``[0]`` the ``(tuple, size)`` of the last
one-sample call, ``[1]`` the ``(batch, offsets, sizes)`` of the last call with several.
Entries are matched by identity (``is``), never by equality, and each item is replaced
in one store, so points of several threads may share the memo.

Cost: one encoding per sized tuple, and only the tuples a reservoir keeps are sized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spadeopt.errors import ProfileError
from spadeopt.wire import pack as wire_pack
from spadeopt.wire import packer as wire_packer

_NOTHING = object()


def msgpack_size(tup: object) -> int:
    """Bytes of one tuple as the wire encodes it (msgpack, big ints as an extension): the
    default tuple-size estimator."""
    try:
        return len(wire_pack(tup))
    except (TypeError, ValueError, OverflowError) as e:
        msg = (
            f"cannot measure the size of a tuple of type {type(tup).__name__} with msgpack "
            f"({e}); tuples must be msgpack-encodable, or pass sizeof= to Profiler"
        )
        raise ProfileError(msg) from e


def new_size_memo() -> list[Any]:
    """A new size memo, for the recorders of one PE (module docstring)."""
    return [(_NOTHING, 0), (_NOTHING, (), [])]


def packer_size() -> Callable[[object], int]:
    """A ``msgpack_size`` with its own ``msgpack.Packer`` (4x cheaper than ``packb``).

    One per recorder: a Packer holds a buffer and is not thread-safe, and a recorder is
    only ever used by one thread at a time.
    """
    pack = wire_packer().pack

    def size(tup: object) -> int:
        try:
            return len(pack(tup))
        except (TypeError, ValueError, OverflowError):
            return msgpack_size(tup)  # raises the ProfileError naming the type

    return size
