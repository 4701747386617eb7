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
# # 35 — Risk among routed items: a second guarantee, its audit, and what it costs on real outputs
#
# **Reproduces** no paper artefact. The paper certifies the *joint* risk
# $R(u \mid G_j) = E[\ell\,\mathbf 1\{U \le u\} \mid G_j]$ (Definition 3.1 (`def:group-conditional-pac`),
# Theorem 4.2 (`thm:known-grouping`); the formula is written out in Section 4.2, beside Eq. (4)):
# the error that routing adds to the whole group. This notebook adds the error *among the routed
# items*, $R_c(u \mid G_j) = E[\ell \mid U \le u, G_j]$, certified per group as
# $P(R_c(\hat u_j \mid G_j) \le \varepsilon) \ge 1 - \alpha$ (`risk="routed"` of PAC, G-PAC and C-PAC;
# `gpac calibrate --risk routed`; `gpac_utils.risks`). It audits that guarantee as notebook 13 audits
# the joint one, on populations whose routed risk is known exactly, and measures on the real MATH
# Level-5 table how much less it routes than the joint risk at the same ε.
#
# **Reads** `data/real/mathl5_zeroeval.csv` (the real table). **Writes** `figures/tables/routed_risk_audit.{csv,md}`
# (every cell), `figures/tables/routed_risk_audit_summary.{csv,md}`, `figures/tables/routed_risk_real.{csv,md}`,
# `figures/routed_risk.{png,pdf}`.
#
# **Runtime** (measured on 2 cores shared with other jobs): fast profile ≈ 25 s; paper profile ≈ 110 s (the
# audit ≈ 60 s of it).

# %% [markdown] tags=["remove-cell"]
# ## Terms used in this notebook
#
# The glossary entries this notebook links (copied from `docs/glossary.md` by
# `workflow/scripts/glossary_cells.py`; edit them there). Below, hover over a linked term for its
# definition; a click brings you here.
#
# :::{glossary}
# MCSE
# : Monte Carlo standard error of an estimated rate over a finite number of trials,
#   $\sqrt{p(1-p)/T}$ at a rate $p$; a valid method's violation rate should stay within
#   $\alpha + 3\,\mathrm{MCSE}$, the MCSE taken at $p = \alpha$ (the audits' pass limit, 7.07 % at
#   $\alpha$ = 5 % and $T$ = 1 000; a table's `mcse` column is taken at its observed rate).
# :::

# %% [markdown]
# **Learning objectives.** After this notebook you can
# - tell the two risks apart and say which one a user of the cheap model's answers cares about;
# - explain why the routed risk, which is not monotone in $u$, cannot be selected by first-crossing and how a
#   Learn-then-Test procedure (the fallback procedure over a grid fixed in advance) makes it valid;
# - read the audit: the violation rate $P(R_c(\hat u) > \varepsilon)$ of each cell against $\alpha$, within its
#   {term}`MCSE`, and why the joint risk's threshold and a scan without a multiplicity step fail it;
# - decide, from the real table, when the stronger guarantee is worth what it costs in routed share.
#
# **Prerequisites.** `13_validity_audit` (how an audit cell is built and read), `31_realdata_case_study` (the
# real table); from testing: p-values and the family-wise error rate.

# %%
import math
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from gpac_utils import GroupWarning, Recipe, calibrate, data, risks, sampling
from gpac_utils.experiment import calibrator_seed, trial_split
from gpac_utils.metrics import mcse
from gpac_utils.paper import plotting
from gpac_utils.paper.theory.conditional import StepGroup, routed_oracle, routed_risk
from gpac_utils.paper.theory.populations import RiskGroup
from gpac_utils.workflow import config, paths

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
calibrations = None  # independent calibrations per audit cell
n_trials = None  # random calibration/test splits of the real table
overrides = {}  # any other setting of notebooks/config/35_routed_risk.yaml

