"""The oracle partition (notebook 10): PAC-optimal routed shares and Proposition 3.3.

:func:`oracle_summary` compares, at the population level, marginal PAC, the best single
threshold valid in every group and G-PAC; :func:`proposition_scan` checks Prop. 3.3 on random
populations; :func:`calibrated_routed_share` repeats the comparison with finite calibration data.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ...calibrate import ALL, threshold
from ...recipe import Recipe
from .populations import Population, RiskGroup, oracle_threshold


def oracle_summary(pop: Population, eps: float) -> dict:
    """Routed share of marginal PAC, of G-PAC, and of the best *common* threshold valid in every group.

    All at the population level (PAC-optimal thresholds, infinite calibration data):

    * ``marginal``: one threshold, marginal constraint ``R(u) <= eps`` (PAC reasoning);
    * ``common``: one threshold, every group's constraint (``min_j u_j*``) — the best a single
      threshold can do when the *group-conditional* guarantee is required;
    * ``grouped``: one threshold per group (G-PAC), every group's constraint.
    """
    w = pop.weights
    u_marg = oracle_threshold(pop, eps)
    u_j = np.array([oracle_threshold(pop, eps, g) for g in pop.names])
    u_common = float(np.min(u_j))
    routed_share_grouped = float(sum(wj * pop.share(u, g) for wj, u, g in zip(w, u_j, pop.names)))
    return {
        "eps": eps,
        "u_marginal": u_marg,
        "u_common": u_common,
        **{f"u_{g}": float(u) for g, u in zip(pop.names, u_j)},
        "routed_share_marginal": float(pop.share(u_marg)),
        "routed_share_common": float(pop.share(u_common)),
        "routed_share_grouped": routed_share_grouped,
        **{f"risk_marginal_{g}": float(pop.risk(u_marg, g)) for g in pop.names},
        "max_group_risk_marginal": float(max(pop.risk(u_marg, g) for g in pop.names)),
    }


def routed_share_table(pop: Population, eps_grid) -> pd.DataFrame:
    """:func:`oracle_summary` for every ``eps`` in the grid (one row each).

    Parameters
    ----------
    pop : Population
        The population.
    eps_grid : sequence of float
        Target risks.

    Returns
    -------
    pandas.DataFrame
    """
    return pd.DataFrame([oracle_summary(pop, float(e)) for e in eps_grid])


def random_population(rng, k: int = 3, identical: bool = False) -> Population:
    """A random population of ``k`` groups on U ~ Uniform(0, 1).

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Randomness.
    k : int, default 3
        Number of groups.
    identical : bool, default False
        Give every group the same loss curve (the equality case of Prop. 3.3).

    Returns
    -------
    Population
    """
    rng = np.random.default_rng(rng)
    a, b = rng.uniform(0.1, 1.0), rng.choice([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    groups = []
    for j in range(k):
        if not identical:
            a, b = rng.uniform(0.1, 1.0), rng.choice([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
        groups.append(RiskGroup(f"g{j}", float(rng.uniform(0.1, 1.0)), a=float(a), b=float(b)))
    return Population(tuple(groups))


def proposition_scan(n: int, eps_list, seed: int = 0, k: int = 3) -> pd.DataFrame:
    """Oracle routed shares on ``n`` random heterogeneous and ``n`` identical-group populations.

    Parameters
    ----------
    n : int
        Random populations of each kind.
    eps_list : sequence of float
        Target risks.
    seed : int, default 0
        Seed of the populations.
    k : int, default 3
        Groups per population.

    Returns
    -------
    pandas.DataFrame
        One row per (population, kind, eps).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(int(n)):
        for identical in (False, True):
            pop = random_population(rng, k=k, identical=identical)
            for eps in eps_list:
                s = oracle_summary(pop, float(eps))
                us = np.array([s[f"u_{g}"] for g in pop.names])
                rows.append(
                    {
                        "population": i,
                        "identical_groups": identical,
                        "eps": float(eps),
                        "routed_share_marginal": s["routed_share_marginal"],
                        "routed_share_common": s["routed_share_common"],
                        "routed_share_grouped": s["routed_share_grouped"],
                        "thresholds_equal": bool(np.all(us == us[0]) or np.ptp(np.minimum(us, 1.0)) < 1e-9),
                        "marginal_violates_a_group": s["max_group_risk_marginal"] > eps + 1e-12,
                        "groups": "; ".join(f"w={g.weight:.2f} a={g.a:.2f} b={g.b:g}" for g in pop.groups),
                    }
                )
    return pd.DataFrame(rows)


