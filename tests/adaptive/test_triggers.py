"""The live rules of an adaptive run (``adaptive.watch.Triggers``, ``adaptive.lag``) read
off live-state dicts shaped as ``spadeopt.live`` documents them, one reading a second:
which rule trips, when, and what the trigger records (issue 39's triggers)."""

from __future__ import annotations

from spadeopt.adaptive.switch import Switch
from spadeopt.adaptive.watch import Triggers, reading
from spadeopt.deploy.options import RunOptions


def state(lag: int, cpu: dict[str, float], blocked: float = 0.0, rate: float = 900.0) -> dict:
    """Two live source copies in pe0 and pe1, each holding half of ``lag``."""
    pes = [{"pe": pe, "cpu": c, "backpressure": blocked if pe == "pe0" else 0.0} for pe, c in cpu.items()]
    return {"sources": [{"source": "src__0", "pe": "pe0", "lag": lag // 2, "rate": rate / 2, "live": True},
                        {"source": "src__1", "pe": "pe1", "lag": lag - lag // 2, "rate": rate / 2, "live": True},
                        {"source": "file", "pe": "pe2", "lag": None, "live": False}],
            "pes": pes}


def feed(trigger: Triggers, readings) -> list[str | None]:
    """The rule (or None) after each reading, a second apart."""
    out = []
    for t, st in enumerate(readings):
        got = reading(st, trigger._cores)
        said = trigger._rules(float(t), got) if got is not None else None
        out.append(said and said["rule"])
    return out


def test_a_reading_sums_the_live_sources_and_names_the_busiest_pe_and_the_sources_backpressure():
    r = reading(state(1001, {"pe0": 0.3, "pe1": 0.8, "pe2": 0.1}, blocked=0.25), cores=4)
    assert r == {"lag": 1001, "rate": 900.0, "busiest_pe": "pe1", "busiest_cpu": 0.8, "cpu_total": 1.2, "cores": 4,
                 "backpressure": 0.25}
    assert reading({"sources": [{"source": "f", "pe": "pe0", "lag": None, "live": False}], "pes": []}, 2) is None


def test_a_pe_above_max_frac_with_a_core_to_spare_trips_before_the_lag_grows():
    t = Triggers(RunOptions(), up=True, down=True, cores=2)
    rules = feed(t, [state(40, {"pe0": 0.62}) for _ in range(6)])
    assert rules == [None, None, None, None, "max_frac", "max_frac"], rules
    said = t._rules(6.0, reading(state(40, {"pe0": 0.62}), 2))
    assert said["busiest_pe"] == "pe0" and said["busiest_cpu"] == 0.62 and said["max_frac"] == 0.5
    text = Switch(trigger=said).grew()
    assert text.startswith("pe0 used at least 0.62 core(s) (MaxFrac 0.5) for 4.0 s") and "1.4 of 2 core(s) idle" in text


def test_no_max_frac_trip_when_the_plan_fills_the_cores_or_drains_a_backlog():
    full = Triggers(RunOptions(), cores=2)
    assert feed(full, [state(40, {"pe0": 0.7, "pe1": 0.7}) for _ in range(8)]) == [None] * 8
    draining = Triggers(RunOptions(), cores=2)
    assert feed(draining, [state(5000 - 700 * t, {"pe0": 0.9}) for t in range(7)]) == [None] * 7


def test_a_growing_lag_trips_the_lag_rule_and_records_the_backpressure_it_grew_under():
    t = Triggers(RunOptions(), cores=2)
    rules = feed(t, [state(300 * i, {"pe0": 1.0, "pe1": 0.95}, blocked=0.4) for i in range(6)])
    assert rules[-1] == "lag" and "max_frac" not in rules, rules
    said = t._rules(6.0, reading(state(1800, {"pe0": 1.0, "pe1": 0.95}, blocked=0.4), 2))
    assert said["grew_by"] >= 500 and said["backpressure"] == 0.4
    assert "sources backpressured 40% of the time" in Switch(trigger=said).grew()


def test_idle_pes_trip_the_down_rule_only_when_watched():
    readings = [state(20, {"pe0": 0.1, "pe1": 0.1}) for _ in range(8)]
    assert feed(Triggers(RunOptions(), up=True, down=False, cores=2), readings) == [None] * 8
    assert "idle" in feed(Triggers(RunOptions(), up=False, down=True, cores=2), readings)


def test_a_review_comes_every_period_and_a_kept_one_waits_a_period_again():
    t = Triggers(RunOptions(), up=False, down=False, cores=2, full=False, review=3.0)
    busy = state(10, {"pe0": 0.3})
    assert feed(t, [busy] * 5) == [None, None, None, "review", "review"]
    t.said = t._rules(4.0, reading(busy, 2))
    assert t.said["rule"] == "review" and t.said["every_s"] == 3.0
    assert Switch(trigger=t.said).grew().startswith("the plan's review, every 3 s, on fresh costs")
    t.quiet()  # a decision kept the plan: the next review a period after it
    assert t.said is None and t._since is not None and t._review == 3.0
