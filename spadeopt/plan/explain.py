"""A build in words: what ``spadeopt explain`` prints.

An optimized build's ``explain.json`` (PEs with their OperLoad, CommLoad and effective
utilisation, merges refused and why, the exact optimum's gap, the predicted rate), the
parallel regions of any build's ``plan.json`` with how FATM chose their widths, and the
candidate regions FATM discovered with the reason for each of their boundaries.
Both files are read through ``plan.artefacts``, so every name is checked before it is
printed. The picture of the same build is ``plan.picture``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from spadeopt.errors import UsageError
from spadeopt.plan.artefacts import read_explain
from spadeopt.plan.plan import Plan
from spadeopt.plan.regions import EXCHANGE, Region


def regions_text(plan: Plan) -> list[str]:
    """Parallel regions of a plan: width, key, ordering, and each channel's PE and node."""
    lines = []
    pe_of = plan.pe_of
    node = {p.pe_id: p.node for p in plan.pes}
    for r in plan.regions:
        feed = (f"hash of {', '.join(r.key)}" if r.key else "round robin") if r.has_split else (
            f"each channel reads its own stream keys (partitioned by {', '.join(r.key)})"
            if r.ordering == "arrival" else "each channel reads its own source splits")
        if r.fed == EXCHANGE:
            feed = (f"key exchange from region '{r.after}' (each of its channels sends by "
                    f"{'hash of ' + ', '.join(r.key) if r.key else 'round robin'} straight to these channels, "
                    f"each merging them by sequence number)")
        into = next((d.name for d in plan.regions if d.fed == EXCHANGE and d.after == r.name), None)
        if r.width > 1 and into is not None:
            merge = f"no merge (its channels send to region '{into}' by key exchange)"
        elif r.width > 1 and r.merge not in pe_of:  # the region ends in counting sinks
            merge = "no merge (each channel's counting sink counts; the run reports the sum)"
        else:
            merge = {"static": "weighted round robin merge", "arrival": "arrival merge (the order is kept per "
                     f"{', '.join(r.key)})"}.get(r.ordering, "sequence-number merge")
        how = f"{feed}, {merge}"
        lines.append(f"region '{r.name}': width {r.width}, {how}; operators {', '.join(r.operators)}")
        if r.width > 1:
            for what, op in (("split", r.split), ("merge", r.merge)):
                if op not in pe_of:  # a region led by a splittable source has no split
                    continue
                lines.append(f"  {what:<8} {op} in {pe_of[op]} on node {node[pe_of[op]]}")
            if r.fed == EXCHANGE:
                ups = next((u.width for u in plan.regions if u.name == r.after), 0)
                for what, ops in (("xsplit", [r.exchange_split(c) for c in range(ups)]),
                                  ("xmerge", [r.exchange_merge(d) for d in range(r.width)])):
                    lines.append(f"  {what:<8} " + ", ".join(f"{o} in {pe_of.get(o)}" for o in ops))
            for c in range(r.width):
                pes = sorted({pe_of[Region.channel_op(o, c)] for o in r.operators})
                nodes = sorted({node[p] for p in pes})
                lines.append(f"  channel {c}: {', '.join(f'{o}@{c}' for o in r.operators)} -> "
                             f"{', '.join(pes)} on node {', '.join(map(str, nodes))}")
    return lines


def _shape(text: str) -> str:
    """What a block says with its numbers blanked: blocks of one shape differ only in
    the numbered operators and figures they name (bargain's 22 alike groups)."""
    return re.sub(r"\d+(\.\d+)?", "#", text)


def _label(header: str) -> str:
    quoted = re.search(r"'([^']+)'", header)
    return quoted.group(1) if quoted else header.strip().split(":", 1)[0]


def _blocks(lines: Iterable[str]) -> list[list[str]]:
    """Lines cut into blocks: a line, and the more indented lines under it."""
    blocks: list[list[str]] = []
    for ln in lines:
        indent = len(ln) - len(ln.lstrip())
        if blocks and indent > len(blocks[-1][0]) - len(blocks[-1][0].lstrip()):
            blocks[-1].append(ln)
        else:
            blocks.append([ln])
    return blocks


def alike(lines: Iterable[str], full: bool = False, most: int = 4) -> list[str]:
    """Blocks of the same shape (``_shape``) shown once, the first of them, with how many
    more there are and their names: one entry per kind of region or refusal, not one per
    region (``full``: every block as it is)."""
    blocks = _blocks(lines)
    if full:
        return [ln for b in blocks for ln in b]
    groups: dict[str, list[list[str]]] = {}
    for b in blocks:
        groups.setdefault(_shape("\n".join(b)), []).append(b)
    out = []
    for members in groups.values():
        head, *rest = members[0]
        if len(members) > 1:
            names = [_label(m[0]) for m in members[1:]]
            shown = ", ".join(names[:most]) + (", ..." if len(names) > most else "")
            head += f"  [and {len(names)} more like it: {shown}; spadeopt explain --full lists each]"
        out += [head, *rest]
    return out


