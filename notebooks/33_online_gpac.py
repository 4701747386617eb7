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

# %% [markdown] slideshow={"slide_type": "slide"}
# # 33 — Online G-PAC: free labels, a labelling schedule and a drift alarm, valid at every moment
#
# **Not in the paper** (it calibrates once, offline: Theorem 4.2 (`thm:known-grouping`)
# is a statement about one calibration set). A deployed router sees a *stream*. It should route
# more to the cheap model as evidence arrives, **without ever losing the per-group guarantee**,
# and notice when a group's risk rises. `gpac_utils.online.OnlineGPAC` does this with one betting
# wealth process per group and candidate threshold (B-PAC's construction, made per group), labels
# it gets for free from thinking calls, and a per-group e-detector that re-certifies after a drift.
#
# **Learning objectives.** After this lesson you can
# 1. explain why an inverse-propensity term with a propensity that depends on the item's own
#    score is still unbiased, and what the betting wealth needs to stay a test supermartingale;
# 2. write the wealth update of one group in about 15 lines and check it against the library;
# 3. compare online G-PAC with B-PAC and offline G-PAC *at equal paid labels*;
# 4. state what the drift alarm guarantees (false alarms on a stationary stream) and what it
#    does not (the detection delay).
#
# **Prerequisites.** The G-PAC recipe of `00_quickstart` (risk $R_j(u)$, threshold, upper
# confidence bound, Theorem 4.2 (`thm:known-grouping`)); the {term}`violation rate` of
# `13_validity_audit`; expectations conditional on the past and Markov's inequality.
#
# **Reads** the real MATH Level-5 table (`data/real/mathl5_zeroeval.csv`,
# via `realdata.read_raw`; o1-mini = thinking, gpt-4o-mini = non-thinking, groups = the 7 subjects,
# score = the share of an 8-model panel that disagrees with gpt-4o-mini, loss = 1{o1-mini right and
# gpt-4o-mini wrong}; see its data card `data/real/README.md`) and the B-PAC rule of `gpac_utils.online_streams`. Each
# stream draws items i.i.d. (seeded) from the table, so the table *is* the population and every
# group's risk $R_j(u)$ is known exactly.
#
# **Writes** `figures/online_gpac_stream.{png,pdf}`, `figures/online_gpac_drift.{png,pdf}`,
# `figures/tables/online_gpac_savings.{csv,md}`, `figures/tables/online_gpac_groups.{csv,md}`.
#
# **Runtime** (measured on 2 shared cores): fast profile ≈ 7 s of CPU time (more wall time when the cores
# are busy); paper profile (10 streams of
# 20 000 items, 10 drift episodes of 40 000) ≈ 40 s in the last measured `make reproduce`
# (`benchmarks/reproduce_timings.csv`).

# %% [markdown] tags=["remove-cell"]
# ## Terms used in this notebook
#
# The glossary entries this notebook links (copied from `docs/glossary.md` by
# `workflow/scripts/glossary_cells.py`; edit them there). Below, hover over a linked term for its
# definition; a click brings you here.
#
# :::{glossary}
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

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from gpac_utils import data
from gpac_utils import online_streams as streams  # B-PAC's rule, the many-stream runners
from gpac_utils.online import OnlineGPAC, OnlineSettings, grid_points
from gpac_utils.paper import plotting, realdata
from gpac_utils.workflow import config

plotting.apply_style(projected=True)
pd.set_option("display.width", 200)

# %% tags=["parameters"]
profile = "paper"
stream_length = None  # items per stream
n_trials = None  # seeded streams for the comparison table
label_prob = None
eps = None
overrides = {}

