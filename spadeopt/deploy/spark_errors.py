"""Turn a failed Spark job into one readable line naming the real cause.

PySpark reports every failed job as "An error occurred while calling
z:org.apache.spark.api.python.PythonRDD.collectAndServe." followed by pages of Java and
Python stack. ``explain`` looks in that text for the causes a user of a cluster meets,
in this order, and names each in one line with what to do:

1. an executor was lost (``ExecutorLostFailure``: killed, out of memory, its host gone):
   which executor on which host, the node of the plan it ran (the barrier task's
   partition is the node) and that node's PEs, and Spark's reason (e.g. exit code 137);
2. spadeopt (or another module) is not importable by the Python of an executor;
3. dynamic allocation is on (SPARK-24942: barrier stages do not support it);
4. too few task slots for the barrier stage (with a hint that fits the master);
5. otherwise the last Python exception line of the text.

The agent's own PE failure reports (``ERROR_TAG``) are handled by the launcher before
this. The full text is written to a log file whose path the message gives.
"""

from __future__ import annotations

import re
import sys

from spadeopt.deploy.masters import slots_hint
from spadeopt.plan.deployment import Deployment

_LOST_TASK = re.compile(r"Lost task (\d+)\.\d+ in stage [\d.]+ \(TID \d+\) \(([^\s)]+) executor ([^\s)]+)\)")
_BARRIER_TASK = re.compile(r"barrier task ResultTask\(\d+, (\d+)\)")
_LOST_EXECUTOR = re.compile(r"ExecutorLostFailure \(executor (\S+) exited")
_REASON = re.compile(r"ExecutorLostFailure \(([^)]*)\)\s*Reason:\s*([^\n]*)")
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_PY_EXC = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failure|Exit)\b:? .*$", re.M)


def explain(text: str, deploy: Deployment, master: str, python: str | None = None) -> str:
    """One line: what went wrong in this failed job and what to do."""
    app = deploy.app
    nodes, cores = deploy.nodes, deploy.cores
    task = _LOST_TASK.search(text)
    where, node = "", None
    if task:
        node = int(task.group(1))
        where = f"executor {task.group(3)} on host {task.group(2)}"
    else:
        barrier = _BARRIER_TASK.search(text)
        lost = _LOST_EXECUTOR.search(text)
        node = int(barrier.group(1)) if barrier else None
        where = f"executor {lost.group(1)}" if lost else ""
    node_pes = ""
    if node is not None:
        pes = [p.pe for p in deploy.pes_on(node)]
        node_pes = f"node {node} (PEs {', '.join(pes)})" if pes else f"node {node}"
    if "ExecutorLostFailure" in text:
        reason = _REASON.search(text)
        why = reason.group(2).strip().rstrip(".") if reason else "it stopped responding"
        lost = where or "an executor"
        ran = f" running {node_pes}" if node_pes else ""
        return (f"app '{app}' failed: Spark lost {lost}{ran}: {why}. The job was stopped on every node; "
                f"check that host's worker log (was it killed, out of memory, or its host gone?)")
    missing = _NO_MODULE.search(text)
    if missing:
        mod = missing.group(1)
        on = f" on {where}" if where else ""
        py = f" ({python})" if python else ""
        if mod.split(".")[0] == "spadeopt":
            return (f"app '{app}' failed: spadeopt is not installed for the Python{py} of the executor{on} "
                    f"(ModuleNotFoundError: No module named '{mod}'). Point PYSPARK_PYTHON at a Python that "
                    f"has it on every worker: on this machine `export PYSPARK_PYTHON={sys.executable}` (the "
                    f"Python spadeopt runs in; `$(which python3)` usually has no spadeopt), or install "
                    f"spadeopt into the workers' Python, or ship a virtualenv with `--archives env.tar.gz#env` "
                    f"and PYSPARK_PYTHON=./env/bin/python")
        return (f"app '{app}' failed: module '{mod}' is not importable by the Python{py} of the executor{on}; "
                f"install it on every worker (only the app's own directory is shipped with the job)")
    if "SPARK-24942" in text or "does not support dynamic resource allocation" in text:
        return (f"app '{app}' cannot run with dynamic allocation on: a spadeopt job is one Spark barrier stage, "
                f"and Spark does not support barrier stages with dynamic allocation (SPARK-24942). Drop "
                f"`--conf spark.dynamicAllocation.enabled=true` (spadeopt turns it off unless told otherwise)")
    if "BarrierJobSlotsNumberCheckFailed" in text or "SPARK-24819" in text:
        return (f"Spark master '{master}' has too few task slots for {nodes} node(s) of {cores} core(s): "
                f"{slots_hint(master, nodes, cores)}")
    lines = [ln.strip() for ln in _PY_EXC.findall(text) if "Py4JJavaError" not in ln]
    first = lines[-1] if lines else (text.strip().splitlines() or ["unknown error"])[0]
    return f"app '{app}' failed on Spark: {first[:500]}"
