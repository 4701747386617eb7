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
# # 12 — Theorem 4.3: the empirical test risk of a calibrated group
#
# **Why this lesson.** Theorem 4.2 (`thm:known-grouping`) promises something nobody can observe: the
# *population* risk $R(\hat u_j \mid G_j)$ of a calibrated group is at most ε with probability
# at least $1-\alpha$. What a team sees after deployment is the error on a finite test set, and it will
# sometimes be above ε even when the calibration did its job. How far above is still consistent with
# the guarantee? Theorem 4.3 (`thm:empirical-known-grouping`) answers with a slack $t$ and a price,
# $\exp(-2 N_j t^2 / B^2)$, that falls with the number $N_j$ of test items. In this lesson we derive
# the bound from Theorem 4.2 and Hoeffding's inequality, watch it hold, and learn what it can and
# cannot tell us about a calibration.
#
# **Checks** Theorem 4.3 by simulation, on one population (the inequality is checked cell by cell; a
# simulation illustrates a theorem, it does not prove it):
# `P(R̂(f̂ | G_j) ≤ ε + t) ≥ 1 − α − exp(−2 N_j t² / B²)` for the empirical risk on `N_j` test items.
# We show the distribution of `R̂` against `ε + t` and the exceedance probability against the
# bound `α + exp(−2 N_j t²)` as `N_j` varies, for the paper's `clt` bound (with its resampling
# scheme) and two valid bounds.
#
# **Population**: the "flat" group of `gpac_utils.paper.theory.populations.AUDIT_POPULATION` (`U ~ Uniform(0, 1)`,
# loss probability 0.5, `R(u) = 0.5 u`). Given a calibrated `û`, the test terms
# `loss · 1{U ≤ û}` are i.i.d. Bernoulli(`R(û)`), so `R̂` is drawn exactly as
# `Binomial(N_j, R(û)) / N_j` — no test table is needed.
#
# **Reads** nothing. **Writes** `figures/finite_sample.{png,pdf}`, `figures/tables/finite_sample.{csv,md}`.
#
# **Runtime** (measured on 2 shared cores): fast ≈ 4 s, paper ≈ 6 s.

# %% [markdown] tags=["remove-cell"]
# ## Terms used in this notebook
#
# The glossary entries this notebook links (copied from `docs/glossary.md` by
# `workflow/scripts/glossary_cells.py`; edit them there). Below, hover over a linked term for its
# definition; a click brings you here.
#
# :::{glossary}
# risk
# : $R(u) = \mathbb{E}[\ell \cdot \mathbf{1}\{U \le u\}]$, the extra error caused by routing at
#   threshold $u$; non-decreasing in $u$. $R(u \mid G_j)$ is the risk within group $G_j$.
#
# UCB
# : Upper confidence bound on $R(u)$ at every candidate threshold, one of
#   `gpac_utils.bounds.BOUNDS`: the paper's
#   `clt` and `hoeffding` (Algorithm 1 and Appendix A), and the finite-sample valid
#   `hoeffding_bentkus`, `empirical_bernstein`, `wsr` and `clopper_pearson` (with i.i.d. labelling).
#   Assumption 4.1 asks that it cover the risk with probability $1 - \alpha$ at each threshold.
#
# recipe
# : The bundle bound + sampling + $\pi$ + rule + candidates that certifies one group's threshold
#   (`gpac_utils.recipe.Recipe`); named recipes `valid` (the default,
#   `gpac_utils.recipe.VALID`: bound `hoeffding_bentkus`, sampling `full`, rule
#   `first-crossing`), `valid-bernoulli` and `paper`. A recipe is *finite-sample valid* when its bound, computed on
#   the terms its sampling scheme yields, satisfies Assumption 4.1 at every $n$ (not only
#   asymptotically), and its selection rule (first-crossing) carries that pointwise guarantee to the
#   threshold it selects, as the named `VALID` and `VALID_BERNOULLI` do.
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
# - **derive** Theorem 4.3's bound from Theorem 4.2 (`thm:known-grouping`) and Hoeffding's
#   inequality for the test set, and say which of its two terms comes from where;
# - **compute** the test-set size that makes the Hoeffding term small at a given slack $t$;
# - **explain** why the inequality holds in every cell of this experiment even for a
#   calibration bound that is not valid, and **construct** a test size and slack at which it
#   does expose that bound.
#
# ## Prerequisites
#
# - Notebook `00_quickstart` (calibrating a threshold with a {term}`UCB`; the two
#   {term}`recipe`s) and, for the invalid `clt` setting, notebook `13_validity_audit`.
# - The terms {term}`risk`, {term}`violation rate` and {term}`MCSE`; Hoeffding's inequality
#   for a mean of i.i.d. terms in $[0, B]$.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from scipy import stats

