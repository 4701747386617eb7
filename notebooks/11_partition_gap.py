# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (gpac)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 — Learned partitions: the partition gap δ and Theorem 4.6
#
# **Why this lesson.** Nobody hands us the groups. In practice C-PAC (Section 3.2 of the paper)
# learns them by clustering the uncertainty score and then calibrates one threshold per learned
# group, so two questions follow. Does each group's guarantee survive when the groups come from the
# data? And how much routing do we give up by not knowing the best partition, the oracle partition
# of Definition 4.4 (`def:oracle-optimal`)? Section 4.3 answers both through one number, the
# partition gap δ: the smallest share of inputs that the learned partition puts in another group
# than the oracle partition does, over relabellings of the groups (Eq. (5)).
# Theorem 4.6 (`thm:unknown-grouping`) states that with sample splitting every learned group keeps
# its guarantee, and the learned partition as a whole routes at most 2δ less than the oracle partition,
# and that reusing the items costs at most $c\,\delta$ in risk; the paper adds that δ shrinks like $n^{-\beta}$ under standard conditions. Here we measure δ, watch it shrink, test the coverage claims on a population
# where every risk is exact, and find the claim that fails in general, and one that is not proven.
#
# **Illustrates** Section 4.3 of the paper: the partition gap δ (Eq. (5), minimised
# over label permutations) of learned partitions — exact 1-D k-means on U and quantile bins —
# as the calibration size n grows, with a fitted rate `δ ≈ C n^{-β}`; the routed-share loss of a
# learned partition against the line `2δ`, the form of Theorem 4.6's efficiency bound but with δ and
# the loss both measured against the generating partition, not the oracle one (so an observation,
# not a check of the theorem); and the per-group coverage of C-PAC with sample splitting vs the
# joint approach.
#
# **Population** (`gpac_utils.paper.theory.populations.PARTITION_POPULATION`): the reference
# partition, the one that generated the population (`populations.PARTITION_GENERATING`), is a
# partition of the U axis — three equally likely groups `U ∈ [0, 1/3)`, `[1/3, 2/3)`,
# `[2/3, 1]` (so U ~ Uniform(0, 1) overall) with loss curves that jump at the boundaries:
# flat 30 % (low U, risky), `0.15 u` (mid U, safe), `0.6 u²` (high U, steep). Every risk
# `R(u | G)` of every interval `G` is in closed form, so δ, routed shares and violations are exact.
#
# **Reads** nothing. **Writes** `figures/partition_gap.{png,pdf}`,
# `figures/tables/partition_gap.{csv,md}`, `figures/tables/partition_gap_coverage.{csv,md}`.
#
# **Runtime** (measured on 2 shared cores): fast ≈ 5–10 s; paper ≈ 12 s in the last measured `make reproduce`
# (`benchmarks/reproduce_timings.csv`), more when the cores are busy.