# %%
cfg = config.load(
    "33_online_gpac",
    profile,
    stream_length=stream_length,
    n_trials=n_trials,
    label_prob=label_prob,
    eps=eps,
    **overrides,
)
cfg

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Decisions before the loss, and why the terms stay unbiased
#
# Per arriving item of group $j$ the router decides, from the past only: the route (think iff
# $U_i > \hat u_{j,t}$, the threshold in use) and whether the loss will be *observed*, with a
# propensity $p_i$ known at that moment:
#
# * an item sent to the **thinking** model is observed with $p_i = 1$: the cheap model runs
#   beside it (no extra thinking call). The label is *free* only for a loss computed from the two
#   answers (graded against the thinking answer: the disagreement loss, an upper bound on this
#   notebook's $1\{\text{thinking right} \wedge \text{cheap wrong}\}$, which needs a gold answer
#   per observed item; `docs/choosing-risk.md`);
# * an item sent to the **non-thinking** model is observed with $p_i=\pi_t$ (`label_prob`): a
#   *paid* label, one extra thinking call. $\pi_t$ may follow a schedule fixed in advance or
#   depending on the past only (a warm-up at a higher rate, a label budget).
#
# The term of grid point $u$ is $X_i(u)=\xi_i\,\ell_i\,1\{U_i\le u\}/p_i$ ($\xi_i$: observed). Here
# $p_i$ depends on the item's own score, but only through $U_i$ and the past: with
# $P(\xi_i=1\mid \mathcal F_{i-1},U_i,\ell_i)=p_i>0$,
# $$E[X_i(u)\mid\mathcal F_{i-1}] = E\bigl[E[\xi_i\mid \mathcal F_{i-1},U_i,\ell_i]\,
# \ell_i 1\{U_i\le u\}/p_i \bigm| \mathcal F_{i-1}\bigr]=E[\ell_i1\{U_i\le u\}]=R_j(u)$$
# for every $u$, for i.i.d. items. The largest value of a term at step $i$ is
# `term_range` $=B/\pi_t$ once the group has a threshold (an item at or below it may be a paid
# label), but only $B$ while it always thinks (every item is then observed in full).
#
# **The wealth.** A gambler bets against $H_0:R_j(u)>\varepsilon$ with
# $K_n(u)=\prod_{i\le n}\bigl(1+\lambda_i(u)(\varepsilon-X_i(u))\bigr)$, the bet $\lambda_i$
# chosen from earlier items only and capped at $0.9/(\text{term\_range}_i-\varepsilon)$ *of that
# step*: every factor is $\ge 0.1$ and under $H_0$ has conditional mean
# $1+\lambda_i(\varepsilon-R_j(u))\le1$, so $K(u)$ is a nonnegative supermartingale from 1 and by
# **Ville's inequality** $P(\exists n:K_n(u)\ge1/\alpha)\le\alpha$. A grid point is certified once
# its wealth reaches $1/\alpha$; the threshold in use is the largest grid point whose whole grid
# prefix is certified. If ever $R_j(\hat u_{j,t})>\varepsilon$, the first unsafe grid point $u^+$
# (the smallest with $R_j(u^+)>\varepsilon$) was certified — a Ville event of one process — so
# $$P\bigl(\exists t:\ R_j(\hat u_{j,t})>\varepsilon\bigr)\le\alpha\quad\text{for every group }j.$$
# **It needs** i.i.d. items, propensities known when the item is decided and never 0 for a term
# that is used, the loss of every observed item — a thinking-routed one included — in full, and a
# grid fixed before the stream (here the score's support $\{0,\frac18,\dots,1\}$).

# %% [markdown] tags=["maintainer"]
# `tests/test_online.py` checks it per group on 300 seeded streams in four labelling modes.

# %%
raw = realdata.read_raw(cfg.real_path)
table = data.validate(data.apply_mapping(raw, dict(cfg.real_columns)), score_cols=[cfg.score], require_group=True)
U, L, G = table[cfg.score].to_numpy(), table["loss"].to_numpy(float), table["group"].to_numpy()
names = sorted(set(G))
codes = np.array([names.index(g) for g in G])
grid = grid_points(cfg.grid)
# the population risk R_j(u) of every group at every grid point, and of all traffic (last row)
risk_table = np.array(
    [
        [np.mean(L[rows] * (U[rows] <= u)) for u in grid]
        for rows in [codes == j for j in range(len(names))] + [np.ones(len(U), bool)]
    ]
)


def risk(thresholds, rows=None):
    """R_j(threshold) for thresholds (..., groups) (rows: which risk-table row per column); 0 at -inf."""
    thr = np.asarray(thresholds, float)
    rows = np.arange(thr.shape[-1]) if rows is None else rows
    at = np.clip(np.searchsorted(grid, np.where(np.isfinite(thr), thr, 0), side="right") - 1, 0, grid.size - 1)
    return np.where(np.isfinite(thr), risk_table[rows, at], 0.0)


oracle = {
    g: max([u for k, u in enumerate(grid) if risk_table[j, k] <= cfg.eps], default=-np.inf) for j, g in enumerate(names)
}
pd.DataFrame(
    {
        "items": np.bincount(codes),
        "best valid threshold": list(oracle.values()),
        "risk there": [risk([oracle[g]], [j])[0].round(4) for j, g in enumerate(names)],
    },
    index=names,
)

