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
# # 13 — Validity audit: does every upper confidence bound deliver P(R ≤ ε) ≥ 1 − α?
#
# **Reproduces** no paper artefact: it audits the assumption behind Theorems 3.1–3.4
# (Assumption "UCB validity") for the paper's bounds (App. A: `clt`, `hoeffding`) and four
# finite-sample valid ones (`hoeffding_bentkus`, `empirical_bernstein`, `wsr`,
# `clopper_pearson`), under each expert-labelling scheme (`resample` = paper Alg. 1,
# `bernoulli`, `full`) and both selection rules (`first-crossing`, the paper's `max`).
#
# **Population** (`gpac_utils.paper.theory.populations.AUDIT_POPULATION`): two groups with `U ~ Uniform(0, 1)` and
# binary loss, `P(loss = 1 | U = u)` = `0.8 u^3` ("informative", `R(u) = 0.2 u^4`) and `0.5`
# ("flat", `R(u) = 0.5 u`). The risk is known in closed form, so the violation event
# `R(û | G_j) > ε` of every calibration is computed exactly — no test set, no Monte Carlo error
# beyond the calibrations themselves.
#
# **Reads** nothing. **Writes** `figures/tables/validity_audit.{csv,md}` (every cell),
# `figures/tables/validity_audit_summary.{csv,md}`, `figures/tables/validity_audit_oracle_ratio.{csv,md}`,
# `figures/validity_audit.{png,pdf}` (heat map), `figures/validity_audit_oracle_ratio.{png,pdf}`.
#
# **Runtime** (measured): fast profile (100 calibrations per cell, group sizes {25, 100, 300})
# ≈ 5 s; paper profile (1 000 calibrations per cell, group sizes {25, 50, 100, 300, 1000},
# 1 440 cells) ≈ 70 s for the audit in one process, 91 s for the notebook beside another
# notebook under `make reproduce` (2 shared cores; `jobs: auto` takes the runner's share of the
# cores, `$GPAC_CPUS`). `wsr` dominates: O(m · 64) per calibration with m = n/π terms under
# resampling — the n = 1000 cells take ≈ 45 s of it (`benchmarks/bench_reproduce.py`).

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm

from gpac_utils.paper import plotting
from gpac_utils.paper.theory import audit as A
from gpac_utils.paper.theory import populations
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
bounds = None  # UCBs to audit, e.g. ["clt", "wsr"]
calibrations = None  # independent calibrations per cell (and group)
jobs = None  # worker processes (an int, or "auto": the cores the runner gives this notebook)
overrides = {}  # any other setting of notebooks/config/13_validity_audit.yaml

# %%
cfg = config.load("13_validity_audit", profile, bounds=bounds, calibrations=calibrations, jobs=jobs, **overrides)
cfg

# %% [markdown]
# ## The population and its oracle thresholds
# `u*_j = sup{u : R(u | G_j) ≤ ε}` — the PAC-optimal threshold of Eq. (pac-optimal-threshold);
# for a fixed threshold the PAC probability is 0 or 1, so it does not depend on α. Efficiency
# below is `P(U ≤ û | G_j) / P(U ≤ u*_j | G_j)` = `û / u*_j` (û = −∞, "always think", counts 0).

# %%
pop = populations.AUDIT_POPULATION
pd.DataFrame([{"group": g.name, "P(loss|u)": f"{g.a:g} u^{g.b:g}", "R(1)": float(g.risk(1.0)),
               **{f"u*(eps={e:g})": float(populations.oracle_threshold(pop, e, g.name)) for e in cfg.eps_list}}
              for g in pop.groups])

# %% [markdown]
# ## Run the audit
# Cells: every bound × (scheme, π) × rule × n_group × ε × group. `full` is π = 1, and
# `bernoulli` at π = 1 would query every item exactly like `full`, so both appear once as
# (full, 1). Calibration samples are shared by all schemes and bounds of an `n` (common random
# numbers), UCB curves by both rules and both ε.

# %%
t0 = time.perf_counter()
audit = A.validity_audit(pop, cfg)
elapsed = time.perf_counter() - t0
print(f"audit: {len(audit)} rows in {elapsed:.1f} s ({A.resolve_jobs(cfg.jobs)} process(es))")
audit.groupby("bound")["ucb_seconds"].sum().div(len(cfg.rules) * len(cfg.eps_list) * len(pop.groups)).round(1)

# %%
cols = ["bound", "kind", "scheme", "pi", "rule", "n_group", "eps", "group", "calibrations", "violation_rate",
        "mcse", "pass", "oracle_ratio", "oracle_ratio_se", "always_think", "mean_labels"]
plotting.save_table(audit[cols], "validity_audit", floatfmt=".3f")
summary = A.audit_summary(audit)
plotting.save_table(summary, "validity_audit_summary", floatfmt=".3f")
summary

# %% [markdown]
# ## Heat map: violation rate per cell
# Rows: bound / scheme / π; columns: n_group and ε; each entry is the *worst* of the two
# groups. Colour is centred on α; a dot marks a cell whose violation rate exceeds
# α + 3·MCSE (MCSE = √(α(1−α)/calibrations)).