# %% [markdown] tags=["remove-cell"]
# ## Terms used in this notebook
#
# The glossary entries this notebook links (copied from `docs/glossary.md` by
# `workflow/scripts/glossary_cells.py`; edit them there). Below, hover over a linked term for its
# definition; a click brings you here.
#
# :::{glossary}
# C-PAC
# : Clustered PAC for unknown groups: groups are learned by 1-D clustering of the score (exact
#   k-means or quantile bins; see {term}`partition`), then G-PAC is calibrated on them (Theorem 4.6,
#   `thm:unknown-grouping`). See {term}`mode`.
#
# mode
# : How C-PAC uses the calibration set. `split` learns the partition on a random part of it
#   (`cluster_fraction`, default one half) and calibrates on the rest: the per-group guarantee holds
#   exactly for each learned group (Theorem 4.6, part 1). `joint` uses the same items for both and
#   carries no guarantee a certificate can state: the paper claims only
#   $R(\hat u_j \mid \hat G_j) \le \varepsilon + c\,\delta$ for all $j$ with probability $1 - \alpha$ (part 2; $\delta$ the unknown
#   {term}`partition gap`, $c$ "some positive constant", which its proof in Appendix E takes as $c = 2Bk$,
#   conditioning on a partition learned from the same items). The code adds no term in `joint` mode.
#
# partition
# : C-PAC's learned groups: algorithm `kmeans` (exact 1-D k-means, `ckmeans`) or `quantile` (bins of
#   equal mass), `k` groups, named `c0` < `c1` < … by score.
#
# partition gap
# : $\delta$: the smallest share of inputs that a learned partition assigns differently from the
#   oracle partition, over relabellings of the groups (the paper's Eq. (5)).
#
# oracle partition
# : The partition into $k$ groups that maximises the routed share under per-group PAC-optimal
#   thresholds (Definition 4.4, `def:oracle-optimal`).
#
# violation rate
# : For one group $j$: the share of trials (calibration draws) in which that group's risk
#   $R(\hat u_j \mid G_j)$ — computed on the whole table, or in closed form — exceeds
#   $\varepsilon$. This is what the guarantee bounds: at most $\alpha$ for **each** group (up to its
#   {term}`MCSE`). The tables' "Violation (%)" (`violation_max_group`) is the largest per-group rate.
#   The share of trials in which *some* group is violated ("Violation any group (%)",
#   `violation_any_group`) is not bounded by $\alpha$: with $k$ valid groups it can reach about
#   $k\alpha$ (it is at most $\alpha$ only with `correction="bonferroni"`).
#
# MCSE
# : Monte Carlo standard error of an estimated rate over a finite number of trials,
#   $\sqrt{p(1-p)/T}$ at a rate $p$; a valid method's violation rate should stay within
#   $\alpha + 3\,\mathrm{MCSE}$, the MCSE taken at $p = \alpha$ (the audits' pass limit, 7.07 % at
#   $\alpha$ = 5 % and $T$ = 1 000; a table's `mcse` column is taken at its observed rate).
# :::

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Learning objectives
#
# After this notebook you can
#
# - **compute** the {term}`partition gap` δ of a learned partition from its confusion matrix with
#   the reference, minimising over relabellings, and check it against the library;
# - **explain** why δ of a 1-D k-means or quantile partition shrinks like $n^{-1/2}$;
# - **compare** the per-group coverage of C-PAC in its two {term}`mode`s (sample splitting and
#   the joint approach) against Theorem 4.6 (`thm:unknown-grouping`);
# - **diagnose** the step of Theorem 4.6's proof that fails for the efficiency bound
#   $\mathrm{Eff}(\mathcal G^*) - \mathrm{Eff}(\hat{\mathcal G}) \le 2\delta$, and construct a
#   counterexample.
#
# ## Prerequisites
#
# - Notebook `10_oracle_partition` (PAC-optimal thresholds, the {term}`oracle partition` of
#   Definition 4.4, `def:oracle-optimal`, routed share as efficiency).
# - Notebook `00_quickstart` ({term}`C-PAC`: groups learned by clustering the score).
# - The terms {term}`violation rate` and {term}`MCSE`; permutations of k labels.

# %%
import itertools
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from matplotlib import ticker

from gpac_utils import CPAC, Recipe, metrics
from gpac_utils.calibrate import GroupWarning
from gpac_utils.paper import plotting
from gpac_utils.paper.theory import partition_gap as pg
from gpac_utils.paper.theory import populations
from gpac_utils.partition import PARTITION_ALGORITHMS, ScorePartitioner
from gpac_utils.workflow import config

plotting.apply_style(projected=True)

# %% tags=["parameters"]
profile = "paper"
n_trials = None  # learned partitions per sample size
n_cover_trials = None  # C-PAC calibrations per size and mode
eps = None  # risk tolerance
overrides = {}  # any other setting of notebooks/config/11_partition_gap.yaml

# %%
cfg = config.load("11_partition_gap", profile, n_trials=n_trials, n_cover_trials=n_cover_trials, eps=eps, **overrides)
pop, G_gen = populations.PARTITION_POPULATION, populations.PARTITION_GENERATING
cfg

