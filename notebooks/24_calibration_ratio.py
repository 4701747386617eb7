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
# # 24 — Ablation: the calibration ratio
#
# **Reproduces** `fig:results_calibration_ratio_math500` (MATH-500) and
# `fig:results_calibration_ratio_other` (ZebraLogic, GPQA): Error, Error$_{\rm Gap}$ and STP of
# PAC and G-PAC (known groups) for three scores as the share of items used for calibration
# varies, Qwen pair, $\alpha = 0.05$, $\varepsilon$ as in `table:01_results_known`
# (0.05 / 0.08 / 0.15), red dashed line = $\varepsilon$.
#
# **Settings** (`notebooks/config/24_calibration_ratio.yaml`). The paper's (`resample`, CLT, `max`, $\pi=0.5$, $T=100$). The paper does not
# list the ratios it used; we use 0.3, 0.4, …, 0.8.
#
# **Reads** (parameter `data_source`) `data/simulated/<benchmark>__qwen.parquet` by default
# (simulated stand-ins, see `data/simulated/README.md`); `"generated"`: the scored tables of
# `02_scores` for `benchmarks` and `pair`; or a path to a table in the data schema (with `columns`).
# The table needs known groups (`group`). Benchmarks outside the paper need an explicit `eps`.
# **Writes** `figures/results_calibration_ratio_math500.{png,pdf}`,
# `figures/results_calibration_ratio_other.{png,pdf}`, `figures/tables/calibration_ratio.{csv,md}`;
# from another source the names end in `__<source>` (e.g. `calibration_ratio__generated__smollm2`).
#
# **Runtime** (2 cores, measured): fast profile ~7 s; paper profile ~20–25 s.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from gpac_utils import Recipe
from gpac_utils.experiment import ExperimentConfig, summarize
from gpac_utils.paper import plotting, reference, sources
from gpac_utils.paper.reference import SCORE_LABELS, TITLES
from gpac_utils.paper.results_tables import quiet_run
from gpac_utils.workflow import config

plotting.apply_style()

# %% tags=["parameters"]
profile = "paper"
data_source = "simulated"  # "simulated" | "generated" (the tables 02_scores wrote) | a path to a table
ratios = None  # calibration ratios
n_trials = None  # random calibration/test splits per ratio
overrides = {}  # any other setting of notebooks/config/24_calibration_ratio.yaml

# %%
cfg = config.load(
    "24_calibration_ratio", profile, data_source=data_source, ratios=ratios, n_trials=n_trials, **overrides
)
source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
pair = cfg.pair if source.kind != "path" else None
benchmarks = [source.dataset] if source.kind == "path" else cfg.benchmarks
eps_map = reference.benchmark_eps(benchmarks, cfg.eps, sources.paper_eps("known", pair))
suffix = "" if source.is_simulated else f"__{source.tag(None, pair)}"
cfg, eps_map

# %% [markdown]
# ## Run PAC and G-PAC at every ratio
# For each benchmark and ratio: `n_trials` seeded splits with that share of the items in the
# calibration set; PAC and G-PAC with the paper's recipe on each
# (`gpac_utils.experiment.run_experiment`), summarized over the trials in percent.

# %%
data = {b: sources.load_table(source, b, pair, notebook="24_calibration_ratio", scores=cfg.scores) for b in benchmarks}
for note in sources.source_notes(data):
    print(note)
recipe = Recipe(label_prob=cfg.label_prob, **cfg.recipe)
rows = []
for b, df in data.items():
    for ratio in cfg.ratios:
        exp = ExperimentConfig(
            eps=eps_map[b],
            alpha=cfg.alpha,
            methods=("PAC", "G-PAC"),
            recipes=(recipe,),
            scores=tuple(cfg.scores),
            n_trials=cfg.n_trials,
            cal_ratio=float(ratio),
            seed=cfg.seed,
        )
        s = summarize(quiet_run(df, exp), eps_map[b])
        rows.append(s.assign(eps=eps_map[b]).assign(dataset=b, cal_ratio=float(ratio)))
summary = pd.concat(rows, ignore_index=True)
shown = ["Error", "Error_Gap", "STP", "routed_share", "violation_max_group", "violation_any_group"]
percent = [*shown, "worst_group_error"]
summary[percent] = 100 * summary[percent]
cols = ["dataset", "cal_ratio", "method", "score", *shown, "trials"]
plotting.save_table(summary[cols], f"calibration_ratio{suffix}")
summary[cols].round(2).head(12)