from gpac_utils import Recipe, batch_threshold
from gpac_utils.paper import plotting
from gpac_utils.paper.theory import populations
from gpac_utils.workflow import config

plotting.apply_style(projected=True)

# %% tags=["parameters"]
profile = "paper"
calibrations = None  # independent calibrations
eps = None  # risk tolerance
overrides = {}  # any other setting of notebooks/config/12_finite_sample.yaml

# %%
cfg = config.load("12_finite_sample", profile, calibrations=calibrations, eps=eps, **overrides)
pop = populations.AUDIT_POPULATION
cfg

# %% [markdown]
# ## Where the bound comes from
# The proof (Appendix C) is two lines. The event $\{\hat R > \varepsilon + t\}$ lies inside
# $\{R(\hat u) > \varepsilon\} \cup \{\hat R - R(\hat u) > t\}$. The first has probability at most
# α by Theorem 4.2 (`thm:known-grouping`, which needs a valid bound: Assumption 4.1,
# `assump:ucb-validity`); given $\hat u$, the second is a mean of $N_j$ independent test terms in
# $[0, B]$ exceeding its expectation by $t$, at most $\exp(-2 N_j t^2 / B^2)$ by Hoeffding's
# inequality (the test set must be independent of the calibration set). A union bound adds them.

# %% [markdown]
# ## Calibrate, then test
# `violation_rate` is `P(R(û) > ε)` — the α the bound actually delivered (exact risk). The
# theorem's bound is only as good as that: with `clt` and resampling it exceeds the nominal α,
# and the finite-sample statement inherits the excess.
#
# For each (bound, scheme) setting, `calibrations` thresholds are calibrated on `n_cal` items of
# the group (first-crossing rule), all at once with `threshold`. Given a threshold `û`, the test
# terms of `N` items are i.i.d. Bernoulli(`R(û)`), so the empirical test risk is drawn exactly as
# `Binomial(N, R(û)) / N`. A cell (N, t) compares the exceedance rate `P(R̂ > ε + t)` with the
# theorem's bound `α + exp(−2 N t²)` (B = 1) up to 3 Monte Carlo standard errors.

# %%
group, T = pop.group(cfg.group), int(cfg.calibrations)
rows, draws = [], {}
for si, (bound, scheme) in enumerate(tuple(s) for s in cfg.settings):
    recipe = Recipe(bound=bound, sampling=scheme, label_prob=None if scheme == "full" else cfg.label_prob)
    rng = np.random.default_rng([cfg.seed, si])
    loss, u = group.sample((T, int(cfg.n_cal)), rng)
    u_hat = batch_threshold(u, loss, eps=cfg.eps, alpha=cfg.alpha, recipe=recipe, rng=rng)
    risk = group.risk(u_hat)
    draws[(bound, scheme)] = {"threshold": u_hat, "risk": risk}
    for N in cfg.N_grid:
        r_hat = rng.binomial(int(N), risk) / int(N)
        draws[(bound, scheme)][int(N)] = r_hat
        for t in cfg.t_grid:
            p = float(np.mean(r_hat > cfg.eps + t + 1e-12))
            b = cfg.alpha + math.exp(-2 * int(N) * t * t)
            se = math.sqrt(max(p * (1 - p), 1e-12) / T)
            rows.append(
                {
                    "bound": bound,
                    "scheme": scheme,
                    "N_test": int(N),
                    "t": float(t),
                    "exceed_rate": p,
                    "mcse": float(se),
                    "thm32_bound": min(b, 1.0),
                    "holds": p <= b + 3 * se,
                    "violation_rate": float(np.mean(risk > cfg.eps)),
                    "calibrations": T,
                }
            )
res = pd.DataFrame(rows)
plotting.save_table(res, "finite_sample", floatfmt=".4f")
res.groupby(["bound", "scheme"])[["violation_rate", "calibrations"]].first()

# %%
res.pivot_table(index=["bound", "N_test"], columns="t", values="exceed_rate").round(3)

