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
# # 10 — The oracle partition: PAC-optimal thresholds and why grouping helps (Proposition 4.5)
#
# **Reproduces** Section 4.2 of the paper: the PAC-optimal threshold of each group
# (Eq. pac-optimal-threshold), the routed share of marginal PAC vs G-PAC vs the oracle, and
# Proposition 4.5 (`prop:grouping-benefit`, "grouping never hurts, strictly helps under heterogeneity") checked
# numerically — including the equality case, and including where the proposition as stated
# in the paper does *not* hold.
#
# **Population** (`pop` below, a `gpac_utils.paper.theory.populations.Population`): three groups with `U ~ Uniform(0, 1)`
# and binary loss with `P(loss = 1 | U = u, j) = a_j u^{b_j}`: easy (50 %, `0.4 u^2`), medium
# (30 %, `0.6 u`), hard (20 %, `0.9 u^0.5`). The same score means very different risks across
# groups. Every risk is in closed form: `R(u | G_j) = a_j u^{b_j+1} / (b_j + 1)`.
#
# **Reads** nothing. **Writes** `figures/oracle_partition.{png,pdf}`,
# `figures/tables/oracle_partition_routed_share.{csv,md}`, `figures/tables/prop33_check.{csv,md}`,
# `figures/tables/oracle_partition_calibrated.{csv,md}`.
#
# **Runtime** (measured on 2 shared cores): fast ≈ 5 s, paper ≈ 6–11 s.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils import Recipe, metrics
from gpac_utils.calibrate import ALL, threshold
from gpac_utils.paper import plotting
from gpac_utils.paper.theory import populations
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
eps = None  # tolerance of the single-eps illustrations
n_random = None  # random populations in the Proposition 4.5 scan (each also with identical groups)
calibrations = None  # repetitions of the calibrated comparison
overrides = {}  # any other setting of notebooks/config/10_oracle_partition.yaml

# %%
cfg = config.load("10_oracle_partition", profile, eps=eps, n_random=n_random, calibrations=calibrations, **overrides)
pop = populations.Population((  # heterogeneous risk profiles: the same score, very different risks
    populations.RiskGroup("easy", 0.5, a=0.4, b=2.0),  # R(u) = 0.133 u^3
    populations.RiskGroup("medium", 0.3, a=0.6, b=1.0),  # R(u) = 0.3 u^2
    populations.RiskGroup("hard", 0.2, a=0.9, b=0.5),  # R(u) = 0.6 u^1.5
))
cfg

# %% [markdown]
# ## PAC-optimal thresholds
# A threshold `u` is (ε, α)-PAC feasible for `G_j` when `P(R(u | G_j) ≤ ε) ≥ 1 − α`. For a
# *fixed* `u` the risk is a number, so this probability is 0 or 1 and α drops out:
# `u*_j = sup{u : R(u | G_j) ≤ ε}`. (α enters only once `u` is *estimated*, below.)
# Marginal PAC uses one threshold with the marginal constraint `Σ_j p_j R(u | G_j) ≤ ε`.

# %%
e0 = cfg.eps
u_grid = np.linspace(0, 1, 401)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for g, c in zip(pop.groups, ["#2a9d8f", "#e9c46a", "#e76f51"]):
    axes[0].plot(u_grid, g.loss_prob(u_grid), color=c, label=g.name)
    axes[1].plot(u_grid, g.risk(u_grid), color=c, label=g.name)
    axes[1].axvline(min(populations.oracle_threshold(pop, e0, g.name), 1), color=c, ls=":")
axes[1].plot(u_grid, pop.risk(u_grid), color="#1f3b73", lw=2, label="marginal")
axes[1].axvline(populations.oracle_threshold(pop, e0), color="#1f3b73", ls=":")
axes[1].axhline(e0, color="grey", lw=0.8)
axes[0].set(xlabel="score u", ylabel="P(loss = 1 | U = u)", title="loss curves")
axes[1].set(xlabel="threshold u", ylabel="R(u | G)", title=f"risk; dotted: u* at ε = {e0:g}")
axes[0].legend()
axes[1].legend(fontsize=8)

table = pd.DataFrame([populations.oracle_summary(pop, float(e)) for e in cfg.eps_grid])
for col, lab in (("routed_share_marginal", "PAC (marginal constraint)"), ("routed_share_common", "one threshold, valid in every group"),
                 ("routed_share_grouped", "G-PAC oracle (per-group)")):
    axes[2].plot(table["eps"], table[col], marker="o", ms=3, label=lab,
                 color={"routed_share_marginal": "#1f3b73", "routed_share_common": "grey", "routed_share_grouped": "#2a9d8f"}[col])
