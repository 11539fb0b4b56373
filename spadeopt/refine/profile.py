"""The refined profile: ``profile.json``, what ``spadeopt refine`` writes and the optimizer reads.

The format is documented in ``docs/profile-format.md``; :data:`SCHEMA_VERSION` is its
version. A profile is plain JSON (sorted keys, 2-space indent), written atomically
(temporary file in the same directory, then ``os.replace``).

Reading validates the whole document and raises :class:`~spadeopt.errors.ProfileError`
naming the file and every problem found; an unknown ``schema_version`` is refused first,
before anything else is looked at.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from spadeopt.atomic import write_atomic
from spadeopt.errors import ProfileError

SCHEMA_VERSION: Final = 1
KIND: Final = "spadeopt-profile"
_REFINE_AGAIN = "refine the profiling runs again with `spadeopt refine RUN_DIR -o PROFILE.json`"


@dataclass(frozen=True)
class PortStats:
    """One operator port: ``rate`` tuples/s, ``byte_rate`` bytes/s, mean ``size`` bytes.

    ``tuples`` is the number of tuples through the port in the run(s); ``cpu_per_tuple_s``
    the mean CPU seconds per tuple of its process call (input port) or of its submit
    (output port, all downstream in-PE work and the send included); ``None`` when no
    sample was taken. ``samples`` counts the CPU samples behind that mean.
    """

    rate: float
    byte_rate: float
    size: float
    tuples: int
    cpu_per_tuple_s: float | None
    samples: int

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "byte_rate": self.byte_rate, "size": self.size,
                "tuples": self.tuples, "cpu_per_tuple_s": self.cpu_per_tuple_s,
                "samples": self.samples}


@dataclass(frozen=True)
class OperatorStats:
    """One operator: CPU fraction ``u`` (Equation 1, in cores) and its ingredients.

    ``cpu_per_tuple_s`` is the operator's own CPU seconds per input tuple (per output
    tuple for a source), so ``u = ref_rate * cpu_per_tuple_s`` (+ ``threads`` for an
    operator that has both input ports and threads). ``u_raw`` is the value before
    clamping to ``[0, cores]``. ``selectivity`` maps each output port to
    ``tuples out / tuples in`` (``None`` for a source).
    """

    u: float
    u_raw: float
    cpu_per_tuple_s: float
    ref_rate: float
    threads: float
    pes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    selectivity: Mapping[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {"u": self.u, "u_raw": self.u_raw, "cpu_per_tuple_s": self.cpu_per_tuple_s,
                "ref_rate": self.ref_rate, "threads": self.threads, "pes": list(self.pes),
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "selectivity": dict(sorted(self.selectivity.items()))}


@dataclass(frozen=True)
class KeyCounts:
    """A keyed input port's sampled key hashes (``profiling.keys``): the hottest keys'
    counts and the rest's. ``shares(width)`` is each channel's share of the port's tuples
    when a region splits them by the key at that width (``protocol.channel_shares``)."""

    top: Mapping[int, int]
    other: int

    def shares(self, width: int) -> list[float]:
        from spadeopt.protocol import channel_shares

        return channel_shares(dict(self.top), self.other, width)

    def to_json(self) -> dict[str, Any]:
        return {"top": {str(h): n for h, n in sorted(self.top.items())}, "other": self.other}


@dataclass(frozen=True)
class LinkStats:
    """One stream connection ``src`` (``"op.port"`` output) -> ``dst`` (``"op.port"`` input)."""

    src: str
    dst: str
    rate: float
    size: float

    @property
    def byte_rate(self) -> float:
        return self.rate * self.size

    @property
    def src_op(self) -> str:
        return self.src.split(".", 1)[0]

    @property
    def dst_op(self) -> str:
        return self.dst.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "rate": self.rate, "size": self.size,
                "byte_rate": self.byte_rate}


@dataclass(frozen=True)
class ProfileRun:
    """One profiling run a profile was refined from: where and how it ran (its run
    directory, the build's strategy and PEs, the sampling), its active window, and what
    refine found beside the operators: the FALL production probe's rates (``production``,
    ``api.profile`` writes it into the run's manifest) and how busy a one-PE run's
    sources thread was (``source_thread_busy``), both None when not measured."""

    run_dir: str
    strategy: str
    pes: int
    seed: int
    sample_rate: float
    reservoir_size: int
    started: float
    active_s: float
    production: Mapping[str, Any] | None = None
    source_thread_busy: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {"run_dir": self.run_dir, "strategy": self.strategy, "pes": self.pes, "seed": self.seed,
               "sample_rate": self.sample_rate, "reservoir_size": self.reservoir_size, "started": self.started,
               "active_s": self.active_s}
        if self.production is not None:
            doc["production"] = dict(self.production)
        if self.source_thread_busy is not None:
            doc["source_thread_busy"] = self.source_thread_busy
        return doc


@dataclass(frozen=True)
class Profile:
    """A refined profile of one application graph (one or more profiling runs merged)."""

    app: str
    graph_fingerprint: str
    params: Mapping[str, Any]
    host: str
    cpu_model: str
    cores: int
    runs: tuple[ProfileRun, ...]
    operators: Mapping[str, OperatorStats]
    inputs: Mapping[str, PortStats]
    outputs: Mapping[str, PortStats]
    links: tuple[LinkStats, ...]
    warnings: tuple[str, ...] = ()
    created: float = 0.0
    schema_version: int = field(default=SCHEMA_VERSION)
    keys: Mapping[str, KeyCounts] = field(default_factory=dict)  # keyed input port -> sampled key hashes

    # ---- what the optimizer needs ------------------------------------------------------
    @property
    def load(self) -> dict[str, float]:
        """``u`` per operator (CPU fraction, in cores)."""
        return {name: op.u for name, op in sorted(self.operators.items())}

    @property
    def source_rate(self) -> float:
        """Aggregate rate (tuples/s) of the source operators' output ports: the rate the
        loads were measured at."""
        return math.fsum(self.outputs[p].rate for op in self.operators.values() if not op.inputs
                         for p in op.outputs if p in self.outputs)

    def link_tuples(self) -> tuple[tuple[str, str, float, float], ...]:
        """``(src op, dst op, tuples/s, bytes/tuple)`` per link, as ``FusionProblem`` takes them."""
        return tuple((lk.src_op, lk.dst_op, lk.rate, lk.size) for lk in self.links)

    # ---- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "kind": KIND,
            "app": self.app,
            "graph_fingerprint": self.graph_fingerprint,
            "params": dict(self.params),
            "host": self.host,
            "cpu_model": self.cpu_model,
            "cores": self.cores,
            "created": self.created,
            "runs": [r.to_json() for r in self.runs],
            "operators": {n: o.to_json() for n, o in sorted(self.operators.items())},
            "ports": {"in": {n: p.to_json() for n, p in sorted(self.inputs.items())},
                      "out": {n: p.to_json() for n, p in sorted(self.outputs.items())}},
            "links": [lk.to_json() for lk in self.links],
            "warnings": list(self.warnings),
            "keys": {n: k.to_json() for n, k in sorted(self.keys.items())},
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the profile atomically; returns the path."""
        try:
            text = json.dumps(self.to_json(), indent=2, sort_keys=True, allow_nan=False)
        except ValueError as e:  # a NaN or infinity slipped through: never write it
            msg = f"{path}: the profile holds a non-finite number ({e}); not writing it"
            raise ProfileError(msg) from e
        return write_atomic(Path(path), text + "\n")

    @classmethod
    def load_file(cls, path: str | os.PathLike[str]) -> Profile:
        """Read and validate a profile; ``ProfileError`` names the file and the problems."""
        path = Path(path)
        data = read_json(path, "profile", _REFINE_AGAIN)
        return cls.from_json(data, path)

    @classmethod
    def from_json(cls, data: object, path: Path | str = "<profile>") -> Profile:
        if not isinstance(data, dict):
            msg = f"{path}: expected a JSON object, found {type(data).__name__}; {_REFINE_AGAIN}"
            raise ProfileError(msg)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            msg = (f"{path}: profile schema_version {version!r} is not supported (this spadeopt "
                   f"reads schema_version {SCHEMA_VERSION}); use the spadeopt version that wrote "
                   f"it, or {_REFINE_AGAIN}")
            raise ProfileError(msg)
        if data.get("kind") != KIND:
            msg = f"{path}: not a spadeopt profile ('kind' is {data.get('kind')!r}, expected {KIND!r})"
            raise ProfileError(msg)
        problems: list[str] = []
        v = _Validator(problems)
        app = v.string(data, "app")
        fp = v.string(data, "graph_fingerprint")
        params = v.obj(data, "params")
        host = v.string(data, "host", empty=True)
        cpu_model = v.string(data, "cpu_model", empty=True)
        cores = v.integer(data, "cores", minimum=1)
        created = v.number(data, "created")
        runs = [v.run(f"runs[{i}]", r) for i, r in enumerate(v.array(data, "runs"))]
        ops_raw = v.obj(data, "operators")
        ports_raw = v.obj(data, "ports")
        links_raw = v.array(data, "links")
        warnings = v.array(data, "warnings")
        operators = {name: v.operator(f"operators.{name}", o) for name, o in ops_raw.items()}
        ins = {n: v.port(f"ports.in.{n}", p) for n, p in v.obj(ports_raw, "in", "ports.").items()}
        outs = {n: v.port(f"ports.out.{n}", p) for n, p in v.obj(ports_raw, "out", "ports.").items()}
        links = tuple(v.link(f"links[{i}]", lk) for i, lk in enumerate(links_raw))
        keys = {n: v.keys(f"keys.{n}", k) for n, k in (data.get("keys") or {}).items()} \
            if isinstance(data.get("keys", {}), dict) else {}
        if not isinstance(data.get("keys", {}), dict):
            problems.append("'keys' must be an object of keyed input ports")
        for lk in links:
            if lk is not None and (lk.src_op not in operators or lk.dst_op not in operators):
                problems.append(f"link {lk.src} -> {lk.dst} names an operator not in 'operators'")
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems[:20])
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            msg = f"{path}: invalid profile ({len(problems)} problem(s)):\n{listed}{more}\n{_REFINE_AGAIN}"
            raise ProfileError(msg)
        return cls(app=app, graph_fingerprint=fp, params=params, host=host, cpu_model=cpu_model,
                   cores=cores, runs=tuple(runs), operators=operators, inputs=ins, outputs=outs,
                   links=links, warnings=tuple(str(w) for w in warnings), created=created,
                   keys={n: k for n, k in keys.items() if k is not None})


