# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 — Learned partitions: the partition gap δ and Theorem 4.6
#
# **Reproduces** Section 4.3 of the paper: the partition gap δ (Eq. partition-gap, minimised
# over label permutations) of learned partitions — exact 1-D k-means on U and quantile bins —
# as the calibration size n grows, with a fitted rate `δ ≈ C n^{-β}`; the routed-share loss of a
# learned partition against Theorem 4.6's `2δ`; and the per-group coverage of C-PAC with sample
# splitting vs the joint approach.
#
# **Population** (`gpac_utils.paper.theory.populations.PARTITION_POPULATION`): the reference partition is a
# partition of the U axis — three equally likely groups `U ∈ [0, 1/3)`, `[1/3, 2/3)`,
# `[2/3, 1]` (so U ~ Uniform(0, 1) overall) with loss curves that jump at the boundaries:
# flat 30 % (low U, risky), `0.15 u` (mid U, safe), `0.6 u²` (high U, steep). Every risk
# `R(u | G)` of every interval `G` is in closed form, so δ, routed shares and violations are exact.
#
# **Reads** nothing. **Writes** `figures/partition_gap.{png,pdf}`,
# `figures/tables/partition_gap.{csv,md}`, `figures/tables/partition_gap_coverage.{csv,md}`.
#
# **Runtime** (measured on 2 shared cores): fast ≈ 5–10 s, paper ≈ 18–35 s.

# %%
import itertools
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils import CPAC, Recipe, metrics
from gpac_utils.calibrate import GroupWarning
from gpac_utils.paper import plotting
from gpac_utils.paper.theory import partition_gap as pg
from gpac_utils.paper.theory import populations
from gpac_utils.partition import PARTITION_ALGORITHMS, ScorePartitioner
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
n_trials = None  # learned partitions per sample size
n_cover_trials = None  # C-PAC calibrations per size and mode
eps = None  # risk tolerance
overrides = {}  # any other setting of notebooks/config/11_partition_gap.yaml

# %%
cfg = config.load("11_partition_gap", profile, n_trials=n_trials, n_cover_trials=n_cover_trials, eps=eps, **overrides)
pop, G_star = populations.PARTITION_POPULATION, populations.PARTITION_ORACLE
cfg

# %% [markdown]
# ## The reference partition and the oracle of Definition 4.4
# With the reference partition the PAC-optimal thresholds are below. A caveat the paper does
# not raise: the *oracle* partition of the definition maximises the routed share over **all**
# partitions, and that is generally not the partition that generated the data — a grid search
# over 3-interval partitions finds a more efficient one (it isolates a sliver of the risky
# group so that the rest can route more). δ below is measured against the reference partition,
# which is what clustering U can recover; "routed-share loss" is relative to it and can be negative.

# %%
u_ref = pg.interval_thresholds(pop, G_star, cfg.eps)
share_ref = pg.interval_partition_routed_share(pop, G_star, cfg.eps)
pts = np.linspace(0, 1, int(cfg.search_grid) + 1)[1:-1]
grid = np.array(list(itertools.combinations(pts, cfg.k - 1)))  # every k-interval partition on the grid
grid_shares = pg.interval_partition_routed_share(pop, grid, cfg.eps)  # all at once
best = int(np.argmax(grid_shares))  # the first of equals, in the order of the grid
b_best, share_best = tuple(grid[best]), float(grid_shares[best])
u_marg = populations.oracle_threshold(pop, cfg.eps)
pd.DataFrame([
    {"partition": "reference (1/3, 2/3)", "boundaries": "0.333, 0.667", "routed_share": share_ref,
     "thresholds": ", ".join(f"{u:.3f}" for u in u_ref)},
    {"partition": f"best on a {cfg['search_grid']}-grid", "boundaries": ", ".join(f"{b:.3f}" for b in b_best),
     "routed_share": share_best, "thresholds": ", ".join(f"{u:.3f}" for u in pg.interval_thresholds(pop, b_best, cfg.eps))},
    {"partition": "none (marginal PAC)", "boundaries": "", "routed_share": float(pop.share(u_marg)),
     "thresholds": f"{u_marg:.3f}"},
]).round(3)

# %% [markdown]
# ## δ as n grows
# For each n, `n_trials` samples of U are clustered into k groups; δ is computed exactly from the
# population (`interval_confusion` + an assignment over label permutations). Both algorithms are
# consistent here (k-means' population optimum for a uniform U is the thirds), so δ → 0.