# %% [markdown]
# ## The reference partition and the oracle of Definition 4.4
# With the reference partition the PAC-optimal thresholds are below. A caveat the paper does
# not raise: the *oracle* partition of the definition maximises the routed share over **all**
# partitions, and that is generally not the partition that generated the data — a grid search
# over 3-interval partitions finds a more efficient one (displayed below the table). δ below is
# measured against the reference partition, which is what clustering U can recover;
# "routed-share loss" is relative to it and can be negative.
#
# **Where the two coincide.** No partition routes more than every input. The reference partition
# routes every input exactly when each of its groups can route all of its items, $R(1 \mid G_j) \le
# \varepsilon$ for every $j$: from $\varepsilon = \max_j R(1 \mid G_j)$ on it is an oracle partition (one
# of many). Below that tolerance it routes less, and the cell below checks, at every tolerance of an
# even grid below it, that some 3-interval partition of the search grid routes more: at those
# tolerances the partition that generated the data is not an oracle partition; from
# $\max_j R(1 \mid G_j)$ on it is.

# %%
u_ref = pg.interval_thresholds(pop, G_gen, cfg.eps)
share_ref = pg.interval_partition_routed_share(pop, G_gen, cfg.eps)
pts = np.linspace(0, 1, int(cfg.search_grid) + 1)[1:-1]
grid = np.array(list(itertools.combinations(pts, cfg.k - 1)))  # every k-interval partition on the grid
grid_shares = pg.interval_partition_routed_share(pop, grid, cfg.eps)  # all at once
best = int(np.argmax(grid_shares))  # the first of equals, in the order of the grid
b_best, share_best = tuple(grid[best]), float(grid_shares[best])
u_marg = populations.oracle_threshold(pop, cfg.eps)
pd.DataFrame(
    [
        {
            "partition": "reference (1/3, 2/3)",
            "boundaries": "0.333, 0.667",
            "routed_share": share_ref,
            "thresholds": ", ".join(f"{u:.3f}" for u in u_ref),
        },
        {
            "partition": f"best on a {cfg['search_grid']}-grid",
            "boundaries": ", ".join(f"{b:.3f}" for b in b_best),
            "routed_share": share_best,
            "thresholds": ", ".join(f"{u:.3f}" for u in pg.interval_thresholds(pop, b_best, cfg.eps)),
        },
        {
            "partition": "none (marginal PAC)",
            "boundaries": "",
            "routed_share": float(pop.share(u_marg)),
            "thresholds": f"{u_marg:.3f}",
        },
    ]
).round(3)

# %%
assert share_best > share_ref  # the reference partition is not the oracle
inside_risky = sum(b < G_gen[0] for b in b_best)
assert inside_risky >= 1
display(
    Markdown(
        f"The best of the grid's {len(grid)} partitions routes {share_best:.3f} against the reference's {share_ref:.3f}. "
        f"Its boundaries are {', '.join(f'{b:.3f}' for b in b_best)}; {inside_risky} of them lie inside the risky "
        f"low-U group (U < {G_gen[0]:.3f}): that group is cut up, and the rest of it shares a group with the safe mid-U inputs."
    )
)
# where the reference partition is an oracle partition: from the tolerance at which it routes everything
lo_gen, hi_gen = np.array([0.0, *G_gen]), np.array([*G_gen, 1.0])
eps_all = float(pop.interval_risk(hi_gen, lo_gen, hi_gen).max())  # max_j R(1 | G_j)
assert np.isclose(pg.interval_partition_routed_share(pop, G_gen, eps_all), 1.0)
eps_below = np.linspace(0.0, eps_all, 41)[1:-1]
gain = [
    pg.interval_partition_routed_share(pop, grid, e).max() - pg.interval_partition_routed_share(pop, G_gen, e)
    for e in eps_below
]
assert min(gain) > 0  # beaten at every tolerance below eps_all
display(
    Markdown(
        f"The reference partition routes everything, so it is an oracle partition, for ε ≥ max_j R(1 | G_j) = "
        f"{eps_all:.3f}; at each of the {len(eps_below)} tolerances from {eps_below[0]:.3f} to {eps_below[-1]:.3f} "
        f"a partition of the search grid routes more (by at least {min(gain):.3f})."
    )
)

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
            delta = pg.partition_gap(pg.interval_confusion(pop, b, G_gen))
            rows.append({"n": int(n), "rep": r, "algorithm": algorithm, "delta": delta, "boundaries": b})
