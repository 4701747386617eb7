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
# # 33 — Online G-PAC: per-group thresholds that stay valid at every moment of a stream
#
# **Not in the paper** (it calibrates once, offline). A deployed router sees a stream. It labels a
# random share $\rho$ of the traffic (runs the thinking model and grades the cheap answer) and
# should route more to the cheap model as labels arrive, **without ever losing the per-group
# guarantee**. `gpac_utils.online.OnlineGPAC` does this with one betting wealth process per group
# and candidate threshold (B-PAC's marginal construction, made per group).
#
# **Reads** the real MATH Level-5 table (`../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv`,
# via `paths.REALDATA`; o1-mini = thinking, gpt-4o-mini = non-thinking, groups = the 7 subjects,
# score = the share of an 8-model panel that disagrees with gpt-4o-mini, loss = 1{o1-mini right and
# gpt-4o-mini wrong}; see its PROVENANCE.md). Each stream draws items i.i.d. (seeded) from the
# table, so the table *is* the population and every group's risk $R_j(u)$ is known exactly.
#
# **Writes** `figures/online_gpac_stream.{png,pdf}`, `figures/online_gpac_drift.{png,pdf}`,
# `figures/tables/online_gpac_savings.{csv,md}`, `figures/tables/online_gpac_groups.{csv,md}`.
#
# **Runtime** (2 shared cores): fast profile ~15–35 s; paper profile ~40–75 s (busy machine).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from gpac_utils import GPAC
from gpac_utils import data as D
from gpac_utils.online import OnlineGPAC, draw_labels, grid_points
from gpac_utils.paper import plotting
from gpac_utils.workflow import config, paths

plotting.apply_style()
pd.set_option("display.width", 200)

# %% tags=["parameters"]
profile = "paper"
stream_length = None  # items per stream
streams = None  # seeded streams for the savings table
label_rate = None
eps = None
overrides = {}

# %%
cfg = config.load("33_online_gpac", profile, stream_length=stream_length, streams=streams, label_rate=label_rate,
                  eps=eps, **overrides)  # fmt: skip
cfg

# %% [markdown]
# ## Why it is valid at every moment
#
# For item $i$ of group $j$ and grid point $u$ the term $X_i(u)=\xi_i\,\ell_i\,1\{U_i\le u\}/\rho$
# ($\xi_i$: labelled or not, drawn with probability $\rho$) lies in $[0, M]$, $M=B/\rho$, and has
# mean $R_j(u)$ given the past. A gambler who bets against $H_0: R_j(u)>\varepsilon$ holds the
# wealth $K_n(u)=\prod_{i\le n}\bigl(1+\lambda_i(\varepsilon-X_i(u))\bigr)$ with a bet
# $0\le\lambda_i<1/(M-\varepsilon)$ chosen from earlier items only. Under $H_0$ each factor has
# mean $\le 1$ and is positive: $K(u)$ is a nonnegative supermartingale starting at 1, and by
# **Ville's inequality** $P(\exists n: K_n(u)\ge 1/\alpha)\le\alpha$. A grid point is certified
# once its wealth reaches $1/\alpha$; the threshold in use $\hat u_{j,t}$ is the largest grid point
# whose whole grid prefix is certified.
#
# If ever $R_j(\hat u_{j,t})>\varepsilon$, then, $R_j$ being non-decreasing, the first grid point
# $u^*$ with $R_j(u^*)>\varepsilon$ lies at or below $\hat u_{j,t}$ and was certified. That is the
# Ville event for the single process $K(u^*)$, so
# $$P\bigl(\exists t:\ R_j(\hat u_{j,t})>\varepsilon\bigr)\le\alpha\quad\text{for every group } j,$$
# at all times at once, with no union bound over the grid or over time. It needs i.i.d. arrivals,
# labels drawn independently with the known $\rho$, and a grid fixed in advance (here the score's
# support $\{0,\frac18,\dots,1\}$). `tests/test_online.py` checks it on 300 seeded streams with
# closed-form risks.
#
# ## The population and its exact per-group risk

# %%
raw = pd.read_csv(paths.REALDATA / cfg.real_path)
table = D.validate(D.apply_mapping(raw, dict(cfg.real_columns)), score_cols=[cfg.score], require_group=True)
U, L, G = table[cfg.score].to_numpy(), table["loss"].to_numpy(), table["group"].to_numpy()
names = sorted(set(G))
grid = grid_points(cfg.grid)


def table_risk(t, rows):
    """R(t) = E[loss 1{U <= t}] over the table rows (the population); 0 at t = -inf (always think)."""
    return float(np.mean(L[rows] * (U[rows] <= t)))


