"""A PE forker: one process per node agent that has imported the PE runtime once and
forks every PE from there (``python -P -m spadeopt.runtime.zygote``).

Why: a PE started as ``python -m spadeopt.runtime.pe_main`` spends ~0.2 s of CPU
importing the runtime, ZeroMQ, msgpack and the DSL its app module imports, before it
does anything (2026-11-26, 2 cores; the fast test tier alone starts 455 PEs). A fork of
a process that has imported them costs a few milliseconds; Spark's PySpark daemon forks
its Python workers for the same reason.

Protocol, on the AF_UNIX ``SOCK_SEQPACKET`` socket whose file descriptor the agent
passes as the one argument (one control record per message, ``control.fork_messages``,
each field checked as it is read):

* agent -> zygote: ``control.Fork`` (the PE's config line and its title) with three descriptors attached (SCM_RIGHTS): the PE's stdin (read end), its
  stdout (write end) and its log file. The zygote forks; the child starts a new session,
  makes the three its fds 0, 1 and 2, sets its command line to ``title`` (what the exec
  would have shown: ``python -P -m spadeopt.runtime.pe_main CONFIG``, so ``ps``, the
  launcher's leftover check and the tests find a PE as before) and runs
  ``pe_main.main()`` with ``CONFIG`` as its argument; it never returns into the loop.
* zygote -> agent: ``control.Forked`` (the pid) for each request, in order
  (``control.ForkFailed`` if the fork failed, or the request was not a ``Fork``), and
  ``control.ChildExit`` when a child ended (its code as ``Popen.returncode``: negative
  for a signal), as the zygote reaps it.

Lifetime: the zygote dies with the agent (PR_SET_PDEATHSIG) and each PE with the zygote
(``pe_main`` sets it again in the child, whose parent is the zygote), so a PE never
outlives its agent, as before. When the agent closes the socket the zygote kills the
PEs still running (the agent kills them first on every path), reaps them and exits.
Nothing from the socket is executed: the config is data, read by ``pe_main`` as it
reads its argv.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys

from spadeopt import control

MAX_REQUEST = 1 << 18  # bytes of one spawn request (a PE's config)


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _preload() -> None:
    """What every PE imports, imported once here (``pe_main.main`` imports the rest)."""
    import msgpack  # noqa: F401
    import setproctitle  # noqa: F401 - the child's command line
    import zmq  # noqa: F401

    import spadeopt  # noqa: F401 - the DSL: app modules import it
    import spadeopt.runtime.pe  # noqa: F401
    import spadeopt.runtime.pe_main  # noqa: F401


def _child(config: str, title: str, fds: list[int], closing: list[int]) -> None:
    """In the forked child: become the PE. Never returns (``pe_main.main`` exits itself;
    anything that escapes it is a set-up failure, exit 1)."""
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        sys.stdin = os.fdopen(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = os.fdopen(1, "w", encoding="utf-8", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", encoding="utf-8", buffering=1, closefd=False, errors="backslashreplace")
        import setproctitle

        setproctitle.setproctitle(title)
        from spadeopt.runtime import pe_main

        sys.argv = [pe_main.__file__, config]  # read and checked by pe_main as its command line
        pe_main.main()  # ends the process itself (os._exit)
    except BaseException:  # noqa: BLE001 - the log says why; the agent sees the exit
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def serve(sock: socket.socket) -> None:
    """Fork a PE per request until the agent closes ``sock``; report pids and exits."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    children: set[int] = set()

    def send(msg: control.Record) -> None:
        try:
            sock.send(msg.to_line().encode())
        except OSError:
            pass  # the agent is gone: its PEs die with this process

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            send(control.ChildExit(pid, os.waitstatus_to_exitcode(status)))

    try:
        while True:
            ready, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
                reap()
            if sock not in ready:
                continue
            msg, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 3)
            if not msg:
                break  # the agent is done (or gone)
            try:
                req = control.decode_line(msg.decode("utf-8", "replace"), control.Fork)
                if len(fds) != 3:
                    raise ValueError(f"a spawn request carries 3 descriptors, this one {len(fds)}")
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
            except (ValueError, OSError) as exc:  # control.ControlError is a ValueError
                for fd in fds:
                    os.close(fd)
                send(control.ForkFailed(f"{type(exc).__name__}: {exc}"))
                continue
            if pid == 0:
                _child(req.config, req.title, fds, [sock.fileno(), wake_r, wake_w])
            for fd in fds:
                os.close(fd)
            children.add(pid)
            send(control.Forked(pid))
    finally:
        for pid in children:  # the agent kills its PEs first; this is the backstop
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for pid in list(children):
            try:
                _, status = os.waitpid(pid, 0)
                send(control.ChildExit(pid, os.waitstatus_to_exitcode(status)))
            except OSError:
                pass


def main() -> None:
    _die_with_parent()
    _preload()
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock)
    finally:
        sock.close()


if __name__ == "__main__":
    main()
