"""A hot key changes FATM's plan (issue 39's skew check; issue 36: predictions that hold).

A keyed region's split hashes the key, so a key holding 60 % of the tuples puts at least
60 % of the region's work on one channel at any width. An instrumented build samples
each keyed operator's input key hashes (``profiling.keys``); refine keeps the hottest
keys' counts in the profile (``keys``); FATM costs every channel of the region as the
busiest one (``optimize.widths.skew``). The same profile with its key samples removed is
the uniform-key model FATM had before: it widens the region to every core, predicting a
rate the hot key's channel cannot reach.
"""

from __future__ import annotations

import json

import pytest

from spadeopt.optimize.widths import skew
from spadeopt.plan.regions import Region
from spadeopt.profiling.keys import KeySampler
from spadeopt.protocol import channel_shares, key_hash
from tests.cli.clitools import cli


def test_the_sampled_shares_route_as_the_split_does():
    import random

    k = KeySampler(0.05, (0,), ("str",), random.Random(1))
    rows = [(f"k{i % 40}" if i % 10 >= 6 else "hot",) for i in range(200_000)]
    for i in range(0, len(rows), 512):
        k.take(rows[i:i + 512])
    shares = channel_shares(k.counts, k.other, 3)
    exact = [0.0] * 3
    for (key,) in rows:  # where the split sends every row
        exact[key_hash((key,), ("str",)) % 3] += 1 / len(rows)
    assert max(exact) > 0.6 and all(abs(a - b) < 0.03 for a, b in zip(shares, exact, strict=True)), (shares, exact)
    assert abs(sum(shares) - 1.0) < 1e-9


def test_a_channel_copys_pulses_are_not_sampled_as_keys():
    """A channel copy's batches end with a fission pulse, a 1-tuple of its number; with
    the key first (a str) it was hashed as a key and raised (an adaptive run's phase 1
    with a region wider than 1)."""
    import random

    k = KeySampler(1.0, (0,), ("str",), random.Random(1), arity=3)
    for i in range(50):
        k.take([("a", 1.0, 2 * i), ("b", 2.0, 2 * i + 1), (2 * i + 2,)])
    assert sum(k.counts.values()) == 100 and k.other == 0


def test_a_region_without_samples_or_key_is_uniform():
    class G:
        @staticmethod
        def op(name):
            return type("Op", (), {"key": ("k",)})

    r = Region("r", ("win",), 4, key=("k",))
    assert skew(G, r, {}) == 1.0 and skew(G, Region("r", ("win",), 4), {"win": ({1: 9}, 0)}) == 1.0
    assert skew(G, r, {"win": ({1: 50}, 50)}) == pytest.approx(4 * (0.5 + 0.5 / 4))


def _width(build) -> tuple[int, float]:
    plan = json.loads((build / "plan.json").read_text())
    rate = json.loads((build / "explain.json").read_text())["rate"]["predicted"]
    return {r["name"]: r["width"] for r in plan["regions"]}["keyed"], rate


@pytest.mark.spark
def test_a_hot_key_narrows_fatms_region_and_its_prediction(tmp_path):
    params = ["-p", "tuples=100000", "-p", "hot=60"]
    assert cli("profile", "apps/keyed_window.py", *params, "-o", tmp_path / "run").returncode == 0
    got = cli("refine", tmp_path / "run", "-o", tmp_path / "skewed.json")
    assert got.returncode == 0, got.stderr
    doc = json.loads((tmp_path / "skewed.json").read_text())
    keys = doc["keys"]["win.in"]
    total = sum(keys["top"].values()) + keys["other"]
    assert total >= 200 and 0.5 < max(keys["top"].values()) / total < 0.7, keys  # key 0: 60 %
    doc["keys"] = {}  # the uniform-key model
    (tmp_path / "uniform.json").write_text(json.dumps(doc))
    for name in ("skewed", "uniform"):
        got = cli("optimize", "apps/keyed_window.py", *params, "--profile", tmp_path / f"{name}.json",
                  "--cores", "4", "-o", tmp_path / f"b-{name}")
        assert got.returncode == 0, got.stderr
    (w_skew, r_skew), (w_uni, r_uni) = _width(tmp_path / "b-skewed"), _width(tmp_path / "b-uniform")
    assert w_uni == 4 and w_skew < w_uni, (w_skew, w_uni)
    assert r_skew < 0.6 * r_uni, (r_skew, r_uni)  # the hot key's channel bounds the rate near 1 / 0.6
