"""The link cost many-PE runs show, learned into a calibration (issue 36 item 4).

``spadeopt calibrate`` measures what a link costs on a lone forwarding pipeline, and what
a split or merge costs in one process. A plan of many PEs pays more: a channel's PE
receives small frames from many senders, an exchange merge waits on all of them, the
PEs share caches. ``spadeopt bench scale`` runs FALL and FATM's plans on real PEs and
keeps, for every PE of a FATM plan, the CPU it measured and the CPU the prediction gave
it, split into operator work ``o``, link ends ``c`` and fission's splits and merges ``f``
(``scale.json``, ``pe_check``). This module fits, over every PE of the runs it is given,

    measured_i = a * o_i + b * (c_i + f_i)        (least squares, a, b >= 0)

``a`` is what operator work cost in those runs against FALL's anchor (the time-slicing of
many PEs on few cores: reported, not learned, since a machine with the plan's cores
does not pay it), ``b`` what links, splits and merges cost against the model: learned.
:func:`learned` writes a calibration whose ``perf_model`` has ``comm_scale`` and the
split and merge costs times ``b``; FATM planned with it costs every link, split and merge
as the runs showed.

Fit on some apps and judge on others: a fit judged on the runs it came from proves
nothing (docs/scaling.md).

    python -m spadeopt.bench.learn_links out/scale16/peer out/scale16/keyed_window \\
        --calibration profiles/calibration/vm.json -o profiles/calibration/vm-learned.json

>>> samples = [Sample("a", "pe0", 1.0, 1.0), Sample("a", "pe1", 1.0, 0.5)]
>>> f = fit([Sample(s.plan, s.pe, s.oper, s.links, 1.1 * s.oper + 2.0 * s.links) for s in samples])
>>> round(f.oper, 6), round(f.link, 6), f.pes
(1.1, 2.0, 2)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.atomic import write_atomic
from spadeopt.errors import ProfileError, UsageError

SPLIT_MERGE = ("split_static_s", "split_dynamic_s", "merge_static_s", "merge_dynamic_s")


@dataclass(frozen=True)
class Sample:
    """One PE of a measured plan: its predicted operator work and link (plus split and
    merge) CPU seconds, and the CPU seconds it measured."""

    plan: str
    pe: str
    oper: float
    links: float
    measured: float = 0.0


@dataclass(frozen=True)
class Fit:
    """``measured = oper * o + link * (c + f)`` over ``pes`` PEs, and the root mean square
    error of the prediction before (both factors 1) and after, in CPU seconds."""

    oper: float
    link: float
    pes: int
    rms_before: float
    rms_after: float

    def to_json(self) -> dict[str, Any]:
        return {"oper_factor": self.oper, "link_factor": self.link, "pes": self.pes,
                "rms_before_s": self.rms_before, "rms_after_s": self.rms_after}


def samples_from_run(run_dir: Path, calibration: Path) -> list[Sample]:
    """Every PE of every FATM plan a ``bench scale --out`` directory measured, with the
    prediction's parts evaluated again on its build (``api.predict_build``, with the
    profile the command planned from and ``calibration``): runs made before ``scale.json``
    kept the parts serve as well."""
    from spadeopt import api

    path = Path(run_dir) / "scale.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}; give a `spadeopt bench scale --out` directory") from None
    anchored = Path(run_dir) / "profile-anchored.json"
    profile = anchored if anchored.is_file() else Path(run_dir) / "profile.json"
    out = []
    for row in doc.get("plans", []):
        if not str(row.get("plan", "")).startswith("FATM-"):
            continue
        pred = api.predict_build(Path(run_dir) / f"build-fatm-{row['cores']}", profile, calibration)
        per = row["tuples"] / pred.rate
        for pe, cpu in sorted(row["cpu_s"].items()):
            links = (pred.pe_comm.get(pe, 0.0) + pred.pe_fission.get(pe, 0.0)) * per
            out.append(Sample(f"{run_dir}:{row['plan']}", pe, max(0.0, pred.pe_load[pe] * per - links), links,
                              float(cpu)))
    return out


def fit(samples: Sequence[Sample]) -> Fit:
    """The least-squares factors (module docstring), each >= 0: when the joint solution has
    a negative factor, the other is fitted alone."""
    if len(samples) < 2:
        raise UsageError(f"learning link costs needs at least 2 measured PEs, got {len(samples)}; "
                         f"run `spadeopt bench scale APP --cores 16` on an app with links first")
    soo = math.fsum(s.oper * s.oper for s in samples)
    sll = math.fsum(s.links * s.links for s in samples)
    sol = math.fsum(s.oper * s.links for s in samples)
    som = math.fsum(s.oper * s.measured for s in samples)
    slm = math.fsum(s.links * s.measured for s in samples)
    det = soo * sll - sol * sol
    a = b = -1.0
    if det > 1e-12 * max(soo * sll, 1e-300):
        a, b = (som * sll - slm * sol) / det, (slm * soo - som * sol) / det
    if a < 0 or b < 0:
        if sll <= 0:
            raise UsageError("the runs have no PE whose links the model costs: nothing to learn from; "
                             "measure an app whose plan has links (a region, an exchange)")
        a_only, b_only = (som / soo if soo > 0 else 0.0), slm / sll
        err_a = _rms(samples, a_only, 0.0) if soo > 0 else math.inf
        err_b = _rms(samples, 0.0, b_only)
        a, b = (a_only, 0.0) if err_a < err_b else (0.0, b_only)
    return Fit(a, b, len(samples), _rms(samples, 1.0, 1.0), _rms(samples, a, b))


def _rms(samples: Iterable[Sample], a: float, b: float) -> float:
    errs = [(s.measured - a * s.oper - b * s.links) ** 2 for s in samples]
    return math.sqrt(math.fsum(errs) / len(errs)) if errs else 0.0


def learned(calibration: Mapping[str, Any], got: Fit, sources: Sequence[str]) -> dict[str, Any]:
    """``calibration`` with its ``perf_model``'s ``comm_scale`` and split and merge costs
    times ``got.link`` (the model's constants where it had none), and where they were
    learned from (``learned_links``)."""
    from spadeopt.optimize.predict import model_from_calibration

    if not got.link > 0:
        raise UsageError(f"the fitted link factor is {got.link:g}: the runs do not show what links cost; "
                         f"measure apps whose plans have links")
    model = model_from_calibration(calibration, "the calibration")
    doc = json.loads(json.dumps(calibration))
    block = dict(doc.get("perf_model") or {})
    block["comm_scale"] = model.comm_scale * got.link
    for key in SPLIT_MERGE:
        block[key] = getattr(model, key) * got.link
    block["source"] = f"link costs learned from {len(sources)} bench scale run(s)"
    doc["perf_model"] = block
    doc["learned_links"] = {**got.to_json(), "from": list(sources)}
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m spadeopt.bench.learn_links",
                                description="learn the link cost of `spadeopt bench scale` runs into a calibration")
    p.add_argument("runs", nargs="+", type=Path, help="bench scale --out directories (each with scale.json)")
    p.add_argument("--calibration", type=Path, required=True, help="the calibration the runs were planned with")
    p.add_argument("-o", type=Path, required=True, help="the learned calibration to write (a new file)")
    args = p.parse_args(argv)
    if args.o.exists():
        raise SystemExit(f"{args.o} exists: give a new file for the learned calibration")
    try:
        samples = [s for run in args.runs for s in samples_from_run(run, args.calibration)]
        got = fit(samples)
        cal = json.loads(args.calibration.read_text())
        doc = learned(cal, got, [str(r) for r in args.runs])
    except (UsageError, ProfileError, OSError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    write_atomic(args.o, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"{got.pes} PEs: operator work x{got.oper:.2f} (reported, not learned), links, splits and merges "
          f"x{got.link:.2f} (learned); rms error {got.rms_before:.3f} -> {got.rms_after:.3f} CPU s; wrote {args.o}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
