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
# # 34 — Real generations: marginal PAC fails a group, G-PAC repairs it, on outputs this compendium generated
#
# **What it does.** The one table in this compendium that its own pipeline generated from a real
# model at scale: `data/generated/arith__smollm2.parquet` (data card: `data/generated/README.md`).
# SmolLM2-135M-Instruct answered the 2,030 items of the procedurally generated `arith` benchmark
# (`gpac_utils.llm.arithmetic`: 7 groups of arithmetic / short algebra, exact gold answers) in the
# walk's two roles — *think*: a one-shot worked example ending in `\boxed{}`; *nothink*: "final
# answer only" — on the real vLLM engine on CPU (`01_generate`), then `02_scores` graded both
# answers and computed the three scores. Here: accuracy per group and role, each score's AUROC,
# and PAC vs G-PAC, **both with the valid recipe** (Hoeffding–Bentkus on every calibration item,
# first-crossing), over repeated calibration/test splits: per group, the violation rate (share of
# trials in which the group's risk over the whole table exceeds $\varepsilon$) with its Monte
# Carlo standard error, and the routed share (items answered by the non-thinking role).
# Beside it, the same summary on the external real table of notebook 31 (MATH Level 5,
# o1-mini / gpt-4o-mini).
#
# **Reads** the generated table through `data_source` (`"generated"`: `data/generated/<benchmark>__<pair>.parquet`;
# or `"simulated"` / a path, see `gpac_utils.paper.sources`) and, when present,
# `../shared/realdata/mathl5_zeroeval/mathl5_zeroeval.csv`.
#
# **Writes** `figures/tables/real_generations_accuracy.{csv,md}`, `figures/tables/real_generations_scores.{csv,md}`,
# `figures/tables/real_generations_groups.{csv,md}` (per method, score and group: violation rate, MCSE,
# routed share), `figures/tables/real_generations_beside.{csv,md}`, and through notebook 21's code
# `figures/tables/known__generated__smollm2{,_groups,_layout}.{csv,md}` and
# `figures/errorbar_category__generated__smollm2.{png,pdf}`.
#
# Notebook 21's table and figure on the same data:
# `python -m gpac_utils.workflow 21 -p data_source generated -p pairs "['smollm2']" -p eps 0.1
# -p overrides "{'benchmarks': ['arith']}"`.
#
# **Runtime** (2 cores): fast profile (20 trials) ~20 s; paper profile (100 trials) ~20 s (measured with other jobs running).

# %%
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from scipy.stats import rankdata

from gpac_utils import data
from gpac_utils.experiment import ExperimentConfig, group_violations, run_experiment
from gpac_utils.paper import plotting, realdata, results_tables, sources
from gpac_utils.workflow import config, paths

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 40)

# %% tags=["parameters"]
profile = "paper"
data_source = None  # None: the config's ("generated"); "simulated" | a path to a table
eps = None  # risk tolerance
n_trials = None  # random calibration/test splits
overrides = {}  # any other setting of notebooks/config/34_real_generations.yaml

# %%
cfg = config.load("34_real_generations", profile, data_source=data_source, eps=eps, n_trials=n_trials, **overrides)
source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
where = source.where(cfg.benchmark, cfg.pair)
table = sources.load_table(source, cfg.benchmark, cfg.pair, notebook="21_table_known_groups", scores=cfg.scores)
print(f"{where}: {len(table)} items, {table[data.GROUP].nunique()} groups")
cfg

# %% [markdown]
# ## Accuracy per group and role, and the scores' quality
# The groups were chosen so that the gain from thinking differs: the loss (think right, nothink
# wrong) is near zero where the worked prompt does not help — in plain multiplications, where (per
# the data card, `data/generated/README.md`) the one-shot example, a `mul_add` item, makes the
# model add a spurious "+ c" step — and large in other groups; the range is printed under the
# tables below. AUROC: how well each score (higher = less confident) ranks the non-thinking role's
# errors, and the loss.