# %% [markdown]
# ## 2. The wealth update by hand, checked against the library
#
# One group, item by item, free labels, the `mixture` bet (the average of the wealth of B-PAC's
# aGRAPA bet $\sum_{s<i}D_s/(\sum_{s<i}D_s^2+B^2)$, $D_s=\varepsilon-X_s$, and the wealth of a
# constant bet half the cap). The uniforms decide the paid labels as the library draws them.


# %%
def online_pac_by_hand(u, loss, uniforms, label_prob, grid, eps, alpha):
    s1, s2, log_grapa, log_const = (np.zeros(grid.size) for _ in range(4))
    certified, used = np.zeros(grid.size, bool), []
    for u_i, loss_i, v_i in zip(u, loss, uniforms):
        k = int(np.logical_and.accumulate(certified).sum())  # certified grid prefix
        thr = grid[k - 1] if k else -np.inf
        p = label_prob if u_i <= thr else 1.0  # paid label with prob. pi; a thinking-routed item is free
        x = (v_i < p) * loss_i / p * (u_i <= grid)  # the inverse-propensity term at every grid point
        cap = 0.9 / ((1 / label_prob if thr > -np.inf else 1.0) - eps)  # this step's largest range
        d = eps - x
        lam = np.clip(s1 / (s2 + 1.0), 0.0, cap)  # predictable: sums over earlier items only
        log_grapa, log_const = log_grapa + np.log1p(lam * d), log_const + np.log1p(0.5 * cap * d)
        s1, s2 = s1 + d, s2 + d * d
        certified |= np.logaddexp(log_grapa, log_const) - np.log(2) >= np.log(1 / alpha)
        used.append(thr)
    return np.array(used)


rows = np.random.default_rng([cfg.seed, 7]).choice(np.flatnonzero(G == cfg.drift_group), cfg.by_hand_items)
uniforms = np.random.default_rng(cfg.seed).random(rows.size)
mine = online_pac_by_hand(U[rows], L[rows], uniforms, cfg.label_prob, grid, cfg.eps, cfg.alpha)
router, library = OnlineGPAC(cfg.eps, cfg.alpha, label_prob=cfg.label_prob, grid=grid, seed=cfg.seed), []
for i in rows:  # the library, one item per block
    library.append(router.thresholds_.get("g", -np.inf))
    router.fit(U[i : i + 1], L[i : i + 1], ["g"])
assert np.array_equal(mine, library) and np.isfinite(mine[-1]), (mine[-1], library[-1])
display(Markdown(f"By hand and library agree on all {rows.size} thresholds in use; the last is {mine[-1]:.3f}."))

# %% [markdown]
# ## 3. Free labels vs the fixed rate: thresholds over time per group
#
# The fixed-rate mode (`labelling="fixed-rate"`) labels every item with probability $\pi$ whatever its
# route — what a caller without the cheap answer on thinking-routed items can do. With free
# labels, a group that still always thinks learns from *every* item with range $B$ instead of
# $B/\pi$, and keeps learning from its thinking-routed items afterwards.

# %% slideshow={"slide_type": "slide"}
rows = np.random.default_rng([cfg.seed, 0]).integers(0, len(U), size=(cfg.n_trials, cfg.stream_length))
u, loss, g = U[rows], L[rows], codes[rows]
settings = OnlineSettings(eps=cfg.eps, alpha=cfg.alpha, label_prob=cfg.label_prob, grid=tuple(grid), seed=cfg.seed)
free = streams.run_online(u, loss, g, len(names), settings, every=cfg.every)
fixed = streams.run_online(u, loss, g, len(names), settings.replace(labelling="fixed-rate"), every=cfg.every)
times = np.arange(free["thresholds"].shape[1]) * cfg.every
# one panel per subject (two rows of four, the last holds the legend): free labels vs the fixed rate
fig, axes = plt.subplots(2, 4, figsize=(8.6, 7.8), sharex=True, sharey=True)
for ax, (j, name) in zip(axes.flat, enumerate(names)):
    for res, label, style in [(free, "free labels", "-"), (fixed, f"fixed rate π = {cfg.label_prob:g}", "--")]:
        ax.step(
            times,
            np.maximum(res["thresholds"][0, :, j], -0.1),
            where="post",
            color=f"C{j}",
            ls=style,
            lw=2.2,
            label=label,
        )
    ax.axhline(oracle[name], color="0.3", ls=":", lw=1.4, label="best valid threshold")
    ax.set_title(name.replace(" & ", " &\n").replace("Intermediate ", "Intermediate\n"))
    ax.set_xticks([0, 10_000, 20_000])
    ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}k" if x else "0")
    ax.tick_params(labelbottom=True)  # each row is a slide of its own: both rows keep their x axis
    ax.set_xlabel("items seen")