# %%
cfg = config.load("35_routed_risk", profile, calibrations=calibrations, n_trials=n_trials, **overrides)
cfg

# %% [markdown]
# ## Two risks
# With $F(u) = P(U \le u \mid G_j)$ the routed share, $R(u) = R_c(u)\,F(u)$. So $R_c \le \varepsilon$ implies
# $R \le \varepsilon$: the routed risk is the stronger guarantee and routes less. The gap is widest when the
# routed share is small: the joint risk at ε = 0.1 allows a threshold that routes 20 % of a group with
# half of those answers wrong ($R = 0.2 \cdot 0.5 = 0.1$). Whoever receives the cheap model's answers sees
# $R_c$, not $R$.
#
# Three populations with a routed risk in closed form (`U ~ Uniform(0, 1)`, binary loss):
# - **informative**: $P(\ell = 1 \mid u) = 0.8 u^3$ (notebook 13's), $R_c(u) = 0.2 u^3$, increasing;
# - **dip**: loss probability 0.3 below $u = 0.1$, 0.02 up to 0.6, 0.4 above: the most confident items are
#   often wrong, so $R_c$ falls, then rises (not monotone);
# - **flat**: loss probability 0.16 everywhere, just above ε = 0.15: every threshold violates.

# %%
POPULATION = (
    RiskGroup("informative", 1.0, a=0.8, b=3.0),
    StepGroup("dip", (0.0, 0.1, 0.6, 1.0), (0.3, 0.02, 0.4)),
    StepGroup("flat", (0.0, 1.0), (0.16,)),
)
u_axis = np.linspace(0.005, 1, 400)
oracles = pd.DataFrame(
    [
        {
            "group": g.name,
            "eps": eps,
            "u*_routed": routed_oracle(g, eps),
            "routed share": g.share(routed_oracle(g, eps)),
        }
        for g in POPULATION
        for eps in cfg.eps_list
    ]
)
oracles

# %% [markdown]
# ## Why the selection needs its own argument
# First-crossing (`gpac_utils.selection`) is valid because $R$ is non-decreasing: a threshold with risk
# above ε lies past the *smallest* such grid point, where the bound must have failed. For the `dip` group
# $R_c$ is above ε at small $u$ and below it further up, so that argument says nothing. The routed risk
# is selected by a Learn-then-Test procedure (Angelopoulos et al. 2021), written out with its proof in
# `gpac_utils.risks`:
#
# 1. a grid $u_1 < \dots < u_K$ (64 evenly spaced points), fixed in advance, one null hypothesis
#    $H_k: R_c(u_k) > \varepsilon$ per point;
# 2. a p-value per point from the $N_k$ routed calibration items (those with $U \le u_k$): given $N_k = m$
#    they are i.i.d. from the law given $U \le u_k$, with mean loss $R_c(u_k)$, so the Hoeffding–Bentkus
#    (or exact binomial) p-value of $m$ i.i.d. terms is valid given $N_k$, hence unconditionally;
# 3. the fallback procedure: $H_k$ is tested at $\alpha/K$ plus the level of $H_{k-1}$ when that was
#    rejected; the family-wise error is at most α for any dependence between the p-values;
# 4. $\hat u$ is the largest rejected point.
#
# A violation $R_c(\hat u) > \varepsilon$ is a rejected true hypothesis, so its probability is at most α. Pure
# fixed-sequence testing from the smallest $u$ up would stop at once: the first points route too few items
# to reject anything. One calibration of the `dip` group by hand:

# %%
dip = POPULATION[1]
loss1, u1 = dip.sample(1000, np.random.default_rng([cfg.seed, 99]))
curve = calibrate.routed_risk_curve(u1, loss1, eps=0.15, alpha=cfg.alpha)
assert curve["selected"].sum() <= 1
t_hand = float(calibrate.routed_threshold(u1, loss1, eps=0.15, alpha=cfg.alpha))
assert (curve.loc[curve["selected"], "u"].tolist() or [-math.inf])[0] == t_hand
curve.iloc[::6].round(4)

