"""``gpac plan``: the expert labels each group needs, from a labelled pilot, or in batches (:mod:`gpac_utils.cli`)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import allocation, bounds, checks, data, feasibility, prediction, sequential_labels
from .. import multigroup as _multigroup  # noqa: F401 (registers the calibrators of a collection of groups)
from ..calibrate import CALIBRATORS, calibrator, default_method, method
from ..checks import DataError, ParameterError
from ..group_collection import collection
from ..recipe import RECIPES, as_recipe
from ..scores import SCORES
from ..settings import COMMON, Method, Settings
from .common import (
    EXIT_OK,
    _add_common,
    _as_options,
    _check_groupings,
    _default,
    _grouping_labels,
    _groups,
    _need_columns,
    _output,
    _read,
    _scores,
    _settings_from,
    _warn,
    _warning_lines,
)


def _add_parser(sub, fmt) -> None:
    """Add ``gpac plan`` and its options to the subcommands ``sub``."""
    p = sub.add_parser(
        "plan", help="plan how many expert labels each group needs, from a labelled pilot", formatter_class=fmt
    )
    _add_common(
        p,
        "losses; rows without one are unlabelled",
        None,
        "group labels; when not given, the column 'group'; repeated, one column per grouping (groups that may "
        "overlap): no forecast, the feasibility table of every group of every grouping (docs/planning.md, 'Several "
        "groupings')",
        several=True,
    )
    p.add_argument(
        "--method",
        type=Method.key,
        choices=[m.cli_name for m in CALIBRATORS.values()],
        help="the calibrator planned for; when not given: the one of known groups (G-PAC, forecast) with one "
        "--group-col, the one of a collection of groups with several (Shift-G-PAC, feasibility)",
    )
    p.add_argument("--pilot-fraction", type=float, default=None, help="pilot: a random share of the labelled rows")
    p.add_argument("--recipe", default="valid", help="named calibration recipe: " + ", ".join(RECIPES))
    p.add_argument("--bound", default=None, help="override the recipe's bound: " + ", ".join(bounds.BOUNDS))
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="calibration labels, on top of the pilot's (default: half of the rows outside the pilot); drawn from "
        "the rows outside the pilot; refused with several --group-col (no forecast of a collection)",
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
    p.set_defaults(forecast_defaults={dest: p.get_default(dest) for dest in _FORECAST_ONLY})


#: The options only the forecast or the sequential mode reads (refused, away from their defaults, with several
#: groupings: the feasibility table would ignore them).
_FORECAST_ONLY = (
    "pilot_fraction",
    "grid",
    "no_cap",
    "n_resamples",
    "pilot_model",
    "target",
    "sequential",
    "seed",
    "state",
    "batch_size",
    "grid_size",
    "bet",
)


def _plan_method(a, cols: list[str]) -> Method:
    """The calibrator planned for, from ``--method`` and the number of ``--group-col`` (one: the calibrator of known
    groups, forecast; several: of a collection, feasibility), refused in one line where the plan does not apply."""
    known = default_method("known").cli_name
    fits = set(feasibility.SETTINGS_READ)  # what each group's calibration reads, as the table computes it
    common = {s.name for s in COMMON}

    def own(m) -> list:  # settings of its own (beyond the common ones) that the table does not model
        return sorted({s.name for s in m.cls.SETTINGS} - fits - common)

    per_group = [
        m
        for m in CALIBRATORS.values()
        if m.groups == "collection" and fits <= {s.name for s in m.cls.SETTINGS} and not own(m)
    ]
    several = " or ".join(m.cli_name for m in per_group)
    if a.method is None:
        a.method = default_method("collection" if len(cols) > 1 else "known").cli_name
    entry = method(a.method)
    if entry.groups not in ("known", "collection"):
        raise ParameterError(
            f"--method {a.method}: gpac plan plans the labels of your groups (--method {known} with one --group-col, "
            f"{several} with several); --method {a.method} does not route by them"
        )
    _check_groupings(a.method, entry, cols, several)
    if len(cols) == 1 and entry.groups != "known":
        raise ParameterError(
            f"--method {a.method}: with one --group-col gpac plan forecasts the calibrator of one grouping (--method "
            f"{known}); give several --group-col for the feasibility of --method {a.method}"
        )
    missing = sorted(fits - {s.name for s in entry.cls.SETTINGS})
    if len(cols) > 1 and missing:
        raise ParameterError(
            f"--method {a.method}: the feasibility table calibrates each group on its own items at the level "
            f"--correction gives it, and --method {a.method} does not (it does not read {missing}); plan "
            f"--method {several}"
        )
    if len(cols) > 1 and own(entry):
        raise ParameterError(
            f"--method {a.method}: it reads {own(entry)}, settings of its own that the feasibility table (each group "
            f"calibrated on its own items) does not model, so the table would not be its; plan --method {several}"
        )
    return entry


def _plan_settings(a) -> tuple[Settings, prediction.PilotModel, int | None]:
    """The settings, pilot model and budget of ``gpac plan`` (usage errors name the option as typed)."""
    with _as_options(ValueError):
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
    return settings, model, budget


def _table(a) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The ``--data`` table and its scores, groups and losses (``nan``: unlabelled), the columns checked."""
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": a.score_col, "--group-col": a.group_col, "--loss-col": a.loss_col})
    s, g = _scores(df, a.score_col, df), _groups(df, a.group_col, df)
    return df, s, g, pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)


