"""A window's channel copies' state merged and dealt by key to another width, and moved
between a copy's layout and width 1's (``deploy.checkpoint_rescale`` drives it, from each
kind's ``rescale`` fact: ``kinds.aggregate.rescale``).

A copy's state is the objects it registered (``rt.state``), in the fact's ``slots`` order:

* ``groups``: the copies' groups (keys disjoint: each key had one owner) merged in the
  order of their opening tuples' numbers (the width-1 opening order: the order a close
  emits them in, and the order the copy's pulse reads the oldest open group in), then
  dealt to the channel owning each key at width k'. A tumbling window's group holds its
  first tuple (``first``: where) or is its rows, the first one opening it; a sliding
  event-time window's (``sliding: "time"``) group is a deque of its rows, opened by the
  tuple ``opened`` numbers (its first rows may have left with closed windows); a sliding
  count window's (``sliding: "count"``) ``[deque of its last rows, tuples seen]``, its
  order read by nothing (it emits on arrival only), taken from its last tuple's number;
* ``opened``: a sliding event-time window copy's key -> its group's opening number (its
  rows' numbers are that number in window order), dealt with its group;
* ``clock``: a window's clock (a tumbling window's ``[window, ...]``, a sliding one's
  ``[k, ks, ne]``: the oldest open window), alike in every copy (watermark frames move
  them together: each copy's is the first window of the latest event time the split
  saw), the most advanced one given to every new copy;
* ``sum``: counters (late tuples), summed into channel 0.

Width 1 has no numbers: :func:`numbered` puts its state in a copy's layout (each group
numbered by its place in the dict, width 1's opening order; a sliding event-time window's
``opened`` made so), :func:`unnumbered` takes a copy's back (numbers dropped, groups in
opening order).
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

from spadeopt.errors import UsageError


class RescaleRefused(UsageError):
    """A checkpoint whose state cannot move to this plan's widths; says why and what to do."""


def _like(old: Any, rows: list) -> Any:
    """``rows`` in ``old``'s container: a deque keeps its bound (a sliding count window's)."""
    return deque(rows, old.maxlen) if type(old) is deque else type(old)(rows)


def numbered(spec: dict[str, Any], state: list, where: str) -> list:
    """A window's state at width 1 in its channel copies' layout: each group numbered by
    its place in opening order (the dict's order), the number last in its tuples; a
    first or last tuple only a copy keeps (for its number) made of Nones and the number
    (a last tuple's number is read only once a tuple has replaced it). A sliding window's
    rows all take their group's number (a copy reads none of them: its rows are numbered
    by ``opened``, or by the tuple that triggers them)."""
    if spec["slots"][:2] != ["groups", "clock"]:
        raise RescaleRefused(f"{where}: its state is not a window's groups and clock")
    groups, sliding = {}, spec.get("sliding")
    for n, (key, g) in enumerate(state[0].items()):
        if sliding == "time":
            groups[key] = _like(g, [row + (n,) for row in g])
        elif sliding == "count":
            groups[key] = [_like(g[0], [row + (n,) for row in g[0]]), *g[1:]]
        elif spec.get("first") is None:  # a group is its rows
            groups[key] = [row + (n,) for row in g]
        else:
            made = (None,) * (spec["arity"] - 1) + (n,)
            t0 = g[1] + (n,) if spec["single_first"] else made
            at = 1 + spec["single_first"]
            tn = [g[at] + (n,) if spec["single_last"] else made] if spec["copy_last"] else []
            groups[key] = [g[0], t0, *tn, *g[at + spec["single_last"]:]]
    out = [groups, *state[1:]]
    if sliding == "time":
        out.insert(spec["slots"].index("opened"), {key: n for n, key in enumerate(state[0])})
    return out


