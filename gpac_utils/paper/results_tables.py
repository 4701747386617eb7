r"""The paper's results tables (Tables 1–5 and the real-data case study): one code path.

:func:`build_table` runs one table's experiment, summarizes it, picks the tighter valid bound,
saves the long table and the paper layout, and draws the per-group error bars; notebooks 21, 22,
23 call it through :func:`make_tables` (each also opens one trial by hand), notebook 31 calls it
on a real table. Each run compares, on the same seeded splits,

* PAC and the table's group method with the paper's recipe (``clt`` bound, ``resample``
  sampling, literal ``max`` rule), rows ``setting == "paper"``;
* the group method alone with a finite-sample valid recipe per bound in ``valid_bounds``
  (``bernoulli`` sampling, ``first-crossing``), rows ``setting == "valid"``; for C-PAC only
  with ``mode="split"``, whose per-group guarantee is exact (joint mode: Thm 3.4.2).

The method settings are one :class:`TableSettings` (the notebook builds it from its
``notebooks/config/<notebook>.yaml``); :func:`make_tables` takes the family, pairs, eps and data
source (:mod:`gpac_utils.paper.sources`) as arguments. The paper's numbers stand beside ours
only when the simulated stand-ins are run at the paper's eps
(:func:`~gpac_utils.paper.sources.reproduces_paper`); other sources give ours alone, in files
named after the source (``known__generated__walk__smollm2.csv``, ``..._layout``, and ``..._groups``:
the mean test error per group). All rates are fractions in the raw results and percent in the
summaries.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import data as D
from .. import experiment
from ..calibrate import GroupWarning
from ..experiment import KEYS, ExperimentConfig, run_experiment, summarize
from ..partition import ScorePartitioner
from ..recipe import PAPER, Recipe
from . import plotting, sources
from .errorbars import category_errors, plot_category_errorbars
from .reference import TABLE_SPECS, benchmark_eps, resolve_cal_ratio, table_name
from .table_layout import LAYOUT_ROWS, save_tables

#: The columns that identify one configuration of a results table.
GROUP_KEYS = ["dataset", "grouping", "setting"] + KEYS
_PAPER_PAIRS = frozenset(s.pair for s in TABLE_SPECS.values())
#: The notebook that builds each table family (named in the data sources' messages).
FAMILY_NOTEBOOKS = {"known": "21_table_known_groups", "cpac": "22_table_cpac", "arena": "23_table_arena"}


@dataclass(frozen=True)
class TableSettings:
    """The method settings shared by every run of one results table.

    Parameters
    ----------
    scores : tuple of str
        Score columns.
    paper : Recipe, default PAPER
        The paper's recipe (rows ``setting == "paper"``, PAC and the group method).
    valid : tuple of Recipe, default ()
        One finite-sample valid recipe per bound compared (rows ``setting == "valid"``).
    alpha : float, default 0.05
        Miscoverage level.
    trials : int, default 100
        Random calibration/test splits.
    partitioner : ScorePartitioner, default ScorePartitioner()
        How C-PAC learns its groups.
    loss_bound : float, default 1.0
        Upper end of the loss.
    seed : int, default 0
        Seed of the splits and calibrations.
    """

    scores: tuple[str, ...]
    paper: Recipe = PAPER
    valid: tuple[Recipe, ...] = ()
    alpha: float = 0.05
    trials: int = 100
    partitioner: ScorePartitioner = field(default_factory=ScorePartitioner)
    loss_bound: float = 1.0
    seed: int = 0

    def experiment(self, method: str, grouping: str, eps: float, cal_ratio: float) -> ExperimentConfig:
        """The :class:`~gpac_utils.experiment.ExperimentConfig` of PAC and ``method`` on one dataset."""
        return ExperimentConfig(
            eps=eps,
            alpha=self.alpha,
            methods=("PAC", method),
            recipes=(self.paper,),
            scores=tuple(self.scores),
            trials=self.trials,
            cal_ratio=cal_ratio,
            partitioner=self.partitioner,
            mode="split" if grouping == "known" else grouping,
            eval_groups="known" if grouping == "known" else "learned",
            loss_bound=self.loss_bound,
            seed=self.seed,
        )


def table_settings(
    *,
    scores: Sequence[str],
    pi: float,
    recipe: Mapping,
    valid_bounds: Sequence[str],
    valid_recipe: Mapping,
    partition: Mapping,
    alpha: float = 0.05,
    trials: int = 100,
    loss_bound: float = 1.0,
    seed: int = 0,
) -> TableSettings:
    """:class:`TableSettings` from the table notebooks' settings.

    Parameters
    ----------
    scores : sequence of str
        Score columns.
    pi : float
        Labelling probability of both recipes.
    recipe : Mapping
        The paper's recipe without ``pi`` (``bound``, ``sampling``, ``rule``).
    valid_bounds : sequence of str
        One valid recipe per bound ...
    valid_recipe : Mapping
        ... with these ``sampling`` and ``rule``.
    partition : Mapping
        :class:`~gpac_utils.partition.ScorePartitioner` arguments (``k``, ``algorithm``).
    alpha, trials, loss_bound, seed
        As in :class:`TableSettings`.

    Returns
    -------
    TableSettings
    """
    return TableSettings(
        scores=tuple(scores),
        paper=Recipe(pi=pi, **recipe),
        valid=tuple(Recipe(bound=b, pi=pi, **valid_recipe) for b in valid_bounds),
        alpha=alpha,
        trials=trials,
        partitioner=ScorePartitioner(**partition),
        loss_bound=loss_bound,
        seed=seed,
    )


def trial_split(table: pd.DataFrame, cal_ratio: float, seed: int, trial: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One trial's calibration and test parts of ``table``, as :func:`~gpac_utils.experiment.run_experiment` splits it.

    Parameters
    ----------
    table : pandas.DataFrame
        The table.
    cal_ratio : float
        Share of the items in the calibration part.
    seed, trial : int
        The experiment's seed and the trial.

    Returns
    -------
    calibration, test : pandas.DataFrame
        The items in the order of the trial's seeded permutation.
    """
    perm = np.random.default_rng([seed, trial]).permutation(len(table))
    n_cal = int(round(cal_ratio * len(table)))
    return table.iloc[perm[:n_cal]], table.iloc[perm[n_cal:]]


