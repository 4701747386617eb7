"""The oracle partition (notebook 10): PAC-optimal routed shares and Proposition 3.3.

:func:`oracle_summary` compares, at the population level, marginal PAC, the best single
threshold valid in every group and G-PAC; :func:`proposition_scan` gives them on random
populations, where the notebook checks Prop. 3.3 (and repeats the comparison with finite
calibration data).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .populations import Population, RiskGroup, oracle_threshold, sup_feasible


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
    pops = [
        (i, identical, random_population(rng, k=k, identical=identical))
        for i in range(int(n))
        for identical in (False, True)
    ]
    share = uniform_summaries([p for *_, p in pops], eps_list)
    rows = []
    for pi, (i, identical, pop) in enumerate(pops):
        for ei, eps in enumerate(eps_list):
            us = share["u_groups"][pi, ei]
            rows.append(
                {
                    "population": i,
                    "identical_groups": identical,
                    "eps": float(eps),
                    "routed_share_marginal": float(share["routed_share_marginal"][pi, ei]),
                    "routed_share_common": float(share["routed_share_common"][pi, ei]),
                    "routed_share_grouped": float(share["routed_share_grouped"][pi, ei]),
                    "thresholds_equal": bool(np.all(us == us[0]) or np.ptp(np.minimum(us, 1.0)) < 1e-9),
                    "marginal_violates_a_group": bool(share["max_group_risk_marginal"][pi, ei] > eps + 1e-12),
                    "groups": "; ".join(f"w={g.weight:.2f} a={g.a:.2f} b={g.b:g}" for g in pop.groups),
                }
            )
    return pd.DataFrame(rows)


def uniform_summaries(pops, eps_list) -> dict[str, np.ndarray]:
    r""":func:`oracle_summary`'s thresholds and routed shares for many populations at once.

    Every population has the same number of groups, each with ``U ~ Uniform(0, 1)``, so that a
    group's risk is :math:`a_j\,u^{b_j+1}/(b_j+1)` and its routed share is ``u``: one bisection
    (:func:`~.populations.sup_feasible`) over all populations, eps and groups at once.

    Parameters
    ----------
    pops : sequence of Population
        The populations.
    eps_list : sequence of float
        Target risks.

    Returns
    -------
    dict of str to numpy.ndarray
        ``u_marginal``, ``routed_share_marginal``, ``routed_share_common``, ``routed_share_grouped``,
        ``max_group_risk_marginal`` of shape ``(populations, eps)`` and ``u_groups`` of shape
        ``(populations, eps, groups)``.
    """
    if any(g.lo != 0 or g.hi != 1 for p in pops for g in p.groups):
        raise ValueError("uniform_summaries: every group needs U ~ Uniform(0, 1) (lo = 0, hi = 1)")
    w = np.array([p.weights for p in pops])[:, None, :]  # (populations, 1, groups)
    a = np.array([[g.a for g in p.groups] for p in pops], dtype=float)[:, None, :]
    e = np.array([[g.b + 1 for g in p.groups] for p in pops], dtype=float)[:, None, :]
    eps = np.asarray(eps_list, dtype=float)[None, :]  # (1, eps)

    def group_risk(u):  # R(u | G_j) = a_j u^(b_j + 1) / (b_j + 1), u in [0, 1]
        return a * np.clip(u, 0.0, 1.0) ** e / e

    u_groups = sup_feasible(group_risk, np.broadcast_to(eps[..., None], np.broadcast_shapes(a.shape, eps.shape + (1,))))
    u_marg = sup_feasible(
        lambda u: (w * group_risk(u[..., None])).sum(axis=-1), np.broadcast_to(eps, w.shape[:1] + eps.shape[1:])
    )
    return {
        "u_marginal": u_marg,
        "u_groups": u_groups,
        "routed_share_marginal": np.clip(u_marg, 0.0, 1.0),
        "routed_share_common": np.clip(u_groups.min(axis=-1), 0.0, 1.0),
        "routed_share_grouped": (w * np.clip(u_groups, 0.0, 1.0)).sum(axis=-1),
        "max_group_risk_marginal": group_risk(u_marg[..., None]).max(axis=-1),
    }