class _Validator:
    """Collects every problem of a parsed profile instead of stopping at the first."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems

    def keys(self, where: str, d: Any) -> KeyCounts | None:
        """A keyed port's ``{"top": {hash: count}, "other": count}`` (hashes as decimal strings)."""
        ok = (isinstance(d, dict) and isinstance(d.get("top"), dict) and _count(d.get("other"))
              and all(isinstance(h, str) and h.lstrip("-").isdigit() and _count(n) for h, n in d["top"].items()))
        if not ok:
            self.problems.append(f"{where} must be {{\"top\": {{hash: count}}, \"other\": count}}, found {d!r:.80}")
            return None
        return KeyCounts({int(h): n for h, n in d["top"].items()}, d["other"])

    def _get(self, d: Mapping[str, Any], key: str, what: str, ok, prefix: str = "") -> Any:
        if not isinstance(d, Mapping) or key not in d:
            self.problems.append(f"'{prefix}{key}' is missing")
            return None
        if not ok(d[key]):
            self.problems.append(f"'{prefix}{key}' must be {what}; found {d[key]!r}"[:300])
            return None
        return d[key]

    def string(self, d, key, prefix="", empty=False) -> str:
        got = self._get(d, key, "a string" if empty else "a non-empty string",
                        lambda x: isinstance(x, str) and (empty or x != ""), prefix)
        return got if got is not None else ""

    def number(self, d, key, prefix="", minimum: float | None = 0.0, optional=False) -> float | None:
        def ok(x):
            if optional and x is None:
                return True
            return _is_num(x) and (minimum is None or x >= minimum)

        what = "a finite number" + (f" >= {minimum:g}" if minimum is not None else "")
        got = self._get(d, key, what + (" or null" if optional else ""), ok, prefix)
        return float(got) if got is not None else (None if optional else 0.0)

    def integer(self, d, key, prefix="", minimum: int | None = 0) -> int:
        got = self._get(d, key, "an integer" + (f" >= {minimum}" if minimum is not None else ""),
                        lambda x: isinstance(x, int) and not isinstance(x, bool) and (minimum is None or x >= minimum),
                        prefix)
        return got if got is not None else (minimum or 0)

    def obj(self, d, key, prefix="") -> dict[str, Any]:
        got = self._get(d, key, "a JSON object", lambda x: isinstance(x, dict), prefix)
        return got if got is not None else {}

    def array(self, d, key, prefix="") -> list[Any]:
        got = self._get(d, key, "a JSON array", lambda x: isinstance(x, list), prefix)
        return got if got is not None else []

    def names(self, d, key, prefix) -> tuple[str, ...]:
        got = self._get(d, key, "a list of strings",
                        lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x), prefix)
        return tuple(got) if got is not None else ()

    def port(self, where: str, p: object) -> PortStats:
        pre = where + "."
        if not isinstance(p, dict):
            self.problems.append(f"'{where}' must be a JSON object")
            p = {}
        return PortStats(rate=self.number(p, "rate", pre), byte_rate=self.number(p, "byte_rate", pre),
                         size=self.number(p, "size", pre), tuples=self.integer(p, "tuples", pre),
                         cpu_per_tuple_s=self.number(p, "cpu_per_tuple_s", pre, None, optional=True),
                         samples=self.integer(p, "samples", pre))

    def operator(self, where: str, o: object) -> OperatorStats:
        pre = where + "."
        if not isinstance(o, dict):
            self.problems.append(f"'{where}' must be a JSON object")
            o = {}
        sel = self.obj(o, "selectivity", pre)
        for port, x in sel.items():
            if x is not None and not (_is_num(x) and x >= 0):
                self.problems.append(f"'{pre}selectivity.{port}' must be a number >= 0 or null; found {x!r}")
        return OperatorStats(u=self.number(o, "u", pre), u_raw=self.number(o, "u_raw", pre, None),
                             cpu_per_tuple_s=self.number(o, "cpu_per_tuple_s", pre, None),
                             ref_rate=self.number(o, "ref_rate", pre), threads=self.number(o, "threads", pre),
                             pes=self.names(o, "pes", pre), inputs=self.names(o, "inputs", pre),
                             outputs=self.names(o, "outputs", pre), selectivity=sel)

    def run(self, where: str, r: object) -> ProfileRun:
        pre = where + "."
        if not isinstance(r, dict):
            self.problems.append(f"'{where}' must be a JSON object")
            r = {}
        production = r.get("production")
        if production is not None and not isinstance(production, dict):
            self.problems.append(f"'{pre}production' must be a JSON object or absent; found {production!r}"[:300])
            production = None
        busy = self.number(r, "source_thread_busy", pre, optional=True) if "source_thread_busy" in r else None
        return ProfileRun(run_dir=self.string(r, "run_dir", pre), strategy=self.string(r, "strategy", pre),
                          pes=self.integer(r, "pes", pre, minimum=1), seed=self.integer(r, "seed", pre, None),
                          sample_rate=self.number(r, "sample_rate", pre),
                          reservoir_size=self.integer(r, "reservoir_size", pre),
                          started=self.number(r, "started", pre), active_s=self.number(r, "active_s", pre),
                          production=production, source_thread_busy=busy)

    def link(self, where: str, lk: object) -> LinkStats:
        pre = where + "."
        if not isinstance(lk, dict):
            self.problems.append(f"'{where}' must be a JSON object")
            lk = {}
        src, dst = self.string(lk, "src", pre), self.string(lk, "dst", pre)
        for end in (src, dst):
            if end and "." not in end:
                self.problems.append(f"'{where}' end {end!r} must be 'op.port'")
        return LinkStats(src, dst, self.number(lk, "rate", pre), self.number(lk, "size", pre))


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def read_json(path: Path, what: str, hint: str) -> Any:
    """Parse a JSON file; ``ProfileError`` naming the file when missing, unreadable or not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{path}: no such {what} file; {hint}"
        raise ProfileError(msg) from None
    except (OSError, UnicodeDecodeError) as e:
        msg = f"{path}: cannot read the {what} ({e}); {hint}"
        raise ProfileError(msg) from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        msg = (f"{path} line {e.lineno}: the {what} is not valid JSON ({e.msg}, column {e.colno}): "
               f"the file is corrupt or truncated; {hint}")
        raise ProfileError(msg) from e


def _count(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0

