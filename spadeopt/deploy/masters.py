"""What a Spark master URL means for a deployment: local or not, and how to get slots.

Local modes (``local``, ``local[N]``, ``local[*]``, ``local-cluster[n,c,mem]``) run every
executor on the driver's machine, so the driver's filesystem and interpreter are
shared; every other master (``spark://``, ``yarn``, ``k8s://``) is a real cluster where
only the network is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from spadeopt.errors import UsageError

_LOCAL = re.compile(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*\d+\s*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")
_REMOTE = re.compile(r"(spark://[^\s/]+(?::\d+)?(?:,[^\s/,]+:\d+)*|yarn|k8s://\S+)")


@dataclass(frozen=True)
class Master:
    """A parsed Spark master URL: how many executors and CPUs each, where the URL says."""

    url: str
    kind: str  # "local" (one JVM), "local-cluster" (executors on this machine), "cluster"
    executors: int | None  # known number of executors (local-cluster), else None
    cores: int | None  # CPUs per executor, when the URL says


def parse_master(url: str, flag: str = "--master") -> Master:
    """Parse a master URL or refuse it, naming the flag.

    >>> parse_master("local[4]")
    Master(url='local[4]', kind='local', executors=1, cores=4)
    >>> parse_master("local-cluster[2,1,1024]").executors
    2
    """
    u = url.strip()
    m = _LOCAL.fullmatch(u)
    if m:
        n = m.group(1)
        cores = 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)
        return Master(u, "local", 1, cores)
    m = _LOCAL_CLUSTER.fullmatch(u)
    if m:
        return Master(u, "local-cluster", int(m.group(1)), int(m.group(2)))
    if _REMOTE.fullmatch(u):
        return Master(u, "cluster", None, None)
    raise UsageError(f"{flag} '{url}' is not a Spark master URL; use local[N], local-cluster[nodes,cores,MB], "
                     f"spark://HOST:PORT, yarn or k8s://https://HOST:PORT")




def is_local_mode(master: str | None) -> bool:
    """Is ``master`` Spark's local mode (None: the default, ``local[2]``)? Its tasks run in
    the driver's own JVM on the driver's file system: a run's PEs write where it reads."""
    return master is None or bool(_LOCAL.fullmatch(master.strip()))


def is_local(master: str) -> bool:
    """Does ``master`` run every executor on this machine? (Any other string, valid or
    not, is treated as a real cluster: spark-submit may pass masters spadeopt never parses.)"""
    m = master.strip()
    return bool(_LOCAL.fullmatch(m) or _LOCAL_CLUSTER.fullmatch(m))


def local_cluster_cores(master: str) -> int | None:
    """Cores per executor of a ``local-cluster[n,c,mem]`` master, else None."""
    m = _LOCAL_CLUSTER.fullmatch(master.strip())
    return int(m.group(2)) if m else None


def slots_hint(master: str, nodes: int, cores: int) -> str:
    """What to do when ``master`` cannot run ``nodes`` tasks of ``cores`` CPUs at once."""
    m = master.strip()
    if m.startswith("local-cluster["):
        return f"use --master 'local-cluster[{nodes},{cores},1024]'"
    if is_local(m):
        return f"use --master 'local[{nodes * cores}]'"
    if m.startswith("spark://"):
        return (f"the standalone cluster needs {nodes} worker(s) with {cores} free core(s) each "
                f"(e.g. `spadeopt cluster start --workers {nodes} --cores {cores}`), or rebuild the app "
                f"with --nodes/--cores that fit the cluster")
    if m.startswith("yarn") or m.startswith("k8s://"):
        return (f"ask for {nodes} executor(s) of {cores} core(s): --conf spark.executor.instances={nodes} "
                f"--conf spark.executor.cores={cores}")
    return f"give the cluster {nodes} executor(s) with {cores} core(s) each"
