r"""The paper's results tables (Tables 1–5 and the real-data case study): one code path.

:func:`build_table` runs one table's experiment, summarizes it, picks the tighter valid bound,
saves the long table and the paper layout, and draws the per-group error bars; notebooks 21, 22,
23 call it through :func:`make_tables` and differ only in their configuration, notebook 31
calls it on a real table. Each run compares, on the same seeded splits,

* PAC and the table's group method with the paper's recipe (``clt`` bound, ``resample``
  sampling, literal ``max`` rule), rows ``setting == "paper"``;
* the group method alone with a finite-sample valid recipe per bound in ``valid_bounds``
  (``bernoulli`` sampling, ``first-crossing``), rows ``setting == "valid"``; for C-PAC only
  with ``mode="split"``, whose per-group guarantee is exact (joint mode: Thm 3.4.2).

The configuration (one ``cfg`` mapping, from ``notebooks/config/<notebook>.yaml``) holds
``scores, alpha, trials, pi, recipe, valid_bounds, valid_recipe, partition, loss_bound, seed``
and, for :func:`make_tables`, ``family, pairs, eps, cal_ratio, groupings, figures``.
All rates are fractions in the raw results and percent in the summaries.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from .. import data as D
from ..calibrate import ALL, GroupWarning
from ..experiment import KEYS, ExperimentConfig, run_experiment, summarize
from ..metrics import mcse
from ..partition import ScorePartitioner
from ..recipe import Recipe
from . import plotting, simulate
from .errorbars import category_errors, plot_category_errorbars
from .reference import TABLE_SPECS, resolve_cal_ratio, resolve_eps, table_name
from .table_layout import LAYOUT_ROWS, save_tables

#: The columns that identify one configuration of a results table.
GROUP_KEYS = ["dataset", "grouping", "setting"] + KEYS


def paper_recipe(cfg: Mapping) -> Recipe:
    """The paper's recipe of a configuration: ``cfg["recipe"]`` with ``pi = cfg["pi"]``.

    Parameters
    ----------
    cfg : Mapping
        Needs ``recipe`` (``bound``, ``sampling``, ``rule``) and ``pi``.

    Returns
    -------
    Recipe
    """
    return Recipe(pi=cfg["pi"], **cfg["recipe"])


def valid_recipes(cfg: Mapping) -> tuple[Recipe, ...]:
    """One valid recipe per bound in ``cfg["valid_bounds"]`` (``cfg["valid_recipe"]``, ``cfg["pi"]``).

    Parameters
    ----------
    cfg : Mapping
        Needs ``valid_bounds``, ``valid_recipe`` (``sampling``, ``rule``) and ``pi``.

    Returns
    -------
    tuple of Recipe
    """
    return tuple(Recipe(bound=b, pi=cfg["pi"], **cfg["valid_recipe"]) for b in cfg["valid_bounds"])


def quiet_run(table: pd.DataFrame, cfg: ExperimentConfig) -> pd.DataFrame:
    """:func:`~gpac_utils.experiment.run_experiment` without :class:`GroupWarning`.

    Small groups that cannot be calibrated always think: that is part of the method, and the
    tables report efficiency, so the warnings are silenced here.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema.
    cfg : ExperimentConfig
        The experiment.

    Returns
    -------
    pandas.DataFrame
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        return run_experiment(table, cfg)


def run_results(
    tables: Mapping[str, pd.DataFrame],
    cfg: Mapping,
    *,
    eps: Mapping[str, float],
    cal_ratio: Mapping[str, float],
    groupings: Sequence[str],
) -> pd.DataFrame:
    """All trials of one results table on ``tables`` (``{dataset: table}``).

    Parameters
    ----------
    tables : Mapping[str, pandas.DataFrame]
        One table per dataset.
    cfg : Mapping
        Method settings (see the module docstring).
    eps, cal_ratio : Mapping[str, float]
        Per dataset.
    groupings : sequence of str
        ``known`` (PAC vs G-PAC on the ``group`` column), ``split`` and/or ``joint`` (PAC vs
        C-PAC in that mode, judged on C-PAC's learned groups).

    Returns
    -------
    pandas.DataFrame
        The rows of :func:`~gpac_utils.experiment.run_experiment` with ``dataset`` and
        ``grouping`` first, then ``setting`` (``paper`` / ``valid``) and ``eps``.
    """
    bad = [g for g in groupings if g not in ("known", "split", "joint")]
    if bad:
        raise ValueError(f"groupings: unknown {bad}; choose from ['known', 'split', 'joint']")
    for name, m in (("eps", eps), ("cal_ratio", cal_ratio)):
        missing = [b for b in tables if b not in m]
        if missing:
            raise ValueError(f"{name}: no value for dataset(s) {missing}")
    paper, valid = paper_recipe(cfg), valid_recipes(cfg)
    partitioner = ScorePartitioner(**cfg["partition"])
    out = []
    for b, table in tables.items():
        for grouping in groupings:
            method = "G-PAC" if grouping == "known" else "C-PAC"
            exp = ExperimentConfig(
                eps=eps[b],
                alpha=cfg["alpha"],
                methods=("PAC", method),
                recipes=(paper,),
                scores=tuple(cfg["scores"]),
                trials=cfg["trials"],
                cal_ratio=cal_ratio[b],
                partitioner=partitioner,
                mode="split" if grouping == "known" else grouping,
                eval_groups="known" if grouping == "known" else "learned",
                loss_bound=cfg["loss_bound"],
                seed=cfg["seed"],
            )
            parts = [quiet_run(table, exp).assign(setting="paper")]
            if valid and grouping != "joint":
                parts.append(quiet_run(table, exp.replace(methods=(method,), recipes=valid)).assign(setting="valid"))
            for p in parts:
                p.insert(0, "grouping", grouping)
                p.insert(0, "dataset", b)
                p["eps"] = eps[b]
            out.extend(parts)
    return pd.concat(out, ignore_index=True)