# %%
cols = [data.THINK_CORRECT, data.NOTHINK_CORRECT, data.LOSS]
acc = table.groupby(data.GROUP, sort=True)[cols].mean()
acc.loc["all"] = table[cols].mean()
acc.insert(0, "n", table.groupby(data.GROUP, sort=True).size().reindex(acc.index).fillna(len(table)).astype(int))
acc = acc.rename(columns={data.THINK_CORRECT: "think_acc", data.NOTHINK_CORRECT: "nothink_acc"})
plotting.save_table(acc.reset_index(), "real_generations_accuracy", floatfmt=".3f")

# %% [markdown]
# The AUROC of a score for a binary outcome is the chance that a random positive item (say, a
# non-thinking error) scores above a random negative one, ties counting one half: the Mann–Whitney
# form below, from the scores' ranks. It is checked against the pairwise definition on one score.


# %%
def auroc(score, positive):
    """Area under the ROC curve of ``score`` for the binary ``positive`` (ties count one half)."""
    score, positive = np.asarray(score, float), np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


quality = pd.DataFrame(
    [
        {
            "score": col,
            "auroc_nothink_error": auroc(table[col], table[data.NOTHINK_CORRECT] == 0),
            "auroc_loss": auroc(table[col], table[data.LOSS] > 0),
        }
        for col in data.score_columns(table)
    ]
)
first = quality.iloc[0]  # the pairwise definition, on the first score
u, pos = table[first.score].to_numpy(), (table[data.NOTHINK_CORRECT] == 0).to_numpy()
pairwise = np.mean((u[pos][:, None] > u[~pos][None, :]) + 0.5 * (u[pos][:, None] == u[~pos][None, :]))
assert np.isclose(first.auroc_nothink_error, pairwise)
plotting.save_table(quality, "real_generations_scores", floatfmt=".3f")
display(acc.round(3))
display(quality.round(3))
by_group = acc.drop(index="all")["loss"]
display(
    Markdown(
        f"Loss rate from {by_group.min():.3f} (`{by_group.idxmin()}`) to {by_group.max():.3f} (`{by_group.idxmax()}`); "
        f"`mul_add` {by_group['mul_add']:.3f}. Best score for the loss: `{quality.loc[quality.auroc_loss.idxmax(), 'score']}` "
        f"(AUROC {quality.auroc_loss.max():.3f})."
    )
)

# %% [markdown]
# ## PAC vs G-PAC (valid recipe) over repeated splits
# On each of `n_trials` seeded splits (calibration share `cal_ratio`), marginal PAC fits one
# threshold on the whole calibration set, G-PAC one per group. PAC certifies the marginal risk
# $R(u)=E[\ell\,1\{U\le u\}]\le\varepsilon$ with probability $1-\alpha$; G-PAC certifies each
# group's risk $R(u_j \mid G_j)$ the same way (Theorem 4.2, `thm:known-grouping`). A group is *violated* in
# a trial when its risk over the whole table, at the fitted threshold, exceeds $\varepsilon$.
# A group-conditional guarantee keeps every group's violation rate at most $\alpha$ (up to Monte
# Carlo error); a marginal one does not promise that.

# %%
exp = ExperimentConfig(
    eps=cfg.eps,
    alpha=cfg.alpha,
    methods=("PAC", "G-PAC"),
    recipes=(cfg.recipe,),
    scores=tuple(cfg.scores),
    n_trials=cfg.n_trials,
    cal_ratio=cfg.cal_ratio,
    seed=cfg.seed,
)
results = run_experiment(table, exp)
per_group = group_violations(results, cfg.eps)
routed = results[results.group != "__all__"].groupby(["method", "score", "group"], sort=False)["routed_share"].mean()
per_group = per_group.join(routed, on=["method", "score", "group"])
per_group["limit"] = cfg.alpha + 3 * per_group["violation_mcse"]
cols = ["method", "score", "group", "violation_rate", "violation_mcse", "routed_share", "mean_pop_risk", "n_test"]
plotting.save_table(per_group[cols], "real_generations_groups", floatfmt=".3f")
overall = (
    results[results.group == "__all__"]
    .groupby(["method", "score"], sort=False)[["routed_share", "error"]]
    .mean()
    .rename(columns={"error": "test_error"})
)
display(per_group.pivot_table(index="group", columns=["score", "method"], values="violation_rate").round(3))
display(per_group.pivot_table(index="group", columns=["score", "method"], values="routed_share").round(3))
display(overall.round(3))

