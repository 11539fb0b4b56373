"""PEs forked by the node's zygote (``deploy.spawn``, ``runtime.zygote``): real processes,
with the command line, process group, exit codes and lifetime an exec'd PE has."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spadeopt import control
from spadeopt.deploy import spawn
from spadeopt.deploy.agent import pe_env
from spadeopt.frontend.dsl import App
from spadeopt.orchestrate.build_local import build_and_run
from spadeopt.toolkit.sources import counter

pytestmark = pytest.mark.skipif(not spawn.forking(), reason="setproctitle is not installed")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cfg(module: Path) -> control.PEConfig:
    return control.PEConfig(pe="pe7", module=str(module), app_ref="nothing:here", out_dir=None, ipc_dir=None,
                            host=None, batch_size=512, hwm=32, profile=None, duration=None, progress_file=None,
                            insecure_links=False, max_frame=1 << 20, max_batch_delay=0.005, source_limit=None,
                            stop_file=None, out_links=[], schemas={}, pythonpath=None, cyclic_inputs=[])


def test_a_forked_pe_shows_the_pe_command_line_leads_its_group_and_dies_with_the_forker(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)\n")  # the PE's module: it stays in set-up
    z = spawn.Zygote(pe_env(None), tmp_path / "forker.log")
    try:
        p = z.spawn(_cfg(slow), tmp_path / "pe7.log")
        deadline = time.time() + 10
        while b"pe_main" not in Path(f"/proc/{p.pid}/cmdline").read_bytes() and time.time() < deadline:
            time.sleep(0.02)
        cmdline = Path(f"/proc/{p.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        assert cmdline == " ".join(spawn.pe_argv(_cfg(slow))), cmdline
        assert os.getpgid(p.pid) == p.pid and os.getsid(p.pid) == p.pid
        ppid = int(Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid == z.proc.pid and p.poll() is None
    finally:
        z.close()
    assert p.wait(10) == -9 and not _alive(p.pid)
    assert z.proc.returncode == 0


def test_a_pe_that_fails_in_set_up_reports_it_and_its_exit_code(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('no such operator')\n")
    z = spawn.Zygote(pe_env(None), tmp_path / "forker.log")
    try:
        p = z.spawn(_cfg(bad), tmp_path / "pe7.log")
        events = [control.decode_line(line, *control.PE_EVENTS) for line in p.stdout]
        assert p.wait(10) == 1
        assert isinstance(events[-1], control.Failed) and "RuntimeError: no such operator" in events[-1].message
    finally:
        z.close()


def _app() -> App:
    a = App("spawned")
    s = a.source("src", "seq:int, payload:bytes", generator=counter, args={"n": 3000})
    f = a.functor("f", s, output={"seq": "seq", "payload": "payload"})
    a.sink("out", f)
    return a


def test_forked_and_execd_pes_write_the_same_sinks(tmp_path, monkeypatch):
    forked = build_and_run(_app(), "none", workdir=tmp_path / "fork")
    monkeypatch.setenv(spawn.START_ENV, "exec")
    execd = build_and_run(_app(), "none", workdir=tmp_path / "exec")
    assert forked.sinks == execd.sinks and len(forked.sinks["out"]) == 3000
    assert (tmp_path / "fork" / "logs" / "forker-0.log").exists()
    assert not (tmp_path / "exec" / "logs" / "forker-0.log").exists()