# %% [markdown]
# ## Figure
# Left: the distribution of `R̂` for the smallest and largest `N_j` (valid bound), with
# `ε` and the calibrated risks `R(û)`. Right: exceedance `P(R̂ > ε + t)` (points, ±2 MCSE) and
# the bound `α + exp(−2 N_j t²)` (lines) for each setting, as functions of `N_j` at fixed `t`.

# %% slideshow={"slide_type": "slide"}
settings_ = [tuple(s) for s in cfg.settings]
# top: the distribution (left) and each setting's exceedance on the full 0-1 scale, with the bound's lines;
# below each setting, the exceedance zoomed to 0-0.15, where its dots sit against α
fig, grid = plt.subplots(
    2, 1 + len(settings_), figsize=(4.6 * (1 + len(settings_)), 7.0), height_ratios=[1, 0.8], sharex="col"
)
fig.delaxes(grid[1, 0])
axes, zoom = grid[0], grid[1, 1:]
valid = settings_[-1]
bins = np.linspace(0, max(0.5, cfg.eps * 2.5), 60)
axes[0].hist(draws[valid]["risk"], bins=bins, density=True, alpha=0.6, label="R(û) (population)")
for N in (min(cfg.N_grid), max(cfg.N_grid)):
    axes[0].hist(draws[valid][N], bins=bins, density=True, histtype="step", lw=1.2, label=f"R̂, N = {N}")
axes[0].axvline(cfg.eps, color="black", lw=0.8, label=f"ε = {cfg.eps:g}")
axes[0].set(xlabel="risk", ylabel="density", title=f"{plotting.bound_label(*valid)}, n = {cfg['n_cal']}")
axes[0].xaxis.set_tick_params(labelbottom=True)
axes[0].legend()
t_show = [t for t in cfg.t_grid if t > 0][:4]
for ax, low, (b, s) in zip(axes[1:], zoom, settings_):
    d = res[(res["bound"] == b) & (res["scheme"] == s)]
    for t, c in zip(t_show, ["#1f3b73", "#2a9d8f", "#e9c46a", "#e76f51"]):
        dt = d[d["t"] == t].sort_values("N_test")
        for a_, ms in ((ax, 4), (low, 7)):
            a_.errorbar(
                dt["N_test"],
                dt["exceed_rate"],
                yerr=2 * dt["mcse"],
                color=c,
                marker="o",
                ms=ms,
                ls="none",
                label=f"t = {t:g}",
            )
        ax.plot(dt["N_test"], dt["thm32_bound"], color=c, lw=1)
    ax.axhline(cfg.alpha, color="grey", ls="--", lw=1)
    low.axhline(cfg.alpha, color="grey", ls="--", lw=1, label=f"α = {cfg.alpha:g}")  # named in the zoomed row's key
    ax.tick_params(labelbottom=True)  # each row is a slide of its own: both keep their x axis
    ax.set(
        xscale="log",
        ylim=(0, 1.02),
        xlabel="$N_j$ (test items)",
        ylabel="P(R̂ > ε + t)",
        title=f"{plotting.bound_label(b, s)}: α̂ = {d['violation_rate'].iloc[0]:.3f}",
    )
    low.set(ylim=(0, 0.15), xlabel="$N_j$ (test items)", ylabel="zoomed: 0 to 0.15")
# the legend where no mark is: low on the second panel the slides show (Hoeffding–Bentkus), under the
# bound's lines and above the points
axes[2].legend(loc="lower left", bbox_to_anchor=(0, 0.08), handlelength=1.5)
# the zoomed row is a slide of its own (its first two panels): its key too, on the second (Hoeffding–Bentkus),
# whose dots stay low
zoom[1].legend(loc="upper right", ncols=2, handlelength=1.5)
fig.tight_layout()
plotting.savefig(fig, "finite_sample")

# %% [markdown]
# ## Does the inequality hold? Cell by cell
# For the valid bounds the theorem must hold in every (N_j, t) cell up to Monte Carlo error.
# The bound is a union bound and loose: for small `N_j t²` it exceeds 1, and where
# `exp(−2 N_j t²)` is small the slack `t` already lifts `ε + t` above almost every calibrated
# risk. That looseness is why even `clt` with resampling — whose actual `P(R(û) > ε)` is above
# the nominal α, see `violation_rate` — satisfies the inequality in every cell *of this grid*.

