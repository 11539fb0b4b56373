"""The broker tooling (``spadeopt broker``, ``make broker``) on a second, private broker:
secure by default, idempotent, and ``stop`` stops only what ``start`` started."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from spadeopt.deploy import broker as tooling
from spadeopt.deploy.procs import running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def private(tmp_path):
    state = tmp_path / "broker"
    yield state, _free_port()
    tooling.stop(state)


def test_start_is_secure_reused_and_stop_ends_only_its_process(private):
    state, port = private
    b = tooling.start(state, port)
    assert not b.reused and running(b.pid)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name in ("password", "redis.conf"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    password = (state / "password").read_text().strip()
    assert len(password) >= 32
    assert password not in (state / STATE).read_text()
    ps = subprocess.run(["ps", "-o", "args=", "-p", str(b.pid)], capture_output=True, text=True).stdout
    assert password not in ps and "127.0.0.1" in ps  # the password is not on the command line
    with pytest.raises(redis.AuthenticationError):  # no password: refused
        redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0)).ping()
    assert redis.Redis(host="127.0.0.1", port=port, password=password).ping()

    again = tooling.start(state, port)
    assert again.reused and again.pid == b.pid
    assert tooling.status(state).pid == b.pid

    assert tooling.stop(state) is True
    assert not running(b.pid) and tooling.status(state) is None
    assert not (state / STATE).exists() and (state / "password").exists()  # kept: builds name its path
    assert tooling.stop(state) is False


STATE = tooling.STATE_FILE


def test_stop_leaves_a_process_alone_whose_pid_was_reused(private):
    state, port = private
    state.mkdir(parents=True)
    other = subprocess.Popen(["sleep", "30"])
    try:
        (state / STATE).write_text(json.dumps({"host": "127.0.0.1", "port": port, "pid": other.pid, "started": 1,
                                               "dir": str(state), "password_file": str(state / "password")}))
        assert tooling.status(state) is None
        assert tooling.stop(state) is False
        assert other.poll() is None  # not ours (another start time): untouched
    finally:
        other.kill()
        other.wait()


def test_a_port_taken_by_another_program_is_named(private):
    state, _ = private
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(Exception, match="is taken by another program"):
            tooling.start(state, busy.getsockname()[1])


def test_an_open_password_file_is_refused(private):
    state, port = private
    state.mkdir(parents=True)
    pw = state / "password"
    pw.write_text("x" * 40)
    os.chmod(pw, 0o644)
    with pytest.raises(Exception, match="readable by others"):
        tooling.start(state, port)
