"""``spadeopt.live`` is runtime side (the driver in spadeopt.deploy imports it): it imports
nothing of the compiler, and its page ships inside the package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

LIVE = Path(__file__).resolve().parents[2] / "spadeopt" / "live"
COMPILER = ("spadeopt.frontend", "spadeopt.optimize", "spadeopt.codegen", "spadeopt.plan", "spadeopt.model",
            "spadeopt.kinds", "spadeopt.api")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_live_imports_no_compiler_package():
    bad = {p.name: sorted(m for m in _imports(p) if m.startswith(COMPILER)) for p in LIVE.glob("*.py")}
    assert not any(bad.values()), bad
    code = ("import sys, spadeopt.live.server, spadeopt.live.top, spadeopt.live.prometheus\n"
            "print(sorted(m for m in sys.modules if m.startswith(('networkx', 'jinja2', 'spadeopt.plan'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_page_is_package_data():
    from importlib import resources

    page = resources.files("spadeopt.live").joinpath("page")
    assert {"index.html", "app.js", "style.css"} <= {p.name for p in page.iterdir()}
