r"""The paper's reported numbers and what each of its results tables is, read from data files.

Everything here is transcribed from the paper's LaTeX (Section 5 and App. G) and lives in
``gpac_utils/paper/data/``, each row with its source label:

* ``paper_tables.csv``: every cell of the six results tables (percent), one row per
  ``table, dataset, grouping, score, method, metric``;
* ``llm_accuracy.csv``: ``table:llm_accuracy`` (percent) per benchmark, pair and model;
* ``table_specs.yaml``: per table its pair, family, group method, benchmarks and the paper's
  eps; the paper's calibration ratios; display names.

``grouping`` says how a table's groups were obtained: ``known`` (G-PAC tables), ``split`` (the
paper's "disjoint" clustering, C-PAC ``mode="split"``) or ``joint``.

Benchmarks the paper does not have (the CPU walk's ``walk``, a table of your own) have no
reference eps, so :func:`benchmark_eps` asks for one, and they are split half and half between
calibration and test (:data:`DEFAULT_CAL_RATIO`) unless a ratio is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
import yaml

from ..calibrate import CALIBRATORS, CPAC_MODE

REFERENCE_DATA = Path(__file__).parent / "data"
#: The paper's three metrics, in the order of its tables.
PAPER_METRICS = ("Error", "Error_Gap", "STP")
#: Table families: which notebook builds them and how their groups are obtained.
FAMILIES = ("known", "cpac", "arena")


@dataclass(frozen=True)
class TableSpec:
    """One results table of the paper.

    Parameters
    ----------
    name : str
        File stem of the table (e.g. ``"01_results_known"``).
    label : str
        The LaTeX label (e.g. ``"table:01_results_known"``).
    pair : str
        Model pair (``"qwen"`` or ``"llama"``).
    family : str
        ``"known"``, ``"cpac"`` or ``"arena"`` (see :data:`FAMILIES`).
    method : str
        The group method compared with PAC (``"G-PAC"`` or ``"C-PAC"``).
    benchmarks : tuple of str
        Benchmarks in the table, in the paper's order.
    eps : Mapping[str, float]
        The paper's eps per benchmark.
    """

    name: str
    label: str
    pair: str
    family: str
    method: str
    benchmarks: tuple[str, ...]
    eps: Mapping[str, float]

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"table_specs.yaml: table {self.name!r} has unknown family {self.family!r}")

    @property
    def groupings(self) -> tuple[str, ...]:
        """``("known",)`` for G-PAC tables, ``("split", "joint")`` for C-PAC tables."""
        return ("known",) if CALIBRATORS[self.method].groups == "known" else CPAC_MODE.constraint.options


@cache
def _specs_file() -> dict:
    return yaml.safe_load((REFERENCE_DATA / "table_specs.yaml").read_text())


#: Every paper results table by name (from ``table_specs.yaml``).
TABLE_SPECS: dict[str, TableSpec] = {
    name: TableSpec(name=name, **{**t, "benchmarks": tuple(t["benchmarks"]), "eps": dict(t["eps"])})
    for name, t in _specs_file()["tables"].items()
}
#: The paper's calibration ratio per benchmark.
CAL_RATIO: dict[str, float] = dict(_specs_file()["cal_ratio"])
#: Calibration ratio of a benchmark the paper does not list (the walk, your own tables).
DEFAULT_CAL_RATIO = 0.5
#: Display names of benchmarks, scores and groupings in the saved tables and figures.
TITLES: dict[str, str] = dict(_specs_file()["titles"])
SCORE_LABELS: dict[str, str] = dict(_specs_file()["score_labels"])
GROUPING_LABELS: dict[str, str] = dict(_specs_file()["grouping_labels"])
#: Column headers of the long report tables, in their order.
REPORT_COLUMNS: dict[str, str] = dict(_specs_file()["report_columns"])


def table_name(family: str, pair: str) -> str:
    """The paper table of ``family`` (``known`` / ``cpac`` / ``arena``) for model ``pair``.

    Parameters
    ----------
    family : str
        Table family.
    pair : str
        Model pair.

    Returns
    -------
    str
        The table's name, e.g. ``"01_llama_results"``.
    """
    hits = [s.name for s in TABLE_SPECS.values() if s.family == family and s.pair == pair]
    if len(hits) != 1:
        pairs = sorted({s.pair for s in TABLE_SPECS.values()})
        raise ValueError(f"family/pair: no paper table for ({family!r}, {pair!r}); families {FAMILIES}, pairs {pairs}")
    return hits[0]


@cache
def _read_values(name: str) -> pd.DataFrame:
    """A table of transcribed values, read once (shared: do not modify it)."""
    # ``value`` is parsed by Python's float(), so that "3.08" is exactly the literal 3.08.
    df = pd.read_csv(REFERENCE_DATA / name, dtype={"value": str})
    df["value"] = df["value"].map(float)
    return df


def paper_long(name: str) -> pd.DataFrame:
    """The paper's numbers of table ``name`` in long form (percent).

    Parameters
    ----------
    name : str
        A key of :data:`TABLE_SPECS`.

    Returns
    -------
    pandas.DataFrame
        Columns ``table, dataset, grouping, score, method, metric, paper`` (``table`` is the name).
    """
    if name not in TABLE_SPECS:
        raise ValueError(f"name: unknown paper table {name!r}; choose one of {list(TABLE_SPECS)}")
    cells = _read_values("paper_tables.csv")
    out = cells[cells["table"] == TABLE_SPECS[name].label].rename(columns={"value": "paper"}).reset_index(drop=True)
    out["table"] = name
    return out


def benchmark_eps(
    benchmarks: Sequence[str], eps=None, paper_eps: Mapping[str, float] | None = None
) -> dict[str, float]:
    """eps per benchmark for any benchmarks, the paper's where it has one.

    Parameters
    ----------
    benchmarks : sequence of str
        Benchmarks to resolve (paper benchmarks or others, e.g. ``walk``).
    eps : None, float or Mapping[str, float]
        ``None``: the paper's; a float for every benchmark; a dict overriding some.
    paper_eps : Mapping[str, float], optional
        The paper's eps per benchmark (a :class:`TableSpec`'s ``eps``; default: none).

    Returns
    -------
    dict of str to float

    Raises
    ------
    ValueError
        For a benchmark without a paper eps and no explicit one, or dict keys outside ``benchmarks``.
    """
    paper_eps = dict(paper_eps or {})
    if eps is not None and not isinstance(eps, Mapping):
        return {b: float(eps) for b in benchmarks}
    given = dict(eps or {})
    unknown = [b for b in given if b not in benchmarks]
    if unknown:
        raise ValueError(f"eps: benchmark(s) {unknown} are not among the benchmarks run ({list(benchmarks)})")
    missing = [b for b in benchmarks if b not in given and b not in paper_eps]
    if missing:
        raise ValueError(
            f"eps: benchmark(s) {missing} are not in the paper, so there is no default eps; "
            f"give one (eps=0.2 or eps={{{missing[0]!r}: 0.2}})"
        )
    return {b: float(given.get(b, paper_eps.get(b))) for b in benchmarks}


def resolve_cal_ratio(benchmarks: Sequence[str], cal_ratio=None) -> dict[str, float]:
    """Calibration ratio per benchmark.

    Parameters
    ----------
    benchmarks : sequence of str
        Benchmarks to resolve.
    cal_ratio : None, float or Mapping[str, float]
        ``None``: the paper's (:data:`CAL_RATIO`), :data:`DEFAULT_CAL_RATIO` (0.5) for a benchmark
        the paper does not list; a float for all; a dict overriding some.

    Returns
    -------
    dict of str to float
    """
    if cal_ratio is not None and not isinstance(cal_ratio, Mapping):
        return {b: float(cal_ratio) for b in benchmarks}
    given = dict(cal_ratio or {})
    return {b: float(given.get(b, CAL_RATIO.get(b, DEFAULT_CAL_RATIO))) for b in benchmarks}


def paper_accuracy() -> pd.DataFrame:
    """The paper's ``table:llm_accuracy`` (percent), read once (a shared table: do not modify it).

    Returns
    -------
    pandas.DataFrame
        Columns ``table, dataset, pair, role (think | nothink), model, value``.
    """
    return _read_values("llm_accuracy.csv")


def accuracy(benchmark: str, pair: str, role: str) -> float:
    """One model's accuracy from ``table:llm_accuracy`` as a fraction.

    Parameters
    ----------
    benchmark, pair : str
        Benchmark and model pair.
    role : {"think", "nothink"}
        The thinking or the non-thinking model.

    Returns
    -------
    float
    """
    acc = paper_accuracy()
    hit = acc[(acc.dataset == benchmark) & (acc.pair == pair) & (acc.role == role)]
    if len(hit) != 1:
        raise KeyError(f"no paper accuracy for {(benchmark, pair, role)}")
    # percent with two decimals, back to the fraction as printed (e.g. 96.20 -> 0.962)
    return round(float(hit["value"].iloc[0]) / 100, 6)
