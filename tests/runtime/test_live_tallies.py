"""Live metrics count every operator's output exactly (issue 38): the per-batch tallies
generated code keeps (``codegen.pe_spec.OpSpec.tallied``) give the same count per logical
operator under every fusion and at every width of a parallel region, and a region's
fission pulses are never counted as tuples."""

from __future__ import annotations

import dataclasses

import pytest

from tests.toolkit.harness import as_graph, plan, simulate
from tests.toolkit.test_fission_exchange import CASES, exchange_app, records


def _logical(tallies: dict) -> dict[str, int]:
    """Output tuples per logical operator: a channel copy (``op__i``, ``op@i``) adds to its operator."""
    out: dict[str, int] = {}
    for op, ports in tallies.items():
        name = op.split("@", 1)[0]
        base, _, chan = name.rpartition("__")
        name = base if base and chan.isdigit() else name
        out[name] = out.get(name, 0) + sum(ports.values())
    return out


@pytest.mark.parametrize("case", CASES)
def test_every_operator_s_output_count_is_the_same_under_every_fusion_and_width(case, tmp_path_factory):
    app = exchange_app(records(300, 7), case)
    base_t: dict = {}
    base = simulate(app, "none", tmp_path_factory.mktemp("w1"), widths={"prep": 1, "desk": 1}, chunks=[13],
                    tallies=base_t)
    want = _logical(base_t)
    assert want and all(n > 0 for n in want.values()), want
    assert len(base["sink"]) in {n for op, n in want.items() if op != "src"}, (len(base["sink"]), want)
    graph = as_graph(app)
    for w1, w2 in ((2, 2), (3, 2), (1, 4)):
        widths = {"prep": w1, "desk": w2}
        for fusion in ("none", "all", "mixed"):
            # uncollapsed, every operator counts: the totals are the width-1 ones exactly
            got_t: dict = {}
            given = dataclasses.replace(plan(graph, fusion, widths), collapse=False)
            simulate(app, fusion, tmp_path_factory.mktemp(f"w{w1}{w2}"), seed=w1 * 7 + w2, widths=widths,
                     chunks=[5, 17, 2], tallies=got_t, given=given)
            assert _logical(got_t) == want, (case, w1, w2, fusion)
            # collapsed: a static run counts at its last operator only, and that count is exact
            got_t = {}
            simulate(app, fusion, tmp_path_factory.mktemp(f"c{w1}{w2}"), seed=w1 * 7 + w2, widths=widths,
                     chunks=[5, 17, 2], tallies=got_t)
            for op, ports in got_t.items():
                if op in base_t:  # the same physical operator (outside the regions) counts the same
                    assert ports == base_t[op], (case, w1, w2, fusion, op)
