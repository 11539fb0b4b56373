"""`spadeopt top`: one screen from a state dict (bottleneck marked, numbers shown) and the
watch loop against a real server until the job is done or its server goes away."""

from __future__ import annotations

import io

from spadeopt.live.server import serve
from spadeopt.live.top import CLEAR, render, watch
from tests.cli.clitools import cli
from tests.live.states import Changing, full_state, plan


def test_render_marks_the_bottleneck_and_shows_the_numbers():
    text = render(full_state(), width=100)
    lines = text.splitlines()
    assert lines[0] == "demo  RUNNING  elapsed 12.5s  strategy auto"
    assert all(len(ln) <= 100 for ln in lines)
    pe0 = next(ln for ln in lines if "pe0" in ln and "k/s" in ln)
    assert pe0.startswith("*pe0") and "40.0k/s" in pe0 and "39.0k/s" in pe0 and "0.93" in pe0 and "90%" in pe0
    assert "1,200" in pe0
    pe1 = next(ln for ln in lines if ln.startswith(" pe1"))
    assert "30%" in pe1 and "20%" in pe1  # backpressure, busy
    assert any(ln.startswith(" pe2 (down)") for ln in lines)
    src = next(ln for ln in lines if ln.startswith("src "))
    assert "40.0k/s" in src and "120,000" in src and src.rstrip().endswith("345")
    assert next(ln for ln in lines if ln.startswith("side ")).rstrip().endswith("-")  # lag unknown, not live
    assert "latency   p50 4.1ms  p99 12.0ms  (40 markers)" in lines
    assert "checkpoint #3 of 3: took 0.4s, 20.0KiB, 1.2s ago" in lines
    assert "restarts  1" in lines and "* bottleneck: pe0" in lines
    assert all(len(ln) <= 60 for ln in render(full_state(), width=60).splitlines())


def test_render_of_an_empty_state():
    text = render({"app": "x", "status": "starting", "latency": None, "checkpoints": None})
    assert "X" not in text and "STARTING" in text and "PEs: none reported yet" in text and "checkpoint off" in text


def test_watch_redraws_until_done_and_ends_0():
    states = Changing(then=["starting", "running", "done"])
    with serve(states, plan()) as srv:
        out = io.StringIO()
        assert watch(srv.url, interval=0.05, out=out) == 0
    screens = out.getvalue().split("\n\ndemo  ")
    assert len(screens) == 3 and states.calls == 3 and CLEAR not in out.getvalue()
    assert "STARTING" in screens[0] and "DONE" in screens[2]
    assert "10.1k/s" in screens[0] and "10.3k/s" in screens[2]  # pe0's rate_in as it changed


def test_watch_clears_a_terminal_and_says_when_the_server_goes_away():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    states = Changing()
    srv = serve(states, plan())
    out = Tty()
    import threading

    t = threading.Timer(0.4, srv.close)
    t.start()
    code = watch(srv.url, interval=0.1, out=out)
    t.join()
    assert code == 1  # it was running, not done
    assert out.getvalue().startswith(CLEAR) and out.getvalue().count(CLEAR) >= 2
    assert out.getvalue().rstrip().endswith("the job's server went away (last status: running)")


def test_watch_a_failed_job_ends_1_and_once_prints_one_screen():
    with serve(Changing(status="failed"), plan()) as srv:
        out = io.StringIO()
        assert watch(srv.url, out=out) == 1 and "FAILED" in out.getvalue()
    with serve(Changing(), plan()) as srv:
        proc = cli("top", srv.url, "--once")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("demo  RUNNING") == 1 and "*pe0" in proc.stdout


def test_top_on_nothing_says_so():
    proc = cli("top", "http://127.0.0.1:9/")
    assert proc.returncode == 1 and "cannot reach http://127.0.0.1:9/" in proc.stdout
