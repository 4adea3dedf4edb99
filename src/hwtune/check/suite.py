"""The check suite (configs/ci.toml): which figures, how many samples, which
thresholds. Parsed and validated in full before anything is measured; every
problem names the file and the key."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from hwtune.check.stats import Thresholds
from hwtune.errors import UsageError

# Figure kinds and the parameters each takes (name: (type, default; None = required)).
KINDS: Dict[str, Dict[str, Tuple[type, Any]]] = {
    "gemm": {"M": (int, None), "K": (int, None), "N": (int, None), "threads": (int, 1)},
    # regions: the n elements as that many fork-join regions (same work,
    # more synchronisation: what only the time metric sees).
    "eltwise": {"op": (str, None), "n": (int, None), "threads": (int, 1), "regions": (int, 1)},
    "fma_peak": {"threads": (int, 1)},
    "triad": {"n": (int, None), "threads": (int, 1)},
    "model": {"model": (str, None), "vars": (dict, {}), "iterations_per_sample": (int, 1)},
    # References only: numpy's BLAS GEMM and numpy element-wise, code hwtune
    # changes never touch, so relative mode cannot divide a regression away.
    "blas_gemm": {"M": (int, None), "K": (int, None), "N": (int, None), "threads": (int, 1)},
    "numpy_eltwise": {"op": (str, "mul"), "n": (int, None)},
}
REFERENCE_KINDS = ("blas_gemm", "numpy_eltwise", "gemm", "eltwise")
# Which reference suits a figure: one that uses the machine the same way
# (compute-bound GEMM vs memory-bound streaming). Measured on the loaded
# 2-core box: GEMM/GEMM at the same thread count cut the run-to-run spread
# of a figure from 1.2-1.7x (absolute) to 1.04x; a GEMM reference for an
# element-wise figure, or a 1-thread one for a 2-thread figure, did not help.
FAMILY = {"gemm": "compute", "blas_gemm": "compute", "fma_peak": "compute", "model": "compute",
          "eltwise": "memory", "numpy_eltwise": "memory", "triad": "memory"}
# Throughput probes report a rate (higher is better); the rest report seconds.
RATE_KINDS = ("fma_peak", "triad")
DEFAULT_SUITE = Path("configs") / "ci.toml"
NUMPY_OPS = ("add", "mul")
METRICS = ("time", "cycles", "instructions", "estimated-cycles")
# Kinds whose work can be counted: the kernels' own functions are the
# counted region (hwtune.check.count.TOGGLES); a model's ops run inside the
# engine's fork-joins and schedulers, whose waits no count can separate.
COUNTABLE = ("gemm", "eltwise")


@dataclass(frozen=True)
class Figure:
    name: str
    kind: str
    params: Dict[str, Any]
    metric: Optional[str] = None   # None: the suite's

    @property
    def higher_is_better(self) -> bool:
        return self.kind in RATE_KINDS

    @property
    def unit(self) -> str:
        return {"fma_peak": "GFLOPS", "triad": "GB/s"}.get(self.kind, "s")

    @property
    def threads(self) -> int:
        return int(self.params.get("threads", 1))

    def to_json(self) -> Dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "params": dict(self.params)}
        if self.metric:
            out["metric"] = self.metric
        return out


@dataclass(frozen=True)
class Suite:
    name: str
    path: Optional[str]
    figures: List[Figure]
    references: List[Figure]
    metric: str = "time"         # figures without their own metric
    # Sequential sampling of time figures (hwtune.check.sequential): rounds
    # of `chunk` samples per side until the test decides, the first look
    # after min_rounds, at most max_rounds or max_seconds per figure.
    min_rounds: int = 8
    max_rounds: int = 400
    max_seconds: float = 60.0
    chunk: int = 3
    count_reps: int = 3           # calls per counted figure
    count_threshold: float = 0.01  # counted figures: change that fails
    sample_seconds: float = 0.01  # target length of one sample (kernels)
    # Each sample is the best (shortest time, highest rate) of this many
    # back-to-back timed runs of sample_seconds / best_of each.
    best_of: int = 1
    warmup: int = 2
    isa: Optional[str] = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    # record-or-report mode fails only on a slowdown at least this large.
    large_effect: float = 0.25
    relative: bool = False
    # Processes a recorded baseline spans (hwtune.check.levels; None: its
    # PROCESSES; below 3, one run and the single-run test).
    processes: Optional[int] = None

    def select(self, names: List[str]) -> "Suite":
        known = {f.name for f in self.figures}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown figure{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(unknown)} in suite {self.name!r}: choose from "
                             f"{', '.join(sorted(known))}")
        return replace(self, figures=[f for f in self.figures if f.name in names])

    def metric_of(self, fig: Figure) -> str:
        return fig.metric or self.metric

    def counted(self) -> Dict[str, List[Figure]]:
        """The counted figures by metric (one counting process each)."""
        out: Dict[str, List[Figure]] = {}
        for f in self.figures:
            m = self.metric_of(f)
            if m != "time":
                out.setdefault(m, []).append(f)
        return out

    def settings(self) -> Dict[str, Any]:
        """What a measuring worker needs to take a figure's samples."""
        return {"sample_seconds": self.sample_seconds, "best_of": self.best_of,
                "warmup": self.warmup, "isa": self.isa}

    def to_json(self) -> Dict[str, Any]:
        th = self.thresholds
        return {"name": self.name, "path": self.path, "metric": self.metric,
                "min_rounds": self.min_rounds, "max_rounds": self.max_rounds,
                "max_seconds": self.max_seconds, "chunk": self.chunk,
                "count_reps": self.count_reps, "count_threshold": self.count_threshold,
                "sample_seconds": self.sample_seconds,
                "best_of": self.best_of,
                "warmup": self.warmup, "isa": self.isa, "relative": self.relative,
                "processes": self.processes,
                "thresholds": {"alpha": th.alpha, "min_effect": th.min_effect,
                               "level": th.level, "large_effect": self.large_effect},
                "references": [r.to_json() for r in self.references],
                "figures": [f.to_json() for f in self.figures]}


