r"""Shared helpers of the table notebooks (``notebooks/21``–``26``, ``31``).

* the paper's reported numbers (Section 5 and App. G), transcribed from the LaTeX as data:
  :data:`PAPER_RAW`, expanded by :func:`paper_long`;
* what each paper table is (:data:`TABLE_SPECS`: pair, benchmarks, the paper's eps, known
  groups or C-PAC) and the paper's calibration ratios (:data:`CAL_RATIO`);
* :func:`run_table`: the repeated-split experiment behind one table, with the paper's settings
  (``clt`` bound, ``resample`` sampling, literal ``max`` rule) **and** valid settings
  (``bernoulli`` sampling, ``first-crossing`` rule, a finite-sample bound) in one run;
* :func:`summarize_table`, :func:`side_by_side`, :func:`paper_layout`: our numbers beside the
  paper's, as a long table (CSV) and in the paper's layout (Markdown);
* :func:`group_violations`: per-group violation rates of the guarantee (the share of trials in
  which a group's risk over the whole table exceeds eps), with Monte Carlo standard errors;
* helpers for the figures (per-category error bars, calibration-ratio curves, risk curves);
* :data:`PRESETS`: the ``fast`` / ``paper`` profiles of every notebook.

All rates returned here are fractions; the ``*_percent`` tables multiply by 100 as the paper.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import data as D
from .. import experiment as X
from ..calibrate import ALL, GroupWarning
from ..metrics import mcse
from . import plotting

SCORES = ("score_logits", "score_verbalized", "score_router")
SCORE_LABELS = {"score_logits": "Logits", "score_verbalized": "Verbalized", "score_router": "Router"}
METRICS = ("Error", "Error_Gap", "STP")
TITLES = {"math500": "MATH-500", "zebralogic": "ZebraLogic", "gpqa": "GPQA", "arena_hard": "Arena-Hard"}
#: Calibration ratio per benchmark (paper table:splitting_settings: 300/200, 500/500, 224/224).
#: Arena-Hard: the paper does not state its split; we use 0.5 like ZebraLogic and GPQA.
CAL_RATIO = {"math500": 0.6, "zebralogic": 0.5, "gpqa": 0.5, "arena_hard": 0.5}
#: The paper's settings (Section 5.1, App. F): alpha, pi, T, m = n / pi (the ``resample``
#: scheme), the CLT bound of Algorithm 1 and the literal ``max{u : UCB(u) <= eps}``.
PAPER_SETTING = {"bound": "clt", "sampling": "resample", "rule": "max"}
#: Finite-sample valid settings compared with the paper's (the tighter bound is reported).
VALID_BOUNDS = ("hoeffding_bentkus", "wsr")
VALID_SAMPLING, VALID_RULE = "bernoulli", "first-crossing"
#: Clustering names: the paper's "disjoint" clustering is C-PAC's ``mode="split"``.
CLUSTERING_LABELS = {"known": "known groups", "split": "disjoint", "joint": "joint"}


# =============================================================================================
# The paper's numbers (transcribed from the LaTeX of Section 5 and App. G)
# =============================================================================================


@dataclass(frozen=True)
class TableSpec:
    """One paper table: its label, model pair, benchmarks, eps, and method family."""

    label: str
    pair: str
    kind: str  # "known" (PAC vs G-PAC) or "cpac" (PAC vs C-PAC, disjoint and joint clustering)
    benchmarks: tuple[str, ...]
    eps: Mapping[str, float]

    @property
    def method(self) -> str:
        return "G-PAC" if self.kind == "known" else "C-PAC"

    @property
    def clusterings(self) -> tuple[str, ...]:
        return ("known",) if self.kind == "known" else ("split", "joint")


TABLE_SPECS: dict[str, TableSpec] = {
    "01_results_known": TableSpec(
        "table:01_results_known",
        "qwen",
        "known",
        ("math500", "zebralogic", "gpqa"),
        {"math500": 0.05, "zebralogic": 0.08, "gpqa": 0.15},
    ),
    "01_llama_results": TableSpec(
        "table:01_llama_results",
        "llama",
        "known",
        ("math500", "zebralogic", "gpqa"),
        {"math500": 0.42, "zebralogic": 0.20, "gpqa": 0.20},
    ),
    # the caption of table:01_results_unknown gives eps 0.05 / 0.1 / 0.15
    "01_results_unknown": TableSpec(
        "table:01_results_unknown",
        "qwen",
        "cpac",
        ("math500", "zebralogic", "gpqa"),
        {"math500": 0.05, "zebralogic": 0.10, "gpqa": 0.15},
    ),
    # the caption says "Qwen models" but the table is the Llama one (App. G.2): eps 0.4 / 0.2 / 0.15
    "01_results_unknown_llama": TableSpec(
        "table:01_results_unknown_llama",
        "llama",
        "cpac",
        ("math500", "zebralogic", "gpqa"),
        {"math500": 0.40, "zebralogic": 0.20, "gpqa": 0.15},
    ),
    "arena_results": TableSpec("table:arena_results", "qwen", "cpac", ("arena_hard",), {"arena_hard": 0.10}),
    "arena_results_llama": TableSpec(
        "table:arena_results_llama", "llama", "cpac", ("arena_hard",), {"arena_hard": 0.15}
    ),
}
#: table name by (kind, pair, verifiable?) — what a notebook writes for a given pair.
TABLE_NAMES = {
    ("known", "qwen"): "01_results_known",
    ("known", "llama"): "01_llama_results",
    ("cpac", "qwen"): "01_results_unknown",
    ("cpac", "llama"): "01_results_unknown_llama",
    ("arena", "qwen"): "arena_results",
    ("arena", "llama"): "arena_results_llama",
}

# Column order of every row below, as in the LaTeX: for the known-group tables
#   Logits PAC, Logits G-PAC, Verbalized PAC, Verbalized G-PAC, Router PAC, Router G-PAC;
# for the C-PAC tables the same six for disjoint clustering, then six for joint clustering.
# Values in percent.
PAPER_RAW: dict[str, dict[str, dict[str, list[float]]]] = {
    "01_results_known": {
        "math500": {
            "Error": [3.08, 2.78, 3.24, 2.57, 3.26, 2.63],
            "Error_Gap": [1.02, 0.00, 0.11, 0.00, 1.63, 0.00],
            "STP": [56.86, 43.44, 61.14, 41.63, 59.20, 49.30],
        },
        "zebralogic": {
            "Error": [6.04, 4.21, 4.76, 4.01, 6.23, 4.35],
            "Error_Gap": [10.30, 0.00, 3.00, 0.00, 8.84, 0.00],
            "STP": [27.65, 10.90, 4.97, 8.53, 34.54, 34.32],
        },
        "gpqa": {
            "Error": [11.24, 11.59, 10.86, 10.82, 11.57, 11.34],
            "Error_Gap": [0.30, 0.00, 0.00, 0.00, 0.00, 0.00],
            "STP": [8.73, 13.78, 17.07, 19.60, 34.21, 30.54],
        },
    },
    "01_llama_results": {
        "math500": {
            "Error": [37.28, 32.16, 36.52, 32.18, 37.17, 32.99],
            "Error_Gap": [19.27, 0.00, 12.47, 0.00, 16.20, 0.00],
            "STP": [12.55, 2.91, 11.32, -2.21, 26.01, 23.04],
        },
        "zebralogic": {
            "Error": [17.33, 11.43, 17.05, 11.13, 17.20, 11.13],
            "Error_Gap": [16.20, 0.00, 15.37, 0.00, 15.55, 0.00],
            "STP": [23.72, 13.23, -30.68, -9.52, 25.22, 25.98],
        },
        "gpqa": {
            "Error": [12.38, 12.40, 11.44, 11.91, 11.89, 11.90],
            "Error_Gap": [7.03, 0.00, 0.00, 0.00, 0.00, 0.00],
            "STP": [18.13, 23.47, 42.52, 36.87, 39.67, 39.88],
        },
    },
    "01_results_unknown": {
        "math500": {
            "Error": [3.03, 2.56, 2.70, 2.25, 2.94, 2.88, 3.34, 2.45, 3.24, 2.44, 3.34, 2.92],
            "Error_Gap": [0.17, 0.00, 0.00, 0.00, 0.00, 0.00, 1.02, 0.00, 0.33, 0.00, 0.14, 0.00],
            "STP": [50.95, 43.19, 47.47, 35.01, 54.10, 53.04, 58.34, 45.79, 60.48, 42.73, 59.29, 54.51],
        },
        "zebralogic": {
            "Error": [7.69, 5.41, 6.67, 5.99, 7.36, 6.77, 7.51, 5.45, 6.67, 5.97, 7.77, 6.74],
            "Error_Gap": [1.98, 0.00, 0.00, 0.00, 1.49, 0.00, 1.44, 0.00, 0.00, 0.00, 2.20, 0.00],
            "STP": [36.07, 18.99, 20.68, 10.87, 39.01, 35.38, 35.72, 18.95, 21.06, 10.55, 40.34, 35.34],
        },
        "gpqa": {
            "Error": [11.57, 11.21, 11.24, 9.46, 11.79, 11.36, 11.27, 11.57, 11.00, 8.87, 11.91, 11.60],
            "Error_Gap": [0.00, 0.00, 0.06, 0.00, 1.68, 0.00, 0.38, 0.00, 0.00, 0.00, 1.36, 0.00],
            "STP": [11.28, 10.32, 18.86, 5.98, 34.64, 30.39, 9.05, 10.87, 18.21, 0.54, 34.91, 29.75],
        },
    },
    "01_results_unknown_llama": {
        "math500": {
            "Error": [33.22, 33.78, 33.38, 31.64, 33.54, 34.41, 35.08, 34.06, 34.86, 32.37, 35.34, 34.83],
            "Error_Gap": [8.22, 0.00, 7.68, 0.00, 2.16, 0.00, 8.36, 0.00, 8.90, 0.00, 4.07, 0.00],
            "STP": [3.29, 8.40, 3.51, 0.40, 24.28, 22.63, 7.99, 8.96, 7.91, 0.96, 26.47, 23.59],
        },
        "zebralogic": {
            "Error": [16.53, 15.21, 16.26, 12.32, 16.05, 16.38, 16.82, 15.88, 16.15, 12.27, 16.24, 16.57],
            "Error_Gap": [3.10, 0.00, 13.62, 0.00, 3.74, 0.00, 3.70, 0.00, 13.43, 0.00, 4.20, 0.00],
            "STP": [21.81, 13.31, -30.62, -31.89, 23.33, 22.65, 22.75, 17.03, -32.76, -32.38, 23.75, 23.23],
        },
        "gpqa": {
            "Error": [11.96, 11.98, 12.14, 12.11, 12.29, 11.84, 12.65, 11.92, 12.02, 11.77, 12.34, 11.92],
            "Error_Gap": [10.75, 0.00, 5.66, 0.00, 10.47, 0.00, 12.32, 0.00, 5.53, 0.00, 11.05, 0.00],
            "STP": [16.75, 32.73, 38.86, 34.85, 40.77, 37.83, 18.89, 31.53, 38.51, 31.36, 41.27, 37.19],
        },
    },
    # table:arena_results / arena_results_llama are printed as rows (score, method) x metrics;
    # transposed here into the same 12-column order as the C-PAC tables.
    "arena_results": {
        "arena_hard": {
            "Error": [8.84, 8.54, 8.63, 5.27, 8.90, 8.84, 8.94, 8.69, 8.67, 5.17, 8.94, 8.77],
            "Error_Gap": [0.00, 0.00, 3.68, 0.00, 4.44, 0.00, 0.00, 0.00, 4.04, 0.00, 4.69, 0.00],
            "STP": [51.77, 47.01, 30.07, 10.91, 33.07, 42.34, 52.25, 49.32, 30.15, 10.30, 33.39, 42.02],
        },
    },
    "arena_results_llama": {
        "arena_hard": {
            "Error": [13.51, 13.08, 13.34, 12.61, 13.16, 13.18, 13.46, 13.32, 13.23, 12.70, 13.30, 13.20],
            "Error_Gap": [3.88, 0.00, 6.35, 0.00, 8.67, 0.00, 3.91, 0.00, 7.10, 0.00, 9.38, 0.00],
            "STP": [42.70, 36.63, 29.49, 22.50, 13.00, 36.32, 42.62, 38.05, 28.95, 23.06, 13.49, 35.96],
        },
    },
}


def paper_long(name: str) -> pd.DataFrame:
    """The paper's numbers of table ``name`` in long form (percent).

    Columns: ``table, dataset, clustering, score, method, metric, paper``; ``clustering`` is
    ``known`` (G-PAC tables), ``split`` (the paper's "disjoint") or ``joint``.
    """
    if name not in PAPER_RAW:
        raise ValueError(f"unknown paper table {name!r}; choose one of {list(PAPER_RAW)}")
    spec = TABLE_SPECS[name]
    cols = [(c, s, m) for c in spec.clusterings for s in SCORES for m in ("PAC", spec.method)]
    rows = []
    for dataset, metrics in PAPER_RAW[name].items():
        for metric, values in metrics.items():
            if len(values) != len(cols):
                raise ValueError(f"{name}/{dataset}/{metric}: {len(values)} values, expected {len(cols)}")
            for (c, s, m), v in zip(cols, values):
                rows.append(
                    {
                        "table": name,
                        "dataset": dataset,
                        "clustering": c,
                        "score": s,
                        "method": m,
                        "metric": metric,
                        "paper": float(v),
                    }
                )
    return pd.DataFrame(rows)


def paper_value(name: str, dataset: str, score: str, method: str, metric: str, clustering: str | None = None) -> float:
    """One transcribed number (percent), e.g. ``paper_value("01_results_known", "math500",
    "score_logits", "PAC", "Error") == 3.08``."""
    df = paper_long(name)
    sel = (df.dataset == dataset) & (df.score == score) & (df.method == method) & (df.metric == metric)
    if clustering is not None:
        sel &= df.clustering == clustering
    hit = df[sel]
    if len(hit) != 1:
        raise KeyError(f"{len(hit)} paper values for {(name, dataset, clustering, score, method, metric)}")
    return float(hit["paper"].iloc[0])


# =============================================================================================
# Running one table
# =============================================================================================


def resolve_eps(name: str, eps=None) -> dict[str, float]:
    """eps per benchmark of table ``name``: the paper's, a float for all, or a dict override."""
    spec = TABLE_SPECS[name]
    if eps is None:
        return dict(spec.eps)
    if isinstance(eps, Mapping):
        return {b: float(eps.get(b, spec.eps[b])) for b in spec.benchmarks}
    return {b: float(eps) for b in spec.benchmarks}


def resolve_cal_ratio(benchmarks: Sequence[str], cal_ratio=None) -> dict[str, float]:
    """Calibration ratio per benchmark: the paper's (:data:`CAL_RATIO`), a float, or a dict."""
    if cal_ratio is None:
        return {b: CAL_RATIO[b] for b in benchmarks}
    if isinstance(cal_ratio, Mapping):
        return {b: float(cal_ratio.get(b, CAL_RATIO[b])) for b in benchmarks}
    return {b: float(cal_ratio) for b in benchmarks}


def _quiet(fn, *args, **kw):
    # Small learned/known groups that cannot be calibrated always think (GroupWarning): that is
    # part of the method; the notebooks report efficiency, so the warnings are silenced here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        return fn(*args, **kw)


def run_table(
    name: str,
    tables: Mapping[str, pd.DataFrame],
    *,
    scores: Sequence[str] = SCORES,
    eps=None,
    alpha: float = 0.05,
    pi: float = 0.5,
    trials: int = 100,
    cal_ratio=None,
    bound: str = "clt",
    sampling: str = "resample",
    rule: str = "max",
    valid_bounds: Sequence[str] = VALID_BOUNDS,
    valid_sampling: str = VALID_SAMPLING,
    valid_rule: str = VALID_RULE,
    clusterings: Sequence[str] | None = None,
    k: int = 3,
    clustering_method: str = "kmeans",
    loss_bound: float = 1.0,
    seed: int = 0,
) -> pd.DataFrame:
    """All trials of table ``name`` on ``tables`` (``{benchmark: table}``).

    Runs PAC and the table's group method with the paper-style setting (``bound``,
    ``sampling``, ``rule``) on the same splits, then the group method alone with every bound in
    ``valid_bounds`` (``valid_sampling``, ``valid_rule``). For C-PAC tables the valid runs use
    ``mode="split"`` only: the joint mode's guarantee (Thm 3.4.2) carries an extra term.

    Returns the tidy rows of :func:`gpac_utils.experiment.run_experiment` plus ``dataset``,
    ``clustering`` (``known`` / ``split`` / ``joint``), ``setting`` (``paper`` / ``valid``) and
    ``eps``.
    """
    spec = TABLE_SPECS[name]
    eps_map = resolve_eps(name, eps)
    missing = [b for b in spec.benchmarks if b not in tables]
    if missing:
        raise ValueError(f"table {name} needs data for {missing}; got {list(tables)}")
    ratios = resolve_cal_ratio(spec.benchmarks, cal_ratio)
    clusterings = tuple(clusterings) if clusterings is not None else spec.clusterings
    bad = [c for c in clusterings if c not in spec.clusterings]
    if bad:
        raise ValueError(f"clusterings {bad} do not apply to {name} (it has {spec.clusterings})")
    group_method = "gpac" if spec.kind == "known" else "cpac"
    paper_var = {"bound": bound, "sampling": sampling, "rule": rule}
    valid_vars = [{"bound": b, "sampling": valid_sampling, "rule": valid_rule} for b in valid_bounds]
    out = []
    for b in spec.benchmarks:
        common = dict(
            eps=eps_map[b],
            scores=list(scores),
            alpha=alpha,
            pi=pi,
            trials=trials,
            cal_ratio=ratios[b],
            k=k,
            clustering=clustering_method,
            loss_bound=loss_bound,
            seed=seed,
            progress=False,
        )
        for c in clusterings:
            mode = "split" if c == "known" else c
            r = _quiet(
                X.run_experiment,
                tables[b],
                methods=("pac", group_method),
                variants=[paper_var],
                cpac_mode=mode,
                **common,
            )
            r["setting"] = "paper"
            parts = [r]
            if valid_vars and c != "joint":
                v = _quiet(
                    X.run_experiment, tables[b], methods=(group_method,), variants=valid_vars, cpac_mode=mode, **common
                )
                v["setting"] = "valid"
                parts.append(v)
            for p in parts:
                p.insert(0, "clustering", c)
                p.insert(0, "dataset", b)
                p["eps"] = eps_map[b]
            out.extend(parts)
    return pd.concat(out, ignore_index=True)


GROUP_KEYS = ["dataset", "clustering", "setting"] + X.KEYS


def group_violations(results: pd.DataFrame) -> pd.DataFrame:
    """Per group: share of trials whose risk over the whole table exceeds eps, with its MCSE.

    Treating the table as the population, a valid group-conditional method keeps every group's
    rate at most ``alpha`` (up to Monte Carlo error); ``summarize``'s ``violation_rate`` is
    instead the share of trials in which *any* group is violated (up to ``k * alpha``).
    """
    per = results[results.group != ALL]
    viol = (per["pop_risk"] > per["eps"]).astype(float)
    g = per.assign(violated=viol).groupby(GROUP_KEYS + ["group"], sort=False)
    out = g.agg(
        violation=("violated", "mean"),
        trials=("trial", "nunique"),
        mean_error=("error", "mean"),
        sd_error=("error", "std"),
        mean_pop_risk=("pop_risk", "mean"),
        n_test=("n_test", "mean"),
    ).reset_index()
    out["violation_mcse"] = mcse(out["violation"].to_numpy(), out["trials"].to_numpy())
    return out


def summarize_table(results: pd.DataFrame) -> pd.DataFrame:
    """Paper metrics per (dataset, clustering, setting, method, score, variant), in percent.

    Columns: Error, Error_Gap, STP, Efficiency (% routed to the non-thinking model),
    Violation (share of trials with *some* group's whole-table risk above eps),
    Max_group_violation (largest per-group violation rate) and its MCSE, worst_group, trials.
    """
    rows = []
    gv = group_violations(results)
    for (dataset, clustering, setting), df in results.groupby(["dataset", "clustering", "setting"], sort=False):
        eps = float(df["eps"].iloc[0])
        s = X.summarize(df, eps)
        s.insert(0, "setting", setting)
        s.insert(0, "clustering", clustering)
        s.insert(0, "dataset", dataset)
        s["eps"] = eps
        rows.append(s)
    s = pd.concat(rows, ignore_index=True)
    worst = (
        gv.sort_values("violation", ascending=False, kind="stable")
        .groupby(GROUP_KEYS, sort=False)
        .head(1)
        .rename(
            columns={
                "violation": "Max_group_violation",
                "violation_mcse": "Max_group_violation_mcse",
                "group": "most_violated_group",
            }
        )
    )
    s = s.merge(
        worst[GROUP_KEYS + ["Max_group_violation", "Max_group_violation_mcse", "most_violated_group"]],
        on=GROUP_KEYS,
        how="left",
    )
    s = s.rename(columns={"efficiency": "Efficiency", "violation_rate": "Violation"})
    for c in (
        "Error",
        "Error_Gap",
        "STP",
        "Efficiency",
        "Violation",
        "Max_group_violation",
        "Max_group_violation_mcse",
        "worst_group_error",
    ):
        s[c] = 100 * s[c]
    return s


def pick_valid_bound(summary: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """The valid bound with the highest mean efficiency of the group method (ties: the first).

    Returns the name (``None`` without valid rows) and the comparison table (mean Efficiency,
    STP and Max_group_violation per bound, over datasets and scores).
    """
    v = summary[summary.setting == "valid"]
    if v.empty:
        return None, pd.DataFrame()
    comp = v.groupby("bound", sort=False)[["Efficiency", "STP", "Error", "Max_group_violation"]].mean().reset_index()
    best = comp.sort_values("Efficiency", ascending=False, kind="stable")["bound"].iloc[0]
    return str(best), comp


def side_by_side(summary: pd.DataFrame, name: str | None) -> pd.DataFrame:
    """Our summary (percent) beside the paper's numbers: one row per (dataset, clustering,
    score, method, setting, bound), with ``paper_Error``, ``paper_Error_Gap``, ``paper_STP``
    (NaN where the paper has no such row, e.g. the valid settings) and ``diff_*`` = ours - paper.

    Paper numbers are attached to the rows run with the paper's setting only.
    """
    need = {"dataset", "clustering", "score", "method", "setting", "Error", "Error_Gap", "STP"}
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}")
    out = summary.copy()
    for m in METRICS:
        out[f"paper_{m}"] = np.nan
    if name is not None:
        wide = (
            paper_long(name)
            .pivot_table(index=["dataset", "clustering", "score", "method"], columns="metric", values="paper")
            .reset_index()
        )
        wide = wide.rename(columns={m: f"paper_{m}" for m in METRICS})
        wide["setting"] = "paper"
        out = out.drop(columns=[f"paper_{m}" for m in METRICS]).merge(
            wide, on=["dataset", "clustering", "score", "method", "setting"], how="left"
        )
    for m in METRICS:
        out[f"diff_{m}"] = out[m] - out[f"paper_{m}"]
    return out


def report_table(side: pd.DataFrame) -> pd.DataFrame:
    """The saved long table: readable column names, one row per method/setting, paper beside ours."""
    cols = {
        "dataset": "Dataset",
        "clustering": "Clustering",
        "score": "Score",
        "method": "Method",
        "setting": "Setting",
        "bound": "Bound",
        "sampling": "Sampling",
        "rule": "Rule",
        "eps": "eps",
        "Error": "Error (%)",
        "paper_Error": "Error paper (%)",
        "Error_Gap": "Error_Gap (%)",
        "paper_Error_Gap": "Error_Gap paper (%)",
        "STP": "STP (%)",
        "paper_STP": "STP paper (%)",
        "Efficiency": "Efficiency (%)",
        "Violation": "Violation any group (%)",
        "Max_group_violation": "Max group violation (%)",
        "Max_group_violation_mcse": "Max group violation MCSE (%)",
        "most_violated_group": "Most violated group",
        "worst_group": "Worst group (test error)",
        "trials": "Trials",
    }
    out = side[[c for c in cols if c in side.columns]].rename(columns=cols)
    out["Dataset"] = out["Dataset"].map(lambda b: TITLES.get(b, b))
    out["Clustering"] = out["Clustering"].map(lambda c: CLUSTERING_LABELS.get(c, c))
    out["Score"] = out["Score"].map(lambda s: SCORE_LABELS.get(s, s))
    return out


def _cell(ours, paper) -> str:
    if pd.isna(ours):
        return ""
    return f"{ours:.2f}" if pd.isna(paper) else f"{ours:.2f} ({paper:.2f})"


LAYOUT_ROWS = (
    ("Error", "Error (%)"),
    ("Error_Gap", "Error_Gap (%)"),
    ("STP", "STP (%)"),
    ("Max_group_violation", "Violation (%)"),
)


def paper_layout(
    side: pd.DataFrame, valid_bound: str | None = None, rows: Sequence[tuple[str, str]] = LAYOUT_ROWS
) -> pd.DataFrame:
    """The paper's layout: rows (dataset, clustering, metric), columns (score, method).

    Cells read ``ours (paper)`` in percent. Besides the paper's PAC and G-PAC/C-PAC columns
    there is one per score for the group method with the valid setting (``valid_bound``, or
    the first valid bound present), and besides Error / Error_Gap / STP a row ``Violation``
    (largest per-group violation rate, %; the paper has no such row). ``rows`` lists
    (summary column, label) pairs, e.g. add ``("Efficiency", "Efficiency (%)")``.
    """
    out = []
    paper = side[side.setting == "paper"]
    valid = side[side.setting == "valid"]
    if valid_bound is None and not valid.empty:
        valid_bound = str(valid["bound"].iloc[0])
    valid = valid[valid.bound == valid_bound] if valid_bound is not None else valid
    for (dataset, clustering), df in side.groupby(["dataset", "clustering"], sort=False):
        for metric, label in rows:
            row = {
                "Dataset": TITLES.get(dataset, dataset),
                "Clustering": CLUSTERING_LABELS.get(clustering, clustering),
                "Metric": label,
            }
            for score in dict.fromkeys(df["score"]):
                p = paper[(paper.dataset == dataset) & (paper.clustering == clustering) & (paper.score == score)]
                for method in dict.fromkeys(p["method"]):
                    r = p[p.method == method].iloc[0]
                    ref = r.get(f"paper_{metric}", np.nan) if metric in METRICS else np.nan
                    row[f"{SCORE_LABELS.get(score, score)} {method}"] = _cell(r[metric], ref)
                v = valid[(valid.dataset == dataset) & (valid.clustering == clustering) & (valid.score == score)]
                if not v.empty:
                    r = v.iloc[0]
                    row[f"{SCORE_LABELS.get(score, score)} {r['method']} valid"] = _cell(r[metric], np.nan)
            out.append(row)
    return pd.DataFrame(out).fillna("")


def save_tables(
    summary: pd.DataFrame,
    name: str | None,
    valid_bound: str | None,
    file_name: str | None = None,
    layout_suffix: str = "_paper_layout",
    rows: Sequence[tuple[str, str]] = LAYOUT_ROWS,
):
    """Write the long table ``<file>.csv|.md`` and the paper layout ``<file><suffix>.csv|.md``.

    ``name`` is the paper table (``None`` for tables with no paper numbers); ``file_name``
    defaults to it. Returns ``(side_by_side, layout)``.
    """
    file_name = file_name or name
    side = side_by_side(summary, name)
    plotting.save_table(report_table(side), file_name)
    layout = paper_layout(side, valid_bound, rows=rows)
    plotting.save_table(layout, f"{file_name}{layout_suffix}")
    return side, layout


# =============================================================================================
# Figures
# =============================================================================================


def category_errors(results: pd.DataFrame, setting: str = "paper") -> pd.DataFrame:
    """Mean and standard deviation over trials of the test error per (dataset, score, method,
    group), ``group == "Overall"`` for the whole test set (fractions)."""
    r = results[results.setting == setting]
    g = r.groupby(["dataset", "clustering", "score", "method", "group"], sort=False)["error"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["group"] = out["group"].replace({ALL: "Overall"})
    return out


def plot_category_errorbars(
    cat: pd.DataFrame,
    eps: Mapping[str, float],
    *,
    colors: Mapping[str, str],
    scores: Sequence[str] | None = None,
    title: str = "",
):
    """fig:errorbar_category: one panel per (benchmark, score); bars per category and method
    (mean test error over trials, ± 1 sd), overall first, eps as a red dashed line."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(cat["dataset"]))
    scores = list(scores) if scores is not None else list(dict.fromkeys(cat["score"]))
    fig, axes = plt.subplots(
        len(datasets), len(scores), figsize=(4.6 * len(scores), 3.1 * len(datasets)), squeeze=False
    )
    for i, b in enumerate(datasets):
        for j, s in enumerate(scores):
            ax = axes[i, j]
            sub = cat[(cat.dataset == b) & (cat.score == s)]
            groups = ["Overall"] + sorted(g for g in dict.fromkeys(sub["group"]) if g != "Overall")
            methods = list(dict.fromkeys(sub["method"]))
            width = 0.8 / max(1, len(methods))
            x = np.arange(len(groups))
            for mi, m in enumerate(methods):
                mm = sub[sub.method == m].set_index("group").reindex(groups)
                sd = mm["std"].fillna(0).to_numpy()
                lower = np.minimum(sd, mm["mean"].to_numpy())  # errors cannot go below 0
                ax.bar(
                    x + (mi - (len(methods) - 1) / 2) * width,
                    100 * mm["mean"],
                    width,
                    yerr=100 * np.vstack([lower, sd]),
                    capsize=2,
                    color=colors.get(m),
                    label=m,
                    error_kw={"elinewidth": 0.8},
                )
            ax.axhline(100 * eps[b], color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
            ax.set_xticks(x, [g if len(g) <= 12 else g[:11] + "." for g in groups], rotation=35, ha="right", fontsize=7)
            ax.set_title(f"{TITLES.get(b, b)} — {SCORE_LABELS.get(s, s)}", fontsize=9)
            if j == 0:
                ax.set_ylabel("test error (%)")
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def run_calibration_ratio(
    tables: Mapping[str, pd.DataFrame],
    eps: Mapping[str, float],
    ratios: Sequence[float],
    *,
    scores: Sequence[str] = SCORES,
    alpha: float = 0.05,
    pi: float = 0.5,
    trials: int = 100,
    bound: str = "clt",
    sampling: str = "resample",
    rule: str = "max",
    seed: int = 0,
) -> pd.DataFrame:
    """PAC vs G-PAC at several calibration ratios (fig:results_calibration_ratio_*).

    Returns one summary row (percent) per (dataset, ratio, method, score).
    """
    rows = []
    for b, df in tables.items():
        for ratio in ratios:
            r = _quiet(
                X.run_experiment,
                df,
                eps=eps[b],
                methods=("pac", "gpac"),
                scores=list(scores),
                variants=[{"bound": bound, "sampling": sampling, "rule": rule}],
                alpha=alpha,
                pi=pi,
                trials=trials,
                cal_ratio=float(ratio),
                seed=seed,
                progress=False,
            )
            s = X.summarize(r, eps[b])
            s.insert(0, "cal_ratio", float(ratio))
            s.insert(0, "dataset", b)
            s["eps"] = eps[b]
            rows.append(s)
    out = pd.concat(rows, ignore_index=True)
    for c in ("Error", "Error_Gap", "STP", "efficiency", "violation_rate", "worst_group_error"):
        out[c] = 100 * out[c]
    return out


def plot_calibration_ratio(summary: pd.DataFrame, *, colors: Mapping[str, str]):
    """Rows: benchmarks; columns: Error, Error_Gap, STP against the calibration ratio.
    Colour = method, marker/line style = score; eps as a red dashed line on the Error panel."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(summary["dataset"]))
    styles = {"score_logits": ("o", "-"), "score_verbalized": ("s", "--"), "score_router": ("^", ":")}
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.2 * len(datasets)), squeeze=False)
    for i, b in enumerate(datasets):
        sub = summary[summary.dataset == b]
        for j, (metric, label) in enumerate(
            (("Error", "Error (%)"), ("Error_Gap", r"Error$_{Gap}$ (%)"), ("STP", "STP (%)"))
        ):
            ax = axes[i, j]
            for (m, s), d in sub.groupby(["method", "score"], sort=False):
                mk, ls = styles.get(s, ("o", "-"))
                d = d.sort_values("cal_ratio")
                ax.plot(
                    d["cal_ratio"],
                    d[metric],
                    marker=mk,
                    ls=ls,
                    color=colors.get(m),
                    ms=4,
                    label=f"{m} / {SCORE_LABELS.get(s, s)}",
                )
            if metric == "Error":
                ax.axhline(100 * float(sub["eps"].iloc[0]), color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
            ax.set_xlabel("calibration ratio")
            ax.set_ylabel(label)
            ax.set_title(f"{TITLES.get(b, b)}: {label}", fontsize=9)
            if i == 0 and j == 2:
                ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    return fig


def group_risk_curves(table: pd.DataFrame, score: str, grid: np.ndarray | None = None) -> pd.DataFrame:
    """Population risk curves ``R(u | G_j) = E[loss 1{U <= u} | G_j]`` over the whole table,
    per known group and overall (``group == "Overall"``), on ``grid`` (default: 201 points)."""
    grid = np.linspace(0, 1, 201) if grid is None else np.asarray(grid, float)
    u = table[score].to_numpy(float)
    loss = table[D.LOSS].to_numpy(float)
    rows = []
    groups = [("Overall", np.ones(len(u), bool))]
    if D.GROUP in table.columns:
        g = table[D.GROUP].to_numpy(str)
        groups += [(name, g == name) for name in sorted(set(g.tolist()))]
    for name, m in groups:
        uu, ll = u[m], loss[m]
        order = np.argsort(uu, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(ll[order])]) / m.sum()
        idx = np.searchsorted(uu[order], grid, side="right")
        rows.append(
            pd.DataFrame({"group": name, "u": grid, "risk": cum[idx], "routed": idx / m.sum(), "n": int(m.sum())})
        )
    return pd.concat(rows, ignore_index=True)


