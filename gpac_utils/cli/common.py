"""The helpers of the ``gpac`` commands (:mod:`gpac_utils.cli`): options, tables, checks and warnings."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..checks import DataError, ParameterError
from ..group_collection import SEP, ambiguous
from ..settings import COMMON, CORRECTION, REQUIRED, Interval, Settings, declarations

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
#: The settings ``calibrate`` and ``plan`` both take, from options of the same name (their declarations').
_COMMON = tuple(s for s in (*COMMON, CORRECTION) if s.option)
SCORE = "score_cli"  # the internal name of the chosen score column


def _default(name: str):
    """The declared default of a setting (:func:`gpac_utils.settings.declarations`: the options' come from there)."""
    return declarations()[name].default


def _add_setting(p, setting) -> None:
    """The options of a declared setting (a compound one's parts): type, choices, default and help from it."""
    for part in setting.flat():
        c = part.constraint
        kind = {"type": c.type} if isinstance(c, Interval) else {"choices": list(c.options)}
        given = {"required": True} if part.default is REQUIRED else {"default": part.default}
        p.add_argument(f"--{part.name.replace('_', '-')}", **kind, **given, help=part.help)


# --------------------------------------------------------------------------- parser
def _add_common(p, loss_help: str, group_default, group_help: str, several: bool = False) -> None:
    """The options ``calibrate`` and ``plan`` share: the columns and the settings of :data:`_COMMON` (``several``:
    ``--group-col`` may be repeated, a grouping each)."""
    p.add_argument("--data", required=True, type=Path, help="table, one row per item (.csv, .tsv, .parquet, .jsonl)")
    p.add_argument("--score-col", required=True, help="uncertainty score in [0, 1]; larger = less certain")
    p.add_argument("--loss-col", default="loss", help=loss_help)
    p.add_argument("--group-col", default=group_default, help=group_help, **({"action": "append"} if several else {}))
    for setting in _COMMON:
        _add_setting(p, setting)


class _StoreOnce(argparse._StoreAction):
    """An option of one value given twice is a usage error, not its last value kept in silence
    (``--group-col subject --group-col language`` certified only ``language``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(self, "given", None) is not None:
            several = "; several groupings: gpac calibrate --group-col a --group-col b (docs/overlapping-groups.md)"
            hint = several if self.dest == "group_col" else ""
            parser.error(f"{option_string}: given twice ({self.given!r}, then {values!r}); it takes one value{hint}")
        self.given = values
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """Every command's parser (subparsers are made of the same class): single-valued options refuse repeats."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


# --------------------------------------------------------------------------- helpers
def _once(cols) -> None:
    """Refuse a ``--group-col`` given twice (each grouping's column once)."""
    twice = [c for i, c in enumerate(cols) if c in cols[:i]]
    if twice:
        raise ParameterError(f"--group-col: {twice[0]!r} given twice; give each grouping's column once")


def _check_groupings(method_name: str, entry, cols, several: str) -> None:
    """Refuse, for the method ``entry`` (``--method method_name``), a ``--group-col`` given twice, several with a
    method of one grouping (``several``: the methods that would take them) and, for a method of a collection, a
    grouping's column name holding ``=`` or :data:`~gpac_utils.group_collection.SEP`; ``gpac calibrate`` and
    ``gpac plan`` share it."""
    _once(cols)
    if len(cols) > 1 and entry.groups != "collection":
        raise ParameterError(
            f"--group-col: --method {method_name} calibrates one grouping (a partition), got {len(cols)} {cols}; "
            f"groups of several groupings, which may overlap, need --method {several} (docs/overlapping-groups.md)"
        )
    named = [c for c in cols if "=" in c or SEP in c] if entry.groups == "collection" else []
    if named:
        raise ParameterError(
            f"--group-col {named[0]!r}: a grouping's column name must not contain '=' or {SEP!r} (a group is "
            f"grouping=label, and a cell joins its groups with {SEP!r}); rename the column"
        )


def _need_columns(df: pd.DataFrame, path: Path, cols) -> None:
    """Each column named (``{option: column}`` or ``(option, column)`` pairs) is one of the table's, else one line."""
    for option, col in cols.items() if isinstance(cols, dict) else cols:
        if col is not None and col not in df.columns:
            raise DataError(f"{option} {col!r}: no such column in {path}; it has {list(df.columns)}")


def _header(path: Path) -> list:
    """The column names as the file has them (pandas renames a repeated name ``loss.1``)."""
    fmt = data.table_format(path)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # pandas' parquet engine

            return list(pq.read_schema(path).names)
        with open(path, newline="", encoding="utf-8") as f:
            if fmt == "jsonl":
                pairs: list = []
                json.loads(f.readline() or "{}", object_pairs_hook=lambda kv: pairs.extend(kv) or dict(kv))
                return [k for k, _ in pairs]
            return next(csv.reader(f, delimiter="\t" if fmt == "tsv" else ","), [])
    except (OSError, ValueError, UnicodeDecodeError):
        return []  # read_frame names what is wrong with the file


def _read(path: Path) -> pd.DataFrame:
    """The table, unvalidated; a table with two columns of one name is refused (the first would be used)."""
    df = data.read_frame(path)
    names = _header(path)
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        where = {c: [i + 1 for i, x in enumerate(names) if x == c] for c in dup}
        raise DataError(f"{path}: duplicate column name(s) {dup} (columns {where}); rename them so that each is one")
    return df


def _output(path: Path, table: bool = False, data_path: Path | None = None) -> None:
    """Refuse an output path that cannot be written, before any work (exit 1, as a failed write)."""
    problem = None
    if path.is_dir():
        problem = "it is a directory; give a file name"
    elif any(p.exists() and not p.is_dir() for p in path.parents):
        problem = f"{next(p for p in path.parents if p.exists() and not p.is_dir())} is not a directory"
    elif data_path is not None and path.exists() and path.resolve() == Path(data_path).resolve():
        problem = "it is the --data file; write the routed table elsewhere"
    elif table and Path(path).suffix.lower() not in data.FORMATS:
        problem = f"unknown table format {Path(path).suffix!r}; use one of {sorted(data.FORMATS)}"
    if problem:
        raise DataError(f"-o {path}: cannot write it ({problem})")


def _scores(df: pd.DataFrame, col: str, named: pd.DataFrame) -> np.ndarray:
    if pd.api.types.is_bool_dtype(df[col]):
        raise DataError(f"column {col!r} holds booleans (True/False), not scores in [0, 1]")
    s = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    for bad, what in (
        (df[col].notna().to_numpy() & np.isnan(s), "is not numeric"),
        (~np.isfinite(s), "has missing, NaN or infinite values"),
        ((s < 0) | (s > 1), "must lie in [0, 1]"),
    ):
        if bad.any():
            raise DataError(f"column {col!r} {what}; bad in {data.describe_rows(named, bad)}")
    return s


def _groups(df: pd.DataFrame, col: str, named: pd.DataFrame) -> np.ndarray:
    missing = df[col].isna().to_numpy()
    if missing.any():
        raise DataError(f"column {col!r} has missing group labels in {data.describe_rows(named, missing)}")
    labels = df[col].astype(str).to_numpy()
    empty = labels == ""
    if empty.any():
        raise DataError(f"column {col!r} has empty group labels ('') in {data.describe_rows(named, empty)}")
    return labels


def _grouping_labels(df: pd.DataFrame, cols, named: pd.DataFrame) -> pd.DataFrame:
    """The label columns of several groupings (``gpac calibrate`` and ``route`` of a collection), each checked as
    :func:`_groups` checks one; a label that would read as another cell's is refused
    (:func:`~gpac_utils.group_collection.ambiguous`)."""
    out = {}
    for col in cols:
        labels = out[col] = _groups(df, col, named)
        joined = ambiguous(labels, cols)
        if joined.any():
            raise DataError(
                f"column {col!r} has labels containing {SEP!r} and a grouping's 'name=' (what joins a cell's groups) "
                f"in {data.describe_rows(named, joined)}"
            )
    return pd.DataFrame(out, index=df.index)


def _threshold_text(t) -> str:
    return "always think" if t is None or (isinstance(t, float) and not math.isfinite(t)) else f"{t:.4g}"


def _warn(groups, what: str, kind: str = "group(s)") -> None:
    """One ``warning:`` line for a kind of group (or of cell), with a count and the first five names."""
    if groups:
        more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
        print(f"warning: {len(groups)} {kind} {what}: {', '.join(map(repr, groups[:5]))}{more}", file=sys.stderr)


@contextlib.contextmanager
def _warning_lines(category):
    """The warnings of ``category`` raised in the block as ``warning:`` lines, one each (a setting that looks like
    a mistake, an audit's finding); any other warning passed on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", category)
        yield
    for w in caught:
        if issubclass(w.category, category):
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


@contextlib.contextmanager
def _as_options(errors: type[Exception] = ParameterError):
    """An error of ``errors`` (default :class:`~gpac_utils.checks.ParameterError`), ``name: message``, raised in the
    block as a ParameterError ``--name: message`` (the option as typed)."""
    try:
        yield
    except errors as exc:
        name, _, message = str(exc).partition(":")
        raise ParameterError(f"--{name.replace('_', '-')}:{message}") from None


def _settings_from(a, recipe) -> Settings:
    """The Settings of the parsed options ``a`` (each declared setting it has options for) and ``recipe``:
    built once."""
    values = {}
    for s in declarations().values():
        parts = s.flat()
        if s.option and all(hasattr(a, p.name) for p in parts):
            given = {p.name: getattr(a, p.name) for p in parts}
            values[s.name] = s.join(**given) if s.parts else given[s.name]
    return Settings(recipe=recipe, **values)
