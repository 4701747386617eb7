"""``gpac calibrate``: fit a calibrator on a table and write its certificate (:mod:`gpac_utils.cli`)."""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path

from .. import bounds, cli_serve, data, feasibility, sampling, selection
from ..calibrate import (
    CALIBRATORS,
    GROUPINGS,
    NO_FEASIBLE,
    ROUTING,
    TOO_FEW,
    GroupWarning,
    calibrator,
    default_method,
    method,
)
from ..certificate import Certificate
from ..checks import DataError, ParameterError
from ..recipe import RECIPES, VALID, Recipe, as_recipe
from ..scores import SCORES
from ..settings import RENAMED_UNTIL, Method, Settings, declarations
from ..thresholds_schema import grouping_role
from .common import (
    _COMMON,
    EXIT_OK,
    SCORE,
    _add_common,
    _add_setting,
    _as_options,
    _check_groupings,
    _default,
    _grouping_labels,
    _need_columns,
    _output,
    _read,
    _settings_from,
    _threshold_text,
    _warn,
)


def _add_parser(sub, fmt) -> None:
    """Add ``gpac calibrate`` and its options to the subcommands ``sub``."""
    c = sub.add_parser("calibrate", help="fit thresholds and write them as JSON", formatter_class=fmt)
    _add_common(
        c,
        "loss in [0, loss-bound] of the non-thinking answer",
        None,
        "group labels: one column, a partition (--method gpac); repeated, one column per grouping, groups that may "
        "overlap, every group of every grouping within eps (--method "
        + " or ".join(m.cli_name for m in CALIBRATORS.values() if m.groups == "collection")
        + "; docs/overlapping-groups.md)",
        several=True,
    )
    c.add_argument("--id-col", default="item_id", help="unique item identifier")
    c.add_argument(
        "--score",
        choices=list(SCORES),
        help="the score's registry name, recorded in the certificate (what the serving router computes); "
        "when not given: --score-col when it is one. A score_router column without --score-model (the tables' "
        "cross-fitted one) is no score a router serves, and gpac verify refuses its certificate: give --score "
        "score_router_crossfit, or fit a model (gpac fit-router) and give --score-model",
    )
    c.add_argument("--map", nargs="*", default=[], metavar="SOURCE=TARGET", help="more column renames")
    c.add_argument(
        "--method",
        type=Method.key,  # the certificate's name (G-PAC) is the same method as gpac
        choices=[m.cli_name for m in CALIBRATORS.values()],
        help="calibrator (or its name as a certificate writes it: G-PAC); when not given: the one of known groups "
        "with one --group-col, the one of a collection of groups with several, else the one of no groups",
    )
    c.add_argument(
        "--recipe",
        choices=list(RECIPES),
        default="valid",
        help=f"named calibration recipe; 'valid' = {VALID.bound}, every item labelled, first-crossing",
    )
    c.add_argument("--bound", choices=list(bounds.BOUNDS), help="override the recipe's bound")
    c.add_argument(
        "--sampling",
        choices=list(sampling.SCHEMES),
        help="override the recipe's label sampling; 'bernoulli' DISCARDS each label with probability 1 - label-prob "
        "(use it only to mimic a partly labelled deployment); 'full' uses every label",
    )
    c.add_argument("--label-prob", type=float, help="labelling probability for bernoulli / resample")
    c.add_argument("--rule", choices=list(selection.RULES), help="override the recipe's rule")
    c.add_argument("--candidates", help="'auto', 'all' or a quantile grid size (default: recipe's)")
    for setting in declarations().values():  # the calibrators' own settings (C-PAC's, a plugin's)
        if setting.option and setting not in _COMMON:
            _add_setting(c, setting)
    c.add_argument("--simultaneous", action="store_true", help=argparse.SUPPRESS)  # renamed: refused below
    c.add_argument(
        "--score-model",
        type=Path,
        help="the score's model (gpac fit-router): the score column is recomputed from it and the text column and "
        "refused when it differs by more than 1e-5, or when the table shares an item id with the model's fitting "
        "items; then its SHA-256, embedder and text column are recorded",
    )
    c.add_argument("-o", "--output", required=True, type=Path, help="thresholds JSON to write")


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


