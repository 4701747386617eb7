r"""The paper's results tables (Tables 1–5 and the real-data case study): one code path.

:func:`build_table` runs one table's experiment, summarizes it, picks the tighter valid bound,
saves the long table and the paper layout, and draws the per-group error bars; notebooks 21, 22,
23 call it through :func:`make_tables` (each also opens one trial by hand), notebook 31 calls it
on a real table. Each run compares, on the same seeded splits,

* PAC and the table's group method with the paper's recipe (``clt`` bound, ``resample``
  sampling, literal ``max`` rule), rows ``setting == "paper"``;
* the group method alone with a finite-sample valid recipe per bound in ``valid_bounds``
  (``bernoulli`` sampling, ``first-crossing``), rows ``setting == "valid"``; for C-PAC only
  with ``mode="split"``, whose per-group guarantee is exact (joint mode: Theorem 4.6, part 2).

All settings are one typed :class:`TableSettings`, the notebook's
``notebooks/config/<notebook>.yaml``: the method's, and the family, pairs, eps and data source
(:mod:`gpac_utils.paper.sources`) that :func:`make_tables` reads. The paper's numbers stand beside ours
only when the simulated stand-ins are run at the paper's eps
(:func:`make_tables`); other sources give ours alone, in files
named after the source (``known__generated__walk__smollm2.csv``, ``..._layout``, and ``..._groups``:
the mean test error per group). All rates are fractions in the raw results and percent in the
summaries.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import data, experiment
from ..calibrate import GroupWarning
from ..experiment import KEYS, ExperimentConfig, run_experiment, summarize
from ..partition import ScorePartitioner
from ..recipe import Recipe
from ..settings import ALPHA
from . import plotting, sources
from .errorbars import category_errors, plot_category_errorbars
from .reference import TABLE_SPECS, benchmark_eps, resolve_cal_ratio, table_name
from .table_layout import LAYOUT_ROWS, paper_layout, report_table, side_by_side

#: The columns that identify one configuration of a results table.
GROUP_KEYS = ["dataset", "grouping", "setting"] + KEYS
_PAPER_PAIRS = frozenset(s.pair for s in TABLE_SPECS.values())
#: The notebook that builds each table family (named in the data sources' messages).
FAMILY_NOTEBOOKS = {"known": "21_table_known_groups", "cpac": "22_table_cpac", "arena": "23_table_arena"}


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    """The settings of one results table: a table notebook's ``notebooks/config/<notebook>.yaml``, typed.

    The table notebooks build it from their configuration (``results_tables.TableSettings(**cfg)``: a key the
    class does not have is a ``TypeError`` naming it); notebook 31 gives the method settings only.

    Parameters
    ----------
    scores : sequence of str
        Score columns.
    label_prob : float
        Labelling probability (the paper's pi) of both recipes.
    recipe : Mapping
        The paper's recipe without ``label_prob`` (``bound``, ``sampling``, ``rule``): rows
        ``setting == "paper"``, PAC and the group method.
    valid_bounds : sequence of str
        One finite-sample valid recipe per bound (rows ``setting == "valid"``) ...
    valid_recipe : Mapping
        ... with these ``sampling`` and ``rule``.
    partition : Mapping
        :class:`~gpac_utils.partition.ScorePartitioner` arguments (``k``, ``algorithm``): how C-PAC
        learns its groups.
    alpha : float, default 0.05
        Miscoverage level.
    n_trials : int, default 100
        Random calibration/test splits.
    loss_bound : float, default 1.0
        Upper end of the loss.
    seed : int, default 0
        Seed of the splits and calibrations.
    data_source, columns, generated_root
        Where the tables come from (:func:`~gpac_utils.paper.sources.resolve_source`).
    family : {"known", "cpac", "arena"}
        The paper tables built by :func:`make_tables`.
    pairs : sequence of str
        Model pairs: one table each (a path source gives one table and ignores them).
    benchmarks : sequence of str, optional
        ``None``: the paper table's.
    eps, cal_ratio : None, float or Mapping[str, float]
        ``None``: the paper's (a benchmark outside the paper has no eps, so give one, and a
        calibration ratio of 0.5); a float or a per-benchmark dict overrides.
    groupings : sequence of str, optional
        ``None``: the family's (``known``; or ``split`` and ``joint``).
    figures : Mapping[str, str], optional
        ``{pair: figure name}`` of the per-group error bars (known groups only).
    """

    scores: Sequence[str]
    label_prob: float
    recipe: Mapping[str, str]
    valid_bounds: Sequence[str]
    valid_recipe: Mapping[str, str]
    partition: Mapping[str, Any]
    alpha: float = ALPHA.default
    n_trials: int = 100
    loss_bound: float = 1.0
    seed: int = 0
    data_source: str | None = "simulated"
    columns: Mapping[str, str] | None = None
    generated_root: str | None = None
    family: str = "known"
    pairs: Sequence[str] = ()
    benchmarks: Sequence[str] | None = None
    eps: float | Mapping[str, float] | None = None
    cal_ratio: float | Mapping[str, float] | None = None
    groupings: Sequence[str] | None = None
    figures: Mapping[str, str] | None = None

    @property
    def paper(self) -> Recipe:
        """The paper's recipe."""
        return Recipe(label_prob=self.label_prob, **self.recipe)

    @property
    def valid(self) -> tuple[Recipe, ...]:
        """One valid recipe per bound in ``valid_bounds``."""
        return tuple(Recipe(bound=b, label_prob=self.label_prob, **self.valid_recipe) for b in self.valid_bounds)

    @property
    def partitioner(self) -> ScorePartitioner:
        """How C-PAC learns its groups."""
        return ScorePartitioner(**self.partition)

    def experiment(self, method: str, grouping: str, eps: float, cal_ratio: float) -> ExperimentConfig:
        """The :class:`~gpac_utils.experiment.ExperimentConfig` of PAC and ``method`` on one dataset."""
        known = grouping == "known"
        return ExperimentConfig(
            eps=eps,
            alpha=self.alpha,
            methods=("PAC", method),
            recipes=(self.paper,),
            scores=tuple(self.scores),
            n_trials=self.n_trials,
            cal_ratio=cal_ratio,
            partitioner=self.partitioner,
            mode="split" if known else grouping,
            eval_groups="known" if known else "learned",
            loss_bound=self.loss_bound,
            seed=self.seed,
        )


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
            where = {"dataset": b, "grouping": grouping}
            out.append(quiet_run(table, exp).assign(**where, setting="paper", eps=eps[b]))
            if settings.valid and grouping != "joint":
                valid = exp.replace(methods=(method,), recipes=settings.valid)
                out.append(quiet_run(table, valid).assign(**where, setting="valid", eps=eps[b]))
    out = pd.concat(out, ignore_index=True)
    return out[["dataset", "grouping"] + [c for c in out.columns if c not in ("dataset", "grouping")]]