# %%
valid_rows = res[res["bound"] != "clt"]
assert valid_rows["holds"].all(), valid_rows[~valid_rows["holds"]]
clt_rows = res[res["bound"] == "clt"]
# the invalid setting: its violation rate above alpha beyond Monte Carlo error, yet the inequality holds everywhere
assert clt_rows["violation_rate"].iloc[0] > cfg.alpha + 3 * math.sqrt(cfg.alpha * (1 - cfg.alpha) / T)
assert clt_rows["holds"].all()
tight = clt_rows[clt_rows["thm32_bound"] <= cfg.alpha + 0.01]  # cells where exp(-2 N t^2) <= 0.01
clt_risk = draws[("clt", "resample")]["risk"]
above = max(float(np.mean(clt_risk > cfg.eps + t)) for t in tight["t"].unique()) if len(tight) else float("nan")
display(
    Markdown(
        f"`clt` (resample): the inequality holds in {int(clt_rows['holds'].sum())} of {len(clt_rows)} cells, although "
        f"P(R(û) > ε) = {clt_rows['violation_rate'].iloc[0]:.3f} > α = {cfg.alpha:g}. In the {len(tight)} cells where "
        f"exp(−2 N_j t²) ≤ 0.01, at most {100 * above:.1f} % of the calibrated risks exceed ε + t."
    )
)
res.groupby(["bound", "scheme"])["holds"].mean()

# %% [markdown]
# Theorem 4.3 can expose an invalid calibration bound, but only where `t` is small *and*
# `N_j t²` is large — more test items than this grid has (how many: an exercise
# below). The direct check is the one notebook 13 makes: the
# violation rate `P(R(û) > ε)` itself.

# %% [markdown]
# ```{exercise}
# :label: ex-finite-sample-size
#
# The theorem's slack term is $\exp(-2 N_j t^2)$ (loss bound $B = 1$). How many test items
# $N_j$ make it at most $0.05$ at $t = 0.05$? Compute the smallest such $N_j$ and check that one
# item fewer is not enough.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-finite-sample-size
# :class: dropdown
# ```
# Solve $\exp(-2 N t^2) \le \delta$ for $N$: $N \ge \log(1/\delta) / (2 t^2)$.

# %% tags=["solution"]
t, delta = 0.05, 0.05
n_needed = int(np.ceil(np.log(1 / delta) / (2 * t**2)))
assert np.exp(-2 * n_needed * t**2) <= delta < np.exp(-2 * (n_needed - 1) * t**2)
n_needed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# :::{exercise}
# :label: ex-finite-sample-detect
#
# *Derive, then construct.* Hold `t` fixed and let $N_j \to \infty$.
#
# 1. What do the exceedance $P(\hat R > \varepsilon + t)$ and the theorem's bound
#    $\alpha + \exp(-2 N_j t^2)$ tend to?
# 2. Using the calibrated risks of the `clt` (resample) setting (`draws[("clt", "resample")]["risk"]`),
#    choose a slack `t` and a test size $N_j$ at which the exceedance breaks the bound by more
#    than 3 Monte Carlo standard errors, and check it by drawing $\hat R$ as above. How many test
#    items does it take?
# 3. Why can no choice of $(N_j, t)$ do the same for a valid calibration bound?
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-finite-sample-detect
# :class: dropdown
# ```
# 1. Given $\hat u$, $\hat R$ is a mean of $N_j$ i.i.d. terms with mean $R(\hat u)$, so
#    $\hat R \to R(\hat u)$ and the exceedance tends to $P(R(\hat u) > \varepsilon + t)$, while the
#    bound tends to $\alpha$. As $t \downarrow 0$ that limit rises to the calibration's true
#    violation rate $P(R(\hat u) > \varepsilon)$ (on the continuous risk scale used here).
# 2. So take a small `t` at which $P(R(\hat u) > \varepsilon + t)$ is still well above α, and
#    $N_j$ so large that $\exp(-2 N_j t^2)$ is negligible: $t = 0.005$ and
#    $N_j = 200{,}000$ ($\exp(-10) \approx 5 \cdot 10^{-5}$). Far fewer items suffice: scanning $N_j$
#    upward from the grid's largest, with `t` on a fine grid and the exceedance computed exactly given
#    the calibrated risks (a binomial tail per calibration), the second cell below finds the smallest
#    $N_j$ at which the break exceeds 3 MCSE.
# 3. For a valid bound $P(R(\hat u) > \varepsilon + t) \le P(R(\hat u) > \varepsilon) \le \alpha$,
#    and the theorem's proof (a union bound of that event and Hoeffding's) holds exactly.