axes[2].set(xlabel="ε", ylabel="share routed to non-thinking", title="population routed share")
axes[2].legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, "oracle_partition")

# %%
plotting.save_table(table, "oracle_partition_routed_share", floatfmt=".4f")
table[["eps", "u_marginal", *[f"u_{g}" for g in pop.names], "routed_share_marginal", "routed_share_common", "routed_share_grouped",
       "max_group_risk_marginal"]].round(3)

# %% [markdown]
# Read the last column: under the marginal threshold the *hard* group's risk exceeds ε at every
# tolerance — marginal PAC is efficient because it spends the hard group's budget. G-PAC
# gives every group its own guarantee, and against the best single threshold that offers the
# same guarantee (`routed_share_common` = `P(U ≤ min_j u*_j)`) it is always more efficient here.

# %% [markdown]
# :::{exercise}
# :label: ex-oracle-closed-form
#
# Every group here has $U \sim \mathrm{Uniform}(0, 1)$ and $P(\ell = 1 \mid U = u) = a_j u^{b_j}$.
# Integrate to get $R(u \mid G_j)$, solve $R(u \mid G_j) = \varepsilon$ for $u$, and check your
# formula against `populations.oracle_threshold` for the three groups at $\varepsilon$ = `cfg.eps`.
# When is the answer $+\infty$?
# :::

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-oracle-closed-form
# :class: dropdown
# ```
# $R(u \mid G_j) = \int_0^u a_j s^{b_j}\,ds = a_j u^{b_j+1}/(b_j+1)$, so
# $u^*_j = (\varepsilon (b_j+1)/a_j)^{1/(b_j+1)}$ — unless that exceeds 1: then even routing
# everything keeps the risk at most $\varepsilon$ and $u^*_j = +\infty$.

# %% tags=["solution"]
for g in pop.groups:
    by_hand = (cfg.eps * (g.b + 1) / g.a) ** (1 / (g.b + 1))
    by_hand = np.inf if by_hand >= 1 else by_hand
    library = populations.oracle_threshold(pop, cfg.eps, g.name)
    assert by_hand == library == np.inf or abs(by_hand - library) < 1e-12, (g.name, by_hand, library)
    print(f"{g.name}: u* = {by_hand:.4f}")

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ## Proposition 4.5, checked numerically
# The paper states `Eff(G) ≥ Eff({X})` with equality iff all `u*_j` coincide, and argues that
# "`û*` is feasible for the group-conditional problem". That step fails whenever the marginal
# threshold violates a group (`R(u* | G_j) > ε`, as above), so we check three statements on
# random populations (`a_j ~ U(0.1, 1)`, `b_j ∈ {0, …, 16}`, random masses) and on populations
# whose groups are identical:
#
# 1. **corrected**: G-PAC ≥ the best single threshold valid in every group, with equality iff
#    the `u*_j` coincide — always true (each `u*_j ≥ min_i u*_i`);
# 2. **equality case**: identical groups give `Eff(G) = Eff({X})` exactly;
# 3. **as stated**: G-PAC ≥ marginal PAC — true when the marginal threshold happens to be
#    valid in every group, false in general.
#
# For the *oracle* partition (the argmax over all partitions, Definition 4.4) statement 3 does hold, but
# trivially: a partition into `k` pieces that each reproduce the population's joint law of
# (U, loss) — a random split — has `u*_j = u*` for all `j` (case 2), so the maximum over
# partitions is at least the marginal routed share.

# %% [markdown]
# **The random populations.** `n_random` populations of three groups, each drawn twice: once with
# a loss curve of its own per group (`a_j ~ U(0.1, 1)`, `b_j ∈ {0, 0.5, 1, 2, 4, 8, 16}`) and once
# with one curve shared by all groups; masses `~ U(0.1, 1)`. Every group has `U ~ Uniform(0, 1)`,
# so its risk is `a_j u^{b_j+1} / (b_j+1)` and its routed share is `u`: one vectorised bisection
# (`populations.sup_feasible`) over all populations, ε and groups gives every `u*_j`, another the
# marginal `u*`.

