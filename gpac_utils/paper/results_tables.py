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
and, for :func:`make_tables`, ``family, pairs, eps, cal_ratio, groupings, figures`` and the data
source (:mod:`gpac_utils.paper.sources`): ``data_source, benchmarks, columns, generated_root``.
The paper's numbers stand beside ours only when the simulated stand-ins are run at the paper's
eps (:func:`~gpac_utils.paper.sources.reproduces_paper`); other sources give ours alone, in
files named after the source (``known__generated__walk__smollm2.csv``, ``..._layout``, and
``..._groups``: the mean test error per group). All rates are fractions in the raw results and
percent in the summaries.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from .. import data as D
from .. import experiment
from ..calibrate import GroupWarning
from ..experiment import KEYS, ExperimentConfig, run_experiment, summarize
from ..partition import ScorePartitioner
from ..recipe import Recipe
from . import plotting, sources
from .errorbars import category_errors, plot_category_errorbars
from .reference import TABLE_SPECS, benchmark_eps, resolve_cal_ratio, table_name
from .table_layout import LAYOUT_ROWS, save_tables

#: The columns that identify one configuration of a results table.
GROUP_KEYS = ["dataset", "grouping", "setting"] + KEYS
_PAPER_PAIRS = frozenset(s.pair for s in TABLE_SPECS.values())
#: The notebook that builds each table family (named in the data sources' messages).
FAMILY_NOTEBOOKS = {"known": "21_table_known_groups", "cpac": "22_table_cpac", "arena": "23_table_arena"}


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
    tables report the routed share, so the warnings are silenced here.

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


def table_group_violations(results: pd.DataFrame) -> pd.DataFrame:
    """Per table configuration and group: violation rate and MCSE (:func:`gpac_utils.experiment.group_violations`).

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_results` (with their ``eps`` column).

    Returns
    -------
    pandas.DataFrame
    """
    return experiment.group_violations(results, None, GROUP_KEYS)


