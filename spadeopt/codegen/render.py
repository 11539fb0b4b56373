"""Render PE modules and the deployment descriptor for a plan, atomically.

``generate`` writes ``plan.json``, ``deploy.json`` and one ``<pe>.py`` per PE into a
build directory. Each module is compiled before anything is written, and the whole
directory is written under a temporary name and renamed into place, so a failure
never leaves half a build. Output is byte-identical across runs.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, FunctionLoader, StrictUndefined

from spadeopt.codegen.lower import lower_op
from spadeopt.codegen.pe_spec import PESpec, links_of, pe_spec
from spadeopt.codegen.rescale_facts import rescale_facts
from spadeopt.errors import CodegenError
from spadeopt.kinds import kind_of
from spadeopt.model.graph import AppGraph
from spadeopt.model.schema import gid
from spadeopt.optimize.strategies import honours_of
from spadeopt.plan.deployment import (
    RESCALE_FILE,
    DeployedLink,
    DeployedPE,
    Deployment,
    RunSettings,
    SparkSettings,
)
from spadeopt.plan.fission import physical_graph
from spadeopt.plan.plan import Plan, check_plan


def template_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "_templates", here.parent / "templates"):
        if (cand / "pe.py.j2").is_file():
            return cand
    msg = f"spadeopt templates not found next to {here}; reinstall spadeopt"
    raise CodegenError(msg)


_ENV: Environment | None = None


def _own_template(name: str) -> str | None:
    """A kind's own template, named by its absolute path (``Kind.template``)."""
    path = Path(name)
    return path.read_text() if path.is_absolute() and path.is_file() else None


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        loader = ChoiceLoader([FileSystemLoader(str(template_dir())), FunctionLoader(_own_template)])
        _ENV = Environment(loader=loader, undefined=StrictUndefined,
                           trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                           autoescape=False)
        _ENV.filters["gid"] = gid
    return _ENV


def render_pe(spec: PESpec) -> str:
    """Render one PE module and check that it compiles."""
    source = environment().get_template("pe.py.j2").render(s=spec)
    try:
        compile(source, f"<spadeopt {spec.app} {spec.pe.pe_id}>", "exec")
    except SyntaxError as exc:
        lines = source.splitlines()
        bad = lines[exc.lineno - 1] if exc.lineno and exc.lineno <= len(lines) else ""
        msg = (f"generated code for {spec.pe.pe_id} of app '{spec.app}' does not compile: {exc.msg} "
               f"at line {exc.lineno}: {bad.strip()!r} (a spadeopt bug: please report it)")
        raise CodegenError(msg) from None
    return source


@dataclass(frozen=True)
class Build:
    directory: Path
    plan: Plan
    deploy: Deployment
    notes: tuple[str, ...] = ()  # what its checkpoints guarantee short of a failure-free run's output (said)


def spark_settings(plan: Plan) -> dict[str, Any]:
    master = f"local[{plan.nodes * plan.cores}]"
    conf = {"spark.task.cpus": str(plan.cores), "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "30",
            "spark.stage.maxConsecutiveAttempts": "1", "spark.ui.enabled": "false",
            "spark.dynamicAllocation.enabled": "false"}  # barrier stages do not support it (SPARK-24942)
    return {"master": master, "conf": conf}