gap = pd.DataFrame(rows)

# %% [markdown]
# The routed share of every learned partition with its own PAC-optimal thresholds (all
# partitions in one vectorised bisection), against that of the reference partition.

# %%
share_gen = pg.interval_partition_routed_share(pop, G_gen, cfg.eps)
gap["routed_share_generating"] = share_gen
gap["routed_share_learned"] = pg.interval_partition_routed_share(pop, np.stack(gap["boundaries"]), cfg.eps)
gap["routed_share_loss"] = share_gen - gap["routed_share_learned"]
gap["bound_2delta"] = 2 * gap["delta"]

# %% [markdown]
# **Summarize** per (algorithm, n): the mean δ with its standard error, the mean and worst
# routed-share loss, the share of partitions whose loss stays within `2δ`, and the rate
# `δ ≈ C n^{-β}`: a least-squares line on the log scale.

# %% [markdown] tags=["maintainer"]
# The line is fitted with exactly rounded sums (`math.fsum`) so that the fitted numbers do not
# depend on the BLAS (`np.polyfit` solves it by an SVD whose last digits do).


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
agg = by.agg(
    delta_mean=("delta", "mean"),
    delta_se=("delta", "sem"),
    routed_share_loss_mean=("routed_share_loss", "mean"),
    routed_share_loss_max=("routed_share_loss", "max"),
)
agg = agg.reset_index()
agg["share_within_2delta"] = [float((g["routed_share_loss"] <= g["bound_2delta"] + 1e-12).mean()) for _, g in by]
rates = {m: fit_power_law(a["n"], a["delta_mean"]) for m, a in agg.groupby("algorithm")}
agg["fitted_C"] = agg["algorithm"].map(lambda m: rates[m][0])
agg["fitted_beta"] = agg["algorithm"].map(lambda m: rates[m][1])
plotting.save_table(agg, "partition_gap", floatfmt=".4f")
agg.round(4)

# %%
fig, axes = plt.subplots(1, 3, figsize=(17, 3.6))
colors = {"kmeans": "#2a9d8f", "quantile": "#e76f51"}
for m, a in agg.groupby("algorithm"):
    c, beta = rates[m]
    axes[0].errorbar(
        a["n"],
        a["delta_mean"],
        yerr=2 * a["delta_se"],
        marker="o",
        ms=4,
        color=colors[m],
        label=rf"{m}: $\delta \approx {c:.2f}\, n^{{-{beta:.2f}}}$",
        ls="none",
    )
    # c n^-beta is a straight line on log-log axes: its two end points draw it. (Many points on one
    # line would leave matplotlib's path simplification to decide on last floating-point bits,
    # and those differ between CPUs.)
    nn = [float(a["n"].min()), float(a["n"].max())]
    axes[0].plot(nn, [c * n**-beta for n in nn], color=colors[m], lw=1)
axes[0].set(
    xscale="log",
    yscale="log",
    xlabel="n (calibration items)",
    ylabel="mean partition gap δ",
    title="Partition gap δ shrinks with n",
)
axes[0].set_yticks([0.01, 0.02, 0.04, 0.08], ["0.01", "0.02", "0.04", "0.08"])
axes[0].yaxis.set_minor_formatter(ticker.NullFormatter())
axes[0].legend(loc="upper right")
for m, g in gap.groupby("algorithm"):
    # drawn to 9 decimals: the last bits of a vectorised numpy.power differ between CPUs (AVX-512 or not)
    axes[1].scatter(g["bound_2delta"], g["routed_share_loss"].round(9), s=4, alpha=0.4, color=colors[m], label=m)
lim = gap["bound_2delta"].max()
# the line loss = 2δ: the form of Theorem 4.6's efficiency bound, not the bound itself (δ and the loss
# are measured against the generating partition here, the theorem's against the oracle partition G*)
axes[1].plot([0, lim], [0, lim], color="black", lw=0.8, label="loss = 2δ")
axes[1].axhline(0, color="grey", lw=0.6)
axes[1].set(
    xlabel="2δ (vs generating partition)",
    ylabel="routed-share loss vs generating",
    title="Loss vs 2δ: an observation, not Thm 4.6",
)
axes[1].legend(loc="upper left", markerscale=3)