def _refuse_ignored(a) -> None:
    """Infer ``--method`` when it is not given (the method of known groups with one ``--group-col``, of a
    collection of groups with several, else the method of one group); refuse the options the chosen method
    ignores (a silent default would answer another question). What a method reads is its registry entry's
    ``groups``."""
    by_groups = {kind: default_method(kind).cli_name for kind in GROUPINGS}
    cols = a.group_col or []
    if a.method is None:
        a.method = by_groups["collection" if len(cols) > 1 else "known" if cols else "none"]
    entry = method(a.method)
    if cols and not entry.needs_groups:
        takes = " or ".join(m.cli_name for m in CALIBRATORS.values() if m.needs_groups)
        raise ParameterError(
            f"--group-col: only --method {takes} uses group labels (got --method {a.method}); "
            f"add --method {by_groups['known']}"
        )
    several = " or ".join(m.cli_name for m in CALIBRATORS.values() if m.groups == "collection")
    _check_groupings(a.method, entry, cols, several)
    reads = method(a.method).cls.SETTINGS
    for setting in declarations().values():  # a setting the method does not read, given: refused, naming who reads it
        given = [p for p in setting.flat() if setting.option and getattr(a, p.name) != p.default]
        if given and setting not in reads:
            readers = " or ".join(m.cli_name for m in CALIBRATORS.values() if setting in m.cls.SETTINGS)
            raise ParameterError(
                f"--{given[0].name.replace('_', '-')}: only --method {readers} uses it (got --method {a.method})"
            )


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
        under = [g for g in few if cal.groups_[g].n < need]  # the others: too few for the method's own test
        _warn(under, f"have fewer items than {cal.recipe.bound} needs to certify anything ({need}) and always think")
        _warn([g for g in few if g not in under], f"have too few items for {cal.name}'s test and always think")
    uncertified = sorted(g for g, r in cal.groups_.items() if r.status == NO_FEASIBLE)
    _warn(uncertified, "could not be certified at eps and always think")


def _settings(a) -> Settings:
    """The :class:`~gpac_utils.settings.Settings` of the options, built and checked once (a bad value: exit 2,
    naming the option)."""
    recipe = _recipe(a)
    with _as_options(ValueError):
        return _settings_from(a, recipe)


def _roles(cols) -> None:
    """Refuse one column given for two roles (``--score-col x --loss-col x``), naming both options (``cols``:
    ``(option, column)`` pairs)."""
    seen: dict[str, str] = {}
    for option, col in cols:
        if col is not None and seen.setdefault(col, option) != option:
            raise ParameterError(f"{option} {col!r}: the same column as {seen[col]}; give each its own column")


def _run(a) -> int:
    # Parameters first (usage errors, exit 2), then the data (exit 1).
    if a.simultaneous:
        raise ParameterError(
            f"--simultaneous: replaced by --correction bonferroni (this message goes in gpac_utils {RENAMED_UNTIL})"
        )
    _refuse_ignored(a)
    settings = _settings(a)
    recipe, loss_bound = settings.recipe, settings.loss_bound
    entry, group_cols = method(a.method), a.group_col or []
    known_groups, collection = entry.groups == "known", entry.groups == "collection"  # one label column; several
    if entry.needs_groups and not group_cols:
        raise ParameterError(f"--group-col: --method {a.method} needs the column of known group labels")
    cols = [("--score-col", a.score_col), ("--loss-col", a.loss_col), *(("--group-col", c) for c in group_cols)]
    cols.append(("--id-col", a.id_col))
    _roles(cols)
    extra = _mapping(a.map)
    _output(a.output)
    df = _read(a.data)
    _need_columns(df, a.data, cols)
    model = None
    if a.score_model is not None:  # the score column recomputed from the model, before any work is written
        model = cli_serve.record_score_model(a.score_model, df, score_col=a.score_col, id_col=a.id_col)
    mapping = {a.score_col: SCORE, a.loss_col: data.LOSS, a.id_col: data.ID, **extra}
    if known_groups:
        mapping[group_cols[0]] = data.GROUP
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
    groups = table[data.GROUP] if known_groups else _grouping_labels(df, group_cols, table) if collection else None
    cal = calibrator(a.method, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported below, one line per kind
        cal.fit(u, loss, groups)
    roles = {"score": a.score_col, "loss": a.loss_col, "group": group_cols[0] if group_cols else None}
    if collection:  # a role per grouping, its column's name and hash recorded as the others'
        roles = {"score": a.score_col, "loss": a.loss_col, **{grouping_role(c): c for c in group_cols}}
    roles["id"] = a.id_col
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
    what = f"{cal.name} ({recipe.bound}, {recipe.sampling}, {recipe.rule}{risk})"
    if collection:  # the groups of every grouping, then the thresholds of the cells
        certified = sum(e["status"] in ROUTING for e in cert.groups.values())
        what += f" on {', '.join(group_cols)}: {certified}/{len(cert.groups)} groups certified; cell"
    print(f"{what} thresholds {{{shown}}} -> {a.output}")
    return EXIT_OK
