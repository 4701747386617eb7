"""Does the label planner keep its promises on real tables? Plan as a buyer of labels would, then check.

For each real table in ``data/real/`` (the MATH Level-5 table and the GPQA Diamond table; their data
cards are beside them), each ``eps`` and each pilot size, and several pilot draws:

1. **Pilot.** A random share of each group's rows (at least 2) is labelled (the pilot).
2. **Plan.** :func:`gpac_utils.prediction.predict` on the pilot and every row's (free) score, then
   :func:`gpac_utils.allocation.allocate` spends the label budget. A group's labels are capped at its
   rows *outside the pilot*: pilot items are not reused in calibration (``docs/planning.md``).
3. **Realise.** The planned labels of each group are drawn ``draws`` times without replacement from
   the group's rows outside the pilot, each draw calibrated by the library (:class:`~gpac_utils.GPAC`
   with the same :class:`~gpac_utils.settings.Settings`), and the routed share read off the group's
   rows. The same is done for the uniform allocation (the budget split evenly, capped at the rows).

Reported per (table, eps, pilot size), over the pilot draws and the groups with labels:

* ``coverage``: share of (group, pilot draw) cases whose predicted 10–90 % band holds the realised mean
  routed share; ``band_width``: the band's mean width (points of the group's traffic);
* ``pred_total``/``real_total``: the predicted and realised routed share of all traffic (mean over pilots);
  ``total_gap_se``: the standard error of their difference over the pilot draws;
* ``brier``/``brier_const``: the Brier score of ``p_certify`` against each draw's certification, and
  that of the best constant prediction in hindsight (the setting's mean certification rate, an oracle);
  ``brier_beatable``: whether that constant scores at least :data:`BRIER_TIE` (0.01). Where it does not,
  certification barely varies (nearly every planned group certifies in nearly every draw) and nothing is
  left to beat: the Brier goal is then read as ``brier < BRIER_TIE`` (the output says so); ``overclaim``:
  the cases with ``p_certify >= 0.95`` and a realised certification rate below 0.8;
* ``gain_pred``/``gain_real``: the planned allocation's gain over the uniform one, predicted and realised
  (points of all traffic), with ``gain_se`` its Monte Carlo standard error;
* ``gap``: ``pred_total - real_total``; ``goal_coverage`` (``coverage >= 0.75``), ``goal_total``
  (``|gap| <= 0.05``), ``goal_brier`` and ``goal_overclaim`` (no overclaim): the issue's goals per setting.

Defaults: 30 pilot draws per setting (10 left the standard error of the total's gap near 5 points on GPQA, too
wide to judge a 5-point goal) and 100 calibrations per planned allocation; about 7 minutes on two cores
(``elapsed_s`` is printed; 407 s on 2026-11-29).

The per-group rows go to ``<out>_groups.csv``, the summary to ``<out>.csv``, the reliability table of
``p_certify`` to ``<out>_reliability.csv``. ``--fast`` runs one table, one setting, one pilot and few
draws (``tests/test_planning.py`` runs it). ``--tables``, ``--eps`` and ``--pilot-shares`` run a subset of the
default settings (all tables, eps 0.05 and 0.1, pilot shares 0.1 and 0.25), e.g. while developing the pilot model:
``--tables mathl5_zeroeval --eps 0.1 --out /tmp/plan_math``. ``--table PATH`` (repeatable) adds a table outside
``data/real/``: a CSV with the columns ``score`` (in [0, 1]), ``loss`` and ``group`` (a held-out check of the
planner on a table it was not developed on; the project's outputs never read one).

**The deployment case** (``--case deployment``, issue 53; the above is the *finite-table* design, kept as a second
table): the calibration labels are fresh draws from the population the pilot came from. Each population is a
finite table taken as the population, a real one of ``TABLES`` or a simulated one of known risk
(:func:`simulated_population`, thin and thick groups, logistic score–loss shapes); the pilot is drawn i.i.d. from
each group's rows (:func:`iid_pilot`), the planner sees every row's score, a group's labels are capped at its rows,
and each planned count is realised by ``draws`` calibrations on i.i.d. draws (:func:`realise_iid`, independent of
the pilot, so computed once per group and count). Per case it records the mean and one-calibration bands
(``pred_q10``/``pred_q90``, the planner's mid-quantile band; ``one_q10``/``one_q90``, ordinary quantiles) and
``one_coverage``, the share of the calibrations whose routed share the 10–90 % band holds; ``p_pooled``, the
pilot's pooled rate (calibrations bootstrapped from the whole pooled pilot); ``one_loss_decides``, the plan's mark
(:attr:`gpac_utils.prediction.PlanCurves.one_loss_decides`). :func:`summarise_deployment` judges the issue's goals per
population and overall, on all cases and on the unmarked ones (column ``judged``), strictly (``goal_*``) and by
significance (``miss_*``), standard errors clustered by (population, group) (the total's by pilot draw);
``--from-groups PATH`` judges a ``_groups.csv`` again without rerunning it. Outputs: ``<out>.csv``,
``<out>_groups.csv``, ``<out>_reliability.csv`` (bins of width 0.1).
``make plan-benchmark`` runs the full deployment case (``benchmarks/plan_deploy*``), the small MATH run
``docs/planning.md`` quotes (``benchmarks/plan_deploy_math*``) and the finite-table design.

Usage: python benchmarks/plan_realdata.py [--fast] [--tables T ...] [--table PATH ...] [--eps E ...]
[--pilot-shares P ...] [--case {finite,deployment}] [--simulated K] [--out benchmarks/plan_realdata_after]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from gpac_utils import allocation, prediction
from gpac_utils.calibrate import GPAC, GroupWarning, batch_threshold
from gpac_utils.paper import realdata
from gpac_utils.settings import Settings
from gpac_utils.workflow import paths

warnings.simplefilter("ignore", GroupWarning)
warnings.simplefilter("ignore", prediction.PilotWarning)


@dataclass(frozen=True)
class Table:
    """A real table as the planner sees it: per row a score, a loss and a group."""

    file: str
    score: str  # a column, or "1-<column>"
    loss: str  # a column, or "<a>*(1-<b>)"
    budget_share: float = 0.5  # the label budget, as a share of the table's rows

    def read(self) -> pd.DataFrame:
        if Path(self.file).is_absolute():  # a --table: already score, loss, group
            return pd.read_csv(self.file)[["score", "loss", "group"]].astype({"group": str})
        df = realdata.read_raw(paths.REALDATA / self.file)
        score = 1.0 - df[self.score[2:]] if self.score.startswith("1-") else df[self.score]
        if "*(1-" in self.loss:
            a, b = self.loss[:-1].split("*(1-")
            loss = df[a] * (1 - df[b])
        else:
            loss = df[self.loss]
        return pd.DataFrame({"score": score.to_numpy(float), "loss": loss.to_numpy(float), "group": df["group"]})


#: The real tables of data/real/ (data cards: README.md, gpqa_gemma4_decile.md).
TABLES = {
    "mathl5_zeroeval": Table("mathl5_zeroeval.csv", "weak_uncertainty_disagree", "loss"),
    "gpqa_gemma4_d30": Table("gpqa_gemma4_decile.csv", "1-conf_d30", "strong_correct*(1-correct_d30)"),
}


def plan(df, pilot, settings, budget, spec, extra):
    """The planner's curves and allocation from the pilot rows (labels capped at the rows outside it);
    ``extra``: label counts added to the grid (the uniform allocation's)."""
    s, g, loss = df["score"].to_numpy(), df["group"].to_numpy(str), df["loss"].to_numpy()
    names = sorted(set(g.tolist()))
    cap = {x: int(np.sum((g == x) & ~pilot)) for x in names}
    grid = np.union1d(prediction.default_grid(max(cap.values())), [n for n in extra if n > 0])
    spec = dataclasses.replace(spec, n_grid=grid, cap=cap)
    curves = prediction.predict(s, g, s[pilot], loss[pilot], g[pilot], settings=settings, spec=spec)
    return curves, allocation.allocate(curves, min(budget, sum(cap.values())))


def realise(df, pilot, settings, n_labels: dict, draws: int, seed: int) -> pd.DataFrame:
    """Per group: the routed shares and certifications of ``draws`` calibrations at ``n_labels``."""
    s, g, loss = df["score"].to_numpy(), df["group"].to_numpy(str), df["loss"].to_numpy()
    rng = np.random.default_rng(seed)
    pools = {x: np.flatnonzero((g == x) & ~pilot) for x in n_labels}
    rows = {x: np.sort(s[g == x]) for x in n_labels}
    shares = {x: np.zeros(draws) for x in n_labels}
    cert = {x: np.zeros(draws, bool) for x in n_labels}
    for d in range(draws):
        idx = np.concatenate([rng.choice(pools[x], n, replace=False) for x, n in n_labels.items() if n > 0] + [[]])
        idx = idx.astype(int)
        if idx.size == 0:
            continue
        fit = GPAC.from_settings(settings.replace(seed=int(rng.integers(2**31)))).fit(s[idx], loss[idx], g[idx])
        for x, t in fit.thresholds_.items():
            shares[x][d] = np.searchsorted(rows[x], t, side="right") / rows[x].size
            cert[x][d] = np.isfinite(t)
    return pd.DataFrame(
        {
            "group": list(n_labels),
            "real_mean": [shares[x].mean() for x in n_labels],
            "real_se": [shares[x].std(ddof=1) / np.sqrt(draws) for x in n_labels],
            "real_cert": [cert[x].mean() for x in n_labels],
        }
    )


def pilot_rows(groups: np.ndarray, share: float, pilot: int, eps: float) -> np.ndarray:
    """The rows of pilot draw ``pilot`` of a setting (a mask), seeded by the draw, the share and ``eps``:
    stratified, ``share`` of each group's rows (at least 2)."""
    rng = np.random.default_rng([pilot, int(share * 1000), int(eps * 1000)])
    out = np.zeros(len(groups), bool)
    for x in sorted(set(groups.tolist())):
        rows_x = np.flatnonzero(groups == x)
        out[rng.choice(rows_x, max(2, int(round(share * rows_x.size))), replace=False)] = True
    return out


def run(tables, eps_values, pilot_shares, pilots, draws, spec, alpha=0.1) -> pd.DataFrame:
    out = []
    for tname in tables:
        table = TABLES[tname] if tname in TABLES else Table(str(Path(tname).resolve()), "score", "loss")
        tname = Path(tname).stem if tname not in TABLES else tname
        df = table.read()
        g = df["group"].to_numpy(str)
        names = sorted(set(g.tolist()))
        traffic = {x: float(np.mean(g == x)) for x in names}
        budget = int(round(table.budget_share * len(df)))
        for eps in eps_values:
            settings = Settings(eps=eps, alpha=alpha)
            for share in pilot_shares:
                for p in range(pilots):
                    pilot = pilot_rows(g, share, p, eps)
                    cap = {x: int(np.sum((g == x) & ~pilot)) for x in names}
                    uni = allocation.uniform_counts(cap, min(budget, sum(cap.values())))
                    curves, planned = plan(df, pilot, settings.replace(seed=p), budget, spec, uni.values())
                    lo, hi = curves.band()
                    real = realise(df, pilot, settings, planned.n, draws, seed=p + 1000).set_index("group")
                    real_u = realise(df, pilot, settings, uni, draws, seed=p + 2000).set_index("group")
                    for j, x in enumerate(curves.groups):
                        k = np.flatnonzero(curves.n_grid == planned.n[x])
                        kk = np.flatnonzero(curves.n_grid == uni[x])
                        at = lambda a, k=k, j=j: float(a[j, k[0]]) if k.size else 0.0  # noqa: E731
                        out.append(
                            {
                                "table": tname,
                                "eps": eps,
                                "pilot_share": share,
                                "pilot": p,
                                "group": x,
                                "traffic": traffic[x],
                                "pilot_n": curves.pilot_sizes[x],
                                "n_labels": planned.n[x],
                                "pred_mean": at(curves.mean),
                                "pred_q10": at(lo),
                                "pred_q90": at(hi),
                                "p_certify": at(curves.p_certify),
                                "real_mean": real.loc[x, "real_mean"],
                                "real_se": real.loc[x, "real_se"],
                                "real_cert": real.loc[x, "real_cert"],
                                "uniform_n": uni[x],
                                "uniform_pred_mean": float(curves.mean[j, kk[0]]) if kk.size else 0.0,
                                "uniform_real_mean": real_u.loc[x, "real_mean"],
                                "uniform_real_se": real_u.loc[x, "real_se"],
                            }
                        )
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- the deployment case (issue 53)
#: Simulated populations of the deployment case: (rows, groups, discrete score?) per population, seeded by its index.
SIMULATED = [(400, 4, True), (600, 6, False), (300, 3, True), (800, 8, False), (500, 5, False), (700, 7, True)]


def simulated_population(i: int) -> pd.DataFrame:
    """Simulated population ``sim<i>``: a finite table of known risk (every row's loss drawn once, seeded by ``i``).

    Groups of unequal traffic (a Dirichlet draw with one thin group of 2–4 %), each with a loss probability
    logistic in the score, ``expit(a_g + b_g (s - 1/2))``: base rates from 2 % to 40 %, slopes from 1 to 8 (a
    larger score means less trust), and in one population in two a group with one loss among its lowest scores
    (MATH's Prealgebra shape). The score is discrete (nine values, as MATH's) or continuous (a Beta draw)."""
    n, k, discrete = SIMULATED[i % len(SIMULATED)]
    rng = np.random.default_rng([53, i])
    share = rng.dirichlet(np.full(k, 2.0))
    share[0] = rng.uniform(0.02, 0.04)  # a thin group
    share = share / share.sum()
    sizes = np.maximum(5, np.round(share * n).astype(int))
    rows = []
    for j, m in enumerate(sizes):
        s = rng.integers(0, 9, m) / 8 if discrete else rng.beta(rng.uniform(0.7, 2), rng.uniform(0.7, 2), m)
        a, b = np.log(rng.uniform(0.02, 0.4) / 0.98), rng.uniform(1, 8)
        loss = (rng.random(m) < 1 / (1 + np.exp(-(a + b * (s - 0.5))))).astype(float)
        if i % 2 == 0 and j == k - 1:
            loss[np.argmin(s)] = 1.0  # one loss at the group's lowest score
        rows.append(pd.DataFrame({"score": s, "loss": loss, "group": f"g{j}"}))
    return pd.concat(rows, ignore_index=True)


def population(name: str) -> pd.DataFrame:
    """A population of the deployment case: a real table (``TABLES``) or ``sim<i>``."""
    return simulated_population(int(name[3:])) if name.startswith("sim") else TABLES[name].read()


def iid_pilot(groups: np.ndarray, share: float, pilot: int, eps: float) -> np.ndarray:
    """Row indices of pilot draw ``pilot`` in the deployment case: ``share`` of each group's rows (at least 2) drawn
    i.i.d. (with replacement) from the group's rows, seeded by the draw, the share and ``eps``."""
    rng = np.random.default_rng([pilot, int(share * 1000), int(eps * 1000), 53])
    out = [
        rng.choice(rows_x, max(2, int(round(share * rows_x.size))), replace=True)
        for rows_x in (np.flatnonzero(groups == x) for x in sorted(set(groups.tolist())))
    ]
    return np.concatenate(out)


def realise_iid(scores, losses, n: int, draws: int, settings: Settings, level: float, seed) -> tuple:
    """Routed shares and certifications of ``draws`` calibrations of one group on ``n`` labels drawn i.i.d. from its
    population rows (the deployment case: independent of the pilot), the shares read off those rows."""
    if n < max(1, settings.min_group_size):
        return np.zeros(draws), np.zeros(draws, bool)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, scores.size, (draws, n))
    t = batch_threshold(scores[idx], losses[idx], settings.replace(alpha=level, seed=0), rng=rng, label_prob=None)
    return np.searchsorted(np.sort(scores), t, side="right") / scores.size, np.isfinite(t)


