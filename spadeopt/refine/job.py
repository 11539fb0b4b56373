"""``spadeopt refine``: the PySpark job that turns raw samples into ``profile.json``.

Steps:

1. **Check the runs** (driver, no Spark): every ``RUN_DIR/manifest.json`` is read and
   validated (``schema_version`` first); all runs must be of the same app and graph
   fingerprint and measured on the same kind of host (CPU model and cores); every PE
   file the manifest lists must exist and end with a newline (a file cut short while
   being written does not). The cross-PE links come from ``RUN_DIR/build/deploy.json``,
   written by ``spadeopt profile`` next to the samples; in-PE links are in the samples.
2. **Spark** reads every run's ``raw/*.jsonl`` with an explicit schema
   (``spark.read.json``, permissive mode with a corrupt-record column), rejects any
   malformed line (not JSON, a missing or mistyped field, a non-finite number, a
   ``dir``/``metric`` pair that does not exist, a ``pe`` that is not the file's PE) and
   aggregates per (run, op, port, dir, sub, metric): sample count, mean, and the first
   and last sample by timestamp; and per run the first and last timestamp.
3. **Estimate** (driver, :mod:`.estimate`) computes rates, Equation 1 and links from
   those few hundred rows, and the profile is written atomically.

Errors are :class:`~spadeopt.errors.ProfileError` naming the file (and line, where one
line is at fault).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.errors import ArtefactError, PlanError, ProfileError, UsageError
from spadeopt.plan.artefacts import load_deploy
from spadeopt.profiling.records import MANIFEST_NAME, METRICS, Manifest
from spadeopt.refine.estimate import Agg, RunData, estimate, source_thread_busy
from spadeopt.refine.profile import Profile, ProfileRun, read_json

DEFAULT_MASTER = "local[2]"
"""Same as ``spadeopt run``/``profile`` by default, so one Spark session serves both."""
DEFAULT_CORES = 2

_RERUN = "re-run `spadeopt profile` into a new directory"


@dataclass(frozen=True)
class _Run:
    root: Path
    manifest: Manifest
    files: tuple[Path, ...]
    links: frozenset[tuple[str, str]]
    strategy: str
    production: dict | None = None  # the run's production probe (``api._production_probe``), if any


def refine(run_dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None,
           master: str | None = None, cores: int = DEFAULT_CORES,
           progress: Callable[[str], None] | None = None, force: bool = False,
           conf: Mapping[str, str] | None = None, in_driver: bool = False) -> Profile:
    """Refine one or more profiling runs of the same app into a profile (written to ``out``).
    ``in_driver``: step 2 in this process (``estimate.aggregate_records``, the reference the
    Spark aggregation is tested against), for ``run --adaptive`` deciding while a phase runs:
    the phase's PEs then hold every Spark task slot."""
    say = progress or (lambda msg: None)
    if not run_dirs:
        raise UsageError("refine needs at least one RUN_DIR (written by `spadeopt profile`)")
    if out is not None:
        from spadeopt.output_paths import claim_file

        claim_file(out, "profile", "-o", force)
    runs = [_check_run(Path(d)) for d in run_dirs]
    _check_same_graph(runs)
    if in_driver:
        say(f"reading the raw samples of {len(runs)} run(s) in the driver")
        aggs, windows = _aggregate_in_driver(runs)
    else:
        say(f"reading the raw samples of {len(runs)} run(s) with Spark ({master or DEFAULT_MASTER})")
        aggs, windows = _aggregate(runs, master or DEFAULT_MASTER, cores, conf)
    first = runs[0].manifest
    data = []
    for i, r in enumerate(runs):
        m = r.manifest
        window = windows.get(i, (m.started, m.finished))
        info = ProfileRun(run_dir=str(r.root), strategy=r.strategy, pes=len(r.files), seed=m.seed,
                          sample_rate=m.sample_rate, reservoir_size=m.reservoir_size, started=m.started,
                          active_s=window[1] - window[0], production=r.production,
                          source_thread_busy=source_thread_busy(aggs.get(i, {})))
        data.append(RunData(name=str(r.root), pes=_pes_of(r), links=r.links, aggs=aggs.get(i, {}),
                            window=window, info=info))
    profile = estimate(data, app=first.app, fingerprint=first.graph_fingerprint, params=first.params,
                       host=first.host, cpu_model=first.cpu_model, cores=first.cores,
                       created=time.time())
    if out is not None:
        profile.save(out)
    return profile