# %% [markdown]
# ## Coverage: sample splitting vs the joint approach
# C-PAC (`gpac_utils.calibrate.CPAC`, k-means partition, valid bound `cfg["bound"]` with `cfg["sampling"]`
# labels) on `n` calibration items; for every learned group `Ĝ_j` the exact risk
# `R(û_j | Ĝ_j)` is compared with ε. Splitting (half the items cluster, half calibrate) is
# exactly valid per learned group (Theorem 4.6, part 1); for the joint approach, which reuses the items, the
# paper claims only ε + cδ (Theorem 4.6, part 2), with c a constant and δ unknown, and its proof (Appendix E)
# conditions on a partition learned from the same items: no guarantee a certificate can state.

# %%
recipe = Recipe(bound=cfg.bound, sampling=cfg.sampling)
rows = []
for ni, n in enumerate(cfg.cover_n):
    rng = np.random.default_rng([cfg.seed, ni, int(n), 7])
    for r in range(int(cfg.n_cover_trials)):
        loss, u, _ = pop.sample(int(n), rng)
        for mode in ("split", "joint"):
            model = CPAC(
                cfg.eps,
                cfg.alpha,
                recipe,
                partitioner=ScorePartitioner(cfg.k, cfg.partition),
                mode=mode,
                seed=int(rng.integers(2**31)),
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GroupWarning)
                model.fit(u, loss)
            b = model.partition_.boundaries
            thr = np.array([model.thresholds_.get(f"c{j}", -np.inf) for j in range(len(b) + 1)])
            lo, hi = pg.interval_bounds(b)  # the learned groups Ĝ_j = (lo_j, hi_j] and their exact R(û_j | Ĝ_j)
            risks = [
                float(pop.interval_risk(t, lo_j, hi_j)) if hi_j > lo_j else 0.0 for t, lo_j, hi_j in zip(thr, lo, hi)
            ]
            delta = pg.partition_gap(pg.interval_confusion(pop, b, G_gen))
            rows += [
                {
                    "n": int(n),
                    "rep": r,
                    "mode": mode,
                    "group": f"c{j}",
                    "threshold": float(t),
                    "risk": float(risk),
                    "violated": bool(risk > cfg.eps),
                    "delta": delta,
                }
                for j, (t, risk) in enumerate(zip(thr, risks))
            ]
cov = pd.DataFrame(rows)

# %% [markdown]
# Per (mode, n, learned group): the violation rate, with a Monte Carlo standard error floored at α.

# %%
cov_tab = cov.groupby(["mode", "n", "group"]).agg(
    violation_rate=("violated", "mean"),
    calibrations=("violated", "size"),
    mean_delta=("delta", "mean"),
    mean_risk=("risk", "mean"),
)
cov_tab = cov_tab.reset_index()
cov_tab["mcse"] = metrics.mcse(cov_tab["violation_rate"].clip(lower=cfg.alpha), cov_tab["calibrations"])
plotting.save_table(cov_tab, "partition_gap_coverage", floatfmt=".4f")
cov_tab.round(4)

# %% slideshow={"slide_type": "slide"}
for mode, d in cov_tab.groupby("mode"):
    worst = d.groupby("n")["violation_rate"].max()
    axes[2].plot(worst.index, worst.values, marker="o", ms=4, label=f"{mode}: worst learned group")
axes[2].axhline(cfg.alpha, color="grey", ls="--", lw=0.8, label="α (target)")
axes[2].set(
    xscale="log",
    xlabel="n (calibration items)",
    ylabel=r"violation rate $P(R(\hat u_j \mid \hat G_j) > \varepsilon)$",
    ylim=(0, 2 * cfg.alpha),
    title="C-PAC: worst learned group",
)
axes[2].set_xticks(cfg.cover_n, [f"{n:g}" for n in cfg.cover_n])
axes[2].xaxis.set_minor_formatter(ticker.NullFormatter())
axes[2].legend(loc="upper right")
fig.tight_layout()
plotting.savefig(fig, "partition_gap")
fig

