"""The project's Redis broker: ``spadeopt broker start|stop|status`` (``make broker``,
``make broker-stop``), for tests and the live demo.

``start`` runs ``redis-server`` (Debian's ``redis-server`` package; ``make broker``
installs it when missing) on 127.0.0.1 at port ``SPADEOPT_BROKER_PORT`` (default 16379)
with everything under the broker folder (``connectors.redis_conn.broker_dir()``, mode
0700): a generated password (``password``, mode 0600, kept across restarts so builds
that name it keep working), ``redis.conf`` (0600: it holds ``requirepass``, which keeps
the password off every command line), ``data/``, ``redis.pid``, ``redis.log`` and
``broker.json`` (pid, its start time since boot, port). Secure by default: loopback
only, protected mode, a password on every connection, no persistence (a test broker:
a restart starts empty).

It is idempotent: a broker it started that still runs (same pid *and* start time) and
answers is reused. ``stop`` stops only that process (checked by pid and start time, as
``spadeopt cluster stop`` does; a reused pid is left alone) and removes ``broker.json``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from spadeopt.connectors.redis_conn import HOST, BrokerAddress, broker_dir, broker_port, connect
from spadeopt.deploy.procs import running, start_time
from spadeopt.errors import EnvironmentProblem, UsageError

STATE_FILE = "broker.json"
START_TIMEOUT_S = 20.0
INSTALL_HINT = "install it: apt-get install -y redis-server (or `make broker`, which does when run as root)"


@dataclass
class Broker:
    host: str
    port: int
    pid: int
    started: int | None  # start time of pid (clock ticks since boot)
    dir: str
    password_file: str
    reused: bool = False

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress(self.host, self.port, self.password_file)


def redis_server() -> str:
    path = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
    if not path:
        raise EnvironmentProblem(f"redis-server is not installed; {INSTALL_HINT}")
    return path


def _load(state: Path) -> Broker | None:
    try:
        doc = json.loads((state / STATE_FILE).read_text())
        return Broker(doc["host"], int(doc["port"]), int(doc["pid"]), doc.get("started"), doc["dir"],
                      doc["password_file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ours(b: Broker) -> bool:
    """Is the recorded pid still the process ``start`` started?"""
    return running(b.pid) and (b.started is None or start_time(b.pid) == b.started)


def _answers(b: Broker) -> bool:
    try:
        connect(b.address, "the project's broker", timeout=1.0).close()
        return True
    except Exception:  # noqa: BLE001 - any failure: not usable
        return False


def _ensure_password(path: Path) -> None:
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise UsageError(f"the broker's password file {path} is readable by others (mode {mode:04o}); "
                             f"chmod 600 {path}, or remove it to have a new one generated")
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def status(state_dir: Path | None = None) -> Broker | None:
    """The running broker this tooling started in ``state_dir`` (default the project's), or None."""
    state = Path(state_dir or broker_dir())
    b = _load(state)
    return b if b is not None and _ours(b) else None


def start(state_dir: Path | None = None, port: int | None = None) -> Broker:
    """Start the project's broker, or reuse the one already running (module docstring)."""
    state = Path(state_dir or broker_dir()).resolve()
    port = port or broker_port()
    b = _load(state)
    if b is not None and _ours(b):
        if _answers(b):
            b.reused = True
            return b
        raise EnvironmentProblem(f"the broker started in {state} (pid {b.pid}) runs but does not answer on "
                                 f"{b.host}:{b.port}; see {state / 'redis.log'}, or `spadeopt broker stop` it")
    server = redis_server()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    (state / "data").mkdir(exist_ok=True)
    password_file = state / "password"
    _ensure_password(password_file)
    if not _port_free(HOST, port):
        raise EnvironmentProblem(f"port {HOST}:{port} is taken by another program; choose another port for "
                                 f"the broker with SPADEOPT_BROKER_PORT=N (for every command that uses it)")
    password = password_file.read_text().strip()
    conf = state / "redis.conf"
    (state / STATE_FILE).unlink(missing_ok=True)
    conf.unlink(missing_ok=True)
    body = "\n".join([
        "# written by spadeopt broker start: the project's test broker (do not edit; remade on start)",
        f"bind {HOST}", f"port {port}", "protected-mode yes", f"requirepass {password}",
        "daemonize no", f"pidfile {state / 'redis.pid'}", f"dir {state / 'data'}",
        f"logfile {state / 'redis.log'}", 'save ""', "appendonly no", "loglevel notice", "",
    ])
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(body)
    proc = subprocess.Popen([server, str(conf)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    b = Broker(HOST, port, proc.pid, start_time(proc.pid), str(state), str(password_file))
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = _tail(state / "redis.log")
            raise EnvironmentProblem(f"redis-server exited at start (code {proc.returncode}); "
                                     f"{state / 'redis.log'} says:\n{tail}")
        if _answers(b):
            break
        time.sleep(0.05)
    else:
        _kill(b)
        raise EnvironmentProblem(f"redis-server did not answer on {HOST}:{port} within {START_TIMEOUT_S:.0f} s; "
                                 f"see {state / 'redis.log'}")
    tmp = state / f".{STATE_FILE}.tmp"
    doc = {k: v for k, v in asdict(b).items() if k != "reused"}
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, state / STATE_FILE)
    return b


def _tail(path: Path, lines: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _kill(b: Broker) -> bool:
    """SIGTERM (redis shuts down cleanly), then SIGKILL; True when it is gone."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not _ours(b):
            return True
        try:
            os.kill(b.pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.time() + wait
        while time.time() < deadline and _ours(b):
            try:  # our own child (started in this process): reap it
                os.waitpid(b.pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
    return not _ours(b)


def stop(state_dir: Path | None = None) -> bool:
    """Stop the broker ``start`` recorded in ``state_dir``; False when none was running."""
    state = Path(state_dir or broker_dir()).resolve()
    b = _load(state)
    if b is None:
        return False
    if not _ours(b):
        (state / STATE_FILE).unlink(missing_ok=True)  # it is gone (or the pid is another program's now)
        return False
    if not _kill(b):
        raise EnvironmentProblem(f"the broker (pid {b.pid}) did not stop; its record {state / STATE_FILE} is kept")
    (state / STATE_FILE).unlink(missing_ok=True)
    return True
