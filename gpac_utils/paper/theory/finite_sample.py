"""Theorem 3.2 (notebook 12): the empirical test risk of a calibrated group."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...calibrate import threshold
from ...recipe import Recipe
from .populations import Population


def finite_sample_experiment(
    pop: Population,
    *,
    group: str,
    n_cal: int,
    N_grid: Sequence[int],
    t_grid: Sequence[float],
    eps: float,
    alpha: float,
    calibrations: int,
    settings: Sequence[tuple[str, str]],
    pi: float = 0.5,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    r"""Theorem 3.2: ``P(R_hat > eps + t)`` against ``alpha + exp(-2 N t^2 / B^2)`` (B = 1).

    For each (bound, scheme) setting, ``calibrations`` thresholds are calibrated on ``n_cal``
    items of ``group`` (first-crossing rule); given a threshold, the test losses
    ``loss * 1{U <= u_hat}`` of ``N`` test items are i.i.d. Bernoulli(``R(u_hat | G)``), so the
    empirical test risk is drawn exactly as ``Binomial(N, R(u_hat)) / N``.

    Parameters
    ----------
    pop : Population
        The population.
    group : str
        The calibrated group.
    n_cal : int
        Its calibration items.
    N_grid : sequence of int
        Test sizes ``N``.
    t_grid : sequence of float
        Slacks ``t``.
    eps, alpha : float
        Target risk and miscoverage.
    calibrations : int
        Independent calibrations per setting.
    settings : sequence of (str, str)
        ``(bound, scheme)`` pairs.
    pi : float, default 0.5
        Labelling probability of the non-``full`` schemes.
    seed : int, default 0
        Seed.

    Returns
    -------
    rows : pandas.DataFrame
        The exceedance table.
    draws : dict
        Per setting, the calibrated thresholds, their exact risks and the test risks per ``N``.
    """
    g = pop.group(group)
    T = int(calibrations)
    rows, draws = [], {}
    for si, (bound, scheme) in enumerate(settings):
        recipe = Recipe(bound=bound, sampling=scheme, pi=None if scheme == "full" else pi)
        rng = np.random.default_rng([seed, si])
        loss, u = g.sample((T, int(n_cal)), rng)
        thr = threshold(loss, u, eps=eps, alpha=alpha, recipe=recipe, rng=rng)
        risk = g.risk(thr)
        alpha_hat = float(np.mean(risk > eps))
        draws[(bound, scheme)] = {"threshold": thr, "risk": risk}
        for N in N_grid:
            r_hat = rng.binomial(int(N), risk) / int(N)
            draws[(bound, scheme)][int(N)] = r_hat
            for t in t_grid:
                p = float(np.mean(r_hat > eps + t + 1e-12))
                b = alpha + math.exp(-2 * int(N) * t * t)
                rows.append(
                    {
                        "bound": bound,
                        "scheme": scheme,
                        "N_test": int(N),
                        "t": float(t),
                        "exceed_rate": p,
                        "mcse": float(math.sqrt(max(p * (1 - p), 1e-12) / T)),
                        "thm32_bound": min(b, 1.0),
                        "holds": p <= b + 3 * math.sqrt(max(p * (1 - p), 1e-12) / T),
                        "violation_rate": alpha_hat,
                        "calibrations": T,
                    }
                )
    return pd.DataFrame(rows), draws