# %% [markdown]
# ## The figure: one row of panels per benchmark
# Error, Error$_{\rm Gap}$ and STP against the ratio; colour: method, marker and line: score.

# %%
SCORE_STYLES = {"score_logits": ("o", "-"), "score_verbalized": ("s", "--"), "score_router": ("^", ":")}
PANELS = (("Error", "Error (%)"), ("Error_Gap", r"Error$_{Gap}$ (%)"), ("STP", "STP (%)"))


def plot_calibration_ratio(summary):
    datasets = list(dict.fromkeys(summary["dataset"]))
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.2 * len(datasets)), squeeze=False)
    for i, b in enumerate(datasets):
        sub = summary[summary.dataset == b]
        for j, (metric, label) in enumerate(PANELS):
            ax = axes[i, j]
            for (m, s), d in sub.groupby(["method", "score"], sort=False):
                mk, ls = SCORE_STYLES.get(s, ("o", "-"))
                d = d.sort_values("cal_ratio")
                ax.plot(
                    d["cal_ratio"],
                    d[metric],
                    marker=mk,
                    ls=ls,
                    color=plotting.METHOD_COLORS.get(m),
                    ms=4,
                    label=f"{m} / {SCORE_LABELS.get(s, s)}",
                )
            if metric == "Error":
                ax.axhline(100 * float(sub["eps"].iloc[0]), color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
            ax.set_xlabel("calibration ratio")
            ax.set_ylabel(label)
            ax.set_title(f"{TITLES.get(b, b)}: {label}", fontsize=9)
            if i == 0 and j == 2:
                ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    return fig


# %% [markdown]
# (fig:results_calibration_ratio_math500)=
# ## fig:results_calibration_ratio_math500

# %%
if "math500" in benchmarks:
    fig = plot_calibration_ratio(summary[summary.dataset == "math500"])
    plotting.savefig(fig, f"results_calibration_ratio_math500{suffix}")

# %% [markdown]
# (fig:results_calibration_ratio_other)=
# ## fig:results_calibration_ratio_other

# %%
other = summary[summary.dataset != "math500"]
if len(other):
    fig = plot_calibration_ratio(other)
    plotting.savefig(fig, f"results_calibration_ratio_other{suffix}")
# %% [markdown]
# ## Reading the result
# Error$_{\rm Gap}$ per method and ratio (%). Marginal PAC's gap does not vanish at any ratio. G-PAC's is zero
# except where the calibration set is small and split into small groups (the CLT bound is least reliable
# there), and a larger calibration set mostly buys G-PAC routed share (STP) — the paper's caption, "more
# calibration samples enhance efficiency". The counts are below the table.

# %%
summary.pivot_table(index=["dataset", "score", "method"], columns="cal_ratio", values="Error_Gap").round(2)

# %%
from IPython.display import Markdown, display

gap = summary.pivot_table(index=["dataset", "score", "method"], columns="cal_ratio", values="Error_Gap")
stp_gpac = summary[summary["method"] == "G-PAC"].pivot_table(
    index=["dataset", "score"], columns="cal_ratio", values="STP"
)
gpac_gap = gap.xs("G-PAC", level="method") if "G-PAC" in gap.index.get_level_values("method") else gap.iloc[:0]
pac_gap = gap.xs("PAC", level="method") if "PAC" in gap.index.get_level_values("method") else gap.iloc[:0]
above = gpac_gap.stack()[lambda v: v > 0]
lowest, highest = min(cfg.ratios), max(cfg.ratios)
display(
    Markdown(
        f"PAC: Error_Gap > 0 in {int((pac_gap > 0).sum().sum())} of {pac_gap.size} (benchmark, score, ratio) cells. "
        f"G-PAC: Error_Gap = 0 in {int((gpac_gap == 0).sum().sum())} of {gpac_gap.size}"
        + (
            f"; above 0 (up to {above.max():.2f} points) at "
            + ", ".join(f"{b}/{SCORE_LABELS.get(sc, sc)} ratio {r:g}" for (b, sc, r) in above.index)
            if len(above)
            else ""
        )
        + f". G-PAC's STP is higher at ratio {highest:g} than at {lowest:g} for "
        f"{int((stp_gpac[highest] > stp_gpac[lowest]).sum())} of {len(stp_gpac)} (benchmark, score) pairs."
    )
)
