"""The application spark-submit runs: ``spark-submit [...] SUBMIT_PY BUILD_DIR [--out DIR]``.

Every ``deploy.json`` carries a ready line (``spark.submit``) of this form, where
``SUBMIT_PY`` is this file, found with ``python3 -m spadeopt.submit --path``::

    spark-submit --master spark://HOST:7077 --conf spark.task.cpus=2 ... \\
        "$(python3 -m spadeopt.submit --path)" /abs/build/dir --out results/

The master and conf that spark-submit gives win: the master baked into deploy.json at
build time is only ``spadeopt run``'s default. Python apps run in client deploy mode
on a standalone cluster (this process is the driver); on YARN or Kubernetes cluster
mode also works when spadeopt is installed in the driver's image or shipped venv.
Exit codes as the CLI: 0 success, 1 the job failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spadeopt.submit", description=__doc__.splitlines()[0])
    ap.add_argument("--path", action="store_true", help="print the path of this file (for spark-submit) and exit")
    ap.add_argument("build", nargs="?", type=Path, help="build directory (holding deploy.json)")
    ap.add_argument("--out", type=Path, help="write each sink's output to OUT/<sink>.jsonl on the driver")
    ap.add_argument("--json", type=Path, help="write the result as JSON to this file")
    ap.add_argument("--force", action="store_true", help="move foreign content at --out aside (nothing is deleted)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.path:
        print(Path(__file__).resolve())
        return 0
    from spadeopt.console import end_status, guarded, progress, show_result
    from spadeopt.errors import UsageError

    def submitted() -> int:
        if args.build is None:
            raise UsageError("give the build directory: spark-submit ... submit.py BUILD_DIR [--out DIR]")
        from spadeopt import api
        from spadeopt.deploy.options import RunOptions

        result = api.run_submitted(args.build, RunOptions(out=args.out, force=args.force, progress=progress))
        end_status()
        show_result(result)
        if args.json:
            api.write_json(args.json, result.to_json())
        return 0

    return guarded(submitted)


if __name__ == "__main__":
    sys.exit(main())
