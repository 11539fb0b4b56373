"""The profiling package sits below the runtime: it imports the wire format, not sockets."""

from __future__ import annotations

import subprocess
import sys


def test_profiling_and_the_wire_format_import_neither_the_runtime_nor_zmq() -> None:
    code = (
        "import sys, spadeopt.wire, spadeopt.profiling\n"
        "bad = sorted(m for m in sys.modules if m == 'zmq' or m.startswith(('zmq.', 'spadeopt.runtime')))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
