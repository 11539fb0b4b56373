"""FATM's fission choice: how wide each declared parallel region runs (papers 000 and 002).

The developer declares *where* a region may be replicated (``App.parallel``); FATM
chooses *how wide*, together with fusion and placement, from the profile of the
logical (width-1) graph. For a candidate width vector (one width per region):

1. The logical graph is rewritten into the physical one by ``spadeopt.plan.fission``
   (split ``<region>__split``, channel copies ``<op>__<c>``, merge ``<region>__merge``),
   so the operator names are exactly those codegen builds.
2. The profile is mapped onto the physical operators (:func:`physical_profile`):

   - a channel copy gets ``1/w`` of its operator's load and of every link rate inside
     the region (the split deals round robin, or hashes the key); a keyed region whose
     key the profile sampled (``profiling.keys``) gets ``s/w`` instead, ``s`` = ``w`` x
     the busiest channel's share of the sampled key hashes (:func:`skew`: a hot key makes
     its channel the region's bottleneck at any width; every channel is costed as it);
   - a region that starts at a splittable source has no split: each copy of the source
     reads ``1/w`` of the splits, so it gets ``1/w`` of the source's load like any copy;
   - the split costs ``model.split_s(ordering)`` CPU seconds per tuple entering the
     region (a region entered by several streams has a split per entry, each costed at
     its own entry's rate), the merge ``model.merge_s(ordering)`` per tuple leaving it (static-rate or
     sequence-number variant; paper 000's ``c_p``, measured per host by ``spadeopt
     calibrate`` with ``spadeopt.refine.fission_cost``, see
     docs/decisions/021-fatm-chooses-region-widths.md);
   - each stream into the region now ends at its split, which sends ``rate/w`` to each
     channel (tuples of a dynamic region grow by the 9-byte sequence number); each
     channel sends ``rate/w`` to the merge, which sends the full rate on to the
     region's subscribers. Links are mapped with their multiplicity, so every
     physical stream has one link; the transport cost of each is the calibration's;
   - a key exchange between two regions (``plan.regions.choose_exchanges``) replaces the
     upstream merge and the downstream split: each upstream channel's sender costs a
     dynamic split per tuple it sends and sends ``1/w2`` of its rate to each downstream
     channel's receiver, which costs a dynamic merge per tuple (``_map_exchange``).

3. The existing planner runs on the physical problem: the rate search of
   :mod:`spadeopt.optimize.rate` with GreedyFuse and placement at each rate. Its
   planned rate scores the vector.

Search (:func:`choose_widths`): the candidate widths of a region are
:func:`candidate_widths` of ``nodes x cores``: every width up to ``DENSE`` and then
12, 16, 24, 32, 48 and 64 up to ``MAX_WIDTH`` (a rate search per candidate costs ~12 GreedyFuse
runs on a graph that grows with the width, so a 100,000-node cluster must not mean
200,000 candidates; beyond ``MAX_WIDTH`` channels per region the per-channel split and
merge costs dominate any workload we profile). With
few regions (at most ``EXHAUSTIVE_MAX`` vectors) every vector is tried; otherwise
coordinate ascent: starting from all 1, each region in turn tries every width with the
others fixed and keeps the best; when a full pass changes nothing, two regions widen one
step together (every pair, or all at once beyond ``JOINT_PAIRS`` movable regions: two
equally heavy regions in a row bound the rate together, so neither gains alone), and the
ascent goes on from the best pair that wins (at most ``ASCENT_PASSES`` passes). The search follows the planned rate: the rate leader has the
highest planned rate, and a vector whose rate is within ``TIE`` (relative) of a smaller
one does not replace it (ties go to the smaller total width, then the lexicographically
smaller vector), so a width > 1 leads only when it buys more than the bisection's
resolution. Then the ranking's tie-break (:func:`spadeopt.optimize.ranking.tie_break`)
picks, among every vector tried whose rate is within the model's error of the leader's,
the one whose plan sends the fewest tuples across PE links (when ``evaluate`` gives them,
as FATM's scorer does with a ``ranking.Rated``). Widths pinned with
``--width`` are not searched. Every evaluation is deterministic (the profile,
calibration and constants decide it), so the choice is too. With a ``bound`` (FATM's:
``optimize.rate_bound``), a vector that provably loses the comparison it is in is not
evaluated (branch and bound, :func:`choose_widths`); the choice is the same. With a
``confirm`` (FATM's full rating, where ``evaluate`` rates a vector on its channel
quotient, ``optimize.quotient``), the rate leader and every vector within ``TIE_WINDOW``
of it are rated again by ``confirm`` before the tie-break, until the leader and its
window are all confirmed: the choice is ranked by ``confirm``'s ratings.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from spadeopt.errors import OptimizeError
from spadeopt.model.graph import AppGraph, PortRef
from spadeopt.optimize.predict import DEFAULT_MODEL, PerfModel
from spadeopt.optimize.ranking import MODEL_ERROR, TIE, TIE_WINDOW, Rated, tie_break
from spadeopt.plan.fission import physical_graph, rewritten
from spadeopt.plan.regions import DYNAMIC, EXCHANGE, Region, check_region
from spadeopt.protocol import channel_shares

SEQ_BYTES = 9.0  # msgpack of the sequence number a dynamic region's tuples carry
EXHAUSTIVE_MAX = 64  # width vectors tried exhaustively; above this, coordinate ascent
ASCENT_PASSES = 4
JOINT_PAIRS = 8  # movable regions up to which the ascent's joint step tries every pair
DENSE = 8  # every width up to this one is a candidate
MAX_WIDTH = 64  # widest region FATM plans (a pinned --width may be wider)

Link = tuple[str, str, float, float]


def physical_profile(graph: AppGraph, prof, regions: tuple[Region, ...], physical: AppGraph | None = None,
                     model: PerfModel = DEFAULT_MODEL):
    """``prof`` (an ``OperatorProfile`` of the logical ``graph``) mapped onto the physical
    graph of ``regions``: channel copies, splits and merges (module docstring), the split
    and merge costed with ``model``'s per-tuple costs. ``physical`` is
    ``physical_graph(graph, regions)`` when the caller has built it: the last region's
    rewrite (wanted only for the fingerprint) is then not made again."""
    load = dict(prof.load)
    links = list(prof.links)
    g = graph
    wide = [r for r in regions if r.width > 1]
    for i, r in enumerate(wide):
        load, links = _map_region(g, r, load, links, model, prof.keys)
        if i < len(wide) - 1:
            g = rewritten(graph, tuple(wide[:i + 1]))
    by_name = {r.name: r for r in regions}
    for r in wide:
        if r.fed == EXCHANGE:
            load, links = _map_exchange(by_name[r.after], r, load, links, model)
    g = physical if physical is not None else physical_graph(graph, regions)
    for r in wide:
        shape = check_region(graph, r.name, r.operators)
        for timed in shape.inner:
            load, links = _map_window_exchange(r, timed[0], timed[0], None, load, links, model)
        for join, port, _ in shape.sides:  # a join side's exchange (plan.eventtime.flushed_sides)
            at = Region.exchange_at(join, port)
            feeders = {src.op for c in range(r.width) for src in g.publishers(PortRef(r.window_split(at, c), "in"))}
            load, links = _map_window_exchange(r, join, at, feeders, load, links, model)
    return replace(prof, fingerprint=g.fingerprint, load=load, links=tuple(links))


def _map_exchange(up: Region, down: Region, load: Mapping[str, float], links: list[Link],
                  model: PerfModel) -> tuple[dict[str, float], list[Link]]:
    """The mapped profile of ``up`` and ``down`` (both mapped as if a merge and a split stood
    between them) with a key exchange instead: each upstream channel's exit link goes to
    its ``exchange_split`` (costed as a dynamic split per tuple), which sends ``1/w2`` of it
    to each downstream channel's ``exchange_merge`` (costed as a dynamic merge per tuple it
    passes on), which feeds its channel; the merge and the split are gone. Uniform keys
    assumed, as for a split."""
    chan_up = {Region.channel_op(o, c): c for o in up.operators for c in range(up.width)}
    chan_down = {Region.channel_op(o, d): d for o in down.operators for d in range(down.width)}
    w2 = down.width
    out: list[Link] = []
    sent = [0.0] * up.width
    got = [0.0] * w2
    for a, b, rate, size in links:
        if b == up.merge and a in chan_up:
            c = chan_up[a]
            sent[c] += rate
            out.append((a, down.exchange_split(c), rate, size))
            out += [(down.exchange_split(c), down.exchange_merge(d), rate / w2, size) for d in range(w2)]
        elif a == down.split and b in chan_down:
            got[chan_down[b]] += rate
            out.append((down.exchange_merge(chan_down[b]), b, rate, size))
        elif not (a == up.merge and b == down.split):
            out.append((a, b, rate, size))
    new_load = {n: u for n, u in load.items() if n not in (up.merge, down.split)}
    for c, rate in enumerate(sent):
        new_load[down.exchange_split(c)] = rate * model.split_s(DYNAMIC)
    for d, rate in enumerate(got):
        new_load[down.exchange_merge(d)] = rate * model.merge_s(DYNAMIC)
    return new_load, out


def _map_window_exchange(r: Region, op: str, at: str, feeders: set[str] | None, load: Mapping[str, float],
                         links: list[Link], model: PerfModel) -> tuple[dict[str, float], list[Link]]:
    """The mapped profile with a window exchange ``at`` in front of ``op``'s copies
    (``plan.eventtime``; an event-time window's, ``at == op``, or a join side's, whose
    links come from ``feeders``): each channel's link into the copy passes its split (a
    dynamic split per tuple) and its merge (a dynamic merge per tuple); every tuple stays
    in its channel, and the frames to the other channels are costed as none."""
    copies = {Region.channel_op(op, c): c for c in range(r.width)}
    out: list[Link] = []
    new_load = dict(load)
    for a, b, rate, size in links:
        c = copies.get(b)
        if c is None or (feeders is not None and a not in feeders):
            out.append((a, b, rate, size))
            continue
        ws, wm = r.window_split(at, c), r.window_merge(at, c)
        out.append((a, ws, rate, size))
        out += [(ws, r.window_merge(at, d), rate if d == c else 0.0, size) for d in range(r.width)]
        out.append((wm, b, rate, size))
        new_load[ws] = new_load.get(ws, 0.0) + rate * model.split_s(DYNAMIC)
        new_load[wm] = new_load.get(wm, 0.0) + rate * model.merge_s(DYNAMIC)
    return new_load, out


def skew(graph: AppGraph, r: Region, keys: Mapping[str, tuple[Mapping[int, int], int]]) -> float:
    """How much hotter than ``1/w`` a keyed region's busiest channel is: ``w`` times its
    share of the tuples (``protocol.channel_shares`` of the sampled key hashes the profile
    holds for a keyed operator of the region with the region's key, ``profiling.keys``;
    the hottest keys exactly, the rest spread). 1 for a region without a key or samples:
    uniform keys assumed. Every channel is costed as the busiest (the plans stay
    channel-symmetric; the busiest channel is what bounds the rate).

    >>> from spadeopt.plan.regions import Region
    >>> from types import SimpleNamespace as N
    >>> g = N(op=lambda name: N(key=("k",)))
    >>> skew(g, Region("r", ("win",), 2, key=("k",)), {"win": ({4: 60, 5: 20}, 20)})
    1.4
    """
    if r.width <= 1 or not r.key:
        return 1.0
    for o in r.operators:
        if o in keys and tuple(graph.op(o).key) == tuple(r.key):
            top, other = keys[o]
            shares = channel_shares(dict(top), other, r.width)
            return max(1.0, r.width * max(shares)) if any(shares) else 1.0
    return 1.0


def _map_region(graph: AppGraph, r: Region, load: Mapping[str, float],
                links: list[Link], model: PerfModel,
                keys: Mapping[str, tuple[Mapping[int, int], int]] | None = None) -> tuple[dict[str, float], list[Link]]:
    shape = check_region(graph, r.name, r.operators)
    members = set(r.operators)
    w = r.width
    extra = SEQ_BYTES if r.ordering == DYNAMIC else 0.0
    out_load = {n: u for n, u in load.items() if n not in members}
    hot = skew(graph, r, keys or {})  # the busiest channel's share times w (1: uniform keys)
    for o in r.operators:
        for c in range(w):
            out_load[Region.channel_op(o, c)] = load.get(o, 0.0) * hot / w
    # each entering stream: one profile link (src -> entry op) stands for it and goes to its
    # own split (a region entered by several streams has one split per entry,
    # ``Region.split_of``); none when the region starts at a source: no split, no link. Links
    # of one (src, dst) pair (a producer entering twice, as a self-join) go to its entries
    # in stream order.
    entries = shape.entries or ((shape.entry,) if shape.entry is not None else ())
    pending: dict[tuple[str, str], list[str]] = {}
    for i, e in enumerate(entries):
        pending.setdefault((e.src.op, e.dst.op), []).append(r.split_of(i))
    in_rate = {r.split_of(i): 0.0 for i in range(len(entries))}
    out: list[Link] = []
    exit_rate: float | None = None
    for a, b, rate, size in links:
        a_in, b_in = a in members, b in members
        if not a_in and not b_in:
            out.append((a, b, rate, size))
        elif not a_in and pending.get((a, b)):
            split = pending[(a, b)].pop(0)
            in_rate[split] += rate
            out.append((a, split, rate, size))
            out += [(split, Region.channel_op(b, c), rate * hot / w, size + extra) for c in range(w)]
        elif a_in and b_in:
            out += [(Region.channel_op(a, c), Region.channel_op(b, c), rate * hot / w, size + extra)
                    for c in range(w)]
        elif a_in and not b_in:  # the one exit port (check_region), to each subscriber
            if exit_rate is None:
                exit_rate = rate
                out += [(Region.channel_op(a, c), r.merge, rate * hot / w, size + extra) for c in range(w)]
            out.append((r.merge, b, rate, size))
        else:
            raise OptimizeError(f"the profile has more links {a} -> {b} into parallel region '{r.name}' "
                                f"than the graph has streams; refine the profile again")
    if exit_rate is None:  # the profile saw no tuple leave the region (unseen streams become
        exit_rate = 0.0    # zero-rate links in problem_for)
    mode = r.ordering
    for split, rate in in_rate.items():  # each split costs per tuple of its own entry
        out_load[split] = rate * model.split_s(mode)
    if shape.exit is not None:  # a region that ends in counting sinks has no merge
        out_load[r.merge] = exit_rate * model.merge_s(mode)
    return out_load, out


@dataclass(frozen=True)
class WidthTry:
    widths: tuple[int, ...]
    rate: float | None  # planned source rate; None when nothing fits
    crossing: float | None = None  # tuples/s crossing PE links (ranking.Rated); None: not scored


def _better(a: WidthTry, b: WidthTry | None) -> bool:
    """Is ``a`` a better choice than ``b`` on its rate (the search's rule, which finds the
    rate leader)? Highest planned rate; a wider vector must beat a narrower one by more
    than ``TIE``; then smaller total width, then smaller vector."""
    if a.rate is None:
        return False
    if b is None or b.rate is None:
        return True
    key_a, key_b = (sum(a.widths), a.widths), (sum(b.widths), b.widths)
    if key_a < key_b:
        return a.rate >= b.rate * (1 - TIE)
    return a.rate > b.rate * (1 + TIE)


def candidate_widths(max_width: int) -> tuple[int, ...]:
    """Widths FATM tries for one region on ``max_width`` cores.

    Every width up to ``DENSE``; above it a ladder a quarter apart (a width between two rungs
    buys at most a quarter more channels) and the widths that fill the cores: ``(max_width
    - o) // p`` for ``p`` PEs per channel (1-4) beside ``o`` PEs outside the region (0-3),
    where a region's rate stops growing with its width. A narrower width than the best
    ladder rung can win only by leaving room for other PEs, which is what the fill widths
    are.

    >>> candidate_widths(4)
    (1, 2, 3, 4)
    >>> candidate_widths(16)
    (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15, 16)
    >>> candidate_widths(200_000)[-6:]
    (47, 59, 61, 62, 63, 64)
    """
    top = max(1, min(max_width, MAX_WIDTH))
    ladder = set(range(1, min(DENSE, top) + 1))
    w = float(DENSE)
    while w < top:
        ladder.add(int(w))
        w *= 1.25
    ladder |= {(top - o) // p for p in range(1, 5) for o in range(4) if (top - o) // p >= 1}
    ladder.add(top)
    return tuple(sorted(ladder))


def choose_widths(regions: tuple[Region, ...], free: tuple[str, ...], max_width: int,
                  evaluate: Callable[[tuple[Region, ...]], float | Rated | None],
                  exhaustive_max: int = EXHAUSTIVE_MAX,
                  caps: Mapping[str, int] | None = None,
                  bound: Callable[[tuple[Region, ...], float], float] | None = None,
                  confirm: Callable[[tuple[Region, ...]], float | Rated | None] | None = None
                  ) -> tuple[tuple[Region, ...], dict[str, Any]]:
    """The width vector (over the ``free`` regions; the others keep theirs) that ranks
    best (``evaluate`` gives its planned rate, or a ``ranking.Rated`` with the crossing
    tuples too; module docstring: the rate leader, then the tie-break), and a record of
    the search for ``explain.json``. Up to ``exhaustive_max`` vectors are searched
    exhaustively (the benchmark forces either). ``caps`` (:func:`region_caps`) bounds a
    region's widths below ``max_width``: a region led by a partitioned source runs at
    most one channel per partition, so no wider vector is tried.

    No early stop: every region's sweep tries every candidate width (an early stop skipped
    width 16 on 16 cores because width 12, planned with two PEs per channel, scored below
    width 8), so the ascent returns the best vector its passes reach.

    Branch and bound (``bound(vector, floor)``: an upper bound on ``evaluate``'s rate of
    a vector, which may be a loose one when that is at least ``floor``, e.g.
    ``fatm_search.WidthScorer.bound``): a vector compared with an incumbent whose rate
    times ``1 - TIE`` its bound does not reach is not evaluated: no rate it can have
    would win that comparison (``_better``), so it loses it as its rate would. It is
    evaluated when a later comparison or the final tie-break (a bound within
    ``TIE_WINDOW`` of the leader) could need its rate. Every decision is the one the
    search makes without ``bound``: the chosen vector is the same (``record["bounded"]``
    lists the vectors never evaluated).

    Confirmation (``confirm(vector)``: the vector's rating as the final plan is made,
    where ``evaluate`` is a cheaper rating, e.g. FATM's on the channel quotient): once the
    search ends, every vector tried whose rate is within ``TIE_WINDOW`` of the rate leader
    of the tried vectors (``_leader``) is rated again by ``confirm``, and again until the
    leader and every vector within the window of it are confirmed; then the tie-break.
    So the chosen vector, and every vector the tie-break weighs, is ranked by ``confirm``
    (``record["confirmed"]`` lists them).
    """
    names = [r.name for r in regions]
    idx = [names.index(n) for n in free]
    cache: dict[tuple[int, ...], WidthTry] = {}
    bounds: dict[tuple[int, ...], tuple[float, float]] = {}

    def at(widths: tuple[int, ...]) -> tuple[Region, ...]:
        rs = list(regions)
        for i, w in zip(idx, widths, strict=True):
            rs[i] = replace(rs[i], width=w)
        return tuple(rs)

    def score(widths: tuple[int, ...], against: WidthTry | None = None) -> WidthTry:
        """The vector's try; a rate-less stand-in when its bound loses to ``against``."""
        if widths not in cache:
            if bound is not None and against is not None and against.rate is not None:
                floor = against.rate * (1 - TIE)
                known = bounds.get(widths)  # (bound, the floor it was asked for: a looser one may do above it)
                if known is None or (known[0] >= floor > known[1]):
                    bounds[widths] = known = (bound(at(widths), floor), floor)
                if known[0] < floor:
                    return WidthTry(widths, None)
            got = evaluate(at(widths))
            rated = got if isinstance(got, Rated) else Rated(got)
            cache[widths] = WidthTry(widths, rated.rate, rated.crossing)
        return cache[widths]

    per = [candidate_widths(min(max_width, (caps or {}).get(n, max_width))) for n in free]
    search, best = _search(score, per, exhaustive_max)
    confirmed: list[tuple[int, ...]] = []
    if best is not None and best.rate is not None:  # ranking's tie-break among every vector tried
        for widths, (b, _) in sorted(bounds.items()):  # a bounded vector that may tie the leader is evaluated
            if widths not in cache and b >= best.rate * (1 - TIE_WINDOW):
                score(widths)
        if confirm is not None:
            best = _confirmed(cache, confirm, at, confirmed, bounds, score)
    leader = best.widths if best is not None and best.rate is not None else tuple(1 for _ in idx)
    if best is not None and best.rate is not None:
        tried = sorted(cache.values(), key=lambda t: (sum(t.widths), t.widths))
        best = tie_break(best, tried, lambda t: Rated(t.rate, t.crossing))
    chosen = best.widths if best is not None and best.rate is not None else leader
    record = _record(search, max_width, free, leader, chosen, cache, bounds if bound is not None else None,
                     caps, confirmed if confirm is not None else None)
    return at(chosen), record


def _search(score: Callable[..., WidthTry], per: list[tuple[int, ...]], exhaustive_max: int
            ) -> tuple[str, WidthTry | None]:
    """Every vector of the candidate widths ``per`` region when there are at most
    ``exhaustive_max`` of them, else coordinate ascent: how, and the rate leader."""
    if math.prod(len(c) for c in per) > exhaustive_max:
        return "coordinate ascent", _ascend(score, per)
    best: WidthTry | None = None
    for widths in itertools.product(*per):
        t = score(widths, best)
        if _better(t, best):
            best = t
    return "exhaustive", best


def _leader(tried: Iterable[WidthTry]) -> WidthTry | None:
    """The rate leader (``_better``) of ``tried``, taken in order of total width, then vector."""
    best = None
    for t in sorted(tried, key=lambda t: (sum(t.widths), t.widths)):
        if _better(t, best):
            best = t
    return best


def _confirmed(cache: dict[tuple[int, ...], WidthTry], confirm: Callable[..., float | Rated | None],
               at: Callable[[tuple[int, ...]], tuple[Region, ...]], confirmed: list[tuple[int, ...]],
               bounds: Mapping[tuple[int, ...], tuple[float, float]], score: Score) -> WidthTry | None:
    """``cache`` with the rate leader and every vector within ``TIE_WINDOW`` of it rated by
    ``confirm`` (repeated until the leader and its window are all confirmed; a bounded
    vector whose bound reaches the window is evaluated first); the leader. Appends the
    confirmed vectors to ``confirmed``."""
    done: set[tuple[int, ...]] = set()
    while True:
        lead = _leader(cache.values())
        if lead is None or lead.rate is None:
            return lead
        floor = lead.rate * (1 - TIE_WINDOW)
        for widths, (b, _) in sorted(bounds.items()):
            if widths not in cache and b >= floor:
                score(widths)
        todo = sorted(w for w, t in cache.items() if w not in done and t.rate is not None and t.rate >= floor)
        if not todo:
            return lead
        for widths in todo:
            got = confirm(at(widths))
            rated = got if isinstance(got, Rated) else Rated(got)
            cache[widths] = WidthTry(widths, rated.rate, rated.crossing)
            done.add(widths)
            confirmed.append(widths)


def _record(search: str, max_width: int, free: tuple[str, ...], leader: tuple[int, ...], chosen: tuple[int, ...],
            cache: Mapping[tuple[int, ...], WidthTry],
            bounds: Mapping[tuple[int, ...], tuple[float, float]] | None,
            caps: Mapping[str, int] | None = None, confirmed: list[tuple[int, ...]] | None = None) -> dict[str, Any]:
    """``choose_widths``' record of the search for ``explain.json``: the vectors evaluated
    and, with branch and bound (``bounds``), those never evaluated with their bounds; the
    regions' width caps and the vectors confirmed in full, when there are any."""
    record = {
        "search": search, "max_width": max_width, "vectors_tried": len(cache), "tie": TIE,
        "model_error": MODEL_ERROR, "tie_window": TIE_WINDOW, "rate_leader": dict(zip(free, leader, strict=True)),
        "regions": {
            n: {"chosen": chosen[j],
                "tried": _per_region(cache, j, chosen)}
            for j, n in enumerate(free)
        },
        "vectors": [{"widths": dict(zip(free, t.widths, strict=True)), "planned_rate": t.rate, "crossing": t.crossing}
                    for t in sorted(cache.values(), key=lambda t: t.widths)],
    }
    if bounds is not None:
        record["bounded"] = [{"widths": dict(zip(free, w, strict=True)), "rate_bound": b}
                             for w, (b, _) in sorted(bounds.items()) if w not in cache]
    if caps:
        record["caps"] = {n: caps[n] for n in free if n in caps}
    if confirmed is not None:
        record["confirmed"] = [dict(zip(free, w, strict=True)) for w in confirmed]
    return record


Score = Callable[..., WidthTry]  # choose_widths' score(widths, against=None)


def _ascend(score: Score, per: list[tuple[int, ...]]) -> WidthTry:
    """Coordinate ascent from all ones over region ``j``'s widths ``per[j]``, at most
    ``ASCENT_PASSES`` passes: each region's every width tried with the others held, a
    better one (``_better``) taken. A pass that moves no single region tries a joint step
    (``_joint_step``) before it gives up.

    >>> rate = {(1, 1): 100.0, (2, 1): 100.0, (1, 2): 100.0, (2, 2): 180.0}
    >>> _ascend(lambda w, _=None: WidthTry(w, rate[w]), [(1, 2), (1, 2)]).widths
    (2, 2)
    >>> rate = {1: 100.0, 2: 90.0, 3: 95.0, 4: 150.0}  # not unimodal: no early stop at 2
    >>> _ascend(lambda w, _=None: WidthTry(w, rate[w[0]]), [(1, 2, 3, 4)]).widths
    (4,)
    """
    cur = tuple(1 for _ in per)
    best = score(cur)
    for _ in range(ASCENT_PASSES):
        changed = False
        for j, choices in enumerate(per):
            for w in choices:
                t = score(cur[:j] + (w,) + cur[j + 1:], best)
                if _better(t, best):
                    best, changed = t, True
            cur = best.widths
        if not changed:
            t = _joint_step(score, per, cur, best)
            if t is None:
                break
            best, cur = t, t.widths
    return best


JOINT_MOVES = ((1, 1), (1, 2), (2, 1), (2, 2), (1, -1), (-1, 1))
"""Candidate steps of two regions together (in candidate widths): both up one or two,
or one up and the other down (a core moved from one region to the other)."""


def _joint_step(score: Score, per: list[tuple[int, ...]], cur: tuple[int, ...],
                best: WidthTry) -> WidthTry | None:
    """Two regions moved together by each of :data:`JOINT_MOVES` (every pair of regions;
    all of them up one step at once when more than ``JOINT_PAIRS`` can move): the best
    such vector if it beats ``best``, else None. Two regions whose rates bind each other
    (a source region feeding a keyed one through an exchange) gain only together, and
    neither alone."""
    pos = [choices.index(w) if w in choices else 0 for choices, w in zip(per, cur, strict=True)]

    def moved(j: int, d: int) -> int | None:
        k = pos[j] + d
        return per[j][k] if 0 <= k < len(per[j]) else None

    movable = [j for j in range(len(per)) if moved(j, 1) is not None]
    found = None
    if len(movable) > JOINT_PAIRS:
        t = score(tuple(moved(j, 1) if j in movable else w for j, w in enumerate(cur)), best)
        return t if _better(t, best) else None
    for i, j in itertools.combinations(range(len(per)), 2):
        for di, dj in JOINT_MOVES:
            wi, wj = moved(i, di), moved(j, dj)
            if wi is None or wj is None:
                continue
            t = score(tuple(wi if k == i else wj if k == j else w for k, w in enumerate(cur)), found or best)
            if _better(t, found or best):
                found = t
    return found


def region_caps(graph: AppGraph, regions: tuple[Region, ...], free: tuple[str, ...]) -> dict[str, int]:
    """The widest each free region may run when that is less than ``MAX_REGION_WIDTH``: a
    region led by a partitioned source (``plan.regions.Shape.partitions``)."""
    out = {}
    for r in regions:
        if r.name in free:
            partitions = check_region(graph, r.name, r.operators).partitions
            if partitions:
                out[r.name] = partitions
    return out


def _per_region(cache: Mapping[tuple[int, ...], WidthTry], j: int, chosen: tuple[int, ...]) -> list[dict[str, Any]]:
    """Region ``j``'s widths tried with every other region at its chosen width."""
    rows = []
    for widths, t in sorted(cache.items()):
        if all(w == c for k, (w, c) in enumerate(zip(widths, chosen, strict=True)) if k != j):
            rows.append({"width": widths[j], "planned_rate": t.rate})
    return rows


def free_regions(graph: AppGraph, pinned: Mapping[str, int] | None, fission: bool) -> tuple[str, ...]:
    """Declared regions FATM may widen: all not pinned by ``--width`` (none without fission)."""
    if not fission:
        return ()
    return tuple(sorted(n for n, _, _ in graph.annotations.parallel if n not in (pinned or {})))
