from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

# --doctest-modules (pyproject) imports every .py under testpaths: generated golden PE
# modules need a running PE's environment, and hold no doctests
collect_ignore_glob = ["*/golden/*"]

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def _stop_spark_at_end():
    yield
    if "pyspark" in sys.modules:
        from spadeopt.deploy.launcher import stop_spark

        stop_spark()
