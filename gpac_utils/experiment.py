r"""Repeated calibration/test splits: the engine behind every paper table.

:func:`run_experiment` draws ``trials`` seeded random splits of a table at a calibration ratio,
fits every method × score × variant (bound, sampling, rule) on the calibration part and
evaluates it on the test part, returning one tidy DataFrame (one row per trial × method ×
score × variant × group, plus ``group == "__all__"`` for the whole test set).

Besides the test-set error (what the paper reports) each row carries ``pop_risk``: the risk of
the chosen threshold over the *whole table* in that group. Treating the table as the
population, ``pop_risk > eps`` is a violation of the guarantee; :func:`summarize` reports the
share of trials with a violation in the worst group.

Evaluation groups: the known ``group`` column for PAC vs G-PAC; for C-PAC tables
(``eval_groups="learned"``) the groups learned by C-PAC in that trial, used for PAC too so
that both are judged on the same partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from . import data as D
from .calibrate import ALL, CPAC, METHODS
from .cluster import fit_partition
from .metrics import error_gap, stp as _stp

KEYS = ["method", "score", "bound", "sampling", "rule"]


def default_stp_form(score: str) -> str:
    """Router-based scores use the router STP form (App. F), the others the cascade form."""
    return "router" if "router" in score else "cascade"


def _variants(bounds, sampling, rule, variants):
    if variants is not None:
        out = []
        for v in variants:
            v = dict(v)
            v.setdefault("sampling", sampling)
            v.setdefault("rule", rule)
            out.append(v)
        return out
    return [{"bound": b, "sampling": sampling, "rule": rule} for b in bounds]


def run_experiment(
    table: pd.DataFrame,
    *,
    eps: float,
    methods: Sequence[str] = ("pac", "gpac"),
    scores: Sequence[str] | None = None,
    bounds: Sequence[str] = ("clt",),
    variants: Sequence[Mapping] | None = None,
    alpha: float = 0.05,
    trials: int = 100,
    cal_ratio: float = 0.6,
    sampling: str = "resample",
    pi: float = 0.5,
    rule: str = "max",
    k: int = 3,
    cpac_mode: str = "split",
    clustering: str = "kmeans",
    candidates="auto",
    loss_bound: float = 1.0,
    min_group_size: int = 10,
    eval_groups: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``trials`` random splits; see the module docstring for the output layout."""
    scores = list(scores) if scores is not None else D.score_columns(table)
    table = D.validate(table, loss_bound=loss_bound, score_cols=scores)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    if eval_groups is None:
        eval_groups = "learned" if "cpac" in methods else "known"
    if eval_groups == "known" and D.GROUP not in table.columns:
        raise ValueError("eval_groups='known' (or method 'gpac') needs a 'group' column")
    if "gpac" in methods and D.GROUP not in table.columns:
        raise ValueError("method 'gpac' needs a 'group' column")
    if not 0 < cal_ratio < 1:
        raise ValueError(f"cal_ratio must lie in (0, 1), got {cal_ratio}")
    vlist = _variants(bounds, sampling, rule, variants)
    n = len(table)
    n_cal = int(round(cal_ratio * n))
    loss = table[D.LOSS].to_numpy(float)
    known = table[D.GROUP].to_numpy(str) if D.GROUP in table.columns else None
    has_tokens = all(c in table.columns for c in D.TOKENS)
    lt = table[D.THINK_TOKENS].to_numpy(float) if has_tokens else None
    ln = table[D.NOTHINK_TOKENS].to_numpy(float) if has_tokens else None

    rows = []
    iterator = range(trials)
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc="trials", leave=False)
    for trial in iterator:
        perm = np.random.default_rng([seed, trial]).permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        for si, score in enumerate(scores):
            u = table[score].to_numpy(float)
            form = default_stp_form(score)
            for vi, var in enumerate(vlist):
                common = dict(eps=eps, alpha=alpha, bound=var["bound"], sampling=var["sampling"],
                              pi=pi, rule=var["rule"], candidates=candidates, loss_bound=loss_bound,
                              min_group_size=min_group_size)
                fitted = {}
                for mi, m in enumerate(methods):
                    cseed = int(np.random.SeedSequence([seed, trial, si, vi, mi]).generate_state(1)[0])
                    if m == "cpac":
                        cal_obj = CPAC(**common, seed=cseed, k=k, clustering=clustering, mode=cpac_mode)
                        cal_obj.fit(u[cal], loss[cal])
                    else:
                        cal_obj = METHODS[m](**common, seed=cseed)
                        cal_obj.fit(u[cal], loss[cal], known[cal] if m == "gpac" else None)
                    fitted[m] = cal_obj
                if eval_groups == "known":
                    labels = known
                elif "cpac" in fitted:
                    labels = fitted["cpac"].assign(u)
                else:
                    labels = fit_partition(u[cal], k, clustering).labels(u)
                for m, cal_obj in fitted.items():
                    grp = known if m == "gpac" else (cal_obj.assign(u) if m == "cpac" else None)
                    thr = cal_obj.thresholds_for(u, grp)
                    routed = u <= thr
                    rows.extend(_rows(trial, cal_obj.name, score, var, test, routed, loss, labels,
                                      thr, lt, ln, form))
    return pd.DataFrame(rows)


def _rows(trial, method, score, var, test, routed, loss, labels, thr, lt, ln, form):
    out = []
    groups = [ALL] + sorted(set(labels.tolist()))
    for g in groups:
        in_g = np.ones(len(loss), bool) if g == ALL else labels == g
        t = test[in_g[test]]
        r = routed[t]
        row = {"trial": trial, "method": method, "score": score, "bound": var["bound"],
               "sampling": var["sampling"], "rule": var["rule"], "group": g, "n_test": len(t),
               "error": float(np.mean(loss[t] * r)) if len(t) else np.nan,
               "efficiency": float(np.mean(r)) if len(t) else np.nan,
               "pop_risk": float(np.mean(loss[in_g] * routed[in_g])),
               "threshold": float(thr[t[0]]) if (g != ALL and len(t)) else np.nan}
        if lt is not None and len(t):
            row["stp"] = _stp(r, lt[t], ln[t], form)
        else:
            row["stp"] = np.nan
        out.append(row)
    return out


def summarize(results: pd.DataFrame, eps: float) -> pd.DataFrame:
    """Paper metrics per method × score × variant: Error, Error_Gap, STP (fractions).

    ``violation_rate`` is the share of trials in which the worst group's risk over the whole
    table (``pop_risk``) exceeds ``eps``; ``worst_group`` names the group with the largest
    mean test error.
    """
    out = []
    for key, df in results.groupby(KEYS, sort=False):
        overall = df[df.group == ALL]
        per = df[df.group != ALL]
        mean_e = per.groupby("group")["error"].mean()
        worst_pop = per.groupby("trial")["pop_risk"].max()
        out.append({**dict(zip(KEYS, key)),
                    "Error": overall["error"].mean(),
                    "Error_Gap": error_gap(mean_e.to_dict(), eps),
                    "STP": overall["stp"].mean(),
                    "efficiency": overall["efficiency"].mean(),
                    "violation_rate": float((worst_pop > eps).mean()),
                    "worst_group": mean_e.idxmax() if len(mean_e) else None,
                    "worst_group_error": mean_e.max() if len(mean_e) else np.nan,
                    "trials": overall["trial"].nunique()})
    return pd.DataFrame(out)
