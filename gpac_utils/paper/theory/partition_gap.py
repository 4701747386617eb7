r"""Learned partitions of the U axis (notebook 11): the partition gap and Theorem 3.4.

:func:`partition_gap` takes a confusion matrix ``C[i, j] = P(g_hat = i, g_star = j)`` and returns
:math:`\delta = \min_\sigma P(\hat g \ne \sigma(g^*))` (an assignment problem, Eq. partition-gap);
:func:`interval_confusion` builds ``C`` for two partitions of the ``U`` axis given by boundaries.
:func:`partition_gap_experiment` measures δ and the routed-share loss of learned partitions,
:func:`cpac_coverage` the per-learned-group violation rate of C-PAC (split vs joint).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import optimize

from ...calibrate import CPAC, GroupWarning
from ...metrics import mcse
from ...partition import PARTITION_ALGORITHMS, ScorePartitioner
from ...recipe import Recipe
from .populations import Population, ScalarView, sup_feasible, sup_feasible_scalar


def interval_edges(boundaries) -> np.ndarray:
    """``[-inf, b_1, ..., b_{k-1}, +inf]`` for a partition ``b_{j-1} < U <= b_j`` of the U axis."""
    b = np.asarray(boundaries, dtype=float).ravel()
    if np.any(np.diff(b) < 0):
        raise ValueError(f"partition boundaries must be ascending, got {b}")
    return np.concatenate([[-np.inf], b, [np.inf]])


def interval_confusion(pop: Population, learned_boundaries, oracle_boundaries) -> np.ndarray:
    """``C[i, j] = P(learned group i, oracle group j)`` for two interval partitions (square, zero-padded)."""
    e1, e2 = interval_edges(learned_boundaries), interval_edges(oracle_boundaries)
    k = max(len(e1), len(e2)) - 1
    C = np.zeros((k, k))
    view = ScalarView(pop)
    mass = view.mass if view.exact else pop.mass
    e1, e2 = e1.tolist(), e2.tolist()
    for i in range(len(e1) - 1):
        for j in range(len(e2) - 1):
            lo, hi = max(e1[i], e2[j]), min(e1[i + 1], e2[j + 1])
            if hi > lo:
                C[i, j] = float(mass(lo, hi))
    return C


def partition_gap(confusion) -> float:
    r""":math:`\delta = \min_{\sigma \in S_k} P(\hat g \ne \sigma(g^*)) = 1 - \max_\sigma \sum_i C[i, \sigma(i)]`."""
    C = np.asarray(confusion, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"confusion must be a square matrix, got shape {C.shape}")
    rows, cols = optimize.linear_sum_assignment(C, maximize=True)
    return float(C.sum() - C[rows, cols].sum())


def partition_gap_bruteforce(confusion) -> float:
    """:func:`partition_gap` by enumerating all ``k!`` permutations (small ``k``; for tests)."""
    C = np.asarray(confusion, dtype=float)
    k = C.shape[0]
    best = max(sum(C[i, s[i]] for i in range(k)) for s in itertools.permutations(range(k)))
    return float(C.sum() - best)


def partition_gap_from_labels(learned, oracle, k: int | None = None) -> float:
    """δ estimated from per-item labels (integers in ``[0, k)``), each item weighted equally."""
    learned = np.asarray(learned, dtype=int)
    oracle = np.asarray(oracle, dtype=int)
    if learned.shape != oracle.shape:
        raise ValueError(f"label arrays differ in shape: {learned.shape} vs {oracle.shape}")
    k = int(max(learned.max(), oracle.max()) + 1) if k is None else int(k)
    C = np.zeros((k, k))
    np.add.at(C, (learned, oracle), 1.0 / learned.size)
    return partition_gap(C)


def interval_thresholds(pop: Population, boundaries, eps) -> np.ndarray:
    """PAC-optimal threshold of every interval group ``b_{j-1} < U <= b_j`` (``+inf``: route all)."""
    e = interval_edges(boundaries)
    view = ScalarView(pop)
    scalar = view.exact and np.ndim(eps) == 0  # same floating-point operations, in Python floats
    out = []
    for lo, hi in zip(e[:-1].tolist(), e[1:].tolist()):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        if hi_c <= lo_c or (view.mass(lo_c, hi_c) if scalar else pop.mass(lo_c, hi_c)) <= 0:
            out.append(np.inf)  # an empty group routes nothing and risks nothing
            continue
        if scalar:
            out.append(sup_feasible_scalar(view.interval_risk_fn(lo_c, hi_c), float(eps), lo=lo_c, hi=hi_c))
            continue
        out.append(
            sup_feasible(lambda u, lo_c=lo_c, hi_c=hi_c: pop.interval_risk(u, lo_c, hi_c), eps, lo=lo_c, hi=hi_c)
        )
    return np.array(out, dtype=float)


def interval_partition_routed_share(pop: Population, boundaries, eps, thresholds=None) -> float:
    """``sum_j P(b_{j-1} < U <= min(u_j, b_j))`` with ``u_j`` PAC-optimal unless ``thresholds`` given."""
    e = interval_edges(boundaries)
    u = interval_thresholds(pop, boundaries, eps) if thresholds is None else np.asarray(thresholds, float)
    view = ScalarView(pop)
    mass = view.mass if view.exact else pop.mass
    total = 0.0
    for lo, hi, t in zip(e[:-1].tolist(), e[1:].tolist(), u.tolist()):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        top = min(max(t, lo_c), hi_c)
        total += float(mass(lo_c, top)) if top > lo_c else 0.0
    return total


def interval_group_risks(pop: Population, boundaries, thresholds) -> np.ndarray:
    r""":math:`R(u_j \mid \hat G_j)` of every interval group at the given thresholds."""
    e = interval_edges(boundaries)
    out = []
    for lo, hi, t in zip(e[:-1], e[1:], np.asarray(thresholds, dtype=float)):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        out.append(float(pop.interval_risk(t, lo_c, hi_c)) if hi_c > lo_c else 0.0)
    return np.array(out)


def fit_power_law(n, delta):
    """Least-squares fit of ``delta = C n^{-beta}`` on the log scale: returns ``(C, beta)``.

    The closed form of the two-parameter regression with correctly rounded sums (:func:`math.fsum`), so the
    fitted numbers do not depend on the BLAS (``np.polyfit`` solves it by an SVD whose last digits do).
    """
    n = np.asarray(n, dtype=float)
    d = np.asarray(delta, dtype=float)
    ok = d > 0
    if ok.sum() < 2:
        raise ValueError("need at least two positive gaps to fit a rate")
    x = [math.log(v) for v in n[ok].tolist()]
    y = [math.log(v) for v in d[ok].tolist()]
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    sxx = math.fsum((a - mx) * (a - mx) for a in x)
    if sxx == 0:
        raise ValueError("need at least two distinct sample sizes to fit a rate")
    slope = math.fsum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx
    return float(math.exp(my - slope * mx)), float(-slope)


def partition_gap_experiment(
    pop: Population, oracle_boundaries, cfg: Mapping, algorithms: Sequence[str] = PARTITION_ALGORITHMS
) -> pd.DataFrame:
    """δ and the routed-share loss of learned interval partitions, ``cfg["reps"]`` samples per ``n``.

    Each row: the learned boundaries' partition gap δ (Eq. partition-gap, exact from the
    population), the population routed share of the learned partition with its own PAC-optimal
    thresholds, that of the oracle partition, and the loss ``Eff(G*) - Eff(G_hat)`` to compare
    with Theorem 3.4's ``2 δ``.

    Parameters
    ----------
    pop : Population
        The population.
    oracle_boundaries : array_like
        The reference partition of the U axis.
    cfg : Mapping
        ``n_grid`` (sample sizes), ``reps``, ``eps``, ``k``, ``seed``.
    algorithms : sequence of str
        Partition algorithms (:data:`gpac_utils.partition.PARTITION_ALGORITHMS`).

    Returns
    -------
    pandas.DataFrame
    """
    eps, k, seed = cfg["eps"], cfg["k"], cfg["seed"]
    share_star = interval_partition_routed_share(pop, oracle_boundaries, eps)
    rows = []
    for ni, n in enumerate(cfg["n_grid"]):
        rng = np.random.default_rng([seed, ni, int(n)])
        for r in range(int(cfg["reps"])):
            _, u, _ = pop.sample(int(n), rng)
            for algorithm in algorithms:
                b = ScorePartitioner(k, algorithm).fit(u).boundaries
                delta = partition_gap(interval_confusion(pop, b, oracle_boundaries))
                share = interval_partition_routed_share(pop, b, eps)
                rows.append(
                    {
                        "n": int(n),
                        "rep": r,
                        "algorithm": algorithm,
                        "delta": delta,
                        "routed_share_oracle": share_star,
                        "routed_share_learned": share,
                        "routed_share_loss": share_star - share,
                        "bound_2delta": 2 * delta,
                        "boundaries": ",".join(f"{x:.4f}" for x in b),
                    }
                )
    return pd.DataFrame(rows)


def gap_summary(gap: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[float, float]]]:
    """Mean δ per (algorithm, n) with the fitted rate ``δ ≈ C n^-β`` and the share within ``2δ``.

    Parameters
    ----------
    gap : pandas.DataFrame
        Output of :func:`partition_gap_experiment`.

    Returns
    -------
    summary : pandas.DataFrame
        Per (algorithm, n): ``delta_mean, delta_se, routed_share_loss_mean, routed_share_loss_max,
        share_within_2delta, fitted_C, fitted_beta``.
    rates : dict of str to (float, float)
        ``(C, beta)`` per algorithm.
    """
    agg = (
        gap.groupby(["algorithm", "n"])
        .agg(
            delta_mean=("delta", "mean"),
            delta_se=("delta", "sem"),
            routed_share_loss_mean=("routed_share_loss", "mean"),
            routed_share_loss_max=("routed_share_loss", "max"),
        )
        .reset_index()
    )
    agg["share_within_2delta"] = [
        float((g["routed_share_loss"] <= g["bound_2delta"] + 1e-12).mean()) for _, g in gap.groupby(["algorithm", "n"])
    ]
    rates = {m: fit_power_law(a["n"], a["delta_mean"]) for m, a in agg.groupby("algorithm")}
    agg["fitted_C"] = agg["algorithm"].map(lambda m: rates[m][0])
    agg["fitted_beta"] = agg["algorithm"].map(lambda m: rates[m][1])
    return agg, rates


def cpac_coverage(pop: Population, cfg: Mapping, oracle_boundaries=None, modes=("split", "joint")) -> pd.DataFrame:
    """Per-learned-group violation rate of C-PAC, split vs joint (Theorem 3.4).

    Each repetition draws ``n`` calibration items, fits :class:`gpac_utils.calibrate.CPAC` and
    computes the exact risk ``R(u_hat_j | G_hat_j)`` of every learned interval group.

    Parameters
    ----------
    pop : Population
        The population.
    cfg : Mapping
        ``cover_n`` (sizes), ``cover_reps``, ``eps``, ``alpha``, ``bound``, ``sampling``, ``k``,
        ``partition`` (algorithm), ``seed``.
    oracle_boundaries : array_like, optional
        The reference partition (for δ of every learned partition).
    modes : sequence of str
        C-PAC modes.

    Returns
    -------
    pandas.DataFrame
        One row per (n, repetition, mode, learned group).
    """
    eps = cfg["eps"]
    recipe = Recipe(bound=cfg["bound"], sampling=cfg["sampling"])
    partitioner = ScorePartitioner(cfg["k"], cfg["partition"])
    rows = []
    for ni, n in enumerate(cfg["cover_n"]):
        rng = np.random.default_rng([cfg["seed"], ni, int(n), 7])
        for r in range(int(cfg["cover_reps"])):
            loss, u, _ = pop.sample(int(n), rng)
            for mode in modes:
                seed = int(rng.integers(2**31))
                model = CPAC(eps, cfg["alpha"], recipe, partitioner=partitioner, mode=mode, seed=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GroupWarning)
                    model.fit(u, loss)
                b = model.partition_.boundaries
                thr = np.array([model.thresholds_.get(f"c{j}", -np.inf) for j in range(len(b) + 1)])
                risks = interval_group_risks(pop, b, thr)
                delta = (
                    partition_gap(interval_confusion(pop, b, oracle_boundaries))
                    if oracle_boundaries is not None
                    else np.nan
                )
                for j, (t, risk) in enumerate(zip(thr, risks)):
                    rows.append(
                        {
                            "n": int(n),
                            "rep": r,
                            "mode": mode,
                            "group": f"c{j}",
                            "threshold": float(t),
                            "risk": float(risk),
                            "violated": bool(risk > eps),
                            "delta": delta,
                        }
                    )
    return pd.DataFrame(rows)


def coverage_summary(cov: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Violation rate per (mode, n, learned group), with an MCSE floored at ``alpha``.

    Parameters
    ----------
    cov : pandas.DataFrame
        Output of :func:`cpac_coverage`.
    alpha : float
        Nominal miscoverage (the MCSE uses ``max(rate, alpha)``).

    Returns
    -------
    pandas.DataFrame
    """
    out = (
        cov.groupby(["mode", "n", "group"])
        .agg(
            violation_rate=("violated", "mean"),
            calibrations=("violated", "size"),
            mean_delta=("delta", "mean"),
            mean_risk=("risk", "mean"),
        )
        .reset_index()
    )
    out["mcse"] = mcse(out["violation_rate"].clip(lower=alpha), out["calibrations"])
    return out


def best_interval_partition(pop: Population, eps: float, grid: int = 40, k: int = 3):
    """Best ``k``-interval partition of [0, 1] on a grid of boundaries, by population routed share.

    Parameters
    ----------
    pop : Population
        The population.
    eps : float
        Target risk.
    grid : int, default 40
        Boundaries are searched on ``j / grid``.
    k : int, default 3
        Number of intervals.

    Returns
    -------
    boundaries : tuple of float
    routed_share : float
    """
    pts = np.linspace(0, 1, int(grid) + 1)[1:-1]
    best = (-1.0, None)
    combos = itertools.combinations(pts, k - 1)
    for b in combos:
        e = interval_partition_routed_share(pop, list(b), eps)
        if e > best[0]:
            best = (e, b)
    return best[1], best[0]
