"""Field checks for what comes off a wire or out of a file: each a function of the value,
None when it fits, else what the value is instead (for an error naming the field).

``spadeopt.control`` builds every control record's ``FIELDS`` from these; a check
never executes or trusts anything it is given.

>>> shape(port=STR, n=INT)({"port": "f.out", "n": "3"})
"'n': a str ('3'), expected int"
>>> list_of(NUM)([1, 2.5]) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], "str | None"]
"""A field's check: None when the value fits, else what it is instead."""


def describe(v: Any) -> str:
    return f"a {type(v).__name__} ({v!r:.40})"


def _of(*types: type) -> Check:
    names = "/".join(t.__name__ for t in types)

    def check(v: Any) -> str | None:
        return None if type(v) in types else f"{describe(v)}, expected {names}"
    return check


STR, INT, BOOL, BYTES, NUM = _of(str), _of(int), _of(bool), _of(bytes), _of(int, float)


def optional(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


def list_of(item: Check) -> Check:
    def check(v: Any) -> str | None:
        if type(v) not in (list, tuple):
            return f"{describe(v)}, expected a list"
        for i, x in enumerate(v):
            if (why := item(x)) is not None:
                return f"item {i}: {why}"
        return None
    return check


def map_of(key: Check, value: Check) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not dict:
            return f"{describe(v)}, expected a map"
        for k, x in v.items():
            if (why := key(k)) is not None:
                return f"key {k!r:.40}: {why}"
            if (why := value(x)) is not None:
                return f"at {k!r:.40}: {why}"
        return None
    return check


def shape(**spec: Check) -> Check:
    """A map with exactly these keys, each checked."""
    def check(v: Any) -> str | None:
        if type(v) is not dict:
            return f"{describe(v)}, expected a map"
        if set(v) != set(spec):
            return f"a map of keys {sorted(map(str, v))}, expected {sorted(spec)}"
        for k, c in spec.items():
            if (why := c(v[k])) is not None:
                return f"{k!r}: {why}"
        return None
    return check


def matches(pattern: str, what: str) -> Check:
    rx = re.compile(pattern)

    def check(v: Any) -> str | None:
        return None if type(v) is str and rx.fullmatch(v) else f"{describe(v)}, expected {what}"
    return check


def number_in(lo: float, hi: float, lo_open: bool = False) -> Check:
    def check(v: Any) -> str | None:
        ok = type(v) in (int, float) and (lo < v if lo_open else lo <= v) and v <= hi
        return None if ok else f"{describe(v)}, expected a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    return check
