"""The validity audit (notebook 13): does every upper confidence bound deliver P(R <= eps) >= 1 - alpha?

:func:`validity_audit` computes the exact per-group violation rate and oracle ratio (routed share
over the oracle threshold's) of every (bound, scheme, pi, rule, n, eps) cell on a population with known risk;
:func:`audit_summary`, :func:`oracle_ratio_vs_clt` and :func:`audit_paragraph` summarize it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from ... import bounds as _bounds
from ... import sampling as _sampling
from ... import selection as _selection
from ...metrics import mcse
from ...workflow.paths import CPUS_ENV
from .populations import Population, names_or, oracle_ratio, oracle_threshold

#: Labelling schemes whose terms are i.i.d. given the data (finite-sample valid bounds apply).
VALID_SCHEMES = ("bernoulli", "full")


#: Environment variable with the cores this notebook may use (set by the notebook runner, its share when
#: several notebooks run at once).


def resolve_jobs(jobs) -> int:
    """Worker processes for ``jobs``: an int, or ``"auto"`` / ``None`` = ``$GPAC_CPUS``, else ``os.cpu_count()``.

    Parameters
    ----------
    jobs : int, "auto" or None
        The ``jobs`` setting.

    Returns
    -------
    int
        At least 1.
    """
    if jobs is None or jobs == "auto":
        env = os.environ.get(CPUS_ENV, "").strip()
        jobs = int(env) if env.isdigit() else (os.cpu_count() or 1)
    return max(1, int(jobs))


def audit_schemes(pis: Sequence[float]) -> list[tuple[str, float]]:
    """The distinct (scheme, pi) cells of the audit for the labelling probabilities ``pis``.

    ``full`` is pi = 1, and ``bernoulli`` at pi = 1 queries every item like ``full``, so both
    appear once, as ``("full", 1.0)``.

    Parameters
    ----------
    pis : sequence of float
        Labelling probabilities.

    Returns
    -------
    list of (str, float)
    """
    cells = [("resample", float(p)) for p in pis]
    cells += [("bernoulli", float(p)) for p in pis if p < 1]
    cells.append(("full", 1.0))
    return cells


def _audit_unit(
    pop: Population,
    names: Sequence[str],
    ni: int,
    n: int,
    si: int,
    scheme: str,
    pi: float,
    bounds: Sequence[str],
    rules: Sequence[str],
    eps_list: Sequence[float],
    alpha: float,
    calibrations: int,
    seed: int,
) -> list[dict]:
    """All bounds, rules and eps of one (n, scheme, pi) cell; see :func:`validity_audit`."""
    G, B = len(names), int(calibrations)
    rng = np.random.default_rng([seed, ni, int(n)])  # same calibration sets for every scheme
    data = [pop.group(g).sample((B, int(n)), rng) for g in names]
    loss = np.concatenate([d[0] for d in data])  # (G*B, n)
    scores = np.concatenate([d[1] for d in data])
    d = _sampling.draw(loss, scores, scheme, pi, np.random.default_rng([seed, ni, si, 1]))
    u_star = {eps: {g: oracle_threshold(pop, eps, g) for g in names} for eps in eps_list}
    # bounds on the same candidate grid share one call (and its prefix sums): the curves are those of ucb()
    by_grid: dict = {}
    for bound in bounds:
        by_grid.setdefault(_selection.resolve_candidates("auto", bound, int(n)), []).append(bound)
    curves = {}
    for same in by_grid.values():
        t0 = time.perf_counter()
        cand = _selection.candidate_grid(scores, "auto", same[0])
        ucbs = _bounds.ucb_many(same, d.z, d.scores, cand, alpha, d.value_range)
        secs = (time.perf_counter() - t0) / len(same)
        curves.update({b: (cand, ucbs[b], secs) for b in same})
    rows = []
    for bound in bounds:
        cand, ucb, secs = curves[bound]
        for rule in rules:
            for eps in eps_list:
                thr = _selection.select(cand, ucb, eps, rule).reshape(G, B)
                for gi, g in enumerate(names):
                    risk = pop.risk(thr[gi], g)
                    eff = oracle_ratio(pop, g, thr[gi], u_star[eps][g])
                    rate = float(np.mean(risk > eps))
                    rows.append(
                        {
                            "bound": bound,
                            "kind": _bounds.BOUNDS[bound],
                            "scheme": scheme,
                            "pi": pi,
                            "rule": rule,
                            "n_group": int(n),
                            "eps": eps,
                            "group": g,
                            "calibrations": B,
                            "violation_rate": rate,
                            "mcse": float(mcse(rate, B)),
                            "oracle_ratio": float(np.mean(eff)),
                            "oracle_ratio_se": float(np.std(eff, ddof=1) / math.sqrt(B)),
                            "always_think": float(np.mean(~np.isfinite(thr[gi]))),
                            "mean_labels": float(np.mean(d.n_queried.reshape(G, B)[gi])),
                            "ucb_seconds": secs,
                        }
                    )
    return rows


def _audit_unit_star(args):
    return _audit_unit(*args)


def validity_audit(pop: Population, cfg: Mapping, groups: Sequence[str] | None = None) -> pd.DataFrame:
    """Per-group violation rate and oracle ratio of every (bound, scheme, pi, rule, n, eps) cell.

    For each ``n`` one set of ``calibrations`` calibration samples per group is drawn and shared
    by all schemes and bounds (common random numbers); for each (scheme, pi) one draw of the
    sampling terms is shared by all bounds; each bound's UCB curves are computed once (all groups
    and calibrations in one batched call) and reused for both selection rules and every ``eps``.
    The violation event is ``R(u_hat | G_j) > eps`` with the exact risk; the oracle ratio is
    ``P(U <= u_hat | G_j) / P(U <= u*_j | G_j)`` (``u_hat = -inf`` counts as 0).

    Thresholds are exactly those of :func:`gpac_utils.calibrate.threshold` with
    ``candidates="auto"`` and the same random draws. ``jobs > 1`` spreads the (n, scheme, pi) cells over
    processes (``"auto"``: the cores the runner gave this notebook, :func:`resolve_jobs`); results do not
    depend on ``jobs`` (every cell has its own seeds).

    Parameters
    ----------
    pop : Population
        The population (exact risks).
    cfg : Mapping
        ``bounds, pis, group_sizes`` (calibration items per group), ``eps_list, rules, alpha,
        calibrations`` (per cell and group), ``seed, jobs`` (worker processes: an int or ``"auto"``).
    groups : sequence of str, optional
        Groups audited (default: all).

    Returns
    -------
    pandas.DataFrame
        One row per cell and group; ``ucb_seconds`` is the time spent on that bound's UCB curves
        for the cell (shared by the rows of the cell). The pass criterion for a nominal level
        ``alpha`` is ``violation_rate <= alpha + 3 sqrt(alpha (1 - alpha) / calibrations)``.
    """
    bounds, rules, eps_list = cfg["bounds"], cfg["rules"], cfg["eps_list"]
    alpha, calibrations, seed, jobs = cfg["alpha"], cfg["calibrations"], cfg["seed"], cfg["jobs"]

    names = names_or(pop, groups)
    units = [
        (
            pop,
            names,
            ni,
            int(n),
            si,
            scheme,
            float(pi),
            list(bounds),
            list(rules),
            list(eps_list),
            float(alpha),
            int(calibrations),
            int(seed),
        )
        for ni, n in enumerate(cfg["group_sizes"])
        for si, (scheme, pi) in enumerate(audit_schemes(cfg["pis"]))
    ]
    # the most expensive cells first (cost ~ n / pi for resample), for load balance
    order = sorted(range(len(units)), key=lambda i: -units[i][3] / (units[i][6] if units[i][5] == "resample" else 1))
    jobs = min(resolve_jobs(jobs), len(units))
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = dict(zip(order, pool.map(_audit_unit_star, [units[i] for i in order])))
    else:
        results = {i: _audit_unit_star(units[i]) for i in order}
    out = pd.DataFrame([r for i in range(len(units)) for r in results[i]])
    out["pass_threshold"] = alpha + 3 * np.sqrt(alpha * (1 - alpha) / out["calibrations"])
    out["pass"] = out["violation_rate"] <= out["pass_threshold"]
    return out


def audit_summary(audit: pd.DataFrame) -> pd.DataFrame:
    """One row per (bound, scheme): cells, failing cells, worst violation rate, mean oracle ratio.

    Parameters
    ----------
    audit : pandas.DataFrame
        Output of :func:`validity_audit`.

    Returns
    -------
    pandas.DataFrame
    """
    rows = []
    for (bound, scheme), d in audit.groupby(["bound", "scheme"], sort=False):
        worst = d.loc[d["violation_rate"].idxmax()]
        rows.append(
            {
                "bound": bound,
                "kind": d["kind"].iloc[0],
                "scheme": scheme,
                "cells": len(d),
                "failing_cells": int((~d["pass"]).sum()),
                "max_violation": float(d["violation_rate"].max()),
                "worst_cell": f"n={worst.n_group}, pi={worst.pi:g}, eps={worst.eps:g}, {worst.rule}, {worst.group}",
                "mean_oracle_ratio": float(d["oracle_ratio"].mean()),
            }
        )
    return pd.DataFrame(rows)


def oracle_ratio_vs_clt(audit: pd.DataFrame, n_group: int = 300, rule: str = "first-crossing") -> pd.DataFrame:
    """Oracle ratio of every valid bound (valid schemes) relative to ``clt`` (paper's ``resample``) at ``n_group``.

    For each (pi, eps, group): ``clt`` uses ``resample`` at that pi; a valid bound uses
    ``bernoulli`` at the same pi (``full`` for pi = 1).

    Parameters
    ----------
    audit : pandas.DataFrame
        Output of :func:`validity_audit`.
    n_group : int, default 300
        Calibration items per group.
    rule : str, default "first-crossing"
        Selection rule compared.

    Returns
    -------
    pandas.DataFrame
        Per (bound, scheme, pi, eps, group): oracle ratio, that of ``clt`` and their ratio.
    """

    d = audit[(audit["n_group"] == n_group) & (audit["rule"] == rule)]
    clt = d[(d["bound"] == "clt") & (d["scheme"] == "resample")].set_index(["pi", "eps", "group"])["oracle_ratio"]
    rows = []
    for bound in [b for b in d["bound"].unique() if d[d["bound"] == b]["kind"].iloc[0] == "valid"]:
        for (pi, eps, group), e_clt in clt.items():
            scheme = "full" if pi == 1 else "bernoulli"
            sel = d[
                (d["bound"] == bound)
                & (d["scheme"] == scheme)
                & (d["pi"] == pi)
                & (d["eps"] == eps)
                & (d["group"] == group)
            ]
            if len(sel):
                e = float(sel["oracle_ratio"].iloc[0])
                rows.append(
                    {
                        "bound": bound,
                        "scheme": scheme,
                        "pi": pi,
                        "eps": eps,
                        "group": group,
                        "oracle_ratio": e,
                        "oracle_ratio_clt": float(e_clt),
                        "ratio_to_clt": e / float(e_clt) if e_clt > 0 else np.nan,
                    }
                )
    return pd.DataFrame(rows)


def audit_paragraph(audit: pd.DataFrame, n_group: int = 300, alpha: float = 0.05) -> str:
    """The README paragraph: which bounds were valid in every cell, and the routed-share cost at ``n_group``.

    Parameters
    ----------
    audit : pandas.DataFrame
        Output of :func:`validity_audit`.
    n_group : int, default 300
        Calibration items per group of the oracle-ratio comparison.
    alpha : float, default 0.05
        Nominal miscoverage.

    Returns
    -------
    str
    """
    B = int(audit["calibrations"].min())
    thr = alpha + 3 * math.sqrt(alpha * (1 - alpha) / B)
    valid_cells = audit[audit["scheme"].isin(VALID_SCHEMES)]
    fc = valid_cells[valid_cells["rule"] == "first-crossing"]
    parts = []
    always, never = [], []
    for bound, d in fc.groupby("bound", sort=False):
        (always if d["pass"].all() else never).append(
            (bound, float(d["violation_rate"].max()), int((~d["pass"]).sum()), len(d))
        )
    res = audit[audit["scheme"] == "resample"]
    res_worst = res.groupby("bound")["violation_rate"].max()
    clt = res[res["bound"] == "clt"]
    eff = oracle_ratio_vs_clt(audit, n_group)
    passing = [b for b, *_ in always]
    mean_eff = eff[eff["bound"].isin(passing)].groupby("bound")["oracle_ratio"].mean()
    tight = mean_eff.idxmax() if len(mean_eff) else None
    n_cells = audit.groupby(["bound", "scheme", "pi", "rule", "n_group", "eps", "group"]).ngroups
    parts.append(
        f"Validity audit ({B} calibrations per cell, nominal alpha = {alpha:g}, pass if the violation rate "
        f"P(R(u_hat | G_j) > eps) <= {thr:.3f} = alpha + 3 MCSE; {n_cells} cells in all). "
        f"Under the i.i.d. schemes (bernoulli, full) with first-crossing selection, "
        + ", ".join(f"{b} (worst {100 * v:.1f}%)" for b, v, *_ in always)
        + " passed in every cell"
        + (
            "; " + ", ".join(f"{b} failed {k}/{m} cells (worst {100 * v:.1f}%)" for b, v, k, m in never)
            if never
            else ""
        )
        + ". "
    )
    parts.append(
        "The paper's CLT bound with its resampling scheme (Alg. 1) violated in up to "
        f"{100 * clt['violation_rate'].max():.1f}% "
        f"of calibrations (median over cells {100 * clt['violation_rate'].median():.1f}%, "
        f"{int((~clt['pass']).sum())}/{len(clt)} cells failing); under resampling every bound targets the empirical "
        f"calibration risk, and the worst violation rates were "
        + ", ".join(f"{b} {100 * v:.1f}%" for b, v in res_worst.items())
        + ". "
    )
    mx = audit[(audit["rule"] == "max") & audit["scheme"].isin(VALID_SCHEMES)]
    if len(mx):
        bad = mx[~mx["pass"] & (mx["kind"] == "valid")]
        parts.append(
            f"With the paper's max rule instead of first-crossing, the valid bounds under the i.i.d. schemes failed "
            f"{len(bad)} cells" + (f" ({', '.join(sorted(bad['bound'].unique()))})" if len(bad) else "") + ". "
        )
    if tight is not None:
        t = eff[eff["bound"] == tight]
        per_pi = "; ".join(
            f"pi = {pi:g} ({'full' if pi == 1 else 'bernoulli'}): {100 * g['oracle_ratio'].mean():.1f}% vs "
            f"{100 * g['oracle_ratio_clt'].mean():.1f}%, "
            f"ratio {g['oracle_ratio'].mean() / g['oracle_ratio_clt'].mean():.2f}"
            for pi, g in t.groupby("pi", sort=False)
        )
        parts.append(
            f"At n_group = {n_group} the tightest bound that passed everywhere is {tight}; its mean oracle ratio "
            f"(share routed relative to the oracle threshold, averaged over eps and groups) against clt with "
            f"resampling at the same pi: {per_pi}. Bernoulli labelling at pi queries about pi*n items, "
            f"resampling about n, so the pi = 1 comparison is the like-for-like one."
        )
    return "".join(parts)