# %%
rows = []
for ni, n in enumerate(cfg.n_grid):
    rng = np.random.default_rng([cfg.seed, ni, int(n)])
    for r in range(int(cfg.n_trials)):
        _, u, _ = pop.sample(int(n), rng)
        for algorithm in PARTITION_ALGORITHMS:
            b = ScorePartitioner(cfg.k, algorithm).fit(u).boundaries  # the learned partition
            delta = pg.partition_gap(pg.interval_confusion(pop, b, G_star))
            rows.append({"n": int(n), "rep": r, "algorithm": algorithm, "delta": delta, "boundaries": b})
gap = pd.DataFrame(rows)

# %% [markdown]
# The routed share of every learned partition with its own PAC-optimal thresholds (all
# partitions in one vectorised bisection), against that of the reference partition.

# %%
share_star = pg.interval_partition_routed_share(pop, G_star, cfg.eps)
gap["routed_share_oracle"] = share_star
gap["routed_share_learned"] = pg.interval_partition_routed_share(pop, np.stack(gap["boundaries"]), cfg.eps)
gap["routed_share_loss"] = share_star - gap["routed_share_learned"]
gap["bound_2delta"] = 2 * gap["delta"]

# %% [markdown]
# **Summarize** per (algorithm, n): the mean δ with its standard error, the mean and worst
# routed-share loss, the share of partitions whose loss stays within `2δ`, and the rate
# `δ ≈ C n^{-β}`: a least-squares line on the log scale, computed with exactly rounded sums
# (`math.fsum`) so that the fitted numbers do not depend on the BLAS (`np.polyfit` solves it by an
# SVD whose last digits do).

# %%
def fit_power_law(n, delta):
    """(C, beta) of delta = C n^-beta, fitted on the log scale to the positive deltas."""
    ok = np.asarray(delta, dtype=float) > 0
    x = [math.log(v) for v in np.asarray(n, dtype=float)[ok].tolist()]
    y = [math.log(v) for v in np.asarray(delta, dtype=float)[ok].tolist()]
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    slope = math.fsum((a - mx) * (b - my) for a, b in zip(x, y)) / math.fsum((a - mx) * (a - mx) for a in x)
    return math.exp(my - slope * mx), -slope


assert np.allclose(fit_power_law([100, 300, 1000], [2.0 * n**-0.5 for n in (100, 300, 1000)]), (2.0, 0.5))
by = gap.groupby(["algorithm", "n"])
agg = by.agg(delta_mean=("delta", "mean"), delta_se=("delta", "sem"),
             routed_share_loss_mean=("routed_share_loss", "mean"), routed_share_loss_max=("routed_share_loss", "max"))
agg = agg.reset_index()
agg["share_within_2delta"] = [float((g["routed_share_loss"] <= g["bound_2delta"] + 1e-12).mean()) for _, g in by]
rates = {m: fit_power_law(a["n"], a["delta_mean"]) for m, a in agg.groupby("algorithm")}
agg["fitted_C"] = agg["algorithm"].map(lambda m: rates[m][0])
agg["fitted_beta"] = agg["algorithm"].map(lambda m: rates[m][1])
plotting.save_table(agg, "partition_gap", floatfmt=".4f")
agg.round(4)

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
colors = {"kmeans": "#2a9d8f", "quantile": "#e76f51"}
for m, a in agg.groupby("algorithm"):
    c, beta = rates[m]
    axes[0].errorbar(a["n"], a["delta_mean"], yerr=2 * a["delta_se"], marker="o", ms=3, color=colors[m],
                     label=f"{m}: δ ≈ {c:.2f} n^-{beta:.2f}", ls="none")
    # c n^-beta is a straight line on log-log axes: its two end points draw it. (Many points on one
    # line would leave matplotlib's path simplification to decide on last floating-point bits,
    # and those differ between CPUs.)
    nn = [float(a["n"].min()), float(a["n"].max())]
    axes[0].plot(nn, [c * n**-beta for n in nn], color=colors[m], lw=1)
axes[0].set(xscale="log", yscale="log", xlabel="n (calibration items)", ylabel="mean δ", title="partition gap")
axes[0].legend(fontsize=8)
for m, g in gap.groupby("algorithm"):
    # drawn to 9 decimals: the last bits of a vectorised numpy.power differ between CPUs (AVX-512 or not)
    axes[1].scatter(g["bound_2delta"], g["routed_share_loss"].round(9), s=4, alpha=0.4, color=colors[m], label=m)
lim = gap["bound_2delta"].max()
axes[1].plot([0, lim], [0, lim], color="black", lw=0.8, label="Eff loss = 2δ")
axes[1].axhline(0, color="grey", lw=0.6)
axes[1].set(xlabel="2δ", ylabel="Eff(G*) − Eff(Ĝ)", title="Theorem 4.6: routed-share loss vs 2δ")
axes[1].legend(fontsize=8)