oracle = {g: max([u for u in grid if table_risk(u, G == g) <= cfg.eps], default=-np.inf) for g in names}
marginal_oracle = max(u for u in grid if table_risk(u, np.ones(len(U), bool)) <= cfg.eps)
pd.DataFrame({
    "items": [int(np.sum(G == g)) for g in names],
    "best valid threshold": [oracle[g] for g in names],
    "risk there": [round(table_risk(oracle[g], G == g), 4) for g in names],
    "risk at the marginal best": [round(table_risk(marginal_oracle, G == g), 4) for g in names],
}, index=names)  # fmt: skip

# %% [markdown]
# The marginal best threshold ($R(u)\le\varepsilon$ over all traffic) leaves Intermediate Algebra
# and Precalculus above $\varepsilon$: marginal online PAC will converge there.
#
# ## The deployment loop
#
# The stream arrives in blocks of `every` items. Each block is **routed with the thresholds
# certified so far**, its labelled items are sent to the thinking model and graded, and only then
# does the router learn from them (`partial_fit`). A labelled item costs a thinking call whatever
# the routing; an unlabelled one costs it only when routed to the thinking model.


# %%
def draw_stream(seed, n):
    """n items drawn i.i.d. from the table (seeded), and the labelling decisions."""
    rows = np.random.default_rng([cfg.seed, seed]).integers(0, len(U), size=n)
    return rows, draw_labels(n, cfg.label_rate, seed=[cfg.seed, seed, 1])


def deploy(router, u, g, loss, labelled):
    """Route each block with the current thresholds, then learn from its labels."""
    routed, history = np.zeros(len(u), bool), []
    for start in range(0, len(u), cfg.every):
        b = slice(start, start + cfg.every)
        routed[b] = router.route(u[b], g[b])
        router.partial_fit(u[b], g[b], np.where(labelled[b], loss[b], np.nan), labelled[b])
        history.append(dict(router.thresholds_))
    return routed, history


def new_router(bet="mixture"):
    return OnlineGPAC(cfg.eps, cfg.alpha, label_rate=cfg.label_rate, grid=grid, bet=bet)


rows, labelled = draw_stream(0, cfg.stream_length)
routed, history = deploy(new_router(), U[rows], G[rows], L[rows], labelled)
print(f"{labelled.sum()} labels; routed to the non-thinking model: {routed.mean():.3f}; "
      f"final thresholds: {history[-1]}")  # fmt: skip

# %% [markdown]
# Thresholds per group over the stream (steps: a grid point certified), and the share of each
# group's traffic routed to the non-thinking model, per window of 1,000 items. Dotted: the best
# valid threshold of the population.

# %%
times = np.arange(1, len(history) + 1) * cfg.every
window = 1000
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for i, g in enumerate(names):
    thr = [max(h.get(g, -np.inf), -0.05) for h in history]  # -inf (always think) drawn just below 0
    axes[0].step(times, thr, where="post", color=f"C{i}", label=g)
    axes[0].axhline(oracle[g], color=f"C{i}", ls=":", lw=0.8)
    member = G[rows] == g
    ends = np.arange(window, len(rows) + 1, window)
    share = [routed[e - window : e][member[e - window : e]].mean() for e in ends]
    axes[1].plot(ends, np.round(share, 6), "o-", ms=3, color=f"C{i}", label=g)
axes[0].set(xlabel="items seen", ylabel="threshold in use", title="thresholds (below 0: always think)")
axes[1].set(xlabel="items seen", ylabel="routed to non-thinking", title=f"routed share per {window} items")
axes[1].legend(fontsize=7, ncol=2)
fig.suptitle(f"online G-PAC on MATH L5, eps={cfg.eps}, alpha={cfg.alpha}, rho={cfg.label_rate}", fontsize=10)
fig.tight_layout()
plotting.savefig(fig, "online_gpac_stream")

# %% [markdown]
# ## Thinking-model calls saved: online vs always-think vs offline G-PAC at equal labels
#
# On each of `streams` seeded streams:
#
# * **online G-PAC** (both bets): the loop above;
# * **marginal online PAC**: the same router with one group for all traffic (B-PAC's setting);
# * **offline G-PAC, equal labels**: the core `GPAC` with the valid recipe, calibrated on the first
#   $n_L$ items of the stream, all labelled, where $n_L$ is the number of labels online G-PAC used
#   on that stream; the rest of the stream is routed with these fixed thresholds.
#
# Saved = 1 − thinking calls / stream length (always-think saves 0); `routed_last_quarter` is the
# share routed over the last quarter of the stream (where the online thresholds have settled). A
# group is *violated* when its
# population risk at the final threshold exceeds $\varepsilon$ (thresholds only grow, so the final
# one is the worst of the stream).