# %% [markdown]
# The levels climb by α/64 along each run of rejections and reset after a non-rejection; the scan goes on past
# the high-risk points at small $u$ and certifies the plateau of the dip.

# %% [markdown]
# ## The audit
# Cells: population group × n × ε × labelling (full, or bernoulli at π) × p-value (Hoeffding–Bentkus; the
# exact binomial under full labels). For each cell, `calibrations` independent calibration sets, one draw of
# the labels, and four selections from the same draws:
# - **routed** — the fallback procedure (what `risk="routed"` runs; its thresholds are `calibrate.routed_threshold`'s);
# - **fixed sequence** — the same p-values, stopping at the first non-rejection from the smallest $u$;
# - **no multiplicity step** — the largest point with p-value ≤ α (each point tested alone);
# - **joint** — the joint risk's threshold at the same ε (`calibrate.batch_threshold`, the same recipe).
#
# The violation rate is the share of calibrations with $R_c(\hat u) > \varepsilon$, exact for each one;
# the oracle ratio is $F(\hat u) / F(u^*_c)$ with $u^*_c$ the largest $u$ with $R_c(u) \le \varepsilon$.


# %%
def audit_cell(group, n, eps, label_prob, bound, seeds, *, alpha, calibrations):
    loss, u = group.sample((calibrations, int(n)), np.random.default_rng(seeds))
    scheme = "full" if label_prob == 1 else "bernoulli"
    recipe = Recipe(bound=bound, sampling=scheme, label_prob=None if scheme == "full" else label_prob)
    draw_seed = seeds + [1]
    d = sampling.draw(u, loss, scheme, label_prob, np.random.default_rng(draw_seed), shuffle=False)
    grid = risks.routed_grid()
    p, _ = risks.routed_pvalues(d.z, d.scores, grid, eps, d.term_range, bound)
    first_only = np.eye(grid.size)[0]
    chosen = {
        "routed": risks.largest_rejected(grid, risks.fallback_reject(p, alpha)),
        "fixed sequence": risks.largest_rejected(grid, risks.fallback_reject(p, alpha, weights=first_only)),
        "no multiplicity step": risks.largest_rejected(grid, p <= alpha),
        "joint": calibrate.batch_threshold(
            u, loss, eps=eps, alpha=alpha, recipe=recipe, rng=np.random.default_rng(draw_seed)
        ),
    }
    oracle_share = group.share(routed_oracle(group, eps))
    rows = []
    for procedure, thr in chosen.items():
        rate = float(np.mean(routed_risk(group, thr) > eps))
        rows.append(
            {
                "group": group.name,
                "n": int(n),
                "eps": eps,
                "scheme": scheme,
                "pi": label_prob,
                "p_value": bound,
                "procedure": procedure,
                "calibrations": calibrations,
                "violation_rate": rate,
                "mcse": float(mcse(rate, calibrations)),
                "oracle_ratio": float(np.mean(group.share(thr)) / oracle_share) if oracle_share > 0 else np.nan,
                "always_think": float(np.mean(~np.isfinite(thr))),
            }
        )
    return rows, chosen["routed"], (u, loss, recipe, draw_seed)


def routed_audit(groups, *, group_sizes, eps_list, label_probs, alpha, calibrations, seed):
    rows, check = [], None
    for gi, group in enumerate(groups):
        for ni, n in enumerate(group_sizes):
            for ei, eps in enumerate(eps_list):
                for pi_i, label_prob in enumerate(label_probs):
                    for bound in (
                        ("hoeffding_bentkus", "clopper_pearson") if label_prob == 1 else ("hoeffding_bentkus",)
                    ):
                        seeds = [int(seed), gi, ni, ei, pi_i]
                        cell, routed, inputs = audit_cell(
                            group, n, eps, label_prob, bound, seeds, alpha=alpha, calibrations=calibrations
                        )
                        rows += cell
                        if check is None:
                            check = (routed, inputs, eps)
    out = pd.DataFrame(rows)
    out["pass"] = out["violation_rate"] <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / out["calibrations"])
    return out, check