# %% [markdown]
# ## Reading the results

# %%
split = cov_tab[cov_tab["mode"] == "split"]
assert (split["violation_rate"] <= cfg.alpha + 3 * split["mcse"]).all(), split
assert agg.groupby("algorithm")["delta_mean"].apply(lambda s: s.iloc[-1] < s.iloc[0]).all()
assert all(abs(beta - 0.5) < 0.1 for _, beta in rates.values())  # about the n^(-1/2) rate of a quantile
worst_mode = cov_tab.groupby("mode")["violation_rate"].max()
display(
    Markdown(
        "Fitted rates: "
        + ", ".join(f"{m} β = {beta:.2f}" for m, (_, beta) in rates.items())
        + f". Share of learned partitions whose routed-share loss stays within 2δ: {agg['share_within_2delta'].min():.3f}"
        + " (the smallest over algorithms and n). Worst learned group's violation rate: "
        + ", ".join(f"{mode} {rate:.3f}" for mode, rate in worst_mode.items())
        + f" (α = {cfg.alpha:g})."
    )
)

# %% [markdown]
# * δ shrinks at about the `n^{-1/2}` rate of a quantile (the fitted β above): boundaries of a
#   1-D k-means or of quantile bins are estimated like quantiles.
# * The routed-share loss against the reference partition stays within `2δ` in the share of
#   learned partitions displayed above, and is often negative because the reference partition
#   is not the routed-share-optimal one. That is an observation about this population, not a
#   consequence of Theorem 4.6: the theorem's efficiency bound
#   $\mathrm{Eff}(\mathcal G^*) - \mathrm{Eff}(\hat{\mathcal G}) \le 2\delta$ (part 1) does not hold in
#   general. Its proof (Appendix E) bounds the difference by the misassigned inputs alone, as if an
#   input that both partitions put in the same group kept its threshold
#   ($\hat u^*_{\hat g(x)} = \hat u^*_{g^*(x)}$). But a learned group's PAC-optimal threshold is
#   computed on the learned group, whose risk curve $R(u \mid \hat G_j)$ changes with the
#   misassigned inputs: a small δ can move a whole group's threshold. An exercise
#   below builds a population in which the loss is 1/2 for
#   every δ > 0.
# * Splitting keeps every learned group's violation rate at or below α (up to Monte Carlo
#   error; asserted above). The joint approach is not visibly worse here: with a valid,
#   conservative bound and misassigned items only at group edges, its `c δ` term does not show
#   at these sizes. The paper's proof sets `c = 2Bk` (with `p_min ≥ 1/(2k)`, which it says holds only
#   with high probability, not counted in α), which would allow `ε + 6δ` — a claim, not a prediction.

# %% [markdown]
# :::{exercise}
# :label: ex-partition-gap-by-hand
#
# A clustering of U returned the boundaries $(0.30, 0.70)$; the reference partition is the
# thirds. With $U \sim \mathrm{Uniform}(0, 1)$:
#
# 1. Write down the $3 \times 3$ confusion matrix $C_{ij} = P(\hat g = i, g^* = j)$.
# 2. Compute $\delta = \min_\sigma P(\hat g \ne \sigma(g^*))$ by looping over the six
#    permutations, and check it against `pg.partition_gap(pg.interval_confusion(pop, b, G_gen))`.
# 3. The same partition with its labels listed in reverse order: what is $P(\hat g \ne g^*)$
#    *without* the minimum over permutations, and what is δ?
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-partition-gap-by-hand
# :class: dropdown
# ```
# The overlaps of $(-\infty, 0.3], (0.3, 0.7], (0.7, \infty)$ with the thirds give
# $C = \begin{pmatrix} 0.3 & 0 & 0 \\ 0.0\overline3 & 0.\overline3 & 0.0\overline3 \\ 0 & 0 & 0.3 \end{pmatrix}$;
# the identity matches $0.3 + 0.\overline3 + 0.3$, so $\delta = 1/15 \approx 0.067$: the two slivers
# $(0.3, 1/3]$ and $(2/3, 0.7]$. Reversing the labels reverses the rows: without the minimum the
# "mismatch" is 1 minus the middle entry, $2/3$, for the same partition; δ is unchanged.