# ---- 1. checks on the driver -------------------------------------------------------------
def _check_run(root: Path) -> _Run:
    if not root.is_dir():
        raise ProfileError(f"{root}: not a directory; give the RUN_DIR a `spadeopt profile -o RUN_DIR` wrote")
    path = root / MANIFEST_NAME
    if not path.exists():
        raise ProfileError(f"{path} is missing: {root} is not a finished profiling run (the run did not "
                           f"complete, or this is the wrong directory); {_RERUN}")
    manifest = Manifest.from_json(read_json(path, "manifest", _RERUN), path)
    files = []
    for rel in manifest.pe_files:
        f = root / rel
        try:
            size = f.stat().st_size
            if size:
                with open(f, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    last = fh.read(1)
        except FileNotFoundError:
            raise ProfileError(f"{f} is missing but listed in {path}; that PE lost its samples; "
                               f"{_RERUN}") from None
        except OSError as e:
            raise ProfileError(f"{f}: cannot read ({e}); {_RERUN}") from e
        if size and last != b"\n":
            raise ProfileError(f"{f}: truncated (the file does not end with a newline, so it was cut "
                               f"short while being written); {_RERUN}")
        files.append(f.resolve())
    links, strategy = _deploy_links(root, manifest)
    return _Run(root, manifest, tuple(files), links, strategy, _production(root))


def _production(root: Path) -> dict | None:
    """``RUN_DIR/production.json`` when the run has one: numbers only, checked."""
    path = root / "production.json"
    if not path.exists():
        return None
    doc = read_json(path, "production probe", _RERUN)
    keys = ("tuples", "wall_s", "throughput", "steady_throughput", "cpu_s")
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), int | float) and not isinstance(doc.get(k), bool)
                                            and doc[k] >= 0 for k in keys):
        raise ProfileError(f"{path}: expected an object with non-negative numbers {', '.join(keys)}; {_RERUN}")
    return {k: doc[k] for k in keys}


def _deploy_links(root: Path, manifest: Manifest) -> tuple[frozenset[tuple[str, str]], str]:
    """The cross-PE links of the run's build (the samples only name in-PE subscribers)."""
    path = root / "build" / "deploy.json"
    try:
        deploy = load_deploy(root / "build")
    except (PlanError, ArtefactError) as exc:
        raise ProfileError(f"{exc}\n(it is written by `spadeopt profile` next to the samples and lists "
                           f"the links between PEs; {_RERUN})") from None
    if deploy.fingerprint != manifest.graph_fingerprint:
        raise ProfileError(f"{path}: built from graph {deploy.fingerprint!r} but the samples in "
                           f"{root / MANIFEST_NAME} are of graph {manifest.graph_fingerprint!r}; {_RERUN}")
    links = {(ln.src, ln.dst) for ln in deploy.links}
    # Builds list every stream of the graph (in-PE ones too): a stream on which no tuple was
    # sampled is still a link of the profile, with its rate from the port's exact total.
    links.update(deploy.streams)
    plan = manifest.plan if isinstance(manifest.plan, dict) else {}
    return frozenset(links), str(plan.get("strategy", deploy.strategy))


def _check_same_graph(runs: list[_Run]) -> None:
    roots = [r.root.resolve() for r in runs]
    dup = sorted({str(r) for r in roots if roots.count(r) > 1})
    if dup:
        raise UsageError(f"run directory given twice: {', '.join(dup)}")
    a = runs[0]
    am = a.manifest
    for b in runs[1:]:
        bm = b.manifest
        pa, pb = a.root / MANIFEST_NAME, b.root / MANIFEST_NAME
        if (bm.app, bm.graph_fingerprint) != (am.app, am.graph_fingerprint):
            raise ProfileError(
                f"cannot merge runs of different apps or graph versions: {pa} is app '{am.app}' graph "
                f"{am.graph_fingerprint} (params {am.params}), {pb} is app '{bm.app}' graph "
                f"{bm.graph_fingerprint} (params {bm.params}); refine each graph on its own")
        if (bm.cpu_model, bm.cores) != (am.cpu_model, am.cores):
            raise ProfileError(
                f"cannot merge runs measured on different hardware: {pa} ran on '{am.cpu_model}' with "
                f"{am.cores} core(s), {pb} on '{bm.cpu_model}' with {bm.cores}; CPU fractions are "
                f"only comparable on the same kind of host")