def group_violations(results: pd.DataFrame) -> pd.DataFrame:
    """Per group: the share of trials whose risk over the whole table exceeds eps, with its MCSE.

    Treating the table as the population, a valid group-conditional method keeps every group's
    rate at most ``alpha`` (up to Monte Carlo error); ``summarize``'s ``violation_rate`` is
    instead the share of trials in which *any* group is violated (up to ``k * alpha``).

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_results`.

    Returns
    -------
    pandas.DataFrame
        One row per configuration and group: ``violation``, ``trials``, ``mean_error``,
        ``sd_error``, ``mean_pop_risk``, ``n_test``, ``violation_mcse``.
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


_PERCENT_COLUMNS = (
    "Error",
    "Error_Gap",
    "STP",
    "Efficiency",
    "Violation",
    "Max_group_violation",
    "Max_group_violation_mcse",
    "worst_group_error",
)


def summarize_results(results: pd.DataFrame) -> pd.DataFrame:
    """Paper metrics per (dataset, grouping, setting, method, score, recipe), in percent.

    Parameters
    ----------
    results : pandas.DataFrame
        The raw trials (:func:`run_results`), paper and valid recipes together.

    Returns
    -------
    pandas.DataFrame
        Error, Error_Gap, STP, Efficiency (% routed to the non-thinking model), Violation (share
        of trials with *some* group's whole-table risk above eps), Max_group_violation (largest
        per-group violation rate) and its MCSE, most_violated_group, worst_group, trials.
    """
    rows = []
    for (dataset, grouping, setting), df in results.groupby(["dataset", "grouping", "setting"], sort=False):
        eps = float(df["eps"].iloc[0])
        s = summarize(df, eps)
        s.insert(0, "setting", setting)
        s.insert(0, "grouping", grouping)
        s.insert(0, "dataset", dataset)
        s["eps"] = eps
        rows.append(s)
    s = pd.concat(rows, ignore_index=True)
    worst = (
        group_violations(results)
        .sort_values("violation", ascending=False, kind="stable")
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
    for c in _PERCENT_COLUMNS:
        s[c] = 100 * s[c]
    return s


def pick_valid_bound(summary: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """The valid bound with the highest mean efficiency of the group method (ties: the first).

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`summarize_results`.

    Returns
    -------
    name : str or None
        The bound (``None`` without valid rows).
    comparison : pandas.DataFrame
        Mean Efficiency, STP, Error and Max_group_violation per bound, over datasets and scores.
    """
    v = summary[summary.setting == "valid"]
    if v.empty:
        return None, pd.DataFrame()
    comp = v.groupby("bound", sort=False)[["Efficiency", "STP", "Error", "Max_group_violation"]].mean().reset_index()
    best = comp.sort_values("Efficiency", ascending=False, kind="stable")["bound"].iloc[0]
    return str(best), comp


@dataclass
class ResultsTable:
    """One built results table.

    Attributes
    ----------
    name : str
        The file stem it was saved under.
    data : dict of str to pandas.DataFrame
        The tables it ran on, by dataset.
    results, summary : pandas.DataFrame
        Raw trials (:func:`run_results`) and their summary (:func:`summarize_results`).
    valid_bound : str or None
        The tighter valid bound (:func:`pick_valid_bound`).
    comparison : pandas.DataFrame
        The valid bounds compared.
    side, layout : pandas.DataFrame
        Ours beside the paper's numbers, long and in the paper's layout.
    """

    name: str
    data: dict
    results: pd.DataFrame
    summary: pd.DataFrame
    valid_bound: str | None
    comparison: pd.DataFrame
    side: pd.DataFrame
    layout: pd.DataFrame


def build_table(
    cfg: Mapping,
    paper_table: str | None,
    tables: Mapping[str, pd.DataFrame],
    *,
    eps: Mapping[str, float],
    cal_ratio: Mapping[str, float],
    groupings: Sequence[str],
    file_name: str | None = None,
    layout_suffix: str = "_paper_layout",
    rows: Sequence[tuple[str, str]] = LAYOUT_ROWS,
    figure: str | None = None,
    title: str = "",
) -> ResultsTable:
    """Run, summarize, pick the valid bound, save the tables and draw the error bars.

    Parameters
    ----------
    cfg : Mapping
        Method settings (see the module docstring).
    paper_table : str or None
        The paper table whose numbers are set beside ours (``None``: no paper numbers).
    tables, eps, cal_ratio, groupings
        As for :func:`run_results`.
    file_name : str, optional
        Stem of the saved tables (default: ``paper_table``).
    layout_suffix : str, default "_paper_layout"
        Suffix of the paper-layout table.
    rows : sequence of (str, str)
        Rows of the layout (:data:`~gpac_utils.paper.table_layout.LAYOUT_ROWS`).
    figure : str, optional
        Save the per-group error bars of the ``known`` grouping (paper recipe) under this name.
    title : str
        The figure's title.

    Returns
    -------
    ResultsTable
    """
    file_name = file_name or paper_table
    if file_name is None:
        raise ValueError("file_name: give a file name for a table without paper numbers")
    results = run_results(tables, cfg, eps=eps, cal_ratio=cal_ratio, groupings=groupings)
    summary = summarize_results(results)
    valid_bound, comparison = pick_valid_bound(summary)
    side, layout = save_tables(summary, paper_table, valid_bound, file_name, layout_suffix, rows)
    if figure is not None:
        cat = category_errors(results[results.grouping == "known"], setting="paper")
        fig = plot_category_errorbars(cat, eps, colors=plotting.METHOD_COLORS, scores=cfg["scores"], title=title)
        plotting.savefig(fig, figure)
    return ResultsTable(file_name, dict(tables), results, summary, valid_bound, comparison, side, layout)


def make_tables(cfg: Mapping) -> dict[str, ResultsTable]:
    """Build the paper tables of ``cfg["family"]`` for every pair in ``cfg["pairs"]`` on the simulated data.

    Parameters
    ----------
    cfg : Mapping
        The notebook configuration: method settings plus ``family`` (``known`` / ``cpac`` /
        ``arena``), ``pairs``, ``eps`` and ``cal_ratio`` (``None``: the paper's; a float or a
        per-benchmark dict overrides), ``groupings`` (``None``: the table's) and ``figures``
        (``{pair: figure name}`` or ``None``).

    Returns
    -------
    dict of str to ResultsTable
        By paper table name.
    """
    out = {}
    for pair in cfg["pairs"]:
        name = table_name(cfg["family"], pair)
        spec = TABLE_SPECS[name]
        groupings = tuple(cfg["groupings"]) if cfg["groupings"] is not None else spec.groupings
        bad = [g for g in groupings if g not in spec.groupings]
        if bad:
            raise ValueError(f"groupings: {bad} do not apply to {name} (it has {list(spec.groupings)})")
        out[name] = build_table(
            cfg,
            name,
            {b: simulate.load_simulated(b, pair) for b in spec.benchmarks},
            eps=resolve_eps(name, cfg["eps"]),
            cal_ratio=resolve_cal_ratio(spec.benchmarks, cfg["cal_ratio"]),
            groupings=groupings,
            figure=(cfg["figures"] or {}).get(pair),
            title=f"{pair} pair — simulated data",
        )
    return out


def views(built: Mapping[str, ResultsTable]) -> Iterator[tuple[str, pd.DataFrame]]:
    """What the table notebooks display, as ``(title, frame)`` pairs.

    Per table: the loss of its data, the valid bounds compared, the paper layout (ours (paper),
    percent), the per-group violation rates (%, paper recipe) and the mean test error per group
    (%, paper recipe).

    Parameters
    ----------
    built : Mapping[str, ResultsTable]
        Output of :func:`make_tables`.

    Yields
    ------
    (str, pandas.DataFrame)
    """
    for name, t in built.items():
        yield f"{name}: loss per dataset", pd.DataFrame({b: df[D.LOSS].describe() for b, df in t.data.items()}).round(3)
        yield f"{name}: valid bounds compared (tighter: {t.valid_bound})", t.comparison.round(2)
        yield f"{name}: ours (paper), trials = {int(t.summary['trials'].max())}", t.layout
        gv = group_violations(t.results)
        gv = gv[gv.setting == "paper"]
        view = gv.pivot_table(index=["dataset", "grouping", "group"], columns=["score", "method"], values="violation")
        yield f"{name}: per-group violation rate (%), paper recipe", (100 * view).round(0)
        cat = category_errors(t.results, setting="paper")
        view = cat.pivot_table(index=["dataset", "grouping", "group"], columns=["score", "method"], values="mean")
        yield f"{name}: mean test error per group (%), paper recipe", (100 * view).round(2)
