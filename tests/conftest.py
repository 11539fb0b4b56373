from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

# --doctest-modules (pyproject) imports every .py under testpaths: generated golden PE
# modules need a running PE's environment, and hold no doctests; probes are scripts that
# tests run in a child process (they read sys.argv and start Spark when imported)
collect_ignore_glob = ["*/golden/*", "*/probes/*"]

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")


# ---- the fast tier starts no Spark -------------------------------------------------------
# `make test-fast` runs `-m "not spark"` with SPADEOPT_NO_SPARK=1 (either one arms this).
# Then a test that starts Spark fails, so an unmarked Spark test cannot hide in the fast
# tier: PySpark starts its JVM through $SPARK_HOME/bin/spark-submit, in this process and in
# every child (`python -m spadeopt run ...`, a spark-submit line), and SPARK_HOME points at
# a trap that leaves a mark and exits 1. The test whose setup, call or teardown was running
# when a mark appeared fails, even if it caught the error or a module-scoped fixture
# started Spark. (The trap is the JVM start itself, not spadeopt's spark_session: a command
# refused before Spark starts, e.g. for a missing Java, is fast and stays in the tier.)
NO_SPARK = "this test starts Spark: mark it @pytest.mark.spark"
_TRAP: dict = {}


def _no_spark(config: pytest.Config) -> bool:
    return os.environ.get("SPADEOPT_NO_SPARK") == "1" or "not spark" in (config.option.markexpr or "")


def pytest_configure(config: pytest.Config) -> None:
    if not _no_spark(config):
        return
    home = Path(tempfile.mkdtemp(prefix="spadeopt-no-spark-"))
    (home / "bin").mkdir()
    (home / "marks").mkdir()
    submit = home / "bin" / "spark-submit"
    submit.write_text(f'#!/bin/sh\necho "spadeopt tests: {NO_SPARK}" >&2\n'
                      f'touch "{home}/marks/$$"\nexit 1\n')
    submit.chmod(submit.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["SPARK_HOME"] = str(home)
    _TRAP.update(home=home, seen=set())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TRAP:
        shutil.rmtree(_TRAP["home"], ignore_errors=True)


def _new_marks() -> list[str]:
    marks = {p.name for p in (_TRAP["home"] / "marks").iterdir()} - _TRAP["seen"]
    _TRAP["seen"] |= marks
    return [f"spark-submit (pid {m})" for m in sorted(marks)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the project broker (the ``broker`` fixture, directly or through
    ``redis_client`` / ``keyspace``) is marked ``broker``: `make test-fast` deselects it,
    so the fast tier needs no Redis server."""
    for item in items:
        if "broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Spark asked for during a test's setup, call or teardown fails that phase (a passed
    one becomes failed; a failed one says why), unless the test is marked spark."""
    outcome = yield
    if not _TRAP:
        return
    marks = _new_marks()
    if not marks or item.get_closest_marker("spark") is not None:
        return
    report = outcome.get_result()
    why = f"{NO_SPARK} (Spark was asked for: {', '.join(marks)})"
    if report.failed:
        report.sections.append(("spadeopt fast tier", why))
    else:
        report.outcome, report.longrepr = "failed", why


@pytest.fixture(scope="session", autouse=True)
def _stop_spark_at_end():
    yield
    if "pyspark" in sys.modules:
        from spadeopt.deploy.spark_session import stop_spark

        stop_spark()
