"""Notebook 32's allocation trials on the real MATH Level-5 table, and their committed tables.

On each seeded split of ``data/real/mathl5_zeroeval.csv``, per subject: half the items are held out (test);
of the other half (the calibration pool) a random share is the pilot (planning only) and the rest is what
may be labelled. Four allocations of the same label budget (planned from the pilot's curves, uniform,
``pi = 0.5``, uniform + pilot) are calibrated with the valid recipe and routed on the held-out half; notebook 32
explains each step. :func:`allocation_trials` returns one row per (trial, allocation, group) (``labels``,
``routed_share``, ``violation``) and one per (trial, allocation) of the plan's forecast.

The paper-profile trials (30 splits, about a minute of CPU) are computed by ``make label-budget``
(``python -m gpac_utils.paper.label_budget``), which writes :data:`TRIALS` and :data:`PREDICTED` (committed).
Notebook 32 reads them on the paper profile (its setting ``from_table``) and recomputes trial 0 live
(:func:`check_trial`); ``tests/test_label_budget.py`` recomputes splits and compares every row.

Usage: python -m gpac_utils.paper.label_budget
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import allocation, data, prediction, threshold
from ..checks import DataError
from ..recipe import as_recipe
from ..settings import Settings
from ..workflow import config
from ..workflow.paths import REPO_ROOT, as_shown
from . import realdata
from .theory.validity_audit import same_rows

__all__ = [
    "TRIALS",
    "PREDICTED",
    "real_table",
    "uniform_levels",
    "trial_rows",
    "allocation_trials",
    "read_tables",
    "check_trial",
]

#: The committed paper-profile rows: one per (trial, allocation, group).
TRIALS = REPO_ROOT / "benchmarks" / "label_budget_trials.csv"
#: The committed paper-profile forecasts: one per (trial, allocation).
PREDICTED = REPO_ROOT / "benchmarks" / "label_budget_predicted.csv"
#: The allocations, in the order of the tables.
ORDER = ("planned", "uniform", "pi=0.5", "uniform + pilot")


def real_table(cfg) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The real table of notebook 32's settings (``real_path``, ``real_columns``, ``real_score``), validated: its
    scores, losses and groups."""
    raw = realdata.read_raw(cfg["real_path"])
    real = data.validate(
        data.apply_mapping(raw, dict(cfg["real_columns"])), score_cols=[cfg["real_score"]], require_group=True
    )
    return real[cfg["real_score"]].to_numpy(), real["loss"].to_numpy(), real["group"].to_numpy()


def uniform_levels(budget, cap):
    """Equal labels per group spending `budget`, n_j = min(cap_j, lam) (water-filling), rounded down.

    Examples
    --------
    >>> uniform_levels(100, [10, 1000, 1000]).tolist()
    [10, 45, 45]
    """
    cap = np.asarray(cap, dtype=float)
    left, lam = float(budget), float(np.max(cap))
    for i, c_ in enumerate(np.sort(cap)):
        if c_ >= left / (cap.size - i):  # every group from here on takes an equal share
            lam = left / (cap.size - i)
            break
        left -= c_
    return np.floor(np.minimum(cap, lam) + 1e-9).astype(int)


def trial_rows(table, cfg, trial: int):
    """The rows of one seeded split of the real table (:func:`real_table`): (records, forecasts) as lists of dicts
    (module description)."""
    u_all, l_all, g_all = table
    names = sorted(set(g_all))
    traffic = {g: float(np.mean(g_all == g)) for g in names}
    eps, alpha, recipe = cfg["real_eps"], cfg["alpha"], as_recipe(cfg["recipe"])
    half = recipe.replace(sampling="bernoulli", label_prob=0.5)  # every item labelled with probability 1/2

    def calibrate_subset(u, losses, n, recipe, label_prob, seed):
        """G-PAC's threshold from a random n-subset of one group's items (n = 0: nothing certified, always think)."""
        rng = np.random.default_rng(seed)
        if n == 0:
            return -np.inf
        pick = rng.permuted(np.arange(u.size))[:n]
        return float(
            threshold(u[pick], losses[pick], eps=eps, alpha=alpha, recipe=recipe, rng=rng, label_prob=label_prob)
        )

    rng = np.random.default_rng([cfg["seed"], trial])
    test, pilot, avail = (np.zeros(len(u_all), bool) for _ in range(3))
    for g in names:
        idx = rng.permutation(np.flatnonzero(g_all == g))
        n_cal = int(round(cfg["cal_ratio"] * idx.size))
        n_pilot = int(round(cfg["pilot_fraction"] * n_cal))
        pilot[idx[:n_pilot]], avail[idx[n_pilot:n_cal]], test[idx[n_cal:]] = True, True, True
    pool = {g: int(np.sum(avail & (g_all == g))) for g in names}
    cal = pilot | avail  # unlabelled scores of the calibration pool: free
    budget = sum(pool.values()) // 2  # the labels pi = 0.5 spends in expectation
    uniform = dict(zip(names, uniform_levels(budget, [pool[g] for g in names])))
    # the grid: geometric up to the largest pool, plus the uniform levels (so the baseline is on it)
    grid = np.union1d(prediction.default_grid(max(pool.values())), list(uniform.values()))
    grid = grid[(grid >= 1) & (grid <= max(pool.values()))]
    seed = 1000 * cfg["seed"] + trial
    curves = prediction.predict(
        u_all[cal],
        g_all[cal],
        u_all[pilot],
        l_all[pilot],
        g_all[pilot],
        settings=Settings(eps=eps, alpha=alpha, recipe=recipe, seed=seed),
        spec=prediction.PlanSpec(n_grid=grid, cap=pool, traffic=traffic, n_resamples=cfg["n_resamples"]),
    )
    planned = allocation.allocate(curves, budget)
    even = allocation.fixed(curves, uniform, "uniform").total
    assert planned.total >= even - 1e-12  # the DP is optimal on the grid
    pi_half = 0.0  # the forecast of pi = 0.5: each group's predicted routed share of Bernoulli labelling of its pool
    for j, g in enumerate(names):
        own = cal & (g_all == g)
        c = prediction.predict(
            u_all[own],
            g_all[own],
            u_all[pilot],
            l_all[pilot],
            g_all[pilot],
            settings=Settings(eps=eps, alpha=alpha, recipe=half, seed=seed),
            spec=prediction.PlanSpec(
                n_grid=[max(1, round(pool[g] / 2))], pool={g: pool[g]}, n_resamples=cfg["n_resamples"]
            ),
        )
        pi_half += curves.traffic[j] * float(c.mean[0, 0])
    predicted = [
        {"trial": trial, "allocation": name, "predicted_routed_share": float(total)}
        for name, total in (("planned", planned.total), ("uniform", even), ("pi=0.5", pi_half))
    ]
    whole = {g: int(np.sum(cal & (g_all == g))) for g in names}
    plus = dict(zip(names, uniform_levels(budget + int(pilot.sum()), [whole[g] for g in names])))
    allocs = {
        "planned": (planned.n, avail, recipe, None),
        "uniform": (uniform, avail, recipe, None),
        "pi=0.5": ({g: pool[g] for g in names}, avail, half, 0.5),
        "uniform + pilot": (plus, cal, recipe, None),
    }
    records = []
    for name, (n, source, rec, label_prob) in allocs.items():
        for j, g in enumerate(names):
            in_g = g_all == g
            src, te = source & in_g, test & in_g
            t = calibrate_subset(u_all[src], l_all[src], int(n[g]), rec, label_prob, seed=[cfg["seed"], trial, j])
            records.append(
                {
                    "trial": trial,
                    "allocation": name,
                    "group": g,
                    "labels": n[g] * (label_prob or 1.0),
                    "routed_share": float(np.mean(u_all[te] <= t)),
                    "violation": float(np.mean(l_all[in_g] * (u_all[in_g] <= t))) > eps,  # the whole table's risk
                }
            )
    return records, predicted


