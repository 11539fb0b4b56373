"""A new user's mistakes are refused before Spark starts (exit 2, nothing written), each
naming the operator, port or attribute, the user's file and line, and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.clitools import cli

HEAD = '''from spadeopt import App, app, time_window


def clicks(n: int):
    for i in range(n):
        yield (f"user{{i % 5}}", {ts}, i % 7)


class Sessionizer:
    def __init__(self, gap: float) -> None:
        self.gap = gap

    def process(self, port, tup, submit):
        submit({port!r}, (tup[0], tup[1]))


@app
def mistake(n: int = 100) -> App:
    a = App("mistake")
    c = a.source("clicks", "user:str, ts:float, dwell:int", generator=clicks, args={{"n": n}})
'''

CASES = {
    "source_type": (dict(ts="str(float(i))", port="sessions"),
                    'a.sink("out", c)\n',
                    ["source 'clicks'", "attribute 'ts' is declared float", "'0.0' (str)", "mistake.py:20"]),
    "submit_port": (dict(ts="float(i)", port="output"),
                    's = a.custom("sessionize", Sessionizer, inputs={"in": c}, outputs={"sessions": "user:str, ts:float"},'
                    ' args={"gap": 1.0})\na.sink("out", s["sessions"])\n',
                    ["custom 'sessionize'", "submits to port 'output'", "declared output ports are: sessions",
                     "mistake.py:14", "mistake.py:21"]),
    "constructor_args": (dict(ts="float(i)", port="sessions"),
                         's = a.custom("sessionize", Sessionizer, inputs={"in": c}, outputs={"sessions": "user:str, '
                         'ts:float"}, args={"gpa": 1.0})\na.sink("out", s["sessions"])\n',
                         ["custom 'sessionize'", "args={'gpa': 1.0} do not match Sessionizer", "required: gap",
                          "mistake.py:21"]),
    "typo": (dict(ts="float(i)", port="sessions"),
             'e = a.functor("engaged", c, filter="dwel >= 2")\na.sink("out", "engagd")\n',
             ["unknown name 'dwel'; did you mean 'dwell'?", "mistake.py:21", "unknown operator 'engagd'",
              "did you mean 'engaged'?", "mistake.py:22"]),
    "negative_lateness": (dict(ts="float(i)", port="sessions"),
                          'w = a.aggregate("per_user", c, window=time_window("ts", 10.0, allowed_lateness=-5), '
                          'by=["user"], output={"n": "count()"})\na.sink("out", w)\n',
                          ["aggregate 'per_user': allowed_lateness must be a finite number >= 0", "got -5",
                           "mistake.py:21"]),
    "late_port_of_a_count_window": (dict(ts="float(i)", port="sessions"),
                                    'from spadeopt import count_window\nw, late = a.aggregate("per_user", c, '
                                    'window=count_window(3), by=["user"], output={"n": "count()"}, late=True)\n'
                                    'a.sink("out", w)\n',
                                    ["aggregate 'per_user': late=True needs an event-time window (time_window(...))",
                                     "mistake.py:22"]),
    "method_call": (dict(ts="float(i)", port="sessions"),
                    'e = a.functor("bots", c, filter="\'bot\' in user.lower()")\na.sink("out", e)\n',
                    ["attribute access 'user.lower'", "functions=[f]", "mistake.py:21"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_mistake_is_refused_before_spark_naming_it_and_the_fix(case: str, tmp_path: Path) -> None:
    fmt, body, expect = CASES[case]
    app = HEAD.format(**fmt) + "".join(f"    {ln}\n" for ln in body.splitlines()) + "    return a\n"
    (tmp_path / "mistake.py").write_text(app)
    proc = cli("run", "mistake.py", "--fusion", "all", "--out", "out", "--build-dir", "build",
               env={"SPARK_HOME": str(tmp_path / "no-spark")}, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    for text in expect:
        assert text in proc.stderr, f"{text!r} not in: {proc.stderr}"
    assert "Traceback" not in proc.stderr and "starting Spark" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mistake.py"], "nothing written"
