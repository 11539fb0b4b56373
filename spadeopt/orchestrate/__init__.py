"""Build-then-run orchestration: what makes a plan and a build of an app and then has
``deploy`` run it. ``deploy`` is a runner (a build goes in, results come out) and
imports nothing of the compiler; the few commands and tools that need both the
compiler and a run meet here, one floor above it (``docs/architecture.md``, record 065).

* :mod:`.local`: plan, generate and run an app on this machine without Spark
  (``build_and_run``: the tests, the micro-benchmarks, calibration).
* :mod:`.verify_fission`: ``spadeopt run --verify-fission N``, a width-1 reference build
  run against the plan's build on the first N records.
"""
