"""The PE boundary: ``decode_batch`` turns a frame into a batch or raises ``WireError``
with a message saying what was wrong, for any bytes at all (fuzzed)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spadeopt.wire import FINAL_TAG, WireError, decode_batch, pack, wire_types

TYPES = wire_types([["seq", "int"], ["payload", "bytes"], ["x", "float"]])


def test_a_valid_batch_is_returned_as_tuples():
    frame = msgpack.packb([(1, b"a", 1.5), (2, None, 3)])  # an int is a valid float; None a missing value
    assert decode_batch(frame, TYPES) == ((1, b"a", 1.5), (2, None, 3))
    assert decode_batch(msgpack.packb([]), TYPES) == ()


@pytest.mark.parametrize("frame,problem", [
    (b"", "not a msgpack batch"),
    (b"\xdc\xff\xff\x01", "not a msgpack batch"),
    (msgpack.packb(7), "not a batch: a msgpack int"),
    (msgpack.packb({"a": 1}), "not a batch: a msgpack dict"),
    (msgpack.packb([1, 2]), "a batch element is a int"),
    (msgpack.packb([(1, b"a", 1.0), (1, b"a")]), "wrong arity: a tuple of 2 attributes"),
    (msgpack.packb([(1, b"a", 1.0, 9)]), "wrong arity: a tuple of 4 attributes"),
    (msgpack.packb([("1", b"a", 1.0)]), "wrong type: attribute 0 is a str"),
    (msgpack.packb([(1, b"a", 1.0), (True, b"a", 1.0)]), "wrong type: attribute 0 is a bool"),
    (msgpack.packb([(1, "a", 1.0)]), "wrong type: attribute 1 is a str"),
    (msgpack.packb([(1, b"a", "1.5")]), "wrong type: attribute 2 is a str"),
    (msgpack.packb([(1, b"a", 1.0)]) + b"\x00", "not a msgpack batch"),
    (msgpack.packb([(msgpack.ExtType(5, b"\x01"), b"a", 1.0)]), "unknown msgpack extension type 5"),
    (msgpack.packb([(1, b"a", 1.0), (msgpack.ExtType(9, b""), b"", 0.5), (2, b"a", 1.0)]),
     "unknown msgpack extension type 9"),  # refused wherever it sits, not only where types are checked
])
def test_malformed_frames_are_refused_saying_what_was_wrong(frame, problem):
    with pytest.raises(WireError) as exc:
        decode_batch(frame, TYPES)
    assert problem in str(exc.value)


def test_oversized_frames_are_refused_before_decoding():
    with pytest.raises(WireError, match="oversized frame: 1,001 bytes, the limit is 1,000"):
        decode_batch(b"\x00" * 1001, TYPES, max_frame=1000)


def _check(frame: bytes) -> None:
    try:
        batch = decode_batch(frame, TYPES, max_frame=1 << 16)
    except WireError as exc:
        assert str(exc), "a refusal must say what was wrong"
        return
    assert type(batch) is tuple and all(type(t) is tuple and len(t) == 3 for t in batch)


VALID = [msgpack.packb([(i, bytes([i]) * i, i / 3) for i in range(n)]) for n in (1, 2, 5)]


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=48), min_size=25, max_size=25),
       st.lists(st.tuples(st.sampled_from(VALID), st.integers(0, 400), st.integers(0, 255)), min_size=25, max_size=25))
def test_fuzz_decoder_raises_only_wire_error(raw, mutations):
    """1000 examples x 100 frames = 100,000 decoder inputs: random bytes, random bytes
    behind the msgpack array headers, and valid batches with one byte changed or cut."""
    for data in raw:
        _check(data)
        _check(b"\x93" + data if data[:1] != FINAL_TAG else data)
    for frame, pos, byte in mutations:
        i = pos % len(frame)
        _check(frame[:i] + bytes([byte]) + frame[i + 1:])
        _check(frame[:i])


def test_a_fission_pulse_may_end_a_batch_on_a_pulsed_port_only():
    from spadeopt.wire import WireError, decode_batch, wire_types

    types = wire_types([["k", "str"], ["_fission_seq", "int"]])
    data = msgpack.packb([("a", 1), ("b", 2), (3,)])
    assert decode_batch(data, types, pulsed=True)[-1] == (3,)
    assert decode_batch(msgpack.packb([(7,)]), types, pulsed=True) == ((7,),)
    with pytest.raises(WireError, match="wrong arity"):
        decode_batch(data, types)  # not inside a region: a 1-tuple is malformed
    with pytest.raises(WireError, match="pulse must hold an int"):
        decode_batch(msgpack.packb([("a", 1), ("x",)]), types, pulsed=True)
    with pytest.raises(WireError, match="wrong arity"):
        decode_batch(msgpack.packb([(1,), ("a", 1)]), types, pulsed=True)  # only last


@pytest.mark.parametrize("v", [2**64, -(2**63) - 1, 10**40, -(10**40), 2**64 - 1, -(2**63), 0, -1])
def test_ints_of_any_size_cross_the_wire(v):
    """msgpack holds ints in [-2**63, 2**64); a larger one goes as extension type 1, so
    crossing a PE never changes what fused operators would compute (issue: big ints)."""
    assert decode_batch(pack([(v, b"", 1.5)]), TYPES) == ((v, b"", 1.5),)


def test_what_cannot_cross_the_wire_is_named():
    with pytest.raises(TypeError, match="a complex cannot be sent between PEs"):
        pack([(1j,)])
