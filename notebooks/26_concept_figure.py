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
# # 26 — Feasibility vs efficiency: PAC, G-PAC and conditional control, drawn from data
#
# **Reproduces** `fig:clustered-pac`, the paper's concept picture (a TikZ sketch of points in
# three groups): *PAC* — one threshold for all inputs, feasible but not group-wise efficient or
# valid; *G-PAC* — one threshold $\hat u_j$ per group, feasible and group-wise efficient;
# *conditional PAC* — a guarantee per input, "most efficient but impossible" (the paper's caption; Section 2
# adds that a per-input guarantee forces the thinking model for almost every input). Here the picture is
# drawn from a table instead of invented points: the population risk curves
# $R(u\mid G_j)=\mathbb E[\ell\,\mathbf 1\{U\le u\}\mid G_j]$ of each category over the whole
# table (no calibration noise), the single marginal threshold against per-group thresholds,
# and the share of each group routed to the cheap model, compared with an item-wise oracle.
#
# **Reads** `data/simulated/math500__qwen.parquet` by default (simulated; parameters `dataset`,
# `pair`, `score`); with `data_source="generated"` the scored table of `02_scores` for `dataset`
# and `pair`, or a path to a table in the data schema (with `columns`). The table needs known
# groups (`group`); a benchmark outside the paper needs an explicit `eps`.
# **Writes** `figures/clustered-pac.{png,pdf}` and `figures/tables/clustered-pac_thresholds.{csv,md}`
# (from another source the names end in `__<source>`).
#
# **Runtime**: a few seconds on both profiles (no randomness).

# %%
import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gpac_utils.paper import plotting, reference, sources
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
data_source = "simulated"  # "simulated" | "generated" (the tables 02_scores wrote) | a path to a table
dataset = None  # a benchmark with known groups
score = None  # score column
overrides = {}  # any other setting of notebooks/config/26_concept_figure.yaml

# %%
cfg = config.load("26_concept_figure", profile, data_source=data_source, dataset=dataset, score=score, **overrides)
source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
pair = cfg.pair if source.kind != "path" else None
name = source.dataset if source.kind == "path" else cfg.dataset
eps = reference.benchmark_eps([name], cfg.eps, sources.paper_eps("known", pair))[name]
table = sources.load_table(source, name, pair, notebook="26_concept_figure", scores=[cfg.score])
suffix = "" if source.is_simulated else f"__{source.tag(name if pair else None, pair)}"
cfg, eps

# %% [markdown]
# ## Population thresholds
# PAC: the largest $u$ with overall risk $\le\varepsilon$; G-PAC: the largest $u_j$ with
# $R(u_j\mid G_j)\le\varepsilon$ per group; the oracle routes exactly the items whose own loss is
# at most $\varepsilon$ (for the binary loss: the items the cheap model does not get wrong).


# %%
def population_thresholds(table: pd.DataFrame, score: str, eps: float) -> pd.DataFrame:
    """The largest thresholds with population risk <= eps: one for all (PAC), one per group (G-PAC)."""
    u = table[score].to_numpy(float)
    loss = table["loss"].to_numpy(float)
    g = table["group"].to_numpy(str) if "group" in table.columns else np.full(len(u), "all")

    def best(uu, ll):
        cand = np.unique(uu)
        risk = np.array([np.mean(ll * (uu <= c)) for c in cand])
        ok = risk <= eps
        return float(cand[ok].max()) if ok.any() else -math.inf

    t_all = best(u, loss)
    rows = []
    for name in sorted(set(g.tolist())):
        m = g == name
        t_g = best(u[m], loss[m])
        rows.append(
            {
                "group": name,
                "n": int(m.sum()),
                "pac_threshold": t_all,
                "pac_risk": float(np.mean(loss[m] * (u[m] <= t_all))),
                "pac_routed": float(np.mean(u[m] <= t_all)),
                "gpac_threshold": t_g,
                "gpac_risk": float(np.mean(loss[m] * (u[m] <= t_g))),
                "gpac_routed": float(np.mean(u[m] <= t_g)),
                "oracle_routed": float(np.mean(loss[m] <= eps)),
            }
        )
    return pd.DataFrame(rows)


