"""Entry point of one PE process: ``python -m spadeopt.runtime.pe_main CONFIG_JSON``.

Talks to its node agent with JSON lines, each a ``spadeopt.control`` record: stdout
carries events (bound, ready, beat, done, error), stdin carries commands (connect,
start, exit); its config (``control.PEConfig``) is its one argument. The process exits when
stdin closes, so a PE never outlives its agent. User ``print`` output goes to stderr
(the PE log). The config in argv holds nothing secret: CURVE secret keys are made
inside this process and never leave it (``spadeopt.runtime.security``); only public
keys go out in the "bound" event. While running, a "beat" event every second carries
a progress counter and the ports still waiting, so the agent can tell a stalled PE.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import sys
import threading

from spadeopt import control


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main() -> None:
    _die_with_parent()
    ctl = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the operators print goes to the log, not the control channel
    say_lock = threading.Lock()

    def say(event: control.Record) -> None:
        with say_lock:
            ctl.write(event.to_line() + "\n")
            ctl.flush()

    commands = _commands()
    try:
        from spadeopt.runtime.pe import OperatorFailure
        from spadeopt.runtime.pe_ports import LinkError

        cfg = control.PEConfig.from_line(sys.argv[1])
        rt = _set_up(cfg)
        _wire(rt, cfg, say, commands)
        next(commands)  # start
        _heartbeat(rt, say)
        stats = rt.run()
        if rt.live is not None:  # the final counts, before "done" (the driver's result follows it)
            rt.live.finish()
        if rt.checkpoints is not None:  # every part reached the coordinator before "done"
            rt.checkpoints.channel.finish()
        stats["where"] = _where()
        say(control.Done(stats))
        # Keep every socket open until the agent says all PEs (on all nodes) are done:
        # libzmq may drop what a full PULL queue holds if its PUSH peer disconnects
        # early (zeromq/libzmq#4660), and downstream PEs finish only after our finals.
        next(commands)  # exit
        rt.close()
        ctl.close()
        os._exit(0)
    except OperatorFailure as f:
        if isinstance(f.exc, LinkError):  # the frame, not the operator, was wrong: no traceback
            say(control.Failed(f.op, f.port, f.thread, str(f.exc), None, kind="link"))
        else:
            print(f.tb, file=sys.stderr, flush=True)  # the whole story, in the PE log
            say(control.Failed(f.op, f.port, f.thread, str(f), f.user_tb))
    except StopIteration:
        os._exit(3)
    except BaseException as exc:  # noqa: BLE001
        import traceback

        say(control.Failed(None, None, "setup", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    ctl.flush()
    os._exit(1)


def _set_up(cfg: control.PEConfig):
    """Load the PE's generated module and build its runtime from ``cfg``."""
    from spadeopt.runtime.loader import APP_ENV
    from spadeopt.runtime.pe import PERuntime

    os.environ[APP_ENV] = cfg.app_ref
    spec = importlib.util.spec_from_file_location(f"spadeopt_pe_{cfg.pe}", cfg.module)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    profiler = None
    prof = cfg.profile
    if prof:
        from spadeopt.profiling import Profiler

        profiler = Profiler(cfg.pe, sample_rate=prof["sample_rate"], reservoir_size=prof["reservoir_size"],
                            seed=prof["seed"])
    rt = PERuntime(cfg.pe, module.OPERATORS, cfg.module, cfg.out_dir, cfg.batch_size, cfg.hwm, profiler=profiler,
                   duration=cfg.duration, progress_file=cfg.progress_file, secure=not cfg.insecure_links,
                   max_frame=cfg.max_frame, max_batch_delay=cfg.max_batch_delay, stop_file=cfg.stop_file,
                   source_limit=cfg.source_limit)
    rt.cyclic_inputs = frozenset(cfg.cyclic_inputs)
    rt.profile_dir = prof["run_dir"] if prof else None
    module.build(rt)
    if not rt.secure:
        print(f"spadeopt: WARNING: PE {cfg.pe} runs with --insecure-links: its links are NOT "
              f"authenticated or encrypted (for measurements only)", file=sys.stderr, flush=True)
    return rt


def _wire(rt, cfg: control.PEConfig, say, commands) -> None:
    """Bind, report the endpoints ("bound"), connect as the agent says (and restore, in a
    checkpointing run), report "ready"."""
    endpoints = rt.bind(cfg.ipc_dir, cfg.host, cfg.schemas)
    keys = rt.public_keys(cfg.out_links)
    for ref, eps in endpoints.items():
        print(f"spadeopt: PE {cfg.pe} input port {ref} listens on {', '.join(eps.values())}"
              + (f" (CURVE server key {keys['server']})" if keys else " (insecure)"),
              file=sys.stderr, flush=True)
    say(control.Bound(endpoints, keys))
    cmd = next(commands)
    if not isinstance(cmd, control.Connect):
        raise control.ControlError(f"field 't': '{cmd.KIND}' where the agent's 'connect' was expected")
    rt.connect(cmd.links, cmd.upstream)
    if cmd.checkpoint:  # restore, then take part in checkpoints (runtime.checkpoint_channel)
        from spadeopt.runtime.checkpoint_channel import attach

        attach(rt, cmd.checkpoint)
    if cmd.metrics:  # the driver collects live metrics (runtime.pe_live)
        from spadeopt.runtime.pe_live import LiveReporter

        rt.live = LiveReporter(rt, cmd.metrics)
    say(control.Ready())


def _heartbeat(rt, say) -> None:
    """Every second, tell the agent how far this PE got and what it still waits for."""

    def beat() -> None:
        while not rt._done.wait(1.0):
            n, waiting = rt.progress()
            say(control.Beat(n, waiting))

    threading.Thread(target=beat, daemon=True, name="heartbeat").start()


def _where() -> dict:
    """Where this PE ran, seen from inside it: host, pid, and the JVM (Spark executor)
    it descends from, found by walking up /proc."""
    import socket

    jvm, pid = None, os.getppid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if comm == "java":
            jvm = pid
            break
        pid = ppid
    return {"host": socket.gethostname(), "pid": os.getpid(), "executor_jvm": jvm}


def _commands():
    """Yield commands from stdin; if the agent goes away, exit at once."""
    import queue

    q: queue.Queue = queue.Queue()

    def reader() -> None:
        for line in sys.stdin:
            if line.strip():
                try:
                    q.put(control.decode_line(line, *control.PE_COMMANDS))
                except control.ControlError as exc:  # refused: the PE fails, naming the field
                    q.put(exc)
        os._exit(3)  # agent closed our stdin: it is gone or wants us gone

    threading.Thread(target=reader, daemon=True).start()
    while True:
        got = q.get()
        if isinstance(got, control.ControlError):
            raise got
        yield got


if __name__ == "__main__":
    main()
