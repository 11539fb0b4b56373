"""``spadeopt show PROFILE.json``: a profile as readable tables."""

from __future__ import annotations

from spadeopt.refine.profile import Profile


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_profile(p: Profile, top: int | None = None) -> str:
    """Operators by CPU fraction ``u`` (descending), then links by tuple rate (descending);
    ``top`` keeps only the first ``top`` of each (and the number of warnings)."""
    strategies = ", ".join(sorted({r.strategy for r in p.runs}))
    lines = [f"profile of app '{p.app}' (graph {p.graph_fingerprint}), {len(p.runs)} run(s) ({strategies}) "
             f"on {p.host or '?'} ({p.cores} cores)"]
    if p.params:
        lines.append("params: " + ", ".join(f"{k}={v}" for k, v in sorted(p.params.items())))
    total = sum(o.u for o in p.operators.values())
    lines += ["", f"operators by CPU fraction u (sum {total:.3f} cores)"]
    rows = []
    ops = sorted(p.operators.items(), key=lambda kv: (-kv[1].u, kv[0]))
    for name, o in ops[:top]:
        in_rate = sum(p.inputs[i].rate for i in o.inputs if i in p.inputs)
        out_rate = sum(p.outputs[x].rate for x in o.outputs if x in p.outputs)
        sel = ", ".join(f"{k} {v:.3g}" for k, v in sorted(o.selectivity.items()) if v is not None) or "-"
        per = "in" if o.inputs else "out"
        rows.append([name, f"{o.u:.4f}", f"{o.cpu_per_tuple_s * 1e6:.2f}/{per}", _rate(in_rate) if o.inputs else "-",
                     _rate(out_rate) if o.outputs else "-", _clip(sel), _clip(",".join(o.pes), 20)])
    lines += _table(["operator", "u", "CPU us/tuple", "in tuples/s", "out tuples/s", "selectivity", "PE"],
                    rows, {1, 2, 3, 4})
    if top is not None and len(ops) > top:
        lines.append(f"... and {len(ops) - top} more operator(s)")
    lines += ["", "links by tuple rate"]
    links = sorted(p.links, key=lambda lk: (-lk.rate, lk.src, lk.dst))
    rows = [[f"{lk.src} -> {lk.dst}", _rate(lk.rate), f"{lk.size:.1f}", _rate(lk.byte_rate)] for lk in links[:top]]
    lines += _table(["link", "tuples/s", "bytes/tuple", "bytes/s"], rows, {1, 2, 3})
    if top is not None and len(links) > top:
        lines.append(f"... and {len(links) - top} more link(s)")
    if p.warnings and top is not None:
        lines += ["", f"{len(p.warnings)} warning(s); `spadeopt show` without --top lists them"]
    elif p.warnings:
        lines += ["", f"warnings ({len(p.warnings)})"]
        lines += [f"  - {w}" for w in p.warnings]
    return "\n".join(lines)