def quiet_run(table: pd.DataFrame, exp: ExperimentConfig) -> pd.DataFrame:
    """:func:`~gpac_utils.experiment.run_experiment` without :class:`GroupWarning`.

    Small groups that cannot be calibrated always think: that is part of the method, and the
    tables report the routed share, so the warnings are silenced here.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema.
    exp : ExperimentConfig
        The experiment.

    Returns
    -------
    pandas.DataFrame
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        return run_experiment(table, exp)


def run_results(
    tables: Mapping[str, pd.DataFrame],
    settings: TableSettings,
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
    settings : TableSettings
        Method settings.
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
    out = []
    for b, table in tables.items():
        for grouping in groupings:
            method = "G-PAC" if grouping == "known" else "C-PAC"
            exp = settings.experiment(method, grouping, eps[b], cal_ratio[b])
            parts = [quiet_run(table, exp).assign(setting="paper")]
            if settings.valid and grouping != "joint":
                valid = exp.replace(methods=(method,), recipes=settings.valid)
                parts.append(quiet_run(table, valid).assign(setting="valid"))
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


#: Summary columns reported in percent.
_PERCENT_COLUMNS = (
    "Error", "Error_Gap", "STP", "Routed_share", "Violation", "Max_group_violation", "Max_group_violation_mcse",
    "worst_group_error",
)  # fmt: skip


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
    eps, cal_ratio : dict of str to float
        Per dataset, as run.
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
    eps: dict = field(default_factory=dict)
    cal_ratio: dict = field(default_factory=dict)


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
    settings: TableSettings,
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
    settings : TableSettings
        Method settings.
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
    results = run_results(tables, settings, eps=eps, cal_ratio=cal_ratio, groupings=groupings)
    summary = summarize_results(results)
    valid_bound, comparison = pick_valid_bound(summary)
    side, layout = save_tables(summary, paper_table, valid_bound, file_name, layout_suffix, rows, paper_columns)
    if groups_table:
        plotting.save_table(group_table(results, tables), f"{file_name}_groups")
    if figure is not None:
        cat = category_errors(results[results.grouping == "known"], setting="paper")
        fig = plot_category_errorbars(cat, eps, colors=plotting.METHOD_COLORS, scores=settings.scores, title=title)
        plotting.savefig(fig, figure)
    return ResultsTable(
        file_name, dict(tables), results, summary, valid_bound, comparison, side, layout, paper_table, notes,
        dict(eps), dict(cal_ratio),
    )  # fmt: skip


def _family_groupings(family: str) -> tuple[str, ...]:
    return ("known",) if family == "known" else ("split", "joint")


def make_tables(
    settings: TableSettings,
    *,
    family: str,
    source: sources.DataSource,
    pairs: Sequence[str],
    eps=None,
    cal_ratio=None,
    groupings: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    figures: Mapping[str, str] | None = None,
    notebook: str = "",
) -> dict[str, ResultsTable]:
    """Build the tables of ``family`` for every pair in ``pairs`` from ``source``.

    Parameters
    ----------
    settings : TableSettings
        Method settings.
    family : {"known", "cpac", "arena"}
        The paper tables built.
    source : DataSource
        Where the tables come from (:func:`~gpac_utils.paper.sources.resolve_source`); a path
        source gives one table and ignores ``pairs``.
    pairs : sequence of str
        Model pairs: one table each.
    eps, cal_ratio : None, float or Mapping[str, float]
        ``None``: the paper's (a benchmark outside the paper has no eps, so give one, and a
        calibration ratio of 0.5); a float or a per-benchmark dict overrides.
    groupings : sequence of str, optional
        ``None``: the family's (``known``; or ``split`` and ``joint``).
    benchmarks : sequence of str, optional
        ``None``: the paper table's.
    figures : Mapping[str, str], optional
        ``{pair: figure name}`` of the per-group error bars (known groups only).
    notebook : str
        The notebook's stem, for the data checks' messages (default: the family's notebook).

    Returns
    -------
    dict of str to ResultsTable
        By file name: the paper table's name for the simulated stand-ins, else
        ``<family>__<source tag>`` (e.g. ``known__generated__smollm2``).
    """
    notebook = notebook or FAMILY_NOTEBOOKS.get(family, "")
    allowed = _family_groupings(family)
    groupings = tuple(groupings) if groupings is not None else allowed
    pairs = list(pairs) if source.kind != "path" else [None]
    out = {}
    for pair in pairs:
        spec = TABLE_SPECS[table_name(family, pair)] if source.is_simulated or pair in _PAPER_PAIRS else None
        name = spec.name if spec is not None else family
        bad = [g for g in groupings if g not in (spec.groupings if spec is not None else allowed)]
        if bad:
            raise ValueError(f"groupings: {bad} do not apply to {name} (it has {list(allowed)})")
        if source.kind == "path":
            run_on = [source.dataset]
        elif benchmarks:
            run_on = list(benchmarks)
        elif spec is not None:
            run_on = list(spec.benchmarks)
        else:
            raise ValueError(
                f"benchmarks: pair {pair!r} has no paper table, so name its benchmarks, "
                "e.g. overrides={'benchmarks': ['walk']}"
            )
        eps_b = benchmark_eps(run_on, eps, spec.eps if spec is not None else None)
        paper = sources.reproduces_paper(source, run_on, eps_b, spec.eps if spec is not None else None)
        tables = {
            b: sources.load_table(
                source, b, pair, notebook=notebook, scores=settings.scores, loss_bound=settings.loss_bound
            )
            for b in run_on
        }
        if source.is_simulated:
            file_name, suffix, figure = name, "_paper_layout", (figures or {}).get(pair)
            title = f"{pair} pair — simulated data"
        else:
            file_name, suffix = f"{family}__{source.tag(None, pair)}", "_layout"
            figure = f"errorbar_category__{source.tag(None, pair)}" if figures and "known" in groupings else None
            title = f"{pair} pair — {source.kind} data" if pair else f"{source.path.name}"
        out[file_name] = build_table(
            settings,
            spec.name if paper else None,
            tables,
            eps=eps_b,
            cal_ratio=resolve_cal_ratio(run_on, cal_ratio),
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