# %%
def violated(thresholds):
    return [g for g in names if table_risk(thresholds.get(g, -np.inf), G == g) > cfg.eps]


records, group_rows = [], []
quarter = cfg.stream_length // 4
for s in range(cfg.streams):
    rows, labelled = draw_stream(s, cfg.stream_length)
    u, g, loss = U[rows], G[rows], L[rows]
    for bet in cfg.bets:
        routed, history = deploy(new_router(bet), u, g, loss, labelled)
        calls = np.sum(~routed | labelled)
        records.append({"method": f"online G-PAC ({bet})", "stream": s, "labels": int(labelled.sum()),
                        "routed": routed.mean(), "routed_last_quarter": routed[-quarter:].mean(),
                        "saved": 1 - calls / len(u), "violated": violated(history[-1])})
        group_rows += [{"method": f"online G-PAC ({bet})", "group": k, "threshold": history[-1].get(k, -np.inf)}
                       for k in names]  # fmt: skip
    routed, history = deploy(new_router(), u, np.full(len(u), "all"), loss, labelled)
    final = {k: history[-1]["all"] for k in names}
    records.append({"method": "marginal online PAC", "stream": s, "labels": int(labelled.sum()),
                    "routed": routed.mean(), "routed_last_quarter": routed[-quarter:].mean(),
                    "saved": 1 - np.sum(~routed | labelled) / len(u), "violated": violated(final)})  # fmt: skip
    group_rows += [{"method": "marginal online PAC", "group": k, "threshold": final[k]} for k in names]
    n_cal = int(labelled.sum())
    offline = GPAC(cfg.eps, cfg.alpha, "valid").fit(u[:n_cal], loss[:n_cal], g[:n_cal])
    rest = offline.route(u[n_cal:], g[n_cal:])
    records.append({"method": "offline G-PAC, equal labels", "stream": s, "labels": n_cal,
                    "routed": rest.sum() / len(u), "routed_last_quarter": rest[-quarter:].mean(),
                    "saved": 1 - (n_cal + np.sum(~rest)) / len(u),
                    "violated": violated(offline.thresholds_)})  # fmt: skip
    group_rows += [{"method": "offline G-PAC, equal labels", "group": k, "threshold": offline.thresholds_.get(k, -np.inf)}
                   for k in names]  # fmt: skip

# %%
res = pd.DataFrame(records)
res["violations"] = res["violated"].map(len)
order = [f"online G-PAC ({b})" for b in cfg.bets] + ["marginal online PAC", "offline G-PAC, equal labels"]
savings = (
    res.groupby("method", sort=False)
    .agg(labels=("labels", "mean"), routed=("routed", "mean"), routed_last_quarter=("routed_last_quarter", "mean"),
         saved_mean=("saved", "mean"),
         saved_sd=("saved", "std"), streams_with_a_violated_group=("violations", lambda v: int(np.sum(v > 0))))
    .reindex(order).reset_index()
)  # fmt: skip
savings.insert(1, "streams", cfg.streams)
savings = savings.round(4)
display(savings)
plotting.save_table(savings, "online_gpac_savings", floatfmt=".3f")
print("violated groups of marginal online PAC:",
      sorted({v for vs in res.loc[res.method == "marginal online PAC", "violated"] for v in vs}))  # fmt: skip

# %% [markdown]
# Per group: the mean final threshold of each method (always think counted as $-1$), how often it
# exceeds the best valid one, and the population risk at the mean-case threshold.

# %%
gr = pd.DataFrame(group_rows)
gr["risk"] = [table_risk(t, G == k) for t, k in zip(gr["threshold"], gr["group"])]
gr["over_eps"] = gr["risk"] > cfg.eps
groups = (
    gr.assign(threshold=gr["threshold"].clip(lower=-1.0))
    .groupby(["method", "group"], sort=False)
    .agg(final_threshold=("threshold", "mean"), risk=("risk", "mean"), streams_over_eps=("over_eps", "sum"))
    .reset_index()
)
groups["best_valid_threshold"] = groups["group"].map(oracle)
groups["traffic"] = groups["group"].map({k: float(np.mean(G == k)) for k in names})
groups = groups.round(4)
display(groups)
plotting.save_table(groups, "online_gpac_groups", floatfmt=".3f")

# %% [markdown]
# ## A drift episode: what the guarantee does and does not cover
#
# From mid-stream on, `drift_group`'s items are drawn from `drift_source`'s rows: the same subject
# label, a harder population. We run online G-PAC through it and, for comparison, a fresh router
# started at the change point (what an operator would do after detecting the change).