def explain_text(build_dir: Path, full: bool = False) -> str:
    """A readable account of a build: an optimized build's ``explain.json``, and the
    parallel regions of any build's ``plan.json``; blocks alike are shown once unless
    ``full``."""
    path = Path(build_dir) / "explain.json"
    plan_path = Path(build_dir) / "plan.json"
    plan = Plan.load(plan_path) if plan_path.is_file() else None
    if not path.is_file():
        if plan is None:
            raise UsageError(f"{build_dir} is not a build directory (no plan.json); make one with "
                             f"`spadeopt build` or `spadeopt optimize`")
        lines = [f"app '{plan.app}', strategy {plan.strategy}: {len(plan.pes)} PE(s) on {plan.nodes} node(s)", ""]
        lines += [f"{p.pe_id:<6} node {p.node}  {', '.join(p.operators)}" for p in plan.pes]
        extra = alike(regions_text(plan), full)
        return "\n".join(lines + ([""] + extra if extra else []))
    doc = read_explain(path)
    lines = [f"MaxFrac {doc['max_frac']}, MinUtil {doc['min_util']}; objective sum of Rate(P) "
             f"{doc['objective']:,.0f} tuples/s (one PE per operator: {doc['objective_none']:,.0f}; each "
             f"inter-PE link counts at both ends, so inter-PE traffic is {doc['objective'] / 2:,.0f} tuples/s); "
             f"{doc['merges']} merges"]
    scaling = doc.get("inputs", {}).get("comm_scaling")
    if scaling:
        lines.append(f"comm cost from {doc.get('calibration')}, scaled x{scaling.get('scale', 1.0):.3f} "
                     f"({scaling.get('host_score_source')})")
    lines.append("")
    lines.append(f"{'PE':<6}{'node':>5}{'OperLoad':>10}{'CommLoad':>10}{'EffUtil':>9}  operators")
    for pe in doc["pes"]:
        ops = ", ".join(pe["operators"])
        if len(ops) > 70:
            ops = ops[:67] + "..."
        lines.append(f"{pe['pe']:<6}{pe['node']:>5}{pe['oper_load']:>10.3f}{pe['comm_load']:>10.3f}"
                     f"{pe['effective_util']:>9.2f}  {ops}")
    if doc["not_merged"]:
        lines += ["", "neighbouring PEs not merged:"]
        lines += alike([f"  {a} + {b}: {r['why']}" for r in doc["not_merged"] for a, b in [r["pes"]]], full)
    if (doc.get("exact") or {}).get("skipped"):
        lines += ["", f"exact optimum: skipped, {doc['exact']['skipped']}"]
    elif doc.get("exact"):
        e = doc["exact"]
        lines += ["", f"exact optimum: objective {e['objective']:,.0f} vs GreedyFuse {e['greedy_objective']:,.0f} "
                      f"(gap {e['gap']:.1%} of the unfused objective)"]
    for w in doc["warnings"]:
        lines.append(f"warning: {w}")
    lines.append(f"\nnode load (cores): {', '.join(f'{x:.2f}' for x in doc['node_load'])}; "
                 f"inter-node rate {doc['inter_node_rate']:,.0f} tuples/s")
    pred = doc.get("prediction")
    if pred and pred.get("rate"):
        model = pred.get("model", {})
        consts = ", ".join(f"{k} {v:g}" for k, v in sorted(model.items()) if k != "source")
        ladder = doc.get("max_frac_search") or []
        best = max((m for m in ladder if m.get("predicted")), key=lambda m: m["predicted"], default=None)
        fracs = " / ".join(f"{m['max_frac']:g}" for m in ladder)
        at = f", the best of MaxFrac {fracs}: MaxFrac {best['max_frac']:g}" if best and len(ladder) > 1 else ""
        lines.append(f"fused for {doc['rate']['planned']:,.0f} source tuples/s; predicted throughput "
                     f"{pred['rate']:,.0f} source tuples/s{at} (bound: {pred['bottleneck']}; model: {consts}; "
                     f"call_s {pred['call_s']:.3g}; {model.get('source')})")
    elif pred:
        lines.append(f"no throughput prediction: {pred.get('error')}")
    if plan is not None and plan.regions:
        lines += ["", *alike(regions_text(plan), full), *alike(fission_text(doc.get("fission")), full)]
    lines += discovered_text(doc.get("fission"), plan, full)
    return "\n".join(lines)


def _ops(ops: list[str], most: int = 6) -> str:
    """Operator names, the middle elided when there are many."""
    if len(ops) <= most:
        return ", ".join(ops)
    return f"{', '.join(ops[:most - 2])}, ..., {ops[-1]} ({len(ops)} operators)"


