"""Resume a checkpoint under a plan whose parallel regions have other widths (issue 39).

A region of width k runs each of its operators as k channel copies (``op__c``, shown
``op@c``); the split routes a tuple to channel ``protocol.key_channel(key, types, k)``,
so a key's state lives in the copy of the channel that owns it. Under another width k'
the same key belongs to another channel. An aligned checkpoint has nothing in flight
between PEs (decision 037), so its state can be moved before any PE starts: for every
operator of a rescaled region the copies' state is merged and split again by key, as
the build's ``rescale.json`` says (``codegen.rescale_facts``: each kind's ``rescale``
fact), and the split's and merge's state is kept or resized:

* a keyed window's state (``deploy.rescale_windows``: tumbling and sliding, count and
  event-time, with or without an allowed lateness): its ``groups`` merged in the order of
  their opening tuples' numbers (the width-1 opening order; a sliding event-time window's
  from its ``opened`` numbers, dealt with the groups) and dealt to the channel owning each
  key at width k'; its ``clock`` the most advanced copy's (alike in every copy: watermark
  frames move them together); its late counter (``sum``) summed into channel 0;
* the split's next number and clock are the entering stream's (kept); a sequence-number
  merge is resized, the tuples it held waiting in one more, ended, channel
  (``runtime.merges.SeqMerge.resized``).

Width 1 has no split, merge or numbers. Narrowing to 1 drops them (the merge must hold
nothing: width 1 would have passed its tuples on) and the numbers in the window's groups
(the first tuple a copy keeps only for its number, a sliding window's ``opened``).
Widening from 1 numbers the window's groups 0, 1, ... in the dict's order (width 1's
opening order; a sliding window's rows and ``opened`` take their group's number) and
makes the split (next number: the group count, clock: the window's) and an empty merge;
one stateful operator per region then.

A region led by a splittable source widens from 1 (an adaptive run's switch: phase 1
runs every region at width 1): the records width 1 read are a prefix ``[0, n)``, so copy
``c`` of ``k'`` starts after the records of its splits ``c, c + k', ...`` below ``n``
(:func:`records_below`; it passes over them unread at the resume) and the numbers it
stamps go on from there. A static merge (``block_merge``: blocks back in turn) starts its
round at the block the ``n``-th tuple is in, as it does at any width from the tuples that
entered (the split's count); it must hold nothing. A region led by a partitioned broker
source moves to any width: copy ``c`` takes the entry IDs of its own stream keys ``c, c +
k', ...`` from the old copies' (each read its own keys, so together they are one reader's;
the arrival merge holds nothing). Two regions joined
by a key exchange widen from 1 together: the downstream window's groups are numbered and
dealt as above (every number the exchange makes from the copies' positions is larger),
the exchange's splits and merges start empty. A counting sink's copies' counts add up
(summed into channel 0).

Refused, naming the region or operator and saying what to do (``RescaleRefused``): a
region led by a splittable source at a width above 1 (its copies' positions are per split
sequence ``c, c + k, ...``, not a prefix) or by a partitioned broker source with ``count=``, a
region fed by a key exchange at a width above 1 or widening without the region before it,
a region with window exchanges (its operators then differ by more than copies), an
operator whose kind cannot split its state by key (a custom operator's opaque
``snapshot()``, joins, an unkeyed window), a merge
holding tuples when narrowing to 1, file sinks inside a rescaled region, two stateful
operators in a region widened from 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadeopt.deploy.rescale_windows import RescaleRefused, numbered, split_state, unnumbered
from spadeopt.plan.deployment import RESCALE_FILE
from spadeopt.plan.regions import Region
from spadeopt.protocol import key_channel
from spadeopt.runtime.merges import BlockMerge, ExchangeMerge, SeqMerge

FACTS_VERSION = 1


def load_facts(build_dir: Path) -> dict[str, Any] | None:
    """The build's ``rescale.json`` (None: the build has no region wider than 1, or
    predates the file), checked for its shape."""
    path = Path(build_dir) / RESCALE_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RescaleRefused(f"{path} cannot be read ({exc}): rebuild the app") from None
    if type(doc) is not dict or doc.get("version") != FACTS_VERSION or type(doc.get("regions")) is not dict:
        raise RescaleRefused(f"{path} is not a rescale.json of version {FACTS_VERSION}: rebuild the app")
    for name, r in doc["regions"].items():
        if type(r) is not dict or type(r.get("width")) is not int or type(r.get("operators")) is not list:
            raise RescaleRefused(f"{path}: region '{name}' is malformed: rebuild the app")
    return doc


@dataclass(frozen=True)
class Rescale:
    """The regions whose width changed: name -> (old width, new width), and the facts."""

    widths: dict[str, tuple[int, int]]
    facts: dict[str, Any]

    def said(self) -> str:
        return ", ".join(f"region '{r}' from width {a} to {b}" for r, (a, b) in sorted(self.widths.items()))


def _width_in(ops: set[str], first: str) -> int:
    """The width a plan of operators ``ops`` runs the region led by logical ``first`` at."""
    k = 0
    while Region.channel_op(first, k) in ops:
        k += 1
    return k or 1


def _copies(r: dict[str, Any], name: str, width: int) -> set[str]:
    """The physical operators of region ``name`` (facts ``r``) at ``width``: its logical
    operators at width 1; else their channel copies, its split(s) and merge."""
    if width == 1:
        return set(r["operators"])
    region = Region(name, tuple(r["operators"]), width)
    fission = set(r["fission"]) if "fission" in r else {region.split, region.merge}
    return {Region.channel_op(op, c) for op in r["operators"] for c in range(width)} | fission


def rescale_plan(old: list[str], new: list[str], facts: dict[str, Any] | None) -> Rescale | None:
    """How the checkpoint of a plan of operators ``old`` maps onto a plan of operators
    ``new`` whose regions (``facts``) have other widths; None when no region's width
    differs. ``RescaleRefused`` when one does but its state cannot move (the graph is the
    same, checked by the caller: operators that differ by more than copies are exchanges)."""
    if not facts:
        return None
    have, expected, widths = set(old), set(new), {}
    for name, r in facts["regions"].items():
        if not r["operators"]:
            continue
        k, k2 = _width_in(have, r["operators"][0]), r["width"]
        if k != k2 and set(_names(r["operators"][-1], k)) <= have:
            widths[name] = (k, k2)
            _movable(name, r, k, k2)
            expected = (expected - _copies(r, name, k2)) | _copies(r, name, k)
    if not widths:
        return None
    for name, (k, _) in widths.items():
        up = facts["regions"][name].get("after")
        if facts["regions"][name].get("fed") == "exchange" and widths.get(up, (None,))[0] != 1:
            raise RescaleRefused(f"region '{name}' is fed by a key exchange from region '{up}', which does not widen "
                                 f"from width 1 with it: the exchange's state is made only when both do; keep "
                                 f"region '{name}''s width {k}")
    if expected != have:  # the same graph (its fingerprint was checked): fission made other operators
        gone, extra = sorted(have - expected), sorted(expected - have)
        raise RescaleRefused(
            f"region(s) {', '.join(sorted(widths))} at the old width(s) had operators other than their copies, "
            f"split and merge (only there: {', '.join(gone[:6]) or '-'}; only here: {', '.join(extra[:6]) or '-'}): "
            f"window or key exchanges, which are not moved to another width yet; keep the widths")
    return Rescale(widths, facts)


def _movable(name: str, r: dict[str, Any], k: int, k2: int) -> None:
    """Refuse a region whose channels' entry is neither a keyed split nor, from width 1, a
    splittable source (``RescaleRefused``)."""
    if r.get("fed") == "source":
        src = r["operators"][0]
        spec = r["copies"].get(src)
        if type(spec) is dict and (spec.get("position") == "keys" or k == 1 and spec.get("position") == "splits"):
            return
        why = (f"whose channel copies read splits c, c+{k}, ... and checkpoint how many records each passed "
               f"on: at width {k2} the records they consumed are not a prefix of any new copy's splits (only "
               f"a width-1 run's are)" if k > 1 else (spec if type(spec) is str else "which is not splittable"))
        raise RescaleRefused(f"region '{name}' is led by source '{src}', {why}; keep the region's width {k} to "
                             f"resume from this checkpoint")
    if r.get("fed") == "exchange" and k == 1:
        return  # with the region before it widened from 1 too (``rescale_plan`` checks)
    if r.get("fed") != "split":
        how = "a key exchange from the region before it" if r.get("fed") == "exchange" else f"'{r.get('fed')}'"
        raise RescaleRefused(
            f"region '{name}' is fed by {how}: its channels' state is not moved to another width yet; keep "
            f"the region's width {k} to resume from this checkpoint")


def rescale_entries(flat: dict[str, dict[str, Any]], rs: Rescale) -> None:
    """Move the checkpoint's entries (field -> operator -> value, all parts together) to
    the new widths, in place."""
    for name, (k, k2) in sorted(rs.widths.items()):
        _rescale_region(flat, name, rs.facts["regions"][name], k, k2)


def _names(op: str, width: int) -> list[str]:
    return [op] if width == 1 else [Region.channel_op(op, c) for c in range(width)]


def _rescale_region(flat: dict[str, dict[str, Any]], name: str, r: dict[str, Any], k: int, k2: int) -> None:
    key, types = [a for a, _ in r["key"]], tuple(t for _, t in r["key"])

    def route(values: dict[str, Any]) -> int:
        if not key:
            raise RescaleRefused(f"region '{name}' has no key, yet an operator keeps groups in it; keep its width {k}")
        return key_channel(tuple(values[a] for a in key), types, k2)

    split_made: list = [0, None, None]  # widening from 1: the split's next number, clock window; the operator
    entering: list = [None]  # tuples that entered the channels: a width-1 source's position, or the split's count
    for op in r["operators"]:
        olds = _names(op, k)
        for field, entries in flat.items():
            held = [o for o in olds if o in entries]
            if not held:
                continue
            where = f"operator '{op}' of region '{name}'"
            spec = r["copies"].get(op)
            if type(spec) is not dict:
                raise RescaleRefused(f"{where}: {spec or 'its state cannot move'}; keep the region's width "
                                     f"{k} to resume from this checkpoint")
            if len(held) != k:
                raise RescaleRefused(f"{where}: only copies {', '.join(held)} hold {field} in the checkpoint")
            states = [entries.pop(o) for o in olds]
            if field != "ops":
                entries.update(dict(zip(_names(op, k2), _end_state(field, spec, states, k2, where, entering),
                                        strict=True)))
                continue
            if k == 1:
                if split_made[2] is not None:
                    raise RescaleRefused(f"{where}: a region widened from 1 may hold one stateful operator "
                                         f"(here also '{split_made[2]}': numbers are made for one); keep the "
                                         f"region's width 1")
                states = [numbered(spec, states[0], where)]
                split_made[:] = [len(states[0][0]), states[0][1][0], op]
            moved = split_state(spec, states, k2, route, where)
            if k2 == 1:
                moved = [unnumbered(spec, moved[0])]
            entries.update(dict(zip(_names(op, k2), moved, strict=True)))
    for fop, spec in r.get("fission", {}).items():
        where = f"'{fop}' of region '{name}'"
        if type(spec) is not dict:
            raise RescaleRefused(f"{where}: {spec}; keep the region's width {k}")
        if spec.get("slots") == ["block_merge"]:
            _block_merge(flat, fop, spec, k, k2, entering[0], where)
        elif spec.get("slots") == []:  # it holds nothing (an arrival merge)
            flat["ops"].pop(fop, None)
        elif spec.get("slots") in (["exchange_split"], ["exchange_merge"]):
            if k != 1:
                raise RescaleRefused(f"{where}: a key exchange's state moves only when both its regions widen from "
                                     f"width 1; keep the region's width {k}")
            flat["ops"][fop] = ([[-1, 0, 0] + ([split_made[1]] if spec.get("clock") else [])]
                                if spec["slots"] == ["exchange_split"] else [vars(ExchangeMerge(spec["senders"]))])
        elif k == 1:
            made = [[split_made[0]]] + ([[split_made[1]]] if spec.get("clock") else [])
            flat["ops"][fop] = made if spec.get("keep") else [vars(SeqMerge(k2))]
            entering[0] = split_made[0] if spec.get("keep") else entering[0]
        elif fop in flat["ops"]:
            state = _fission_state(spec, flat["ops"][fop], k2, where)
            entering[0] = state[0][0] if spec.get("keep") else entering[0]
            if k2 == 1:
                del flat["ops"][fop]  # a region of width 1 has no split or merge
            else:
                flat["ops"][fop] = state


def _end_state(field: str, spec: dict[str, Any], states: list, k2: int, where: str, entering: list) -> list:
    """A source's or sink's entry (``field``: its position or count) for each of ``k2``
    copies, from its ``states`` at the old width. A splittable source widens from 1 only
    (``_movable``): the records a width-1 run read are ``[0, n)``; each copy's position is
    how many records of its own splits lie below ``n`` (:func:`records_below`), and ``n``
    is what entered the channels (``entering``). A counting sink's copies add up."""
    if field == "sources" and spec.get("position") == "splits" and len(states) == 1 and type(states[0]) is int:
        n = entering[0] = states[0]
        return [records_below(n, c, k2, spec["size"]) for c in range(k2)]
    if field == "sources" and spec.get("position") == "keys" and all(_entry_ids(s) for s in states):
        whole = _keys_union(states) if len(states) > 1 else states[0]
        return [_keys_share(whole, spec["keys"][c::k2]) for c in range(k2)]
    if field == "sinks" and spec.get("count") and all(type(v) is int for v in states):
        return [sum(states) if c == 0 else 0 for c in range(k2)]
    raise RescaleRefused(f"{where} holds {field} per channel copy, which are not moved to width {k2} from "
                         f"{states!r:.60}; keep the region's width")


