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
# # 31 — Case study on real model outputs: PAC vs G-PAC vs C-PAC
#
# **What it does.** The analysis of notebooks 21–22 (`table:01_results_known`,
# `table:01_results_unknown`) on a *real* per-item table instead of the simulated ones: PAC vs
# G-PAC on the table's known groups, and PAC vs C-PAC (disjoint and joint clustering, $k=3$),
# with the paper's settings (`resample`, CLT, `max`) and with valid settings (`bernoulli`,
# `first-crossing`, Hoeffding–Bentkus / WSR), plus per-group violation rates.
#
# **Reads** `data_path` with a `columns` mapping onto the schema of `gpac_utils.data`. Default:
# `../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv` (via `gpac_utils.workflow.paths.REALDATA`) —
# ZeroEval's greedy outputs on the 721 Level-5 MATH test problems with integer answers;
# strong/thinking = **o1-mini** (`strong_correct` → `think_correct`), weak/non-thinking =
# **gpt-4o-mini** (`weak_correct` → `nothink_correct`), groups = the 7 MATH subjects,
# loss = 1{o1-mini right and gpt-4o-mini wrong}. The score is `weak_uncertainty_disagree` →
# `score_disagree`: the share of an 8-model panel of other non-reasoning models whose answer
# differs from gpt-4o-mini's (a consistency score, **not** the cheap model's own logits; AUROC
# 0.83 for the loss per the folder's PROVENANCE.md); `weak_uncertainty_len` → `score_length`
# (a weak length proxy) can be added with `scores=["score_disagree", "score_length"]`.
# If the file is absent, the notebook says how to point it at one and stops without output.
#
# **Token cost (assumed).** The table has no token counts, only the characters of the visible
# replies, and o1-mini's hidden reasoning tokens are not recorded (its visible reply is even
# shorter than gpt-4o-mini's). STP therefore needs a cost model; we use
# `think_tokens = strong_chars / chars_per_token + hidden_think_tokens` and
# `nothink_tokens = weak_chars / chars_per_token`, with 4 characters per token and **2000 hidden
# reasoning tokens per problem — an assumption, not a measurement** (both are parameters). The
# share of queries routed to the cheap model (Efficiency) needs no cost model and is the
# primary efficiency measure here.
#
# **Writes** (only when the data are present) `figures/tables/realdata_case_study.{csv,md}`,
# `figures/tables/realdata_case_study_layout.{csv,md}`, `figures/tables/realdata_group_violations.{csv,md}`,
# `figures/realdata_errorbar_category.{png,pdf}`.
#
# **Runtime** (2 cores, measured): fast profile ~6 s; paper profile ~6–10 s.

# %%
import pandas as pd
from IPython.display import display

from gpac_utils.paper import plotting
from gpac_utils.paper import tables as T
from gpac_utils.workflow import config as profiles

plotting.apply_style()
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 40)

# %% tags=["parameters"]
profile = "paper"
data_path = None  # CSV/parquet; None: ../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv
columns = None  # {source column: schema column}; None: the mapping for the default file
scores = None  # score columns (after mapping)
eps = None
alpha = None
pi = None
trials = None
cal_ratio = None
bound = None  # paper setting
sampling = None
rule = None
valid_bounds = None  # valid setting: bernoulli sampling, first-crossing rule
k = None  # C-PAC clusters
chars_per_token = None  # cost model (only when the table has no token counts)
hidden_think_tokens = None  # assumed hidden reasoning tokens of the thinking model per item
seed = None

# %%
cfg = profiles.resolve(profile, T.PRESETS["realdata"], data_path=data_path, columns=columns, scores=scores, eps=eps,
                       alpha=alpha, pi=pi, trials=trials, cal_ratio=cal_ratio, bound=bound, sampling=sampling,
                       rule=rule, valid_bounds=valid_bounds, k=k, chars_per_token=chars_per_token,
                       hidden_think_tokens=hidden_think_tokens, seed=seed)