def proposition_check(scan: pd.DataFrame, tol: float = 1e-9) -> pd.DataFrame:
    """Prop. 3.3 checked on :func:`proposition_scan`: the corrected statement, the equality case
    and the statement as printed in the paper.

    Parameters
    ----------
    scan : pandas.DataFrame
        Output of :func:`proposition_scan`.
    tol : float, default 1e-9
        Numerical tolerance of the inequalities.

    Returns
    -------
    pandas.DataFrame
        Per statement: the populations, the number of cases, how many hold and the share.
    """
    het, ident = scan[~scan["identical_groups"]], scan[scan["identical_groups"]]
    differ = het[~het["thresholds_equal"]]
    valid = het[~het["marginal_violates_a_group"]]
    check = pd.DataFrame(
        [
            {
                "statement": "corrected: grouped >= common valid threshold",
                "populations": "heterogeneous",
                "cases": len(het),
                "holds": int((het["routed_share_grouped"] >= het["routed_share_common"] - tol).sum()),
            },
            {
                "statement": "corrected, strict when thresholds differ",
                "populations": "heterogeneous",
                "cases": len(differ),
                "holds": int((differ["routed_share_grouped"] > differ["routed_share_common"]).sum()),
            },
            {
                "statement": "equality: grouped == marginal",
                "populations": "identical groups",
                "cases": len(ident),
                "holds": int((np.abs(ident["routed_share_grouped"] - ident["routed_share_marginal"]) <= 1e-7).sum()),
            },
            {
                "statement": "as stated: grouped >= marginal",
                "populations": "heterogeneous",
                "cases": len(het),
                "holds": int((het["routed_share_grouped"] >= het["routed_share_marginal"] - tol).sum()),
            },
            {
                "statement": "as stated, when the marginal threshold is valid in every group",
                "populations": "heterogeneous",
                "cases": len(valid),
                "holds": int((valid["routed_share_grouped"] >= valid["routed_share_marginal"] - tol).sum()),
            },
        ]
    )
    check["share_holding"] = check["holds"] / check["cases"]
    return check


def calibrated_routed_share(pop: Population, cfg: Mapping) -> pd.DataFrame:
    """Calibrated marginal PAC vs G-PAC against the oracle, over ``cfg["calibrations"]`` repetitions.

    G-PAC calibrates each group on its ``round(w_j n_cal)`` items (Algorithm 2); marginal PAC
    calibrates one threshold on ``n_cal`` mixture items.

    Parameters
    ----------
    pop : Population
        The population.
    cfg : Mapping
        ``n_cal, eps, alpha, bound, sampling`` (a recipe with the first-crossing rule),
        ``calibrations, seed``.

    Returns
    -------
    pandas.DataFrame
        Rows method x group (and ``__all__``): the mean routed share, the oracle share and the
        group violation rate ``P(R(u_hat | G_j) > eps)``.
    """
    n_cal, eps, alpha, calibrations = cfg["n_cal"], cfg["eps"], cfg["alpha"], cfg["calibrations"]
    recipe = Recipe(bound=cfg["bound"], sampling=cfg["sampling"])
    rng = np.random.default_rng(cfg["seed"])
    T = int(calibrations)
    names, w = pop.names, pop.weights
    loss, u, _ = pop.sample(n_cal, rng, size=T)
    thr_marg = threshold(loss, u, eps=eps, alpha=alpha, recipe=recipe, rng=rng)
    thr_group = {}
    for g, wj in zip(names, w):
        nj = max(2, int(round(wj * n_cal)))
        lj, uj = pop.group(g).sample((T, nj), rng)
        thr_group[g] = threshold(lj, uj, eps=eps, alpha=alpha, recipe=recipe, rng=rng)
    rows = []
    u_marg, u_grp = oracle_threshold(pop, eps), {g: oracle_threshold(pop, eps, g) for g in names}
    for method, get, oracle in (
        ("PAC", lambda g: thr_marg, lambda g: u_marg),
        ("G-PAC", lambda g: thr_group[g], lambda g: u_grp[g]),
    ):
        total, total_oracle = 0.0, 0.0
        for g, wj in zip(names, w):
            t = get(g)
            share = pop.share(t, g)
            risk = pop.risk(t, g)
            rows.append(
                {
                    "method": method,
                    "group": g,
                    "routed_share": float(np.mean(share)),
                    "routed_share_oracle": float(pop.share(oracle(g), g)),
                    "violation_rate": float(np.mean(risk > eps)),
                    "mean_risk": float(np.mean(risk)),
                }
            )
            total += wj * float(np.mean(share))
            total_oracle += wj * float(pop.share(oracle(g), g))
        rows.append(
            {
                "method": method,
                "group": ALL,
                "routed_share": total,
                "routed_share_oracle": total_oracle,
                "violation_rate": np.nan,
                "mean_risk": np.nan,
            }
        )
    out = pd.DataFrame(rows)
    out["calibrations"] = T
    return out