def population_thresholds(table: pd.DataFrame, score: str, eps: float) -> pd.DataFrame:
    """The largest threshold with population risk <= eps, overall and per group (exact, over
    the distinct scores), with the resulting per-group risk and share routed to the
    non-thinking model under the single (PAC) and the per-group (G-PAC) thresholds, and the
    share an item-wise oracle could route (loss <= eps item by item: "conditional" PAC)."""
    u = table[score].to_numpy(float)
    loss = table[D.LOSS].to_numpy(float)
    g = table[D.GROUP].to_numpy(str) if D.GROUP in table.columns else np.full(len(u), "all")

    def best(uu, ll):
        cand = np.unique(uu)
        risk = np.array([np.mean(ll * (uu <= c)) for c in cand])
        ok = risk <= eps
        return float(cand[ok].max()) if ok.any() else -math.inf

    t_all = best(u, loss)
    rows = []
    for name in sorted(set(g.tolist())):
        m = g == name
        t_g = best(u[m], loss[m])
        rows.append(
            {
                "group": name,
                "n": int(m.sum()),
                "pac_threshold": t_all,
                "pac_risk": float(np.mean(loss[m] * (u[m] <= t_all))),
                "pac_routed": float(np.mean(u[m] <= t_all)),
                "gpac_threshold": t_g,
                "gpac_risk": float(np.mean(loss[m] * (u[m] <= t_g))),
                "gpac_routed": float(np.mean(u[m] <= t_g)),
                "oracle_routed": float(np.mean(loss[m] <= eps)),
            }
        )
    return pd.DataFrame(rows)


