"""The real-data case study (notebook 31): a real per-item table through the results-table path.

:func:`read_realdata` reads and maps a real table into the schema with an explicit token-cost
model (:func:`realdata_table`); :func:`build_case_study` runs PAC vs G-PAC on its known groups
and PAC vs C-PAC (split and joint) through :func:`gpac_utils.paper.results_tables.build_table`.
:func:`case_study_source` and :func:`load_case_study` let the notebook read any data source
(:mod:`gpac_utils.paper.sources`): by default the real table (``data_source = None``), or the
simulated stand-in / the generated table of ``cfg["benchmark"]`` and ``cfg["pair"]``, or a path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data as D
from ..workflow import paths
from . import plotting, sources
from .results_tables import ResultsTable, build_table, table_group_violations
from .table_layout import LAYOUT_ROWS

#: The default real table, under the shared folder (absent on machines without it).
REALDATA_DEFAULT = ("mathl5_zeroeval", "mathl5_zeroeval.csv")
#: Columns of the saved per-group violation table.
VIOLATION_COLUMNS = [
    "setting",
    "method",
    "score",
    "bound",
    "group",
    "violation_rate",
    "violation_mcse",
    "mean_error",
    "mean_pop_risk",
    "n_test",
]


def resolve_data_path(data_path=None) -> Path:
    """The real table to read.

    Parameters
    ----------
    data_path : str or Path, optional
        A table; relative paths are taken from the repository root (notebooks run in a scratch
        folder). ``None``: the default under :data:`gpac_utils.workflow.paths.REALDATA`.

    Returns
    -------
    pathlib.Path
    """
    if data_path is None:
        return paths.REALDATA.joinpath(*REALDATA_DEFAULT)
    p = Path(data_path).expanduser()
    return p if p.is_absolute() else paths.REPO_ROOT / p


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per known group: size, accuracies (if present) and loss rate in %, plus an ``ALL`` row.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema.

    Returns
    -------
    pandas.DataFrame
    """
    cols = [c for c in (D.THINK_CORRECT, D.NOTHINK_CORRECT, D.LOSS) if c in table.columns]
    parts = list(table.groupby(D.GROUP, sort=True)) if D.GROUP in table.columns else []
    parts.append(("ALL", table))
    return pd.DataFrame([{"group": g, "n": len(df), **{c: 100 * df[c].mean() for c in cols}} for g, df in parts])


def realdata_table(
    raw: pd.DataFrame,
    columns: Mapping[str, str] | None,
    *,
    chars_per_token: float = 4.0,
    hidden_think_tokens: float | None = None,
    think_chars: str | None = "strong_chars",
    nothink_chars: str | None = "weak_chars",
) -> pd.DataFrame:
    """Map a real per-item table into the schema, with an explicit token-cost model.

    Parameters
    ----------
    raw : pandas.DataFrame
        The source table.
    columns : Mapping[str, str] or None
        Source column -> schema column (:func:`gpac_utils.data.apply_mapping`; ``loss`` is derived
        from the correctness columns when absent; an existing ``loss`` is checked against them).
    chars_per_token : float, default 4.0
        Characters per token of the cost model.
    hidden_think_tokens : float, optional
        Assumed hidden reasoning tokens per item. When the source has no token counts,
        ``think_tokens = think_chars / chars_per_token + hidden_think_tokens`` and
        ``nothink_tokens = nothink_chars / chars_per_token``; ``None`` leaves the table without
        tokens, so STP is not computed.
    think_chars, nothink_chars : str, optional
        Character-count columns of the cost model.

    Returns
    -------
    pandas.DataFrame
        The validated table (id, group, loss, correctness, tokens, scores).
    """
    df = D.apply_mapping(raw, dict(columns or {}))
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


def read_realdata(path: Path, cfg: Mapping) -> pd.DataFrame:
    """Read the real table at ``path`` (parquet or CSV) and map it with ``cfg``'s columns and cost model.

    Parameters
    ----------
    path : pathlib.Path
        The table (:func:`resolve_data_path`).
    cfg : Mapping
        ``columns``, ``chars_per_token``, ``hidden_think_tokens``.

    Returns
    -------
    pandas.DataFrame
    """
    mapped = D.read_table(path, cfg["columns"])
    return realdata_table(
        mapped, None, chars_per_token=cfg["chars_per_token"], hidden_think_tokens=cfg["hidden_think_tokens"]
    )


