"""A final marker that arrives while an alignment holds frames of its link comes after
them: held batches reach the operator before the link's end is handled."""

from __future__ import annotations

from types import SimpleNamespace

from spadeopt import wire
from spadeopt.runtime.barrier_alignment import Checkpointer
from spadeopt.runtime.pe_ports import InputPort


class Frame:
    """What the checkpointer reads of a ZeroMQ frame: its bytes and the sender's CURVE identity."""

    def __init__(self, data: bytes, link: str) -> None:
        self.buffer, self.link = data, link

    def get(self, prop: str) -> str:
        assert prop == "User-Id"
        return self.link


def test_held_batches_of_a_link_reach_the_operator_before_its_final():
    seen: list = []
    port = InputPort("op.in0", fn=lambda batch: seen.append(list(batch)), final=None, links=2,
                     upstream={"a": "PE pe1", "b": "PE pe2"})
    rt = SimpleNamespace(pe_id="pe0", sources={}, secure=True, inputs={"op.in0": port}, senders={},
                         max_frame=wire.DEFAULT_MAX_FRAME, stop=False)
    ck = Checkpointer(rt, None)
    assert ck.intercept(port, Frame(wire.barrier_frame("a", 1), "a"), wire.barrier_frame("a", 1))  # aligning 1
    batch = wire.pack([(7,)])
    assert ck.intercept(port, Frame(batch, "a"), batch)  # link a is blocked: held
    assert seen == []
    final = wire.final_frame("a")
    assert ck.intercept(port, Frame(final, "a"), final) is False  # the PE handles the final next ...
    assert seen == [[(7,)]]  # ... after the batch that came before it
    assert ck.aligning is None and not ck.held
