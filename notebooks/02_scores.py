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
# # 02 — Uncertainty scores, losses and their calibration
#
# **Reproduces** the per-item tables of Sec. 5 from model outputs (App. F.2, F.4): the logits-based
# score (1 − mean token probability of the non-thinking answer), the verbalized score
# (1 − mean of 10 sampled confidences), the router score (1 − P(non-thinking suffices) from a
# logistic-regression router on prompt embeddings, cross-fitted so no item is scored by a router
# trained on it), the binary loss (thinking right, non-thinking wrong) or, on Arena-Hard, the
# semantic loss 1 − cos of answer embeddings. Plots score histograms per group and reliability
# diagrams with the ECE of each score (as in `fig:expected_error_uncertainty`).
#
# **Reads** `data/generations/<benchmark>__<pair>/` written by `01_generate` when it exists;
# otherwise (**validate-embedded-tables mode**, the default on a machine without generations)
# the embedded tables `data/simulated/*.parquet`.
#
# **Writes** `data/generated/<benchmark>__<pair>.parquet` (generation mode, data schema),
# `figures/02_scores__<table>.{png,pdf}` (`<table>` = `generated__<benchmark>__<pair>` or the
# embedded table's name) and `figures/tables/02_scores_summary.{csv,md}`.
#
# **Runtime**: validate mode a few seconds (`fast`: 2 tables, `paper`: all 8); generation mode
# about a minute per benchmark on CPU (MiniLM embeddings). `fast` scores the walk
# (`walk__smollm2`, written by `01_generate` on `fast`) when it is there.

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils import data
from gpac_utils.llm import generation as gen
from gpac_utils.llm import records
from gpac_utils.llm import scoring as sc
from gpac_utils.metrics import expected_calibration_error, reliability_curve
from gpac_utils.paper import plotting
from gpac_utils.workflow import config
from gpac_utils.workflow.paths import SIMULATED

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
benchmark = None  # math500 | gpqa | zebralogic | arena_hard | walk (generation mode)
pair = None  # qwen | llama | smollm2 (the walk)
embedder = None  # sentence-transformers model; default all-MiniLM-L6-v2 (offline package)
router_folds = None  # cross-fitting folds of the router
overrides = {}  # any other setting of notebooks/config/02_scores.yaml

# %%
cfg = config.load("02_scores", profile, benchmark=benchmark, pair=pair, embedder=embedder,
                  router_folds=router_folds, **overrides)
folder = gen.run_dir(cfg.benchmark, cfg.pair, cfg.generations_root and Path(cfg.generations_root))
status = records.generations_status(folder)
have_generations = status == "complete"
mode = "score generations" if have_generations else "validate embedded tables"
why = {"missing": f"no generations under {folder}",
       "incomplete": f"the generations under {folder} are incomplete (01_generate still running, interrupted, "
                     "or shards missing: rerun it to finish)"}
print(f"MODE: {mode}" + ("" if have_generations else f" -- {why[status]}; "
                         "summarising data/simulated/*.parquet instead of computing scores"))
cfg

# %% [markdown]
# ## Scores from generations (only when `01_generate` has run)
# Grade both answers, compute the three scores, assemble the table in the data schema and write it.
# Unparsable verbalized replies are counted and reported (an item with none parsable gets U = 1).
# The walk's grader is lenient (`gpac_utils.llm.grading.grade_lenient`: the last `\boxed{}`, else
# the last number of the reply).

# %%
tables = {}
if have_generations:
    res = sc.score_run(folder, cfg.benchmark, embedder=sc.Embedder(cfg.embedder),
                       router_folds=cfg.router_folds, seed=cfg.seed)
    for note in res.notes:
        print(note)
    out = data.write_table(res.table, Path(cfg.output_root or gen.GENERATED) / f"{cfg.benchmark}__{cfg.pair}.parquet")
    print(f"wrote {out}")
    tables[f"generated__{cfg.benchmark}__{cfg.pair}"] = res.table
    if data.THINK_CORRECT in res.table.columns:
        acc = res.table.groupby(data.GROUP)[[data.THINK_CORRECT, data.NOTHINK_CORRECT, data.LOSS]].mean()
        acc.loc["all"] = res.table[[data.THINK_CORRECT, data.NOTHINK_CORRECT, data.LOSS]].mean()
        print("accuracy per role and mean binary loss, per group:")
        print(acc.round(3).to_string())