def check_metric(metric, kind: str, where: str) -> None:
    if metric not in METRICS:
        raise UsageError(f"{where} must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric != "time" and kind not in COUNTABLE:
        raise UsageError(f"{where}: a {kind} figure can only be timed (metric {metric!r} "
                         f"counts the kernels of {' and '.join(COUNTABLE)} figures)")


def check_sampling(suite: "Suite", where=lambda k: k) -> None:
    """The sequential-sampling settings are usable (UsageError names the key)."""
    if not 3 <= suite.min_rounds <= 1000:
        raise UsageError(f"{where('suite.min_rounds')} must be in 3..1000, got "
                         f"{suite.min_rounds}")
    if not suite.min_rounds <= suite.max_rounds <= 100000:
        raise UsageError(f"{where('suite.max_rounds')} must be in min_rounds "
                         f"({suite.min_rounds})..100000, got {suite.max_rounds}")
    if not 0 < suite.max_seconds <= 3600:
        raise UsageError(f"{where('suite.max_seconds')} must be in (0, 3600], got "
                         f"{suite.max_seconds}")
    if not 1 <= suite.chunk <= 100:
        raise UsageError(f"{where('suite.chunk')} must be in 1..100, got {suite.chunk}")
    if not 1 <= suite.count_reps <= 1000:
        raise UsageError(f"{where('suite.count_reps')} must be in 1..1000, got "
                         f"{suite.count_reps}")
    if not 0 <= suite.count_threshold < 1:
        raise UsageError(f"{where('thresholds.count_threshold')} must be in [0, 1), got "
                         f"{suite.count_threshold}")
    for f in suite.figures:
        check_metric(suite.metric_of(f), f.kind, f"figure {f.name}: metric")


def suite_from_settings(settings: Mapping[str, Any], fig: Figure) -> "Suite":
    """A one-figure suite with a worker's sampling settings (Suite.settings())."""
    return Suite(name="worker", path=None, figures=[fig], references=[],
                 sample_seconds=float(settings["sample_seconds"]),
                 best_of=int(settings["best_of"]), warmup=int(settings["warmup"]),
                 isa=settings.get("isa"))


def _where(path: Optional[str], key: str) -> str:
    return f"{path}: {key}" if path else key


def _typed(value, typ, where: str):
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{where} must be an integer, got {value!r}")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{where} must be a number, got {value!r}")
        value = float(value)
    elif not isinstance(value, typ):
        raise UsageError(f"{where} must be a {typ.__name__}, got {value!r}")
    return value


DEFAULT_REFERENCE = {"kind": "blas_gemm", "M": 64, "K": 256, "N": 256, "threads": 1}


def reference_for(suite: "Suite", fig: Figure) -> Figure:
    """The reference measured beside fig: same family and thread count if
    the suite has one, else same family, else the first."""
    fam = FAMILY.get(fig.kind)
    same = [r for r in suite.references if FAMILY.get(r.kind) == fam]
    exact = [r for r in same if r.threads == fig.threads]
    return (exact or same or suite.references)[0]


