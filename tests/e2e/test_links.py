"""Links between PEs, through running apps on a real local Spark: strangers are refused,
malformed frames stop the job naming the receiving PE and port, stalls and SIGTERM end
the run with no process left."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from spadeopt import api
from spadeopt.deploy.launcher import run_build
from spadeopt.deploy.options import RunOptions, SettingsChange
from spadeopt.errors import RunError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark
LISTEN = re.compile(r"PE (\S+) input port (\S+) listens on (.*?) \((?:CURVE server key (.{40})|insecure)\)")


def _pe_pids(under: Path, pe: str = "") -> list[int]:
    """PE processes whose command line names a path under ``under`` (their build's
    progress files or their out dir; the module itself runs from the node's shipped copy)."""
    name = f'."pe": "{pe}"' if pe else ""
    out = subprocess.run(["pgrep", "-f", f"spadeopt.runtime.pe_main {name}.*{under}"], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _listening(log_dir: Path, want: int, timeout: float = 120.0) -> list[tuple[str, str, str, str | None]]:
    """(pe, port, endpoint, server key) of every bound input port, read off the PE logs."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = []
        for log in sorted(log_dir.glob("*.log")):
            for m in LISTEN.finditer(log.read_text(errors="replace")):
                found += [(m.group(1), m.group(2), ep, m.group(4)) for ep in m.group(3).split(", ")]
        if len({(pe, port) for pe, port, _, _ in found}) >= want:
            return found
        time.sleep(0.1)
    raise AssertionError(f"PEs did not bind {want} input ports within {timeout} s")


def _in_background(fn) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def go() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def test_strangers_get_no_tuple_and_no_final_into_any_pe_over_tcp_or_ipc(tmp_path):
    """A PUSH peer with no keys and one with a valid CURVE key of its own (and the PE's
    real server key, read off the log) try every endpoint: nothing of theirs arrives."""
    tuples = 60_000
    build = tmp_path / "b"
    t, box = _in_background(lambda: api.run("apps/chain.py", "none", {"n": "1", "tuples": str(tuples), "work": "300"},
                                            nodes=2, cores=1, build_dir=build, options=RunOptions(master="local[2]")))
    ctx = zmq.Context()
    socks = []
    try:
        eps = _listening(build / "logs", want=2)
        assert {ep.split(":")[0] for _, _, ep, _ in eps} == {"ipc", "tcp"}
        assert all(ep.startswith(("ipc://", "tcp://127.0.0.1:")) for _, _, ep, _ in eps), eps
        for _, _, ep, _ in eps:
            if ep.startswith("ipc://"):
                assert os.stat(os.path.dirname(ep[len("ipc://"):])).st_mode & 0o777 == 0o700
        for _, _, ep, server_key in eps:
            plain = ctx.socket(zmq.PUSH)
            keyed = ctx.socket(zmq.PUSH)
            pub, sec = zmq.curve_keypair()
            keyed.curve_publickey, keyed.curve_secretkey = pub, sec
            keyed.curve_serverkey = server_key.encode()
            for s in (plain, keyed):
                s.linger = 0
                s.connect(ep)
                socks.append(s)
                for frame in (msgpack.packb([(1, b"x" * 100)]) , b"\xc1L0", b"\xc1L1", b""):
                    try:
                        s.send(frame, zmq.NOBLOCK)
                    except zmq.Again:
                        pass
        t.join(300)
    finally:
        for s in socks:
            s.close(0)
        ctx.term()
    assert "error" not in box, box.get("error")
    res = box["result"]
    assert res.sinks == {"sink": tuples} and res.tuples == tuples
    refused = {pe["pe"]: pe["refused"] for pe in res.per_pe}
    logs = "".join(p.read_text() for p in (build / "logs").glob("*.log"))
    for pe in ("pe1", "pe2"):  # each was tried over ipc and tcp, without keys and with a stranger's key
        assert sum(refused[pe].values()) >= 4, refused
    assert "is not an upstream link of this port" in logs and "handshake failed" in logs


@pytest.mark.parametrize("mode,problem", [
    ("garbage", "not a msgpack batch"),
    ("arity", "wrong arity: a tuple of 4 attributes"),
    ("types", "wrong type: attribute 0 is a str"),
    ("oversize", "oversized frame"),
])
def test_malformed_frame_from_a_legitimate_upstream_stops_the_job_naming_pe_port_and_link(mode, problem, tmp_path):
    b = api.build("tests/apps/malformed.py", "none", {"mode": mode}, out=tmp_path / "b")
    with pytest.raises(RunError) as exc:
        run_build(b.directory, settings=SettingsChange(max_frame=1 << 20, stall_timeout=60))
    msg = str(exc.value)
    assert exc.value.exit_code == 1
    assert "input port 'sink.in' of PE pe2" in msg and "link L1 of PE pe1 (bad.out)" in msg, msg
    assert problem in msg, msg
    assert not _pe_pids(tmp_path)


def _running_chain(build: Path, n: int, ready: str):
    """A long chain run in the background (stall timeout 3 s), once its n + 1 PEs listen
    and ``progress/<ready>`` exists."""
    t, box = _in_background(lambda: api.run("apps/chain.py", "none", {"n": str(n), "tuples": "5000000"},
                                            build_dir=build, options=RunOptions(stall_timeout=3)))
    _listening(build / "logs", want=n + 1)
    deadline = time.time() + 60
    while not (build / "progress" / ready).exists() and time.time() < deadline:
        time.sleep(0.1)
    return t, box


def test_a_stopped_pe_ends_the_run_after_the_stall_timeout_naming_it(tmp_path):
    build = tmp_path / "b"
    t, box = _running_chain(build, 2, "pe1.json")
    (pid,) = _pe_pids(build, "pe1")
    os.kill(pid, signal.SIGSTOP)
    t.join(120)
    assert not t.is_alive()
    err = box.get("error")
    assert isinstance(err, RunError), box
    assert "PE pe1 stopped reporting" in str(err) and "--stall-timeout 3" in str(err), str(err)
    time.sleep(0.5)
    assert not _pe_pids(tmp_path)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_the_driver_notices_a_node_agent_that_stopped_reporting(tmp_path):
    build = tmp_path / "b"
    t, box = _running_chain(build, 1, "agent-0.beat")
    agent = _parent(_pe_pids(build, "pe1")[0])
    if b"spadeopt.runtime.zygote" in Path(f"/proc/{agent}/cmdline").read_bytes():
        agent = _parent(agent)  # the PE was forked by the agent's zygote (deploy.spawn)
    os.kill(agent, signal.SIGSTOP)
    try:
        t.join(120)
    finally:
        try:
            os.kill(agent, signal.SIGCONT)
        except ProcessLookupError:
            pass
    err = box.get("error")
    assert isinstance(err, RunError), box
    assert "node agent of node 0 stopped reporting" in str(err), str(err)
    deadline = time.time() + 30
    while _pe_pids(tmp_path) and time.time() < deadline:
        time.sleep(0.2)
    assert not _pe_pids(tmp_path)


def test_sigterm_to_the_driver_ends_every_pe(tmp_path):
    build = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-m", "spadeopt", "run", "apps/chain.py", "-p", "n=2",
                             "-p", "tuples=50000000", "--build-dir", str(build)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while len(_pe_pids(build)) < 4 and time.time() < deadline:
            time.sleep(0.2)
        assert len(_pe_pids(build)) == 4
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, proc.stderr.read()
    assert not _pe_pids(build)


def test_insecure_links_are_announced_and_still_deliver_everything(tmp_path):
    lines: list[str] = []
    res = api.run("apps/chain.py", "none", {"n": "1", "tuples": "3000"}, build_dir=tmp_path / "b", options=RunOptions(insecure_links=True, progress=lines.append))
    assert res.sinks == {"sink": 3000}
    assert any("WARNING: --insecure-links" in line for line in lines)
    assert all(not pe["refused"] for pe in res.per_pe)
    assert "(insecure)" in (tmp_path / "b" / "logs" / "pe1.log").read_text()
    assert json.loads((tmp_path / "b" / "deploy.json").read_text()).get("insecure_links") is None
