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
# # 26 — Feasibility vs efficiency: PAC, G-PAC and conditional control, drawn from data
#
# **Reproduces** `fig:clustered-pac`, the paper's concept picture (a TikZ sketch of points in
# three groups): *PAC* — one threshold for all inputs, feasible but not group-wise efficient or
# valid; *G-PAC* — one threshold $\hat u_j$ per group, feasible and group-wise efficient;
# *conditional PAC* — a guarantee per input, most efficient but impossible. Here the picture is
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
from gpac_utils.paper import concept, plotting, reference, sources
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
thr = concept.population_thresholds(table, cfg.score, eps)
plotting.save_table(thr, f"clustered-pac_thresholds{suffix}", floatfmt=".3f")
thr.round(3)

# %% [markdown]
# (fig:clustered-pac)=
# ## fig:clustered-pac

# %%
curves = concept.group_risk_curves(table, cfg.score)
title = (f"{reference.TITLES.get(name, name)}, {pair or 'own'} pair, {reference.SCORE_LABELS.get(cfg.score, cfg.score)} "
         f"score, eps = {eps} ({source.kind if source.kind != 'path' else 'own'} data)")
fig = concept.plot_concept(curves, thr, eps, title=title)
plotting.savefig(fig, f"clustered-pac{suffix}")