t0 = time.perf_counter()
audit, (routed_thr, (u_c, loss_c, recipe_c, seed_c), eps_c) = routed_audit(
    POPULATION, **cfg.pick("group_sizes", "eps_list", "label_probs", "alpha", "calibrations", "seed")
)
print(f"audit: {len(audit)} rows in {time.perf_counter() - t0:.1f} s")
# the audit's routed thresholds are those of the library, from the same draws
same = calibrate.batch_threshold(
    u_c, loss_c, eps=eps_c, alpha=cfg.alpha, recipe=recipe_c, rng=np.random.default_rng(seed_c), risk="routed"
)
assert np.array_equal(same, routed_thr)
plotting.save_table(audit, "routed_risk_audit", floatfmt=".3f")

# %%
limit = cfg.alpha + 3 * math.sqrt(cfg.alpha * (1 - cfg.alpha) / cfg.calibrations)
summary = (
    audit.groupby("procedure", sort=False)
    .apply(
        lambda d: pd.Series(
            {
                "cells": len(d),
                "failing_cells": int((~d["pass"]).sum()),
                "max_violation": d["violation_rate"].max(),
                "worst_cell": (lambda w: f"{w.group}, n={w.n}, eps={w.eps:g}, {w.scheme} pi={w.pi:g}, {w.p_value}")(
                    d.loc[d["violation_rate"].idxmax()]
                ),
                "mean_oracle_ratio": d["oracle_ratio"].mean(),
            }
        ),
        include_groups=False,
    )
    .reset_index()
)
plotting.save_table(summary, "routed_risk_audit_summary", floatfmt=".3f")
summary

# %% [markdown]
# ## Checks
# The routed risk's procedure (and fixed sequence, its special case) must pass every cell; the other two
# are expected to fail somewhere: the joint risk's threshold does not bound the routed risk, and a scan
# without a multiplicity step finds, somewhere on a flat null, a point that rejects by chance.

# %%
routed_rows = audit[audit["procedure"] == "routed"]
worst = routed_rows.loc[routed_rows["violation_rate"].idxmax()]
assert audit[audit["procedure"].isin(["routed", "fixed sequence"])]["pass"].all()
assert not audit[audit["procedure"] == "joint"]["pass"].all()
display(
    Markdown(
        f"**Worst cell of the routed risk:** {worst.group}, n = {worst.n}, ε = {worst.eps:g}, {worst.scheme} "
        f"(π = {worst.pi:g}), {worst.p_value}: violation rate {100 * worst.violation_rate:.1f} % "
        f"(MCSE {100 * worst.mcse:.1f} %), pass limit α + 3 MCSE = {100 * limit:.1f} %, over "
        f"{int(worst.calibrations)} calibrations. The joint risk's thresholds violate the routed risk in up to "
        f"{100 * audit[audit['procedure'] == 'joint']['violation_rate'].max():.0f} % of calibrations; "
        "without a multiplicity step in up to "
        f"{100 * audit[audit['procedure'] == 'no multiplicity step']['violation_rate'].max():.1f} %. Fixed sequence is "
        f"valid but always thinks in {100 * audit[audit['procedure'] == 'fixed sequence']['always_think'].mean():.0f} % "
        "of all calibrations (it stops at the first point, which routes almost nothing). The joint thresholds violate "
        "the routed risk in more than half of the calibrations in "
        + "; ".join(
            f"{int((d['violation_rate'] > 0.5).sum())} of {len(d)} `{g}` cells"
            + (
                f" (n = {', '.join(map(str, sorted(set(d.loc[d['violation_rate'] > 0.5, 'n']))))})"
                if (d["violation_rate"] > 0.5).any()
                else ""
            )
            for g, d in audit[audit["procedure"] == "joint"].groupby("group", sort=False)
        )
        + "."
    )
)