def _write(shown: Path, *files: tuple[Path, str | pd.DataFrame]) -> None:
    """Write each ``(path, text or table)`` (a table as CSV); a failed write is one line naming the output ``shown``."""
    try:
        shown.parent.mkdir(parents=True, exist_ok=True)
        for path, content in files:
            if isinstance(content, pd.DataFrame):
                content.to_csv(path, index=False, lineterminator="\n")
            else:
                path.write_text(content)
    except OSError as exc:
        raise DataError(f"-o {shown}: cannot write it ({exc.strerror or exc})") from None


def _plan_sequential(a, settings: Settings, budget: int | None) -> int:
    """``gpac plan --sequential``: feed the requested losses, decide each group, request the next batch."""
    state_path = a.state or a.output.with_name(a.output.stem + ".state.json")
    cert_path = a.output.with_name(a.output.stem + "_certificate.json")
    for path in (a.output, state_path, cert_path):
        _output(path)
    df, s, g, loss = _table(a)
    try:
        if state_path.exists():
            state = sequential_labels.read_state(state_path.read_text(), f"--state {state_path}")
            if state["settings"]["n_rows"] != len(df):
                raise DataError(
                    f"--data {a.data}: {len(df)} rows, but the --state {state_path} was started on "
                    f"{state['settings']['n_rows']} (the order is fixed before the first label: keep the table)"
                )
        else:
            read = {k: getattr(settings, k) for k in ("eps", "alpha", "correction", "loss_bound", "seed")}
            budget = budget if budget is not None else len(df) // 2
            size = a.batch_size or sequential_labels.BATCH_SIZE
            state = sequential_labels.start(
                s, g, budget=budget, batch_size=size, grid_size=a.grid_size, bet=a.bet, **read
            )
        sequential_labels.update(state, s, loss)
        batch = sequential_labels.next_rows(state)
    except ParameterError as exc:
        option, _, message = str(exc).partition(":")
        option = {"losses": "--loss-col", "scores": "--score-col"}.get(option, f"--{option.replace('_', '-')}")
        raise (DataError if option == "--loss-col" else ParameterError)(f"{option}:{message}") from None
    rows = [(int(r), x) for x, rs in batch.items() for r in rs]
    table = pd.DataFrame(rows, columns=["row", a.group_col])
    _write(a.output, (a.output, table), (state_path, sequential_labels.write_state(state)))
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
    _write(cert_path, (cert_path, cert.to_json()))
    print(f"done: certificate (mode sequential, in its provenance) -> {cert_path}")
    return EXIT_OK


