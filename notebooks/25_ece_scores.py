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
# **Reads** (parameter `data_source`) `data/simulated/<benchmark>__<pair>.parquet` by default
# (simulated; the scores' calibration is a design choice of the simulator: logits calibrated in
# the large, verbalized overconfident, router least calibrated — see `data/simulated/README.md`);
# `"generated"`: the scored tables of `02_scores` for `benchmarks` and `pair`; or a path to any
# table in the data schema (with `columns`). The table needs `nothink_correct`.
#
# **Writes** `figures/expected_error_uncertainty.{png,pdf}` and `figures/tables/ece_scores.{csv,md}`
# (both pairs); from another source the same names with `__<source>` appended (e.g.
# `ece_scores__generated__smollm2`), the chosen pair only.
#
# **Runtime**: a few seconds on both profiles (no randomness).

# %%
import pandas as pd

from gpac_utils.paper import ece, plotting, sources
from gpac_utils.paper import simulate as sim
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
    return sources.load_table(source, b, p if source.kind != "path" else None, notebook="25_ece_scores",
                              scores=cfg.scores)


cfg

# %% [markdown]
# ## ECE per benchmark and score, both pairs (%)
# (From a generated table or a path: the chosen pair only.)

# %%
ece_pairs = []
for p in pairs:
    t = ece.ece_table({b: load(b, p) for b in benchmarks}, cfg.scores, cfg.n_bins)
    t.insert(0, "pair", p if source.kind != "path" else "")
    ece_pairs.append(t)
ece_pairs = pd.concat(ece_pairs, ignore_index=True)
plotting.save_table(ece_pairs, f"ece_scores{suffix}")
ece_pairs.pivot_table(index=["pair", "dataset"], columns="score", values="ECE").round(2)

# %% [markdown]
# (fig:expected_error_uncertainty)=
# ## fig:expected_error_uncertainty
# Bars: accuracy per confidence bin; hatched: the gap to the mean confidence in the bin;
# dashed: perfect calibration.

# %%
fig = ece.plot_reliability_grid({b: load(b, cfg.pair) for b in benchmarks}, cfg.scores, cfg.n_bins)
plotting.savefig(fig, f"expected_error_uncertainty{suffix}")