def allocation_trials(cfg, trials=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of the trials ``trials`` (default: ``range(cfg["n_trials"])``) of notebook 32's settings ``cfg``:
    (one per trial, allocation and group; the plan's forecast per trial and allocation). Trial ``i`` draws from
    the seeds ``[seed, i]``: its rows do not depend on the other trials."""
    table = real_table(cfg)
    rows = [trial_rows(table, cfg, int(trial)) for trial in (range(cfg["n_trials"]) if trials is None else trials)]
    return pd.DataFrame([r for records, _ in rows for r in records]), pd.DataFrame(
        [p for _, pred in rows for p in pred]
    )


def read_tables(cfg, trials: Path | str = TRIALS, predicted: Path | str = PREDICTED):
    """The committed trials (:data:`TRIALS`, :data:`PREDICTED`), refused unless they hold ``cfg["n_trials"]``
    trials (:func:`check_trial` checks that a trial's rows are the code's).

    Raises
    ------
    DataError
        A file is missing or holds another number of trials.
    """
    out = []
    for path in (Path(trials), Path(predicted)):
        if not path.is_file():
            raise DataError(f"{as_shown(path)}: no table of the allocation trials; make label-budget writes it")
        table = pd.read_csv(path)
        have = sorted(set(table["trial"].tolist()))
        if have != list(range(int(cfg["n_trials"]))):
            raise DataError(
                f"{as_shown(path)}: holds trials {have[:3]}...{have[-1:]} ({len(have)}), not the {cfg['n_trials']} "
                "of n_trials; make label-budget recomputes them (or compute them live: the setting from_table = False)"
            )
        out.append(table)
    return out[0], out[1]


def check_trial(cfg, res: pd.DataFrame, pred: pd.DataFrame, trial: int = 0) -> int:
    """Recompute trial ``trial`` and compare its rows with ``res`` and ``pred`` (the committed tables): every string,
    integer and boolean equal, every float to within ``RTOL`` relative (:func:`~.theory.validity_audit.same_rows`).

    Returns the number of rows compared. Raises :class:`DataError` naming the table whose rows differ.
    """
    got_res, got_pred = allocation_trials(cfg, [trial])
    for name, got, have, path in (("trials", got_res, res, TRIALS), ("forecasts", got_pred, pred, PREDICTED)):
        mine = have[have["trial"] == trial].reset_index(drop=True)
        if not same_rows(got, mine):  # floats to within RTOL: another CPU may change their last bits
            raise DataError(
                f"{as_shown(path)}: trial {trial}'s {name} differ from what the code computes now; "
                "make label-budget recomputes the tables"
            )
    return len(got_res) + len(got_pred)


def main(argv=None) -> None:
    """Compute every trial of the profile's settings and write both tables (CSV, every float exact)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="paper", help="notebook 32's profile whose trials to compute")
    args = parser.parse_args(argv)
    cfg = config.load("32_label_budget", args.profile)
    t0 = time.process_time()
    res, pred = allocation_trials(cfg)
    for frame, path in ((res, TRIALS), (pred, PREDICTED)):
        frame.to_csv(path, index=False, lineterminator="\n")
    for back, frame in zip(read_tables(cfg), (res, pred)):  # what the notebook reads is what was computed
        pd.testing.assert_frame_equal(back, frame, check_exact=True)
    print(
        f"{as_shown(TRIALS)}: {len(res)} rows, {as_shown(PREDICTED)}: {len(pred)} rows, "
        f"{time.process_time() - t0:.0f} s of CPU"
    )


if __name__ == "__main__":
    main()