def pooled_baseline(pilot_scores, pilot_losses, n: int, settings: Settings, level: float, seed, resamples=50) -> float:
    """The pilot's pooled rate: the share of calibrations of ``n`` items bootstrapped from the whole pooled pilot
    (every group's items together) that certify, a forecast that ignores the group."""
    if n < max(1, settings.min_group_size):
        return 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, pilot_scores.size, (resamples, n))
    t = batch_threshold(pilot_scores[idx], pilot_losses[idx], settings.replace(alpha=level, seed=0), rng=rng)
    return float(np.mean(np.isfinite(t)))


def run_deployment(
    populations, eps_values, pilot_shares, pilots, draws, spec, alpha=0.1, first_pilot=0
) -> pd.DataFrame:
    """One row per (population, eps, pilot share, pilot draw, group): the plan from an i.i.d. pilot (draws
    ``first_pilot`` to ``first_pilot + pilots - 1``) and the realised results of ``draws`` fresh i.i.d. calibrations
    at the planned counts (and at the uniform split's)."""
    out = []
    for pname in populations:
        df = population(pname)
        s, loss, g = df["score"].to_numpy(float), df["loss"].to_numpy(float), df["group"].to_numpy(str)
        names = sorted(set(g.tolist()))
        rows = {x: np.flatnonzero(g == x) for x in names}
        traffic = {x: rows[x].size / g.size for x in names}
        budget = int(round(0.5 * g.size))
        cap = {x: rows[x].size for x in names}  # at most the group's population rows (no pilot exclusion: fresh draws)
        for eps in eps_values:
            settings = Settings(eps=eps, alpha=alpha)
            level = settings.alpha_per_group(len(names))
            cache: dict = {}

            for share in pilot_shares:
                for p in range(first_pilot, first_pilot + pilots):
                    pi = iid_pilot(g, share, p, eps)
                    uni = allocation.uniform_counts(cap, budget)
                    grid = np.union1d(prediction.default_grid(max(cap.values())), [n for n in uni.values() if n > 0])
                    sp = dataclasses.replace(spec, n_grid=grid, cap=cap, traffic=traffic)
                    curves = prediction.predict(
                        s, g, s[pi], loss[pi], g[pi], settings=settings.replace(seed=p), spec=sp
                    )
                    planned = allocation.allocate(curves, budget)
                    lo, hi = curves.band()
                    one_lo, one_hi = np.quantile(curves.routed_shares, [0.1, 0.9], axis=-1, method="inverted_cdf")
                    for j, x in enumerate(curves.groups):
                        n = planned.n[x]
                        k = np.flatnonzero(curves.n_grid == n)
                        kk = np.flatnonzero(curves.n_grid == uni[x])
                        at = lambda a, k=k, j=j: float(a[j, k[0]]) if k.size else 0.0  # noqa: E731
                        for _, m in sorted({(x, n), (x, uni[x])} - set(cache)):  # independent of the pilot
                            seed = [j, int(m), int(eps * 1000), 77]
                            cache[x, m] = realise_iid(s[rows[x]], loss[rows[x]], int(m), draws, settings, level, seed)
                        shares, cert = cache[x, n]
                        u_shares, _ = cache[x, uni[x]]
                        in_pilot = pi[g[pi] == x]
                        one = (at(one_lo) - 1e-12 <= shares) & (shares <= at(one_hi) + 1e-12)
                        out.append(
                            {
                                "population": pname,
                                "eps": eps,
                                "pilot_share": share,
                                "pilot": p,
                                "group": x,
                                "traffic": traffic[x],
                                "pilot_n": int(in_pilot.size),
                                "pilot_losses": int(loss[in_pilot].sum()),
                                "n_labels": n,
                                "pred_mean": at(curves.mean),
                                "pred_q10": at(lo),
                                "pred_q90": at(hi),
                                "one_q10": at(one_lo),
                                "one_q90": at(one_hi),
                                "p_certify": at(curves.p_certify),
                                "one_loss_decides": bool(at(curves.one_loss_decides)),
                                "pooled": bool(in_pilot.size < prediction.THIN_PILOT),
                                "p_cautious": prediction.cautious_p_certify(
                                    s[rows[x]],
                                    prediction.worst_rate(s[in_pilot], loss[in_pilot], s[rows[x]]),
                                    n,
                                    settings,
                                    level,
                                    resamples=100,
                                    seed=p,
                                )
                                if in_pilot.size < prediction.THIN_PILOT
                                else float("nan"),
                                "p_pooled": pooled_baseline(s[pi], loss[pi], n, settings, level, [p, j, 5]),
                                "real_mean": float(shares.mean()),
                                "real_se": float(shares.std(ddof=1) / np.sqrt(draws)),
                                "real_cert": float(cert.mean()),
                                "one_coverage": float(one.mean()),
                                "uniform_n": uni[x],
                                "uniform_pred_mean": float(curves.mean[j, kk[0]]) if kk.size else 0.0,
                                "uniform_real_mean": float(u_shares.mean()),
                            }
                        )
    return pd.DataFrame(out)