#: Summary columns reported in percent.
PERCENT_COLUMNS = [
    "Error",
    "Error_Gap",
    "STP",
    "routed_share",
    "violation_any_group",
    "violation_max_group",
    "violation_max_group_mcse",
    "worst_group_error",
]
_TABLE_KEYS = ["dataset", "grouping", "setting"]


def summarize_results(results: pd.DataFrame) -> pd.DataFrame:
    """Paper metrics per (dataset, grouping, setting, method, score, recipe), in percent.

    Parameters
    ----------
    results : pandas.DataFrame
        The raw trials (:func:`run_results`), paper and valid recipes together.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`~gpac_utils.experiment.summarize` after ``dataset, grouping, setting``:
        Error, Error_Gap, STP, routed_share (% routed to the non-thinking model),
        violation_any_group (share of trials with *some* group's whole-table risk above eps),
        violation_max_group (largest per-group violation rate) and its MCSE, most_violated_group,
        worst_group, trials; then ``eps``.
    """
    parts = []
    for (dataset, grouping, setting), df in results.groupby(_TABLE_KEYS, sort=False):
        eps = float(df["eps"].iloc[0])
        parts.append(summarize(df, eps).assign(dataset=dataset, grouping=grouping, setting=setting, eps=eps))
    s = pd.concat(parts, ignore_index=True)
    s[PERCENT_COLUMNS] = 100 * s[PERCENT_COLUMNS]
    return s[_TABLE_KEYS + [c for c in s.columns if c not in _TABLE_KEYS]]


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
        Mean routed_share, STP, Error and violation_max_group per bound, over datasets and scores.
    """
    v = summary[summary.setting == "valid"]
    if v.empty:
        return None, pd.DataFrame()
    comp = v.groupby("bound", sort=False)[["routed_share", "STP", "Error", "violation_max_group"]].mean().reset_index()
    best = comp.sort_values("routed_share", ascending=False, kind="stable")["bound"].iloc[0]
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
    layout : pandas.DataFrame
        Ours beside the paper's numbers in the paper's layout.
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
    layout: pd.DataFrame
    paper_table: str | None
    notes: list
    eps: dict
    cal_ratio: dict


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

    def size(dataset, grouping, group):  # a learned group has no fixed items: no size
        t = tables[dataset]
        if group != "Overall":
            if grouping != "known" or data.GROUP not in t.columns:
                return float("nan"), float("nan")
            t = t[t[data.GROUP] == group]
        return len(t), 100 * t[data.LOSS].mean()

    n, loss = zip(*map(size, wide["dataset"], wide["grouping"], wide["group"]))
    wide.insert(3, "n", list(n))
    wide.insert(4, "loss (%)", list(loss))
    return wide.drop(columns="_last").reset_index(drop=True)


@dataclass(frozen=True)
class TableOutput:
    """What :func:`build_table` saves and draws (declared once, passed whole).

    Parameters
    ----------
    file_name : str
        Stem of the saved tables: the long table ``<file_name>.csv|.md``
        (:func:`~gpac_utils.paper.table_layout.report_table`).
    layout_suffix : str, default "_paper_layout"
        Suffix of the paper-layout table ``<file_name><layout_suffix>.csv|.md``
        (:func:`~gpac_utils.paper.table_layout.paper_layout`).
    rows : tuple of (str, str)
        Rows of the layout (:data:`~gpac_utils.paper.table_layout.LAYOUT_ROWS`).
    figure : str, optional
        Save the per-group error bars of the ``known`` grouping (paper recipe) under this name.
    title : str
        The figure's title.
    groups_table : bool, default False
        Also save ``<file>_groups``: the mean test error per group (:func:`group_table`).
    paper_columns : bool, optional
        Keep the (empty) ``… paper (%)`` columns in the long table without a paper table
        (default: only with one).
    """

    file_name: str
    layout_suffix: str = "_paper_layout"
    rows: tuple[tuple[str, str], ...] = LAYOUT_ROWS
    figure: str | None = None
    title: str = ""
    groups_table: bool = False
    paper_columns: bool | None = None


def build_table(
    settings: TableSettings,
    paper_table: str | None,
    tables: Mapping[str, pd.DataFrame],
    output: TableOutput,
    *,
    eps: Mapping[str, float],
    cal_ratio: Mapping[str, float],
    groupings: Sequence[str],
) -> ResultsTable:
    """Run, summarize, pick the valid bound, save the tables and draw the error bars.

    Parameters
    ----------
    settings : TableSettings
        Method settings (its data settings are not read here).
    paper_table : str or None
        The paper table whose numbers are set beside ours (``None``: no paper numbers).
    tables, eps, cal_ratio, groupings
        As for :func:`run_results`.
    output : TableOutput
        What is saved and drawn: the file names, the layout's rows, the figure and its title.

    Returns
    -------
    ResultsTable

    Notes
    -----
    A table without token counts gets no STP: NaN in the long table, and the STP row is left out
    of the layout (the notes say so).
    """
    o, rows, file_name = output, tuple(output.rows), output.file_name
    notes = sources.source_notes(tables)
    if notes:  # a table without token counts: no STP
        rows = tuple(r for r in rows if r[0] != "STP")
    results = run_results(tables, settings, eps=eps, cal_ratio=cal_ratio, groupings=groupings)
    summary = summarize_results(results)
    valid_bound, comparison = pick_valid_bound(summary)
    side = side_by_side(summary, paper_table)
    paper_columns = paper_table is not None if o.paper_columns is None else o.paper_columns
    plotting.save_table(report_table(side, paper_columns), file_name)
    layout = paper_layout(side, valid_bound, rows=rows)
    plotting.save_table(layout, f"{file_name}{o.layout_suffix}")
    if o.groups_table:
        plotting.save_table(group_table(results, tables), f"{file_name}_groups")
    if o.figure is not None:
        cat = category_errors(results[results.grouping == "known"], setting="paper")
        fig = plot_category_errorbars(cat, eps, colors=plotting.METHOD_COLORS, scores=settings.scores, title=o.title)
        plotting.savefig(fig, o.figure)
    return ResultsTable(
        file_name,
        dict(tables),
        results,
        summary,
        valid_bound,
        comparison,
        layout,
        paper_table,
        notes,
        dict(eps),
        dict(cal_ratio),
    )


def make_tables(settings: TableSettings) -> dict[str, ResultsTable]:
    """Build the tables of ``settings.family`` for every pair in ``settings.pairs`` from its data source.

    Parameters
    ----------
    settings : TableSettings
        A table notebook's settings: the method's and which data (source, pairs, benchmarks, eps,
        calibration ratio, groupings, figures).
    Returns
    -------
    dict of str to ResultsTable
        By file name: the paper table's name for the simulated stand-ins, else
        ``<family>__<source tag>`` (e.g. ``known__generated__smollm2``).
    """
    s, family = settings, settings.family
    source = sources.resolve_source(s.data_source, columns=s.columns, generated_root=s.generated_root)
    allowed = ("known",) if family == "known" else ("split", "joint")
    groupings = tuple(s.groupings) if s.groupings is not None else allowed
    bad = [g for g in groupings if g not in allowed]
    if bad:
        raise ValueError(f"groupings: {bad} do not apply to the {family} tables (they have {list(allowed)})")
    out = {}
    for pair in list(s.pairs) if source.kind != "path" else [None]:
        spec = TABLE_SPECS[table_name(family, pair)] if source.is_simulated or pair in _PAPER_PAIRS else None
        if source.kind == "path":
            run_on = [source.dataset]
        elif s.benchmarks or spec is not None:
            run_on = list(s.benchmarks or spec.benchmarks)
        else:
            raise ValueError(
                f"benchmarks: pair {pair!r} has no paper table, so name its benchmarks, "
                "e.g. overrides={'benchmarks': ['walk']}"
            )
        eps = benchmark_eps(run_on, s.eps, spec.eps if spec is not None else None)
        # the paper's numbers stand beside ours only for the simulated stand-ins at the paper's eps
        paper = source.is_simulated and all(eps[b] == spec.eps.get(b) for b in run_on)
        tables = {
            b: sources.load_table(
                source, b, pair, notebook=FAMILY_NOTEBOOKS[family], scores=s.scores, loss_bound=s.loss_bound
            )
            for b in run_on
        }
        title = f"{pair} pair — {source.kind} data" if pair else source.path.name  # a path source has no pair
        if source.is_simulated:
            file_name, suffix, figure = spec.name, "_paper_layout", (s.figures or {}).get(pair)
        else:
            file_name, suffix = f"{family}__{source.tag(None, pair)}", "_layout"
            figure = f"errorbar_category__{source.tag(None, pair)}" if s.figures and "known" in groupings else None
        output = TableOutput(file_name, suffix, figure=figure, title=title, groups_table=not source.is_simulated)
        out[file_name] = build_table(
            s,
            spec.name if paper else None,
            tables,
            output,
            eps=eps,
            cal_ratio=resolve_cal_ratio(run_on, s.cal_ratio),
            groupings=groupings,
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
        yield (
            f"{name}: loss per dataset",
            pd.DataFrame({b: df[data.LOSS].describe() for b, df in t.data.items()}).round(3),
        )
        yield f"{name}: valid bounds compared (tighter: {t.valid_bound})", t.comparison.round(2)
        cells = "ours (paper)" if t.paper_table is not None else "ours (no paper numbers for this setting)"
        yield f"{name}: {cells}, trials = {int(t.summary['trials'].max())}", t.layout
        index, columns = ["dataset", "grouping", "group"], ["score", "method"]
        gv = experiment.group_violations(t.results[t.results.setting == "paper"], None, GROUP_KEYS)
        view = gv.pivot_table(index=index, columns=columns, values="violation_rate")
        yield f"{name}: per-group violation rate (%), paper recipe", (100 * view).round(0)
        view = category_errors(t.results, setting="paper").pivot_table(index=index, columns=columns, values="mean")
        yield f"{name}: mean test error per group (%), paper recipe", (100 * view).round(2)
