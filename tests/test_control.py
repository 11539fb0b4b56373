"""The control protocol (``spadeopt.control``): every record goes out and comes back
the same, and what does not fit is refused naming the field."""

from __future__ import annotations

import dataclasses
import json

import msgpack
import pytest

from spadeopt import control
from spadeopt.deploy.options import SettingsChange

KEY = "rq:-k)*0Hha!{K<4A]uzHD6k+2$h[2M#W(mD4zV^"  # 40 Z85 characters
CHANNEL = {"endpoint": "tcp://127.0.0.1:5555", "server_key": KEY, "token": "ab" * 16, "interval": 1.0}

EXAMPLES = [
    control.JobSpec("b.zip", "apps.x:app", False, "/o", "/l", "/p",
                    {"endpoint": "tcp://h:1", "server_key": KEY, "token": "cd" * 16}, True),
    control.PEConfig(pe="pe0", module="/b/pe0.py", app_ref="apps.x:app", out_dir=None, ipc_dir="/tmp/i",
                     host=None, batch_size=512, hwm=32, profile={"sample_rate": 0.01, "run_dir": "/r"},
                     duration=2.5, progress_file="/p/pe0.json", insecure_links=False, max_frame=1 << 20,
                     max_batch_delay=0.005, source_limit=None, stop_file="/p/stop", out_links=["L0"],
                     schemas={"f.in": [["a", "int"]], "g.in": None}, pythonpath=None, cyclic_inputs=["g.in"]),
    control.Connect({"out": [{"link": "L0", "endpoint": "ipc:///x", "server_key": KEY}]},
                    {"f.in": {"L1": {"key": KEY, "from": "PE pe1 (src.out)"}}}, CHANNEL),
    control.Start(), control.Exit(),
    control.Bound({"f.in": {"ipc": "ipc:///x"}}, {"server": KEY, "links": {"L0": KEY}}),
    control.Ready(), control.Beat(7, {"f.in": ["L1"]}), control.Done({"pe": "pe0", "cpu_s": 1.5}),
    control.Failed("f", "in", "main", "ValueError: x", None, kind="link"), control.Exited(-9),
    control.Hello("pe0", "ab" * 16, True),
    control.Part("pe0", "ab" * 16, 3, b"\x00state", {"out": b"line\n"}, "0" * 64),
    control.FirstOutput("pe0", "ab" * 16), control.Restore(None, "ef" * 16, "run1"),
    control.Trigger(4), control.Ack(4), control.Complete(4),
    control.RestartInPlace(2, CHANNEL, 0.5), control.Refusal(1), control.StopRequest(),
    control.NodeFailure("pe1", 0, "f", "in", kind="link", message="malformed frame", log="tail"),
    control.NodeReport(0, "host", 123, 1.5, [{"pe": "pe0"}], [], executor="driver", files=None),
    control.PEMetrics("pe0", "ab" * 16, "host1", 4242, 3, 1.7e9, False, 0.9, 3.0, 1.2, {"f.out": [512, 9000, 1, 0.02]},
                      {"f.in": 512}, {"f": {"out": 512}}, {"src": 600}, {"out": 7}, {"src": None}, {"win": {"late": 2}},
                      [1, 2, 0, 3.5]),
    control.Meet("ab" * 16, 0, 2, 1, '{"pe0": {}}'), control.Gathered(["a", "b"]),
    control.Fork('{"pe": "pe0"}', "python -P -m spadeopt.runtime.pe_main {...}"), control.Forked(4242),
    control.ForkFailed("OSError: no memory"), control.ChildExit(4242, -9),
]


def test_a_live_metrics_record_with_a_wrong_count_is_refused_naming_the_field():
    doc = {**next(m for m in EXAMPLES if isinstance(m, control.PEMetrics)).to_doc(), "ports_in": {"f.in": "512"}}
    with pytest.raises(control.ControlError, match="'ports_in'"):
        control.decode(msgpack.packb(doc, use_bin_type=True), control.PEMetrics)


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: m.KIND)
def test_every_record_comes_back_the_same_as_bytes_and_as_a_line(msg):
    assert control.decode(msg.to_bytes(), type(msg)) == msg
    if not any(type(v) is bytes for v in dataclasses.asdict(msg).values()) and not isinstance(msg, control.Part):
        back = control.decode_line(msg.to_line(), type(msg))
        assert back.to_doc() == msg.to_doc() or back.to_line() == msg.to_line()


def test_every_record_kind_is_registered_once_and_has_an_example():
    assert {type(m) for m in EXAMPLES} == set(control.KINDS.values())


