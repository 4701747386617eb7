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
# # 20 — The data: category distribution, splits and model accuracies
#
# **Reproduces** `fig:dataset_category_distribution` (categories per verifiable benchmark),
# `table:splitting_settings` (dataset type, size, calibration/test sizes) and
# `table:llm_accuracy` (accuracy of the four LLMs), recomputed from the default tables.
#
# **Reads** (parameter `data_source`) the simulated default tables
# `data/simulated/<benchmark>__<pair>.parquet` (or regenerates them in memory with
# `regenerate=True`). These are **simulated stand-ins** for the paper's unpublished model outputs —
# see `data/simulated/README.md`: the category counts are the real benchmarks' (the paper shows them only as a
# figure), the sizes and calibration/test splits are those of `table:splitting_settings` and the overall
# accuracies those of `table:llm_accuracy` (both checked below); everything per item is simulated. With `data_source="generated"`: the scored tables of
# `02_scores` for `benchmarks` and `pairs` (e.g. `overrides={"benchmarks": ["walk"], "pairs":
# ["smollm2"]}`); or a path to a table in the data schema (with `columns`). The accuracy table
# needs both correctness columns; the paper's accuracies are set beside ours only for the
# simulated stand-ins.
#
# **Writes** `figures/dataset_category_distribution.{png,pdf}`,
# `figures/tables/splitting_settings.{csv,md}`, `figures/tables/llm_accuracy.{csv,md}`; from
# another source the same names ending in `__<source>` (e.g. `llm_accuracy__generated`).
#
# **Runtime**: a few seconds on both profiles (`fast` and `paper` are identical here).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils import data
from gpac_utils.paper import plotting, reference, sources
from gpac_utils.paper import simulate as sim
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
data_source = "simulated"  # "simulated" | "generated" (the tables 02_scores wrote) | a path to a table
benchmarks = None  # verifiable benchmarks to show, e.g. ["math500", "gpqa"]
regenerate = None  # True simulates the tables in memory instead of reading data/simulated/
overrides = {}  # any other setting of notebooks/config/20_data_overview.yaml

# %%
cfg = config.load(
    "20_data_overview", profile, data_source=data_source, benchmarks=benchmarks, regenerate=regenerate, **overrides
)
source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
suffix = "" if source.is_simulated else f"__{source.tag()}"
cfg

# %% [markdown]
# ## Load the tables
# One table per benchmark and model pair. Both simulated pairs share the items (same `item_id`,
# same category), so category counts and sizes are read from the first pair's tables.


# %%
def get(benchmark, pair):
    if not source.is_simulated:
        return sources.load_table(source, benchmark, pair, notebook="20_data_overview")
    if cfg.regenerate:
        return sim.simulate_table(benchmark, pair, seed=cfg.seed)
    return sim.load_simulated(benchmark, pair)


if source.kind == "path":
    targets = [(source.dataset, None)]
else:
    targets = [(b, p) for b in cfg.benchmarks for p in (sim.PAIRS if source.is_simulated else cfg.pairs)]
tables = {(b, p): get(b, p) for b, p in targets}
first = {}
for (b, _p), t in tables.items():
    first.setdefault(b, t)


def display_name(b):
    """The display name of a benchmark (the simulator's for the stand-ins)."""
    return sim.SPECS[b].title if source.is_simulated else b


{k: len(v) for k, v in tables.items()}

# %% [markdown]
# (fig:dataset_category_distribution)=
# ## fig:dataset_category_distribution
# The number of items per category: MATH-500 subjects, ZebraLogic size classes by search
# space $(N!)^M$ (Small $<10^3$, Medium $<10^6$, Large $<10^{10}$, X-Large), GPQA domains.
# The category where the paper reports marginal PAC failing is highlighted (simulated data only).
# Categories are in the simulator's order for the stand-ins, else sorted by name.


# %%
def categories(b, t):
    return [g.name for g in sim.SPECS[b].groups] if source.is_simulated else sorted(t[data.GROUP].unique())


counts = pd.DataFrame(
    [
        {"Dataset": display_name(b), "Category": g, "Count": int(n), "Share (%)": 100 * n / len(t)}
        for b, t in first.items()
        if data.GROUP in t.columns
        for g, n in t[data.GROUP].value_counts().reindex(categories(b, t), fill_value=0).items()
    ]
)
highlight = {sim.SPECS[b].title: sim.SPECS[b].heterogeneous for b in first} if source.is_simulated else {}
if counts.empty:
    print("note: no known groups (column 'group') in these tables: no category distribution")
if len(counts):
    titles = list(dict.fromkeys(counts["Dataset"]))
    fig, axes = plt.subplots(1, len(titles), figsize=(4.2 * len(titles), 3.4), squeeze=False)
    for ax, title in zip(axes[0], titles):
        sub = counts[counts["Dataset"] == title]
        colors = ["#e76f51" if c == highlight.get(title) else "#1f3b73" for c in sub["Category"]]
        y = np.arange(len(sub))[::-1]
        ax.barh(y, sub["Count"], color=colors)
        ax.set_yticks(y, sub["Category"])
        for yi, (n, share) in zip(y, zip(sub["Count"], sub["Share (%)"])):
            ax.text(n, yi, f" {n} ({share:.0f}%)", va="center", fontsize=8)
        ax.set_xlim(0, sub["Count"].max() * 1.35)
        ax.set_xlabel("items")
        ax.set_title(f"{title} (n={int(sub['Count'].sum())})")
    fig.tight_layout()
    plotting.savefig(fig, f"dataset_category_distribution{suffix}")
