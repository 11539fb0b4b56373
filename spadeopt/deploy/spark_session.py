"""The driver's SparkSession: started (or reused) for a run, with spadeopt's settings.

``spark_session`` starts one for a master (Java checked first: ``check_java``), reuses
it while master, cores and conf stay the same, and stops it for another; ``stop_spark``
ends it. The bundles shipped to the live session (``keep_shipped``) are kept while it
lives. ``spark_reason`` is the one line of a Spark/py4j failure that says why.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spadeopt.deploy import sparkauth
from spadeopt.deploy.jvmlog import jvm_log, jvm_output_to_log
from spadeopt.deploy.masters import is_local, local_cluster_cores
from spadeopt.errors import EnvironmentProblem, UsageError

_SESSION: Any = None
_SESSION_KEY: tuple | None = None


def check_java() -> str:
    """Spark 4 needs Java 17 or newer; say exactly what to do when it is missing."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home, "bin", "java")) if java_home else shutil.which("java")
    hint = ("Spark needs Java 17 or newer. Install it (Debian/Ubuntu: "
            "`sudo apt-get install -y openjdk-17-jre-headless`; macOS: `brew install openjdk@17`) "
            "or point JAVA_HOME at a Java 17+ installation.")
    if java_home and not Path(java).exists():
        raise EnvironmentProblem(f"JAVA_HOME={java_home} has no bin/java. {hint}")
    if not java or not Path(java).exists():
        raise EnvironmentProblem(f"java not found on PATH (and JAVA_HOME is not set). {hint}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot run {java}: {exc}. {hint}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise EnvironmentProblem(f"cannot tell the version of {java}. {hint}")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < 17:
        raise EnvironmentProblem(f"{java} is Java {major}. {hint}")
    return java


_OUR_PYTHON: str | None = None  # the PYSPARK_PYTHON we set for a local master (not the user's)
# Directories of the bundles added (SparkContext.addFile) to the live session. They must
# outlive the run that added them: an executor that joins the session's work later (a
# second node of a reused local-cluster or standalone session) fetches *every* file the
# context ever added, so a deleted bundle fails its first task ("Stream ... was not
# found"). They go when the session is replaced, and at exit.
_SHIPPED: list[Path] = []


def _drop_shipped() -> None:
    while _SHIPPED:
        shutil.rmtree(_SHIPPED.pop(), ignore_errors=True)


atexit.register(_drop_shipped)


JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The driver's JVM (and a local mode's executors) compile with C1 only. spadeopt's JVMs
coordinate (the barrier stage, the rendezvous, py4j); the tuples flow between Python PEs.
C2's compiler threads spent most of a session's start-up CPU: a local[2] session and one
small job took 10-11 s instead of 23-31 s on the loaded 2-core test machine, a
local-cluster[1,1,1024] one 13-20 s instead of 31-39 s
(docs/decisions/053-jvms-run-with-c1-only.md). ``--conf spark.driver.extraJavaOptions=...``
replaces it."""


def spark_session(master: str | None, cores: int, app_name: str = "spadeopt",
                  conf: Mapping[str, str] | None = None):
    """A SparkSession for ``master``, reused while master, cores and conf stay the same.

    ``master=None`` takes the master and conf that ``spark-submit`` gave this process
    (they win over spadeopt's defaults); otherwise spadeopt's settings apply and the
    user's ``conf`` (``--conf KEY=VALUE``) overrides them. spadeopt's settings:
    ``spark.task.cpus`` = cores per node (at most an executor's cores on
    local-cluster), ``spark.dynamicAllocation.enabled=false`` (barrier stages do not
    support it, SPARK-24942), one stage attempt, no UI. Executors run the user's
    PYSPARK_PYTHON / ``spark.pyspark.python``; only in local modes, where executors
    share the driver's machine, does an unset one default to the driver's interpreter.
    """
    global _SESSION, _SESSION_KEY
    user = dict(conf or {})
    submitted = master is None
    key = (master, cores, tuple(sorted(user.items())))
    if _SESSION is not None and _SESSION_KEY == key:
        return _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None
        _drop_shipped()
    check_java()
    from pyspark import SparkConf
    from pyspark.context import SparkContext
    from pyspark.sql import SparkSession

    if submitted:  # spark-submit started our JVM: read the master and conf it was given
        SparkContext._ensure_initialized()
    sconf = SparkConf()
    if master:
        sconf.setMaster(master)
    for k, v in user.items():
        sconf.set(k, v)
    effective = sconf.get("spark.master", None)
    if not effective:
        raise UsageError("no Spark master: pass --master, or start this through spark-submit --master URL")
    cap = local_cluster_cores(effective)
    if cap:  # a task may not ask for more CPUs than one executor has
        cores = min(cores, cap)
    _apply_ours(sconf, effective, cores, app_name, submitted, user)
    given = dict(sconf.getAll()) if submitted else user  # what spark-submit or --conf said wins
    auth = sparkauth.session_auth(effective, given)
    if auth.warning:
        print(f"spadeopt: {auth.warning}", file=sys.stderr)
    _executor_python(sconf, effective)
    try:
        # PySpark puts a SparkConf given before its JVM exists on the JVM's command line
        # (and in its system properties, which outlive this session), so the JVM starts
        # without the authentication settings, and they go in through py4j
        with jvm_output_to_log(SparkContext._gateway is None):
            SparkContext._ensure_initialized(conf=sconf)
        if auth.secret and not is_local(effective):
            _ugi_secret(SparkContext._jvm, auth.secret)
        full = SparkConf()
        for k, v in sconf.getAll():
            full.set(k, v)
        for k, v in auth.conf.items():
            if k not in given:
                full.set(k, v)
        if auth.secret:
            full.set(sparkauth.SECRET_KEY, auth.secret)
        _SESSION = SparkSession.builder.config(conf=full).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - Spark/py4j raise many kinds
        raise EnvironmentProblem(f"Spark did not start with master '{effective}': {spark_reason(exc)} (the JVM's "
                                 f"output: {jvm_log()})") from None
    _SESSION.sparkContext.setLogLevel("ERROR")
    _SESSION_KEY = key
    return _SESSION


def _apply_ours(sconf: Any, effective: str, cores: int, app_name: str, submitted: bool, user: dict[str, str]) -> None:
    """spadeopt's settings into ``sconf``: what spark-submit or ``--conf`` said wins."""
    log4j = Path(__file__).with_name("log4j2.properties")
    ours = {"spark.app.name": app_name, "spark.task.cpus": str(cores),
            "spark.dynamicAllocation.enabled": "false",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.stage.maxConsecutiveAttempts": "1",
            "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "30",
            "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "2s",
            # PySpark's workers start with `python -m pyspark.daemon`, which puts the working
            # directory ahead of the standard library (a json.py there would shadow it)
            "spark.executorEnv.PYTHONSAFEPATH": "1",
            "spark.driver.extraJavaOptions": f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}"}
    if is_local(effective):  # executors share this machine, so they can read our log4j file
        ours["spark.executor.extraJavaOptions"] = f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}"
    for k, v in ours.items():
        if submitted or k in user:
            sconf.setIfMissing(k, v)
        else:
            sconf.set(k, v)


