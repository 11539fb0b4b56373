"""Final markers are counted once per upstream link, and only from that link."""

from __future__ import annotations

import pytest

from spadeopt.runtime.pe import PERuntime
from spadeopt.runtime.pe_ports import LinkError
from spadeopt.wire import final_frame


class FakeFrame:
    """What the main loop reads off a received frame: its bytes and its ZAP User-Id."""

    def __init__(self, data: bytes, user_id: str | None) -> None:
        self.buffer = memoryview(data)
        self._uid = user_id

    def get(self, prop: str) -> str | None:
        assert prop == "User-Id"
        return self._uid


@pytest.fixture
def port():
    rt = PERuntime("pe2", ("sink",), __file__, secure=False)
    arrived = []
    rt.input("sink.in", lambda batch: None, arrived.append, links=2)
    p = rt.inputs["sink.in"]
    p.upstream = {"L0": "PE pe0 (a.out)", "L1": "PE pe1 (b.out)"}
    return rt, p, arrived


def test_a_port_is_final_once_every_link_sent_its_final_and_repeats_are_ignored(port, capsys):
    rt, p, arrived = port
    assert rt._final(p, FakeFrame(final_frame("L0"), "L0"), secure=True) is False
    assert rt._final(p, FakeFrame(final_frame("L0"), "L0"), secure=True) is False
    assert "ignored a second final marker on link L0" in capsys.readouterr().err
    assert p.finals == 1 and arrived == ["in"]
    assert rt._final(p, FakeFrame(final_frame("L1"), "L1"), secure=True) is True
    assert arrived == ["in", "in"]


def test_a_final_claiming_another_link_or_no_link_of_the_port_stops_the_pe(port):
    rt, p, _ = port
    with pytest.raises(LinkError, match="from link L0 of PE pe0 \\(a.out\\): final marker names link 'L1'"):
        rt._final(p, FakeFrame(final_frame("L1"), "L0"), secure=True)
    with pytest.raises(LinkError, match="input port 'sink.in' of PE pe2.*not an upstream link"):
        rt._final(p, FakeFrame(final_frame("L7"), None), secure=False)
    assert p.finals == 0
