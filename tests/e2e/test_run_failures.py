"""What a user sees when a run fails in a built-in operator or in their own code."""

from __future__ import annotations

import pytest

from spadeopt import api
from spadeopt.deploy.options import RunOptions
from spadeopt.errors import RunError

pytestmark = pytest.mark.spark

APP = '''
from spadeopt import App, app


@app
def badfile(path: str = "") -> App:
    a = App("badfile")
    s = a.source("src", "x:int, y:str", file=path)
    a.sink("out", s)
    return a
'''


def test_a_bad_value_in_a_file_source_is_one_clear_line_and_out_stays_as_it_was(tmp_path):
    (tmp_path / "in.csv").write_text("x,y\n1,a\n2,b\nnotanint,c\n")
    (tmp_path / "badfile.py").write_text(APP)
    out = tmp_path / "new" / "out"
    with pytest.raises(RunError) as exc:
        api.run(str(tmp_path / "badfile.py"), "all", {"path": str(tmp_path / "in.csv")},
                build_dir=tmp_path / "b", options=RunOptions(out=out))
    msg = str(exc.value)
    assert "operator 'src' in PE pe0" in msg and "in.csv:4: attribute 'x': cannot read 'notanint' as int" in msg
    assert "Traceback" not in msg and "spadeopt/" not in msg.split("full traceback in")[0], msg
    assert f"full traceback in {tmp_path / 'b' / 'logs' / 'pe0.log'}" in msg
    assert "Traceback" in (tmp_path / "b" / "logs" / "pe0.log").read_text()
    assert not (tmp_path / "new").exists(), "a failed run left the --out folder it made"


def test_a_crash_in_user_code_shows_the_users_frames_only(tmp_path):
    with pytest.raises(RunError) as exc:
        api.run("tests/apps/crash.py", "all", {"at": "300", "tuples": "1000"}, build_dir=tmp_path / "b")
    msg = str(exc.value)
    tb = msg.split("Traceback (most recent call last):\n", 1)[1]
    assert "apps/crash.py\", line" in tb and "in explode" in tb and "ValueError: bad tuple 300" in tb
    assert "/spadeopt/runtime/" not in tb and "pe0.py" not in tb, tb