for ax in axes[:, 0]:
    ax.set_ylabel("threshold in use")
# the level drawn at -0.1 is "no threshold yet": the group always thinks
axes[0, 0].set_yticks([-0.1, 0.2, 0.4, 0.6, 0.8], ["always\nthink", "0.2", "0.4", "0.6", "0.8"])
key = [
    plt.Line2D([], [], color="k", lw=2.2, label="free labels"),
    plt.Line2D([], [], color="k", lw=2.2, ls="--", label=f"fixed rate π = {cfg.label_prob:g}"),
    plt.Line2D([], [], color="0.3", lw=1.4, ls=":", label="best valid"),
]
# each row is a slide of its own: the key above the first row, and in the second row's free cell
axes.flat[-1].legend(handles=key, loc="center", frameon=False, title=f"stream 0, ε = {cfg.eps:g}")
axes.flat[-1].axis("off")
fig.tight_layout(rect=(0, 0, 1, 0.95), h_pad=1.5)
# after the layout, in the room it left above the panels
axes[0, 0].legend(handles=key, loc="lower left", bbox_to_anchor=(0, 1.3), ncol=3, frameon=False, borderaxespad=0)
plotting.savefig(fig, "online_gpac_stream")

# %% [markdown]
# ## 4. Head-to-head at equal paid labels: B-PAC, and offline G-PAC
#
# On the same seeded streams:
#
# * **online G-PAC, free labels** and **fixed rate**, as above;
# * **B-PAC per group**: one B-PAC learner per group (`gpac_utils.online_streams.run_bpac`: aGRAPA bet, range
#   $B/\pi$ throughout, thresholds updated after every item), its `label_prob` raised until it
#   has *at least* the paid labels of online G-PAC with free labels (a comparison in B-PAC's
#   favour);
# * **online PAC / B-PAC, one group**: the same with all traffic as one group (B-PAC's setting);
# * **offline G-PAC, equal paid labels**: the core `GPAC` (valid recipe, Theorem 4.2
#   (`thm:known-grouping`)) calibrated on the first $n_L$ items of the stream, all
#   labelled (each one a thinking call), $n_L$ = the paid labels of online G-PAC on that stream;
#   the rest of the stream is routed with those thresholds.
#
# *No thinking call* = the share of items answered by the non-thinking model without a label.
# *Violated*: a group whose population risk at a threshold in use ever exceeded $\varepsilon$.


# %%
def summarise(method, res, rows_of_risk, n_groups, extra=None):
    thr = res["thresholds"] if res["thresholds"].ndim == 2 else res["thresholds"].max(axis=1)
    bad = risk(thr, rows_of_risk) > cfg.eps
    no_think = (res["route_nothink"] & ~res["observe"]).mean(axis=1)
    return {
        "method": method,
        "n_trials": cfg.n_trials,
        "label_prob": (extra or {}).get("label_prob", cfg.label_prob),
        "paid_labels": (res["route_nothink"] & res["observe"]).sum(axis=1).mean(),
        "no_thinking_call": no_think.mean(),
        "no_thinking_call_sd": no_think.std(ddof=1),
        "worst_group_violation_rate": bad.mean(axis=0).max(),
        "worst_group_violation_mcse": np.sqrt(bad.mean(axis=0).max() * (1 - bad.mean(axis=0).max()) / cfg.n_trials),
        "streams_with_a_violated_group": int(bad.any(axis=1).sum()),
    }, thr