# %% [markdown]
# ## The real table: joint vs routed at the same ε
# The real MATH Level-5 outputs (notebook 31's table: o1-mini thinking, gpt-4o-mini not), score
# `score_disagree`, known groups the subjects. For each of `n_trials` random splits (half calibrates),
# PAC and G-PAC with the valid recipe, once per risk, at each ε of `real_eps`; on the test half: the routed
# share, the joint test error (mean of loss × routed) and the error among the routed items.

# %%
table = data.read_table(paths.REPO_ROOT / cfg.data_path, dict(cfg.columns))
u_all = table[cfg.score].to_numpy(float)
loss_all = table[data.LOSS].to_numpy(float)
groups_all = table[data.GROUP].to_numpy(str)
print(f"{len(table)} items, {table[data.GROUP].nunique()} subjects, loss rate {loss_all.mean():.3f}")

rows = []
for trial in range(cfg.n_trials):
    cal, test = trial_split(len(table), cfg.cal_ratio, cfg.seed, trial)
    for eps in cfg.real_eps:
        for method in ("PAC", "G-PAC"):
            for risk in ("joint", "routed"):
                cal_obj = calibrate.calibrator(
                    method, eps, alpha=cfg.alpha, risk=risk, seed=calibrator_seed(cfg.seed, trial)
                )
                known = calibrate.method(method).groups == "known"  # G-PAC: the subjects are its groups
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GroupWarning)  # small subjects always think, by design
                    cal_obj.fit(u_all[cal], loss_all[cal], groups_all[cal] if known else None)
                    r = cal_obj.route(u_all[test], groups_all[test] if known else None)
                lt = loss_all[test]
                rows.append(
                    {
                        "trial": trial,
                        "eps": eps,
                        "method": method,
                        "risk": risk,
                        "routed_share": r.mean(),
                        "error": risks.RISKS["joint"].evaluate(lt, r),  # the joint risk's test error
                        "routed": int(r.sum()),
                        "routed_losses": float(lt[r].sum()),
                    }
                )
real = pd.DataFrame(rows)
real_summary = (
    real.groupby(["method", "eps", "risk"], sort=False)
    .agg(
        routed_share=("routed_share", "mean"),
        error=("error", "mean"),
        routed=("routed", "sum"),
        routed_losses=("routed_losses", "sum"),
        trials=("trial", "nunique"),
    )
    .reset_index()
)
real_summary["error_among_routed"] = real_summary["routed_losses"] / real_summary["routed"].where(
    real_summary["routed"] > 0
)
real_summary = real_summary.drop(columns=["routed", "routed_losses"])
plotting.save_table(real_summary, "routed_risk_real", floatfmt=".3f")
real_summary

# %%
wide = real_summary.pivot_table(index=["method", "eps"], columns="risk", values=["routed_share", "error_among_routed"])
ref_eps = 0.1 if 0.1 in cfg.real_eps else cfg.real_eps[0]
pac = wide.loc[("PAC", ref_eps)]
gpac = wide.loc[("G-PAC", ref_eps)]
display(
    Markdown(
        f"At ε = {ref_eps:g}, marginal PAC routes {100 * pac[('routed_share', 'joint')]:.1f} % of the test items under "
        f"the joint risk, and {100 * pac[('error_among_routed', 'joint')]:.1f} % of those routed answers are wrong; "
        f"under the routed risk it routes {100 * pac[('routed_share', 'routed')]:.1f} %, with "
        f"{100 * np.nan_to_num(pac[('error_among_routed', 'routed')]):.1f} % of them wrong. G-PAC on the subjects: "
        f"{100 * gpac[('routed_share', 'joint')]:.1f} % (joint) vs {100 * gpac[('routed_share', 'routed')]:.1f} % "
        f"(routed). Over every ε and both methods the routed risk routes "
        f"{100 * (1 - wide[('routed_share', 'routed')].sum() / wide[('routed_share', 'joint')].sum()):.0f} % less than "
        "the joint risk."
    )
)

