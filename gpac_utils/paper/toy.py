"""A tiny synthetic population for the quickstart: three groups of different difficulty.

Each item has an uncertainty score ``U`` in [0, 1] (``score_logits``) and a binary loss: 1 when
the thinking model is right and the non-thinking model wrong. Within every group the loss
probability rises with ``U`` (the score is informative), but at the same score a *hard* item is
much more likely to be lost than an *easy* one -- the score is not calibrated across groups.
This is the situation where a single (marginal) PAC threshold keeps the average risk below
``eps`` while the hard group's risk exceeds it.

==========  =====  ===================  ===============================
group       share  score U ~            P(loss = 1 | U)
==========  =====  ===================  ===============================
``easy``    0.5    Beta(2, 5)           0.02 + 0.20 U
``medium``  0.3    Beta(3, 3)           0.05 + 0.35 U
``hard``    0.2    Beta(4, 3)           0.30 + 0.50 U
==========  =====  ===================  ===============================

:data:`TOY_GROUPS` holds these numbers; :func:`toy_group_risk` gives the exact population
risk ``E[loss * 1{U <= t} | group]`` of a threshold, for checking calibrated thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import special, stats
from tqdm.auto import tqdm

from .. import metrics
from ..calibrate import ALL, CPAC, GPAC, method_class
from ..data import GROUP, ID, LOSS, NOTHINK_CORRECT, NOTHINK_TOKENS, THINK_CORRECT, THINK_TOKENS, validate
from ..partition import ScorePartitioner
from ..recipe import PAPER

TOY_SCORE = "score_logits"

#: group -> (share, beta a, beta b, loss intercept, loss slope, think-token median)
TOY_GROUPS: Mapping[str, tuple[float, float, float, float, float, float]] = {
    "easy": (0.5, 2.0, 5.0, 0.02, 0.20, 600.0),
    "medium": (0.3, 3.0, 3.0, 0.05, 0.35, 1500.0),
    "hard": (0.2, 4.0, 3.0, 0.30, 0.50, 4000.0),
}
NOTHINK_MEDIAN = 250.0


def toy_population(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` synthetic items in the data schema (see :mod:`gpac_utils.data`), seeded.

    Columns: ``item_id``, ``group`` (easy/medium/hard), ``loss``, ``think_correct``,
    ``nothink_correct``, ``think_tokens``, ``nothink_tokens``, ``score_logits``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    names = list(TOY_GROUPS)
    params = np.array([TOY_GROUPS[g] for g in names])
    share, a, b, icpt, slope, think_med = params.T
    g = rng.choice(len(names), size=n, p=share / share.sum())
    u = rng.beta(a[g], b[g])
    p_loss = icpt[g] + slope[g] * u
    loss = (rng.random(n) < p_loss).astype(float)
    # Correctness consistent with the loss: loss = 1 <=> thinking right and non-thinking wrong.
    # Otherwise both right (most often), both wrong, or only the non-thinking model right.
    pair = rng.choice(3, size=n, p=[0.8, 0.15, 0.05])
    think = np.where(loss == 1, 1, np.where(pair == 0, 1, 0))
    nothink = np.where(loss == 1, 0, np.where(pair == 1, 0, 1))
    think_tokens = np.round(think_med[g] * rng.lognormal(0.0, 0.4, n))
    nothink_tokens = np.round(NOTHINK_MEDIAN * rng.lognormal(0.0, 0.3, n))
    df = pd.DataFrame(
        {
            ID: [f"toy-{i:05d}" for i in range(n)],
            GROUP: np.array(names)[g],
            LOSS: loss,
            THINK_CORRECT: think,
            NOTHINK_CORRECT: nothink,
            THINK_TOKENS: think_tokens,
            NOTHINK_TOKENS: nothink_tokens,
            TOY_SCORE: u,
        }
    )
    return validate(df, require_group=True, require_tokens=True)


def toy_group_risk(threshold: float, group: str | None = None) -> float:
    """Exact population risk ``E[loss * 1{U <= threshold} | group]`` (``group=None``: all groups).

    For U ~ Beta(a, b) and P(loss | U) = c + s U:
    ``E[(c + s U) 1{U <= t}] = c F_{a,b}(t) + s a/(a+b) F_{a+1,b}(t)``.
    """
    if group is None:
        total = sum(v[0] for v in TOY_GROUPS.values())
        return float(sum(v[0] / total * toy_group_risk(threshold, g) for g, v in TOY_GROUPS.items()))
    if group not in TOY_GROUPS:
        raise KeyError(f"unknown toy group {group!r}; groups are {list(TOY_GROUPS)}")
    _, a, b, c, s, _ = TOY_GROUPS[group]
    t = float(np.clip(threshold, 0.0, 1.0)) if np.isfinite(threshold) else (0.0 if threshold < 0 else 1.0)
    return float(c * special.betainc(a, b, t) + s * a / (a + b) * special.betainc(a + 1, b, t))


def toy_group_share_routed(threshold: float, group: str) -> float:
    """Exact share of ``group`` routed to the non-thinking model, ``P(U <= threshold | group)``."""
    _, a, b, *_ = TOY_GROUPS[group]
    return float(stats.beta.cdf(threshold, a, b)) if np.isfinite(threshold) else float(threshold > 0)


# --------------------------------------------------------------------------- quickstart helpers
QUICKSTART_METHODS = ("PAC", "G-PAC", "C-PAC")


def loss_by_score_bin(df: pd.DataFrame, bins: int = 10, score: str = TOY_SCORE) -> pd.DataFrame:
    """Mean loss per group and score bin (equal-width bins on [0, 1]) with its standard error."""
    if score not in df.columns:
        raise KeyError(f"no score column {score!r}; the table has {list(df.columns)}")
    edges = np.linspace(0.0, 1.0, int(bins) + 1)
    b = np.clip(np.searchsorted(edges, df[score].to_numpy(float), side="right") - 1, 0, bins - 1)
    out = (
        df.assign(bin=b).groupby([GROUP, "bin"], observed=True)[LOSS].agg(loss="mean", n="size", sd="std").reset_index()
    )
    out["se"] = out["sd"].fillna(0.0) / np.sqrt(out["n"])
    out["score_mid"] = (edges[out["bin"]] + edges[out["bin"] + 1]) / 2
    return out.drop(columns="sd")


def fit_methods(
    cal: pd.DataFrame,
    *,
    eps: float,
    alpha: float = 0.05,
    bound: str = "clt",
    k: int = 3,
    seed: int = 0,
    methods=QUICKSTART_METHODS,
) -> dict:
    """Fit PAC, G-PAC and C-PAC on a calibration table.

    The recipe is the paper's resampling scheme (pi = 0.5) with ``bound`` and the
    first-crossing rule.

    Parameters
    ----------
    cal : pandas.DataFrame
        A toy calibration table (:func:`toy_population`).
    eps, alpha : float
        Target risk and miscoverage.
    bound : str, default "clt"
        Upper confidence bound.
    k : int, default 3
        C-PAC's number of learned groups.
    seed : int, default 0
        Method ``i`` is seeded with ``seed * 1000 + i``.
    methods : sequence of str
        Method names (``"PAC"``, ``"G-PAC"``, ``"C-PAC"``).

    Returns
    -------
    dict
        ``{method name: fitted calibrator}``.
    """
    recipe = PAPER.replace(bound=bound, rule="first-crossing")
    fitted = {}
    for i, m in enumerate(methods):
        cls = method_class(m)
        kw = {"partitioner": ScorePartitioner(k)} if cls is CPAC else {}
        cal_obj = cls(eps, alpha, recipe, seed=seed * 1000 + i, **kw)
        groups = cal[GROUP].to_numpy() if cls is GPAC else None
        cal_obj.fit(cal[TOY_SCORE].to_numpy(float), cal[LOSS].to_numpy(float), groups)
        fitted[cal_obj.name] = cal_obj
    return fitted


def thresholds_table(fitted: Mapping) -> pd.DataFrame:
    """One row per (method, group the threshold belongs to): threshold and calibration size."""
    rows = []
    for name, obj in fitted.items():
        for g, t in obj.thresholds_.items():
            rows.append(
                {"method": name, "threshold group": g, "threshold": t, "calibration items": obj.group_sizes_.get(g)}
            )
    return pd.DataFrame(rows)


def evaluate(fitted: Mapping, test: pd.DataFrame) -> pd.DataFrame:
    """Test risk ``E_j`` and share routed to the non-thinking model, per method and group.

    ``partition`` says which groups a row is about: ``known`` (easy/medium/hard), ``learned``
    (C-PAC's score clusters ``c0..``, when C-PAC is among ``fitted``: every method is measured on
    them) or ``all`` (group ``__all__``, the whole test set).
    """
    u, loss, known = test[TOY_SCORE].to_numpy(float), test[LOSS].to_numpy(float), test[GROUP].to_numpy(str)
    learned = fitted["C-PAC"].assign(u) if "C-PAC" in fitted else None
    rows = []
    for name, obj in fitted.items():
        route = obj.route(u, known if name == "G-PAC" else None)
        for partition, labels in (("known", known), ("learned", learned)):
            if labels is None:
                continue
            for grp in sorted(set(labels.tolist())):
                mine = labels == grp
                rows.append(
                    {
                        "method": name,
                        "partition": partition,
                        "group": grp,
                        "risk": metrics.error(route[mine], loss[mine]),
                        "routed": metrics.routed_share(route[mine]),
                    }
                )
        rows.append(
            {
                "method": name,
                "partition": "all",
                "group": ALL,
                "risk": metrics.error(route, loss),
                "routed": metrics.routed_share(route),
            }
        )
    return pd.DataFrame(rows)


def quickstart_sweep(
    eps_grid,
    *,
    n_cal: int,
    n_test: int,
    trials: int,
    alpha: float = 0.05,
    bound: str = "clt",
    k: int = 3,
    seed: int = 0,
    progress: bool = False,
) -> pd.DataFrame:
    """Repeat calibration on fresh toy calibration sets for every ``eps``; evaluate on one large test set.

    Returns a tidy table: ``trial, eps, method, partition, group, risk, routed`` (see :func:`evaluate`).
    Trial ``t`` draws its calibration set with seed ``[seed, 1, t]``; the test set uses ``[seed, 2]``.
    """
    test = toy_population(n_test, seed=np.random.SeedSequence([seed, 2]).generate_state(1)[0])
    frames = []
    for t in tqdm(range(int(trials)), desc="trials", leave=False, disable=not progress):
        cal = toy_population(n_cal, seed=np.random.SeedSequence([seed, 1, t]).generate_state(1)[0])
        for eps in eps_grid:
            fitted = fit_methods(cal, eps=float(eps), alpha=alpha, bound=bound, k=k, seed=t)
            frames.append(evaluate(fitted, test).assign(trial=t, eps=float(eps)))
    out = pd.concat(frames, ignore_index=True)
    return out[["trial", "eps", "method", "partition", "group", "risk", "routed"]]


def sweep_summary(sweep: pd.DataFrame) -> pd.DataFrame:
    """Mean risk and routed share per (eps, method, partition, group), with the violation rate
    (share of trials whose test risk exceeds eps) and Monte Carlo standard errors."""
    g = sweep.assign(violated=sweep["risk"] > sweep["eps"]).groupby(["eps", "method", "partition", "group"], sort=True)
    out = g.agg(
        risk=("risk", "mean"),
        risk_sd=("risk", "std"),
        routed=("routed", "mean"),
        violation_rate=("violated", "mean"),
        trials=("trial", "nunique"),
    ).reset_index()
    out["risk_mcse"] = out["risk_sd"].fillna(0.0) / np.sqrt(out["trials"])
    out["violation_mcse"] = metrics.mcse(out["violation_rate"], out["trials"])
    return out.drop(columns="risk_sd")