# %%
rows, labelled = draw_stream(0, cfg.stream_length)
u, g, loss = U[rows].copy(), G[rows].copy(), L[rows].copy()
change = cfg.stream_length // 2
after = (np.arange(len(u)) >= change) & (g == cfg.drift_group)
source = np.flatnonzero(G == cfg.drift_source)
swap = source[np.random.default_rng([cfg.seed, 99]).integers(0, source.size, size=after.sum())]
u[after], loss[after] = U[swap], L[swap]
_, drift_history = deploy(new_router(), u, g, loss, labelled)
_, restart_history = deploy(new_router(), u[change:], g[change:], loss[change:], labelled[change:])

thr = np.array([h.get(cfg.drift_group, -np.inf) for h in drift_history])
times = np.arange(1, thr.size + 1) * cfg.every
before_rows, after_rows = G == cfg.drift_group, G == cfg.drift_source
risk = [table_risk(t, before_rows if time <= change else after_rows) for t, time in zip(thr, times)]
restart = np.array([h.get(cfg.drift_group, -np.inf) for h in restart_history])
restart_times = change + np.arange(1, restart.size + 1) * cfg.every
exceeded = times[(np.array(risk) > cfg.eps)]
print(f"{cfg.drift_group}: threshold {thr[times <= change][-1]} at the change; risk above eps from item "
      f"{exceeded[0] if exceeded.size else 'never'}; restarted router ends at {restart[-1]}")  # fmt: skip

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
axes[0].step(times, np.maximum(thr, -0.05), where="post", label="online G-PAC (never resets)")
axes[0].step(restart_times, np.maximum(restart, -0.05), where="post", ls="--", label="fresh router from the change")
axes[0].axvline(change, color="0.5", lw=0.8)
axes[0].set(xlabel="items seen", ylabel="threshold in use", title=f"{cfg.drift_group}: threshold")
axes[0].legend(fontsize=7)
axes[1].plot(times, np.round(risk, 6), label="risk at the threshold in use")
axes[1].axhline(cfg.eps, color="k", ls=":", lw=0.8, label="eps")
axes[1].axvline(change, color="0.5", lw=0.8)
axes[1].set(xlabel="items seen", ylabel="population risk", title=f"{cfg.drift_group}: risk of the routed traffic")
axes[1].legend(fontsize=7)
fig.tight_layout()
plotting.savefig(fig, "online_gpac_drift")

# %% [markdown]
# **What the guarantee covers.** For a stationary stream: with probability at least $1-\alpha$,
# every group's threshold has risk at most $\varepsilon$ at every moment. It also covers a stream
# whose risk changes *as long as* at the first bad grid point the risk stays above $\varepsilon$
# at every step (the wealth is then still a supermartingale): a group whose risk is *high from the
# start* is never certified by luck with probability more than $\alpha$.
#
# **What it does not cover.** A risk that *rises after* a threshold was certified. Certification
# is permanent, the wealth that certified it was earned on the old population, and nothing tests
# it again: above, the drifting group keeps its pre-change threshold and its risk exceeds
# $\varepsilon$ for the rest of the stream. Staying safe under drift needs something on top —
# e.g. a second betting test of $H_0: R_j(\hat u_{j,t})\le\varepsilon$ on the routed traffic's
# labels that raises an alarm, then a restart (the dashed line: a fresh router recertifies from
# scratch, with a lower threshold, at the cost of thinking on all of the group meanwhile).
#
# ## Reading the results
#
# Numbers of the paper profile (10 streams of 20,000 items, $\rho=0.1$, about 2,000 labels each):
#
# * Online G-PAC saved **31 %** of thinking-model calls (mixture bet; 31 % with B-PAC's bet) and
#   violated no group with the mixture bet; with B-PAC's bet one group in one stream (Prealgebra: 1 of
#   70 group-streams, within the per-group $\alpha$). Marginal online PAC saved 39 % but left
#   groups above $\varepsilon$ in 2 of 10 streams (Intermediate Algebra and Precalculus, which the
#   traffic mix hides, and more).
# * **Offline G-PAC given the same labels saved more (40 %)**: its labels are all on the target
#   (every calibration item labelled, Hoeffding–Bentkus), while the online terms are
#   inverse-propensity weighted (range $1/\rho=10$) and the anytime guarantee costs evidence. Over
#   the last quarter of the stream the online router routes 42.9 % of traffic against offline's
#   44.3 %, but it still pays for its labels there (10 % of traffic). What it buys is no up-front
#   labelling phase, a guarantee at every moment, and thresholds that keep improving with the
#   stream.
# * The `mixture` bet (B-PAC's bet averaged with a constant bet) certifies faster than B-PAC's bet
#   alone once a group has a few hundred items; B-PAC's is quicker on the first hundred.