# %% [markdown]
# A check by hand on eight items in two groups: overall, the risk at $u = 0.1, 0.2, 0.3, 0.4$ is
# $0, 1, 2, 4$ lossy items out of 8, so with $\varepsilon = 0.25$ PAC stops at $0.3$ and routes
# both of group `b`'s lossy items below it (risk 0.5 in `b`); G-PAC stops at $0.4$ in `a` and at
# $0.2$ in `b`; the oracle routes the single loss-free item of `b`.

# %%
tiny = pd.DataFrame(
    {"group": ["a"] * 4 + ["b"] * 4, "loss": [0, 0, 0, 1, 0, 1, 1, 1], "score_x": [0.1, 0.2, 0.3, 0.4] * 2}
)
check = population_thresholds(tiny, "score_x", eps=0.25).set_index("group")
assert check.loc["a", "pac_threshold"] == 0.3 and check.loc["b", "pac_risk"] == 0.5
assert check.loc["a", "gpac_threshold"] == 0.4 and check.loc["b", "gpac_threshold"] == 0.2
assert check.loc["b", "oracle_routed"] == 0.25

# %% [markdown]
# On the table:

# %%
thr = population_thresholds(table, cfg.score, eps)
plotting.save_table(thr, f"clustered-pac_thresholds{suffix}", floatfmt=".3f")
thr.round(3)

# %% [markdown]
# (fig:clustered-pac)=
# ## fig:clustered-pac

# %% [markdown]
# The figure needs each group's whole risk curve $R(u\mid G_j)$: the running sum of the losses
# over the items sorted by score, divided by the group's size.


# %%
def group_risk_curves(table: pd.DataFrame, score: str, grid: np.ndarray | None = None) -> pd.DataFrame:
    """Population risk curves ``R(u | G_j) = E[loss 1{U <= u} | G_j]`` over the whole table."""
    grid = np.linspace(0, 1, 201) if grid is None else np.asarray(grid, float)
    u = table[score].to_numpy(float)
    loss = table["loss"].to_numpy(float)
    rows = []
    groups = [("Overall", np.ones(len(u), bool))]
    if "group" in table.columns:
        g = table["group"].to_numpy(str)
        groups += [(name, g == name) for name in sorted(set(g.tolist()))]
    for name, m in groups:
        uu, ll = u[m], loss[m]
        order = np.argsort(uu, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(ll[order])]) / m.sum()
        idx = np.searchsorted(uu[order], grid, side="right")
        rows.append(
            pd.DataFrame({"group": name, "u": grid, "risk": cum[idx], "routed": idx / m.sum(), "n": int(m.sum())})
        )
    return pd.concat(rows, ignore_index=True)


# %% [markdown]
# (a) PAC: the per-group risk curves with the single marginal threshold (a cross marks a group
# above $\varepsilon$ there); (b) G-PAC: each curve cut at its own threshold $u_j$; (c) the share
# of each group routed to the non-thinking model by PAC (hatched where the group's risk exceeds $\varepsilon$),
# G-PAC and the item-wise oracle. One legend for the groups of (a) and (b) sits below them.