paid = (free["route_nothink"] & free["observe"]).sum(axis=1)
per_group, prob_g = streams.matched_bpac(u, loss, g, len(names), paid.mean(), settings)
one = np.zeros_like(g)
pac = streams.run_online(u, loss, one, 1, settings, every=cfg.every)
pac_paid = (pac["route_nothink"] & pac["observe"]).sum(axis=1).mean()
bpac_one, prob_1 = streams.matched_bpac(u, loss, one, 1, pac_paid, settings)
offline = streams.run_offline(u, loss, g, len(names), paid, eps=cfg.eps, alpha=cfg.alpha)
all_rows = np.array([len(names)])
records, finals = [], {}
for method, res, rows_of_risk, extra in [
    ("online G-PAC, free labels", free, None, None),
    ("online G-PAC, fixed rate", fixed, None, None),
    ("B-PAC per group", per_group, None, {"label_prob": prob_g}),
    ("offline G-PAC, equal paid labels", offline, None, None),
    ("online PAC (one group), free labels", pac, all_rows, None),
    ("B-PAC (one group)", bpac_one, all_rows, {"label_prob": prob_1}),
]:
    record, finals[method] = summarise(method, res, rows_of_risk, len(names), extra)
    records.append(record)
savings = pd.DataFrame(records).round(4)
display(savings)
plotting.save_table(savings, "online_gpac_savings", floatfmt=".3f")


# %%
def no_think(res):
    return (res["route_nothink"] & ~res["observe"]).mean(axis=1)


gain_g, gain_1 = no_think(free) - no_think(per_group), no_think(pac) - no_think(bpac_one)
assert no_think(fixed).mean() < no_think(per_group).mean() < no_think(free).mean()  # read in the closing note
se = lambda x: x.std(ddof=1) / np.sqrt(x.size)  # noqa: E731
display(
    Markdown(
        f"Over {cfg.n_trials} streams of {cfg.stream_length:,} items: online G-PAC with free labels answers "
        f"{no_think(free).mean():.3f} of the stream without any thinking call, one B-PAC learner per group "
        f"{no_think(per_group).mean():.3f} (difference {gain_g.mean():+.3f} ± {se(gain_g):.3f} s.e., paired), with "
        f"{paid.mean():.0f} vs {(per_group['route_nothink'] & per_group['observe']).sum(axis=1).mean():.0f} paid labels. "
        f"One group: online PAC {no_think(pac).mean():.3f} vs B-PAC {no_think(bpac_one).mean():.3f} "
        f"({gain_1.mean():+.3f} ± {se(gain_1):.3f}). The fixed-rate mode answers {no_think(fixed).mean():.3f}; "
        f"offline G-PAC given the same paid labels up front {no_think(offline).mean():.3f}."
    )
)

# %% [markdown]
# **Range or bet?** B-PAC gets the free labels too; it differs from online G-PAC with free labels
# in the range its bets are capped for ($B/\pi$ at every step) and in its bet (aGRAPA alone). The
# same online G-PAC with B-PAC's bet (`bet="grapa"`) keeps the per-step range and drops the mixture:

# %%
grapa = streams.run_online(u, loss, g, len(names), settings.replace(bet="grapa"), every=cfg.every)
gain_range = no_think(grapa) - no_think(per_group)
display(
    Markdown(
        f"Online G-PAC with B-PAC's aGRAPA bet answers {no_think(grapa).mean():.3f} of the stream without a thinking "
        f"call (mixture bet: {no_think(free).mean():.3f}; B-PAC per group: {no_think(per_group).mean():.3f}; "
        f"difference to B-PAC {gain_range.mean():+.3f} ± {se(gain_range):.3f} s.e., paired), with "
        f"{(grapa['route_nothink'] & grapa['observe']).sum(axis=1).mean():.0f} paid labels."
    )
)

# %% [markdown]
# Per group: the mean final threshold of each method (always think counted as $-1$), how often
# it ever exceeded the best valid one in risk, and the group's share of the traffic.

# %%
group_rows = []
for method in [
    "online G-PAC, free labels",
    "online G-PAC, fixed rate",
    "B-PAC per group",
    "offline G-PAC, equal paid labels",
]:
    thr = finals[method]
    for j, name in enumerate(names):
        group_rows.append(
            {
                "method": method,
                "group": name,
                "final_threshold": np.maximum(thr[:, j], -1).mean(),
                "streams_over_eps": int((risk(thr)[:, j] > cfg.eps).sum()),
                "best_valid_threshold": oracle[name],
                "traffic": np.mean(codes == j),
            }
        )
groups = pd.DataFrame(group_rows).round(4)
display(groups)
plotting.save_table(groups, "online_gpac_groups", floatfmt=".3f")

