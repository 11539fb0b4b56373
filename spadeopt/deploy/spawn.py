"""Starting a node's PE processes: forked by a zygote (``spadeopt.runtime.zygote``), or
each exec'd as ``python -P -m spadeopt.runtime.pe_main CONFIG``.

Both give the agent the same handle (``Popen``'s part it uses): ``pid``, ``stdin``
(text, line-buffered), ``stdout`` (text lines), ``poll()``, ``wait(timeout)``,
``returncode``, and a PE that is the leader of its own process group with the command
line ``python -P -m spadeopt.runtime.pe_main CONFIG``. Forking is the default: a PE
then starts in milliseconds instead of spending ~0.2 s of CPU on imports
(docs/decisions/005-pe-start-up-by-fork-from-a-zygote.md). ``SPADEOPT_PE_START=exec`` (or a
Python without ``setproctitle``, which the forked PE needs for its command line) execs
each PE.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from spadeopt import control
from spadeopt.control import PEConfig

START_ENV = "SPADEOPT_PE_START"  # "fork" (default) or "exec"
ZYGOTE_START_TIMEOUT_S = 60.0


def pe_argv(cfg: PEConfig) -> list[str]:
    """The command line of a PE (exec'd, or shown by a forked one)."""
    return [sys.executable, "-P", "-m", "spadeopt.runtime.pe_main", cfg.to_line()]


def forking() -> bool:
    """Are PEs forked by a zygote (the default) rather than exec'd?"""
    if os.environ.get(START_ENV, "fork") == "exec":
        return False
    try:
        import setproctitle  # noqa: F401
    except ImportError:
        return False
    return True


class Forked:
    """A PE forked by the :class:`Zygote` (``Popen``'s interface, as the agent uses it)."""

    def __init__(self, pid: int, stdin, stdout) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired("pe", timeout)
        return self.returncode


class Zygote:
    """The node's PE forker: started once per run of a node, closed at its end."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "spadeopt.runtime.zygote", str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                pass_fds=(theirs.fileno(),), start_new_session=True,
            )
        theirs.close()
        self.log = log
        self._lock = threading.Lock()
        self._replies: list[dict] = []
        self._reply = threading.Condition()
        self._procs: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # exits reported before their pid reply was taken
        self._gone = False
        threading.Thread(target=self._read, daemon=True, name="zygote").start()

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(1 << 16)
            except OSError:
                msg = b""
            if not msg:
                break
            try:
                ev = control.decode_line(msg.decode("utf-8", "replace"), *control.FROM_FORKER)
            except control.ControlError as exc:  # a bug in the forker: nothing from it can be trusted now
                self._sock.close()
                print(f"spadeopt: the PE forker sent a message that is not one ({exc})", file=sys.stderr)
                break
            if isinstance(ev, control.ChildExit):
                with self._reply:
                    proc = self._procs.get(ev.pid)
                    if proc is None:
                        self._early[ev.pid] = ev.code
                if proc is not None:
                    proc._exited(ev.code)
            else:
                with self._reply:
                    self._replies.append(ev)
                    self._reply.notify_all()
        with self._reply:  # the zygote is gone, and every PE it forked with it
            self._gone = True
            self._reply.notify_all()
            procs = list(self._procs.values())
        for p in procs:
            if p.returncode is None:
                p._exited(-9)

    def spawn(self, cfg: PEConfig, log: Path) -> Forked:
        """Fork the PE of ``cfg``, its stderr to ``log``; ``OSError`` if the zygote cannot."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        req = control.Fork(cfg.to_line(), " ".join(pe_argv(cfg))).to_line().encode()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._sock, [req], [in_r, out_w, log_fd])
                except OSError as exc:  # the forker is gone (killed, or its agent's run ended)
                    raise OSError(f"the PE forker is gone ({exc.strerror}; exit code {self.proc.poll()}); "
                                  f"see {self.log}") from None
                with self._reply:
                    if not self._reply.wait_for(lambda: self._replies or self._gone, ZYGOTE_START_TIMEOUT_S):
                        raise OSError(f"the PE forker did not answer within {ZYGOTE_START_TIMEOUT_S:.0f} s")
                    if not self._replies:
                        raise OSError(f"the PE forker exited (code {self.proc.poll()}); see {self.log}")
                    ev = self._replies.pop(0)
                    if isinstance(ev, control.ForkFailed):
                        raise OSError(f"the PE forker could not fork PE {cfg.pe}: {ev.error}")
                    proc = Forked(ev.pid, os.fdopen(in_w, "w", encoding="utf-8", buffering=1),
                                  os.fdopen(out_r, "r", encoding="utf-8"))
                    self._procs[proc.pid] = proc
                    early = self._early.pop(proc.pid, None)
            if early is not None:
                proc._exited(early)
            return proc
        except BaseException:
            for fd in (in_w, out_r):
                os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, log_fd):
                os.close(fd)

    def close(self) -> None:
        """Close the socket (the zygote kills what is left and exits) and reap it."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_pe(cfg: PEConfig, env: dict[str, str], log: Path, zygote: Zygote | None) -> Any:
    """PE ``cfg`` running: forked by ``zygote``, or (``None``) exec'd with ``env``."""
    if zygote is not None:
        return zygote.spawn(cfg, log)
    return subprocess.Popen(  # -P: no working directory ahead of the standard library
        pe_argv(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "wb"),  # noqa: SIM115
        text=True, bufsize=1, env=env, start_new_session=True,
    )