def default_name(kind: str, p: Mapping[str, Any]) -> str:
    t = f"t{p.get('threads', 1)}"
    if kind == "gemm":
        return f"gemm-{p['M']}x{p['K']}x{p['N']}-{t}"
    if kind == "eltwise":
        return f"eltwise-{p['op']}-n{p['n']}-{t}"
    if kind == "triad":
        return f"triad-n{p['n']}-{t}"
    if kind == "model":
        return "model-" + Path(p["model"]).stem
    if kind == "blas_gemm":
        return f"blas-gemm-{p['M']}x{p['K']}x{p['N']}-{t}"
    if kind == "numpy_eltwise":
        return f"numpy-{p['op']}-n{p['n']}"
    return f"{kind}-{t}"


def parse_figure(raw: Any, where: str, base_dir: Optional[Path]) -> Figure:
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where} must be a table, got {raw!r}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise UsageError(f"{where}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    spec = KINDS[kind]
    extra = sorted(set(raw) - set(spec) - {"kind", "name", "metric"})
    if extra:
        raise UsageError(f"{where}: unknown key{'s' if len(extra) > 1 else ''} "
                         f"{', '.join(extra)} for kind {kind!r} (allowed: "
                         f"{', '.join(['name', 'metric', *spec])})")
    metric = raw.get("metric")
    if metric is not None:
        check_metric(metric, kind, f"{where}.metric")
    params = {}
    for key, (typ, default) in spec.items():
        if key not in raw:
            if default is None:
                raise UsageError(f"{where}.{key} is required for kind {kind!r}")
            params[key] = default
            continue
        params[key] = _typed(raw[key], typ, f"{where}.{key}")
        if typ is int and params[key] < 1:
            raise UsageError(f"{where}.{key} must be >= 1, got {params[key]}")
    if kind == "numpy_eltwise" and params["op"] not in NUMPY_OPS:
        raise UsageError(f"{where}.op must be one of {', '.join(NUMPY_OPS)}, "
                         f"got {params['op']!r}")
    if kind == "eltwise":
        from hwtune.native.bench import EW_OPS
        if params["op"] not in EW_OPS:
            raise UsageError(f"{where}.op must be one of {', '.join(EW_OPS)}, "
                             f"got {params['op']!r}")
        if params["regions"] > params["n"]:
            raise UsageError(f"{where}.regions ({params['regions']}) exceeds n "
                             f"({params['n']}): every fork-join region needs an element")
    if kind == "model":
        model = Path(params["model"])
        if not model.is_absolute() and base_dir is not None:
            model = base_dir / model
        if not model.is_file():
            # A bundled model's name (`model = "lstm_small"`), so a suite
            # copied anywhere still finds it.
            from hwtune.sources import bundled_models
            found = bundled_models().get(params["model"])
            if found is None:
                raise UsageError(f"{where}.model: no such file {model}, and no bundled model "
                                 f"named {params['model']!r}")
            model = found
        params["model"] = os.fspath(model)
    name = raw.get("name", default_name(kind, params))
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}.name must be a non-empty string, got {name!r}")
    return Figure(name.strip(), kind, params, metric)


