"""Spark's control plane, closed: authentication and RPC encryption on every session.

Every SparkSession spadeopt starts sets ``spark.authenticate=true`` and
``spark.network.crypto.enabled=true`` (AES, keys from the shared secret), so no
process without the secret can talk to the driver, its block manager or, on a
standalone cluster, the master and workers; and what travels over Spark RPC (the
PEs' CURVE public keys in ``allGather``, the shipped bundle, task results) is
encrypted. Where the secret comes from depends on the master:

- ``local[..]`` and ``local-cluster[..]``: a fresh random secret per session; the
  driver is bound to loopback, since every executor is on this host.
- ``spark://``: the cluster's secret, read from the file ``spadeopt cluster start``
  wrote (``STATE_DIR/spark-secret.conf``, a Spark properties file, mode 0600), found
  through ``$SPADEOPT_SPARK_SECRET_FILE`` or, failing that, the cluster recorded in
  ``./.spadeopt-cluster`` when its master URL matches. The file must be a regular
  file owned by this user and readable by nobody else.
- ``yarn`` and ``k8s://``: Spark makes a per-application secret itself.

The secret never appears on a command line or in ``deploy.json``: PySpark passes a
SparkConf given before the JVM exists as ``--conf`` arguments of the JVM's command
line (readable by every user in ``/proc``), so the JVM is started without it and the
secret is set afterwards through the py4j gateway (``split_launch``).

A user who sets ``spark.authenticate=false`` (``--conf``) gets what they asked for
and a loud warning; it exists to measure what authentication costs.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spadeopt.deploy.masters import is_local
from spadeopt.errors import UsageError

SECRET_ENV = "SPADEOPT_SPARK_SECRET_FILE"
SECRET_FILE = "spark-secret.conf"  # in a cluster's state directory
SECRET_KEY = "spark.authenticate.secret"
DEFAULT_STATE_DIR = Path(".spadeopt-cluster")
# what every party (driver, master, workers, executors) must agree on
AUTH_CONF = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
_LOOPBACK = re.compile(r"spark://(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+")


def new_secret() -> str:
    """256 random bits, as hex."""
    return secrets.token_hex(32)


@dataclass(frozen=True)
class Auth:
    """What a session needs: public settings, the secret (None: Spark's own), a warning."""

    conf: dict[str, str] = field(default_factory=dict)
    secret: str | None = None
    warning: str | None = None


def session_auth(master: str, user: Mapping[str, str]) -> Auth:
    """The authentication settings for a session on ``master``; ``user`` is the conf
    the user (``--conf``, spark-submit) already gave, which wins.

    >>> a = session_auth("local[2]", {})
    >>> a.conf["spark.authenticate"], len(a.secret), a.conf["spark.driver.bindAddress"]
    ('true', 64, '127.0.0.1')
    >>> session_auth("local[2]", {"spark.authenticate": "false"}).secret is None
    True
    """
    if user.get("spark.authenticate", "true").strip().lower() == "false":
        return Auth(warning="WARNING: spark.authenticate=false: Spark's control plane is NOT authenticated; "
                            "any process that reaches the driver (or the cluster) can run code as you and "
                            "swap the PEs' link keys. Use it only for measurements.")
    conf = dict(AUTH_CONF)
    m = master.strip()
    if is_local(m) or _LOOPBACK.fullmatch(m):  # every node on this host: nothing listens elsewhere
        conf |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    if user.get(SECRET_KEY):
        return Auth(conf)
    if is_local(m):
        return Auth(conf, new_secret())
    if m.startswith("spark://"):
        return Auth(conf, read_secret_file(find_secret_file(m)))
    return Auth(conf)  # yarn, k8s: Spark generates and distributes a per-application secret


def find_secret_file(master: str) -> Path:
    """The secret file of the standalone cluster at ``master`` (see the module docstring)."""
    env = os.environ.get(SECRET_ENV)
    if env:
        return Path(env)
    recorded = _recorded_master(DEFAULT_STATE_DIR)
    if recorded == master.strip():
        return DEFAULT_STATE_DIR / SECRET_FILE
    raise UsageError(f"the Spark master {master} needs its cluster's secret: set {SECRET_ENV}=STATE_DIR/"
                     f"{SECRET_FILE} (written by `spadeopt cluster start --state-dir STATE_DIR`), or to any "
                     f"Spark properties file of yours (mode 0600) holding {SECRET_KEY}; to measure without "
                     f"authentication, --conf spark.authenticate=false")


def _recorded_master(state_dir: Path) -> str | None:
    import json

    try:
        return json.loads((state_dir / "cluster.json").read_text())["master_url"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_secret_file(path: Path, secret: str) -> None:
    """Create ``path`` (mode 0600, never replacing a file) as a Spark properties file
    holding the secret and the settings every client of the cluster needs; usable as
    ``spark-submit --properties-file``."""
    body = "".join(f"{k} {v}\n" for k, v in {**AUTH_CONF, SECRET_KEY: secret}.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# spadeopt: this Spark cluster's secret. Keep it private (mode 0600).\n" + body)
        f.flush()
        os.fsync(f.fileno())


def read_secret_file(path: Path) -> str:
    """The secret in ``path``, after checking it is a regular file owned by this user
    that nobody else may read (as ssh checks its keys)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise UsageError(f"Spark secret file {path} does not exist (set {SECRET_ENV} to the "
                         f"{SECRET_FILE} that `spadeopt cluster start` wrote)") from None
    except OSError as exc:
        raise UsageError(f"cannot open Spark secret file {path}: {exc.strerror} (it must be a regular "
                         f"file, not a symbolic link)") from None
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"Spark secret file {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise UsageError(f"Spark secret file {path} belongs to uid {st.st_uid}, not to you "
                             f"(uid {os.geteuid()}): refusing a secret someone else controls")
        if st.st_mode & 0o077:
            raise UsageError(f"Spark secret file {path} is readable or writable by others "
                             f"(mode {stat.S_IMODE(st.st_mode):04o}): `chmod 600 {path}`")
        text = f.read(1 << 16)
    secret = parse_properties(text).get(SECRET_KEY, "").strip()
    if len(secret) < 32:
        raise UsageError(f"Spark secret file {path} holds no {SECRET_KEY} of at least 32 characters")
    return secret


def parse_properties(text: str) -> dict[str, str]:
    """The ``key value`` / ``key=value`` lines of a Java properties file (no escapes).

    >>> parse_properties("# c\\nspark.a true\\nspark.b=x y\\n")
    {'spark.a': 'true', 'spark.b': 'x y'}
    """
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out