# %%
B_CHOICES = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def random_population(rng, identical):
    a, b = rng.uniform(0.1, 1.0), rng.choice(B_CHOICES)
    groups = []
    for j in range(3):
        if not identical:
            a, b = rng.uniform(0.1, 1.0), rng.choice(B_CHOICES)
        groups.append(populations.RiskGroup(f"g{j}", float(rng.uniform(0.1, 1.0)), a=float(a), b=float(b)))
    return populations.Population(tuple(groups))


rng = np.random.default_rng(cfg.seed)
kinds = [(i, identical) for i in range(int(cfg.n_random)) for identical in (False, True)]
pops = [random_population(rng, identical) for _, identical in kinds]
w = np.array([p.weights for p in pops])[:, None, :]  # (populations, 1, groups)
a = np.array([[g.a for g in p.groups] for p in pops], dtype=float)[:, None, :]
e = np.array([[g.b + 1 for g in p.groups] for p in pops], dtype=float)[:, None, :]
eps_scan = np.asarray(cfg.prop_eps, dtype=float)[None, :]  # (1, eps)


def group_risk(u):  # R(u | G_j) = a_j u^(b_j + 1) / (b_j + 1), u in [0, 1]
    return a * np.clip(u, 0.0, 1.0) ** e / e


u_groups = populations.sup_feasible(group_risk, np.broadcast_to(eps_scan[..., None],
                                                                np.broadcast_shapes(a.shape, eps_scan.shape + (1,))))
u_marg = populations.sup_feasible(lambda u: (w * group_risk(u[..., None])).sum(axis=-1),
                                  np.broadcast_to(eps_scan, w.shape[:1] + eps_scan.shape[1:]))
shares = {"routed_share_marginal": np.clip(u_marg, 0.0, 1.0),
          "routed_share_common": np.clip(u_groups.min(axis=-1), 0.0, 1.0),
          "routed_share_grouped": (w * np.clip(u_groups, 0.0, 1.0)).sum(axis=-1)}
max_group_risk = group_risk(u_marg[..., None]).max(axis=-1)
rows = []
for k, ((i, identical), p) in enumerate(zip(kinds, pops)):
    for j, e_j in enumerate(cfg.prop_eps):
        us = u_groups[k, j]
        rows.append({"population": i, "identical_groups": identical, "eps": float(e_j),
                     **{name: float(v[k, j]) for name, v in shares.items()},
                     "thresholds_equal": bool(np.all(us == us[0]) or np.ptp(np.minimum(us, 1.0)) < 1e-9),
                     "marginal_violates_a_group": bool(max_group_risk[k, j] > e_j + 1e-12),
                     "groups": "; ".join(f"w={g.weight:.2f} a={g.a:.2f} b={g.b:g}" for g in p.groups)})
scan = pd.DataFrame(rows)

# %% [markdown]
# The batched bisection must give what `populations.oracle_summary` gives population by population:

# %%
for k in range(20):
    for j, e_j in enumerate(cfg.prop_eps):
        one = populations.oracle_summary(pops[k], e_j)
        batched = [u_marg[k, j], *u_groups[k, j], *(v[k, j] for v in shares.values()), max_group_risk[k, j]]
        exact = [one["u_marginal"], *(one[f"u_{g}"] for g in pops[k].names), *(one[name] for name in shares),
                 one["max_group_risk_marginal"]]
        assert np.allclose(batched, exact, rtol=0, atol=1e-12), (k, e_j, batched, exact)  # +inf: route everything

# %%
het = scan[~scan["identical_groups"]]
ident = scan[scan["identical_groups"]]
differ, valid = het[~het["thresholds_equal"]], het[~het["marginal_violates_a_group"]]
grouped, common, marginal = "routed_share_grouped", "routed_share_common", "routed_share_marginal"
tol = 1e-9  # numerical tolerance of the inequalities
statements = [  # (statement, populations, cases, how many hold)
    ("corrected: grouped >= common valid threshold", "heterogeneous", het, het[grouped] >= het[common] - tol),
    ("corrected, strict when thresholds differ", "heterogeneous", differ, differ[grouped] > differ[common]),
    ("equality: grouped == marginal", "identical groups", ident, (ident[grouped] - ident[marginal]).abs() <= 1e-7),
    ("as stated: grouped >= marginal", "heterogeneous", het, het[grouped] >= het[marginal] - tol),
    ("as stated, when the marginal threshold is valid in every group", "heterogeneous", valid,
     valid[grouped] >= valid[marginal] - tol),
]
check = pd.DataFrame([{"statement": st, "populations": who, "cases": len(d), "holds": int(ok.sum())}
                      for st, who, d, ok in statements])
