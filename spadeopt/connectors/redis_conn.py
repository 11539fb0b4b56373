"""Where the Redis broker is and how to log in: shared by the broker tooling
(``spadeopt.deploy.broker``, ``spadeopt broker``), the connectors, the preflight check and
the tests, so all of them find the same server.

The project's own broker keeps its state in one folder (``broker_dir()``: the
``SPADEOPT_BROKER_DIR`` environment variable, else ``.spadeopt-broker`` in the checkout,
else in the home directory): ``password`` (mode 0600, generated on first start),
``redis.conf``, ``redis.pid``, ``redis.log``, ``data/`` and ``broker.json`` (host, port,
pid and start time of the server it started). Port ``SPADEOPT_BROKER_PORT`` (default
16379, not Redis's 6379), host 127.0.0.1.

A password is never written into generated code, plan.json or deploy.json: a connector's
parameters carry the *path* of the password file; the PE reads it when it opens (or takes
``SPADEOPT_BROKER_PASSWORD`` from its environment, which wins).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from spadeopt.connectors.contract import ConnectorError

DEFAULT_PORT = 16379
HOST = "127.0.0.1"
PASSWORD_ENV = "SPADEOPT_BROKER_PASSWORD"
DIR_ENV = "SPADEOPT_BROKER_DIR"
PORT_ENV = "SPADEOPT_BROKER_PORT"
START_HINT = "start the project's broker with `make broker` (or `spadeopt broker start`)"


def broker_dir() -> Path:
    """The folder of the project's broker (module docstring)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").exists() and (checkout / "spadeopt").is_dir():
        return checkout / ".spadeopt-broker"
    return Path.home() / ".spadeopt-broker"


def broker_port() -> int:
    raw = os.environ.get(PORT_ENV, "")
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConnectorError(f"{PORT_ENV}={raw!r} is not a TCP port (1-65535)")
    return int(raw)


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    password_file: str  # "" : no password (a broker the user runs without one)

    def describe(self) -> str:
        return f"redis://{self.host}:{self.port}"


def project_broker() -> BrokerAddress:
    """The address of the project's broker (it need not be running)."""
    return BrokerAddress(HOST, broker_port(), str(broker_dir() / "password"))


def parse_url(url: str, password_file: str | None) -> BrokerAddress:
    """``redis://host:port`` (no password in the URL: give ``password_file``)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "redis" or not parts.hostname:
        raise ValueError(f"broker {url!r} is not a redis://host:port URL")
    if parts.password or parts.username:
        raise ValueError(f"broker {url!r} carries credentials: they would be written into the build; "
                         f"give password_file= (a file only you can read) or set {PASSWORD_ENV}")
    try:
        port = parts.port or 6379
    except ValueError:
        raise ValueError(f"broker {url!r} has no valid port") from None
    return BrokerAddress(parts.hostname, port, os.path.abspath(password_file) if password_file else "")


def read_password(path: str) -> str | None:
    """The password: ``SPADEOPT_BROKER_PASSWORD``, else the file at ``path`` (which must
    be readable by its owner only), else None when ``path`` is ""."""
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    if not path:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConnectorError(f"the broker's password file {path} does not exist; {START_HINT}, "
                             f"or set {PASSWORD_ENV}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConnectorError(f"the broker's password file {path} is readable by others "
                             f"(mode {stat.S_IMODE(st.st_mode):04o}); make it private: chmod 600 {path}")
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def reply_text(v: object) -> str:
    """A broker reply's value (bytes or not) as text."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def connect(addr: BrokerAddress, what: str, timeout: float = 5.0):
    """A redis-py client of ``addr``, checked with a PING; ``ConnectorError`` naming
    ``what`` (e.g. "source 'orders'"), the broker and what to do when it does not answer."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    password = read_password(addr.password_file)
    client = redis.Redis(host=addr.host, port=addr.port, password=password, socket_timeout=timeout,
                         socket_connect_timeout=timeout, decode_responses=False,
                         retry=Retry(NoBackoff(), 1))  # one quick retry: a broker that is not there fails fast
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        client.close()
        raise ConnectorError(f"{what}: the broker at {addr.describe()} refused the password "
                             f"({exc}); check {addr.password_file or PASSWORD_ENV}") from None
    except redis.ResponseError as exc:
        client.close()
        hint = "it asks for a password: give password_file= or set " + PASSWORD_ENV if "NOAUTH" in str(exc) else str(exc)
        raise ConnectorError(f"{what}: the broker at {addr.describe()} refused the connection: {hint}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        client.close()
        hint = START_HINT if addr.host == HOST and addr.port == broker_port() else "check that it runs and the address"
        raise ConnectorError(f"{what}: cannot reach the Redis broker at {addr.describe()} ({exc}); {hint}") from None
    return client
