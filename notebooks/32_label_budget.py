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
# # 32 — How many labels? Planning a label budget across groups
#
# **Not in the paper** (it fixes $\pi=0.5$). A group-conditional guarantee needs enough *labelled*
# calibration items in every group: with a valid bound a group with too few labels certifies
# nothing and always thinks. Labels (a thinking-model answer plus a grade) are the expensive part,
# so this notebook plans them with `gpac_utils.prediction` and `gpac_utils.allocation`:
#
# 1. from a labelled **pilot** and the free unlabelled scores, predict per group and per number of
#    labels $n_j$ the distribution of the routed share (mean, 10–90 % band) and $P(\text{certify})$,
#    by resampling the pilot (Bayesian bootstrap, so a small pilot gives a wide band) and
#    calibrating every resample exactly as `GPAC` does (batched `threshold`);
# 2. choose $n_j$ maximising the expected routed share of all traffic under $\sum_j n_j\le L$
#    (an exact dynamic programme on the grid: the curves are **not concave** — each starts flat and
#    jumps at the first $n$ where anything certifies — so a greedy on marginal gains can fall short).
#
# **The plan is an estimate, not a guarantee.** The guarantee (risk $\le\varepsilon$ with
# probability $1-\alpha$ per group) comes from the calibration itself, whatever $n_j$ is; the plan
# only predicts how much each group will route. It assumes the pilot is a random sample of the
# group and extrapolates from it: structure the pilot does not show (e.g. a loss among the lowest
# scores) is not predicted.
#
# **(a)** On the *simulated* MATH-500 stand-in (`data/simulated/math500__qwen.parquet`; the numbers
# illustrate the method, they are not measurements): how many labels per subject make valid G-PAC
# route 30 % of that subject's traffic at $\varepsilon=0.05$?
# **(b)** On the real MATH Level-5 table (`../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv`,
# o1-mini vs gpt-4o-mini, score = panel disagreement; read via `paths.REALDATA`): the planned
# allocation vs the uniform one vs the paper's $\pi=0.5$ at the same label budget, evaluated by
# actually calibrating on each split and routing the held-out half, over seeded splits.
#
# **Reads** the two tables above. **Writes** `figures/label_budget_sim.{png,pdf}`,
# `figures/label_budget_real.{png,pdf}`, `figures/tables/label_budget_sim.{csv,md}`,
# `figures/tables/label_budget_real.{csv,md}`, `figures/tables/label_budget_real_groups.{csv,md}`.
#
# **Runtime** (2 shared cores): fast profile ~10 s; paper profile ~16–26 s.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from matplotlib import ticker

from gpac_utils import allocation, data, prediction, threshold
from gpac_utils.paper import plotting
from gpac_utils.recipe import Recipe, as_recipe
from gpac_utils.workflow import config, paths

plotting.apply_style()
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)

# %% tags=["parameters"]
profile = "paper"
n_trials = None  # seeded calibration/test splits of the real table
n_resamples = None  # pilot resamples per group and label count
real_eps = None
sim_eps = None
seed = None
overrides = {}

# %%
cfg = config.load("32_label_budget", profile, n_trials=n_trials, n_resamples=n_resamples, real_eps=real_eps,
                  sim_eps=sim_eps, seed=seed, **overrides)  # fmt: skip
recipe = as_recipe(cfg.recipe)
cfg

# %% [markdown]
# ## (a) Simulated MATH-500: labels per subject to route 30 %
#
# Every item of the stand-in is labelled, so each subject's items are its pilot (38–124 items) and
# its unlabelled traffic. The curves below extrapolate to far more labels than the table holds:
# they say what *this* subject's score–loss relation, as far as ~100 items show it, needs.

# %%
sim = data.read_table(paths.REPO_ROOT / cfg.sim_table)
rows, sim_curves = [], {}
for score in cfg.sim_scores:
    c = prediction.predict(
        sim[score], sim["group"], sim[score], sim["loss"], sim["group"], eps=cfg.sim_eps, alpha=cfg.alpha,
        recipe=recipe, n_grid=cfg.sim_grid, n_resamples=cfg.n_resamples, seed=cfg.seed,
    )  # fmt: skip
    sim_curves[score] = c
    need_mean = prediction.labels_needed(c, cfg.target, "mean")
    need_q10 = prediction.labels_needed(c, cfg.target, "q10")
    first = {g: (c.n_grid[c.p_certify[j] >= 0.5][:1].tolist() or [np.nan])[0] for j, g in enumerate(c.groups)}
    for g in c.groups:
        rows.append({
            "score": score, "group": g, "pilot_n": c.pilot_sizes[g], "loss_rate": sim.loc[sim.group == g, "loss"].mean(),
            "labels_to_certify": first[g], "labels_for_target_mean": need_mean[g],
            "labels_for_target_q10": need_q10[g], "concave": c.concave[g],
        })  # fmt: skip