check["share_holding"] = check["holds"] / check["cases"]
plotting.save_table(check, "prop33_check", floatfmt=".3f")
check

# %%
assert check.loc[0, "share_holding"] == 1.0 and check.loc[1, "share_holding"] == 1.0
assert check.loc[2, "share_holding"] == 1.0 and check.loc[4, "share_holding"] == 1.0
worst = het.assign(loss=het["routed_share_marginal"] - het["routed_share_grouped"]).sort_values("loss", ascending=False).head(3)
worst[["eps", "routed_share_marginal", "routed_share_common", "routed_share_grouped", "groups"]].round(3)

# %% [markdown]
# The largest losses of G-PAC against marginal PAC come from a group whose risk the marginal
# threshold pushes above ε: the routed share of marginal PAC there is the price of the per-group
# guarantee, not a failure of grouping.

# %% [markdown]
# ## With finite calibration data
# The oracle thresholds assume infinite data. With `n_cal` calibration items (G-PAC splits them
# across groups by their mass) and a valid bound, the calibrated thresholds sit below the
# oracle, and the per-group violation rates show what each method guarantees.

# %% [markdown]
# **Calibrate.** `calibrations` times: marginal PAC on `n_cal` mixture items, G-PAC on each
# group's `round(w_j n_cal)` items (Algorithm 2), with the recipe `bound`, `sampling` and the
# first-crossing rule. `threshold` calibrates all repetitions at once (one row each).

# %%
recipe = Recipe(bound=cfg.bound, sampling=cfg.sampling)
rng = np.random.default_rng(cfg.seed)
loss, u, _ = pop.sample(cfg.n_cal, rng, size=cfg.calibrations)
thr = {"PAC": dict.fromkeys(pop.names, threshold(u, loss, eps=cfg.eps, alpha=cfg.alpha, recipe=recipe, rng=rng))}
thr["G-PAC"] = {}
for g, wj in zip(pop.names, pop.weights):
    lj, uj = pop.group(g).sample((cfg.calibrations, max(2, int(round(wj * cfg.n_cal)))), rng)
    thr["G-PAC"][g] = threshold(uj, lj, eps=cfg.eps, alpha=cfg.alpha, recipe=recipe, rng=rng)
oracle_thr = {"PAC": dict.fromkeys(pop.names, populations.oracle_threshold(pop, cfg.eps)),
              "G-PAC": {g: populations.oracle_threshold(pop, cfg.eps, g) for g in pop.names}}

# %% [markdown]
# **Measure** with the exact risks: per group the mean share routed, the oracle's share and the
# violation rate `P(R(û | G_j) > ε)`; over all groups the mass-weighted shares.

# %%
rows = []
for method, per_group in thr.items():
    total, total_oracle = 0.0, 0.0
    for g, wj in zip(pop.names, pop.weights):
        share, risk = pop.share(per_group[g], g), pop.risk(per_group[g], g)
        share_oracle = float(pop.share(oracle_thr[method][g], g))
        rows.append({"method": method, "group": g, "routed_share": float(np.mean(share)), "routed_share_oracle": share_oracle,
                     "violation_rate": float(np.mean(risk > cfg.eps)), "mean_risk": float(np.mean(risk))})
        total += wj * float(np.mean(share))
        total_oracle += wj * share_oracle
    rows.append({"method": method, "group": ALL, "routed_share": total, "routed_share_oracle": total_oracle,
                 "violation_rate": np.nan, "mean_risk": np.nan})
cal = pd.DataFrame(rows).assign(calibrations=cfg.calibrations)
plotting.save_table(cal, "oracle_partition_calibrated", floatfmt=".4f")
cal.round(3)

# %%
g_hard = cal[(cal["method"] == "PAC") & (cal["group"] == "hard")]["violation_rate"].iloc[0]
g_gpac = cal[(cal["method"] == "G-PAC") & (cal["group"] != ALL)]["violation_rate"]
mcse = float(metrics.mcse(cfg.alpha, cfg.calibrations))
print(f"PAC violates the hard group in {100 * g_hard:.1f}% of calibrations; "
      f"G-PAC's worst group: {100 * g_gpac.max():.1f}% (nominal {100 * cfg['alpha']:g}%, MCSE {100 * mcse:.1f}%)")
assert g_gpac.max() <= cfg.alpha + 3 * mcse
