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
# # 25 — How calibrated are the uncertainty scores?
#
# **Reproduces** `fig:expected_error_uncertainty`: the expected calibration error (ECE) of the
# logits-based, verbalized and router-based scores on MATH-500, ZebraLogic and GPQA (Qwen pair),
# as reliability diagrams. Confidence = $1-U$, outcome = the non-thinking model's correctness,
# 10 equal-width bins (`gpac_utils.metrics.expected_calibration_error`).
# The paper's point: PAC-style routing needs no calibrated score (the tables of notebooks 21–22
# control the loss with every score).
#
# **Reads** `data/simulated/<benchmark>__<pair>.parquet` (simulated; the scores' calibration is
# a design choice of the simulator: logits calibrated in the large, verbalized overconfident,
# router least calibrated — see `data/simulated/README.md`).
#
# **Writes** `figures/expected_error_uncertainty.{png,pdf}` and `figures/tables/ece_scores.{csv,md}`
# (both pairs).
#
# **Runtime**: a few seconds on both profiles (no randomness).

# %%
import pandas as pd

from gpac_utils.paper import ece, plotting
from gpac_utils.paper import simulate as sim
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
pair = None  # pair drawn in the figure (the paper: Qwen)
overrides = {}  # any other setting of notebooks/config/25_ece_scores.yaml

# %%
cfg = config.load("25_ece_scores", profile, pair=pair, **overrides)
cfg

# %% [markdown]
# ## ECE per benchmark and score, both pairs (%)

# %%
ece_pairs = []
for p in sim.PAIRS:
    t = ece.ece_table({b: sim.load_simulated(b, p) for b in cfg.benchmarks}, cfg.scores, cfg.n_bins)
    t.insert(0, "pair", p)
    ece_pairs.append(t)
ece_pairs = pd.concat(ece_pairs, ignore_index=True)
plotting.save_table(ece_pairs, "ece_scores")
ece_pairs.pivot_table(index=["pair", "dataset"], columns="score", values="ECE").round(2)

# %% [markdown]
# ## fig:expected_error_uncertainty
# Bars: accuracy per confidence bin; hatched: the gap to the mean confidence in the bin;
# dashed: perfect calibration.

# %%
fig = ece.plot_reliability_grid({b: sim.load_simulated(b, cfg.pair) for b in cfg.benchmarks}, cfg.scores, cfg.n_bins)
plotting.savefig(fig, "expected_error_uncertainty")
