"""A real cluster's task slots against a plan, once its executors have registered.

A ``spark://``, YARN or Kubernetes master URL does not say how many executors of how many
cores the cluster has, so ``deploy.preflight`` cannot check it from the URL as it does
for local masters; ``check_cluster_slots`` asks the running SparkContext, before the job
is submitted.
"""

from __future__ import annotations

from collections.abc import Callable

from spadeopt.deploy.masters import parse_master
from spadeopt.errors import UsageError


def _slots(sc) -> tuple[int, int]:
    """(executors registered, barrier tasks of ``spark.task.cpus`` CPUs they can run at once)."""
    jsc = sc._jsc.sc()
    executors = max(0, jsc.getExecutorMemoryStatus().size() - 1)  # minus the driver
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return executors, jsc.maxNumConcurrentTasks(profile)  # what the barrier stage's own check counts


def check_cluster_slots(sc, nodes: int, cores: int, say: Callable[[str], None] | None = None,
                        wait_s: float = 30.0, settle_s: float = 5.0) -> None:
    """On a real cluster (``spark://``, YARN, Kubernetes: the URL does not say its size),
    wait for executors to register, then refuse a plan whose nodes x cores they cannot
    run, before the job is submitted (a barrier stage would wait for slots that never
    come): when the executors cannot run ``nodes`` tasks of ``cores`` CPUs at once and
    their number has not changed for ``settle_s``. When none came within ``wait_s`` the
    job is submitted, and Spark's own error (dynamic allocation, no workers) names it.
    Called for a fresh SparkContext only: a restart after a lost executor reuses the
    session, and the cluster replaces the executor while the new stage waits."""
    import time

    from spadeopt.deploy.masters import slots_hint

    try:
        if parse_master(sc.master).kind != "cluster":
            return
    except UsageError:  # a master spark-submit gave that spadeopt does not parse: Spark decides
        return
    if sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        return  # no executor comes before a task asks; Spark refuses the barrier stage, naming why
    t0 = last_change = time.monotonic()
    seen = None
    while True:
        try:
            executors, slots = _slots(sc)
        except Exception:  # noqa: BLE001 - a Spark without these internals: its barrier check decides
            return
        if slots >= nodes:
            return
        now = time.monotonic()
        if executors != seen:
            seen, last_change = executors, now
        if now - t0 > wait_s or (executors and now - last_change > settle_s):
            break
        time.sleep(0.5)
    if not executors:  # none came (dynamic allocation on, workers busy or down): Spark's own error names it
        if say is not None:
            say(f"no executor of {sc.master} registered within {wait_s:.0f} s; submitting anyway "
                f"(are its workers up? `spadeopt cluster status`)")
        return
    offers = f"{executors} executor(s), room for {slots} task(s) of {cores} core(s) at once"
    raise UsageError(f"Spark master '{sc.master}' offers {offers}, but the plan runs {nodes} node(s) x "
                     f"{cores} core(s), one task of {cores} core(s) per node at once; "
                     f"{slots_hint(sc.master, nodes, cores)}. Nothing was submitted")