def _cluster_se(values: pd.Series, clusters: pd.Series) -> float:
    """Standard error of the mean of ``values`` with cases clustered by ``clusters`` (the cluster means' spread)."""
    means = values.groupby(clusters.to_numpy()).mean()
    return float(means.std(ddof=1) / np.sqrt(means.size)) if means.size > 1 else float("nan")


def summarise_deployment(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (population, eps, pilot share) and overall (``population == "ALL"``), the issue's goals, with standard
    errors clustered by (population, group), judged twice (column ``judged``): on ``all`` cases, and on the
    ``unmarked`` ones, the groups whose plan does not say that one loss decides (``one_loss_decides``; the total
    then sums those groups only). Each goal has a strict column (``goal_*``: the figure meets the goal) and a
    significance column (``miss_*``: the figure misses the goal by more than two standard errors: a miss that the
    benchmark's noise does not explain). Also the reliability table of ``p_certify`` in bins of width 0.1."""
    parts = [_judge(rows).assign(judged="all"), _judge(rows[~rows["one_loss_decides"]]).assign(judged="unmarked")]
    lab = rows[rows["n_labels"] > 0].copy()
    lab["cluster"] = lab["population"] + "/" + lab["group"]
    b = np.minimum((lab["p_certify"] * 10).astype(int), 9)
    rel = (
        lab.assign(bin=[f"[{i / 10:.1f}, {(i + 1) / 10:.1f})" for i in b])
        .groupby(["eps", "pilot_share", "bin"])
        .agg(
            cases=("p_certify", "size"),
            clusters=("cluster", "nunique"),
            p_certify=("p_certify", "mean"),
            realised=("real_cert", "mean"),
        )
        .reset_index()
    )
    rel["calibrated"] = (rel["realised"] - rel["p_certify"]).abs() <= 0.05
    return pd.concat(parts, ignore_index=True), rel


def _judge(rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`summarise_deployment`'s goals on ``rows``."""
    lab = rows[rows["n_labels"] > 0].copy()
    lab["cluster"] = lab["population"] + "/" + lab["group"]
    lab["thick"] = lab.groupby(["population", "eps", "pilot_share", "pilot"])["pilot_n"].transform("min") >= 20
    out = []
    keys = ["population", "eps", "pilot_share"]
    for key, r in [*rows.groupby(keys), *((("ALL", e, sh), q) for (e, sh), q in rows.groupby(["eps", "pilot_share"]))]:
        lr = lab.loc[lab.index.intersection(r.index)]
        if lr.empty:  # no planned group with labels: nothing to judge
            continue
        per_pilot = r.assign(p=r["traffic"] * r["pred_mean"], q=r["traffic"] * r["real_mean"])
        per_pilot = per_pilot.assign(u=r["traffic"] * r["uniform_real_mean"])
        tot = per_pilot.groupby(["population", "pilot"])[["p", "q", "u"]].sum()
        thick = lab.loc[lab.index.intersection(r.index)].groupby(["population", "pilot"])["thick"].all()
        gap = tot["p"] - tot["q"]
        gain = tot["q"] - tot["u"]
        by_pop = gap.groupby(level="population")
        loo = {
            pop: float(lab.loc[(lab["population"] != pop) & (lab["eps"] == key[1]), "real_cert"].mean())
            for pop in lr["population"].unique()
        }
        c = lr["real_cert"]
        const = lr["population"].map(loo).fillna(c.mean())
        bins = lr.assign(bin=np.minimum((lr["p_certify"] * 10).astype(int), 9), d=c - lr["p_certify"])
        full = [q for _, q in bins.groupby("bin") if len(q) >= RELIABILITY_CASES]  # the bins holding enough cases
        off = [abs(q["d"].mean()) - 0.05 for q in full]
        off_z = [o / max(_cluster_se(q["d"], q["cluster"]), 1e-12) for o, q in zip(off, full)]
        per_cluster = lr.groupby("cluster")["one_coverage"].mean()
        cluster_n = lr.groupby("cluster")["one_coverage"].size()  # its cases (pilots): the binomial SE of a 50 % rate
        thick_gap = gap[thick.reindex(gap.index).fillna(False).to_numpy(bool)]
        sure = int((lr["p_certify"] >= 0.95).sum())
        over = int(((lr["p_certify"] >= 0.95) & (c < 0.8)).sum())
        nan = float("nan")
        out.append(
            {
                "population": key[0],
                "eps": key[1],
                "pilot_share": key[2],
                "cases": int(len(lr)),
                "clusters": int(lr["cluster"].nunique()),
                "one_coverage": float(lr["one_coverage"].mean()),
                "one_coverage_se": _cluster_se(lr["one_coverage"], lr["cluster"]),
                "worst_cluster_coverage": float(per_cluster.min()) if per_cluster.size else float("nan"),
                "mean_coverage": float(
                    ((lr["pred_q10"] <= lr["real_mean"]) & (lr["real_mean"] <= lr["pred_q90"])).mean()
                ),
                "gap": float(gap.mean()),
                "gap_se": float(by_pop.mean().std(ddof=1) / np.sqrt(by_pop.ngroups))
                if by_pop.ngroups > 1
                else float(gap.std(ddof=1) / np.sqrt(gap.size)),
                "gap_thick": float(thick_gap.mean()),
                "gap_thick_se": float(thick_gap.std(ddof=1) / np.sqrt(thick_gap.size)) if thick_gap.size > 1 else nan,
                "brier": float(np.mean((lr["p_certify"] - c) ** 2 + c * (1 - c))),
                "brier_const_other": float(np.mean((const - c) ** 2 + c * (1 - c))),
                "brier_const_se": _cluster_se((lr["p_certify"] - c) ** 2 - (const - c) ** 2, lr["cluster"]),
                "brier_pooled": float(np.mean((lr["p_pooled"] - c) ** 2 + c * (1 - c))),
                "brier_pooled_se": _cluster_se((lr["p_certify"] - c) ** 2 - (lr["p_pooled"] - c) ** 2, lr["cluster"]),
                "sure": sure,
                "overclaim": over,
                "overclaim_p": float(stats.binom.sf(over - 1, sure, 0.05)) if sure else 1.0,
                "worst_cluster_z": float(((0.5 - per_cluster) / np.sqrt(0.25 / cluster_n)).max()),
                "reliability_bins": len(full),
                "reliability_off": float(max(off, default=nan)) + 0.05,
                "reliability_z": float(max(off_z, default=nan)),
                "gain_real": float(gain.mean()),
                "gain_se": float(gain.std(ddof=1) / np.sqrt(gain.size)) if gain.size > 1 else float("nan"),
            }
        )
    summary = pd.DataFrame(out)
    summary["goal_band"] = summary["one_coverage"].between(0.7, 0.9) & (summary["worst_cluster_coverage"] >= 0.5)
    summary["goal_total"] = summary["gap_thick"].abs().le(0.03) | summary["gap_thick"].isna()
    summary["goal_brier"] = (summary["brier"] < summary["brier_const_other"]) & (
        summary["brier"] < summary["brier_pooled"]
    )
    summary["goal_overclaim"] = summary["overclaim"] <= 0.05 * summary["sure"]
    summary["goal_reliability"] = ~(summary["reliability_off"] > 0.05)  # no bin with enough cases: nothing to judge
    summary["miss_reliability"] = summary["reliability_z"] > 2  # a one-cluster bin (SE 0 or nan): strict
    two = 2 * summary["one_coverage_se"].fillna(0)
    summary["miss_band"] = (summary["one_coverage"] - 0.9 > two) | (0.7 - summary["one_coverage"] > two)
    summary["miss_band"] |= summary["worst_cluster_z"] > 2
    summary["miss_total"] = summary["gap_thick"].abs() - 0.03 > 2 * summary["gap_thick_se"].fillna(0)
    tie = summary["brier"] < BRIER_TIE  # within about 0.1 of every realised rate: nothing left to beat
    summary["miss_brier"] = ~tie & (
        (summary["brier"] - summary["brier_pooled"] > 2 * summary["brier_pooled_se"].fillna(0))
        | (summary["brier"] - summary["brier_const_other"] > 2 * summary["brier_const_se"].fillna(0))
    )
    summary["miss_overclaim"] = summary["overclaim_p"] < 0.05
    return summary


#: The fewest cases a bin of ``p_certify`` (width 0.1) must hold for the deployment case to judge its calibration.
RELIABILITY_CASES = 20

#: Where the best constant in hindsight scores below this Brier score, the realised certification barely varies
#: (every planned group certifies in nearly every draw, or none does): nothing is left to beat, and the Brier
#: goal is judged as ``brier < BRIER_TIE`` (``p_certify`` within about 0.1 of the realised rate, root mean square).
BRIER_TIE = 0.01


def summarise(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary per (table, eps, pilot share) and the reliability table of p_certify."""
    out = []
    lab = rows[rows["n_labels"] > 0]
    for key, r in rows.groupby(["table", "eps", "pilot_share"]):
        w = r["traffic"]
        per_pilot = r.groupby("pilot")
        pred_total = per_pilot.apply(lambda q: np.sum(q["traffic"] * q["pred_mean"])).mean()
        real_totals = per_pilot.apply(lambda q: np.sum(q["traffic"] * q["real_mean"]))
        real_total = real_totals.mean()
        gap = per_pilot.apply(lambda q: np.sum(q["traffic"] * q["pred_mean"])) - real_totals
        gap_se = float(gap.std(ddof=1) / np.sqrt(gap.size)) if gap.size > 1 else float("nan")
        gain_pred = per_pilot.apply(lambda q: np.sum(q["traffic"] * (q["pred_mean"] - q["uniform_pred_mean"]))).mean()
        gain_real = per_pilot.apply(lambda q: np.sum(q["traffic"] * (q["real_mean"] - q["uniform_real_mean"]))).mean()
        gain_se = np.sqrt(np.sum((w**2) * (r["real_se"] ** 2 + r["uniform_real_se"] ** 2))) / r["pilot"].nunique()
        lr = r[r["n_labels"] > 0]
        covered = (lr["pred_q10"] <= lr["real_mean"] + 1e-12) & (lr["real_mean"] <= lr["pred_q90"] + 1e-12)
        c = lr["real_cert"]
        const = float(c.mean())  # the best constant prediction of this setting
        brier = float(np.mean((lr["p_certify"] - c) ** 2 + c * (1 - c)))
        brier_const = float(np.mean((const - c) ** 2 + c * (1 - c)))
        out.append(
            {
                "table": key[0],
                "eps": key[1],
                "pilot_share": key[2],
                "cases": int(len(lr)),
                "coverage": float(covered.mean()),
                "band_width": float((lr["pred_q90"] - lr["pred_q10"]).mean()),
                "pred_total": float(pred_total),
                "real_total": float(real_total),
                "total_gap_se": gap_se,
                "brier": brier,
                "brier_const": brier_const,
                "brier_beatable": bool(brier_const >= BRIER_TIE),
                "overclaim": int(np.sum((lr["p_certify"] >= 0.95) & (c < 0.8))),
                "gain_pred": float(gain_pred),
                "gain_real": float(gain_real),
                "gain_se": float(gain_se),
            }
        )
    edges = np.array([0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0 + 1e-9])
    b = np.digitize(lab["p_certify"], edges) - 1
    rel = (
        lab.assign(bin=[f"[{edges[i]:.2f}, {min(edges[i + 1], 1):.2f})" for i in b])
        .groupby("bin")
        .agg(cases=("p_certify", "size"), p_certify=("p_certify", "mean"), realised=("real_cert", "mean"))
        .reset_index()
    )
    summary = pd.DataFrame(out)
    summary["gap"] = summary["pred_total"] - summary["real_total"]
    summary["goal_coverage"] = summary["coverage"] >= 0.75
    summary["goal_total"] = summary["gap"].abs() <= 0.05
    summary["goal_brier"] = (summary["brier"] < summary["brier_const"]) | (
        ~summary["brier_beatable"] & (summary["brier"] < BRIER_TIE)
    )
    summary["goal_overclaim"] = summary["overclaim"] == 0
    return summary, rel


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="one table, one setting, one pilot, few draws")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/plan_realdata"), help="output stem")
    ap.add_argument("--tables", nargs="*", default=list(TABLES), choices=list(TABLES), help="real tables to run")
    ap.add_argument("--table", action="append", default=[], type=Path, help="a CSV of score, loss, group to add")
    ap.add_argument("--eps", nargs="+", type=float, default=[0.05, 0.1], help="eps values to run")
    ap.add_argument("--pilot-shares", nargs="+", type=float, default=[0.1, 0.25], help="pilot shares to run")
    ap.add_argument("--pilots", type=int, default=30)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--n-resamples", type=int, default=200)
    ap.add_argument("--pilot-model", default="posterior", choices=prediction.PILOT_MODELS)
    ap.add_argument("--bins", type=int, default=prediction.PilotModel().bins)
    ap.add_argument("--mix", type=float, default=prediction.PilotModel().mix)
    ap.add_argument(
        "--case",
        choices=["finite", "deployment"],
        default="finite",
        help="finite: calibrate on the table's rows outside the pilot; deployment: fresh i.i.d. draws from populations",
    )
    ap.add_argument("--simulated", type=int, default=len(SIMULATED), help="deployment: simulated populations")
    ap.add_argument("--first-simulated", type=int, default=0, help="deployment: sim<i> from this i (6: held out)")
    ap.add_argument("--first-pilot", type=int, default=0, help="deployment: pilot draws from this one (held out)")
    ap.add_argument("--from-groups", type=Path, help="deployment: judge the rows of this _groups.csv, do not rerun")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    model = prediction.PilotModel(kind=a.pilot_model, bins=a.bins, mix=a.mix)
    if a.case == "deployment":
        return _main_deployment(a, model, t0)
    if a.fast:
        rows = run(["mathl5_zeroeval"], [0.1], [0.25], 1, 20, prediction.PlanSpec(n_resamples=40, model=model))
    else:
        spec = prediction.PlanSpec(n_resamples=a.n_resamples, model=model)
        tables = list(a.tables) + [str(x) for x in a.table]
        rows = run(tables, a.eps, a.pilot_shares, a.pilots, a.draws, spec)
    summary, rel = summarise(rows)
    out = a.out if a.out.is_absolute() else paths.REPO_ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out.with_name(out.name + "_groups.csv"), index=False, float_format="%.4f", lineterminator="\n")
    summary.to_csv(out.with_name(out.name + ".csv"), index=False, float_format="%.4f", lineterminator="\n")
    rel.to_csv(out.with_name(out.name + "_reliability.csv"), index=False, float_format="%.4f", lineterminator="\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(summary.round(3).to_string(index=False))
        print(rel.round(3).to_string(index=False))
    for r in summary[~summary["brier_beatable"]].itertuples():
        print(
            f"{r.table} eps={r.eps:g} pilot={r.pilot_share:g}: the best constant in hindsight scores "
            f"{r.brier_const:.4f} < {BRIER_TIE} (certification barely varies): the Brier goal is judged as "
            f"brier < {BRIER_TIE} (got {r.brier:.4f})"
        )
    goals = [c for c in summary.columns if c.startswith("goal_")]
    print(f"goals met: {int(summary[goals].to_numpy().sum())} of {summary[goals].size} ({len(summary)} settings)")
    print(f"elapsed_s={time.perf_counter() - t0:.1f}")
    return 0


def _main_deployment(a, model, t0) -> int:
    """``--case deployment``: the real tables and ``--simulated`` simulated populations as populations."""
    pops = list(a.tables) + [f"sim{i}" for i in range(a.first_simulated, a.first_simulated + a.simulated)]
    if a.from_groups is not None:
        rows = pd.read_csv(a.from_groups)
    elif a.fast:
        rows = run_deployment(["mathl5_zeroeval", "sim0"], [0.1], [0.25], 2, 20, prediction.PlanSpec(n_resamples=40))
    else:
        spec = prediction.PlanSpec(n_resamples=a.n_resamples, model=model)
        rows = run_deployment(pops, a.eps, a.pilot_shares, a.pilots, a.draws, spec, first_pilot=a.first_pilot)
    summary, rel = summarise_deployment(rows)
    out = a.out if a.out.is_absolute() else paths.REPO_ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out.with_name(out.name + "_groups.csv"), index=False, float_format="%.4f", lineterminator="\n")
    summary.to_csv(out.with_name(out.name + ".csv"), index=False, float_format="%.4f", lineterminator="\n")
    rel.to_csv(out.with_name(out.name + "_reliability.csv"), index=False, float_format="%.4f", lineterminator="\n")
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(summary.round(3).to_string(index=False))
        print(rel.round(3).to_string(index=False))
    print(f"elapsed_s={time.perf_counter() - t0:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