def unnumbered(spec: dict[str, Any], state: list) -> list:
    """A channel copy's window state in the width-1 layout: the numbers dropped (and
    ``opened``), and the first or last tuple a copy keeps only for its number."""
    groups, sliding = {}, spec.get("sliding")
    for key, g in state[0].items():
        if sliding == "time":
            groups[key] = _like(g, [row[:-1] for row in g])
        elif sliding == "count":
            groups[key] = [_like(g[0], [row[:-1] for row in g[0]]), *g[1:]]
        elif spec.get("first") is None:
            groups[key] = [row[:-1] for row in g]
        else:
            t0 = [g[1][:-1]] if spec["single_first"] else []
            tn = [g[2][:-1]] if spec["single_last"] else []
            groups[key] = [g[0], *t0, *tn, *g[2 + spec["copy_last"]:]]
    out = [groups, *state[1:]]
    if sliding == "time":
        del out[spec["slots"].index("opened")]
    return out


def split_state(spec: dict[str, Any], states: list[list], width: int, route, where: str) -> list[list]:
    """The state of ``width`` channel copies from the copies' ``states`` (each a list of
    the objects the copy registered, in order) as ``spec`` (a kind's ``rescale`` fact) says.

    >>> spec = {"slots": ["groups", "clock", "sum"], "key": ["k"], "first": 1}
    >>> a = [{"x": [2, ("x", 9, 5)]}, [4, None, None], [1]]
    >>> b = [{"y": [1, ("y", 3, 2)], "z": [1, ("z", 8, 7)]}, [4, None, None], [2]]
    >>> split_state(spec, [a, b], 1, lambda v: 0, "w")
    [[{'y': [1, ('y', 3, 2)], 'x': [2, ('x', 9, 5)], 'z': [1, ('z', 8, 7)]}, [4, None, None], [3]]]
    """
    slots = spec["slots"]
    if any(type(s) is not list or len(s) != len(slots) for s in states):
        raise RescaleRefused(f"{where}: its state in the checkpoint is not the {len(slots)} object(s) its kind "
                             f"registers; rebuild and resume at the old width")
    opened = None
    if "opened" in slots:
        opened = {}
        for s in states:
            if type(s[slots.index("opened")]) is not dict:
                raise RescaleRefused(f"{where}: its groups' opening numbers are not a dict in the checkpoint")
            opened.update(s[slots.index("opened")])
    out: list[list] = [[None] * len(slots) for _ in range(width)]
    for i, slot in enumerate(slots):
        vals = [s[i] for s in states]
        if slot == "groups":
            for c, d in enumerate(_split_groups(vals, spec, width, route, where, opened)):
                out[c][i] = d
                if opened is not None:
                    out[c][slots.index("opened")] = {k: opened[k] for k in d}
        elif slot == "clock":
            best = max(vals, key=lambda v: (v[0] is not None, v[0] if v[0] is not None else 0))
            for c in range(width):
                out[c][i] = copy.deepcopy(best)
        elif slot == "sum":
            for c in range(width):
                out[c][i] = [sum(col) if c == 0 else 0 * col[0] for col in zip(*vals, strict=True)]
        elif slot != "opened":  # dealt with the groups
            raise RescaleRefused(f"{where}: state slot '{slot}' is not known to this version")
    return out


def _split_groups(dicts: list[dict], spec: dict[str, Any], width: int, route, where: str,
                  opened: dict | None) -> list[dict]:
    """The copies' groups merged in their opening numbers' order, dealt by key."""
    first, by = spec.get("first"), spec["key"]
    merged: list[tuple[Any, Any]] = []
    for d in dicts:
        merged.extend(d.items())
    if len({k for k, _ in merged}) != len(merged):
        raise RescaleRefused(f"{where}: a key's group is in two channel copies (not split by the region key)")
    if opened is not None and set(opened) != {k for k, _ in merged}:
        raise RescaleRefused(f"{where}: its groups and their opening numbers name other keys in the checkpoint")

    def number(item: tuple[Any, Any]) -> Any:
        k, g = item
        if opened is not None:
            return opened[k]
        if spec.get("sliding") == "count":
            return g[0][-1][-1]
        return (g[first] if first is not None else g[0])[-1]

    merged.sort(key=number)
    out: list[dict] = [{} for _ in range(width)]
    for k, g in merged:
        values = {by[0]: k} if len(by) == 1 else dict(zip(by, k, strict=True))
        try:
            c = route(values)
        except KeyError as exc:
            raise RescaleRefused(f"{where}: its group key {by} lacks the region key attribute {exc}") from None
        out[c][k] = g
    return out
