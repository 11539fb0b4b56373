"""explain states the width FATM chose with the rate it predicted for that width, as in
its own table of widths tried, and says why a width that predicted more was not taken."""

from __future__ import annotations

import re

from spadeopt.plan.explain import fission_text

SEARCH = {"search": "coordinate ascent, early stop", "max_width": 2, "vectors_tried": 3, "tie": 0.01,
          "model_error": 0.12, "rate_leader": {"a": 2, "b": 1},
          "regions": {"a": {"chosen": 1, "tried": [{"width": 1, "planned_rate": 247654.8},
                                                   {"width": 2, "planned_rate": 260176.6}]},
                      "b": {"chosen": 1, "tried": [{"width": 1, "planned_rate": 247654.8}]}},
          "vectors": [{"widths": {"a": 1, "b": 1}, "planned_rate": 247654.8, "crossing": 84892.4},
                      {"widths": {"a": 2, "b": 1}, "planned_rate": 260176.6, "crossing": 298054.7}]}


def test_chosen_width_is_stated_with_its_own_rate_and_the_reason_a_faster_one_lost():
    lines = fission_text({"enabled": True, "search": SEARCH})
    a = next(ln for ln in lines if ln.startswith("region 'a'"))
    chosen, rate = re.search(r"FATM chose width (\d+), predicted ([\d,]+)/s \(widths tried", a).groups()
    table = dict(re.findall(r"(\d+) -> ([\d,]+)/s", a.split("widths tried:", 1)[1]))
    assert table[chosen] == rate == "247,655"
    assert "width 2 predicted 5.1% more, within FATM's tie window (12%)" in a  # an older build's record
    assert "fewer tuples between PEs (84,892 vs 298,055 tuples/s)" in a
    b = next(ln for ln in lines if ln.startswith("region 'b'"))
    assert "FATM chose width 1, predicted 247,655/s" in b and "more" not in b


def test_the_faster_width_chosen_needs_no_excuse():
    search = {**SEARCH, "rate_leader": {"a": 2, "b": 1},
              "regions": {"a": {**SEARCH["regions"]["a"], "chosen": 2}}}
    (line,) = fission_text({"enabled": True, "search": search})
    assert "FATM chose width 2, predicted 260,177/s (widths tried: 1 -> 247,655/s, 2 -> 260,177/s" in line
    assert "tie window" not in line


def test_a_record_with_the_tie_window_names_it():
    search = {**SEARCH, "tie_window": 0.02,
              "regions": {"a": {"chosen": 1, "tried": [{"width": 1, "planned_rate": 247654.8},
                                                       {"width": 2, "planned_rate": 251369.6}]}}}
    (line,) = fission_text({"enabled": True, "search": search})
    assert "width 2 predicted 1.5% more, within FATM's tie window (2%)" in line