# %% tags=["solution"]
t_detect, n_detect = 0.005, 200_000
detect_rng = np.random.default_rng([cfg.seed, 99])
for key in (("clt", "resample"), settings_[-1]):
    r_hat = detect_rng.binomial(n_detect, draws[key]["risk"]) / n_detect
    p = float(np.mean(r_hat > cfg.eps + t_detect))
    bound = cfg.alpha + math.exp(-2 * n_detect * t_detect**2)
    se = math.sqrt(max(p * (1 - p), 1e-12) / T)
    print(f"{key}: P(R̂ > ε + t) = {p:.4f} ± {se:.4f}, bound {bound:.4f}")
    if key[0] == "clt":
        assert p > bound + 3 * se  # the invalid calibration is exposed
    else:
        assert p <= bound + 3 * se  # a valid one never is

# %% tags=["solution"]
# the smallest N_j that exposes clt (resample) by more than 3 MCSE: N_j up by 5 % steps from the grid's largest
t_fine, n_first = np.linspace(0.001, 0.05, 50), None
for n_try in np.unique(np.round(max(cfg.N_grid) * 1.05 ** np.arange(1, 100)).astype(int)):
    tail = stats.binom.sf(np.floor(n_try * (cfg.eps + t_fine) + 1e-9)[:, None], n_try, clt_risk[None, :]).mean(axis=1)
    excess = tail - (cfg.alpha + np.exp(-2 * n_try * t_fine**2)) - 3 * np.sqrt(tail * (1 - tail) / T)
    if excess.max() > 0:
        n_first, t_first = int(n_try), float(t_fine[excess.argmax()])
        break
assert n_first is not None and max(cfg.N_grid) < n_first < n_detect / 5  # beyond the grid, far below 200,000
print(
    f"the break first exceeds 3 MCSE at N_j ≈ {n_first:,} (t = {t_first:.3f}), {n_first / max(cfg.N_grid):.1f} times "
    f"the grid's largest N_j ({max(cfg.N_grid):,}), with {T:,} calibrations"
)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## Common mistakes
#
# - **Reading "the inequality held in every cell" as "the calibration is valid".** The `clt`
#   setting satisfies it in every cell above although its violation rate (displayed above) is
#   well over α: the union bound is loose where it could tell. Check `P(R(û) > ε)` directly (notebook 13).
# - **Taking `t` = 0.** At `t = 0` the bound is $\alpha + 1 \ge 1$: the theorem says nothing
#   about the test risk exceeding ε itself; the slack `t` is not optional.
# - **Expecting the exceedance to fall to α with more test items at fixed `t`.** It falls to
#   $P(R(\hat u) > \varepsilon + t)$, which for a valid bound is below α, usually far below
#   (the `hoeffding_bentkus` row), because the calibrated risks sit below ε.
# - **Using the theorem with a test set that overlaps the calibration set.** Hoeffding's step
#   needs the test losses to be independent of `û`; reusing calibration items breaks it.
# - **Forgetting the range `B`.** For losses in $[0, B]$ the exponent is $-2 N_j t^2 / B^2$; with
#   $B > 1$ the test set must be $B^2$ times larger for the same slack.


# %% [markdown]
# ## Take-away
#
# - **Theorem 4.3 is Theorem 4.2 plus Hoeffding, joined by a union bound** (its proof, Appendix C):
#   the α comes from the calibration, $\exp(-2 N_j t^2 / B^2)$ from the finite test set, which must be
#   independent of the calibration set.
# - **A test error above ε is not by itself evidence against a calibration.** Allow the slack $t$ and
#   enough test items that $\exp(-2 N_j t^2)$ is small; at $t = 0$ the theorem says nothing.
# - **The inequality is a weak audit.** It held in every cell here even for the `clt` setting, whose
#   own violation rate is above α (displayed above): the union bound is loose exactly where it could
#   tell. To check a calibration method, measure its violation rate $P(R(\hat u) > \varepsilon)$
#   directly, as notebook 13 does.

# %% [markdown]
# ## Check yourself
#
# Questions on this lesson: click an answer to see whether it is right, and why. They live in
# `notebooks/questions/12_finite_sample.json` (`gpac_utils.quiz`: click an answer to see why); the lecture slides show them too.

# %% tags=["remove-input"]
from gpac_utils.quiz import display_quiz
from gpac_utils.workflow.paths import NOTEBOOKS

display_quiz(NOTEBOOKS / "questions" / "12_finite_sample.json")