sim_table = pd.DataFrame(rows)
display(sim_table)
plotting.save_table(sim_table, "label_budget_sim")

# %% [markdown]
# `labels_to_certify`: the smallest $n$ with $P(\text{certify})\ge 1/2$; `labels_for_target_mean`:
# the smallest $n$ whose *expected* routed share reaches 30 %; `…_q10`: reached in 90 % of the
# resamples. `nan`: not within the grid (up to 1,600 labels). None of the curves is concave.

# %% [markdown]
# Each panel: one subject's predicted routed share against its number of labels (log axis), the
# 10–90 % band over the resamples, and $P(\text{certify})$; the dashed line is the 30 % target.

# %%
main_score = cfg.sim_scores[0]
c = sim_curves[main_score]
lo, hi = c.band()
cols = min(len(c.groups), 4)
rows_ = -(-len(c.groups) // cols)
fig, axes = plt.subplots(rows_, cols, figsize=(3.2 * cols, 2.6 * rows_), sharey=True, squeeze=False)
for j, g in enumerate(c.groups):
    ax = axes.flat[j]
    ok = np.isfinite(c.mean[j])
    ax.fill_between(c.n_grid[ok], lo[j, ok], hi[j, ok], color="0.8", label="10-90 %")
    ax.plot(c.n_grid[ok], c.mean[j, ok], color="k", lw=1.2, label="mean")
    ax.plot(c.n_grid[ok], c.p_certify[j, ok], color="0.5", lw=0.8, ls=":", label="P(certify)")
    ax.axhline(cfg.target, color="C1", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_title(f"{g} ({c.traffic[j]:.0%})", fontsize=9)
    ax.set_xlabel("labels")
for ax in axes.flat[len(c.groups):]:
    ax.axis("off")
axes[0, 0].set_ylabel("routed share")
axes[0, 0].legend(fontsize=6, loc="upper left")
fig.tight_layout()
fig.suptitle(f"simulated MATH-500, {main_score}, valid G-PAC at eps={cfg.sim_eps}", y=1.02, fontsize=10)
plotting.savefig(fig, "label_budget_sim")

# %% [markdown]
# ### Why a dynamic programme, not greedy
#
# Buying labels greedily (again and again the jump up some group's grid with the best predicted gain
# per label) is optimal when every curve is concave. These curves are not: a group certifies nothing
# until $n$ reaches its minimum, then jumps. Two groups with equal traffic and a budget of 20 labels:
# group `a` routes 20 % of its traffic from 10 labels (and no more from 20), group `b` nothing from 10
# and 30 % from 20. Greedy takes `a`'s early gain and can no longer afford `b`'s step; the exact
# allocation (`allocation.allocate`, a dynamic programme over the budget) takes `b`.

# %%
def greedy(curves, budget):
    """Labels per group bought by the best expected gain per label among all jumps up the grid."""
    n = [np.concatenate([[0], curves.n_grid]) for _ in curves.groups]
    gain = [np.concatenate([[0.0], curves.traffic[j] * curves.mean[j]]) for j in range(len(curves.groups))]
    level, spent = [0] * len(curves.groups), 0
    while True:
        jumps = [
            ((gain[j][k] - gain[j][level[j]]) / (n[j][k] - n[j][level[j]]), j, k)
            for j in range(len(curves.groups))
            for k in range(level[j] + 1, n[j].size)
            if spent + n[j][k] - n[j][level[j]] <= budget and gain[j][k] > gain[j][level[j]]
        ]
        if not jumps:
            break
        _, j, k = max(jumps)
        spent += n[j][k] - n[j][level[j]]
        level[j] = k
    return {g: int(n[j][level[j]]) for j, g in enumerate(curves.groups)}, sum(v[k] for v, k in zip(gain, level))


steps = prediction.PlanCurves(
    ["a", "b"], np.array([10, 20]), np.array([[[0.2], [0.2]], [[0.0], [0.3]]]), np.array([0.5, 0.5]),
    np.full(2, np.inf), np.array([[10, 20], [10, 20]]), {"a": 0, "b": 0}, {"a": "bootstrap", "b": "bootstrap"},
)  # fmt: skip
greedy_n, greedy_total = greedy(steps, 20)
exact = allocation.allocate(steps, 20)
assert steps.concave == {"a": True, "b": False}
assert greedy_n == {"a": 10, "b": 0} and exact.n == {"a": 0, "b": 20}
assert abs(exact.total - 0.15) < 1e-12 and abs(greedy_total - 0.10) < 1e-12
print(f"greedy {greedy_n}: {greedy_total:.2f} of all traffic; exact {exact.n}: {exact.total:.2f}")

# %% [markdown]
# ## (b) Real MATH Level-5: planned vs uniform vs $\pi = 0.5$
#
# On each seeded split, per subject: half the items are held out (test); of the other half (the
# calibration pool), a random 30 % is the **pilot** (used for planning only, set aside for every
# method) and the rest $A_j$ is what may be labelled. The budget is the paper's: $L=\sum_j|A_j|/2$
# (expected labels of $\pi=0.5$). Allocations, all calibrated with the valid recipe on $A_j$:
#
# * **planned**: the DP allocation of $L$ from the pilot's curves (`allocation.allocate`; each
#   group labels a random $n_j$-subset of $A_j$);
# * **uniform**: $L/k$ per group, water-filled at the group sizes (`uniform_levels` below);
# * **$\pi=0.5$**: every item of $A_j$ labelled with probability 1/2 (Bernoulli, same bound and rule);
# * **uniform + pilot**: uniform with the pilot's labels added to its budget, calibrating on the
#   whole pool — what the pilot's labels would have bought if spent directly.
#
# Reported: the routed share of the held-out half (overall = traffic-weighted), and the violation
# rate: the share of splits in which a group's risk over the whole table exceeds $\varepsilon$.

# %%
raw = pd.read_csv(paths.REALDATA / cfg.real_path)
real = data.validate(data.apply_mapping(raw, dict(cfg.real_columns)), score_cols=[cfg.real_score], require_group=True)
u_all, l_all, g_all = real[cfg.real_score].to_numpy(), real["loss"].to_numpy(), real["group"].to_numpy()
names = sorted(set(g_all))
traffic = {g: float(np.mean(g_all == g)) for g in names}
eps = cfg.real_eps
half = Recipe(bound=recipe.bound, sampling="bernoulli", label_prob=0.5, rule=recipe.rule, candidates=recipe.candidates)


def table_risk(t, g):
    """Risk of threshold t over group g's whole table, E[loss 1{U <= t}]."""
    m = g_all == g
    return float(np.mean(l_all[m] * (u_all[m] <= t)))


def uniform_levels(budget, cap):
    """Equal labels per group spending `budget`, n_j = min(cap_j, lam) (water-filling), rounded down."""
    cap = np.asarray(cap, dtype=float)
    left, lam = float(budget), float(np.max(cap))
    for i, c_ in enumerate(np.sort(cap)):
        if c_ >= left / (cap.size - i):  # every group from here on takes an equal share
            lam = left / (cap.size - i)
            break
        left -= c_
    return np.floor(np.minimum(cap, lam) + 1e-9).astype(int)


assert uniform_levels(100, [10, 1000, 1000]).tolist() == [10, 45, 45]
assert uniform_levels(10_000, [10, 20]).tolist() == [10, 20]


def predicted_total(curves, n):
    """The curves' expected routed share of all traffic for n[g] labels per group (0 labels: 0)."""
    return float(sum(curves.traffic[j] * curves.mean[j, curves.n_grid == n[g]][0] if n[g] else 0.0
                     for j, g in enumerate(curves.groups)))  # fmt: skip


def calibrate_subset(u, losses, n, recipe, label_prob, seed):
    """G-PAC's threshold from a random n-subset of one group's items (n = 0: nothing certified, always think)."""
    rng = np.random.default_rng(seed)
    if n == 0:
        return -np.inf
    pick = rng.permuted(np.arange(u.size))[:n]
    return float(threshold(u[pick], losses[pick], eps=eps, alpha=cfg.alpha, recipe=recipe, rng=rng, label_prob=label_prob))


def predict_pi_half(scores, groups, pilot_u, pilot_l, pilot_g, pool, seed):
    """Per group: the predicted routed share of pi = 0.5 Bernoulli labelling of its `pool` items."""
    out = {}
    for g in sorted(pool):
        m = groups == g
        c = prediction.predict(
            scores[m], groups[m], pilot_u, pilot_l, pilot_g, eps=eps, alpha=cfg.alpha, recipe=half,
            n_grid=[max(1, round(pool[g] / 2))], pool={g: pool[g]}, n_resamples=cfg.n_resamples, seed=seed,
        )  # fmt: skip
        out[g] = float(c.mean[0, 0])
    return out


records, predicted = [], []
for trial in range(cfg.n_trials):
    rng = np.random.default_rng([cfg.seed, trial])
    test, pilot, avail = (np.zeros(len(real), bool) for _ in range(3))
    for g in names:
        idx = rng.permutation(np.flatnonzero(g_all == g))
        n_cal = int(round(cfg.cal_ratio * idx.size))
        n_pilot = int(round(cfg.pilot_fraction * n_cal))
        pilot[idx[:n_pilot]], avail[idx[n_pilot:n_cal]], test[idx[n_cal:]] = True, True, True
    pool = {g: int(np.sum(avail & (g_all == g))) for g in names}
    cal = pilot | avail  # unlabelled scores of the calibration pool: free
    budget = sum(pool.values()) // 2  # the labels pi = 0.5 spends in expectation
    uniform = dict(zip(names, uniform_levels(budget, [pool[g] for g in names])))
    # the grid: geometric up to the largest pool, plus the uniform levels (so the baseline is on it)
    grid = np.union1d(prediction.default_grid(max(pool.values())), list(uniform.values()))
    grid = grid[(grid >= 1) & (grid <= max(pool.values()))]
    seed = 1000 * cfg.seed + trial
    curves = prediction.predict(
        u_all[cal], g_all[cal], u_all[pilot], l_all[pilot], g_all[pilot], eps=eps, alpha=cfg.alpha,
        recipe=recipe, n_grid=grid, cap=pool, traffic=traffic, n_resamples=cfg.n_resamples, seed=seed,
    )  # fmt: skip
    planned = allocation.allocate(curves, budget)
    assert planned.total >= predicted_total(curves, uniform) - 1e-12  # the DP is optimal on the grid
    pi_half = predict_pi_half(u_all[cal], g_all[cal], u_all[pilot], l_all[pilot], g_all[pilot], pool, seed)
    predicted += [
        {"trial": trial, "allocation": "planned", "predicted_routed_share": planned.total},
        {"trial": trial, "allocation": "uniform", "predicted_routed_share": predicted_total(curves, uniform)},
        {"trial": trial, "allocation": "pi=0.5",
         "predicted_routed_share": float(sum(curves.traffic[j] * pi_half[g] for j, g in enumerate(names)))},
    ]  # fmt: skip
    whole = {g: int(np.sum(cal & (g_all == g))) for g in names}
    plus = dict(zip(names, uniform_levels(budget + int(pilot.sum()), [whole[g] for g in names])))
    allocs = {
        "planned": (planned.n, avail, recipe, None),
        "uniform": (uniform, avail, recipe, None),
        "pi=0.5": ({g: pool[g] for g in names}, avail, half, 0.5),
        "uniform + pilot": (plus, cal, recipe, None),
    }
    for name, (n, source, rec, label_prob) in allocs.items():
        for j, g in enumerate(names):
            src = source & (g_all == g)
            te = test & (g_all == g)
            t = calibrate_subset(u_all[src], l_all[src], int(n[g]), rec, label_prob, seed=[cfg.seed, trial, j])
            labels = n[g] * (label_prob or 1.0)
            records.append({"trial": trial, "allocation": name, "group": g, "labels": labels,
                            "routed_share": float(np.mean(u_all[te] <= t)), "violation": table_risk(t, g) > eps})  # fmt: skip

res = pd.DataFrame(records)
pred = pd.DataFrame(predicted)

# %%
res["weighted"] = res["group"].map(traffic) * res["routed_share"]
totals = res.groupby(["allocation", "trial"]).agg(labels=("labels", "sum"), routed_share=("weighted", "sum")).reset_index()
order = ["planned", "uniform", "pi=0.5", "uniform + pilot"]
summary = (
    totals.groupby("allocation")
    .agg(labels=("labels", "mean"), routed_share_mean=("routed_share", "mean"), routed_share_sd=("routed_share", "std"))
    .reindex(order)
    .reset_index()
)
pm = pred.groupby("allocation")["predicted_routed_share"].mean()
summary["predicted_routed_share"] = summary["allocation"].map(pm)
viol = res.groupby("allocation")["violation"].agg(["mean", "max"])
summary["violation_rate_mean"] = summary["allocation"].map(viol["mean"])
by_group_viol = res.groupby(["allocation", "group"])["violation"].mean().groupby("allocation").max()
summary["violation_rate_worst_group"] = summary["allocation"].map(by_group_viol)
gain = totals.pivot(index="trial", columns="allocation", values="routed_share")
summary["gain_vs_uniform"] = summary["allocation"].map((gain.sub(gain["uniform"], axis=0)).mean())
summary.insert(0, "trials", cfg.n_trials)
display(summary)
plotting.save_table(summary, "label_budget_real", floatfmt=".3f")

groups_table = (
    res.groupby(["allocation", "group"])
    .agg(labels=("labels", "mean"), routed_share=("routed_share", "mean"), violation_rate=("violation", "mean"))
    .reset_index()
)
groups_table["allocation"] = pd.Categorical(groups_table["allocation"], order)
groups_table = groups_table.sort_values(["allocation", "group"]).reset_index(drop=True)
groups_table["allocation"] = groups_table["allocation"].astype(str)
display(groups_table)
plotting.save_table(groups_table, "label_budget_real_groups", floatfmt=".3f")

# %% [markdown]
# `predicted_routed_share` is the plan's own forecast (from the 30 % pilot) for the same allocation;
# `routed_share_mean` is what calibrating on the split and routing the held-out half actually gave. The
# violation rates are per group and split (the guarantee bounds each by $\alpha$ in expectation
# over splits; with the table standing in for the population they are noisy at these sizes).

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [1, 2.2]})
ax = axes[0]
x = np.arange(len(order))
ax.bar(x, summary["routed_share_mean"], yerr=summary["routed_share_sd"], color=["C3", "C0", "C2", "C7"], alpha=0.8,
       label="realised (held-out)")  # fmt: skip