def _pes_of(run: _Run) -> dict[str, tuple[str, ...]]:
    plan = run.manifest.plan
    pes = plan.get("pes") if isinstance(plan, dict) else None
    if not isinstance(pes, list):
        raise ProfileError(f"{run.root / MANIFEST_NAME}: 'plan' has no list of PEs; {_RERUN}")
    out = {}
    for pe in pes:
        if not (isinstance(pe, dict) and isinstance(pe.get("pe"), str) and isinstance(pe.get("operators"), list)):
            raise ProfileError(f"{run.root / MANIFEST_NAME}: plan PE entry {pe!r} has no 'pe' and "
                               f"'operators'; {_RERUN}")
        out[pe["pe"]] = tuple(pe["operators"])
    return out


# ---- 2. the Spark part ---------------------------------------------------------------------
def warm_up(master: str | None, cores: int = DEFAULT_CORES, conf: Mapping[str, str] | None = None) -> float:
    """Run the refinement's Spark query once on one made-up sample line and return the
    seconds it took. Spark SQL's first query in a JVM loads and generates its classes:
    ~4 s of a 5.5 s refine on the 2-core VM. ``run --adaptive`` pays that before phase 1
    (the session is the run's: same master, cores and conf), not in its pause."""
    import json
    import tempfile

    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="spadeopt-warm-up-") as d:
        f = Path(d) / "pe0.jsonl"
        f.write_text(json.dumps({"pe": "pe0", "op": "a", "port": "out", "dir": "out", "sub": None,
                                 "metric": "count", "ts": 1.0, "value": 1.0}) + "\n", encoding="utf-8")
        _aggregate_files([[f]], master or DEFAULT_MASTER, cores, conf)
    return time.time() - t0


def _aggregate_in_driver(runs: list[_Run]) -> tuple[dict[int, dict[tuple, Agg]], dict[int, tuple[float, float]]]:
    """``_aggregate_files``' result without Spark: each run read and checked line by line
    (``profiling.records.read_run``) and summarized by ``estimate.aggregate_records``."""
    from spadeopt.profiling.records import read_run
    from spadeopt.refine.estimate import aggregate_records

    aggs, spans = {}, {}
    for i, r in enumerate(runs):
        got = aggregate_records(read_run(r.root).records)
        if got:
            aggs[i] = got
            spans[i] = (min(a.first_ts for a in got.values()), max(a.last_ts for a in got.values()))
    return aggs, spans


def _aggregate(runs: list[_Run], master: str, cores: int, conf: Mapping[str, str] | None = None
               ) -> tuple[dict[int, dict[tuple, Agg]], dict[int, tuple[float, float]]]:
    return _aggregate_files([r.files for r in runs], master, cores, conf)


