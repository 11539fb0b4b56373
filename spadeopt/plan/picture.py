"""A picture of a build's physical plan: nodes, PEs, their operators, and the links between.

The view a user of the Streams console or Flink's web UI expects: each node is a cluster,
each PE a box listing its operators (channel copies of a parallel region show as
``op@i``), each PE -> PE connection an arrow labelled with its planned tuple rate (from
``explain.json`` for optimized builds) or, without a plan rate, with the number of streams
it carries. ``to_dot`` writes Graphviz text (for users who have ``dot``); ``to_png`` draws
the same picture with matplotlib, so no system package is needed.

>>> pic = Picture("demo", "auto", [[PEBox("pe0", 0, ("src", "f"), 0.4)], [PEBox("pe1", 1, ("sink",), 0.1)]],
...               [("pe0", "pe1", "1,000/s")], {})
>>> print(to_dot(pic).splitlines()[5].strip())
label="node 0";
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LINES = 8  # operators listed per PE box before "+N more"
MAX_LABELS = 40  # only the busiest links carry a rate label (all are drawn)
DOT_MARK = "// spadeopt plan picture"
PNG_MARK = "spadeopt plan picture"


@dataclass(frozen=True)
class PEBox:
    pe: str
    node: int
    operators: tuple[str, ...]
    load: float | None  # planned CPU fraction (cores), when the build was optimized


@dataclass(frozen=True)
class Picture:
    app: str
    strategy: str
    nodes: list[list[PEBox]]  # per node, PEs in plan order
    links: list[tuple[str, str, str]]  # src PE, dst PE, label
    regions: dict[str, Any]  # region name -> width (from plan.json, when it has regions)
    candidates: tuple[str, ...] = ()  # one line per discovered candidate region and per boundary


def _rate(r: float) -> str:
    return f"{r / 1e6:.2f} M/s" if r >= 1e6 else f"{r / 1e3:.1f} k/s" if r >= 1e3 else f"{r:,.0f}/s"


def load_picture(build_dir: Path) -> Picture:
    """Read a build's deploy.json (and plan.json / explain.json when present), each
    checked field by field (``plan.artefacts``) before any name reaches the picture."""
    from spadeopt.plan.artefacts import load_deploy, read_explain
    from spadeopt.plan.plan import Plan

    build_dir = Path(build_dir)
    deploy = load_deploy(build_dir)
    explain: dict[str, Any] = {}
    if (build_dir / "explain.json").is_file():
        explain = read_explain(build_dir / "explain.json")
    regions: dict[str, Any] = {}
    if (build_dir / "plan.json").is_file():
        regions = {r.name: r.width for r in Plan.load(build_dir / "plan.json").regions}
    loads = {p["pe"]: p.get("oper_load", 0.0) + p.get("comm_load", 0.0) for p in explain.get("pes", [])}
    nodes: list[list[PEBox]] = [[] for _ in range(deploy.nodes)]
    for p in deploy.pes:
        nodes[p.node].append(PEBox(p.pe, p.node, p.operators, loads.get(p.pe)))
    if explain.get("pe_links"):
        links = [(lk["src"], lk["dst"], _rate(lk["rate"])) for lk in explain["pe_links"]]
    else:
        count: dict[tuple[str, str], int] = {}
        for ln in deploy.links:
            key = (ln.src_pe, ln.dst_pe)
            count[key] = count.get(key, 0) + 1
        links = [(a, b, f"{n} stream{'s' if n != 1 else ''}") for (a, b), n in sorted(count.items())]
    return Picture(deploy.app, deploy.strategy, nodes, links, regions,
                   candidate_lines(explain.get("fission"), regions))


def candidate_lines(fission: dict[str, Any] | None, widths: dict[str, Any]) -> tuple[str, ...]:
    """The discovered candidate regions (explain.json's ``fission.discovered``) as short
    lines for the picture: name, width, operators, and each boundary's operator and rule."""
    found = (fission or {}).get("discovered") or {}
    out = []
    for c in found.get("candidates", []):
        ops = c["operators"]
        span = ops[0] if len(ops) == 1 else f"{ops[0]} .. {ops[-1]} ({len(ops)} ops)"
        out.append(f"{c['name']} x{widths.get(c['name'], '?')}: {span}")
        for b in c["boundaries"]:
            out.append(f"   | {b['outside']}: {b['reason']}")  # wrapped where drawn, never cut
    return tuple(out)


def _weight(label: str) -> float:
    """Sort key for labels: a rate label's tuples/s, or a stream count."""
    num = label.split()[0].replace(",", "").removesuffix("/s")
    try:
        value = float(num)
    except ValueError:
        return 0.0
    return value * (1e6 if " M/s" in label else 1e3 if " k/s" in label else 1.0)


def _ops_text(ops: tuple[str, ...]) -> list[str]:
    """Operator names as users know them: a channel copy ``op__2`` of a region is ``op@2``.
    A PE of more than ``MAX_LINES`` operators lists them grouped by name without its
    numbers (``g03_vwap``, ``g07_vwap`` -> ``g*_vwap (2)``), in order of first appearance."""
    names = [re.sub(r"__(\d+)$", r"@\1", op) for op in ops]
    if len(names) <= MAX_LINES:
        return names
    groups: dict[str, int] = {}
    for n in names:
        base = re.sub(r"\d+", "*", n)
        groups[base] = groups.get(base, 0) + 1
    first = {re.sub(r"\d+", "*", n): n for n in reversed(names)}
    shown = [f"{b} ({k})" if k > 1 else first[b] for b, k in groups.items()]
    if len(shown) > MAX_LINES:
        rest = sum(list(groups.values())[MAX_LINES - 1:])
        shown = shown[:MAX_LINES - 1] + [f"+{rest} more"]
    return [f"{len(names)} operators:", *shown]


def to_dot(pic: Picture) -> str:
    """Graphviz text: one cluster per node, one box per PE, labelled edges."""
    lines = [DOT_MARK, f'digraph "{pic.app}" {{', "  rankdir=LR;", '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for n, pes in enumerate(pic.nodes):
        lines += [f"  subgraph cluster_node{n} {{", f'    label="node {n}";']
        for pe in pes:
            load = f" ({pe.load:.2f} cores)" if pe.load is not None else ""
            body = "\\l".join(_ops_text(pe.operators)) + "\\l"
            lines.append(f'    "{pe.pe}" [label="{pe.pe}{load}\\n{body}"];')
        lines.append("  }")
    for a, b, label in pic.links:
        lines.append(f'  "{a}" -> "{b}" [label="{label}", fontsize=9];')
    if pic.regions:
        text = ", ".join(f"{k} x{v}" for k, v in sorted(pic.regions.items()))
        lines.append(f'  labelloc="t"; label="{pic.app} ({pic.strategy}); parallel regions: {text}";')
    else:
        lines.append(f'  labelloc="t"; label="{pic.app} ({pic.strategy})";')
    if pic.candidates:
        text = "\\l".join(_dot_text(x) for x in ("candidate regions (width) and why each boundary is there:",
                                                *pic.candidates)) + "\\l"
        lines.append(f'  "candidate regions" [shape=note, fontsize=9, label="{text}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


MAX_PX = 3000  # widest picture drawn (pixels): a plan of many nodes is drawn at a lower dpi


def _legend(pic: Picture, chars: int) -> list[str]:
    """The parallel regions grouped by width, and the candidate regions with the reason
    for each boundary, wrapped to ``chars`` characters (never cut)."""
    import textwrap

    lines: list[str] = []
    if pic.regions:
        by_width: dict[Any, list[str]] = {}
        for name, width in sorted(pic.regions.items()):
            by_width.setdefault(width, []).append(name)
        lines.append(f"parallel regions ({len(pic.regions)}), by width:")
        for width, names in sorted(by_width.items(), key=lambda kv: str(kv[0])):
            lines += textwrap.wrap(f"x{width} ({len(names)}): {', '.join(names)}", chars,
                                   initial_indent="  ", subsequent_indent="      ")
    if pic.candidates:
        lines.append("candidate regions (width) and why each boundary is there:")
        for c in pic.candidates:
            lines += textwrap.wrap(c, chars, initial_indent="  ", subsequent_indent="  " + " " * 7,
                                   break_on_hyphens=False) or [""]
    if len(lines) > MAX_LEGEND:
        lines = lines[:MAX_LEGEND - 1] + [f"... {len(lines) - MAX_LEGEND + 1} more lines: spadeopt explain "
                                          f"lists every region and boundary"]
    return lines


MAX_LEGEND = 40  # lines of legend under the plan


def _label_at(start: tuple[float, float], end: tuple[float, float], rad: float) -> tuple[float, float]:
    """The middle of an ``arc3,rad=...`` arrow from ``start`` to ``end`` (its quadratic
    Bezier at t = 0.5), so a rate label sits on its own arrow, not on a box edge."""
    (x1, y1), (x2, y2) = start, end
    return (x1 + x2) / 2 + rad * (y2 - y1) / 2, (y1 + y2) / 2 - rad * (x2 - x1) / 2


COL_W, BOX_W, LINE_H, GAP = 5.0, 3.2, 0.28, 0.5  # drawing units (about an inch at the PNG's scale)


@dataclass(frozen=True)
class Column:
    node: int
    x: float
    y: float
    w: float
    h: float
    label: str
    label_at: tuple[float, float]  # the centre of the label's top edge


@dataclass(frozen=True)
class Box:
    pe: str
    node: int
    x: float  # lower left corner (y grows upwards, as in matplotlib)
    y: float
    w: float
    h: float
    title: str  # the PE and, for an optimized build, its planned load
    title_at: tuple[float, float]  # top left of the title text
    lines: tuple[tuple[str, float, float, bool], ...]  # operator text, x, y (top), channel copy?
    live_at: tuple[float, float] | None  # top left of the rows kept free for live numbers


@dataclass(frozen=True)
class Arrow:
    src: str
    dst: str
    start: tuple[float, float]
    end: tuple[float, float]
    rad: float  # matplotlib's arc3 curvature
    ctrl: tuple[float, float]  # the quadratic Bezier's control point (arc3's, in drawing units)
    label: str
    label_at: tuple[float, float] | None  # on the curve's middle; None: drawn without a label


@dataclass(frozen=True)
class Layout:
    """Where everything of a plan picture goes, in drawing units with y upwards: one
    computation for the PNG (``to_png``) and the live web page (``spadeopt.live``, which
    draws ``to_json()`` as SVG)."""

    app: str
    strategy: str
    title: str
    width: float  # x from 0 to width
    bottom: float  # y from bottom (the legend's end, <= 0) to top
    top: float
    fig_size: tuple[float, float]  # inches, for matplotlib
    dpi: int
    columns: tuple[Column, ...]
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    legend: tuple[str, ...]
    legend_at: tuple[float, float]
    line_h: float = LINE_H

    def to_json(self) -> dict[str, Any]:
        import json
        from dataclasses import asdict

        doc = {"schema_version": 1, "kind": "spadeopt-plan-layout", **asdict(self)}
        return json.loads(json.dumps(doc))  # tuples as lists: what a reader of the JSON gets


def layout(pic: Picture, live_lines: int = 0) -> Layout:
    """Lay the picture out: nodes as columns, PEs stacked in each, arrows between PEs each
    with its label on its own curve, a legend of regions under the plan. ``live_lines``
    rows are kept free at the bottom of every PE box for live numbers (the web page's;
    the PNG keeps none)."""
    heights = {pe.pe: (len(_ops_text(pe.operators)) + 1 + live_lines) * LINE_H + 0.2
               for pes in pic.nodes for pe in pes}
    total_h = max((sum(heights[p.pe] + GAP for p in pes) for pes in pic.nodes), default=1.0) + 1.0
    fig_w = max(7.0, COL_W * len(pic.nodes) + 1.0)
    legend = _legend(pic, int(fig_w * 15))
    legend_h = (len(legend) + 1) * 0.2 if legend else 0.0
    columns, boxes = [], []
    for n, pes in enumerate(pic.nodes):
        x0 = 0.9 + n * COL_W
        columns.append(Column(n, x0 - 0.2, 0.2, BOX_W + 0.4, total_h - 0.6, f"node {n}",
                              (x0 + BOX_W / 2, total_h - 0.1)))
        y = total_h - 0.8
        for pe in pes:
            boxes.append(_box(pe, x0, y, heights[pe.pe], live_lines))
            y -= heights[pe.pe] + GAP
    title = f"{pic.app} ({pic.strategy}): {sum(len(p) for p in pic.nodes)} PEs on {len(pic.nodes)} node(s)"
    if pic.regions:
        title += f"; {len(pic.regions)} parallel region(s), listed below"
    return Layout(pic.app, pic.strategy, title, fig_w, -legend_h, total_h + 0.2,
                  (fig_w, max(4.0, (total_h + legend_h) * 0.9)), min(110, int(MAX_PX / (fig_w + 1.0))),
                  tuple(columns), tuple(boxes), _arrows(pic, {b.pe: b for b in boxes}), tuple(legend), (0.3, 0.05))


def _box(pe: PEBox, x0: float, y: float, h: float, live_lines: int) -> Box:
    """A PE's box whose top edge is at ``y``."""
    load = f"  {pe.load:.2f} cores" if pe.load is not None else ""
    ops = _ops_text(pe.operators)
    lines = tuple((op, x0 + 0.2, y - 0.08 - (i + 1) * LINE_H, "@" in op) for i, op in enumerate(ops))
    live = (x0 + 0.1, y - 0.08 - (len(ops) + 1) * LINE_H) if live_lines else None
    return Box(pe.pe, pe.node, x0, y - h, BOX_W, h, f"{pe.pe}{load}", (x0 + 0.1, y - 0.08), lines, live)


def _arrows(pic: Picture, boxes: dict[str, Box]) -> tuple[Arrow, ...]:
    """An arrow per link between drawn PEs: left to right from the right edge to the left
    edge, right to left the other way, within a node a loop out on the right (wider the
    further apart the PEs are); only the ``MAX_LABELS`` busiest carry their label."""
    labelled = set(sorted(range(len(pic.links)), key=lambda i: -_weight(pic.links[i][2]))[:MAX_LABELS])
    out = []
    for i, (a, b, label) in enumerate(pic.links):
        if a not in boxes or b not in boxes:
            continue
        ba, bb = boxes[a], boxes[b]
        xa, ya, xb, yb = ba.x, ba.y + ba.h / 2, bb.x, bb.y + bb.h / 2
        if xb > xa + 1e-9:
            start, end, rad = (xa + ba.w, ya), (xb, yb), 0.15
        elif xb < xa - 1e-9:
            start, end, rad = (xa, ya), (xb + bb.w, yb), 0.15
        else:
            start, end = (xa + ba.w, ya), (xb + bb.w, yb)
            rad = -0.35 if yb < ya else 0.35
        (x1, y1), (x2, y2) = start, end
        ctrl = ((x1 + x2) / 2 + rad * (y2 - y1), (y1 + y2) / 2 - rad * (x2 - x1))
        out.append(Arrow(a, b, start, end, rad, ctrl, label, _label_at(start, end, rad) if i in labelled else None))
    return tuple(out)


def plan_layout(build_dir: Path, live_lines: int = 3) -> dict[str, Any]:
    """The layout of a build's plan picture as JSON, with ``live_lines`` free rows in
    each PE box: what ``spadeopt.live``'s web page draws (``GET /api/plan``)."""
    return layout(load_picture(Path(build_dir)), live_lines).to_json()


def to_png(pic: Picture, path: Path) -> set[str]:
    """Draw the picture's ``layout`` with matplotlib. Returns the PEs drawn (every PE of
    the plan)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    lay = layout(pic)
    fig, ax = plt.subplots(figsize=lay.fig_size)
    for c in lay.columns:
        ax.add_patch(FancyBboxPatch((c.x, c.y), c.w, c.h, boxstyle="round,pad=0.05", fc="#f3f6fa", ec="#8aa0b8",
                                    lw=1.2))
        ax.text(*c.label_at, c.label, ha="center", va="top", fontsize=11, weight="bold")
    for b in lay.boxes:
        ax.add_patch(FancyBboxPatch((b.x, b.y), b.w, b.h, boxstyle="round,pad=0.03", fc="#ffffff", ec="#2f5d8a",
                                    lw=1.0))
        ax.text(*b.title_at, b.title, va="top", fontsize=9, weight="bold")
        for op, x, y, channel in b.lines:
            ax.text(x, y, op, va="top", fontsize=8, color="#a0522d" if channel else "#333333")
    for a in lay.arrows:
        ax.add_patch(FancyArrowPatch(a.start, a.end, arrowstyle="-|>", mutation_scale=9, lw=0.7,
                                     color="#2f5d8a", alpha=0.8, connectionstyle=f"arc3,rad={a.rad}"))
        if a.label_at is not None:
            ax.text(*a.label_at, a.label, fontsize=7, ha="center", va="center", color="#1d3c5a",
                    bbox={"fc": "white", "ec": "#2f5d8a", "lw": 0.4, "pad": 0.8, "alpha": 0.9,
                          "boxstyle": "round,pad=0.15"})
    if lay.legend:
        ax.text(*lay.legend_at, "\n".join(lay.legend), va="top", fontsize=7, family="monospace", color="#333333")
    ax.set_title(lay.title, fontsize=11)
    ax.set_xlim(0, lay.width)
    ax.set_ylim(lay.bottom, lay.top)
    ax.axis("off")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=lay.dpi, bbox_inches="tight", metadata={"Software": PNG_MARK})
    plt.close(fig)
    tmp.replace(path)
    return {b.pe for b in lay.boxes}
