"""What a Spark master URL means for a deployment: local or not, and how to get slots.

Local modes (``local``, ``local[N]``, ``local[*]``, ``local-cluster[n,c,mem]``) run every
executor on the driver's machine, so the driver's filesystem and interpreter are
shared; every other master (``spark://``, ``yarn``, ``k8s://``) is a real cluster where
only the network is.
"""

from __future__ import annotations

import re

_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def is_local(master: str) -> bool:
    m = master.strip()
    return m == "local" or m.startswith("local[") or m.startswith("local-cluster[")


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
