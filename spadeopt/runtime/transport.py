"""ZeroMQ links between PEs: batched msgpack over PUSH/PULL, bounded by high-water marks.

Each PE input port binds one PULL socket (ipc within a node, tcp across nodes; both
when needed); each inter-PE link is its own PUSH socket. A message is one batch of
tuples encoded with msgpack (never pickle). The final marker of a link is a frame
that starts with ``FINAL_TAG`` (0xc1, a byte msgpack never produces) followed by the
link id, so a receiver counts finals per upstream link and never twice from one link.
High-water marks bound every queue, so a slow consumer blocks its producer.

``decode_batch`` is the PE boundary: what comes off a socket becomes a batch only if
it is a msgpack array whose every element has the port's arity, whose elements are
tuples (all of them in batches of up to 64, every 16th in larger ones) and whose first
and last tuples have the port's wire types. The checks are C-level passes or samples,
so they stay cheap (measured by ``spadeopt bench fused-overhead``); anything else
raises ``WireError`` with a message saying what was wrong. Links are authenticated and encrypted with CURVE unless the run is insecure
(see ``spadeopt.runtime.security``).

Frames are bounded by ``max_frame`` at both ends: a ``Sender`` refuses to send a larger
batch (``FrameTooLarge``, raised in the operator that submitted it), and every PULL
socket sets ZeroMQ's ``MAXMSGSIZE`` to ``max_frame + FRAME_MARGIN``, so ZeroMQ drops a
connection that sends a larger message before allocating it (CURVE adds 33 bytes to a
frame; frames within the margin still reach ``decode_batch`` and its clear error).
"""

from __future__ import annotations

import threading

import msgpack
import zmq

FINAL_TAG = b"\xc1"
DEFAULT_HWM = 32
LINGER_MS = 60_000
DEFAULT_MAX_FRAME = 64 * 1024 * 1024  # bytes; a larger frame is an error at the receiver
FRAME_MARGIN = 1024  # bytes over max_frame a receiving socket still takes (CURVE's framing and more)
SAMPLE_ALL, SAMPLE_STRIDE = 64, 16  # batches up to 64 tuples: every element checked; else every 16th

# Which Python types a msgpack-decoded attribute may have, per schema type. None (nil)
# is allowed everywhere: operators emit it for missing values (e.g. an aggregate of
# nothing), and the toolkit treats it as such.
_NONE = type(None)
WIRE_TYPES: dict[str, frozenset[type]] = {
    "int": frozenset({int, _NONE}), "float": frozenset({float, int, _NONE}), "str": frozenset({str, _NONE}),
    "bytes": frozenset({bytes, _NONE}), "bool": frozenset({bool, _NONE}),
}


class WireError(ValueError):
    """A frame that is not a valid batch for the port it arrived on."""


class FrameTooLarge(ValueError):
    """A batch whose encoding is over ``max_frame``: no receiver would take it."""


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
    """One value in the wire's encoding."""
    return msgpack.packb(obj, default=_encode_other)


def unpack(data: bytes):
    """The wire's decoding of ``data`` (tuples, not lists; big ints restored)."""
    return msgpack.unpackb(data, use_list=False, raw=False, ext_hook=_decode_ext)


def final_frame(link: str) -> bytes:
    return FINAL_TAG + link.encode()


def _describe(data) -> str:
    head = bytes(data[:16])
    return f"{len(data)} bytes starting {head.hex(' ')}" if len(data) else "an empty frame"


def decode_batch(data, types: tuple[frozenset[type], ...] | None, max_frame: int = DEFAULT_MAX_FRAME,
                 pulsed: bool = False) -> tuple:
    """Decode one frame into a batch for a port whose attributes have ``types``.

    ``types`` None: the port's schema is unknown (accept any tuples). ``pulsed``: the
    port is inside a parallel region, so a batch may end with a fission pulse, a 1-tuple
    holding an int sequence number (``spadeopt.runtime.fission``). Raises ``WireError``
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
        lengths = set(map(len, body))  # every tuple: one pass in C
    except TypeError:
        bad = next(t for t in batch if not hasattr(t, "__len__"))
        raise WireError(f"a batch element is a {type(bad).__name__} ({bad!r:.60}), expected a tuple") from None
    if lengths != {arity}:
        bad = next(t for t in body if len(t) != arity)
        raise WireError(f"wrong arity: a {type(bad).__name__} of {len(bad)} attributes ({bad!r:.80}) where the "
                        f"port has {arity}")
    for t in (body[0], body[-1]):
        for i, (v, ok) in enumerate(zip(t, types, strict=True)):
            if type(v) not in ok:
                want = "/".join(sorted(x.__name__ for x in ok))
                raise WireError(f"wrong type: attribute {i} is a {type(v).__name__} ({v!r:.40}), "
                                f"expected {want}")
    return batch


def wire_types(schema: list | None) -> tuple[frozenset[type], ...] | None:
    """The per-attribute wire types of a schema given as ``[[name, type], ...]``."""
    if schema is None:
        return None
    return tuple(WIRE_TYPES[t] for _, t in schema)


class Sender:
    """An exposed output port: encodes each submitted batch once, sends it on every link."""

    def __init__(self, port: str, locked: bool, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.port = port
        self.sockets: list[zmq.Socket] = []
        self.links: list[str] = []
        self.batches = 0
        self.max_frame = max_frame
        self._packer = packer()
        self._lock = threading.Lock() if locked else None

    def __call__(self, batch) -> None:
        if self._lock is None:
            data = self._packer.pack(batch)
            if len(data) > self.max_frame:
                self._too_large(batch, data)
            for s in self.sockets:
                s.send(data)
            self.batches += 1
            return
        with self._lock:  # ZeroMQ sockets and the packer are not thread-safe
            data = self._packer.pack(batch)
            if len(data) > self.max_frame:
                self._too_large(batch, data)
            for s in self.sockets:
                s.send(data)
            self.batches += 1

    def _too_large(self, batch, data: bytes) -> None:
        raise FrameTooLarge(f"a batch of {len(batch)} tuple(s) for output port {self.port} encodes to "
                            f"{len(data):,} bytes, over max_frame ({self.max_frame:,} bytes): make the tuples "
                            f"smaller or raise max_frame in the build's deploy.json")

    def final(self) -> None:
        for s, link in zip(self.sockets, self.links, strict=True):
            s.send(final_frame(link))


def push_socket(ctx: zmq.Context, hwm: int) -> zmq.Socket:
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, hwm)
    s.setsockopt(zmq.LINGER, LINGER_MS)
    return s


def pull_socket(ctx: zmq.Context, hwm: int, max_frame: int = DEFAULT_MAX_FRAME) -> zmq.Socket:
    """A receiving socket: ZeroMQ drops a connection whose message is over ``max_frame``
    (plus ``FRAME_MARGIN``) before allocating it."""
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, hwm)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.MAXMSGSIZE, max_frame + FRAME_MARGIN)
    return s
