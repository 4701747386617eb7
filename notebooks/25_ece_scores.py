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
# # 25 — How calibrated are the uncertainty scores?
#
# **Reproduces** `fig:expected_error_uncertainty`: the expected calibration error (ECE) of the
# logits-based, verbalized and router-based scores on MATH-500, ZebraLogic and GPQA (Qwen pair),
# as reliability diagrams. Confidence = $1-U$, outcome = the non-thinking model's correctness,
# 10 equal-width bins (`gpac_utils.metrics.expected_calibration_error`).
# The paper's point (Appendix F.2, `app:uncertainty_score`): PAC reasoning does not rely on a well-calibrated
# score — thresholds are calibrated on the loss, so any score that orders the items can be used, and how well it
# orders them sets the efficiency. The paper adds that PAC reasoning "consistently maintains valid control of
# performance loss across all settings"; in notebooks 21–22 that holds for the mean test error per group
# (Error$_{\rm Gap} = 0$) with every score, not for the per-group guarantee under the paper's recipe (its violation
# rates exceed $\alpha$; notebook 13 shows why).
#
# **Reads** (parameter `data_source`) `data/simulated/<benchmark>__<pair>.parquet` by default
# (simulated; the scores' calibration is a design choice of the simulator: logits calibrated in
# the large, verbalized overconfident, the router's confidence near 0.5 whatever the accuracy — see
# `data/simulated/README.md`; which score has the largest ECE is computed below);
# `"generated"`: the scored tables of `02_scores` for `benchmarks` and `pair`; or a path to any
# table in the data schema (with `columns`). The table needs `nothink_correct`.
#
# **Writes** `figures/expected_error_uncertainty.{png,pdf}` and `figures/tables/ece_scores.{csv,md}`
# (both pairs); from another source the same names with `__<source>` appended (e.g.
# `ece_scores__generated__smollm2`), the chosen pair only.
#
# **Runtime**: a few seconds on both profiles (no randomness).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gpac_utils.metrics import expected_calibration_error, reliability_curve
from gpac_utils.paper import plotting, sources
from gpac_utils.paper import simulate as sim
from gpac_utils.paper.reference import SCORE_LABELS, TITLES
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
data_source = "simulated"  # "simulated" | "generated" (the tables 02_scores wrote) | a path to a table
pair = None  # pair drawn in the figure (the paper: Qwen)
overrides = {}  # any other setting of notebooks/config/25_ece_scores.yaml

# %%
cfg = config.load("25_ece_scores", profile, data_source=data_source, pair=pair, **overrides)
source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
pairs = sim.PAIRS if source.is_simulated else [cfg.pair]
benchmarks = [source.dataset] if source.kind == "path" else cfg.benchmarks
suffix = "" if source.is_simulated else f"__{source.tag(None, cfg.pair if source.kind != 'path' else None)}"


def load(b, p):
    return sources.load_table(
        source, b, p if source.kind != "path" else None, notebook="25_ece_scores", scores=cfg.scores
    )


cfg

# %% [markdown]
# ## ECE per benchmark and score, both pairs (%)
# The confidence of the non-thinking model is $1 - U$, the outcome its correctness
# (`nothink_correct`); the expected calibration error averages $|$accuracy $-$ mean confidence$|$
# over `n_bins` equal-width confidence bins, weighted by the bins' sizes.
# (From a generated table or a path: the chosen pair only.)

# %%
rows = []
for p in pairs:
    for b in benchmarks:
        df = load(b, p)
        for s in cfg.scores:
            conf, correct = 1.0 - df[s].to_numpy(float), df["nothink_correct"].to_numpy(float)
            rows.append(
                {
                    "pair": p if source.kind != "path" else "",
                    "dataset": b,
                    "score": s,
                    "n": len(df),
                    "ECE": 100 * expected_calibration_error(conf, correct, cfg.n_bins),
                    "mean_confidence": 100 * conf.mean(),
                    "accuracy": 100 * df["nothink_correct"].mean(),
                }
            )
ece_pairs = pd.DataFrame(rows)
plotting.save_table(ece_pairs, f"ece_scores{suffix}")
ece_pairs.pivot_table(index=["pair", "dataset"], columns="score", values="ECE").round(2)

# %% [markdown]
# The paper (Appendix F.2) observes that "logits-based scores are generally better calibrated than verbalized
# scores, while router-based scores often exhibit the largest ECE". On these tables:

# %%
from IPython.display import Markdown, display

ranked = ece_pairs.loc[ece_pairs.groupby(["pair", "dataset"])["ECE"].idxmax(), ["pair", "dataset", "score"]]
logits_best = ece_pairs.pivot_table(index=["pair", "dataset"], columns="score", values="ECE")
n_cases = len(logits_best)
display(
    Markdown(
        f"Largest ECE per (pair, benchmark), {n_cases} cases: "
        + ", ".join(f"{SCORE_LABELS.get(s, s)} in {k}" for s, k in ranked["score"].value_counts().items())
        + (
            f"; the logits score has the smallest ECE in {int((logits_best.idxmin(axis=1) == 'score_logits').sum())} of "
            f"{n_cases}."
            if "score_logits" in logits_best
            else "."
        )
    )
)

# %% [markdown]
# (fig:expected_error_uncertainty)=
# ## fig:expected_error_uncertainty
# Bars: accuracy per confidence bin; hatched: the gap to the mean confidence in the bin;
# dashed: perfect calibration.

# %%
fig, axes = plt.subplots(
    len(benchmarks), len(cfg.scores), figsize=(3.4 * len(cfg.scores), 3.2 * len(benchmarks)), squeeze=False
)
width = 1.0 / cfg.n_bins
for i, b in enumerate(benchmarks):
    df = load(b, cfg.pair)
    for j, s in enumerate(cfg.scores):
        ax = axes[i, j]
        conf, correct = 1.0 - df[s].to_numpy(float), df["nothink_correct"].to_numpy(float)
        c = reliability_curve(conf, correct, cfg.n_bins).query("n > 0")
        ece = expected_calibration_error(conf, correct, cfg.n_bins)
        ax.bar(
            c["bin_lo"], c["accuracy"], width=width, align="edge", color="#2a9d8f", edgecolor="white", label="accuracy"
        )
        ax.bar(
            c["bin_lo"],
            (c["mean_confidence"] - c["accuracy"]).abs(),
            bottom=np.minimum(c["accuracy"], c["mean_confidence"]),
            width=width,
            align="edge",
            color="none",
            edgecolor="#e76f51",
            hatch="///",
            lw=0.8,
            label="gap to mean confidence",
        )
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(f"{TITLES.get(b, b)} ({SCORE_LABELS.get(s, s)}): ECE = {100 * ece:.1f}%", fontsize=8)
        ax.set_xlabel("confidence 1 - U")
        if j == 0:
            ax.set_ylabel("accuracy (non-thinking)")
        if i == 0 and j == 0:
            ax.legend(fontsize=7, loc="upper left")
fig.tight_layout()
plotting.savefig(fig, f"expected_error_uncertainty{suffix}")