# %% tags=["solution"]
b_hand = (0.30, 0.70)
edges_learned, edges_ref = [0.0, *b_hand, 1.0], [0.0, *G_gen, 1.0]
C_hand = np.array(
    [
        [max(0.0, min(edges_learned[i + 1], edges_ref[j + 1]) - max(edges_learned[i], edges_ref[j])) for j in range(3)]
        for i in range(3)
    ]
)
delta_hand = min(1 - sum(C_hand[i, sigma[i]] for i in range(3)) for sigma in itertools.permutations(range(3)))
assert np.isclose(delta_hand, 1 / 15)
assert np.isclose(delta_hand, pg.partition_gap(pg.interval_confusion(pop, b_hand, G_gen)))
reversed_rows = C_hand[::-1]
assert np.isclose(pg.partition_gap(reversed_rows), delta_hand) and np.isclose(
    1 - np.trace(reversed_rows), 1 - C_hand[1, 1]
)
round(delta_hand, 4), round(1 - np.trace(reversed_rows), 4)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# :::{exercise}
# :label: ex-partition-gap-counterexample
#
# *Construct a counterexample to the efficiency bound of Theorem 4.6.* Take binary losses,
# $P(\ell = 1) = q = 1/2$, scores $U \sim \mathrm{Uniform}(0, 0.1)$ for the lossy inputs and
# $U \sim \mathrm{Uniform}(0.1, 1)$ for the others, ε = 0.1 and $k = 2$.
#
# 1. Find the largest routed share any partition can reach. (Hint: the routed lossy mass of
#    group $j$ is $p_j R(\hat u_j \mid G_j) \le p_j \varepsilon$.)
# 2. Find a partition that attains it, $G_1^*$ = all loss-free inputs plus a lossy mass $a$ (which
#    $a$?) and $G_2^*$ = the remaining lossy inputs: an oracle partition.
# 3. Move a lossy mass δ from $G_2^*$ to $G_1^*$ and compute the routed share of the learned
#    partition. Compare the loss with 2δ, and name the step of the proof that fails.
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-partition-gap-counterexample
# :class: dropdown
# ```
# 1. The routed mass is (routed loss-free mass) + $\sum_j p_j R(\hat u_j \mid G_j) \le (1-q) + \varepsilon$.
# 2. In $G_1^*$ the risk of routing everything is $a / (1 - q + a) = \varepsilon$, i.e.
#    $a = \varepsilon(1-q)/(1-\varepsilon) = 1/18$: the whole group is
#    routed. $G_2^*$ (lossy only) routes the share ε of its mass. Total $(1-q) + a + \varepsilon(q - a)
#    = (1-q) + \varepsilon$.
# 3. With the extra mass δ, $\hat G_1$'s risk at $u = 0.1$ is $(a + \delta)/(1 - q + a + \delta) > \varepsilon$
#    and it stays there for larger $u$ (the loss-free inputs add no loss but come later), so the
#    threshold falls below 0.1 and routes only lossy inputs, the share ε of the group. Both learned
#    groups route the share ε: $\mathrm{Eff}(\hat{\mathcal G}) = \varepsilon$, a loss of $1 - q = 1/2$ for
#    *any* δ > 0. The failing step: "the efficiency difference is at most 1 for misclassified inputs
#    and 0 for correctly classified inputs" — the loss-free inputs of $\hat G_1$ are correctly
#    classified, yet they lost their threshold.


# %% tags=["solution"]
def routed(loss_free, lossy, eps):
    """Routed mass of one group: loss-free mass with U in (0.1, 1], lossy mass with U in (0, 0.1)."""
    mass = loss_free + lossy
    return mass if lossy <= eps * mass + 1e-12 else eps * mass  # all, or the lossy share eps (U below 0.1)