def case_study_source(cfg: Mapping) -> sources.DataSource:
    """The data source of the case study.

    Parameters
    ----------
    cfg : Mapping
        ``data_source`` (``None``: the real table at ``data_path``, :func:`resolve_data_path`),
        ``data_path``, ``columns`` and ``generated_root``.

    Returns
    -------
    DataSource
    """
    if cfg["data_source"] is None:
        return sources.DataSource("path", resolve_data_path(cfg["data_path"]), dict(cfg["columns"] or {}))
    return sources.resolve_source(cfg["data_source"], columns=cfg["columns"], generated_root=cfg["generated_root"])


def load_case_study(source: sources.DataSource, cfg: Mapping) -> pd.DataFrame:
    """Read the case study's table from ``source``, checked for notebook 31.

    A path goes through :func:`read_realdata` (its column mapping and token-cost model); the
    simulated and generated tables of ``cfg["benchmark"]`` and ``cfg["pair"]`` are read as they are.

    Parameters
    ----------
    source : DataSource
        From :func:`case_study_source`.
    cfg : Mapping
        ``benchmark``, ``pair``, ``scores``, ``columns``, ``chars_per_token``, ``hidden_think_tokens``.

    Returns
    -------
    pandas.DataFrame
    """
    if source.kind == "path":
        if not source.path.is_file():
            raise sources.SourceError(f"data_source: no table at {source.path}")
        table = read_realdata(source.path, {**cfg, "columns": source.columns})
        where = source.where()
    else:
        table = sources.read_source(source, cfg["benchmark"], cfg["pair"], loss_bound=cfg["loss_bound"])
        where = source.where(cfg["benchmark"], cfg["pair"])
    return sources.check_table(table, "31_realdata_case_study", where, scores=cfg["scores"])


def build_case_study(
    table: pd.DataFrame, cfg: Mapping, source: str, *, dataset: str = "real", suffix: str = ""
) -> ResultsTable:
    """PAC vs G-PAC (known groups, if any) and PAC vs C-PAC (split, joint) on one real table.

    Saves ``realdata_case_study`` (long), ``realdata_case_study_layout`` (with a Routed share
    row), ``realdata_group_violations`` (known groups) and ``realdata_errorbar_category``.

    Parameters
    ----------
    table : pandas.DataFrame
        The mapped table (:func:`read_realdata`).
    cfg : Mapping
        Method settings of :mod:`gpac_utils.paper.results_tables` plus ``eps`` and ``cal_ratio``
        (floats).
    source : str
        The table's name, for the figure title.
    dataset : str, default "real"
        The dataset's name in the tables.
    suffix : str, default ""
        Appended to every output's name (e.g. ``"__generated__walk__smollm2"``).

    Returns
    -------
    ResultsTable
    """
    groupings = (["known"] if D.GROUP in table.columns else []) + ["split", "joint"]
    built = build_table(
        cfg,
        None,
        {dataset: table},
        eps={dataset: cfg["eps"]},
        cal_ratio={dataset: cfg["cal_ratio"]},
        groupings=groupings,
        file_name=f"realdata_case_study{suffix}",
        layout_suffix="_layout",
        rows=LAYOUT_ROWS + (("Routed_share", "Routed share (%)"),),
        figure=f"realdata_errorbar_category{suffix}" if "known" in groupings else None,
        title=f"{source}: eps = {cfg['eps']}",
        # the real table's long table keeps its (empty) paper columns, as committed in figures/tables/
        paper_columns=not suffix,
    )
    if "known" in groupings:
        gv = table_group_violations(built.results[built.results.grouping == "known"])[VIOLATION_COLUMNS]
        plotting.save_table(gv, f"realdata_group_violations{suffix}", floatfmt=".3f")
    return built
