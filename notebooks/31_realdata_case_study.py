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
# **Other data** (parameter `data_source`, default `None` = the real table above): `"simulated"`
# (the stand-in of `benchmark` and `pair` in the config, default MATH-500 / Qwen), `"generated"`
# (the scored table that `02_scores` wrote for them, e.g. `overrides={"benchmark": "walk",
# "pair": "smollm2"}`), or a path to any table in the data schema, mapped with `columns`. Their
# outputs carry the source in their names (e.g. `realdata_case_study__generated__walk__smollm2`).
#
# **Token cost (assumed).** The table has no token counts, only the characters of the visible
# replies, and o1-mini's hidden reasoning tokens are not recorded (its visible reply is even
# shorter than gpt-4o-mini's). STP therefore needs a cost model; we use
# `think_tokens = strong_chars / chars_per_token + hidden_think_tokens` and
# `nothink_tokens = weak_chars / chars_per_token`, with 4 characters per token and **2000 hidden
# reasoning tokens per problem — an assumption, not a measurement** (both are parameters). The
# share of queries routed to the cheap model (the routed share) needs no cost model and is the
# primary measure of the savings here.
#
# **Writes** (only when the data are present) `figures/tables/realdata_case_study.{csv,md}`,
# `figures/tables/realdata_case_study_layout.{csv,md}`, `figures/tables/realdata_group_violations.{csv,md}`,
# `figures/realdata_errorbar_category.{png,pdf}`.
#
# **Runtime** (2 cores, measured): fast profile ~6 s; paper profile ~6–10 s.

# %%
import pandas as pd
from IPython.display import display

from gpac_utils import data
from gpac_utils.experiment import group_violations
from gpac_utils.paper import plotting, realdata, results_tables, sources
from gpac_utils.paper.table_layout import LAYOUT_ROWS
from gpac_utils.workflow import config

plotting.apply_style()
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 40)

# %% tags=["parameters"]
profile = "paper"
data_source = None  # None: the real table (config data_path); "simulated" | "generated" | a path
scores = None  # score columns (after the column mapping)
eps = None  # risk tolerance
n_trials = None  # random calibration/test splits
overrides = {}  # any other setting of notebooks/config/31_realdata_case_study.yaml, e.g. columns

# %%
cfg = config.load("31_realdata_case_study", profile, data_source=data_source, scores=scores, eps=eps, n_trials=n_trials,
                  **overrides)
if cfg.data_source is None:  # the real table, mapped with the config's columns
    source = sources.DataSource("path", realdata.resolve_data_path(cfg.data_path), dict(cfg.columns or {}))
else:
    source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
path = source.table_path(cfg.benchmark, cfg.pair)
available = path.exists()
suffix = "" if cfg.data_source is None else f"__{source.tag(cfg.benchmark, cfg.pair)}"
print(f"data: {path} ({'found' if available else 'NOT FOUND'})")
if not available:
    print("No table here. Point the notebook at one, e.g.\n"
          "  python -m gpac_utils.workflow 31 --profile paper -p data_source /path/to/table.csv "
          "-p overrides \"{columns: {strong_correct: think_correct, weak_correct: nothink_correct, "
          "my_score: score_mine}}\" -p scores \"[score_mine]\"\n"
          "  (or -p data_source simulated, or -p data_source generated after 01_generate and 02_scores)\n"
          "The table needs item_id, a loss (or both correctness columns), one or more score_* columns in [0, 1], "
          "optionally a group column and token counts (think_tokens, nothink_tokens). The default file lives in "
          "../shared/realdata/mathl5_zeroeval/ (see its PROVENANCE.md); set GPAC_SHARED to another shared folder.")
cfg

# %% [markdown]
# ## The table
# A path is read with its column mapping, and the token-cost model above turns character counts
# into token counts (`realdata.realdata_table`); the simulated and generated tables are in the
# schema already. Size, accuracies and loss rate per subject (%): the loss rate differs by a
# factor of two between subjects, which is what a single marginal threshold cannot see.

# %%
if available:
    if source.kind == "path":
        table = realdata.realdata_table(data.read_table(path, source.columns), None, chars_per_token=cfg.chars_per_token,
                                        hidden_think_tokens=cfg.hidden_think_tokens)
        table = sources.check_table(table, "31_realdata_case_study", source.where(), scores=cfg.scores)
    else:
        table = sources.load_table(source, cfg.benchmark, cfg.pair, notebook="31_realdata_case_study",
                                   scores=cfg.scores, loss_bound=cfg.loss_bound)
    display(realdata.group_summary(table).round(2))

# %% [markdown]
# ## Run PAC, G-PAC and C-PAC (paper and valid recipes)
# The same code path as the paper tables (notebooks 21–23), on the real table: PAC vs G-PAC on
# the subjects, PAC vs C-PAC with disjoint and joint clustering. No paper numbers exist for this
# table. "Violation" is the largest per-group share of trials in which the group's risk over the
# whole table exceeds $\varepsilon$ (groups: the subjects for PAC vs G-PAC, C-PAC's learned
# groups otherwise); the per-subject rates are saved to `realdata_group_violations`.

# %%
settings = results_tables.TableSettings(scores=cfg.scores, label_prob=cfg.label_prob, recipe=cfg.recipe, valid_bounds=cfg.valid_bounds,
                           valid_recipe=cfg.valid_recipe, partition=cfg.partition, alpha=cfg.alpha,
                           n_trials=cfg.n_trials, loss_bound=cfg.loss_bound, seed=cfg.seed)
if available:
    dataset = "real" if source.kind == "path" else cfg.benchmark
    groupings = (["known"] if data.GROUP in table.columns else []) + ["split", "joint"]
    name = f"realdata_case_study{suffix}"
    built = {name: results_tables.build_table(
        settings, None, {dataset: table}, eps={dataset: cfg.eps}, cal_ratio={dataset: cfg.cal_ratio},
        groupings=groupings, file_name=name, layout_suffix="_layout",
        rows=LAYOUT_ROWS + (("routed_share", "Routed share (%)"),),
        figure=f"realdata_errorbar_category{suffix}" if "known" in groupings else None,
        title=f"{path.name}: eps = {cfg.eps}",
        paper_columns=not suffix,  # the real table's long table keeps its (empty) paper columns
    )}
    if "known" in groupings:
        known = built[name].results.query("grouping == 'known'")
        gv = group_violations(known, None, results_tables.GROUP_KEYS)[realdata.VIOLATION_COLUMNS]
        plotting.save_table(gv, f"realdata_group_violations{suffix}", floatfmt=".3f")
    for title, frame in results_tables.views(built):
        print(f"== {title}")
        display(frame)

# %% [markdown]
# ## Reading the result
# On real outputs the paper's qualitative picture holds: with the paper's settings marginal PAC
# leaves some subjects above $\varepsilon$ in many trials, while per-subject thresholds (G-PAC)
# and per-cluster thresholds (C-PAC) bring every group's mean test error below $\varepsilon$.
# The violation rates show the difference between the paper's settings and valid ones: under the
# paper's CLT/resample/max calibration the small subjects (Precalculus: 35 problems, Geometry: 44)
# are violated well above $\alpha$; the valid calibration keeps every subject near or below
# $\alpha$ but routes far fewer queries to the cheap model.