def ece_table(tables: Mapping[str, pd.DataFrame], scores: Sequence[str] = SCORES, n_bins: int = 10) -> pd.DataFrame:
    """ECE (%) of the confidence ``1 - U`` against ``nothink_correct``, per benchmark and score
    (equal-width bins, :func:`gpac_utils.llm.scoring.expected_calibration_error`)."""
    from ..llm.scoring import expected_calibration_error

    rows = []
    for b, df in tables.items():
        if D.NOTHINK_CORRECT not in df.columns:
            raise ValueError(f"{b}: ECE needs column {D.NOTHINK_CORRECT!r}")
        for s in scores:
            conf = 1.0 - df[s].to_numpy(float)
            rows.append(
                {
                    "dataset": b,
                    "score": s,
                    "n": len(df),
                    "ECE": 100 * expected_calibration_error(conf, df[D.NOTHINK_CORRECT], n_bins),
                    "mean_confidence": 100 * conf.mean(),
                    "accuracy": 100 * df[D.NOTHINK_CORRECT].mean(),
                }
            )
    return pd.DataFrame(rows)


def plot_reliability_grid(tables: Mapping[str, pd.DataFrame], scores: Sequence[str] = SCORES, n_bins: int = 10):
    """fig:expected_error_uncertainty: one reliability diagram per (benchmark, score) — accuracy
    of the non-thinking model per confidence bin (bars, width = bin), the gap to the bin's mean
    confidence (hatched), the diagonal, and the ECE in the title."""
    import matplotlib.pyplot as plt

    from ..llm.scoring import expected_calibration_error, reliability_curve

    fig, axes = plt.subplots(len(tables), len(scores), figsize=(3.4 * len(scores), 3.2 * len(tables)), squeeze=False)
    for i, (b, df) in enumerate(tables.items()):
        for j, s in enumerate(scores):
            ax = axes[i, j]
            conf = 1.0 - df[s].to_numpy(float)
            correct = df[D.NOTHINK_CORRECT].to_numpy(float)
            curve = reliability_curve(conf, correct, n_bins)
            ece = expected_calibration_error(conf, correct, n_bins)
            filled = curve["n"] > 0
            width = 1.0 / n_bins
            c = curve[filled]
            ax.bar(
                c["bin_lo"],
                c["accuracy"],
                width=width,
                align="edge",
                color="#2a9d8f",
                edgecolor="white",
                label="accuracy",
            )
            ax.bar(
                c["bin_lo"],
                (c["mean_confidence"] - c["accuracy"]).abs(),
                bottom=np.minimum(c["accuracy"], c["mean_confidence"]),
                width=width,
                align="edge",
                color="none",
                edgecolor="#e76f51",
                hatch="///",
                lw=0.8,
                label="gap to mean confidence",
            )
            ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_title(f"{TITLES.get(b, b)} ({SCORE_LABELS.get(s, s)}): ECE = {100 * ece:.1f}%", fontsize=8)
            ax.set_xlabel("confidence 1 - U")
            if j == 0:
                ax.set_ylabel("accuracy (non-thinking)")
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def plot_concept(curves: pd.DataFrame, thresholds: pd.DataFrame, eps: float, title: str = ""):
    """fig:clustered-pac drawn from data, three panels:

    (a) PAC: the per-group risk curves ``R(u | G_j)`` with the single marginal threshold (the
    largest ``u`` with overall risk <= eps): groups whose curve is above eps there are violated;
    (b) G-PAC: the same curves, each cut at its own threshold ``u_j``: every group <= eps;
    (c) share of each group routed to the non-thinking model by PAC, G-PAC and an item-wise
    oracle that knows each loss (conditional control: most efficient, impossible in practice).
    """
    import matplotlib.pyplot as plt

    groups = [g for g in dict.fromkeys(curves["group"]) if g != "Overall"]
    cmap = plt.get_cmap("tab10")
    color = {g: cmap(i % 10) for i, g in enumerate(groups)}
    th = thresholds.set_index("group")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, which in zip(axes[:2], ("pac", "gpac")):
        for g in groups:
            c = curves[curves.group == g]
            ax.plot(c["u"], 100 * c["risk"], color=color[g], lw=1.4, label=g)
            t = th.loc[g, f"{which}_threshold"]
            r = th.loc[g, f"{which}_risk"]
            if np.isfinite(t):
                bad = r > eps
                ax.plot(
                    [t],
                    [100 * r],
                    marker="X" if bad else "o",
                    ms=9 if bad else 6,
                    color=color[g],
                    mec="black" if bad else color[g],
                    zorder=5,
                )
        ov = curves[curves.group == "Overall"]
        ax.plot(ov["u"], 100 * ov["risk"], color="black", lw=2.2, ls="-", label="Overall")
        ax.axhline(100 * eps, color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
        ax.set_xlabel("threshold u on the uncertainty score")
        ax.set_ylabel(r"risk $R(u\mid G_j)$ (%)")
    pac_t = float(th["pac_threshold"].iloc[0])
    if np.isfinite(pac_t):
        axes[0].axvline(pac_t, color="#1f3b73", lw=1.5, ls=":")
    n_bad = int((th["pac_risk"] > eps).sum())
    axes[0].set_title(f"(a) PAC: one threshold u = {pac_t:.2f}; {n_bad} group(s) above eps", fontsize=9)
    axes[1].set_title("(b) G-PAC: a threshold per group, every group <= eps", fontsize=9)
    axes[0].legend(fontsize=6.5, loc="upper left")
    x = np.arange(len(groups))
    w = 0.27
    for i, (col, lab, colr) in enumerate(
        (
            ("pac_routed", "PAC", "#1f3b73"),
            ("gpac_routed", "G-PAC", "#2a9d8f"),
            ("oracle_routed", "conditional (oracle)", "#e76f51"),
        )
    ):
        axes[2].bar(x + (i - 1) * w, 100 * th.loc[groups, col], w, label=lab, color=colr)
    for xi, g in zip(x, groups):
        if th.loc[g, "pac_risk"] > eps:
            axes[2].annotate(
                "PAC risk\n> eps",
                (xi - w, 100 * th.loc[g, "pac_routed"]),
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="#1f3b73",
            )
    axes[2].set_xticks(x, [g if len(g) <= 12 else g[:11] + "." for g in groups], rotation=35, ha="right", fontsize=7)
    axes[2].set_ylim(0, 118)
    axes[2].set_ylabel("routed to the non-thinking model (%)")
    axes[2].set_title("(c) efficiency: feasible (PAC, G-PAC) vs impossible (conditional)", fontsize=9)
    axes[2].legend(fontsize=7, loc="lower left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# =============================================================================================
# Real data (notebook 31)
# =============================================================================================

#: the default real table (``../shared/realdata``; absent on machines without the shared folder)
REALDATA_DEFAULT = ("mathl5_zeroeval", "mathl5_zeroeval.csv")
#: default column mapping of ../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv
REALDATA_COLUMNS = {
    "strong_correct": "think_correct",
    "weak_correct": "nothink_correct",
    "weak_uncertainty_disagree": "score_disagree",
    "weak_uncertainty_len": "score_length",
}


def resolve_data_path(data_path=None):
    """The real table to read: ``data_path`` (relative paths are taken from the repository
    root, since notebooks run in a scratch folder) or the default under ``paths.REALDATA``."""
    from pathlib import Path

    from ..workflow import paths

    if data_path is None:
        return paths.REALDATA.joinpath(*REALDATA_DEFAULT)
    p = Path(data_path).expanduser()
    return p if p.is_absolute() else paths.REPO_ROOT / p


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per known group: size, accuracies (if present) and loss rate in %, plus an ``ALL`` row."""
    cols = [c for c in (D.THINK_CORRECT, D.NOTHINK_CORRECT, D.LOSS) if c in table.columns]
    parts = list(table.groupby(D.GROUP, sort=True)) if D.GROUP in table.columns else []
    parts.append(("ALL", table))
    return pd.DataFrame([{"group": g, "n": len(df), **{c: 100 * df[c].mean() for c in cols}} for g, df in parts])


def realdata_table(
    raw: pd.DataFrame,
    columns: Mapping[str, str],
    *,
    chars_per_token: float = 4.0,
    hidden_think_tokens: float | None = None,
    think_chars: str | None = "strong_chars",
    nothink_chars: str | None = "weak_chars",
) -> pd.DataFrame:
    """Map a real per-item table into the schema, with an explicit token-cost model.

    ``columns`` renames source columns to schema names (:func:`gpac_utils.data.apply_mapping`;
    ``loss`` is derived from the correctness columns when absent; an existing ``loss`` column is
    checked against them). Token counts: when the source has none, ``think_tokens`` =
    ``think_chars / chars_per_token + hidden_think_tokens`` and ``nothink_tokens`` =
    ``nothink_chars / chars_per_token`` — an *assumed* cost model (``hidden_think_tokens=None``
    leaves the tables without tokens, so STP is not computed).
    """
    df = D.apply_mapping(raw, dict(columns))
    if all(c in df.columns for c in D.CORRECTNESS) and D.LOSS in df.columns:
        derived = D.binary_loss(df[D.THINK_CORRECT], df[D.NOTHINK_CORRECT])
        bad = np.flatnonzero(derived != df[D.LOSS].to_numpy(float))
        if bad.size:
            raise D.SchemaError(f"column 'loss' disagrees with the correctness columns at rows {bad[:5].tolist()}")
    if hidden_think_tokens is not None and not all(c in df.columns for c in D.TOKENS):
        for col in (think_chars, nothink_chars):
            if col is None or col not in df.columns:
                raise D.SchemaError(f"cost model needs character column {col!r}; the table has {list(df.columns)}")
        df = df.copy()
        df[D.THINK_TOKENS] = df[think_chars].to_numpy(float) / chars_per_token + float(hidden_think_tokens)
        df[D.NOTHINK_TOKENS] = df[nothink_chars].to_numpy(float) / chars_per_token
    keep = [c for c in (D.ID, D.GROUP, D.LOSS, *D.CORRECTNESS, *D.TOKENS) if c in df.columns]
    keep += D.score_columns(df)
    return D.validate(df[keep])


def run_realdata(
    table: pd.DataFrame,
    *,
    eps: float,
    scores: Sequence[str],
    alpha: float = 0.05,
    pi: float = 0.5,
    trials: int = 100,
    cal_ratio: float = 0.5,
    bound: str = "clt",
    sampling: str = "resample",
    rule: str = "max",
    valid_bounds: Sequence[str] = VALID_BOUNDS,
    k: int = 3,
    clustering_method: str = "kmeans",
    seed: int = 0,
) -> pd.DataFrame:
    """PAC vs G-PAC (known groups) and PAC vs C-PAC (split / joint) on one real table, paper
    and valid settings; rows as :func:`run_table` (``dataset == "real"``)."""
    paper_var = {"bound": bound, "sampling": sampling, "rule": rule}
    valid_vars = [{"bound": b, "sampling": VALID_SAMPLING, "rule": VALID_RULE} for b in valid_bounds]
    common = dict(
        eps=eps,
        scores=list(scores),
        alpha=alpha,
        pi=pi,
        trials=trials,
        cal_ratio=cal_ratio,
        k=k,
        clustering=clustering_method,
        seed=seed,
        progress=False,
    )
    parts = []
    plan = [("known", "gpac", "split")] if D.GROUP in table.columns else []
    plan += [("split", "cpac", "split"), ("joint", "cpac", "joint")]
    for clustering, method, mode in plan:
        r = _quiet(X.run_experiment, table, methods=("pac", method), variants=[paper_var], cpac_mode=mode, **common)
        r["setting"] = "paper"
        r.insert(0, "clustering", clustering)
        parts.append(r)
        if valid_vars and clustering != "joint":
            v = _quiet(X.run_experiment, table, methods=(method,), variants=valid_vars, cpac_mode=mode, **common)
            v["setting"] = "valid"
            v.insert(0, "clustering", clustering)
            parts.append(v)
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "dataset", "real")
    out["eps"] = eps
    return out


# =============================================================================================
# Profiles of the notebooks
# =============================================================================================

_TABLE_COMMON = {
    "scores": list(SCORES),
    "eps": None,
    "alpha": 0.05,
    "pi": 0.5,
    "cal_ratio": None,
    "bound": "clt",
    "sampling": "resample",
    "rule": "max",
    "valid_bounds": list(VALID_BOUNDS),
    "valid_sampling": VALID_SAMPLING,
    "valid_rule": VALID_RULE,
    "seed": 0,
}

PRESETS: dict[str, dict[str, dict]] = {
    # 21_table_known_groups
    "known": {
        "fast": {**_TABLE_COMMON, "pairs": ["qwen", "llama"], "trials": 5},
        "paper": {**_TABLE_COMMON, "pairs": ["qwen", "llama"], "trials": 100},
    },
    # 22_table_cpac
    "cpac": {
        "fast": {
            **_TABLE_COMMON,
            "pairs": ["qwen", "llama"],
            "trials": 5,
            "k": 3,
            "clustering_method": "kmeans",
            "clusterings": ["split", "joint"],
        },
        "paper": {
            **_TABLE_COMMON,
            "pairs": ["qwen", "llama"],
            "trials": 100,
            "k": 3,
            "clustering_method": "kmeans",
            "clusterings": ["split", "joint"],
        },
    },
    # 23_table_arena
    "arena": {
        "fast": {
            **_TABLE_COMMON,
            "pairs": ["qwen", "llama"],
            "trials": 5,
            "k": 3,
            "clustering_method": "kmeans",
            "clusterings": ["split", "joint"],
            "loss_bound": 1.0,
        },
        "paper": {
            **_TABLE_COMMON,
            "pairs": ["qwen", "llama"],
            "trials": 100,
            "k": 3,
            "clustering_method": "kmeans",
            "clusterings": ["split", "joint"],
            "loss_bound": 1.0,
        },
    },
    # 24_calibration_ratio (the paper's figure does not list its ratios; we use 0.3 .. 0.8)
    "calibration_ratio": {
        "fast": {
            "pair": "qwen",
            "benchmarks": ["math500", "zebralogic", "gpqa"],
            "scores": list(SCORES),
            "ratios": [0.3, 0.6],
            "eps": None,
            "alpha": 0.05,
            "pi": 0.5,
            "trials": 3,
            "bound": "clt",
            "sampling": "resample",
            "rule": "max",
            "seed": 0,
        },
        "paper": {
            "pair": "qwen",
            "benchmarks": ["math500", "zebralogic", "gpqa"],
            "scores": list(SCORES),
            "ratios": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
            "eps": None,
            "alpha": 0.05,
            "pi": 0.5,
            "trials": 100,
            "bound": "clt",
            "sampling": "resample",
            "rule": "max",
            "seed": 0,
        },
    },
    # 25_ece_scores (no randomness, both profiles identical)
    "ece": {
        "fast": {"pair": "qwen", "benchmarks": ["math500", "zebralogic", "gpqa"], "scores": list(SCORES), "n_bins": 10},
        "paper": {
            "pair": "qwen",
            "benchmarks": ["math500", "zebralogic", "gpqa"],
            "scores": list(SCORES),
            "n_bins": 10,
        },
    },
    # 26_concept_figure (no randomness)
    "concept": {
        "fast": {"pair": "qwen", "dataset": "math500", "score": "score_logits", "eps": None},
        "paper": {"pair": "qwen", "dataset": "math500", "score": "score_logits", "eps": None},
    },
    # 31_realdata_case_study
    "realdata": {
        "fast": {
            "data_path": None,
            "columns": dict(REALDATA_COLUMNS),
            "scores": ["score_disagree"],
            "eps": 0.10,
            "alpha": 0.05,
            "pi": 0.5,
            "trials": 5,
            "cal_ratio": 0.5,
            "bound": "clt",
            "sampling": "resample",
            "rule": "max",
            "valid_bounds": list(VALID_BOUNDS),
            "k": 3,
            "chars_per_token": 4.0,
            "hidden_think_tokens": 2000.0,
            "seed": 0,
        },
        "paper": {
            "data_path": None,
            "columns": dict(REALDATA_COLUMNS),
            "scores": ["score_disagree"],
            "eps": 0.10,
            "alpha": 0.05,
            "pi": 0.5,
            "trials": 100,
            "cal_ratio": 0.5,
            "bound": "clt",
            "sampling": "resample",
            "rule": "max",
            "valid_bounds": list(VALID_BOUNDS),
            "k": 3,
            "chars_per_token": 4.0,
            "hidden_think_tokens": 2000.0,
            "seed": 0,
        },
    },
}