# %% [markdown]
# ## 5. A drift episode: the alarm, the always-think interval, the re-certified threshold
#
# From mid-stream on, `drift_group`'s items are drawn from `drift_source`'s rows: the same
# subject label, a harder population. Once a group has a threshold $\hat u$, a Shiryaev–Roberts
# **e-detector** (Shin, Ramdas & Rinaldo 2023, "E-detectors: a nonparametric framework for sequential
# change detection", NEJSDS) tests whether $R_j(\hat u)>\varepsilon$
# on the same terms:
# $M_n=\frac1{|\Lambda|}\sum_{\lambda\in\Lambda}\sum_{k\le n}\prod_{i=k}^n(1+\lambda(X_i(\hat u_i)-\varepsilon))$,
# a new bet started at every item. While $R_j(\hat u_i)\le\varepsilon$ every product is a test
# supermartingale, so $E[M_\tau]\le E[\tau]$: the mean number of monitored items before a false
# alarm is at least $1/\alpha'$ (`drift_alpha`), and $P(\text{alarm within } n \text{ items})\le
# n\alpha'$. On an alarm the group always thinks and certifies again from the items after the
# alarm only; within each stationary stretch after an alarm the anytime guarantee of §1 holds
# again. What is *not* bounded is the detection delay: the risk stays above $\varepsilon$ from the
# change until the alarm.

# %% [markdown]
# Groups are independent processes, so each episode runs the drifting group's own items only: a
# stream of `drift_length` items from the table whose `drift_group` items come from
# `drift_source`'s rows from item `drift_length / 2` on.

# %%
j_drift, j_source = names.index(cfg.drift_group), names.index(cfg.drift_source)
source, change = np.flatnonzero(G == cfg.drift_source), cfg.drift_length // 2


def drift_stream(episode):
    rows = np.random.default_rng([cfg.seed, 50, episode]).integers(0, len(U), size=(1, cfg.drift_length))
    u, loss, member = U[rows], L[rows].copy(), codes[rows] == j_drift
    after = member & (np.arange(cfg.drift_length) >= change)
    swap = source[np.random.default_rng([cfg.seed, 99, episode]).integers(0, source.size, size=after.sum())]
    u[after], loss[after] = U[swap], L[swap]
    return u, loss, np.where(member, 0, -1)


def drift_run(episode, drift_alpha):
    res = streams.run_online(*drift_stream(episode), 1, settings.replace(drift_alpha=drift_alpha), every=cfg.every)
    thr = res["thresholds"][0, :, 0]
    times = np.arange(thr.size) * cfg.every
    rows_of_risk = np.where(times < change, j_drift, j_source)  # the group's population over time
    return thr, risk(thr[:, None], rows_of_risk[:, None])[:, 0], int(res["alarms"][0, 0]), times


episodes = []
for e in range(cfg.drift_episodes):
    thr, risk_e, alarm_e, times = drift_run(e, cfg.drift_alpha)
    back = times[(times > alarm_e) & np.isfinite(thr)] if alarm_e >= 0 else []
    episodes.append(
        {
            "episode": e,
            "threshold_at_change": thr[times < change][-1],
            "risk_after_change": risk_e[times >= change][0],
            "alarm": alarm_e,
            "delay": alarm_e - change if alarm_e >= change else np.nan,
            "recertified_at": back[0] if len(back) else np.nan,
            "final_threshold": thr[-1],
            "final_risk": risk_e[-1],
            "max_risk_after_alarm": risk_e[times > alarm_e].max() if alarm_e >= 0 else np.nan,
        }
    )
episodes = pd.DataFrame(episodes)
display(episodes.round(4))
detected = episodes["alarm"] >= change
assert not ((episodes["alarm"] >= 0) & (episodes["alarm"] < change)).any()  # no false alarm before the change
assert (episodes.loc[detected, "max_risk_after_alarm"] <= cfg.eps).all()  # re-certified within eps
display(
    Markdown(
        f"{detected.sum()} of {len(episodes)} episodes raise the alarm after the change (median delay "
        f"{episodes.loc[detected, 'delay'].median():,.0f} items of the stream), none before it. Every re-certified "
        f"threshold keeps the risk within ε. Risk at the threshold in use right after the change: "
        f"{episodes.loc[detected, 'risk_after_change'].round(3).tolist()} in the detected episodes, "
        f"{episodes.loc[~detected, 'risk_after_change'].round(3).tolist()} in the others (the smaller the excess over "
        f"ε, the less evidence per item)."
    )
)

