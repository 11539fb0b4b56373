"""docs/api.md against the code: every builder method and helper is documented with
its real signature and every parameter, and what the page says about expressions is
what the checker does."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from spadeopt import connectors
from spadeopt.frontend.dsl import App, app, count_window, time_window
from spadeopt.model.expr import SAFE_BUILTINS, compile_expr
from spadeopt.model.schema import Schema
from spadeopt.model.types import ExprProblem
from spadeopt.toolkit.sources import splittable

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "api.md").read_text()


def rendered(prefix: str, fn) -> str:
    """``a.source(name, schema, *, generator=None, ...)``: the signature as the page spells it."""
    parts, star = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append("**" + p.name)
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                parts.append("*")
                star = True
            parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"{prefix}{fn.__name__}({', '.join(parts)})"


def documented() -> list[tuple[str, object]]:
    out = [("a.", m) for n, m in inspect.getmembers(App, inspect.isfunction) if not n.startswith("_")]
    out += [("", f) for f in (app, count_window, time_window, splittable)]
    out += [("", getattr(connectors, n)) for n in connectors.__all__ if n != "ConnectorSpec"]
    return out


def section(heading: str) -> str:
    return DOC.split(f"### `{heading}`\n", 1)[1].split("\n#", 1)[0]


@pytest.mark.parametrize("prefix,fn", documented(), ids=lambda x: getattr(x, "__name__", x))
def test_every_method_is_documented_with_its_signature_and_parameters(prefix, fn):
    heading = rendered(prefix, fn)
    assert f"### `{heading}`\n" in DOC, f"docs/api.md lacks (or has an old signature of): {heading}"
    body = section(heading)
    for name in inspect.signature(fn).parameters:
        if name != "self":
            assert f"`{name}" in body, f"{heading}: parameter '{name}' is not described"


def test_no_heading_for_a_method_that_does_not_exist():
    real = {rendered(p, f) for p, f in documented()} | {"App(name)"}
    for heading in re.findall(r"^### `(.*)`$", DOC, flags=re.M):
        assert heading in real, f"docs/api.md documents {heading}, which the code does not have"
    assert list(inspect.signature(App.__init__).parameters) == ["self", "name"]


def test_expression_names_are_the_checker_s():
    names = DOC.split("**Names.**", 1)[1].split("**Operators.**", 1)[0]
    for builtin in SAFE_BUILTINS:
        assert f"`{builtin}`" in names, f"built-in '{builtin}' is allowed but not documented"
    assert len(re.findall(r"`(\w+)`,?", names.split("built-in functions", 1)[1])) == len(SAFE_BUILTINS)


SCHEMA = Schema.parse("user:str, ts:float, page:str, agent:str, dwell:float, name:str, price:float, volume:int, n:int")


def refused_rows() -> list[str]:
    table = DOC.split("**Refused, and what to do instead.**", 1)[1].split("\n\n", 2)[1]
    return [m for m in re.findall(r"^\| `(.*?)` \|", table, flags=re.M) if m != "expression"]


@pytest.mark.parametrize("expr", refused_rows())
def test_every_expression_the_page_calls_refused_is_refused(expr):
    with pytest.raises(ExprProblem):
        compile_expr(expr, SCHEMA)


def test_the_refused_table_is_not_empty_and_the_operators_it_lists_compile():
    assert len(refused_rows()) >= 8
    for ok in ("price * volume + 1 - 2 / 3 // 1 % 2 ** 2", "n & 3 | 4 ^ 1 << 2 >> 1", "~n",
               "0 < price <= 10", "'bot' in agent and not ('x' not in user) or dwell > 2",
               "price if dwell > 1 else 0.0", "user[0] + page[1:3]", "(user, page)",
               "round(price, ndigits=2)", "math.sqrt(price)", "abs(min(n, 3))"):
        compile_expr(ok, SCHEMA)


def test_attribute_access_error_says_to_use_functions():
    with pytest.raises(ExprProblem) as exc:
        compile_expr("'bot' not in agent.lower()", SCHEMA)
    assert "functions=" in str(exc.value) and "agent.lower" in str(exc.value)


def test_unknown_name_says_what_was_meant():
    with pytest.raises(ExprProblem) as exc:
        compile_expr("dwel >= 2", SCHEMA)
    assert "did you mean 'dwell'" in str(exc.value)