_PERCENT_COLUMNS = (
    "Error",
    "Error_Gap",
    "STP",
    "Routed_share",
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
        Error, Error_Gap, STP, Routed_share (% routed to the non-thinking model), Violation (share
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
    s = s.rename(
        columns={
            "routed_share": "Routed_share",
            "violation_any_group": "Violation",
            "violation_max_group": "Max_group_violation",
            "violation_max_group_mcse": "Max_group_violation_mcse",
        }
    )
    # the display order of the saved tables: the per-group columns last
    last = ["Max_group_violation", "Max_group_violation_mcse", "most_violated_group"]
    s = s[[c for c in s.columns if c not in last and c != "violation_any_group_mcse"] + last]
    for c in _PERCENT_COLUMNS:
        s[c] = 100 * s[c]
    return s


def pick_valid_bound(summary: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """The valid bound with the highest mean routed share of the group method (ties: the first).

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`summarize_results`.

    Returns
    -------
    name : str or None
        The bound (``None`` without valid rows).
    comparison : pandas.DataFrame
        Mean Routed_share, STP, Error and Max_group_violation per bound, over datasets and scores.
    """
    v = summary[summary.setting == "valid"]
    if v.empty:
        return None, pd.DataFrame()
    comp = v.groupby("bound", sort=False)[["Routed_share", "STP", "Error", "Max_group_violation"]].mean().reset_index()
    best = comp.sort_values("Routed_share", ascending=False, kind="stable")["bound"].iloc[0]
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
    paper_table : str or None
        The paper table whose numbers stand beside ours (``None``: ours alone).
    notes : list of str
        What the data could not give (e.g. no token counts: no STP).
    """

    name: str
    data: dict
    results: pd.DataFrame
    summary: pd.DataFrame
    valid_bound: str | None
    comparison: pd.DataFrame
    side: pd.DataFrame
    layout: pd.DataFrame
    paper_table: str | None = None
    notes: list = field(default_factory=list)


def group_table(results: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Mean test error (%) per group, paper recipe: one row per (dataset, grouping, group), ``Overall`` last.

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_results`.
    tables : Mapping[str, pandas.DataFrame]
        The data by dataset (for the known groups' sizes and loss rates).

    Returns
    -------
    pandas.DataFrame
        ``dataset, grouping, group, n, loss (%)`` (known groups) and one column per ``score method``.
    """
    cat = category_errors(results, setting="paper")
    cat["column"] = cat["score"] + " " + cat["method"]
    wide = cat.pivot_table(index=["dataset", "grouping", "group"], columns="column", values="mean", sort=False)
    wide = (100 * wide).reset_index()
    wide.columns.name = None
    order = wide["group"].eq("Overall").astype(int)
    wide = wide.assign(_last=order).sort_values(["dataset", "grouping", "_last", "group"], kind="stable")
    sizes = []
    for b, g, grp in zip(wide["dataset"], wide["grouping"], wide["group"]):
        t = tables[b]
        if grp == "Overall":
            sel = t
        elif g == "known" and D.GROUP in t.columns:
            sel = t[t[D.GROUP] == grp]
        else:
            sel = None
        sizes.append((len(sel), 100 * sel[D.LOSS].mean()) if sel is not None else (float("nan"), float("nan")))
    wide.insert(3, "n", [n for n, _ in sizes])
    wide.insert(4, "loss (%)", [m for _, m in sizes])
    return wide.drop(columns="_last").reset_index(drop=True)


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
    groups_table: bool = False,
    paper_columns: bool | None = None,
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
    groups_table : bool, default False
        Also save ``<file>_groups``: the mean test error per group (:func:`group_table`).
    paper_columns : bool, optional
        Keep the (empty) ``… paper (%)`` columns in the long table without a paper table
        (default: only with one, :func:`~gpac_utils.paper.table_layout.save_tables`).

    Returns
    -------
    ResultsTable

    Notes
    -----
    A table without token counts gets no STP: NaN in the long table, and the STP row is left out
    of the layout (the notes say so).
    """
    file_name = file_name or paper_table
    if file_name is None:
        raise ValueError("file_name: give a file name for a table without paper numbers")
    notes = sources.source_notes(tables)
    if not all(sources.has_tokens(t) for t in tables.values()):
        rows = tuple(r for r in rows if r[0] != "STP")
    results = run_results(tables, cfg, eps=eps, cal_ratio=cal_ratio, groupings=groupings)
    summary = summarize_results(results)
    valid_bound, comparison = pick_valid_bound(summary)
    side, layout = save_tables(summary, paper_table, valid_bound, file_name, layout_suffix, rows, paper_columns)
    if groups_table:
        plotting.save_table(group_table(results, tables), f"{file_name}_groups")
    if figure is not None:
        cat = category_errors(results[results.grouping == "known"], setting="paper")
        fig = plot_category_errorbars(cat, eps, colors=plotting.METHOD_COLORS, scores=cfg["scores"], title=title)
        plotting.savefig(fig, figure)
    return ResultsTable(
        file_name, dict(tables), results, summary, valid_bound, comparison, side, layout, paper_table, notes
    )


def _family_groupings(family: str) -> tuple[str, ...]:
    return ("known",) if family == "known" else ("split", "joint")


def make_tables(cfg: Mapping) -> dict[str, ResultsTable]:
    """Build the tables of ``cfg["family"]`` for every pair in ``cfg["pairs"]`` from ``cfg["data_source"]``.

    Parameters
    ----------
    cfg : Mapping
        The notebook configuration: method settings plus ``family`` (``known`` / ``cpac`` /
        ``arena``), ``pairs``, ``eps`` and ``cal_ratio`` (``None``: the paper's, which a benchmark
        outside the paper lacks for eps (then give one) and has as 0.5 for the ratio; a float or a
        per-benchmark dict overrides), ``groupings`` (``None``: the family's) and ``figures``
        (``{pair: figure name}`` or ``None``); the data source: ``data_source`` (``simulated``,
        default; ``generated``; or a path), ``benchmarks`` (``None``: the paper table's),
        ``columns`` (a path's column mapping) and ``generated_root``.

    Returns
    -------
    dict of str to ResultsTable
        By file name: the paper table's name for the simulated stand-ins, else
        ``<family>__<source tag>`` (e.g. ``known__generated__smollm2``).
    """
    family = cfg["family"]
    notebook = getattr(cfg, "name", "") or FAMILY_NOTEBOOKS.get(family, "")
    source = sources.resolve_source(
        cfg.get("data_source"), columns=cfg.get("columns"), generated_root=cfg.get("generated_root")
    )
    allowed = _family_groupings(family)
    groupings = tuple(cfg["groupings"]) if cfg["groupings"] is not None else allowed
    pairs = list(cfg["pairs"]) if source.kind != "path" else [None]
    out = {}
    for pair in pairs:
        spec = TABLE_SPECS[table_name(family, pair)] if source.is_simulated or pair in _PAPER_PAIRS else None
        name = spec.name if spec is not None else family
        bad = [g for g in groupings if g not in (spec.groupings if spec is not None else allowed)]
        if bad:
            raise ValueError(f"groupings: {bad} do not apply to {name} (it has {list(allowed)})")
        if source.kind == "path":
            benchmarks = [source.dataset]
        elif cfg.get("benchmarks"):
            benchmarks = list(cfg["benchmarks"])
        elif spec is not None:
            benchmarks = list(spec.benchmarks)
        else:
            raise ValueError(
                f"benchmarks: pair {pair!r} has no paper table, so name its benchmarks, "
                "e.g. overrides={'benchmarks': ['walk']}"
            )
        eps = benchmark_eps(benchmarks, cfg["eps"], spec.eps if spec is not None else None)
        paper = sources.reproduces_paper(source, benchmarks, eps, spec.eps if spec is not None else None)
        tables = {
            b: sources.load_table(
                source, b, pair, notebook=notebook, scores=cfg["scores"], loss_bound=cfg["loss_bound"]
            )
            for b in benchmarks
        }
        if source.is_simulated:
            file_name, suffix, figure = name, "_paper_layout", (cfg["figures"] or {}).get(pair)
            title = f"{pair} pair — simulated data"
        else:
            file_name, suffix = f"{family}__{source.tag(None, pair)}", "_layout"
            figure = f"errorbar_category__{source.tag(None, pair)}" if cfg["figures"] and "known" in groupings else None
            title = f"{pair} pair — {source.kind} data" if pair else f"{source.path.name}"
        out[file_name] = build_table(
            cfg,
            spec.name if paper else None,
            tables,
            eps=eps,
            cal_ratio=resolve_cal_ratio(benchmarks, cfg["cal_ratio"]),
            groupings=groupings,
            file_name=file_name,
            layout_suffix=suffix,
            figure=figure,
            title=title,
            groups_table=not source.is_simulated,
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
        for note in t.notes:
            print(note)
        yield f"{name}: loss per dataset", pd.DataFrame({b: df[D.LOSS].describe() for b, df in t.data.items()}).round(3)
        yield f"{name}: valid bounds compared (tighter: {t.valid_bound})", t.comparison.round(2)
        cells = "ours (paper)" if t.paper_table is not None else "ours (no paper numbers for this setting)"
        yield f"{name}: {cells}, trials = {int(t.summary['trials'].max())}", t.layout
        gv = table_group_violations(t.results)
        gv = gv[gv.setting == "paper"]
        view = gv.pivot_table(
            index=["dataset", "grouping", "group"], columns=["score", "method"], values="violation_rate"
        )
        yield f"{name}: per-group violation rate (%), paper recipe", (100 * view).round(0)
        cat = category_errors(t.results, setting="paper")
        view = cat.pivot_table(index=["dataset", "grouping", "group"], columns=["score", "method"], values="mean")
        yield f"{name}: mean test error per group (%), paper recipe", (100 * view).round(2)
