"""Command line: ``gpac calibrate``, ``route``, ``plan``, ``inspect``, ``fit-router``, ``audit`` and ``verify``
(also ``python -m gpac_utils``). ``gpac COMMAND --help`` lists a command's options.

calibrate
    fit PAC / G-PAC / C-PAC on a table and write the certificate: the thresholds, every setting,
    the provenance and each group's status as JSON (:mod:`gpac_utils.certificate`). A
    larger score U means a *less* certain non-thinking answer: an item is routed to the
    non-thinking model when U <= its group's threshold. A threshold ``null`` in the JSON means
    "always think" (no threshold could be certified for that group). With ``--score-model``
    (a model written by ``fit-router``), the score column is first recomputed from the model and
    the table's text column, and refused unless equal within 1e-5; the model's hash is recorded.
route
    read such a JSON (its schema checked) and a table; write the table with ``threshold`` and
    ``route_nothink`` in the format of the ``-o`` suffix (.csv, .tsv, .parquet, .jsonl). A warning
    names the columns when they differ from those the certificate was calibrated on.
plan
    how many expert labels each group needs, from a labelled pilot: whether each group can certify
    anything at all with its items (:mod:`gpac_utils.feasibility`), the predicted routed share per
    group and number of labels (:mod:`gpac_utils.prediction`) and the budget's best allocation
    (:mod:`gpac_utils.allocation`, an exact dynamic programme).
inspect
    print a thresholds file for review (:mod:`gpac_utils.certificate`): its settings, provenance
    (hashes of the table and columns, package version, recipe and its overrides, seed, creation
    time, the score model's path, hash, embedder and text column) and one row per group (n,
    labelled, status, threshold, the certified bound at it); ``--data`` checks a table against the
    file by its columns' values, whatever the format (a copy's bytes are shown; the file the
    provenance names must keep its bytes), and the score model's file by its hash.
fit-router
    fit the router-based score (sentence embeddings of the prompt, logistic regression) on a share
    of a labelled table, write it as JSON, and write the other rows scored by it (the table to
    calibrate on); an existing score column is replaced only with ``--overwrite-score-col``.
audit
    test a certificate on fresh labelled data, per group (:mod:`gpac_utils.audit`): the realised
    risk, its bounds and a verdict at a family-wise level; exit 3 when a group is violated (the
    other statuses: ``gpac audit --help``).
verify
    check every field of a certificate (:mod:`gpac_utils.verify`): recomputed from the calibration
    table and the recorded settings, checked against the fields it must agree with, or against
    what you state with ``--expect eps=0.1 alpha=0.05 method=G-PAC score=score_logits ...``. Exit 0:
    every recomputed and cross-checked field agrees and every ``--expect`` matches; the fields you
    do not state are listed as taken on trust.

Exit status: 0 on success, 2 on a usage error (a bad option or parameter value), 1 on a data
error (a missing or malformed file, column or row). Errors are one line, never a traceback;
warnings are ``warning:`` lines, one per kind, with a count.

Checked before any work: every option's value; ``gpac calibrate`` without ``--method`` calibrates
G-PAC when ``--group-col`` is given, else PAC; options the chosen method ignores are refused
(``--group-col`` with ``--method pac`` or ``cpac``, ``--k``/``--partition``/``--mode`` without
``--method cpac``, ``--simultaneous`` with ``--method pac``; ``gpac route --group-col`` with a file
that is not G-PAC's); the output path (``-o``: not a directory, its parent not a file, for
``route`` a known table suffix and not the ``--data`` file); a table with two columns of one name
(the first would be used silently); empty group labels (``''``); and ``gpac plan --budget`` above
what the plan can spend (each group's largest label count on the grid, capped at its rows).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import (
    allocation,
    bounds,
    checks,
    cli_serve,
    data,
    feasibility,
    prediction,
    sampling,
    selection,
    sequential_labels,
)
from .calibrate import (
    CALIBRATORS,
    GROUPINGS,
    NO_FEASIBLE,
    TOO_FEW,
    UNSEEN,
    GroupWarning,
    calibrator,
    default_method,
    method,
)
from .certificate import Certificate, file_sha256
from .checks import DataError, ParameterError
from .recipe import RECIPES, VALID, Recipe, as_recipe
from .scores import SCORES
from .settings import COMMON, CORRECTION, RENAMED_UNTIL, REQUIRED, Interval, Settings, declarations

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
def _add_common(p, loss_help: str, group_default, group_help: str) -> None:
    """The options ``calibrate`` and ``plan`` share: the columns and the settings of :data:`_COMMON`."""
    p.add_argument("--data", required=True, type=Path, help="table, one row per item (.csv, .tsv, .parquet, .jsonl)")
    p.add_argument("--score-col", required=True, help="uncertainty score in [0, 1]; larger = less certain")
    p.add_argument("--loss-col", default="loss", help=loss_help)
    p.add_argument("--group-col", default=group_default, help=group_help)
    for setting in _COMMON:
        _add_setting(p, setting)


class _StoreOnce(argparse._StoreAction):
    """An option of one value given twice is a usage error, not its last value kept in silence
    (``--group-col subject --group-col language`` certified only ``language``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(self, "given", None) is not None:
            hint = "; the groups of several columns: docs/overlapping-groups.md" if self.dest == "group_col" else ""
            parser.error(f"{option_string}: given twice ({self.given!r}, then {values!r}); it takes one value{hint}")
        self.given = values
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """Every command's parser (subparsers are made of the same class): single-valued options refuse repeats."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="gpac", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter
    c = sub.add_parser("calibrate", help="fit thresholds and write them as JSON", formatter_class=fmt)
    _add_common(c, "loss in [0, loss-bound] of the non-thinking answer", None, "known group labels (for --method gpac)")
    c.add_argument("--id-col", default="item_id", help="unique item identifier")
    c.add_argument(
        "--score",
        choices=list(SCORES),
        default=None,
        help="the score's registry name, recorded in the certificate (what the serving router computes); "
        "when not given: --score-col when it is one. A score_router column without --score-model (the tables' "
        "cross-fitted one) is no score a router serves, and gpac verify refuses its certificate: give --score "
        "score_router_crossfit, or fit a model (gpac fit-router) and give --score-model",
    )
    c.add_argument("--map", nargs="*", default=[], metavar="SOURCE=TARGET", help="more column renames")
    methods = {m.cli_name: m for m in CALIBRATORS.values()}
    c.add_argument(
        "--method",
        choices=list(methods),
        default=None,
        help="calibrator; when not given: the one of known groups with --group-col, else the one of no groups",
    )
    c.add_argument(
        "--recipe",
        choices=list(RECIPES),
        default="valid",
        help=f"named calibration recipe; 'valid' = {VALID.bound}, every item labelled, first-crossing",
    )
    c.add_argument("--bound", choices=list(bounds.BOUNDS), default=None, help="override the recipe's bound")
    c.add_argument(
        "--sampling",
        choices=list(sampling.SCHEMES),
        default=None,
        help="override the recipe's label sampling; 'bernoulli' DISCARDS each label with probability 1 - label-prob "
        "(use it only to mimic a partly labelled deployment); 'full' uses every label",
    )
    c.add_argument("--label-prob", type=float, default=None, help="labelling probability for bernoulli / resample")
    c.add_argument("--rule", choices=list(selection.RULES), default=None, help="override the recipe's rule")
    c.add_argument("--candidates", default=None, help="'auto', 'all' or a quantile grid size (default: recipe's)")
    for setting in declarations().values():  # the calibrators' own settings (C-PAC's, a plugin's)
        if setting.option and setting not in _COMMON:
            _add_setting(c, setting)
    c.add_argument("--simultaneous", action="store_true", help=argparse.SUPPRESS)  # renamed: refused below
    c.add_argument(
        "--score-model",
        type=Path,
        default=None,
        help="the score's model (gpac fit-router): the score column is recomputed from it and the text column and "
        "refused when it differs by more than 1e-5, or when the table shares an item id with the model's fitting "
        "items; then its SHA-256, embedder and text column are recorded",
    )
    c.add_argument("-o", "--output", required=True, type=Path, help="thresholds JSON to write")
    r = sub.add_parser("route", help="route a table with saved thresholds", formatter_class=fmt)
    r.add_argument("--thresholds", required=True, type=Path, help="JSON written by calibrate")
    r.add_argument("--data", required=True, type=Path, help="table to route (.csv, .tsv, .parquet, .jsonl)")
    r.add_argument("--score-col", default=None, help="default: the score column used at calibration")
    r.add_argument("--group-col", default=None, help="default: the group column used at calibration")
    r.add_argument("--id-col", default=None, help="default: the id column used at calibration (if present)")
    r.add_argument("-o", "--output", required=True, type=Path, help="routed table; its suffix sets the format")
    p = sub.add_parser(
        "plan", help="plan how many expert labels each group needs, from a labelled pilot", formatter_class=fmt
    )
    _add_common(p, "losses; rows without one are unlabelled", "group", "group labels")
    p.add_argument("--pilot-fraction", type=float, default=None, help="pilot: a random share of the labelled rows")
    p.add_argument("--recipe", default="valid", help="named calibration recipe: " + ", ".join(RECIPES))
    p.add_argument("--bound", default=None, help="override the recipe's bound: " + ", ".join(bounds.BOUNDS))
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="calibration labels, on top of the pilot's (default: half of the rows outside the pilot); drawn from "
        "the rows outside the pilot",
    )
    p.add_argument("--grid", default=None, help="comma-separated label counts (default: geometric to the group size)")
    p.add_argument("--no-cap", action="store_true", help="allow more labels than a group has rows")
    p.add_argument("--n-resamples", type=int, default=200)
    p.add_argument("--pilot-model", choices=list(prediction.PILOT_MODELS), default=prediction.PilotModel().kind)
    p.add_argument("--target", type=float, default=None, help="also report the labels needed to route this share")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="no forecast: label in batches, stop each group when its anytime-valid bound certifies or cannot "
        "(gpac_utils.sequential_labels); each call feeds the requested losses and writes the next rows to -o",
    )
    p.add_argument(
        "--state", type=Path, default=None, help="--sequential: its state (default <output stem>.state.json)"
    )
    p.add_argument("--batch-size", type=int, default=None, help="--sequential: labels per active group per batch")
    p.add_argument("--grid-size", type=int, default=50, help="--sequential: thresholds per group (score quantiles)")
    p.add_argument("--bet", default="mixture", help="--sequential: the e-process's bet (mixture, max, grapa)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        help="CSV of the plan, with each group's feasibility (n_needed, labels_needed, feasible); curves go to "
        "<stem>_curves.csv",
    )
    i = sub.add_parser("inspect", help="print a thresholds file for review", formatter_class=fmt)
    i.add_argument("file", type=Path, help="JSON written by calibrate")
    i.add_argument(
        "--data",
        type=Path,
        default=None,
        help="check this table's column hashes against the file's provenance, and the recorded score model's file "
        "by its SHA-256; exit 1 when one differs",
    )
    cli_serve.add_parsers(sub)  # fit-router, audit, verify
    return ap


# --------------------------------------------------------------------------- helpers
def _mapping(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        src, eq, dst = p.partition("=")
        if not (src and eq and dst):
            raise ParameterError(f"--map: expects SOURCE=TARGET, got {p!r}")
        out[src] = dst
    return out


def _recipe(a) -> Recipe:
    base = as_recipe(a.recipe)
    sampling_ = a.sampling or base.sampling
    if sampling_ == "full" and a.label_prob not in (None, 1):
        raise ParameterError(
            f"--label-prob: sampling 'full' labels every item (bernoulli/resample only), got {a.label_prob}"
        )
    base_prob = None if base.sampling == "full" else base.label_prob
    label_prob = None if sampling_ == "full" else next(p for p in (a.label_prob, base_prob, 0.5) if p is not None)
    cand = base.candidates if a.candidates is None else a.candidates
    try:  # Recipe refuses a bad grid size, with the message
        cand = int(cand) if str(cand).isdigit() else cand
        return Recipe(a.bound or base.bound, sampling_, label_prob, a.rule or base.rule, cand)
    except ValueError as exc:
        raise ParameterError(f"--{str(exc).replace('_', '-')}") from None


def _need_columns(df: pd.DataFrame, path: Path, cols: dict[str, str | None]) -> None:
    for option, col in cols.items():
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


def _refuse_ignored(a) -> None:
    """Infer ``--method`` when it is not given (the method of known groups with ``--group-col``, else the
    method of one group); refuse the options the chosen method ignores (a silent default would answer
    another question). What a method reads is its registry entry's ``groups``."""
    by_groups = {kind: default_method(kind).cli_name for kind in GROUPINGS}
    if a.method is None:
        a.method = by_groups["known"] if a.group_col else by_groups["none"]
    groups = method(a.method).groups
    if a.group_col and groups != "known":
        known = sorted(m.cli_name for m in CALIBRATORS.values() if m.groups == "known")
        raise ParameterError(
            f"--group-col: only --method {' or '.join(known)} uses group labels (got --method {a.method}); "
            f"add --method {by_groups['known']}"
        )
    reads = method(a.method).cls.SETTINGS
    for setting in declarations().values():  # a setting the method does not read, given: refused, naming who reads it
        given = [p for p in setting.flat() if setting.option and getattr(a, p.name) != p.default]
        if given and setting not in reads:
            readers = " or ".join(m.cli_name for m in CALIBRATORS.values() if setting in m.cls.SETTINGS)
            raise ParameterError(
                f"--{given[0].name.replace('_', '-')}: only --method {readers} uses it (got --method {a.method})"
            )


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


def _threshold_text(t) -> str:
    return "always think" if t is None or (isinstance(t, float) and not math.isfinite(t)) else f"{t:.4g}"


def _warn(groups, what: str) -> None:
    """One ``warning:`` line for a kind of group, with a count and the first five names."""
    if groups:
        more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
        print(f"warning: {len(groups)} group(s) {what}: {', '.join(map(repr, groups[:5]))}{more}", file=sys.stderr)


def _report_small_groups(cal) -> None:
    """One warning line per kind of group that always thinks, by its status (a calibrator's own statuses,
    such as pooled groups', are not guessed from the group's size)."""
    min_group_size = cal.config.min_group_size
    small = sorted(g for g, r in cal.groups_.items() if r.status == TOO_FEW and r.n < min_group_size)
    _warn(small, f"have fewer than {min_group_size} calibration items and always think")
    few = sorted(g for g, r in cal.groups_.items() if r.status == TOO_FEW and g not in small)
    if few:
        st = cal.config  # checked once, when built
        need = feasibility._min_items(st.eps, st.alpha_per_group(len(cal.groups_)), st.recipe, st.loss_bound, st.risk)
        _warn(few, f"have fewer items than {cal.recipe.bound} needs to certify anything ({need}) and always think")
    uncertified = sorted(g for g, r in cal.groups_.items() if r.status == NO_FEASIBLE)
    _warn(uncertified, "could not be certified at eps and always think")


# --------------------------------------------------------------------------- calibrate
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


def _settings(a) -> Settings:
    """The :class:`~gpac_utils.settings.Settings` of the options, built and checked once (a bad value: exit 2,
    naming the option)."""
    recipe = _recipe(a)
    try:
        return _settings_from(a, recipe)
    except ValueError as exc:  # "name: message" -> "--name: message" (the option as typed)
        option, _, message = str(exc).partition(":")
        raise ParameterError(f"--{option.replace('_', '-')}:{message}") from None


def _roles(cols: dict[str, str | None]) -> None:
    """Refuse one column given for two roles (``--score-col x --loss-col x``), naming both options."""
    seen: dict[str, str] = {}
    for option, col in cols.items():
        if col is None:
            continue
        if col in seen:
            raise ParameterError(f"{option} {col!r}: the same column as {seen[col]}; give each its own column")
        seen[col] = option


def _calibrate(a) -> int:
    # Parameters first (usage errors, exit 2), then the data (exit 1).
    if a.simultaneous:
        raise ParameterError(
            f"--simultaneous: replaced by --correction bonferroni (this message goes in gpac_utils {RENAMED_UNTIL})"
        )
    _refuse_ignored(a)
    settings = _settings(a)
    recipe, loss_bound = settings.recipe, settings.loss_bound
    known_groups = method(a.method).groups == "known"
    if known_groups and not a.group_col:
        raise ParameterError(f"--group-col: --method {a.method} needs the column of known group labels")
    cols = {"--score-col": a.score_col, "--loss-col": a.loss_col, "--group-col": a.group_col, "--id-col": a.id_col}
    _roles(cols)
    extra = _mapping(a.map)
    _output(a.output)
    df = _read(a.data)
    _need_columns(df, a.data, cols)
    model = None
    if a.score_model is not None:  # the score column recomputed from the model, before any work is written
        model = cli_serve.record_score_model(a.score_model, df, score_col=a.score_col, id_col=a.id_col)
    mapping = {a.score_col: SCORE, a.loss_col: data.LOSS, a.id_col: data.ID, **extra}
    if a.group_col:
        mapping[a.group_col] = data.GROUP
    table = data.apply_mapping(df[[c for c in mapping if c in df.columns]], mapping)
    try:
        table = data.validate(table, loss_bound=loss_bound, score_cols=[SCORE], require_group=known_groups)
    except data.SchemaError as exc:  # name the user's columns, not the internal ones
        msg = str(exc)
        for src, dst in mapping.items():
            msg = msg.replace(repr(dst), repr(src))
        raise DataError(msg) from None
    if bounds.BOUNDS[recipe.bound].binary_terms:
        z = table[data.LOSS].to_numpy(float) / loss_bound
        bad = (z != 0) & (z != 1)
        if bad.any():
            others = " or ".join(bounds.BOUNDS.names(valid=True, binary_terms=False))
            raise DataError(
                f"--bound {recipe.bound} needs losses of exactly 0 or {loss_bound} (the loss bound); "
                f"{data.describe_rows(table, bad)} have other values: use {others}"
            )
    u, loss = table[SCORE].to_numpy(float), table[data.LOSS].to_numpy(float)
    cal = calibrator(a.method, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported below, one line per kind
        cal.fit(u, loss, table[data.GROUP] if known_groups else None)
    roles = {"score": a.score_col, "loss": a.loss_col, "group": a.group_col, "id": a.id_col}
    used = {role: (col, df[col].to_numpy() if col in df.columns else None) for role, col in roles.items()}
    cert = Certificate.from_calibrator(
        cal,
        columns=used,
        score=a.score,
        table_path=a.data,
        recipe_name=a.recipe,
        n_items=len(table),
        score_model=model,
    )
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(cert.to_json())
    _report_small_groups(cal)
    shown = ", ".join(f"{g}: {_threshold_text(t)}" for g, t in cert.thresholds.items())
    risk = "" if a.risk == _default("risk") else f", risk {a.risk}"
    print(f"{cal.name} ({recipe.bound}, {recipe.sampling}, {recipe.rule}{risk}) thresholds {{{shown}}} -> {a.output}")
    return EXIT_OK


# --------------------------------------------------------------------------- route
def _route(a) -> int:
    cert = Certificate.read(a.thresholds)
    if a.group_col and cert.kind != "known":
        raise ParameterError(f"--group-col: a {cert.method} thresholds file routes without group labels")
    _output(a.output, table=True, data_path=a.data)
    cols = cert.columns
    # an option given on the command line wins over the column used at calibration
    score_col, group_col, id_col = (getattr(a, f"{key}_col") or cols.get(key) for key in ("score", "group", "id"))
    differ = [
        f"{key} {col!r} (calibrated on {cols[key]!r})"
        for key, col in (("score", score_col), ("group", group_col))
        if cols.get(key) and col and col != cols[key] and (key == "score" or cert.kind == "known")
    ]
    if differ:
        print(f"warning: the data's columns differ from the certificate's: {'; '.join(differ)}", file=sys.stderr)
    if not score_col:
        raise ParameterError("--score-col: the certificate names no score column; give it")
    cal = cert.calibrator()
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": score_col})
    named = df.rename(columns={id_col: data.ID}) if id_col in df.columns else df
    if id_col in df.columns and df[id_col].duplicated().any():  # each row is still routed on its own
        twice = df[id_col].duplicated(keep=False).to_numpy()
        print(f"warning: column {id_col!r} has duplicate ids in {data.describe_rows(named, twice)}", file=sys.stderr)
    s = _scores(df, score_col, named)
    groups = None
    if cert.kind == "known":
        if not group_col:
            raise ParameterError(f"--group-col: {cert.method} thresholds need the column of group labels")
        _need_columns(df, a.data, {"--group-col": group_col})
        groups = _groups(df, group_col, named)
        known, present = set(cal.thresholds_), set(np.unique(groups).tolist())
        unseen = sorted(present - known)
        n = int(np.isin(groups, unseen).sum())
        _warn(unseen, f"in the data are not in the thresholds file ({UNSEEN}); their {n} item(s) always think")
        _warn(sorted(known - present), "of the thresholds file do not occur in the data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported above
        thr = cal.thresholds_for(s, groups)
    out = df.assign(threshold=thr, route_nothink=s <= thr)
    data.write_table(out, a.output)
    print(f"routed {int(out['route_nothink'].sum())}/{len(out)} items to the non-thinking model -> {a.output}")
    return EXIT_OK


# --------------------------------------------------------------------------- inspect
def _inspect(a) -> int:
    cert = Certificate.read(a.file)
    print(cert.render())
    if a.data is not None:
        lines, ok = cert.verify(a.data, _read(a.data))  # the columns' values decide (the file's bytes: shown)
        model = cert.score_model_path()
        if model is not None:  # the recorded score model's file: its hash (gpac verify recomputes its scores)
            found = model.is_file()
            same = found and file_sha256(model) == cert.provenance["score_model"]["sha256"]
            ok &= same
            state = "matches" if same else ("DIFFERS" if found else "MISSING")
            lines.append(f"score model {model}: sha256 {state} (provenance.score_model.sha256)")
        print("")
        print("\n".join(lines))
        if not ok:
            raise DataError(f"--data {a.data}: does not match {a.file} (the lines above marked DIFFERS or MISSING)")
    return EXIT_OK


# --------------------------------------------------------------------------- plan
def _plan_settings(a) -> tuple[Settings, prediction.PilotModel, int | None]:
    """The settings, pilot model and budget of ``gpac plan`` (usage errors name the option as typed)."""
    try:
        recipe = as_recipe(a.recipe) if a.bound is None else as_recipe(a.recipe).replace(bound=a.bound)
        settings = _settings_from(a, recipe)
        checks.check_int("n_resamples", a.n_resamples, 2)
        if a.pilot_fraction is not None:
            checks.check_range("pilot_fraction", a.pilot_fraction, closed_right=True)
        budget = None if a.budget is None else checks.check_budget(a.budget)
        if budget is not None and budget != a.budget:
            raise ParameterError(f"budget: must be a whole number of labels, got {a.budget}")
        if a.target is not None:
            checks.check_range("target", a.target, closed_right=True)
        model = prediction.PilotModel(kind=a.pilot_model)
    except ValueError as exc:  # "name: message" -> "--name: message" (the option as typed)
        option, _, message = str(exc).partition(":")
        raise ParameterError(f"--{option.replace('_', '-')}:{message}") from None
    return settings, model, budget


def _plan_sequential(a, settings: Settings, budget: int | None) -> int:
    """``gpac plan --sequential``: feed the requested losses, decide each group, request the next batch."""
    state_path = a.state or a.output.with_name(a.output.stem + ".state.json")
    cert_path = a.output.with_name(a.output.stem + "_certificate.json")
    for path in (a.output, state_path, cert_path):
        _output(path)
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": a.score_col, "--group-col": a.group_col, "--loss-col": a.loss_col})
    s, g = _scores(df, a.score_col, df), _groups(df, a.group_col, df)
    loss = pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)
    try:
        if state_path.exists():
            state = sequential_labels.read_state(state_path.read_text(), f"--state {state_path}")
            if state["settings"]["n_rows"] != len(df):
                raise DataError(
                    f"--data {a.data}: {len(df)} rows, but the --state {state_path} was started on "
                    f"{state['settings']['n_rows']} (the order is fixed before the first label: keep the table)"
                )
        else:
            state = sequential_labels.start(
                s,
                g,
                eps=settings.eps,
                alpha=settings.alpha,
                budget=budget if budget is not None else len(df) // 2,
                batch_size=a.batch_size or sequential_labels.BATCH_SIZE,
                grid_size=a.grid_size,
                bet=a.bet,
                correction=settings.correction,
                loss_bound=settings.loss_bound,
                seed=settings.seed,
            )
        sequential_labels.update(state, s, loss)
        batch = sequential_labels.next_rows(state)
    except ParameterError as exc:
        option, _, message = str(exc).partition(":")
        option = {"losses": "--loss-col", "scores": "--score-col"}.get(option, f"--{option.replace('_', '-')}")
        raise (DataError if option == "--loss-col" else ParameterError)(f"{option}:{message}") from None
    rows = [(int(r), x) for x, rs in batch.items() for r in rs]
    try:
        a.output.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows, columns=["row", a.group_col]).to_csv(a.output, index=False, lineterminator="\n")
        state_path.write_text(sequential_labels.write_state(state))
    except OSError as exc:
        raise DataError(f"-o {a.output}: cannot write it ({exc.strerror or exc})") from None
    st = state["settings"]
    print(
        f"sequential labelling ({st['bet']} bet, alpha per group {st['alpha_per_group']:g}, batches of "
        f"{st['batch_size']}): {sequential_labels.spent(state)} of {st['budget']} labels requested -> {state_path}"
    )
    for x, e in state["groups"].items():
        t = "always think" if e["threshold"] is None else f"threshold {e['threshold']:.4g}"
        print(f"  {x}: {e['labelled']} labelled, {e['status']}, {t}")
    if rows:
        print(f"label next: {len(rows)} row(s) (0-based row numbers of --data) -> {a.output}; then run this again")
        return EXIT_OK
    cert = sequential_labels.certificate(
        state,
        s,
        loss,
        g,
        settings,
        columns={"score": (a.score_col, s), "loss": (a.loss_col, None), "group": (a.group_col, g)},
        table_path=a.data,
    )
    try:
        cert_path.write_text(cert.to_json())
    except OSError as exc:
        raise DataError(f"-o {cert_path}: cannot write it ({exc.strerror or exc})") from None
    print(f"done: certificate (mode sequential, in its provenance) -> {cert_path}")
    return EXIT_OK


def _plan(a) -> int:
    settings, model, budget = _plan_settings(a)
    if a.sequential:
        return _plan_sequential(a, settings, budget)
    try:
        grid = None if a.grid is None else [int(x) for x in a.grid.split(",") if x.strip()]
    except ValueError:
        raise ParameterError(f"--grid: expected comma-separated integers, got {a.grid!r}") from None
    if grid is not None and (not grid or min(grid) < 1):
        raise ParameterError(f"--grid: label counts must be positive integers, got {a.grid!r}")
    _output(a.output)
    _output(a.output.with_name(a.output.stem + "_curves.csv"))
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": a.score_col, "--group-col": a.group_col, "--loss-col": a.loss_col})
    s, g = _scores(df, a.score_col, df), _groups(df, a.group_col, df)
    loss = pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)
    text = df[a.loss_col].notna().to_numpy() & np.isnan(loss)  # a value that is not a number
    if text.any():
        raise DataError(
            f"--loss-col {a.loss_col!r}: losses must be numbers (or empty: unlabelled); bad in "
            f"{data.describe_rows(df, text)}"
        )
    pilot = np.isfinite(loss)
    if a.pilot_fraction is not None:
        pick = np.random.default_rng(a.seed).permutation(np.flatnonzero(pilot))
        pilot[pick[int(round(a.pilot_fraction * pilot.sum())) :]] = False
    if not pilot.any():
        raise DataError(f"--loss-col: no labelled rows in {a.loss_col!r} (give losses, or --pilot-fraction)")
    badl = pilot & ((loss < 0) | (loss > a.loss_bound))
    if badl.any():
        raise DataError(f"--loss-col: losses must lie in [0, {a.loss_bound}]; bad in {data.describe_rows(df, badl)}")
    names = sorted(set(g.tolist()))
    no_pilot = [x for x in names if not np.any(pilot & (g == x))]
    if no_pilot:
        raise DataError(f"--loss-col: group(s) {no_pilot} have no labelled pilot row; label a few of their items")
    # calibration draws from the rows outside the pilot: pilot items are not reused (docs/planning.md)
    pool = {x: int(np.sum((g == x) & ~pilot)) for x in names}
    cap = {x: math.inf if a.no_cap else pool[x] for x in names}
    n_grid = np.asarray(grid or prediction.default_grid(max(max(pool.values()), 1)))
    most = sum(int(n_grid[n_grid <= cap[x]].max(initial=0)) for x in names)
    need = prediction.n_needed(settings, len(names))
    labels_needed = feasibility.expected_labels(need, settings.recipe)
    if sum(pool.values()) < labels_needed:  # the cause, with or without --budget: the pilot holds the rows
        raise DataError(
            f"--loss-col {a.loss_col!r}: only {sum(pool.values())} row(s) lie outside the labelled pilot, too few "
            f"to calibrate on (any group needs {labels_needed:g} labels; every labelled row is the pilot unless "
            "--pilot-fraction picks it); unlabel rows or give --pilot-fraction"
        )
    if budget is not None and budget > most:  # before the prediction (the work) and the allocation (memory)
        raise ParameterError(
            f"--budget: {a.budget:g} labels is more than this plan can spend ({most}: each group's largest label "
            f"count on the grid{'' if a.no_cap else ', at most its rows outside the pilot'}); give at most {most}"
        )
    budget = min(sum(pool.values()) // 2, most) if budget is None else budget
    if a.budget is None and budget < labels_needed:  # the default budget: half the rows outside the pilot
        raise DataError(
            f"--loss-col {a.loss_col!r}: half of the {sum(pool.values())} row(s) outside the labelled pilot (the "
            f"default budget, {budget}) is too few to calibrate on (any group needs {labels_needed:g} labels); "
            "give --budget, unlabel rows or give a smaller --pilot-fraction"
        )
    if budget < labels_needed:
        raise ParameterError(
            f"--budget: {budget} labels is below the {labels_needed:g} any group needs to certify anything "
            f"({settings.recipe.bound}, risk {settings.risk}, min-group-size {settings.min_group_size}); "
            f"give at least {math.ceil(labels_needed)}"
        )
    uniform = allocation.uniform_counts({x: min(cap[x], int(n_grid.max())) for x in names}, budget)
    n_grid = np.union1d(n_grid, [n for n in uniform.values() if n > 0])
    spec = prediction.PlanSpec(n_grid=n_grid, n_resamples=a.n_resamples, cap=cap, model=model)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", prediction.PilotWarning)
            curves = prediction.predict(s, g, s[pilot], loss[pilot], g[pilot], settings=settings, spec=spec)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    plan = allocation.allocate(curves, budget)
    even = allocation.fixed(curves, uniform, "uniform")
    table = allocation.allocation_table(curves, [plan, even])
    # feasibility does not depend on the seed (it refuses settings it does not read): the plan's seed is not its
    feas = feasibility.feasibility(pool, settings.replace(seed=_default("seed"))).set_index("group")
    for col in ("n_needed", "labels_needed", "feasible"):  # NaN on the ALL row
        table[col] = table["group"].map(feas[col].to_dict())
    pooled = prediction.pooled_groups(curves)
    level = settings.alpha_per_group(len(names))
    worst = {x: prediction.worst_rate(s[pilot & (g == x)], loss[pilot & (g == x)], s[g == x]) for x in names}
    table["pooled"] = table["group"].map(pooled)
    table["p_certify_cautious"] = [
        prediction.cautious_p_certify(s[g == r.group], worst[r.group], r.n_labels, settings, level, seed=settings.seed)
        if pooled.get(r.group) and r.n_labels > 0
        else np.nan
        for r in table.itertuples()
    ]
    if a.target is not None:
        need_t = prediction.labels_needed(curves, a.target)
        table[f"labels_for_{a.target:g}"] = table["group"].map(need_t.to_dict())
    curves_path = a.output.with_name(a.output.stem + "_curves.csv")
    try:
        a.output.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(a.output, index=False, lineterminator="\n")
        curves.summary().to_csv(curves_path, index=False, lineterminator="\n")
    except OSError as exc:
        raise DataError(f"-o {a.output}: cannot write it ({exc.strerror or exc})") from None
    n_pilot = int(pilot.sum())
    print(
        f"budget {budget} calibration labels, on top of the {n_pilot} pilot labels ({budget + n_pilot} in all); "
        f"predicted routed share of all traffic: {plan.total:.1%} -> {a.output}, {curves_path}"
    )
    planned_pilots = [curves.pilot_sizes[x] for x, n in plan.n.items() if n > 0]
    if planned_pilots and np.mean(planned_pilots) < prediction.THIN_PILOT:
        off = f"{100 * prediction.THIN_PILOT_GAP:.0f} points"
        print(
            f"thin pilot: the planned groups' pilots average {np.mean(planned_pilots):.1f} labelled items "
            f"(< {prediction.THIN_PILOT}); with pilots this thin the predicted total was off by up to {off} of all "
            "traffic on average over pilot draws on the project's real tables, and by more on a smaller held-out "
            "one (low where a group beats the pooled pilot, high where it trails it); one pilot's total was off by "
            f"far more (docs/planning.md), so {plan.total:.1%} is a rough estimate; a larger pilot narrows it"
        )
    thin = [x for x in names if pooled[x]]
    if thin:
        planned_rows = table[(table["allocation"] == "planned")].set_index("group")
        detail = "; ".join(
            f"{x} (pilot {curves.pilot_sizes[x]}, low-score loss rate up to {worst[x]:.0%} not ruled out"
            + (
                f", p_certify {planned_rows.loc[x, 'p_certify']:.2f}, cautious "
                f"{planned_rows.loc[x, 'p_certify_cautious']:.2f})"
                if planned_rows.loc[x, "n_labels"] > 0
                else ", not planned)"
            )
            for x in thin
        )
        print(
            f"pooled: {len(thin)} group(s) have pilots of fewer than {prediction.THIN_PILOT} labelled items, so their "
            f"prediction leans on the other groups (column pooled); the cautious p_certify is the certification "
            f"probability at the worst low-score loss rate their pilot cannot rule out (95 % Clopper-Pearson): {detail}"
        )
    print(
        "calibrate on rows outside the pilot: the pilot chose the label counts, so reusing its items would make "
        "the counts depend on the calibration set and void the guarantee"
    )
    delta, se = allocation.gain(curves, plan, even)
    verdict = (
        "negligible: the uniform split does as well"
        if delta < max(allocation.NEGLIGIBLE, 2 * se)
        else "the planned split is worth it"
    )
    print(f"planned vs uniform split: {delta:+.1%} of all traffic (Monte Carlo s.e. {se:.1%}); {verdict}")
    row = feas.iloc[0]
    score = f"registered score {a.score_col}" if a.score_col in SCORES else f"score column {a.score_col!r}"
    print(f"planned for the {score}, grouped by {a.group_col!r}, with {settings.recipe.bound} at eps={settings.eps:g}")
    print(
        f"feasibility ({settings.recipe.bound}, risk {settings.risk}, {row['formula']}): a group certifies nothing "
        f"with fewer than {row['n_needed']} items ({row['labels_needed']:g} labels expected)"
    )
    _warn(feas.index[~feas["feasible"]].tolist(), "have too few items to certify any threshold and will always think")
    non_concave = [x for x, ok in curves.concave.items() if not ok]
    if non_concave:
        print(f"non-concave curves (the plan is exact on the grid; a greedy one may fall short): {non_concave}")
    return EXIT_OK


# --------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 data error, 2 usage error).

    Errors are printed as one ``error:`` line on stderr, not raised.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        :data:`EXIT_OK` (0), :data:`EXIT_DATA` (1) or :data:`EXIT_USAGE` (2).

    Raises
    ------
    SystemExit
        From :mod:`argparse`, for ``--help`` or a command line it cannot parse (status 2).

    A closed standard output (``gpac inspect thr.json | head``) ends the command quietly, status 0.
    """
    a = _parser().parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", checks.SettingWarning)
            if a.command in cli_serve.COMMANDS:  # fit-router, audit, verify: given this module's helpers
                status = cli_serve.COMMANDS[a.command](a, sys.modules[__name__])
            else:
                status = {"calibrate": _calibrate, "route": _route, "plan": _plan, "inspect": _inspect}[a.command](a)
        for w in caught:  # the settings that look like a mistake: one warning line each
            if issubclass(w.category, checks.SettingWarning):
                print(f"warning: {w.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return status
    except BrokenPipeError:  # ``gpac inspect ... | head``: the reader has all it wants; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
        return EXIT_OK
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (DataError, data.SchemaError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA


if __name__ == "__main__":
    sys.exit(main())