q, eps_x, delta_x = 0.5, 0.1, 0.01
a = eps_x * (1 - q) / (1 - eps_x)
eff_oracle = routed(1 - q, a, eps_x) + routed(0.0, q - a, eps_x)
eff_learned = routed(1 - q, a + delta_x, eps_x) + routed(0.0, q - a - delta_x, eps_x)
C_x = np.array([[1 - q + a, delta_x], [0.0, q - a - delta_x]])  # P(learned i, oracle j)
assert np.isclose(pg.partition_gap(C_x), delta_x)
assert np.isclose(eff_oracle, (1 - q) + eps_x)  # the upper bound: an oracle partition
assert np.isclose(eff_learned, eps_x) and eff_oracle - eff_learned > 2 * delta_x
round(eff_oracle, 4), round(eff_learned, 4), 2 * delta_x

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Common mistakes
#
# - **Taking the partition that generated the data for the oracle partition.** Definition 4.4
#   maximises over all partitions; here a grid search beats the reference partition (the
#   routed shares displayed under the first table).
# - **Forgetting the permutation in δ.** Cluster labels are arbitrary: the same partition with
#   its labels reversed mismatches most inputs label by label (exercise
#   {ref}`ex-partition-gap-by-hand`); δ minimises over relabellings.
# - **Reading a small δ as coverage.** Sample splitting is valid because the partition is
#   independent of the calibration items, whatever δ is; the joint approach reuses them, and the
#   paper claims only $\varepsilon + c\delta$ for it (Theorem 4.6, part 2), with $c$ a constant and δ
#   unknown, and its proof conditions on a partition learned from the same items.
# - **Reading $\mathrm{Eff}(\mathcal G^*) - \mathrm{Eff}(\hat{\mathcal G}) \le 2\delta$ as a theorem.**
#   It held in every learned partition here, but it fails in general (exercise
#   {ref}`ex-partition-gap-counterexample`): a few misassigned lossy inputs can cost a group its
#   whole threshold.


# %% [markdown]
# ## Take-away
#
# - **Learned groups keep the guarantee when the partition is learned on other items.** With
#   sample splitting the partition is fixed before the calibration items are looked at, so each
#   learned group gets the per-group guarantee of Theorem 4.6, part 1 (Eq. (6)), with a valid bound
#   read by first-crossing (Hoeffding–Bentkus here), whatever δ is; the
#   coverage panel shows every learned group's violation rate at or below α up to Monte Carlo error
#   (asserted under "Reading the results").
# - **δ is a distance between partitions, up to relabelling.** Here, where the reference partition
#   is the population target of both clusterings (uniform scores, equal-mass thirds), δ shrinks like
#   the error of a quantile, $n^{-1/2}$ (the fitted β displayed above). That is consistent with the
#   paper's $\delta = O(n^{-\beta})$ (Section 4.3), which assumes the learned partition converges to
#   the oracle. The paper measures it against the
#   oracle partition of Definition 4.4; this lesson measures it against the partition that generated
#   the data, which is computable and, at this tolerance, not the oracle.
# - **Read Theorem 4.6's other two claims as claims.** The efficiency bound
#   $\mathrm{Eff}(\mathcal G^*) - \mathrm{Eff}(\hat{\mathcal G}) \le 2\delta$ is not what the figure
#   checks (its loss and δ are against the generating partition, not the oracle $\mathcal G^*$) and
#   fails in general (exercise {ref}`ex-partition-gap-counterexample`); the joint approach's
#   $\varepsilon + c\,\delta$ (part 2, Eq. (7)) has an unknown $c$ and an unknown δ: no certificate
#   can state it. When a guarantee is needed, split.

# %% [markdown]
# ## Check yourself
#
# Questions on this lesson: click an answer to see whether it is right, and why. They live in
# `notebooks/questions/11_partition_gap.json` (`gpac_utils.quiz`: click an answer to see why); the lecture slides show them too.

# %% tags=["remove-input"]
from gpac_utils.quiz import display_quiz
from gpac_utils.workflow.paths import NOTEBOOKS

display_quiz(NOTEBOOKS / "questions" / "11_partition_gap.json")