def discovered_text(doc: Mapping[str, Any] | None, plan: Plan | None, full: bool = True) -> list[str]:
    """The candidate regions FATM discovered from the graph alone (explain.json's
    ``fission.discovered``, ``plan.discover``): each with its width in the plan, its key
    and feed, and for every neighbouring operator outside it, the rule that keeps it out."""
    found = (doc or {}).get("discovered")
    if not found:
        return []
    width = {r.name: r.width for r in plan.regions} if plan is not None else {}
    cands = found.get("candidates", [])
    lines = ["", f"candidate regions discovered from the graph: {len(cands)}"]
    blocks: list[str] = []
    for c in cands:
        feed = ("led by its partitioned source" if c["ordering"] == "arrival" else "led by its splittable source") \
            if c["fed"] == "source" else (
            f"split by hash of {', '.join(c['key'])}" if c["key"] else "split round robin")
        w = width.get(c["name"])
        blocks.append(f"region '{c['name']}': width {w if w is not None else '?'}, {feed}, {c['ordering']}; "
                      f"operators {_ops(c['operators'])}")
        for b in c["boundaries"]:
            blocks.append(f"  boundary at '{b['outside']}' (next to '{b['inside']}'): {b['reason']}")
    lines += alike(blocks, full)
    outside = found.get("outside", [])
    if outside:
        lines.append("operators in no candidate region:")
        lines += alike([f"  '{o['operator']}': {o['reason']}" for o in outside], full)
    return lines


def fission_text(doc: Mapping[str, Any] | None) -> list[str]:
    """How FATM chose the regions' widths (explain.json's ``fission``)."""
    if not doc:
        return []
    if not doc.get("enabled", True):
        return ["fission off (--no-fission): every region at width 1 unless pinned with --width"]
    lines = [f"region '{name}': width {w} pinned with --width" for name, w in doc.get("pinned", {}).items()]
    search = doc.get("search")
    skipped = doc.get("not_searched") or {}
    if skipped:
        names = [f"{n} ({s:.1%})" for n, s in sorted(skipped.items())]
        shown = ", ".join(names[:6]) + (f", ... ({len(names)} regions)" if len(names) > 6 else "")
        lines.append(f"width 1 without a search (a discovered region under 5 % of the load, or beyond the 8 "
                     f"heaviest): {shown}")
    kept = doc.get("kept_unwidened")
    if kept:
        lines.append(f"widening did not pay: the chosen widths planned {kept['widened'] or 0:,.0f}/s at their "
                     f"best MaxFrac, every searched region at width 1 {kept['unwidened']:,.0f}/s; width 1 kept")
    for x in doc.get("exchanges", []):
        lines.append(f"regions '{x['from']}' -> '{x['to']}': " + (
            "key exchange (channel to channel, no merge and split between them)" if x["exchange"]
            else f"merge and split kept: {x['why']}"))
    if search:
        lines += [_width_line(name, r, search) for name, r in search["regions"].items()]
    return lines


def _vector(search: Mapping[str, Any], widths: Mapping[str, int]) -> Mapping[str, Any] | None:
    """The planned width vector of ``search`` with these widths (None: not planned)."""
    return next((v for v in search.get("vectors", []) if v.get("widths") == dict(widths)), None)


def _width_line(name: str, r: Mapping[str, Any], search: Mapping[str, Any]) -> str:
    """One region's width: the width chosen with the rate predicted for it, the rates of
    the widths tried, and, when another width predicted more, why it was not taken."""
    rate = {t["width"]: t["planned_rate"] for t in r["tried"]}
    tried = ", ".join(f"{w} -> " + (f"{v:,.0f}/s" if v else "no plan") for w, v in rate.items())
    chosen = r["chosen"]
    head = (f"region '{name}': FATM chose width {chosen}, predicted "
            + (f"{rate[chosen]:,.0f}/s" if rate.get(chosen) else "(not planned alone)")
            + f" (widths tried: {tried}; {search['search']} search over widths 1..{search['max_width']}, "
              f"{search['vectors_tried']} width vector(s) planned)")
    best = max((w for w, v in rate.items() if v), key=lambda w: rate[w], default=chosen)
    if best == chosen or not rate.get(chosen):
        return head
    gain = rate[best] / rate[chosen] - 1
    chosen_v = _vector(search, {n: x["chosen"] for n, x in search["regions"].items()})
    leader_v = _vector(search, search.get("rate_leader", {}))
    window = search.get("tie_window", search.get("model_error", 0))
    why = (f"; width {best} predicted {gain:.1%} more, within FATM's tie window "
           f"({window:.0%}), so FATM kept the plan that sends fewer tuples between PEs")
    if chosen_v and leader_v and chosen_v.get("crossing") is not None and leader_v.get("crossing") is not None:
        why += f" ({chosen_v['crossing']:,.0f} vs {leader_v['crossing']:,.0f} tuples/s)"
    return head + why