def _entry_ids(state: Any) -> bool:
    """A partitioned broker source's position: entry IDs (and ends) per stream key."""
    return type(state) is dict and type(state.get("ids")) is dict and type(state.get("read")) is int \
        and type(state.get("end", {})) is dict


def _keys_union(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The copies' positions as one reader's: each copy read its own stream keys, so their
    entry IDs (and ends) are disjoint and together every key's (``count=``, the one use of
    ``read``, is refused for such a source, so the records read only add up)."""
    out: dict[str, Any] = {"ids": {}, "read": sum(s["read"] for s in states)}
    for s in states:
        out["ids"].update(s["ids"])
        if "end" in s:
            out.setdefault("end", {}).update(s["end"])
    return out


def _keys_share(state: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """A width-1 reader's position cut to ``keys`` (a copy's share): each key's last entry
    ID (and end) as it was; the records read, which only a ``count=`` limit reads (such a
    source is refused), start at 0."""
    missing = [k for k in keys if k not in state["ids"]]
    if missing:
        raise RescaleRefused(f"the checkpoint's source position has no entry ID of stream key(s) "
                             f"{', '.join(missing)}: resume at the width it was taken at")
    out: dict[str, Any] = {"ids": {k: state["ids"][k] for k in keys}, "read": 0}
    if "end" in state:
        out["end"] = {k: state["end"][k] for k in keys if k in state["end"]}
    return out


def records_below(n: int, c: int, k: int, size: int) -> int:
    """How many of the stream's records ``[0, n)`` lie in the splits (of ``size`` records)
    that copy ``c`` of ``k`` reads: splits ``c, c + k, ...``.

    >>> [records_below(10, c, 2, 3) for c in range(2)]  # splits 0, 2 | 1, 3 (of which 1 record)
    [6, 4]
    >>> sum(records_below(1000, c, 3, 7) for c in range(3))
    1000
    """
    whole = n // size
    below = max(0, -(-(whole - c) // k)) * size
    return below + (n % size if whole % k == c else 0)


def _block_merge(flat: dict[str, dict[str, Any]], fop: str, spec: dict[str, Any], k: int, k2: int,
                 entering: int | None, where: str) -> None:
    """A static merge at width ``k2``: its round of blocks at the block the ``entering``-th
    tuple is in (the split deals, or the source copies read, blocks of ``block`` in turn;
    every channel emits one tuple per tuple, so at an aligned checkpoint the merge has
    passed exactly the tuples that entered). Its queues must be empty."""
    old = flat["ops"].get(fop)
    if old is not None and (type(old) is not list or len(old) != 1 or type(old[0]) is not dict
                            or any(len(q) > h for q, h in zip(old[0].get("queues", ()), old[0].get("heads", ()),
                                                              strict=False))):
        raise RescaleRefused(f"{where} cannot move to width {k2} at this checkpoint: it holds tuples or is not a "
                             f"static merge's state; resume at the width it was taken at, or from another checkpoint")
    if entering is None:
        raise RescaleRefused(f"{where}: the tuples that entered its region are not known at this checkpoint; keep "
                             f"the region's width {k}")
    if k2 == 1:
        flat["ops"].pop(fop, None)
        return
    m = BlockMerge(k2, spec["block"])
    m.cur, m.left = (entering // m.block) % k2, m.block - entering % m.block
    flat["ops"][fop] = [vars(m)]


def _fission_state(spec: dict[str, Any], state: list, width: int, where: str) -> list:
    """A split's or merge's state at ``width`` (1: only checked, a merge must hold nothing)."""
    if spec.get("keep"):
        return state
    try:
        out = []
        for slot, v in zip(spec["slots"], state, strict=True):
            if slot == "seq_merge" and width == 1 and SeqMerge.held(v):
                raise ValueError(f"it holds {len(SeqMerge.held(v))} tuple(s) a channel delivered ahead of another, "
                                 f"which width 1 (no merge) would have passed on already")
            out.append(SeqMerge.resized(v, width) if slot == "seq_merge" else v)
        return out
    except ValueError as exc:
        raise RescaleRefused(f"{where} cannot move to width {width} at this checkpoint: {exc}; resume at the "
                             f"width it was taken at, or from another checkpoint") from None