# %% [markdown]
# ## Validate the embedded tables
# Each table is read through the schema validator (it raises on a bad column, never drops rows).

# %%
if not have_generations:
    # the chosen benchmark's tables first, so that the fast profile shows them
    embedded = sorted(SIMULATED.glob("*__*.parquet"))  # data/simulated/<benchmark>__<pair>.parquet
    paths = sorted(embedded, key=lambda p: (not p.stem.startswith(cfg.benchmark + "__"), p.stem))
    if not paths:
        print("No embedded tables under data/simulated/ yet (run `python -m gpac_utils.paper.simulate`): "
              "nothing to summarise.")
    for p in paths[: cfg.max_tables]:
        tables[p.stem] = data.read_table(p, score_cols=data.PAPER_SCORES, require_tokens=True)
    print(f"validated {len(tables)} table(s): {list(tables)}")

# %% [markdown]
# ## Summary: sizes, accuracies, losses, tokens and ECE of each score
# One row per table: its size and groups, the mean and largest loss, each role's accuracy and mean
# tokens, and the ECE of the confidence 1 − U of each score against the non-thinking model's
# correctness (equal-width bins); the ECE is empty for Arena-Hard (no correctness, semantic loss).

# %%
def summarize_table(df, name, n_bins=10):
    """One summary row: size, groups, accuracies, loss, tokens, and ECE of each score."""
    row = {
        "table": name,
        "n": len(df),
        "groups": df[data.GROUP].nunique() if data.GROUP in df.columns else 0,
        "mean_loss": float(df[data.LOSS].mean()),
        "max_loss": float(df[data.LOSS].max()),
    }
    for col in data.CORRECTNESS:
        row[f"acc_{col.split('_')[0]}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in data.TOKENS:
        row[f"mean_{col}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in data.score_columns(df):
        row[f"ece_{col[len(data.SCORE_PREFIX) :]}"] = (
            expected_calibration_error(1 - df[col].to_numpy(float), df[data.NOTHINK_CORRECT], n_bins)
            if data.NOTHINK_CORRECT in df.columns
            else np.nan
        )
    return row


summary = pd.DataFrame([summarize_table(t, name, cfg.n_bins) for name, t in tables.items()])
if len(summary):
    plotting.save_table(summary, "02_scores_summary", floatfmt=".3f")
summary

# %% [markdown]
# ## Score histograms per group and reliability diagrams
# Top row: the histogram of each score per group (does a score separate the groups?). Bottom row,
# when the table has the non-thinking model's correctness: the reliability diagram of the confidence
# 1 − U (accuracy per equal-width bin against the diagonal of perfect calibration), with its ECE.

# %%
def plot_score_panels(df, title, n_bins=10):
    """Histograms of each score per group; reliability diagrams of 1 - U with their ECE."""
    cols = data.score_columns(df)
    has_correct = data.NOTHINK_CORRECT in df.columns
    nrows = 2 if has_correct else 1
    fig, axes = plt.subplots(nrows, len(cols), figsize=(4 * len(cols), 3.3 * nrows), squeeze=False)
    groups = sorted(df[data.GROUP].unique()) if data.GROUP in df.columns else [None]
    edges = np.linspace(0, 1, 21)
    for j, col in enumerate(cols):
        ax = axes[0, j]
        for g in groups:
            v = df[col] if g is None else df.loc[df[data.GROUP] == g, col]
            ax.hist(v, bins=edges, histtype="step", density=True, linewidth=1.3, label=g or "all")
        ax.set(title=col, xlabel="U (uncertainty)", ylabel="density" if j == 0 else None)
        if has_correct:
            conf = 1 - df[col].to_numpy(float)
            curve = reliability_curve(conf, df[data.NOTHINK_CORRECT], n_bins)
            ece = expected_calibration_error(conf, df[data.NOTHINK_CORRECT], n_bins)
            filled = curve["n"] > 0
            axes[1, j].bar(curve["bin_lo"][filled], curve["accuracy"][filled], width=1 / n_bins, align="edge",
                           edgecolor="black", alpha=0.7, label="accuracy")
            axes[1, j].plot([0, 1], [0, 1], "k--", linewidth=1, label="calibrated")
            axes[1, j].set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence 1 - U", title=f"ECE = {ece:.3f}",
                           ylabel="non-thinking accuracy" if j == 0 else None)
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


for name, t in tables.items():
    fig = plot_score_panels(t, name, cfg.n_bins)
    plotting.savefig(fig, f"02_scores__{name}")
