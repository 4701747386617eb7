"""The validity audit (notebook 13): does every upper confidence bound deliver P(R <= eps) >= 1 - alpha?

:func:`validity_audit` computes the exact per-group violation rate and oracle ratio (routed share
over the oracle threshold's) of every (bound, scheme, pi, rule, n, eps) cell on a population
with known risk; the notebook summarizes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ... import bounds as _bounds
from ... import sampling as _sampling
from ... import selection as _selection
from ...metrics import mcse
from .populations import Population, oracle_threshold

#: Labelling schemes whose terms are i.i.d. given the data (finite-sample valid bounds apply).
VALID_SCHEMES = ("bernoulli", "full")


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


def _audit_cell(pop: Population, settings: tuple, ni: int, n: int, si: int, scheme: str, pi: float) -> list[dict]:
    """All bounds, rules and eps of one (n, scheme, pi) cell; see :func:`validity_audit`.

    ``settings`` is ``(bounds, rules, eps_list, alpha, calibrations, seed)``.
    """
    bounds, rules, eps_list, alpha, B, seed = settings
    names = pop.names
    G = len(names)
    rng = np.random.default_rng([seed, ni, int(n)])  # same calibration sets for every scheme
    data = [pop.group(g).sample((B, int(n)), rng) for g in names]
    loss = np.concatenate([d[0] for d in data])  # (G*B, n)
    scores = np.concatenate([d[1] for d in data])
    d = _sampling.draw(loss, scores, scheme, pi, np.random.default_rng([seed, ni, si, 1]))
    # the oracle's routed share P(U <= u*_j | G_j) per eps and group: the denominator of the oracle ratio
    oracle_share = {eps: {g: pop.share(oracle_threshold(pop, eps, g), g) for g in names} for eps in eps_list}
    if any(share <= 0 for per_group in oracle_share.values() for share in per_group.values()):
        raise ValueError(
            f"an oracle threshold of {names} routes nothing at eps in {eps_list}; the oracle ratio is undefined"
        )
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
                    eff = pop.share(thr[gi], g) / oracle_share[eps][g]  # -inf (always think) counts as 0
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


def validity_audit(
    pop: Population,
    *,
    bounds: Sequence[str],
    pis: Sequence[float],
    group_sizes: Sequence[int],
    eps_list: Sequence[float],
    rules: Sequence[str] = ("first-crossing", "max"),
    alpha: float = 0.05,
    calibrations: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-group violation rate and oracle ratio of every (bound, scheme, pi, rule, n, eps) cell.

    For each ``n`` one set of ``calibrations`` calibration samples per group is drawn and shared
    by all schemes and bounds (common random numbers); for each (scheme, pi) one draw of the
    sampling terms is shared by all bounds; each bound's UCB curves are computed once (all groups
    and calibrations in one batched call) and reused for both selection rules and every ``eps``.
    The violation event is ``R(u_hat | G_j) > eps`` with the exact risk; the oracle ratio is
    ``P(U <= u_hat | G_j) / P(U <= u*_j | G_j)`` (``u_hat = -inf`` counts as 0).

    Thresholds are exactly those of :func:`gpac_utils.calibrate.threshold` with
    ``candidates="auto"`` and the same random draws. Every (n, scheme, pi) cell has its own seeds, so a
    cell's rows do not depend on the other cells.

    Parameters
    ----------
    pop : Population
        The population (exact risks).
    bounds : sequence of str
        The upper confidence bounds audited.
    pis : sequence of float
        Labelling probabilities of ``resample`` and ``bernoulli`` (:func:`audit_schemes`).
    group_sizes : sequence of int
        Calibration items per group.
    eps_list : sequence of float
        Target risks.
    rules : sequence of str
        Selection rules.
    alpha : float, default 0.05
        Nominal miscoverage.
    calibrations : int, default 1000
        Independent calibrations per cell and group.
    seed : int, default 0
        Seed of the calibration samples and label draws.

    Returns
    -------
    pandas.DataFrame
        One row per cell and group; ``ucb_seconds`` is the time spent on that bound's UCB curves
        for the cell (shared by the rows of the cell). The pass criterion for a nominal level
        ``alpha`` is ``violation_rate <= alpha + 3 sqrt(alpha (1 - alpha) / calibrations)``.
    """
    settings = (list(bounds), list(rules), list(eps_list), float(alpha), int(calibrations), int(seed))
    cells = [
        (ni, int(n), si, scheme, float(pi))
        for ni, n in enumerate(group_sizes)
        for si, (scheme, pi) in enumerate(audit_schemes(pis))
    ]
    out = pd.DataFrame([row for cell in cells for row in _audit_cell(pop, settings, *cell)])
    out["pass_threshold"] = alpha + 3 * np.sqrt(alpha * (1 - alpha) / out["calibrations"])
    out["pass"] = out["violation_rate"] <= out["pass_threshold"]
    return out