def _aggregate_files(run_files: list[Sequence[Path]], master: str, cores: int, conf: Mapping[str, str] | None = None
                     ) -> tuple[dict[int, dict[tuple, Agg]], dict[int, tuple[float, float]]]:
    """Spark: every run's sample files (``run_files[i]``, run ``i``) aggregated per
    (op, port, dir, sub, metric), and each run's first and last sample time."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    from spadeopt.deploy.masters import is_local
    from spadeopt.deploy.spark_session import spark_session

    spark = spark_session(master, cores, conf=conf)
    # On a real cluster executors cannot read the driver's files: the driver reads the
    # (small, sampled) lines and hands them to Spark, which parses them as it would the files.
    shipped = not is_local(spark.sparkContext.master)
    schema = StructType([StructField(n, StringType()) for n in ("pe", "op", "port", "dir", "sub", "metric")]
                        + [StructField("ts", DoubleType()), StructField("value", DoubleType()),
                           StructField("_corrupt", StringType())])
    frames = []
    for i, paths in enumerate(run_files):
        files = [str(f) for f in paths if f.stat().st_size > 0]
        if not files:
            continue
        if shipped:
            lines = [(ln, f) for f in files for ln in Path(f).read_text(encoding="utf-8").splitlines() if ln.strip()]
            raw = spark.createDataFrame(lines, "line string, file string")
            df = (raw.select(F.from_json("line", schema, {"mode": "PERMISSIVE",
                                                         "columnNameOfCorruptRecord": "_corrupt"}).alias("j"),
                             "file").select("j.*", "file").withColumn("run", F.lit(i)))
        else:
            df = (spark.read.schema(schema).option("mode", "PERMISSIVE")
                  .option("columnNameOfCorruptRecord", "_corrupt").json(files)
                  .withColumn("file", F.input_file_name()).withColumn("run", F.lit(i)))
        frames.append(df)
    if not frames:
        return {}, {}
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    # one pass: the aggregates and, per group, whether a line is malformed; only then a
    # second pass finds the first such line to name it (three jobs over a cached frame
    # were 2-3x slower: the refine in `run --adaptive`'s pause, record 069)
    bad = _bad_row(F)
    rows = (df.groupBy("run", "op", "port", "dir", "sub", "metric")
            .agg(F.count(F.lit(1)).alias("n"), F.avg("value").alias("mean"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                 F.min_by("value", "ts").alias("first_v"), F.max_by("value", "ts").alias("last_v"),
                 F.max(bad.cast("int")).alias("bad"))
            .collect())
    if any(row["bad"] for row in rows):
        first = df.where(bad).select("file", "_corrupt", "pe", "op", "port", "dir", "sub", "metric",
                                     "ts", "value").limit(1).collect()
        _raise_bad_row(first[0].asDict())
    spans: dict[int, tuple[float, float]] = {}
    for row in rows:  # a run's span: its first and last sample, over its groups
        t0, t1 = spans.get(row["run"], (math.inf, -math.inf))
        spans[row["run"]] = (min(t0, float(row["first_ts"])), max(t1, float(row["last_ts"])))
    aggs: dict[int, dict[tuple, Agg]] = {}
    for row in rows:
        key = (row["op"], row["port"], row["dir"], row["sub"], row["metric"])
        aggs.setdefault(row["run"], {})[key] = Agg(int(row["n"]), float(row["mean"]), float(row["first_ts"]),
                                                   float(row["first_v"]), float(row["last_ts"]),
                                                   float(row["last_v"]))
    return aggs, spans


def _bad_row(F: Any) -> Any:
    """A Spark condition that is true for every malformed sample line."""
    col = F.col
    valid_pair = F.lit(False)
    for direction, metrics in METRICS.items():
        valid_pair = valid_pair | ((col("dir") == direction) & col("metric").isin(sorted(metrics)))
    wants_sub = (col("dir") == "out") & (col("metric") == "process_cpu")
    is_key = (col("dir") == "in") & (col("metric") == "key")  # sub: a key hash or "*" (profiling.keys)
    sub_ok = (F.when(wants_sub, col("sub").isNotNull() & col("sub").contains("."))
              .when(is_key, col("sub").rlike(r"^(-?[0-9]+|\*)$")).otherwise(col("sub").isNull()))
    inf = [float("inf"), float("-inf")]
    file_pe = F.regexp_extract(col("file"), r"([^/]+)\.jsonl$", 1)
    bad = (col("_corrupt").isNotNull()
           | col("pe").isNull() | col("op").isNull() | col("port").isNull() | col("dir").isNull()
           | col("metric").isNull() | col("ts").isNull() | col("value").isNull()
           | (col("op") == "") | (col("port") == "")
           | ~valid_pair | ~sub_ok
           | F.isnan("ts") | F.isnan("value") | col("ts").isin(inf) | col("value").isin(inf)
           | (col("pe") != file_pe))
    return F.coalesce(bad, F.lit(True))


def _raise_bad_row(row: dict[str, Any]) -> None:
    """Name the file and, when the validating reader finds it, the line and the problem."""
    from urllib.parse import unquote, urlparse

    uri = row.pop("file")
    path = Path(unquote(urlparse(uri).path)) if uri.startswith("file:") else Path(uri)
    detail = _line_problem(path)
    if detail is None:
        shown = row.get("_corrupt") or {k: v for k, v in row.items() if k != "_corrupt"}
        detail = f"{path}: malformed sample line {str(shown)[:300]!r}; the file is corrupt; {_RERUN}"
    raise ProfileError(detail)


def _line_problem(path: Path) -> str | None:
    """The raw-format reader's message (file, line, what is wrong) for a bad file, if any."""
    from spadeopt.profiling import records

    reader = getattr(records, "_read_pe_file", None)
    if reader is None:
        return None
    try:
        reader(path, path.name.removesuffix(".jsonl"))
    except ProfileError as e:
        return str(e)
    return None