ax.plot(x[:3], summary["predicted_routed_share"].iloc[:3], "kD", ms=5, label="predicted from pilot")
ax.set_xticks(x, [o.replace(" + ", "\n+ ") for o in order], fontsize=8)
ax.set_ylabel("routed share of all traffic")
ax.legend(fontsize=7, loc="lower right")
ax = axes[1]
w = 0.2
for i, name in enumerate(order):
    part = groups_table[groups_table["allocation"] == name].set_index("group").reindex(names)
    ax.bar(np.arange(len(names)) + (i - 1.5) * w, part["routed_share"], width=w, label=name, color=f"C{[3, 0, 2, 7][i]}")
ax.set_xticks(np.arange(len(names)), [n.replace(" & ", " &\n").replace(" ", "\n", 1) for n in names], fontsize=7)
ax.set_ylabel("routed share of the group")
ax.legend(fontsize=7, ncol=2)
fig.suptitle(f"MATH Level-5 (o1-mini vs gpt-4o-mini), valid G-PAC, eps={eps}, {cfg.n_trials} splits", fontsize=10)
fig.tight_layout()
plotting.savefig(fig, "label_budget_real")

# %% [markdown]
# ## Reading the results
#
# * The planned allocation concentrates the budget on groups whose low-score items are nearly
#   loss-free and that carry much traffic, and gives **zero** labels to groups that would need more
#   labels than they have to certify anything (they always think — trivially within the guarantee).
#   Uniform and $\pi=0.5$ spread labels over groups that then certify nothing.
# * $\pi=0.5$ Bernoulli labelling is less efficient per label than labelling a chosen subset fully:
#   the bound runs over twice the items with terms of range $1/\pi=2$.
# * The prediction is an estimate: compare `predicted_routed_share` with `routed_share_mean` above. It is made
#   from a 30 % pilot and will be off when the pilot misses structure; the guarantee itself never
#   depends on it.