# %% slideshow={"slide_type": "slide"}
thr_a, risk_a, alarm, times = drift_run(0, cfg.drift_alpha)
thr_p, risk_p, _, _ = drift_run(0, None)
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
for ax, (a, p), label in [
    (axes[0], (thr_a, thr_p), "threshold in use"),
    (axes[1], (risk_a, risk_p), "population risk"),
]:
    ax.step(times, np.maximum(p, -0.1), where="post", color="0.6", label="no alarm (certification permanent)")
    ax.step(times, np.maximum(a, -0.1), where="post", color="C3", label="with the drift alarm")
    ax.axvline(change, color="k", lw=0.8, ls="--", label="change")
    if alarm >= 0:
        ax.axvline(alarm, color="C1", lw=2.4, ls=":", label="alarm")
    ax.set(xlabel="items seen", ylabel=label, title=f"{cfg.drift_group}: {label}")
    ax.xaxis.set_major_locator(plt.MaxNLocator(5))
    ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}k" if x else "0")
# the level drawn at -0.1 is "no threshold": the group always thinks
axes[0].set_yticks([-0.1, 0.2, 0.4, 0.6, 0.8], ["always\nthink", "0.2", "0.4", "0.6", "0.8"])
axes[1].axhline(cfg.eps, color="k", lw=0.6, label="ε (target risk)")
# each panel is a slide of its own: each keeps its key, below its axes (beside the curves, not over them)
for ax in axes:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, frameon=False)
fig.tight_layout()
plotting.savefig(fig, "online_gpac_drift")

# %%
recertified = times[(times > alarm) & np.isfinite(thr_a)]
assert alarm > change and recertified.size and np.all(risk_p[times > alarm] > cfg.eps)
display(
    Markdown(
        f"Episode 0: threshold {thr_a[times < change][-1]:.3f} at the change (item {change:,}), risk "
        f"{risk_a[times >= change][0]:.3f} after it; the alarm fires at item {alarm:,}; the group always thinks "
        f"until item {recertified[0]:,}, then runs at {thr_a[-1]:.3f} with risk {risk_a[-1]:.3f} ≤ ε. Without the "
        f"alarm the threshold stays at {thr_p[-1]:.3f} with risk {risk_p[-1]:.3f} > ε to the end."
    )
)

# %% [markdown]
# :::{exercise}
# :label: ex-online-free-labels-only
#
# A colleague proposes to use only the free labels: observe thinking-routed items (propensity 1)
# and never pay for a label below the threshold. Show that the term $X_i(u)$ then has mean
# $E[\ell\,1\{\hat u<U\le u\}]$ instead of $R_j(u)$, and explain why certification becomes
# invalid. Find on the table a group and a grid point that it would certify wrongly.
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-online-free-labels-only
# :class: dropdown
# ```
# An item with $U_i\le\hat u$ is never observed, so it contributes 0 whatever its loss:
# $E[X_i(u)]=E[\ell\,1\{U\le u\}\,1\{U>\hat u\}]=R_j(u)-R_j(\min(u,\hat u))$. At $u\le\hat u$ every term
# is 0, and above it the terms miss the risk already taken below $\hat u$: the wealth grows under
# $H_0$, the factors no longer have mean $\le1$, and Ville's inequality no longer applies. With no
# paid labels the propensity of a cheap-routed item is 0, which the guarantee excludes.


# %% tags=["solution"]
def free_label_only_means(j, u_hat):
    """Mean of the free-label-only terms of group j at every grid point, threshold u_hat in use."""
    rows = codes == j
    return np.mean(L[rows] * (U[rows] > u_hat) * (U[rows] <= grid[:, None]), axis=1)


fooled = []
for j, name in enumerate(names):  # the threshold in use: the group's best valid one
    biased = free_label_only_means(j, oracle[name])
    below = risk_table[j, np.minimum(np.arange(grid.size), np.searchsorted(grid, oracle[name]))]
    assert np.allclose(biased, risk_table[j] - np.where(grid > oracle[name], below, risk_table[j]))
    fooled += [(name, u) for u, b, r in zip(grid, biased, risk_table[j]) if b <= cfg.eps < r]