@pytest.mark.parametrize("change, field", [
    ({"v": 2}, "'v'"), ({"t": "hello"}, "'t'"), ({"t": 7}, "'t'"), ({"id": "4"}, "'id'"),
    ({"id": True}, "'id'"), ({"extra": 1}, "'extra'"), (None, "'id' missing"),
])
def test_a_malformed_message_is_refused_naming_the_field(change, field):
    doc = control.Trigger(4).to_doc()
    if change is None:
        del doc["id"]
    else:
        doc.update(change)
    with pytest.raises(control.ControlError, match=field):
        control.decode(msgpack.packb(doc), *control.TO_PE)


def test_a_message_of_another_direction_or_not_a_map_is_refused():
    with pytest.raises(control.ControlError, match="'t'"):  # a PE's message is not for a PE
        control.decode(control.Hello("pe0", "ab" * 16, False).to_bytes(), *control.TO_PE)
    for data in (msgpack.packb([1, 2]), b"\xc1garbage", msgpack.packb("t")):
        with pytest.raises(control.ControlError):
            control.decode(data, *control.TO_PE)
    with pytest.raises(control.ControlError, match="JSON"):
        control.decode_line("{not json", control.Start)


@pytest.mark.parametrize("change, field", [
    ({"sinks": {"out": "text"}}, "'sinks'"), ({"state": "not bytes"}, "'state'"),
    ({"sinks": {b"out": b""}}, "'sinks'"),
])
def test_a_part_is_checked_inside_its_maps(change, field):
    doc = {**EXAMPLES[12].to_doc(), **change}
    with pytest.raises(control.ControlError, match=field):
        control.decode(msgpack.packb(doc, use_bin_type=True), *control.FROM_PE)


@pytest.mark.parametrize("channel", [
    {**CHANNEL, "endpoint": "ipc:///tmp/x"}, {**CHANNEL, "server_key": "short"}, {**CHANNEL, "token": "ZZ" * 16},
    {**CHANNEL, "interval": 0}, {**CHANNEL, "more": 1},
])
def test_a_pe_takes_only_a_well_formed_checkpoint_channel(channel):
    doc = {**EXAMPLES[2].to_doc(), "checkpoint": channel}
    with pytest.raises(control.ControlError, match="'checkpoint'"):
        control.decode_line(json.dumps(doc), *control.PE_COMMANDS)


def test_settings_change_lists_only_what_it_changes():
    assert SettingsChange(batch_size=13, source_limit=5).changes() == {"batch_size": 13, "source_limit": 5}
    assert SettingsChange().changes() == {}


def test_a_node_failure_may_leave_out_what_it_does_not_know():
    got = control.decode_line('{"v": 1, "t": "node-failure", "pe": null, "node": 1, "op": null, "port": null, '
                              '"message": "m"}', control.NodeFailure)
    assert got == control.NodeFailure(None, 1, None, None, message="m")


@pytest.mark.parametrize("change, field", [({"round": 16}, "'round'"), ({"gen": -1}, "'gen'"), ({"node": True}, "'node'"),
                                           ({"msg": 7}, "'msg'"), ({"token": "x"}, "'token'")])
def test_a_rendezvous_message_out_of_range_is_refused_naming_the_field(change, field):
    doc = {**control.Meet("ab" * 16, 0, 2, 1, "x").to_doc(), **change}
    with pytest.raises(control.ControlError, match=field):
        control.decode(msgpack.packb(doc), control.Meet)


def test_the_forker_refuses_a_request_that_is_not_a_fork_and_says_why(tmp_path):
    """A PE forker (``runtime.zygote``) that is sent something other than a ``Fork``
    record answers ``ForkFailed`` naming the field, forks nothing, and serves the next
    request."""
    import os
    import socket
    import subprocess
    import sys

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen([sys.executable, "-P", "-m", "spadeopt.runtime.zygote", str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    theirs.close()
    fds = [os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_WRONLY)]
    try:
        mine.settimeout(30)
        for bad in (b'{"cfg": {"pe": "pe0"}, "title": "x"}',  # the old, untyped request
                    control.Fork(42, "x").to_line().encode(),  # type: ignore[arg-type] - a config that is no string
                    b"\xff not json"):
            socket.send_fds(mine, [bad], fds)
            reply = control.decode_line(mine.recv(1 << 16).decode(), *control.FROM_FORKER)
            assert isinstance(reply, control.ForkFailed), reply
        assert "field 't'" in control.decode_line(  # the last reply, again, for its message
            (socket.send_fds(mine, [b'{"v": 1, "t": "forked", "pid": 1}'], fds), mine.recv(1 << 16))[1].decode(),
            control.ForkFailed).error
    finally:
        for fd in fds:
            os.close(fd)
        mine.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0