path = T.resolve_data_path(cfg["data_path"])
available = path.exists()
print(f"data: {path} ({'found' if available else 'NOT FOUND'})")
if not available:
    print("No real table here. Point the notebook at one, e.g.\n"
          "  python -m gpac_utils.workflow.runner 31 --profile paper -p data_path=/path/to/table.csv "
          "-p \"columns={'strong_correct': 'think_correct', 'weak_correct': 'nothink_correct', "
          "'my_score': 'score_mine'}\" -p \"scores=['score_mine']\"\n"
          "The table needs item_id, a loss (or both correctness columns), one or more score_* columns in [0, 1], "
          "optionally a group column and token counts (think_tokens, nothink_tokens). The default file lives in "
          "../shared/realdata/mathl5_zeroeval/ (see its PROVENANCE.md); set GPAC_SHARED to another shared folder.")
cfg

# %% [markdown]
# ## The table
# Size, accuracies and loss rate per subject (%): the loss rate differs by a factor of two
# between subjects, which is what a single marginal threshold cannot see.

# %%
if available:
    raw = pd.read_csv(path) if path.suffix.lower() in (".csv", ".tsv") else pd.read_parquet(path)
    table = T.realdata_table(raw, cfg["columns"], chars_per_token=cfg["chars_per_token"],
                             hidden_think_tokens=cfg["hidden_think_tokens"])
    display(T.group_summary(table).round(2))

# %% [markdown]
# ## Run PAC, G-PAC and C-PAC (paper and valid settings)

# %%
if available:
    results = T.run_realdata(table, eps=cfg["eps"], scores=cfg["scores"], alpha=cfg["alpha"], pi=cfg["pi"],
                             trials=cfg["trials"], cal_ratio=cfg["cal_ratio"], bound=cfg["bound"],
                             sampling=cfg["sampling"], rule=cfg["rule"], valid_bounds=cfg["valid_bounds"],
                             k=cfg["k"], seed=cfg["seed"])
    summary = T.summarize_table(results)
    best, comparison = T.pick_valid_bound(summary)
    print(f"tighter valid bound here: {best}")
    display(comparison.round(2))

# %% [markdown]
# ## Results (%), known subjects and learned clusters
# No paper numbers exist for this table. "Violation" is the largest per-group share of trials in
# which the group's risk over the whole table exceeds $\varepsilon$ (groups: the subjects for
# PAC vs G-PAC, C-PAC's learned clusters otherwise).

# %%
if available:
    side, layout = T.save_tables(summary, None, best, file_name="realdata_case_study", layout_suffix="_layout",
                                 rows=T.LAYOUT_ROWS + (("Efficiency", "Efficiency (%)"),))
    display(layout)

# %% [markdown]
# ## Per-subject violation rates and mean test errors (known groups)

# %%
if available:
    gv = T.group_violations(results[results.clustering == "known"])
    gv = gv[["setting", "method", "score", "bound", "group", "violation", "violation_mcse", "mean_error",
             "mean_pop_risk", "n_test"]]
    plotting.save_table(gv, "realdata_group_violations", floatfmt=".3f")
    display(gv.pivot_table(index="group", columns=["setting", "method", "bound"], values="violation").round(2))

# %% [markdown]
# ## Per-subject test error, PAC vs G-PAC (paper setting)

# %%
if available:
    cat = T.category_errors(results[results.clustering == "known"], setting="paper")
    fig = T.plot_category_errorbars(cat, {"real": cfg["eps"]}, colors=plotting.METHOD_COLORS,
                                    scores=cfg["scores"], title=f"{path.name}: eps = {cfg['eps']}")
    plotting.savefig(fig, "realdata_errorbar_category")

# %% [markdown]
# ## Reading the result
# On real outputs the paper's qualitative picture holds: with the paper's settings marginal PAC
# leaves some subjects above $\varepsilon$ in many trials, while per-subject thresholds (G-PAC)
# and per-cluster thresholds (C-PAC) bring every group's mean test error below $\varepsilon$.
# The violation rates show the difference between the paper's settings and valid ones: under the
# paper's CLT/resample/max calibration the small subjects (Precalculus: 35 problems, Geometry: 44)
# are violated well above $\alpha$; the valid calibration keeps every subject near or below
# $\alpha$ but routes far fewer queries to the cheap model.