# %% [markdown]
# ## Notebook 21's table and figure on the same data
# The library call of `21_table_known_groups` (`results_tables.make_tables`) with
# `data_source` = this table: PAC and G-PAC with the paper's recipe, G-PAC with the valid bounds,
# the paper layout, per-group violation rates and the per-group error figure
# (`figures/errorbar_category__generated__smollm2.{png,pdf}`, tables `known__generated__smollm2*`).

# %%
cfg21 = config.load(
    "21_table_known_groups",
    profile,
    data_source=cfg.data_source,
    columns=cfg.columns,
    generated_root=cfg.generated_root,
    pairs=[cfg.pair],
    benchmarks=[cfg.benchmark],
    eps=cfg.eps,
    scores=cfg.scores,
    alpha=cfg.alpha,
    n_trials=cfg.n_trials21,
    seed=cfg.seed,
)
built21 = results_tables.make_tables(results_tables.TableSettings(**cfg21))
for title, frame in results_tables.views(built21):
    print(f"== {title}")
    display(frame)

# %% [markdown]
# ## The claim, checked
# Per score: the largest per-group violation rate of PAC (above $\alpha$ means marginal PAC
# fails a group), whether every G-PAC group stays within $\alpha + 3\,$MCSE, and G-PAC's routed share.

# %%
claim = []
for score, g in per_group.groupby("score", sort=False):
    pac, gpac = g[g.method == "PAC"], g[g.method == "G-PAC"]
    claim.append(
        {
            "score": score,
            "PAC max violation": pac.violation_rate.max(),
            "PAC worst group": pac.loc[pac.violation_rate.idxmax(), "group"],
            "G-PAC max violation": gpac.violation_rate.max(),
            "G-PAC within alpha + 3 MCSE": bool((gpac.violation_rate <= gpac.limit).all()),
            "G-PAC routed share": overall.loc[("G-PAC", score), "routed_share"],
            "PAC routed share": overall.loc[("PAC", score), "routed_share"],
        }
    )
claim = pd.DataFrame(claim)
claim["PAC fails a group"] = claim["PAC max violation"] > cfg.alpha
display(claim.round(3))
holds = bool(claim["PAC fails a group"].all() and claim["G-PAC within alpha + 3 MCSE"].all())
display(
    Markdown(
        f"PAC's largest per-group violation rate: {claim['PAC max violation'].min():.2f}–{claim['PAC max violation'].max():.2f} "
        f"over the scores; G-PAC's: at most {claim['G-PAC max violation'].max():.2f}, every group within $\\alpha$ + 3 MCSE: "
        f"{bool(claim['G-PAC within alpha + 3 MCSE'].all())}. The title's claim "
        f"({'holds' if holds else 'does NOT hold'} on this run)."
    )
)
if cfg.data_source == "generated" and profile == "paper":
    assert holds, claim

# %% [markdown]
# ## Beside the external real tables
# The same experiment on the external real table of notebook 31 (only when the shared folder is
# there): size, groups, loss rate, and per method the largest per-group violation rate and the
# routed share.


# %%
def beside_row(name, tab, score, eps_):
    res = run_experiment(tab, exp.replace(eps=eps_, scores=(score,)))
    gv = group_violations(res, eps_)
    row = {
        "table": name,
        "n": len(tab),
        "groups": tab[data.GROUP].nunique(),
        "loss": tab[data.LOSS].mean(),
        "score": score,
        "eps": eps_,
    }
    for m in ("PAC", "G-PAC"):
        row[f"{m} max violation"] = gv[gv.method == m].violation_rate.max()
        row[f"{m} routed share"] = res[(res.method == m) & (res.group == "__all__")].routed_share.mean()
    return row


rows = [beside_row(f"{cfg.benchmark}__{cfg.pair} ({source.kind})", table, s, cfg.eps) for s in cfg.scores]
for name, ext in cfg.external.items():
    path = paths.REALDATA / ext["path"]
    if not path.is_file():
        print(f"{name}: not found at {path} (skipped)")
        continue
    rows.append(
        beside_row(name, realdata.realdata_table(data.read_table(path, ext["columns"]), None), ext["score"], ext["eps"])
    )
beside = pd.DataFrame(rows)
plotting.save_table(beside, "real_generations_beside", floatfmt=".3f")
display(beside.round(3))