def render_build(graph: AppGraph, plan: Plan, app_ref: str, build_dir: Path | None = None, *,
                 sample_groups: bool = True) -> dict[str, str]:
    """All files of a build, as name -> text (nothing written).

    ``build_dir`` (absolute) completes the spark-submit line; without it the line ends
    in the placeholder ``BUILD_DIR``. ``sample_groups``: see ``codegen.pe_spec.pe_spec``.
    """
    check_plan(plan, graph, honours_of(plan.strategy))
    physical = physical_graph(graph, plan.regions)  # split, channels and merge are operators too
    if plan.checkpoints:
        problems = [p for op in physical.operators if (p := kind_of(op).checkpoint_problem(op))]
        if problems:
            raise CodegenError(f"app '{graph.name}' cannot take checkpoints: " + "; ".join(problems))
    links = links_of(plan, physical)
    files: dict[str, str] = {}
    pes = []
    for pe in plan.pes:
        spec = pe_spec(physical, plan, pe, links, lower_op, sample_groups=sample_groups)
        files[f"{pe.pe_id}.py"] = render_pe(spec)
        pes.append(DeployedPE(
            pe.pe_id, f"{pe.pe_id}.py", pe.node, tuple(pe.operators), {str(ref): n for ref, n in spec.exposed_in},
            {str(ref): tuple(ln.link_id for ln in links if ln.src == ref) for ref, _ in spec.exposed_out}))
    spark = spark_settings(plan)
    conf_args = " ".join(f"--conf {k}={v}" for k, v in sorted(spark["conf"].items()))
    submit = (f"spark-submit --master '{spark['master']}' {conf_args} \"$(python3 -m spadeopt.submit --path)\" "
              f"{shlex.quote(str(build_dir)) if build_dir else 'BUILD_DIR'}")
    deploy = Deployment(
        app=graph.name, app_ref=app_ref, params=dict(graph.params), fingerprint=graph.fingerprint,
        strategy=plan.strategy, nodes=plan.nodes, cores=plan.cores, instrumented=plan.instrumented,
        collapse=plan.collapse and not plan.instrumented, checkpoints=plan.checkpoints, pes=tuple(pes),
        links=tuple(DeployedLink(ln.link_id, ln.src_pe, str(ln.src), ln.dst_pe, str(ln.dst), ln.transport,
                                 tuple((a, t) for a, t in physical.op(ln.src.op).out_port(ln.src.port).schema.to_json()))
                    for ln in links),
        # every stream of the physical graph, in-PE ones too: refine keeps the links no sample saw
        streams=tuple(sorted((str(s.src), str(s.dst)) for s in physical.streams)),
        spark=SparkSettings(spark["master"], spark["conf"], submit),
        settings=RunSettings(batch_size=plan.batch) if plan.batch is not None else RunSettings())
    files["plan.json"] = json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n"
    files["deploy.json"] = json.dumps(deploy.to_json(), indent=2, sort_keys=True) + "\n"
    facts = rescale_facts(graph, plan)  # how a resume under other widths moves its regions' state
    if facts is not None:
        files[RESCALE_FILE] = json.dumps(facts, indent=2, sort_keys=True) + "\n"
    return files


def write_dir_atomically(directory: Path, files: dict[str, str], kind: str = "build") -> None:
    """Write ``files`` into ``directory``, replacing it whole or not at all.

    Only a missing or empty directory, or a previous spadeopt artefact of the same
    ``kind`` holding nothing else, is replaced (``spadeopt.output_paths``); the new directory
    carries a marker listing what spadeopt wrote in it.
    """
    from spadeopt.output_paths import MARKER, claim_dir, marker_text

    directory = Path(directory)
    claim_dir(directory, kind, "output directory")
    files = {**files, MARKER: marker_text(kind, files)}
    parent = directory.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=parent))
    except OSError as exc:
        msg = f"cannot write build directory {directory}: {exc.strerror}; choose a writable -o"
        raise CodegenError(msg) from None
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        if directory.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=parent))
            os.rename(directory, old / "d")
            os.rename(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def checkpoint_notes(graph: AppGraph, plan: Plan) -> tuple[str, ...]:
    """What a checkpointing build guarantees short of "exactly a failure-free run's
    output" (each operator kind's ``checkpoint_note``: an arrival merge's is per
    partition key), for ``build`` and ``run`` to say; () for a build without checkpoints."""
    if not plan.checkpoints:
        return ()
    physical = physical_graph(graph, plan.regions)
    return tuple(n for op in physical.operators if (n := kind_of(op).checkpoint_note(physical, op)))


def generate(graph: AppGraph, plan: Plan, out_dir: Path, app_ref: str, *, sample_groups: bool = True) -> Build:
    files = render_build(graph, plan, app_ref, Path(out_dir).resolve(), sample_groups=sample_groups)
    write_dir_atomically(Path(out_dir), files)
    return Build(Path(out_dir), plan, Deployment.from_json(json.loads(files["deploy.json"])),
                 checkpoint_notes(graph, plan))
