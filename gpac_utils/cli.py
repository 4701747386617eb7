"""Command line: ``gpac calibrate``, ``gpac route`` and ``gpac plan`` (also ``python -m gpac_utils``).

calibrate
    fit PAC / G-PAC / C-PAC on a table and write the thresholds and every setting as JSON. A
    larger score U means a *less* certain non-thinking answer: an item is routed to the
    non-thinking model when U <= its group's threshold. A threshold ``null`` in the JSON means
    "always think" (no threshold could be certified for that group).
route
    read such a JSON and a table; write the table with ``threshold`` and ``route_nothink`` in the
    format of the ``-o`` suffix (.csv, .tsv, .parquet, .jsonl).
plan
    how many expert labels each group needs, from a labelled pilot: the predicted routed share per
    group and number of labels (:mod:`gpac_utils.prediction`) and the budget's best allocation
    (:mod:`gpac_utils.allocation`, exact DP, with greedy beside it).

Exit status: 0 on success, 2 on a usage error (a bad option or parameter value), 1 on a data
error (a missing or malformed file, column or row). Errors are one line, never a traceback;
warnings are ``warning:`` lines, one per kind, with a count.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import allocation, bounds, data, prediction, sampling, selection
from .calibrate import CPAC, GPAC, METHODS, PAC, GroupWarning, from_json
from .checks import (
    DataError,
    ParameterError,
    check_alpha,
    check_budget,
    check_eps,
    check_fraction,
    check_int,
    check_loss_bound,
)  # fmt: skip
from .partition import PARTITION_ALGORITHMS, ScorePartitioner
from .recipe import RECIPES, VALID, Recipe

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
SCORE = "score_cli"  # the internal name of the chosen score column
SETTINGS_KEYS = (
    "eps",
    "alpha",
    "bound",
    "sampling",
    "pi",
    "rule",
    "candidates",
    "loss_bound",
    "min_group_size",
    "seed",
)


#: A bad option or parameter value (exit status 2).
UsageError = ParameterError


# --------------------------------------------------------------------------- parser
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gpac", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter
    c = sub.add_parser("calibrate", help="fit thresholds and write them as JSON", formatter_class=fmt)
    c.add_argument("--data", required=True, type=Path, help="table of calibration items (.csv, .tsv, .parquet, .jsonl)")
    c.add_argument("--score-col", required=True, help="uncertainty score in [0, 1]; larger = less certain")
    c.add_argument("--loss-col", default="loss", help="loss in [0, loss-bound] of the non-thinking answer")
    c.add_argument("--group-col", default=None, help="known group labels (needed by --method gpac)")
    c.add_argument("--id-col", default="item_id", help="unique item identifier")
    c.add_argument("--map", nargs="*", default=[], metavar="SOURCE=TARGET", help="more column renames")
    c.add_argument("--method", choices=["pac", "gpac", "cpac"], default="pac", help="calibrator")
    c.add_argument("--eps", type=float, required=True, help="target risk, in (0, loss-bound)")
    c.add_argument("--alpha", type=float, default=0.05, help="the guarantee holds with probability 1 - alpha")
    c.add_argument(
        "--recipe", choices=list(RECIPES), default="valid",
        help=f"named calibration recipe; 'valid' = {VALID.bound}, every item labelled, first-crossing",
    )  # fmt: skip
    c.add_argument("--bound", choices=list(bounds.BOUNDS), default=None, help="override the recipe's bound")
    c.add_argument(
        "--sampling", choices=list(sampling.SCHEMES), default=None,
        help="override the recipe's label sampling; 'bernoulli' DISCARDS each label with probability 1 - pi "
        "(use it only to mimic a partly labelled deployment); 'full' uses every label",
    )  # fmt: skip
    c.add_argument("--pi", type=float, default=None, help="labelling probability for bernoulli / resample")
    c.add_argument("--rule", choices=list(selection.RULES), default=None, help="override the recipe's rule")
    c.add_argument("--candidates", default=None, help="'auto', 'all' or a quantile grid size (default: recipe's)")
    c.add_argument("--k", type=int, default=3, help="C-PAC: number of learned groups")
    c.add_argument(
        "--partition", choices=list(PARTITION_ALGORITHMS), default="kmeans", help="C-PAC: partition algorithm"
    )
    c.add_argument("--mode", choices=["split", "joint"], default="split", help="C-PAC: split or joint calibration")
    c.add_argument("--loss-bound", type=float, default=1.0, help="upper end of the loss range (2 for 1 - cos)")
    c.add_argument("--min-group-size", type=int, default=10, help="smaller groups always think")
    c.add_argument("--simultaneous", action="store_true", help="Bonferroni alpha/k across groups")
    c.add_argument("--seed", type=int, default=0, help="seed of the label sampling and of C-PAC's split")
    c.add_argument("-o", "--output", required=True, type=Path, help="thresholds JSON to write")
    r = sub.add_parser("route", help="route a table with saved thresholds", formatter_class=fmt)
    r.add_argument("--thresholds", required=True, type=Path, help="JSON written by calibrate")
    r.add_argument("--data", required=True, type=Path, help="table to route (.csv, .tsv, .parquet, .jsonl)")
    r.add_argument("--score-col", default=None, help="default: the score column used at calibration")
    r.add_argument("--group-col", default=None, help="default: the group column used at calibration")
    r.add_argument("--id-col", default=None, help="default: the id column used at calibration (if present)")
    r.add_argument("-o", "--output", required=True, type=Path, help="routed table; its suffix sets the format")
    p = sub.add_parser("plan", help="plan how many expert labels each group needs, from a labelled pilot")
    p.add_argument("--data", required=True, type=Path, help="table (.csv or .parquet), one row per item")
    p.add_argument("--score-col", required=True)
    p.add_argument("--loss-col", default="loss", help="losses; rows without one are unlabelled")
    p.add_argument("--group-col", default="group")
    p.add_argument("--pilot-fraction", type=float, default=None, help="pilot: a random share of the labelled rows")
    p.add_argument("--eps", type=float, required=True)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--recipe", default="valid", help="valid (default), valid-bernoulli or paper")
    p.add_argument("--bound", default=None, help="override the recipe's bound")
    p.add_argument("--budget", type=float, default=None, help="total labels (default: pi = 0.5 of every row)")
    p.add_argument("--grid", default=None, help="comma-separated label counts (default: geometric to the group size)")
    p.add_argument("--no-cap", action="store_true", help="allow more labels than a group has rows")
    p.add_argument("--resamples", type=int, default=200)
    p.add_argument("--pilot-model", choices=list(prediction.PILOT_MODELS), default="auto")
    p.add_argument("--target", type=float, default=None, help="also report the labels needed to route this share")
    p.add_argument("--loss-bound", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, type=Path, help="CSV of the plan (curves go to <stem>_curves.csv)")
    return ap


# --------------------------------------------------------------------------- helpers
def _mapping(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p or not p.split("=", 1)[0] or not p.split("=", 1)[1]:
            raise UsageError(f"--map: expects SOURCE=TARGET, got {p!r}")
        src, dst = p.split("=", 1)
        out[src] = dst
    return out


def _candidates(text: str | None, default):
    if text is None:
        return default
    if text in ("auto", "all"):
        return text
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--candidates: must be 'auto', 'all' or a grid size >= 1, got {text!r}") from None


def _recipe(a) -> Recipe:
    base = Recipe.named(a.recipe)
    sampling_ = a.sampling or base.sampling
    if sampling_ == "full":
        if a.pi is not None and a.pi != 1:
            raise UsageError(f"--pi: sampling 'full' labels every item; pi applies to bernoulli/resample, got {a.pi}")
        pi = None
    else:
        pi = a.pi if a.pi is not None else (base.pi if base.pi is not None else 0.5)
    try:
        return Recipe(
            bound=a.bound or base.bound, sampling=sampling_, pi=pi, rule=a.rule or base.rule,
            candidates=_candidates(a.candidates, base.candidates),
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(f"--{exc}") from None


def _read(path: Path) -> pd.DataFrame:
    try:
        return data.read_frame(path)
    except FileNotFoundError as exc:
        raise DataError(str(exc)) from None


def _need_columns(df: pd.DataFrame, path: Path, cols: dict[str, str | None]) -> None:
    for option, col in cols.items():
        if col is not None and col not in df.columns:
            raise DataError(f"{option} {col!r}: no such column in {path}; it has {list(df.columns)}")


def _threshold_text(t) -> str:
    return "always think" if t is None or (isinstance(t, float) and not math.isfinite(t)) else f"{t:.4g}"


def _report_small_groups(cal, min_group_size: int) -> None:
    sizes = cal.group_sizes_
    small = sorted(g for g, n in sizes.items() if n < min_group_size)
    if small:
        shown = ", ".join(repr(g) for g in small[:5]) + (f" and {len(small) - 5} more" if len(small) > 5 else "")
        print(
            f"warning: {len(small)} group(s) have fewer than {min_group_size} calibration items and always think: "
            f"{shown}",
            file=sys.stderr,
        )
    uncertified = sorted(g for g, t in cal.thresholds_.items() if not math.isfinite(t) and g not in small)
    if uncertified:
        shown = ", ".join(repr(g) for g in uncertified[:5]) + (
            f" and {len(uncertified) - 5} more" if len(uncertified) > 5 else ""
        )
        print(
            f"warning: {len(uncertified)} group(s) could not be certified at eps and always think: {shown}",
            file=sys.stderr,
        )


# --------------------------------------------------------------------------- calibrate
def _calibrate(a) -> int:
    # Parameters first (usage errors, exit 2), then the data (exit 1).
    try:
        loss_bound = check_loss_bound(a.loss_bound)
        eps, alpha = check_eps(a.eps, loss_bound), check_alpha(a.alpha)
        min_group_size = check_int("min_group_size", a.min_group_size, 1)
        seed = check_int("seed", a.seed, 0)
        k = check_int("k", a.k, 1)
    except ParameterError as exc:
        raise UsageError(f"--{str(exc).replace('_', '-')}") from None
    recipe = _recipe(a)
    if a.method == "gpac" and not a.group_col:
        raise UsageError("--group-col: --method gpac needs the column of known group labels")
    extra = _mapping(a.map)
    df = _read(a.data)
    cols = {"--score-col": a.score_col, "--loss-col": a.loss_col, "--id-col": a.id_col, "--group-col": a.group_col}
    _need_columns(df, a.data, cols)
    mapping = {a.score_col: SCORE, a.loss_col: data.LOSS, a.id_col: data.ID, **extra}
    if a.group_col:
        mapping[a.group_col] = data.GROUP
    table = data.apply_mapping(df[[c for c in mapping if c in df.columns]], mapping)
    try:
        table = data.validate(table, loss_bound=loss_bound, score_cols=[SCORE], require_group=a.method == "gpac")
    except data.SchemaError as exc:  # name the user's columns, not the internal ones
        msg = str(exc)
        for src, dst in mapping.items():
            msg = msg.replace(repr(dst), repr(src))
        raise DataError(msg) from None
    if recipe.bound == "clopper_pearson":
        z = table[data.LOSS].to_numpy(float) / loss_bound
        if not np.all((z == 0) | (z == 1)):
            bad = ~((z == 0) | (z == 1))
            raise DataError(
                f"--bound clopper_pearson needs losses of exactly 0 or {loss_bound} (the loss bound); "
                f"{data.describe_rows(table, bad)} have other values: use hoeffding_bentkus or wsr"
            )
    kw = dict(loss_bound=loss_bound, min_group_size=min_group_size, seed=seed)
    u, loss = table[SCORE].to_numpy(float), table[data.LOSS].to_numpy(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported below, one line per kind
        if a.method == "pac":
            cal = PAC(eps, alpha, recipe, **kw).fit(u, loss)
        elif a.method == "gpac":
            cal = GPAC(eps, alpha, recipe, simultaneous=a.simultaneous, **kw).fit(u, loss, table[data.GROUP])
        else:
            part = ScorePartitioner(k, a.partition)
            cal = CPAC(eps, alpha, recipe, partitioner=part, mode=a.mode, simultaneous=a.simultaneous, **kw)
            cal.fit(u, loss)
    payload = json.loads(cal.to_json())
    payload["columns"] = {"score": a.score_col, "loss": a.loss_col, "group": a.group_col, "id": a.id_col}
    payload["data"] = str(a.data)
    payload["n_items"] = int(len(table))
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    _report_small_groups(cal, min_group_size)
    shown = ", ".join(f"{g}: {_threshold_text(t)}" for g, t in payload["thresholds"].items())
    print(f"{cal.name} ({recipe.bound}, {recipe.sampling}, {recipe.rule}) thresholds {{{shown}}} -> {a.output}")
    return EXIT_OK


# --------------------------------------------------------------------------- route
def validate_thresholds(payload, where: str) -> None:
    """Check a thresholds JSON (as written by ``calibrate``); raise :class:`DataError` naming the field.

    Parameters
    ----------
    payload : object
        The parsed JSON.
    where : str
        Where it came from (the file name), to start the message.

    Raises
    ------
    DataError
        When it is not an object, lacks ``method``, ``settings`` (with every key of
        :data:`SETTINGS_KEYS`) or ``thresholds``, names an unknown method, has a threshold that is
        neither a number in ``[0, 1]`` nor ``null``, or is a C-PAC file without a partition.
    """
    if not isinstance(payload, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(payload).__name__}")
    for key in ("method", "settings", "thresholds"):
        if key not in payload:
            raise DataError(f"{where}: missing field {key!r}")
    if payload["method"] not in METHODS:
        raise DataError(f"{where}: 'method' must be one of {list(METHODS)}, got {payload['method']!r}")
    st = payload["settings"]
    if not isinstance(st, dict):
        raise DataError(f"{where}: 'settings' must be an object")
    missing = [k for k in SETTINGS_KEYS if k not in st]
    if missing:
        raise DataError(f"{where}: 'settings' lacks {missing}")
    thr = payload["thresholds"]
    if not isinstance(thr, dict) or not thr:
        raise DataError(f"{where}: 'thresholds' must be a non-empty object of group -> number or null")
    for g, t in thr.items():
        ok = t is None or (isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 1)
        if not ok:
            raise DataError(f"{where}: thresholds[{g!r}] must be a number in [0, 1] or null (always think), got {t!r}")
    if payload["method"] == "C-PAC":
        part = payload.get("partition")
        if not isinstance(part, dict) or not isinstance(part.get("boundaries"), list):
            raise DataError(f"{where}: a C-PAC file needs 'partition': {{'algorithm', 'boundaries'}}")


def _route(a) -> int:
    try:
        payload = json.loads(a.thresholds.read_text())
    except FileNotFoundError:
        raise DataError(f"{a.thresholds}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{a.thresholds}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    validate_thresholds(payload, str(a.thresholds))
    cols = payload.get("columns", {}) or {}
    score_col = a.score_col or cols.get("score")
    group_col = a.group_col or cols.get("group")
    id_col = a.id_col or cols.get("id")
    try:
        cal = from_json(json.dumps(payload))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{a.thresholds}: settings cannot be read back ({exc})") from None
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": score_col})
    named = df.rename(columns={id_col: data.ID}) if id_col in df.columns else df
    s = pd.to_numeric(df[score_col], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(s) | (s < 0) | (s > 1)
    if bad.any():
        raise DataError(f"column {score_col!r} must lie in [0, 1]; bad in {data.describe_rows(named, bad)}")
    groups = None
    if payload["method"] == "G-PAC":
        if not group_col:
            raise UsageError("--group-col: G-PAC thresholds need the column of group labels")
        _need_columns(df, a.data, {"--group-col": group_col})
        missing = df[group_col].isna().to_numpy()
        if missing.any():
            raise DataError(f"column {group_col!r} has missing group labels in {data.describe_rows(named, missing)}")
        groups = df[group_col].astype(str).to_numpy()
        known = set(cal.thresholds_)
        present = set(np.unique(groups).tolist())
        unseen = sorted(present - known)
        if unseen:
            n = int(np.isin(groups, unseen).sum())
            print(
                f"warning: {len(unseen)} group(s) in the data are not in the thresholds file; their {n} item(s) "
                f"always think: {', '.join(map(repr, unseen[:5]))}",
                file=sys.stderr,
            )
        absent = sorted(known - present)
        if absent:
            print(
                f"warning: {len(absent)} group(s) of the thresholds file do not occur in the data: "
                f"{', '.join(map(repr, absent[:5]))}",
                file=sys.stderr,
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported above
        thr = cal.thresholds_for(s, groups)
    out = df.copy()
    out["threshold"] = thr
    out["route_nothink"] = s <= thr
    data.write_frame(out, a.output)
    print(f"routed {int(out['route_nothink'].sum())}/{len(out)} items to the non-thinking model -> {a.output}")
    return EXIT_OK


# --------------------------------------------------------------------------- plan
def _plan(a) -> int:
    try:
        eps, alpha = check_eps(a.eps, check_loss_bound(a.loss_bound)), check_alpha(a.alpha)
        resamples = check_int("resamples", a.resamples, 2)
        if a.pilot_fraction is not None:
            check_fraction("pilot_fraction", a.pilot_fraction, closed_right=True)
        budget = None if a.budget is None else check_budget(a.budget)
        if a.target is not None:
            check_fraction("target", a.target, closed_right=True)
        recipe = Recipe.named(a.recipe) if a.bound is None else Recipe.named(a.recipe).replace(bound=a.bound)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).replace('_', '-')}") from None
    try:
        grid = None if a.grid is None else [int(x) for x in a.grid.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--grid: expected comma-separated integers, got {a.grid!r}") from None
    if grid is not None and (not grid or min(grid) < 1):
        raise UsageError(f"--grid: label counts must be positive integers, got {a.grid!r}")
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": a.score_col, "--group-col": a.group_col, "--loss-col": a.loss_col})
    s = pd.to_numeric(df[a.score_col], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(s) | (s < 0) | (s > 1)
    if bad.any():
        raise DataError(f"--score-col: {a.score_col!r} must lie in [0, 1]; bad in {data.describe_rows(df, bad)}")
    missing = df[a.group_col].isna().to_numpy()
    if missing.any():
        raise DataError(f"--group-col: {a.group_col!r} has missing labels in {data.describe_rows(df, missing)}")
    g = df[a.group_col].astype(str).to_numpy()
    loss = pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)
    pilot = np.isfinite(loss)
    if a.pilot_fraction is not None:
        pick = np.random.default_rng(a.seed).permutation(np.flatnonzero(pilot))
        pilot[pick[int(round(a.pilot_fraction * pilot.sum())) :]] = False
    if not pilot.any():
        raise DataError(f"--loss-col: no labelled rows in {a.loss_col!r} (give losses, or --pilot-fraction)")
    badl = pilot & ((loss < 0) | (loss > a.loss_bound))
    if badl.any():
        raise DataError(f"--loss-col: losses must lie in [0, {a.loss_bound}]; bad in {data.describe_rows(df, badl)}")
    pool = {x: int(np.sum(g == x)) for x in sorted(set(g.tolist()))}
    budget = sum(pool.values()) // 2 if budget is None else budget
    try:
        curves = prediction.predict(
            s, g, s[pilot], loss[pilot], g[pilot], eps=eps, alpha=alpha, recipe=recipe, resamples=resamples,
            n_grid=grid or prediction.default_grid(max(pool.values())), cap=None if a.no_cap else pool,
            pilot_model=a.pilot_model, loss_bound=a.loss_bound, seed=a.seed,
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    plans = [allocation.allocate(curves, budget, algorithm=x) for x in allocation.ALGORITHMS]
    table = allocation.allocation_table(curves, plans)
    if a.target is not None:
        need = prediction.labels_needed(curves, a.target)
        table[f"labels_for_{a.target:g}"] = table["group"].map(need.to_dict())
    a.output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(a.output, index=False, lineterminator="\n")
    curves_path = a.output.with_name(a.output.stem + "_curves.csv")
    curves.summary().to_csv(curves_path, index=False, lineterminator="\n")
    totals = ", ".join(f"{x.name} {x.total:.1%}" for x in plans)
    print(f"budget {budget} labels; predicted routed share of all traffic: {totals} -> {a.output}, {curves_path}")
    non_concave = [x for x, ok in curves.concave.items() if not ok]
    if non_concave:
        print(f"non-concave curves (the DP plan is exact on the grid; greedy may fall short): {non_concave}")
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
    """
    a = _parser().parse_args(argv)
    try:
        return {"calibrate": _calibrate, "route": _route, "plan": _plan}[a.command](a)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (DataError, data.SchemaError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA


if __name__ == "__main__":
    sys.exit(main())
