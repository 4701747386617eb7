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
# # 20 — The data: category distribution, splits and model accuracies
#
# **Reproduces** `fig:dataset_category_distribution` (categories per verifiable benchmark),
# `table:splitting_settings` (dataset type, size, calibration/test sizes) and
# `table:llm_accuracy` (accuracy of the four LLMs), recomputed from the default tables.
#
# **Reads** the simulated default tables `data/simulated/<benchmark>__<pair>.parquet`
# (or regenerates them in memory with `regenerate=True`). These are **simulated stand-ins**
# for the paper's unpublished model outputs — see `data/simulated/README.md`: category
# counts and overall accuracies match the paper exactly, everything per item is simulated.
#
# **Writes** `figures/dataset_category_distribution.{png,pdf}`,
# `figures/tables/splitting_settings.{csv,md}`, `figures/tables/llm_accuracy.{csv,md}`.
#
# **Runtime**: a few seconds on both profiles (`fast` and `paper` are identical here).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils.paper import plotting
from gpac_utils.paper import simulate as sim
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
benchmarks = None  # verifiable benchmarks to show, e.g. ["math500", "gpqa"]
regenerate = None  # True simulates the tables in memory instead of reading data/simulated/
overrides = {}  # any other setting of notebooks/config/20_data_overview.yaml

# %%
cfg = config.load("20_data_overview", profile, benchmarks=benchmarks, regenerate=regenerate, **overrides)
cfg

# %% [markdown]
# ## Load the tables
# One table per benchmark and model pair. Both pairs share the items (same `item_id`, same
# category), so category counts and sizes are read from the Qwen tables.

# %%
def get(benchmark, pair):
    if cfg.regenerate:
        return sim.simulate_table(benchmark, pair, seed=cfg.seed)
    return sim.load_simulated(benchmark, pair)


tables = {(b, p): get(b, p) for b in cfg.benchmarks for p in sim.PAIRS}
{k: len(v) for k, v in tables.items()}

# %% [markdown]
# ## fig:dataset_category_distribution
# The number of items per category: MATH-500 subjects, ZebraLogic size classes by search
# space $(N!)^M$ (Small $<10^3$, Medium $<10^6$, Large $<10^{10}$, X-Large), GPQA domains.
# The category where the paper reports marginal PAC failing is highlighted.

# %%
counts = sim.category_counts({b: tables[(b, "qwen")] for b in cfg.benchmarks})
titles = [sim.SPECS[b].title for b in cfg.benchmarks if sim.SPECS[b].groups]
fig, axes = plt.subplots(1, len(titles), figsize=(4.2 * len(titles), 3.4), squeeze=False)
for ax, b in zip(axes[0], [b for b in cfg.benchmarks if sim.SPECS[b].groups]):
    sub = counts[counts["Dataset"] == sim.SPECS[b].title]
    colors = ["#e76f51" if c == sim.SPECS[b].heterogeneous else "#1f3b73" for c in sub["Category"]]
    y = np.arange(len(sub))[::-1]
    ax.barh(y, sub["Count"], color=colors)
    ax.set_yticks(y, sub["Category"])
    for yi, (n, share) in zip(y, zip(sub["Count"], sub["Share (%)"])):
        ax.text(n, yi, f" {n} ({share:.0f}%)", va="center", fontsize=8)
    ax.set_xlim(0, sub["Count"].max() * 1.35)
    ax.set_xlabel("items")
    ax.set_title(f"{sim.SPECS[b].title} (n={int(sub['Count'].sum())})")
fig.tight_layout()
plotting.savefig(fig, "dataset_category_distribution")
counts

# %% [markdown]
# ## table:splitting_settings
# Calibration/test sizes follow from each benchmark's size and the paper's calibration
# ratio (0.6 for MATH-500, 0.5 for ZebraLogic and GPQA).

# %%
splits = sim.splitting_settings({b: tables[(b, "qwen")] for b in cfg.benchmarks})
plotting.save_table(splits, "splitting_settings")
splits

# %% [markdown]
# ## table:llm_accuracy
# Accuracy (%) recomputed from the tables, then set beside the paper's numbers: the
# simulation picks exactly `round(acc * n)` correct items per model, so they agree to the item.

# %%
acc = sim.llm_accuracy({k: v for k, v in tables.items() if sim.SPECS[k[0]].loss == "binary"})
plotting.save_table(acc, "llm_accuracy")
acc

# %%
comparison = sim.accuracy_vs_paper(acc)
assert (comparison["difference"].abs() < 0.005).all(), comparison
comparison.round(2)

# %% [markdown]
# ## What the categories hide: loss rates per category
# Not a paper artefact, but the reason the paper needs G-PAC: the rate of the binary loss
# (thinking right, non-thinking wrong) differs strongly between categories. In the simulated
# data the heterogeneous categories are built in (see the data card).

# %%
rates = {f"{sim.SPECS[b].title} / {p}": 100 * sim.group_loss_rates(tables[(b, p)])
         for (b, p) in tables if sim.SPECS[b].groups}
pd.DataFrame(rates).round(1)