# %% [markdown]
# ## Coverage: sample splitting vs the joint approach
# C-PAC (`gpac_utils.calibrate.CPAC`, k-means partition, valid bound `cfg["bound"]` with `cfg["sampling"]`
# labels) on `n` calibration items; for every learned group `Ĝ_j` the exact risk
# `R(û_j | Ĝ_j)` is compared with ε. Splitting (half the items cluster, half calibrate) is
# exactly valid per learned group (Theorem 4.6, part 1); the joint approach reuses the items and carries
# an extra `c δ` term (Theorem 4.6, part 2).

# %%
recipe = Recipe(bound=cfg.bound, sampling=cfg.sampling)
rows = []
for ni, n in enumerate(cfg.cover_n):
    rng = np.random.default_rng([cfg.seed, ni, int(n), 7])
    for r in range(int(cfg.n_cover_trials)):
        loss, u, _ = pop.sample(int(n), rng)
        for mode in ("split", "joint"):
            model = CPAC(cfg.eps, cfg.alpha, recipe, partitioner=ScorePartitioner(cfg.k, cfg.partition), mode=mode,
                         seed=int(rng.integers(2**31)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GroupWarning)
                model.fit(u, loss)
            b = model.partition_.boundaries
            thr = np.array([model.thresholds_.get(f"c{j}", -np.inf) for j in range(len(b) + 1)])
            lo, hi = pg.interval_bounds(b)  # the learned groups Ĝ_j = (lo_j, hi_j] and their exact R(û_j | Ĝ_j)
            risks = [float(pop.interval_risk(t, lo_j, hi_j)) if hi_j > lo_j else 0.0 for t, lo_j, hi_j in zip(thr, lo, hi)]
            delta = pg.partition_gap(pg.interval_confusion(pop, b, G_star))
            rows += [{"n": int(n), "rep": r, "mode": mode, "group": f"c{j}", "threshold": float(t), "risk": float(risk),
                      "violated": bool(risk > cfg.eps), "delta": delta} for j, (t, risk) in enumerate(zip(thr, risks))]
cov = pd.DataFrame(rows)

# %% [markdown]
# Per (mode, n, learned group): the violation rate, with a Monte Carlo standard error floored at α.

# %%
cov_tab = cov.groupby(["mode", "n", "group"]).agg(violation_rate=("violated", "mean"), calibrations=("violated", "size"),
                                                  mean_delta=("delta", "mean"), mean_risk=("risk", "mean"))
cov_tab = cov_tab.reset_index()
cov_tab["mcse"] = metrics.mcse(cov_tab["violation_rate"].clip(lower=cfg.alpha), cov_tab["calibrations"])
plotting.save_table(cov_tab, "partition_gap_coverage", floatfmt=".4f")
cov_tab.round(4)

# %%
for mode, d in cov_tab.groupby("mode"):
    worst = d.groupby("n")["violation_rate"].max()
    axes[2].plot(worst.index, worst.values, marker="o", ms=3, label=f"{mode}: worst learned group")
axes[2].axhline(cfg.alpha, color="grey", ls="--", lw=0.8, label="α")
axes[2].set(xscale="log", xlabel="n (calibration items)", ylabel="P(R(û_j | Ĝ_j) > ε)",
            title=f"C-PAC coverage ({cfg['bound']})")
axes[2].legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, "partition_gap")
fig

# %% [markdown]
# ## Reading the results
# * δ shrinks at about the `n^{-1/2}` rate of a quantile (fitted β above): boundaries of a
#   1-D k-means or of quantile bins are estimated like quantiles.
# * The routed-share loss stays inside `2δ` in every sample here (`share_within_2delta`), and is
#   often negative because the reference partition is not the routed-share-optimal one. The
#   theorem's proof counts only misassigned items, but a learned group's PAC-optimal threshold
#   also moves when the group's composition (hence the normaliser of `R(u | Ĝ_j)`) changes.
#   With increasing loss curves and uniform scores inside groups, as here, that shift moves at
#   most about δ of mass as well, so `2δ` survives; the proof does not cover the general case.
# * Splitting keeps every learned group's violation rate at or below α (up to Monte Carlo
#   error). The joint approach is not worse here: with a valid, conservative bound and
#   misassigned items only at group edges, its `c δ` term is not visible at these sizes. The
#   theorem's joint constant `c = 2Bk` (with `p_min ≥ 1/(2k)`) would allow `ε + 6δ` — a
#   bound, not a prediction.

# %%
split = cov_tab[cov_tab["mode"] == "split"]
assert (split["violation_rate"] <= cfg.alpha + 3 * split["mcse"]).all(), split
assert agg.groupby("algorithm")["delta_mean"].apply(lambda s: s.iloc[-1] < s.iloc[0]).all()
