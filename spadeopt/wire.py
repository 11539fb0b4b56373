"""The wire format between PEs: msgpack batches, final markers, and the boundary check.

Pure functions and constants, no sockets (``spadeopt.runtime.transport`` sends and
receives these frames over ZeroMQ): the runtime and the profiler (which sizes tuples as
the wire encodes them) both import this module, and it imports only msgpack.

A frame is one batch: a msgpack array of tuples, encoded with ``pack``/``packer`` (ints
past 64 bits as the ``BIGINT_EXT`` extension; anything but int, float, str, bytes, bool
and None refused) and decoded with ``unpack`` (arrays as tuples). The final marker of a
link is a frame that starts with ``FINAL_TAG`` (0xc1, a byte msgpack never produces)
followed by the link id, so a receiver counts finals per upstream link.

``decode_batch`` is the PE boundary: what comes off a socket becomes a batch only if it
is at most ``max_frame`` bytes, a msgpack array whose every element has the port's
arity, whose elements are tuples (all of them in batches of up to ``SAMPLE_ALL``, every
``SAMPLE_STRIDE``-th in larger ones) and whose first and last tuples have the port's
wire types. The checks are C-level passes or samples, so they stay cheap (measured by
``spadeopt bench fused-overhead``); anything else raises ``WireError`` saying what
was wrong.
"""

from __future__ import annotations

import math
import struct

import msgpack

from spadeopt.model.schema import SCALARS

FINAL_TAG = b"\xc1"
BARRIER_TAG = b"\xc2"  # a checkpoint barrier (spadeopt.runtime.barrier_alignment); a batch never starts with 0xc2
MARKER_TAG = b"\xc3"  # a latency marker (spadeopt.runtime.latency); a batch never starts with 0xc3
DEFAULT_MAX_FRAME = 64 * 1024 * 1024  # bytes; a larger frame is an error at the receiver
DEFAULT_BATCH = 512  # tuples per batch between PEs (plan.deployment.RunSettings.batch_size; a profiled plan's: optimize.batching); frames also cut by bytes (FRAME_BYTES)
FRAME_BYTES = 1 << 20  # a batch encoding to more is sent as frames of about this many bytes at most (runtime.transport)
DEFAULT_HWM = 32  # frames queued per link (ZeroMQ's high-water mark)
DEFAULT_BATCH_DELAY = 0.005  # s a live source's partial batch may wait before it is sent (RunSettings.max_batch_delay)
SAMPLE_ALL, SAMPLE_STRIDE = 64, 16  # batches up to 64 tuples: every element checked; else every 16th

# Which Python types a msgpack-decoded attribute may have, per schema type. None (nil)
# is allowed everywhere: operators emit it for missing values (e.g. an aggregate of
# nothing), and the toolkit treats it as such.
_NONE = type(None)
WIRE_TYPES: dict[str, frozenset[type]] = {name: s.wire | {_NONE} for name, s in SCALARS.items()}


class WireError(ValueError):
    """A frame that is not a valid batch for the port it arrived on."""


BIGINT_EXT = 1
"""The msgpack extension type of an int outside msgpack's own [-2**63, 2**64): its
two's-complement bytes, big-endian. Without it such an int, which Python computes and
fused operators pass on, failed only where it crossed a PE: an answer that depended on
the fusion."""