# %% [markdown]
# ## One figure
# (a) The routed risk of the three populations against $u$, with the two ε; (b) the audit's worst violation
# rate per procedure; (c) the real table: routed share of PAC under each risk against ε.

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
for g in POPULATION:
    axes[0].plot(u_axis, routed_risk(g, u_axis), label=g.name, lw=1.8)
for eps in cfg.eps_list:
    axes[0].axhline(eps, color="grey", ls=":", lw=1)
axes[0].set(xlabel="threshold u", ylabel="routed risk E[loss | U ≤ u]", title="(a) routed risk", ylim=(0, 0.45))
axes[0].legend(fontsize=8)
worst_by = audit.groupby("procedure", sort=False)["violation_rate"].max()
axes[1].barh(range(len(worst_by)), 100 * worst_by.to_numpy(), color=["#1f3b73", "#4a7bb7", "#c0392b", "#e67e22"])
axes[1].set_yticks(range(len(worst_by)), worst_by.index, fontsize=8)
axes[1].axvline(100 * limit, color="black", ls=":", lw=1.2, label=f"α + 3 MCSE ({100 * limit:.1f} %)")
axes[1].set(xlabel="worst violation rate (%)", title="(b) audit: worst cell")
axes[1].legend(fontsize=8)
for risk, color in (("joint", "#e67e22"), ("routed", "#1f3b73")):
    d = real_summary[(real_summary["method"] == "PAC") & (real_summary["risk"] == risk)]
    axes[2].plot(d["eps"], 100 * d["routed_share"], marker="o", color=color, label=f"{risk} risk")
axes[2].set(xlabel="ε", ylabel="routed share (%)", title="(c) real table, PAC")
axes[2].legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, "routed_risk")

# %% [markdown]
# ## When to prefer the routed risk
# The joint risk's routed items on this table, against ε (the error among them is a test-set estimate, not a
# guarantee):

# %%
joint_pac = real_summary[(real_summary["method"] == "PAC") & (real_summary["risk"] == "joint")]
over = joint_pac[joint_pac["error_among_routed"] > joint_pac["eps"]]
display(
    Markdown(
        "Under the joint risk, the error among PAC's routed test items is "
        + ", ".join(f"{100 * r.error_among_routed:.1f} % at ε = {r.eps:g}" for r in joint_pac.itertuples())
        + (
            f": above ε at {', '.join(f'{e:g}' for e in over['eps'])}. "
            if len(over)
            else ": below ε at every ε here, so on this table the joint thresholds happen to keep the routed "
            "answers' error under ε, and the routed guarantee mostly buys a *certificate* of it. "
        )
        + f"Its price is the routed share: the routed risk tests each grid point on the calibration items routed "
        f"there alone (a share of the {len(cal)} calibration items, and of each subject's), so G-PAC's small subjects "
        "always think under it."
    )
)

# %% [markdown]
# - **The cheap answers are a product of their own.** When the non-thinking model's answers go to users who
#   never see the rest of the group (a fast lane, a cached tier), what they see is $R_c$, the share of them that
#   is wrong where the thinking model is right (so their accuracy is at most $1 - R_c$): the joint risk
#   bounds the group-wide damage, $R = R_c F$, and at a small routed share $F$ it allows an error among the
#   routed items of up to $\varepsilon / F$ (the audit's `joint` rows: per group, the cells in which the
#   joint thresholds violate the routed risk in most calibrations are counted under the checks above).
# - **Prefer the joint risk** when the cost is what the *group* loses against always thinking (the paper's
#   framing: the extra error of the composite system), and when labels are few: the routed risk needs enough
#   routed items at a grid point to certify it (with $m$ loss-free items the binomial p-value is
#   $(1-\varepsilon)^m$), and the fallback procedure starts each run of rejections at α/64.