def _plan_collection(a, settings: Settings, cols: list[str]) -> int:
    """``gpac plan`` with several ``--group-col``: the feasibility table of every group of every grouping (the same
    count ``m`` as calibration: the collection's groups), no forecast (docs/planning.md, "Several groupings")."""
    if a.budget is not None:
        raise ParameterError(
            f"--budget: no forecast for several groupings: the forecast models one partition's G-PAC, while a cell "
            f"takes the smallest of its groups' levels and one label counts for a group of every grouping, so a "
            f"split of {a.budget:g} labels across one grouping's groups is no split across the others'; drop --budget "
            f"for the feasibility table of every group, or plan one grouping alone (gpac plan --group-col {cols[0]} "
            f"--budget {a.budget:g}: a forecast of that grouping's G-PAC, not of the collection's)"
        )
    given = [d for d, default in a.forecast_defaults.items() if getattr(a, d) != default]
    if given:
        raise ParameterError(
            f"--{given[0].replace('_', '-')}: an option of one grouping's plan (its forecast or its --sequential "
            "mode); with several --group-col gpac plan writes only the feasibility table, which does not read it "
            "(docs/planning.md, 'Several groupings')"
        )
    with _as_options(), warnings.catch_warnings():  # the calibrator's own refusals (--risk, --recipe), at once
        warnings.simplefilter("ignore")
        calibrator(a.method, settings).fit(np.array([0.5, 0.5]), np.zeros(2), {c: ["x", "x"] for c in cols})
    _output(a.output)
    df = _read(a.data)
    _need_columns(df, a.data, [("--score-col", a.score_col), *(("--group-col", c) for c in cols)])
    _need_columns(df, a.data, {"--loss-col": a.loss_col})
    _scores(df, a.score_col, df)
    loss = _losses(df, a.loss_col, a.loss_bound)
    coll = collection(_grouping_labels(df, cols, df), len(df))
    labelled = np.isfinite(loss)
    rows = dict(zip(coll.names, coll.member.sum(axis=0).tolist()))
    n = dict(zip(coll.names, coll.member[labelled].sum(axis=0).tolist()))
    # feasibility counts m = len(n): every group of every grouping, as the calibrators do (alpha_per_group)
    feas = feasibility.feasibility(n, settings)  # --seed: refused above, so at its default (not read)
    feas.insert(1, "grouping", [g.split("=", 1)[0] for g in coll.names])
    feas.insert(2, "rows", feas["group"].map(rows))
    _write(a.output, (a.output, feas))
    row, m = feas.iloc[0], len(coll.names)
    level = settings.alpha_per_group(m)
    print(
        f"feasibility of {method(a.method).name} on {', '.join(cols)}: {m} groups, each calibrated on its own "
        f"labelled items at alpha {level:.4g} (correction {settings.correction} over the {m}); with "
        f"{row['bound']} at eps={settings.eps:g} (risk {settings.risk}, {row['formula']}) a group certifies nothing "
        f"with fewer than {row['n_needed']} items ({row['labels_needed']:g} labels expected) -> {a.output}"
    )
    shown = feas[["group", "rows", "n", "n_needed", "feasible"]].rename(columns={"n": "labelled"})
    cells = [list(shown.columns), *(list(map(str, r)) for r in shown.itertuples(index=False))]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    for c in [cells[0], ["-" * w for w in widths], *cells[1:]]:  # the group left, the numbers right
        print("  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths))))
    need, short = row["n_needed"], feas["rows"] < feas["n_needed"]
    _warn(feas.loc[~feas["feasible"] & ~short, "group"].tolist(), "have too few labelled items to certify anything")
    _warn(feas.loc[short, "group"].tolist(), f"have fewer rows than {need}: even all labelled, they always think")
    print(
        "no forecast or allocation for several groupings (a cell takes the smallest of its groups' levels, a label "
        f"counts for a group of every grouping); one grouping's G-PAC: gpac plan --group-col {cols[0]} --budget N"
    )
    return EXIT_OK


def _losses(df: pd.DataFrame, col: str, loss_bound: float) -> np.ndarray:
    """The ``--loss-col`` losses (``nan``: unlabelled), refused in one line where a value is not a number or a
    labelled one lies outside ``[0, loss_bound]``."""
    loss = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    text = df[col].notna().to_numpy() & np.isnan(loss)  # a value that is not a number
    if text.any():
        raise DataError(
            f"--loss-col {col!r}: losses must be numbers (or empty: unlabelled); bad in {data.describe_rows(df, text)}"
        )
    bad = np.isfinite(loss) & ((loss < 0) | (loss > loss_bound))
    if bad.any():
        raise DataError(f"--loss-col: losses must lie in [0, {loss_bound}]; bad in {data.describe_rows(df, bad)}")
    return loss


def _run(a) -> int:
    cols = a.group_col or ["group"]
    _plan_method(a, cols)
    settings, model, budget = _plan_settings(a)
    if len(cols) > 1:
        return _plan_collection(a, settings, cols)
    a.group_col = cols[0]
    if a.sequential:
        return _plan_sequential(a, settings, budget)
    try:
        grid = None if a.grid is None else [int(x) for x in a.grid.split(",") if x.strip()]
    except ValueError:
        raise ParameterError(f"--grid: expected comma-separated integers, got {a.grid!r}") from None
    if grid is not None and (not grid or min(grid) < 1):
        raise ParameterError(f"--grid: label counts must be positive integers, got {a.grid!r}")
    curves_path = a.output.with_name(a.output.stem + "_curves.csv")
    _output(a.output)
    _output(curves_path)
    df, s, g, _ = _table(a)
    loss = _losses(df, a.loss_col, a.loss_bound)
    pilot = np.isfinite(loss)
    if a.pilot_fraction is not None:
        pick = np.random.default_rng(a.seed).permutation(np.flatnonzero(pilot))
        pilot[pick[int(round(a.pilot_fraction * pilot.sum())) :]] = False
    if not pilot.any():
        raise DataError(f"--loss-col: no labelled rows in {a.loss_col!r} (give losses, or --pilot-fraction)")
    names = sorted(set(g.tolist()))
    no_pilot = [x for x in names if not np.any(pilot & (g == x))]
    if no_pilot:
        raise DataError(f"--loss-col: group(s) {no_pilot} have no labelled pilot row; label a few of their items")
    # calibration draws from the rows outside the pilot: pilot items are not reused (docs/planning.md)
    pool = {x: int(np.sum((g == x) & ~pilot)) for x in names}
    cap = {x: math.inf if a.no_cap else pool[x] for x in names}
    n_grid = np.asarray(grid or prediction.default_grid(max(max(pool.values()), 1)))
    most = sum(int(n_grid[n_grid <= cap[x]].max(initial=0)) for x in names)
    # feasibility does not depend on the seed (it refuses settings it does not read): the plan's seed is not its
    feas = feasibility.feasibility(pool, settings.replace(seed=_default("seed"))).set_index("group")
    row = feas.iloc[0]  # every group needs the same: the fewest items that certify anything at the plan's level
    labels_needed = row["labels_needed"]
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
        with _warning_lines(prediction.PilotWarning):  # a pilot too small to predict from: warning lines
            curves = prediction.predict(s, g, s[pilot], loss[pilot], g[pilot], settings=settings, spec=spec)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    plan = allocation.allocate(curves, budget)
    even = allocation.fixed(curves, uniform, "uniform")
    table = allocation.allocation_table(curves, [plan, even])
    for col in ("n_needed", "labels_needed", "feasible"):  # NaN on the ALL row
        table[col] = table["group"].map(feas[col].to_dict())
    pooled = {x: curves.pilot_sizes[x] < prediction.THIN_PILOT for x in names}  # the prediction leans on the others
    level = settings.alpha_per_group(len(names))
    worst = {x: prediction.worst_rate(s[pilot & (g == x)], loss[pilot & (g == x)], s[g == x]) for x in names}
    table["pooled"] = table["group"].map(pooled)
    table["p_certify_cautious"] = [
        prediction.cautious_p_certify(s[g == r.group], worst[r.group], r.n_labels, settings, level, seed=settings.seed)
        if pooled.get(r.group) and r.n_labels > 0
        else np.nan
        for r in table.itertuples()
    ]
    decides = {
        (x, int(n)): bool(curves.one_loss_decides[j, k])
        for j, x in enumerate(curves.groups)
        for k, n in enumerate(curves.n_grid)
    }
    table["one_loss_decides"] = [decides.get((r.group, int(r.n_labels)), False) for r in table.itertuples()]
    if a.target is not None:
        need_t = prediction.labels_needed(curves, a.target)
        table[f"labels_for_{a.target:g}"] = table["group"].map(need_t.to_dict())
    _write(a.output, (a.output, table), (curves_path, curves.summary()))
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
    fragile = [x for x, n in plan.n.items() if decides.get((x, int(n)), False)]
    if fragile:
        print(
            f"cannot predict whether {', '.join(fragile)} certify: their planned labels are below "
            f"{curves.settings['n_one_loss']}, the fewest items with which a group certifies despite one loss on its "
            "lowest-scored label (column one_loss_decides), so one such loss decides, and their p_certify is the "
            "pilot's guess that this label is loss-free, which its few low-scored items cannot check "
            f"(docs/planning.md measures it); with {curves.settings['n_one_loss']} items one loss no longer decides"
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
