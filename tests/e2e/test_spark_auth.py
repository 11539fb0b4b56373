"""Spark's control plane is authenticated and encrypted on every run spadeopt starts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spadeopt.deploy import sparkauth
from spadeopt.deploy.spark_session import spark_session, stop_spark
from spadeopt.errors import UsageError

PROBE = Path(__file__).resolve().parent / "probes" / "rpc_probe.py"


def _probe(sc) -> dict[str, str]:
    """{"TARGET": the probe's answer from ``sc``'s driver, "SELF": from its own open driver}."""
    conf = sc.getConf()
    out = subprocess.run([sys.executable, str(PROBE), conf.get("spark.driver.host"), conf.get("spark.driver.port")],
                         capture_output=True, text=True, timeout=180).stdout
    said = dict(ln.split(" ", 1) for ln in out.splitlines() if ln.startswith(("TARGET ", "SELF ")))
    return {k: said.get(k, out[-2000:]) for k in ("TARGET", "SELF")}


@pytest.mark.spark
def test_a_local_cluster_driver_refuses_an_unauthenticated_rpc_client():
    """The same probe connects to its own driver, started with spark.authenticate off, so it can fail."""
    try:
        sc = spark_session("local-cluster[1,1,1024]", 1).sparkContext
        conf = dict(sc.getConf().getAll())
        assert conf["spark.authenticate"] == "true" and conf["spark.network.crypto.enabled"] == "true"
        assert conf["spark.driver.bindAddress"] == "127.0.0.1"
        secret = conf[sparkauth.SECRET_KEY].encode()
        box: dict = {}
        job = threading.Thread(target=lambda: box.update(r=sc.parallelize(range(4), 2).map(lambda x: -x).sum()))
        job.start()
        time.sleep(0.5)  # the executor JVM and its Python workers are up now
        seen = [d.name for d in Path("/proc").iterdir() if d.name.isdigit() and _has(d / "cmdline", secret)]
        job.join()
        assert box["r"] == -6 and not seen, f"the per-run secret is on the command line of pids {seen}"
        said = _probe(sc)
        assert said["TARGET"].startswith("REFUSED") and "SaslMessage" in said["TARGET"], said
        # the control, so the refusal can fail: the same probe connects to a driver whose
        # spark.authenticate is off (its own, in local mode: the same driver RPC server)
        assert said["SELF"].startswith("CONNECTED"), said
    finally:
        stop_spark()


def _has(path: Path, needle: bytes) -> bool:
    try:
        return needle in path.read_bytes()
    except OSError:
        return False


def test_each_local_session_gets_its_own_secret_and_a_loopback_driver():
    a, b = sparkauth.session_auth("local[2]", {}), sparkauth.session_auth("local-cluster[2,1,1024]", {})
    assert a.secret != b.secret and len(a.secret) == 64
    assert a.conf["spark.driver.host"] == b.conf["spark.driver.host"] == "127.0.0.1"
    remote = sparkauth.session_auth("yarn", {})
    assert remote.secret is None and "spark.driver.host" not in remote.conf  # Spark makes YARN's
    assert sparkauth.session_auth("local[1]", {"spark.authenticate": "false"}).warning


def test_a_standalone_master_without_a_secret_file_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.delenv(sparkauth.SECRET_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=sparkauth.SECRET_ENV):
        sparkauth.session_auth("spark://10.1.2.3:7077", {})


def test_the_secret_file_must_be_private_and_ours(tmp_path):
    path = tmp_path / "s.conf"
    sparkauth.write_secret_file(path, "k" * 64)
    assert path.stat().st_mode & 0o777 == 0o600
    assert sparkauth.read_secret_file(path) == "k" * 64
    with pytest.raises(FileExistsError):
        sparkauth.write_secret_file(path, "x" * 64)  # never replaces a file
    path.chmod(0o644)
    with pytest.raises(UsageError, match="chmod 600"):
        sparkauth.read_secret_file(path)
    path.chmod(0o600)
    link = tmp_path / "link.conf"
    link.symlink_to(path)
    with pytest.raises(UsageError, match="symbolic link"):
        sparkauth.read_secret_file(link)
    short = tmp_path / "short.conf"
    short.write_text("spark.authenticate.secret abc\n")
    short.chmod(0o600)
    with pytest.raises(UsageError, match="at least 32"):
        sparkauth.read_secret_file(short)
    if os.geteuid() == 0:  # root can give the file away and see it refused
        os.chown(path, 65534, 65534)
        with pytest.raises(UsageError, match="not to you"):
            sparkauth.read_secret_file(path)