def _executor_python(sconf: Any, effective: str) -> None:
    """The executors' interpreter: the user's; in local modes, this one when unset."""
    global _OUR_PYTHON
    python = sconf.get("spark.pyspark.python", None)
    if python:  # PySpark reads the executors' interpreter from the environment
        os.environ["PYSPARK_PYTHON"] = python
    elif os.environ.get("PYSPARK_PYTHON") in (None, _OUR_PYTHON):
        if is_local(effective):
            os.environ["PYSPARK_PYTHON"] = _OUR_PYTHON = sys.executable
        elif _OUR_PYTHON is not None:
            os.environ.pop("PYSPARK_PYTHON", None)
            _OUR_PYTHON = None


def _ugi_secret(jvm, secret: str) -> None:
    """Make ``secret`` the one this JVM's next session authenticates with.

    A local session's Spark keeps a random secret of its own in the JVM's Hadoop
    credentials (``UserGroupInformation``, key ``sparkCookie``), which outlive the
    session, and every later session of the JVM takes the secret from there before its
    conf's. A standalone session after a local one in the same process then
    authenticated to the master with the stale secret and was refused ("All masters
    are unresponsive" a minute later). Overwrite it (through py4j, never a command line)."""
    creds = jvm.org.apache.hadoop.security.Credentials()
    creds.addSecretKey(jvm.org.apache.hadoop.io.Text("sparkCookie"), bytearray(secret.encode()))
    jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().addCredentials(creds)


def spark_reason(exc: BaseException) -> str:
    """The one line of a Spark/py4j failure that says why (not py4j's 'An error occurred while calling')."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        m = re.match(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$", ln)
        if m and "An error occurred while calling" not in ln:
            return m.group(1)
    useful = [ln for ln in lines if "An error occurred while calling" not in ln and not ln.startswith("at ")]
    return useful[0] if useful else (lines[0] if lines else type(exc).__name__)


def stop_spark() -> None:
    global _SESSION, _SESSION_KEY
    if _SESSION is not None:
        _SESSION.stop()
    _SESSION, _SESSION_KEY = None, None


def current_session() -> Any:
    """The live SparkSession spadeopt started, or None."""
    return _SESSION


def keep_shipped(ship_dir: Path) -> None:
    """Keep ``ship_dir`` (a bundle added to the live session) while the session lives."""
    _SHIPPED.append(ship_dir)