def parse_suite(doc: Mapping[str, Any], path: Optional[str] = None) -> Suite:
    """A Suite from a parsed ci.toml document; UsageError names any bad key."""
    base_dir = Path(path).resolve().parent if path else None
    known = {"suite", "thresholds", "reference", "figure"}
    extra = sorted(set(doc) - known)
    if extra:
        raise UsageError(f"{_where(path, ', '.join(extra))}: unknown section (allowed: "
                         f"{', '.join(sorted(known))})")
    s = doc.get("suite", {})
    th = doc.get("thresholds", {})
    for sec, table in (("suite", s), ("thresholds", th)):
        if not isinstance(table, Mapping):
            raise UsageError(f"{_where(path, sec)} must be a table")
    if "samples" in s or "rounds" in s:
        raise UsageError(f"{_where(path, 'suite')}: samples and rounds are gone: time figures "
                         "are sampled until the test decides (set min_rounds, max_rounds, "
                         "max_seconds, chunk instead; see docs/check.md)")
    suite_keys = {"name": str, "metric": str, "min_rounds": int, "max_rounds": int,
                  "max_seconds": float, "chunk": int, "count_reps": int,
                  "sample_seconds": float, "best_of": int,
                  "warmup": int, "isa": str, "relative": bool, "processes": int}
    th_keys = {"alpha": float, "min_effect": float, "level": float, "large_effect": float,
               "count_threshold": float}
    for sec, table, keys in (("suite", s, suite_keys), ("thresholds", th, th_keys)):
        bad = sorted(set(table) - set(keys))
        if bad:
            raise UsageError(f"{_where(path, sec)}: unknown key {', '.join(bad)} (allowed: "
                             f"{', '.join(keys)})")
    vals = {k: _typed(s[k], typ, _where(path, f"suite.{k}")) for k, typ in suite_keys.items()
            if k in s}
    tvals = {k: _typed(th[k], typ, _where(path, f"thresholds.{k}"))
             for k, typ in th_keys.items() if k in th}
    figs_raw = doc.get("figure", [])
    if not isinstance(figs_raw, list) or not figs_raw:
        raise UsageError(f"{_where(path, 'figure')}: the suite needs at least one [[figure]]")
    figures = [parse_figure(f, _where(path, f"figure[{i}]"), base_dir)
               for i, f in enumerate(figs_raw)]
    names = [f.name for f in figures]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{_where(path, 'figure')}: duplicate figure name "
                         f"{', '.join(dup)} (give each a distinct name)")
    refs_raw = doc.get("reference", [DEFAULT_REFERENCE])
    if isinstance(refs_raw, Mapping):
        refs_raw = [refs_raw]
    if not isinstance(refs_raw, list) or not refs_raw:
        raise UsageError(f"{_where(path, 'reference')} must be a table or [[reference]] tables")
    references = []
    for i, r in enumerate(refs_raw):
        ref = parse_figure(r, _where(path, f"reference[{i}]"), base_dir)
        if ref.kind not in REFERENCE_KINDS:
            raise UsageError(f"{_where(path, f'reference[{i}]')}.kind must be one of "
                             f"{', '.join(REFERENCE_KINDS)} (a short timed kernel measured "
                             f"beside every figure), got {ref.kind!r}")
        if "name" not in r:
            ref = replace(ref, name="ref-" + default_name(ref.kind, ref.params))
        references.append(ref)
    clash = sorted({r.name for r in references} & set(names))
    if clash or len({r.name for r in references}) != len(references):
        raise UsageError(f"{_where(path, 'reference')}: reference names must be distinct from "
                         f"each other and from figures ({', '.join(clash) or 'duplicate'})")
    try:
        thresholds = Thresholds(**{k: v for k, v in tvals.items()
                                   if k not in ("large_effect", "count_threshold")}).validate()
    except ValueError as exc:
        raise UsageError(f"{_where(path, 'thresholds')}: {exc}") from None
    if "metric" in vals:
        if vals["metric"] not in METRICS:
            raise UsageError(f"{_where(path, 'suite.metric')} must be one of "
                             f"{', '.join(METRICS)}, got {vals['metric']!r}")
    extra_th = {k: tvals[k] for k in ("large_effect", "count_threshold") if k in tvals}
    suite = Suite(name=vals.get("name", Path(path).stem if path else "suite"), path=path,
                  figures=figures, references=references, thresholds=thresholds,
                  **{k: v for k, v in vals.items() if k != "name"}, **extra_th)
    check_sampling(suite, lambda key: _where(path, key))
    if suite.processes is not None and not 1 <= suite.processes <= 50:
        raise UsageError(f"{_where(path, 'suite.processes')} must be in 1..50, got "
                         f"{suite.processes}")
    if not 1 <= suite.best_of <= 100:
        raise UsageError(f"{_where(path, 'suite.best_of')} must be in 1..100, got "
                         f"{suite.best_of}")
    if not 0 < suite.sample_seconds <= 5:
        raise UsageError(f"{_where(path, 'suite.sample_seconds')} must be in (0, 5], got "
                         f"{suite.sample_seconds}")
    if suite.large_effect < thresholds.min_effect:
        raise UsageError(f"{_where(path, 'thresholds.large_effect')} ({suite.large_effect}) "
                         f"must be >= min_effect ({thresholds.min_effect})")
    return suite


def _toml():
    from hwtune.tomlread import toml_module
    return toml_module("a suite")


def default_suite_path() -> Path:
    """configs/ci.toml of the current directory (a checkout, or a suite the
    user keeps there), else the one bundled with hwtune."""
    if DEFAULT_SUITE.is_file():
        return DEFAULT_SUITE
    from hwtune.sources import default_suite
    return default_suite()


def load_suite(path=None) -> Suite:
    """Read and validate a suite file (default: default_suite_path())."""
    p = Path(path) if path is not None else default_suite_path()
    if not p.is_file():
        raise UsageError(f"suite file {p} does not exist")
    toml = _toml()
    try:
        with open(p, "rb") as f:
            doc = toml.load(f)
    except toml.TOMLDecodeError as exc:
        raise UsageError(f"{p}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read suite {p}: {exc}") from None
    return parse_suite(doc, os.fspath(p))