# %%
def plot_concept(curves: pd.DataFrame, thresholds: pd.DataFrame, eps: float, title: str = ""):
    """fig:clustered-pac drawn from data, three panels and one legend for the groups below them."""
    groups = [g for g in dict.fromkeys(curves["group"]) if g != "Overall"]
    cmap = plt.get_cmap("tab10")
    color = {g: cmap(i % 10) for i, g in enumerate(groups)}
    th = thresholds.set_index("group")
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.6), gridspec_kw={"width_ratios": [1, 1, 1.1]})
    for ax, which in zip(axes[:2], ("pac", "gpac")):
        for g in groups:
            c = curves[curves.group == g]
            ax.plot(c["u"], 100 * c["risk"], color=color[g], lw=1.6)
            t, r = th.loc[g, f"{which}_threshold"], th.loc[g, f"{which}_risk"]
            if np.isfinite(t):
                bad = r > eps
                ax.plot(
                    [t],
                    [100 * r],
                    marker="X" if bad else "o",
                    ms=10 if bad else 6,
                    color=color[g],
                    mec="black" if bad else color[g],
                    zorder=5,
                )
        ov = curves[curves.group == "Overall"]
        ax.plot(ov["u"], 100 * ov["risk"], color="black", lw=2.4)
        ax.axhline(100 * eps, color="red", ls="--", lw=1.4)
        ax.set_xlabel("threshold $u$ on the uncertainty score", fontsize=11)
        ax.set_ylabel(r"risk $R(u\mid G_j)$ (%)", fontsize=11)
        ax.tick_params(labelsize=10)
    pac_t = float(th["pac_threshold"].iloc[0])
    if np.isfinite(pac_t):
        axes[0].axvline(pac_t, color="#1f3b73", lw=1.5, ls=":")
    n_bad = int((th["pac_risk"] > eps).sum())
    axes[0].set_title(f"(a) PAC: one threshold $u$ = {pac_t:.2f};\n{n_bad} group(s) above $\\varepsilon$", fontsize=11)
    axes[1].set_title("(b) G-PAC: a threshold $u_j$ per group;\nevery group within $\\varepsilon$", fontsize=11)
    y = np.arange(len(groups))[::-1]
    h = 0.27
    over = np.array([th.loc[g, "pac_risk"] > eps for g in groups])
    bars = (
        ("pac_routed", "PAC", "#1f3b73"),
        ("gpac_routed", "G-PAC", "#2a9d8f"),
        ("oracle_routed", "item-wise oracle", "#e76f51"),
    )
    bar_handles = []
    for i, (col, lab, colr) in enumerate(bars):
        bar_handles.append(
            axes[2].barh(
                y - (i - 1) * h,
                100 * th.loc[groups, col],
                h,
                label=lab,
                color=colr,
                hatch=["//" if (i == 0 and o) else "" for o in over],
                edgecolor="white",
                lw=0.5,
            )
        )
    if over.any():
        bar_handles.append(
            Patch(facecolor="#1f3b73", hatch="//", edgecolor="white", label="PAC, group risk above $\\varepsilon$")
        )
    axes[2].set_yticks(y, ["\n".join(textwrap.wrap(g, 14)) for g in groups], fontsize=10)
    axes[2].set_xlim(0, 100)
    axes[2].set_xlabel("routed to the non-thinking model (%)", fontsize=11)
    axes[2].tick_params(axis="x", labelsize=10)
    axes[2].set_title("(c) share of each group routed", fontsize=11)
    fig.legend(handles=bar_handles, loc="upper center", bbox_to_anchor=(0.82, 0.13), ncol=2, fontsize=9, frameon=False)
    handles = [Line2D([0], [0], color=color[g], lw=2, label=g) for g in groups]
    handles += [
        Line2D([0], [0], color="black", lw=2.4, label="Overall"),
        Line2D([0], [0], color="red", ls="--", lw=1.4, label=r"$\varepsilon$"),
        Line2D(
            [0], [0], ls="", marker="X", ms=9, color="grey", mec="black", label="threshold, risk above $\\varepsilon$"
        ),
        Line2D([0], [0], ls="", marker="o", ms=6, color="grey", label="threshold, risk within $\\varepsilon$"),
    ]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.04, 0.13), ncol=4, fontsize=9, frameon=False)
    if title:
        fig.suptitle(title, fontsize=12)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


tiny_b = group_risk_curves(tiny, "score_x", grid=np.array([0.0, 0.25, 1.0])).query("group == 'b'")
assert tiny_b["risk"].tolist() == [0.0, 0.25, 0.75]  # the eight items above, group b
curves = group_risk_curves(table, cfg.score)
title = (
    f"{reference.TITLES.get(name, name)}, {pair or 'own'} pair, {reference.SCORE_LABELS.get(cfg.score, cfg.score)} "
    f"score, ε = {eps} ({source.kind if source.kind != 'path' else 'own'} data)"
)
fig = plot_concept(curves, thr, eps, title=title)
plotting.savefig(fig, f"clustered-pac{suffix}")

# %% [markdown]
# Is the item-wise oracle the most efficient? It routes only items whose own loss is at most $\varepsilon$, so it
# never routes a lossy item, while G-PAC may route some as long as the group's risk stays within $\varepsilon$:

# %%
from IPython.display import Markdown, display

more = thr[thr["oracle_routed"] > thr["gpac_routed"]]["group"].tolist()
less = thr[thr["oracle_routed"] < thr["gpac_routed"]]["group"].tolist()
display(
    Markdown(
        f"The oracle routes more than G-PAC in {len(more)} of {len(thr)} groups ({', '.join(more) or 'none'}), less in "
        f"{len(less)} ({', '.join(less) or 'none'}) and the same share in the rest: a per-input guarantee is more "
        "efficient only where a group's risk curve crosses ε; where G-PAC can route a whole group, the per-input "
        "guarantee routes less, unless the group has no lossy item."
    )
)