assert fooled  # grid points whose terms have mean <= eps although their risk is above eps
name, u_bad = fooled[0]
j = names.index(name)
display(
    Markdown(
        f"{name}, threshold in use {oracle[name]:.3f}: at u = {u_bad:.3f} the free-label-only terms "
        f"have mean {free_label_only_means(j, oracle[name])[grid == u_bad][0]:.3f} ≤ ε while "
        f"R(u) = {risk_table[j, grid == u_bad][0]:.3f} > ε: the wealth would certify it."
    )
)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# :::{exercise}
# :label: ex-online-drift-alpha
#
# Rerun drift episode 0 with `drift_alpha` 100 times larger. Before running it, predict: can the
# first alarm come later? What happens to the bound on false alarms within the items before the
# change? Then check.
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-online-drift-alpha
# :class: dropdown
# ```
# Up to the first alarm both runs see the same decisions and the same statistic $M_n$; only the
# level $1/\alpha'$ differs, so the larger $\alpha'$ alarms at the same item or earlier. Its bound
# on a false alarm within $n$ monitored items, $n\alpha'$, is 100 times larger, and a first alarm
# before the change is then a false alarm that the looser level no longer makes rare. After a real
# change the delay shrinks by roughly $\log 100$ divided by the evidence per item.

# %% tags=["solution"]
first = drift_run(0, 100 * cfg.drift_alpha)[2]
assert 0 <= first <= alarm, (first, alarm)
display(
    Markdown(
        f"drift_alpha = {100 * cfg.drift_alpha:g}: first alarm at item {first:,}, {'before' if first < change else 'after'} "
        f"the change at {change:,} (vs {alarm:,}); false-alarm bound over "
        f"{change:,} items: {min(1.0, 100 * cfg.drift_alpha * change):.2f} (vs {cfg.drift_alpha * change:.2f})."
    )
)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## Common mistakes
#
# * **Using a propensity that is not known when the item is decided** (e.g. re-weighting by the
#   final share of labelled items): the terms lose their conditional mean and the wealth is no
#   longer a supermartingale.
# * **Using only the free labels** (exercise 1): the risk taken below the threshold is never seen.
# * **Capping the bet for a range smaller than the step's largest one** — e.g. $B$ instead of
#   $B/\pi$ once a threshold is in use: a factor can turn negative.
# * **Reading a per-group guarantee as a simultaneous one**: each group's threshold is valid with
#   probability $1-\alpha$; for all $k$ groups at once use $\alpha/k$.
# * **Reading "no alarm yet" as "the risk is below $\varepsilon$"**: the alarm bounds false alarms,
#   not the detection delay; between a change and its alarm the risk can exceed $\varepsilon$.
# * **Comparing routers at equal labelling probability instead of equal paid labels**: a router
#   that routes more to the cheap model pays for more labels at the same $\pi$.
#
# ## Reading the results
#
# The numbers are those displayed in §4 and §5 above (paper profile: 10 streams of 20,000
# items). B-PAC (`gpac_utils.online_streams.run_bpac`) observes its thinking-routed items for free too
# (propensity 1), so free labels alone do not explain the difference between them. What differs
# is the **range each bet is capped for** — B-PAC caps every step for the range $B/\pi$, online
# G-PAC for $B$ while a group still always thinks (every item is then observed in full) and for
# $B/\pi_t$ only once the group routes — and the **bet**: aGRAPA alone against the mixture of
# aGRAPA and a constant bet. (Online G-PAC also updates its thresholds only once per block of
# `every` items, B-PAC after every item, which favours B-PAC.) The last cell of §4 runs online
# G-PAC with B-PAC's own bet, which separates the two. The fixed-rate mode has the mixture bet but
# no free labels — range $B/\pi$ at every step and a paid label for every item it observes — and
# answers fewer items without a thinking call than B-PAC, the free-label mode more (asserted in
# §4): online G-PAC's bets need the free labels to come out ahead. Offline G-PAC given the same
# paid labels up front is the reference for what a one-off calibration buys. Its thresholds, fixed
# once, keep their guarantee at every later moment of a stationary stream (one calibration event
# covers the whole stream); what they lack is adaptivity — they never route more as evidence
# accrues — and any reaction to drift.


# %% [markdown]
# ## Check yourself
#
# Questions on this lesson: click an answer to see whether it is right, and why. They live in
# `notebooks/questions/33_online_gpac.json` (`gpac_utils.quiz`: click an answer to see why); the lecture slides show them too.

# %% tags=["remove-input"]
from gpac_utils.quiz import display_quiz
from gpac_utils.workflow.paths import NOTEBOOKS

display_quiz(NOTEBOOKS / "questions" / "33_online_gpac.json")
