"""Run a generated PE module's sources in this process, timed by this thread's CPU clock.

The in-process views of ``bench profiling-overhead`` and ``bench collapse``: a FALL
build has one PE and no links, so loading its module here and driving it with the real
runtime (``PERuntime``) leaves out only the process boundary, and the thread CPU clock
ignores time the thread spent waiting for a core on a shared machine.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def app_env(app_ref: str) -> Iterator[None]:
    """Let generated modules load the app ``app_ref`` (``runtime.loader.APP_ENV``) meanwhile."""
    from spadeopt.runtime.loader import APP_ENV

    saved = os.environ.get(APP_ENV)
    os.environ[APP_ENV] = app_ref
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(APP_ENV, None)
        else:
            os.environ[APP_ENV] = saved


def run_sources(module_file: str, name: str, profiler: Any = None,
                prepare: Callable[[Any], None] | None = None) -> tuple[float, int]:
    """Load ``module_file`` fresh as module ``name``, let ``prepare`` patch it, build its PE
    ``pe0`` and run its sources (``PERuntime.drive_sources``); returns (thread CPU seconds of the
    sources, source tuples). Call it inside :func:`app_env`."""
    from spadeopt.runtime.pe import PERuntime

    spec = importlib.util.spec_from_file_location(name, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if prepare is not None:
        prepare(module)
    rt = PERuntime("pe0", module.OPERATORS, module_file, profiler=profiler)
    module.build(rt)
    c0 = time.thread_time()
    rt.drive_sources()
    return time.thread_time() - c0, sum(v[0] for v in rt.source_stats.values())