# %%
def heat(ax, d, title, labels=True):
    d = d.assign(row=d["bound"] + " / " + d["scheme"] + " π=" + d["pi"].map("{:g}".format),
                 col="n=" + d["n_group"].astype(str) + "\nε=" + d["eps"].map("{:g}".format))
    worst = d.groupby(["row", "col"], sort=False)["violation_rate"].max().unstack("col")
    worst = worst[sorted(worst.columns, key=lambda c: (float(c.split("ε=")[1]), int(c[2:].split("\n")[0])))]
    norm = TwoSlopeNorm(vmin=0.0, vcenter=cfg.alpha, vmax=max(0.5, float(audit["violation_rate"].max())))
    im = ax.imshow(worst.to_numpy(), cmap="RdBu_r", norm=norm, aspect="auto")
    thr = cfg.alpha + 3 * np.sqrt(cfg.alpha * (1 - cfg.alpha) / cfg.calibrations)
    for (i, j), v in np.ndenumerate(worst.to_numpy()):
        ax.text(j, i, f"{100 * v:.0f}" + ("•" if v > thr else ""), ha="center", va="center", fontsize=6,
                color="white" if v > 3 * cfg.alpha else "black")
    ax.set_xticks(range(worst.shape[1]), worst.columns, fontsize=6)
    ax.set_yticks(range(worst.shape[0]), worst.index if labels else [], fontsize=6)
    ax.set_title(title, fontsize=9)
    ax.grid(False)
    return im


fig, axes = plt.subplots(1, len(cfg.rules), figsize=(5 * len(cfg.rules) + 2, 9), squeeze=False)
for i, (ax, rule) in enumerate(zip(axes[0], cfg.rules)):
    im = heat(ax, audit[audit["rule"] == rule], f"violation rate (%), rule = {rule}", labels=i == 0)
fig.colorbar(im, ax=axes[0].tolist(), shrink=0.5, label="P(R(û) > ε)")
plotting.savefig(fig, "validity_audit")

# %% [markdown]
# ## Oracle ratio: what validity costs
# Mean oracle ratio (routed share relative to the oracle threshold's) (first-crossing), per n_group, for the paper's
# `clt` + `resample` and every valid bound under its valid scheme (`full` at π = 1, `bernoulli`
# at π < 1). Bernoulli labelling at π queries about π·n items, resampling about n — compare
# like with like at π = 1.

# %%
fc = audit[audit["rule"] == "first-crossing"]
fig, axes = plt.subplots(len(cfg.eps_list), len(pop.groups), figsize=(4.2 * len(pop.groups), 3.2 * len(cfg.eps_list)),
                         squeeze=False, sharex=True, sharey=True)
for (i, eps), (j, g) in [((i, e), (j, g)) for i, e in enumerate(cfg.eps_list) for j, g in enumerate(pop.names)]:
    ax = axes[i][j]
    d = fc[(fc["eps"] == eps) & (fc["group"] == g) & (fc["pi"] == 1.0)]
    for (bound, scheme), s in d.groupby(["bound", "scheme"]):
        if (bound == "clt" and scheme == "resample") or (scheme == "full" and bound != "clt"):
            s = s.sort_values("n_group")
            ax.errorbar(s["n_group"], s["oracle_ratio"], yerr=2 * s["oracle_ratio_se"], marker="o", ms=3,
                        label=f"{bound} ({scheme})", lw=2.5 if bound == "clt" else 1.2)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_title(f"{g}, ε = {eps:g}, π = 1", fontsize=9)
    ax.set_xlabel("n_group")
    ax.set_ylabel("routed share / oracle's (oracle ratio)")
axes[0][-1].legend(fontsize=7)
fig.tight_layout()
plotting.savefig(fig, "validity_audit_oracle_ratio")

# %%
n_ref = 300 if 300 in cfg.group_sizes else max(cfg.group_sizes)
eff = A.oracle_ratio_vs_clt(audit, n_group=n_ref)
plotting.save_table(eff, "validity_audit_oracle_ratio", floatfmt=".3f")
eff.pivot_table(index=["bound", "scheme", "pi"], columns="eps", values="ratio_to_clt").round(2)

# %% [markdown]
# ## The README paragraph
# Generated from the table above (`gpac_utils.paper.theory.audit.audit_paragraph`), so the README quotes the numbers of
# the committed paper-profile run.

# %%
print(A.audit_paragraph(audit, n_group=n_ref, alpha=cfg.alpha))

# %% [markdown]
# ## Checks
# The valid bounds under the i.i.d. schemes must pass every first-crossing cell (a failure
# would be a bug, or a 3-sigma fluke in about one cell in 700); `clt` under resampling is
# expected to fail somewhere.

# %%
valid_fc = audit[(audit["kind"] == "valid") & audit["scheme"].isin(A.VALID_SCHEMES) & (audit["rule"] == "first-crossing")]
assert valid_fc["pass"].mean() >= 0.99, valid_fc[~valid_fc["pass"]]
assert (audit["oracle_ratio"] >= 0).all()