def _encode_other(obj: object) -> msgpack.ExtType:
    """msgpack's ``default``: called for what it cannot pack itself."""
    if type(obj) is int:  # only ints past 64 bits get here
        return msgpack.ExtType(BIGINT_EXT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
    raise TypeError(f"a {type(obj).__name__} cannot be sent between PEs; attributes are int, float, "
                    f"str, bytes, bool or None")


def _decode_ext(code: int, data: bytes) -> int:
    """msgpack's ``ext_hook``: a big int, or the frame is refused (``decode_batch``)."""
    if code != BIGINT_EXT:
        raise ValueError(f"unknown msgpack extension type {code}")
    return int.from_bytes(data, "big", signed=True)


def packer() -> msgpack.Packer:
    """A packer of the wire's encoding (not thread-safe: one per user)."""
    return msgpack.Packer(default=_encode_other)


def pack(obj: object) -> bytes:
    """One value in the wire's encoding.

    >>> unpack(pack([(1, 2**70, "a", None)]))
    ((1, 1180591620717411303424, 'a', None),)
    """
    return msgpack.packb(obj, default=_encode_other)


def unpack(data: bytes):
    """The wire's decoding of ``data`` (tuples, not lists; big ints restored)."""
    return msgpack.unpackb(data, use_list=False, raw=False, ext_hook=_decode_ext)


def final_frame(link: str) -> bytes:
    return FINAL_TAG + link.encode()


def barrier_frame(link: str, checkpoint: int) -> bytes:
    """Checkpoint ``checkpoint``'s barrier on ``link``: the tag, the id (8 bytes), the link."""
    return BARRIER_TAG + checkpoint.to_bytes(8, "big") + link.encode()


def parse_barrier(data) -> tuple[int, str]:
    """``(checkpoint id, claimed link)`` of a barrier frame; ``WireError`` if malformed."""
    if len(data) < 10 or len(data) > 9 + 256:
        raise WireError(f"malformed checkpoint barrier: {_describe(data)}")
    try:
        return int.from_bytes(bytes(data[1:9]), "big"), bytes(data[9:]).decode()
    except UnicodeDecodeError:
        raise WireError(f"malformed checkpoint barrier: {_describe(data)}") from None


def marker_frame(origin: str, seq: int, t0: float) -> bytes:
    """A latency marker: the tag, its sequence number per origin (8 bytes), the wall time
    its origin's records came in (an IEEE double), the origin (a source operator's name)."""
    return MARKER_TAG + seq.to_bytes(8, "big") + struct.pack(">d", t0) + origin.encode()


def parse_marker(data) -> tuple[str, int, float]:
    """``(origin, seq, t0)`` of a latency marker frame; ``WireError`` if malformed (a
    length out of bounds, an origin that is not UTF-8, a time that is not finite)."""
    if len(data) < 18 or len(data) > 17 + 256:
        raise WireError(f"malformed latency marker: {_describe(data)}")
    try:
        origin = bytes(data[17:]).decode()
    except UnicodeDecodeError:
        raise WireError(f"malformed latency marker: {_describe(data)}") from None
    (t0,) = struct.unpack(">d", bytes(data[9:17]))
    if not math.isfinite(t0):
        raise WireError(f"malformed latency marker: time {t0!r}")
    return origin, int.from_bytes(bytes(data[1:9]), "big"), t0


def _describe(data) -> str:
    head = bytes(data[:16])
    return f"{len(data)} bytes starting {head.hex(' ')}" if len(data) else "an empty frame"


def decode_batch(data, types: tuple[frozenset[type], ...] | None, max_frame: int = DEFAULT_MAX_FRAME,
                 pulsed: bool = False) -> tuple:
    """Decode one frame into a batch for a port whose attributes have ``types``.

    ``types`` None: the port's schema is unknown (accept any tuples). ``pulsed``: the
    port is inside a parallel region, so a batch may end with a fission pulse, a 1-tuple
    holding an int sequence number (``spadeopt.runtime.merges``). Raises ``WireError``
    naming what was wrong; never returns anything but a tuple of tuples.
    """
    n = len(data)
    if n > max_frame:
        raise WireError(f"oversized frame: {n:,} bytes, the limit is {max_frame:,}")
    try:
        batch = unpack(data)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several kinds for garbage
        raise WireError(f"not a msgpack batch ({type(exc).__name__}: {exc or 'no detail'}): "
                        f"{_describe(data)}") from None
    if type(batch) is not tuple:
        raise WireError(f"not a batch: a msgpack {type(batch).__name__}, expected an array of tuples "
                        f"({_describe(data)})")
    if not batch:
        return batch
    sample = batch if len(batch) <= SAMPLE_ALL else batch[::SAMPLE_STRIDE] + batch[-1:]
    if set(map(type, sample)) != {tuple}:
        bad = next(t for t in sample if type(t) is not tuple)
        raise WireError(f"a batch element is a {type(bad).__name__} ({bad!r:.60}), expected a tuple")
    if types is None:
        return batch
    arity = len(types)
    body = batch
    if pulsed and len(batch[-1]) == 1 and arity != 1:
        if type(batch[-1][0]) is not int:
            raise WireError(f"a fission pulse must hold an int sequence number, got {batch[-1]!r:.60}")
        body = batch[:-1]
        if not body:
            return batch
    try:
        lengths = list(map(len, body))  # every tuple: one pass in C
    except TypeError:
        bad = next(t for t in batch if not hasattr(t, "__len__"))
        raise WireError(f"a batch element is a {type(bad).__name__} ({bad!r:.60}), expected a tuple") from None
    if lengths.count(arity) != len(body):
        bad = next(t for t in body if len(t) != arity)
        raise WireError(f"wrong arity: a {type(bad).__name__} of {len(bad)} attributes ({bad!r:.80}) where the "
                        f"port has {arity}")
    if not (all(map(_allows, types, map(type, body[0]))) and all(map(_allows, types, map(type, body[-1])))):
        _wrong_type(body, types)
    return batch


_allows = frozenset.__contains__


def _wrong_type(body: tuple, types: tuple[frozenset[type], ...]) -> None:
    """Raise ``WireError`` naming the first attribute of ``body``'s first or last tuple
    that does not have its wire type."""
    for t in (body[0], body[-1]):
        for i, (v, ok) in enumerate(zip(t, types, strict=True)):
            if type(v) not in ok:
                want = "/".join(sorted(x.__name__ for x in ok))
                raise WireError(f"wrong type: attribute {i} is a {type(v).__name__} ({v!r:.40}), "
                                f"expected {want}")
    raise WireError("wrong type")  # not reached: decode_batch calls this on a wrong type only


def wire_types(schema: list | None) -> tuple[frozenset[type], ...] | None:
    """The per-attribute wire types of a schema given as ``[[name, type], ...]``."""
    if schema is None:
        return None
    return tuple(WIRE_TYPES[t] for _, t in schema)