counts

# %% [markdown]
# (table:splitting_settings)=
# ## table:splitting_settings
# Calibration/test sizes follow from each benchmark's size and the paper's calibration
# ratio (0.6 for MATH-500, 0.5 for ZebraLogic and GPQA; 0.5 for benchmarks outside the paper):
# `n_cal = round(n · ratio)` (half up), the rest is the test set.


# %%
def kind(b, t):
    if source.is_simulated:
        return sim.SPECS[b].kind
    return "verifiable" if set(t[data.LOSS].unique()) <= {0.0, 1.0} else "semantic loss"


ratios = reference.resolve_cal_ratio(list(first))
n_cal = {b: int(np.floor(len(t) * ratios[b] + 0.5)) for b, t in first.items()}
splits = pd.DataFrame(
    [
        {
            "Dataset": display_name(b),
            "Dataset Type": kind(b, t),
            "Dataset Size": len(t),
            "Calibration ratio": ratios[b],
            "PAC Calibration": n_cal[b],
            "PAC Test": len(t) - n_cal[b],
        }
        for b, t in first.items()
    ]
)
plotting.save_table(splits, f"splitting_settings{suffix}")
splits

# %% [markdown]
# For the simulated stand-ins the sizes must be the paper's (`table:splitting_settings`: MATH-500 300/200,
# ZebraLogic 500/500, GPQA 224/224), typed here from the paper's table:

# %%
if source.is_simulated:
    paper_splits = {"math500": (300, 200), "zebralogic": (500, 500), "gpqa": (224, 224)}
    for b, (cal_size, test_size) in paper_splits.items():
        if b in first:
            assert (n_cal[b], len(first[b]) - n_cal[b]) == (cal_size, test_size), (b, n_cal[b])

# %% [markdown]
# (table:llm_accuracy)=
# ## table:llm_accuracy
# Accuracy (%) recomputed from the tables. For the simulated stand-ins they are set beside the
# paper's numbers: the simulation picks exactly `round(acc * n)` correct items per model, so they
# agree to the item. Other sources: our accuracies alone, per benchmark, pair and role.

# %%
if source.is_simulated:  # one row per verifiable benchmark; per pair the non-thinking, then the thinking model
    acc = pd.DataFrame(
        [
            {
                "Dataset": display_name(b),
                **{
                    sim.MODELS[p][role]: 100 * tables[(b, p)][col].mean()
                    for p in sim.PAIRS
                    for role, col in ((1, data.NOTHINK_CORRECT), (0, data.THINK_CORRECT))
                },
            }
            for b in first
            if sim.SPECS[b].loss == "binary"
        ]
    )
else:
    acc = pd.DataFrame(
        [
            {
                "Dataset": b,
                "Pair": p or "",
                "thinking": 100 * t[data.THINK_CORRECT].mean(),
                "non-thinking": 100 * t[data.NOTHINK_CORRECT].mean(),
            }
            for (b, p), t in tables.items()
        ]
    )
plotting.save_table(acc, f"llm_accuracy{suffix}")
acc

# %%
if source.is_simulated:
    comparison = acc.melt(id_vars="Dataset", var_name="Model", value_name="simulated")
    paper = reference.paper_accuracy().set_index(["dataset", "model"])["value"]
    key = {sim.SPECS[b].title: b for b in sim.SPECS}
    comparison["paper"] = [float(paper[(key[d], m)]) for d, m in zip(comparison["Dataset"], comparison["Model"])]
    comparison["difference"] = comparison["simulated"] - comparison["paper"]
    assert len(comparison) == 4 * len(acc) and (comparison["difference"].abs() < 0.005).all(), comparison
    display_comparison = comparison.round(2)
else:
    display_comparison = "no paper accuracies for this data source"
display_comparison

# %% [markdown]
# ## What the categories hide: loss rates per category
# Not a paper artefact, but the reason the paper needs G-PAC: the rate of the binary loss
# (thinking right, non-thinking wrong) differs between categories (in %, below; the spread per table is printed
# under it). In the simulated data the heterogeneous categories are built in (see the data card).


# %%
def label(b, p):
    return f"{display_name(b)} / {p}" if p else display_name(b)


rates = {
    label(b, p): 100 * t.groupby(data.GROUP, sort=False)[data.LOSS].mean()
    for (b, p), t in tables.items()
    if data.GROUP in t.columns and (not source.is_simulated or sim.SPECS[b].groups)
}
pd.DataFrame(rates).round(1)

# %%
loss_rates = pd.DataFrame(rates)
for name, col in loss_rates.items():
    col = col.dropna()
    print(f"{name}: loss rate {col.min():.1f} % ({col.idxmin()}) to {col.max():.1f} % ({col.idxmax()})")
