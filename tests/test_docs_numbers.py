"""Every result quoted in the book's pages is recomputed from the committed tables (issue 25).

A number that reports a result (a table cell, a rate, a count of cells, a ratio) in README.md or
docs/*.md is either checked here against `figures/tables/*.csv|.md` or written without the number,
pointing to the notebook that shows it. Each check rebuilds the quoted text from the table and asserts
that the page contains it, at the page's rounding: when a notebook's output changes, the page is stale
and this test fails until the sentence is rewritten. Settings (ε, α, n) and dated timings stay typed.
"""

from __future__ import annotations

import functools
import re
import statistics

import numpy as np
import pandas as pd
import pytest
import repo_scripts
import yaml

from gpac_utils.feasibility import min_items
from gpac_utils.workflow.paths import REPO_ROOT

TABLES = REPO_ROOT / "figures" / "tables"


def page(name: str) -> str:
    """The page's text with runs of whitespace (line breaks included) collapsed to one space."""
    return re.sub(r"\s+", " ", (REPO_ROOT / name).read_text(encoding="utf-8"))


def table(name: str) -> pd.DataFrame:
    return pd.read_csv(TABLES / f"{name}.csv")


def assert_quoted(name: str, text: str) -> None:
    assert re.sub(r"\s+", " ", text) in page(name), f"{name} should say {text!r} (recomputed from figures/tables)"


def thousands(count: int) -> str:
    return f"{count:,}".replace(",", " ")


def pct(value: float, digits: int = 1) -> str:
    return f"{100 * value:.{digits}f}"


# --- docs/results.md: the Qwen known-groups table, cell by cell against the committed layout -----------


def markdown_rows(text: str, header_start: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return header, rows


def test_results_known_table_matches_the_committed_layout():
    text = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    header, rows = markdown_rows(text, "| Dataset | Metric |")
    layout_header, layout_rows = markdown_rows(
        (TABLES / "01_results_known_paper_layout.md").read_text(encoding="utf-8"), "| Dataset |"
    )
    cells = {(r[0], r[2]): dict(zip(layout_header, r, strict=True)) for r in layout_rows}
    assert len(rows) >= 8
    for row in rows:
        source = cells[(row[0], row[1])]
        for column, value in zip(header[2:], row[2:], strict=True):
            column = column.removesuffix(" (wsr)")
            assert value == source[column], (row[0], row[1], column, value, source[column])
    # The page names the valid column's bound: the layout's "valid" cells are the wsr rows.
    assert "Logits G-PAC valid (wsr)" in header
    known = table("01_results_known")
    wsr = known[(known["Score"] == "Logits") & (known["Bound"] == "wsr")].set_index("Dataset")
    for dataset, stp in wsr["STP (%)"].items():
        assert cells[(dataset, "STP (%)")]["Logits G-PAC valid"] == f"{stp:.2f}", dataset


# --- docs/results.md: the bullets under the table ----------------------------------------------------


def test_results_overall_error_and_cpac_gaps():
    known = table("01_results_known")
    pac = known[(known["Method"] == "PAC") & (known["Score"] == "Logits")].set_index("Dataset")
    pairs = ", ".join(
        f"{pac.loc[d, 'Error (%)']:.2f} vs {pac.loc[d, 'Error paper (%)']:.2f}"
        for d in ["MATH-500", "ZebraLogic", "GPQA"]
    )
    assert_quoted("docs/results.md", f"The overall Error is close ({pairs})")

    # G-PAC: Error_Gap = 0 for every benchmark, score and both model pairs.
    for name in ["01_results_known", "01_llama_results"]:
        frame = table(name)
        assert (frame.loc[frame["Method"] == "G-PAC", "Error_Gap (%)"] == 0).all(), name
    # C-PAC: zero everywhere except the two cells the page names.
    unknown = pd.concat([table("01_results_unknown"), table("01_results_unknown_llama")], keys=["Qwen", "Llama"])
    gaps = unknown[(unknown["Method"] == "C-PAC") & (unknown["Error_Gap (%)"] > 0)]
    assert set(zip(gaps.index.get_level_values(0), gaps["Dataset"], gaps["Clustering"], gaps["Setting"])) == {
        ("Qwen", "MATH-500", "disjoint", "paper")
    }
    gap = gaps.set_index("Score")["Error_Gap (%)"]
    assert_quoted(
        "docs/results.md",
        f"MATH-500 Qwen with disjoint clustering ({gap['Logits']:.2f} logits, {gap['Verbalized']:.2f} verbalized)",
    )


def test_results_violation_ranges():
    frame = pd.concat(
        [table(n) for n in ["01_results_known", "01_llama_results", "01_results_unknown", "01_results_unknown_llama"]]
    )
    grouped = frame[frame["Method"].isin(["G-PAC", "C-PAC"])]
    paper, valid = grouped[grouped["Setting"] == "paper"], grouped[grouped["Setting"] == "valid"]

    def span(values: pd.Series) -> str:
        return f"{values.min():.0f}–{values.max():.0f} %"

    per_group, any_group = "Max group violation (%)", "Violation any group (%)"
    assert set(frame["Dataset"]) == {"MATH-500", "ZebraLogic", "GPQA"}  # "on the verifiable benchmarks (...)"
    assert_quoted("docs/results.md", f"exceeds ε in {span(paper[per_group]).replace(' %', ' % of trials')}")
    assert_quoted("docs/results.md", f"some group exceeds ε in {span(paper[any_group])}")
    arena = pd.concat([table("arena_results"), table("arena_results_llama")])
    arena_paper = arena[arena["Method"].isin(["G-PAC", "C-PAC"]) & (arena["Setting"] == "paper")]
    some_group = span(arena_paper[any_group])
    assert_quoted(
        "docs/results.md",
        f"on Arena-Hard (semantic loss) in {span(arena_paper[per_group])} (some group in {some_group})",
    )
    assert_quoted("docs/results.md", f"the per-group violation rate stays within {span(valid[per_group])}")
    assert_quoted(
        "docs/results.md", f"MCSE of at most {valid['Max group violation MCSE (%)'].max():.1f} %; some group in"
    )
    assert_quoted("docs/results.md", f"some group in {span(valid[any_group])}, which the guarantee does not bound")


def test_results_valid_gpac_always_thinks_on_math500():
    known = table("01_results_known")
    valid = known[(known["Dataset"] == "MATH-500") & (known["Method"] == "G-PAC") & (known["Setting"] == "valid")]
    assert (valid["eps"] == 0.05).all() and (valid["Routed share (%)"] == 0).all()  # "always thinks"
    stp = valid.groupby("Score")["STP (%)"].agg(["min", "max"])
    assert set(stp.index) == {"Logits", "Verbalized", "Router"} and (stp["min"] == stp["max"]).all()
    cascade = stp.loc[["Logits", "Verbalized"], "min"]
    assert cascade.nunique() == 1 and stp.loc["Router", "min"] == 0
    assert_quoted(
        "docs/results.md",
        f"always thinks (STP −{-cascade.iloc[0]:.1f} % with the logits and verbalized scores, whose cascade still "
        "pays for the non-thinking answer; 0 with the router score)",
    )


def test_results_real_data_sentence():
    real = table("realdata_case_study")
    known = real[real["Clustering"] == "known groups"]
    pac = known[known["Method"] == "PAC"].iloc[0]
    gpac = known[known["Method"] == "G-PAC"].set_index(["Setting", "Bound"])
    paper, bentkus = gpac.loc[("paper", "clt")], gpac.loc[("valid", "hoeffding_bentkus")]
    # every subject at PAC's largest violation rate is named (a tie is not broken by the table's order)
    rates = table("realdata_group_violations").query("setting == 'paper' and method == 'PAC'")
    tied = rates.loc[rates["violation_rate"] == rates["violation_rate"].max(), "group"].tolist()
    assert pac["Most violated group"] in tied and 100 * rates["violation_rate"].max() == pac["Max group violation (%)"]
    assert_quoted(
        "docs/results.md",
        f"PAC leaves {' and '.join(tied)} above ε in {pac['Max group violation (%)']:.0f} % of trials"
        f"{' each' if len(tied) > 1 else ''} "
        f"(Error_Gap {pac['Error_Gap (%)']:.2f} %); G-PAC removes the gap (violations "
        f"{paper['Max group violation (%)']:.0f} % with the paper's bound, "
        f"{bentkus['Max group violation (%)']:.0f} % with Hoeffding–Bentkus, whose routed share falls from "
        f"{paper['Routed share (%)']:.1f} % to {bentkus['Routed share (%)']:.1f} %)",
    )
    assert gpac["Error_Gap (%)"].eq(0).all()


# --- docs/results.md: the validity audit (notebook 13) ------------------------------------------------


@pytest.fixture(scope="module")
def audit() -> pd.DataFrame:
    return table("validity_audit")


def test_results_validity_audit_counts(audit):
    calibrations = int(audit["calibrations"].iloc[0])
    assert (audit["calibrations"] == calibrations).all()
    alpha = 0.05
    limit = alpha + 3 * (alpha * (1 - alpha) / calibrations) ** 0.5
    assert_quoted("docs/results.md", f"{thousands(calibrations)} calibrations per cell, {thousands(len(audit))} cells")
    assert_quoted("docs/results.md", f"is at most α + 3·MCSE = {pct(limit)} %")
    assert (audit["pass"] == (audit["violation_rate"] <= limit + 1e-12)).all()


def test_results_validity_audit_valid_bounds(audit):
    iid = audit[audit["scheme"].isin(["bernoulli", "full"])]
    worst = {}
    for bound in ["hoeffding_bentkus", "empirical_bernstein", "wsr", "clopper_pearson", "hoeffding"]:
        cells = iid[iid["bound"] == bound]
        assert cells["pass"].all(), bound
        worst[bound] = pct(cells["violation_rate"].max())
    assert_quoted(
        "docs/results.md",
        f"`hoeffding_bentkus` (worst {worst['hoeffding_bentkus']} %), `empirical_bernstein` "
        f"({worst['empirical_bernstein']} %), `wsr` ({worst['wsr']} %), `clopper_pearson` "
        f"({worst['clopper_pearson']} %) and the paper's `hoeffding` ({worst['hoeffding']} %,",
    )
    # "... but it routes nothing at ε = 0.05, n_group = 300"
    hoeffding = iid[(iid["bound"] == "hoeffding") & (iid["n_group"] == 300) & (iid["eps"] == 0.05)]
    assert len(hoeffding) and (hoeffding["always_think"] == 1).all()


def test_results_validity_audit_failures(audit):
    clt = audit[(audit["bound"] == "clt") & (audit["scheme"] == "resample")]
    rates = clt["violation_rate"]
    median_at = {n: pct(statistics.median(clt.loc[clt["n_group"] == n, "violation_rate"])) for n in (50, 100)}
    assert_quoted(
        "docs/results.md",
        f"failed {'all ' if not clt['pass'].any() else ''}{(~clt['pass']).sum()} cells (violation "
        f"{pct(rates.min())}–{pct(rates.max())} %, median {pct(rates.median())} %; medians {median_at[50]} % and "
        f"{median_at[100]} % at n_group = 50 and 100)",
    )
    bern = audit[(audit["bound"] == "clt") & (audit["scheme"] == "bernoulli")]
    worst = bern.loc[bern["violation_rate"].idxmax()]
    assert_quoted(
        "docs/results.md",
        f"labelling {(~bern['pass']).sum()} of {len(bern)} cells (up to {pct(worst['violation_rate'])} % at "
        f"π = {worst['pi']:g})",
    )
    resample = audit[audit["scheme"] == "resample"]
    quoted = []
    for bound in ["clopper_pearson", "wsr"]:
        cells = resample[resample["bound"] == bound]
        quoted.append((f"{(~cells['pass']).sum()}/{len(cells)}", pct(cells["violation_rate"].max())))
    assert_quoted(
        "docs/results.md",
        f"`clopper_pearson` failed {quoted[0][0]} resample cells (up to {quoted[0][1]} %), "
        f"`wsr` {quoted[1][0]} (up to {quoted[1][1]} %)",
    )
    for bound in ["hoeffding_bentkus", "empirical_bernstein"]:
        assert resample.loc[resample["bound"] == bound, "pass"].all(), bound


def test_results_validity_audit_cost():
    ratio = table("validity_audit_oracle_ratio")
    cp = ratio[ratio["bound"] == "clopper_pearson"]

    def at(scheme: str, label_prob: float) -> pd.DataFrame:
        return cp[(cp["scheme"] == scheme) & (cp["pi"] == label_prob)]

    full = at("full", 1)
    routed, routed_clt = full["oracle_ratio"].mean(), full["oracle_ratio_clt"].mean()
    cost = round(100 * (1 - routed / routed_clt))
    half, tenth = at("bernoulli", 0.5), at("bernoulli", 0.1)
    assert_quoted(
        "docs/results.md",
        f"`clopper_pearson` with full labels, routes {pct(routed)} % of the oracle share versus "
        f"{pct(routed_clt)} % for `clt` (resampling, π = 1): validity costs about {cost} % of the routed "
        f"share there (ratios {half['oracle_ratio'].mean() / half['oracle_ratio_clt'].mean():.2f} and "
        f"{tenth['oracle_ratio'].mean() / tenth['oracle_ratio_clt'].mean():.2f} with",
    )


def test_results_proposition_check():
    check = table("prop33_check").set_index("statement")
    fixed = check.loc["fixed partition (proof step): grouped >= marginal"]
    assert_quoted(
        "docs/results.md",
        f"in {thousands(int(fixed['cases']))} cases ({thousands(int(fixed['cases']) // 3)} random heterogeneous "
        f"populations × 3 tolerances) with a fixed partition G-PAC routed at least as much as marginal PAC in only "
        f"{pct(fixed['share_holding'])} %",
    )
    # the scan's size: its populations times its tolerances (notebooks/config/10_oracle_partition.yaml)
    spec = yaml.safe_load((REPO_ROOT / "notebooks" / "config" / "10_oracle_partition.yaml").read_text())["common"]
    assert int(fixed["cases"]) == spec["n_random"] * len(spec["prop_eps"]) and len(spec["prop_eps"]) == 3
    # What does hold: the corrected statement and equality, in every population.
    assert check.loc["corrected: grouped >= common valid threshold", "share_holding"] == 1
    assert check.loc["equality: grouped == marginal", "share_holding"] == 1


# --- docs/planning.md: notebook 32's tables --------------------------------------------------------------


def test_planning_simulated_label_counts():
    sim = table("label_budget_sim")
    zero_loss = sim[sim["loss_rate"] == 0]
    # a loss-free pilot certifies from the bound's minimum with the logits and router scores (the verbalized score's
    # posterior keeps room for a loss the pilot did not see, so it may need more)
    needed = int(zero_loss["labels_to_certify"].min())
    assert needed == min_items(0.05, 0.05)
    assert zero_loss[zero_loss["score"] != "score_verbalized"]["labels_to_certify"].eq(needed).all()
    assert_quoted("docs/planning.md", f"needs **{needed}** labelled items before Hoeffding–Bentkus")

    target = sim.pivot(index="group", columns="score", values="labels_for_target_mean")
    for score in ["score_logits", "score_router"]:
        assert (target[score] == needed).all(), score
    assert_quoted("docs/planning.md", f"**{needed} labels per subject** (about {needed * len(target)} in all)")
    verbalized = target["score_verbalized"]
    others = verbalized.drop(["Intermediate Algebra", "Precalculus"])
    assert others.min() == needed and others.max() < 2 * needed
    span = f"{needed}" if others.max() == needed else f"{needed}–{others.max():.0f}"
    assert_quoted(
        "docs/planning.md",
        f"with the verbalized score {span} for {number_word(others.size)} subjects, about "
        f"{verbalized['Intermediate Algebra']:.0f} for Intermediate Algebra, and Precalculus not within",
    )
    assert pd.isna(verbalized["Precalculus"])
    to_certify = sim[sim["score"] == "score_verbalized"].set_index("group")["labels_to_certify"][others.index]
    slow = to_certify[to_certify > others]  # the mean reaches the target before P(certify) reaches 1/2
    when = f"{slow.min():.0f}" if slow.min() == slow.max() else f"{slow.min():.0f}–{slow.max():.0f}"
    assert_quoted(
        "docs/planning.md",
        f"{number_word(slow.size)} of those {number_word(others.size)} subjects "
        f"{'reaches' if slow.size == 1 else 'reach'} P(certify) ≥ ½ only at {when}",
    )
    from gpac_utils.paper.reference import CAL_RATIO
    from gpac_utils.recipe import Recipe

    items = [int(round(CAL_RATIO["math500"] * n)) for n in sim.drop_duplicates("group")["pilot_n"]]
    half = min_items(0.05, 0.05, Recipe(sampling="bernoulli", label_prob=0.5))
    assert max(items) < half
    assert_quoted(
        "docs/planning.md",
        f"{CAL_RATIO['math500']:.0%} of each subject with π = 0.5: {min(items)}–{max(items)} items "
        f"(about {0.5 * min(items):.0f}–{0.5 * max(items):.0f} expected labels), below the {half} items π = 0.5 needs",
    )


def number_word(count: int) -> str:
    return ["zero", "one", "two", "three", "four", "five", "six", "seven"][count]


def test_planning_real_allocation():
    real = table("label_budget_real").set_index("allocation")
    groups = table("label_budget_real_groups")
    trials = int(real["trials"].iloc[0])
    uniform = groups[groups["allocation"] == "uniform"]

    def share(name: str) -> str:
        return pct(real.loc[name, "routed_share_mean"])

    assert_quoted(
        "docs/planning.md",
        f"the π = 0.5 budget (~{real.loc['planned', 'labels']:.0f} labels), {trials} seeded splits:* the "
        f"planned allocation routes **{share('planned')} %** of held-out traffic, against "
        f"**{real.loc['uniform', 'routed_share_mean'] * 100:.0f} %** for the uniform split (at most "
        f"{uniform['labels'].max():.0f} labels per subject, below the ~{min_items(0.10, 0.05)} the bound "
        f"needs) and **{share('pi=0.5')} %** for π = 0.5; on average it routes more than uniform even when uniform "
        f"also gets the pilot's labels ({share('uniform + pilot')} % with about the same "
        f"{real.loc['uniform + pilot', 'labels']:.0f} labels the planned split buys, pilot included",
    )
    worst = real["violation_rate_worst_group"].max() * trials
    assert abs(worst - round(worst)) < 1e-6
    assert_quoted("docs/planning.md", f"Worst per-group violation rate: {round(worst)} in {trials} splits")


def test_data_walk_item_count():
    lines = (REPO_ROOT / "data" / "walk" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    items = sum(1 for line in lines if line.strip())
    assert_quoted("docs/data.md", f"on {items} shipped items (`data/walk/items.jsonl`)")


def test_results_differences_in_size_and_ece():
    counts = []
    for name, pair in [("01_results_known", "Qwen"), ("01_llama_results", "Llama")]:
        pac = table(name).query("Method == 'PAC'")
        gaps = int((pac["Error_Gap (%)"] > pac["Error_Gap paper (%)"]).sum())
        stps = int((pac["STP (%)"] > pac["STP paper (%)"]).sum())
        counts.append(
            f"the gap in {gaps} of {len(pac)}"
            + ("" if pair == "Llama" else " cells")
            + f", STP in {stps} of {len(pac)}"
        )
    assert_quoted("docs/results.md", f"(Qwen, known groups: {counts[0]}; Llama: {counts[1]})")

    ece = table("ece_scores").query("pair == 'qwen'").pivot(index="dataset", columns="score", values="ECE")
    for dataset in ["math500", "zebralogic"]:
        assert ece.loc[dataset].idxmax() == "score_router", dataset
    assert ece.loc["gpqa", "score_verbalized"] > ece.loc["gpqa", "score_router"]


def test_results_pac_overshoots_the_named_groups():
    named = {"MATH-500": ("Precalculus", 0.05), "ZebraLogic": ("X-Large", 0.08), "GPQA": ("Biology", 0.15)}
    pac = table("01_results_known").query("Method == 'PAC'")
    for _, row in pac.iterrows():
        group, eps = named[row["Dataset"]]
        assert row["Worst group (test error)"] == group and row["eps"] == eps, row["Dataset"]
        assert row["Error (%)"] < 100 * eps and row["Error_Gap (%)"] > 0, row["Dataset"]
    for dataset, (group, eps) in named.items():
        assert_quoted("docs/results.md", f"{group} at {'ε = ' if dataset == 'MATH-500' else ''}{100 * eps:.0f} %")


def test_results_trial_count():
    trials = table("01_results_known")["Trials"]
    assert (trials == trials.iloc[0]).all()
    assert_quoted("docs/results.md", f"the share of the {trials.iloc[0]} trials in which that group's risk")


# --- docs/teaching.md: the numbers of the prerequisites, from their formulas -----------------------------


def test_teaching_prerequisite_numbers():
    import math

    from scipy.stats import norm

    eps = alpha = 0.05
    kl_form = math.ceil(math.log(alpha) / math.log(1 - eps))  # zero losses: (1 - eps)^n <= alpha (notebook 32)
    sub_gaussian = math.ceil(math.log(1 / alpha) / (2 * eps**2))  # exp(-2 n eps^2) <= alpha
    assert_quoted("docs/teaching.md", f"({kl_form} against {sub_gaussian} labels before anything certifies")
    miss = norm.cdf(-norm.ppf(1 - alpha) / math.sqrt(2))  # the resampled CLT bound's large-n miss rate (notebook 13)
    assert_quoted(
        "docs/teaching.md", f"misses about {round(100 * miss)} % of calibrations instead of {100 * alpha:g} %"
    )


def test_teaching_the_resampled_clt_miss_rates_and_the_case_study_violation(audit):
    """The lessons' numbers on the paper's recipe (issue 50): the resampled CLT bound misses about 12 % for
    large n (first order) but more at small n, and Precalculus's violation rate in notebook 31's question."""
    import math

    from scipy.stats import norm

    clt = audit[(audit["bound"] == "clt") & (audit["scheme"] == "resample") & (audit["rule"] == "first-crossing")]
    worst = clt.loc[clt["violation_rate"].idxmax()]
    small, large = (
        round(100 * worst["violation_rate"]),
        round(100 * clt.loc[clt["n_group"] >= 300, "violation_rate"].median()),
    )
    predicted = round(100 * norm.cdf(-norm.ppf(0.95) / math.sqrt(2)))
    assert (small, int(worst["n_group"]), large, predicted) == (37, 25, 13, 12)
    lectures, questions = "docs/_slides/lectures.toml", "notebooks/questions/13_validity_audit.json"
    assert_quoted(
        lectures,
        rf"about ${predicted}\,\%$ at $\alpha = 5\,\%$ for large $n$ (the first-order value), "
        rf"up to ${small}\,\%$ in the audit at $n = {worst['n_group']}$",
    )
    for name in (lectures, questions):
        assert_quoted(name, f"about {predicted} percent at alpha 5 percent for large n")
        assert_quoted(name, f"up to {small} percent")
    assert_quoted(lectures, f"up to {small} percent in the audit at n = {worst['n_group']}")
    assert_quoted(lectures, f"at small n the audit measures more (up to {small} percent at n = {worst['n_group']})")
    assert_quoted(
        "notebooks/13_validity_audit.py",
        f"about {large} % measured against {predicted} % # predicted at n ≥ 300); at small n the audit measures more",
    )
    cases = table("realdata_group_violations")
    (row,) = (
        cases[(cases["setting"] == "paper") & (cases["method"] == "G-PAC")].nlargest(1, "violation_rate").itertuples()
    )
    trials = round(row.violation_rate * (1 - row.violation_rate) / row.violation_mcse**2)
    assert row.violation_rate - 0.05 <= 3 * row.violation_mcse  # "within Monte Carlo error of it"
    assert_quoted(
        "notebooks/questions/31_realdata_case_study.json",
        f"here {row.group} is violated in {pct(row.violation_rate, 0)} percent of {trials} trials (MCSE "
        f"{pct(row.violation_mcse)} percent): above alpha",
    )


def test_planning_limits_follow_the_real_table_benchmark():
    """docs/planning.md's measured limits are those of benchmarks/plan_realdata*.csv."""
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata.csv")
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata_groups.csv")
    cov, width = s["coverage"], s["band_width"]
    assert (cov >= 0.75).all()  # the coverage goal holds in every setting
    assert_quoted(
        "docs/planning.md",
        f"realised mean routed share in {100 * cov.min():.0f}–{100 * cov.max():.0f} % of (group, pilot) cases per "
        f"setting, with a mean width of {100 * width.min():.0f}–{100 * width.max():.0f} points",
    )
    planned = rows[rows["n_labels"] > 0]
    span = {t[:4]: f"{g['pilot_n'].min()}–{g['pilot_n'].max()}" for t, g in planned.groupby("table")}
    assert_quoted("docs/planning.md", f"(GPQA {span['gpqa']}, MATH {span['math']})")
    sure = planned[planned["p_certify"] >= 0.95]
    assert_quoted("docs/planning.md", f"The {len(sure)} (group, pilot) cases with `p_certify` ≥ 0.95")
    assert_quoted("docs/planning.md", f"certify in {100 * sure['real_cert'].mean():.1f} % of draws on average")
    over = sure[sure["real_cert"] < 0.8]
    assert int(s["overclaim"].sum()) == len(over)
    assert_quoted("docs/planning.md", f"but {len(over)} of them certify in fewer than 80 % of draws")
    # the overclaims as the doc names them: all MATH with a 25 % pilot, Precalculus twice at eps 0.1, Prealgebra once
    assert over["table"].str.startswith("mathl5").all() and (over["pilot_share"] == 0.25).all()
    named = sorted(zip(over["group"], over["eps"]))
    assert named == [("Prealgebra", 0.05), ("Precalculus", 0.1), ("Precalculus", 0.1)]
    pre = over[over["group"] == "Precalculus"]
    assert (pre["n_labels"] == 26).all() and (pre["pilot_n"] == 9).all() and (pre["real_cert"] == 0).all()
    assert pre["p_certify"].round(2).eq(0.96).all()
    alg = over[over["group"] == "Prealgebra"].iloc[0]
    assert (round(alg["p_certify"], 2), round(100 * alg["real_cert"])) == (0.95, 22)
    # chance explains little: the cases planned onto all their rows outside the pilot (a fixed outcome), and the rest
    sizes = _table_sizes()
    cap = np.array([sizes[(t, g)] - p for t, g, p in zip(sure["table"], sure["group"], sure["pilot_n"])])
    full = sure[sure["n_labels"].to_numpy() >= cap]
    expected = (1 - full["p_certify"]).sum()  # their failures if their p_certify were calibrated
    assert (pre["n_labels"] == sizes[("mathl5_zeroeval", "Precalculus")] - 9).all()  # all 26 rows outside the pilot
    rest = sure.drop(full.index)
    assert_quoted(
        "docs/planning.md",
        f"the {len(full)} of the {len(sure)} cases planned onto all their rows would fail about {expected:.1f} times",
    )
    assert_quoted(
        "docs/planning.md",
        f"each of the other {len(rest)} averages 100 calibrations, of which {int((rest['real_cert'] < 1).sum())} cases",
    )
    low = rest.loc[rest["real_cert"].idxmin()]
    assert low["group"] == "Prealgebra" and round(100 * low["real_cert"]) == 22
    assert_quoted("docs/planning.md", "(the lowest is Prealgebra's 22 %)")
    mid = planned[planned["table"].str.startswith("mathl5") & planned["p_certify"].between(0.8, 0.95, inclusive="left")]
    by = mid.groupby("group")[["p_certify", "real_cert"]].mean()
    assert_quoted(
        "docs/planning.md",
        f"predict {mid['p_certify'].mean():.2f} on average and certify in {100 * mid['real_cert'].mean():.0f} %",
    )
    for g in ("Prealgebra", "Precalculus", "Intermediate Algebra"):
        assert_quoted(
            "docs/planning.md", f"{g} {by.loc[g, 'p_certify']:.2f} against {100 * by.loc[g, 'real_cert']:.0f} %"
        )
    assert (by.loc[["Counting & Probability", "Geometry", "Number Theory"], "real_cert"] >= 0.999).all()
    gap = 100 * (s["pred_total"] - s["real_total"])
    within = int((gap.abs() <= 5).sum())
    assert_quoted("docs/planning.md", f"of the realised one in {within} of {len(s)} settings")
    for row, g in zip(s.itertuples(), gap):
        if abs(g) > 5:
            side = "high" if g > 0 else "low"
            assert_quoted("docs/planning.md", f"{abs(g):.1f} points {side}")
            assert_quoted("docs/planning.md", f"{100 * row.total_gap_se:.1f}")
    algebra = rows[rows["table"].str.startswith("mathl5") & (rows["pilot_share"] == 0.1) & (rows["group"] == "Algebra")]
    for eps in (0.05, 0.1):
        a = algebra[algebra["eps"] == eps]
        share = 100 * (a["traffic"] * (a["pred_mean"] - a["real_mean"])).sum() / a["pilot"].nunique()
        assert share < -2.5  # Algebra, under-predicted, carries most of the gap
        assert_quoted("docs/planning.md", f"{abs(share):.1f}")
    math = s[s["table"].str.startswith("mathl5")]
    beaten = int((math["brier"] < math["brier_const"]).sum())
    assert_quoted("docs/planning.md", f"in hindsight in {number_word(beaten)} of four MATH settings")
    for row in math[math["brier"] >= math["brier_const"]].itertuples():
        assert_quoted("docs/planning.md", f"({row.brier:.4f} vs {row.brier_const:.4f})")
    gpqa = s[s["table"].str.startswith("gpqa")]
    assert (~gpqa["brier_beatable"]).all() and gpqa["goal_brier"].all()
    assert (gpqa["brier"] > gpqa["brier_const"]).all()  # "scores worse than it in all four settings"
    assert (gpqa["brier_const"] < 0.01).all()
    assert_quoted("docs/planning.md", f"holds in all four (at most {gpqa['brier'].max():.3f})")
    worst_gpqa = gap[s["table"].str.startswith("gpqa")].abs().idxmax()
    assert_quoted("docs/planning.md", f"On GPQA the gap is at most {abs(gap[worst_gpqa]):.1f} points")
    se = 100 * s.loc[worst_gpqa, "total_gap_se"]
    assert_quoted("docs/planning.md", f"standard error {se:.1f}), and that")
    assert_quoted("docs/planning.md", f"It now reads {abs(gap[worst_gpqa]):.1f} ± {se:.1f}: a pass")
    table, eps, share = s.loc[worst_gpqa, ["table", "eps", "pilot_share"]]
    here = rows[(rows["table"] == table) & (rows["eps"] == eps) & (rows["pilot_share"] == share)]
    per_group = (here["traffic"] * (here["pred_mean"] - here["real_mean"])).groupby(here["group"]).sum()
    per_group *= 100 / here["pilot"].nunique()
    assert_quoted("docs/planning.md", f"the pilot saw little of, is {per_group['Chemistry']:.1f} points high")
    assert_quoted("docs/planning.md", f"Physics {-per_group['Physics']:.1f} points low")
    assert_quoted("docs/planning.md", f"{rows['pilot'].nunique()} pilot draws × 100")
    # the benchmark's former 10 pilot draws are its first 10 (same seeds): their summary, by the benchmark's own code
    bench = _plan_benchmark()
    keys = ["table", "eps", "pilot_share"]
    s10, later = (bench.summarise(r)[0].set_index(keys) for r in (rows[rows["pilot"] < 10], rows[rows["pilot"] >= 10]))
    before = s10.loc[("gpqa_gemma4_d30", 0.05, 0.1)]
    assert before["gap"] > 0.05  # a miss with 10 draws
    assert_quoted(
        "docs/planning.md",
        f"read {100 * before['gap']:.1f} points high with a standard error of {100 * before['total_gap_se']:.1f}",
    )
    assert_quoted("docs/planning.md", f"alone read {100 * later.loc[('gpqa_gemma4_d30', 0.05, 0.1), 'gap']:.1f})")
    shift = [
        100 * abs(s10.loc[("mathl5_zeroeval", e, 0.1), "gap"] - later.loc[("mathl5_zeroeval", e, 0.1), "gap"])
        for e in (0.05, 0.1)
    ]
    assert_quoted("docs/planning.md", f"first 10 by {shift[0]:.1f} and {shift[1]:.1f} points")
    rows10 = rows[(rows["pilot"] < 10) & (rows["n_labels"] > 0)]
    assert (rows10.loc[rows10["p_certify"] >= 0.95, "real_cert"] >= 0.8).all()  # the overclaims "which 10 did not" find


def _table_sizes() -> dict:
    """{(table, group): rows} of the benchmark's real tables."""
    out = {}
    for name, table in _plan_benchmark().TABLES.items():
        out.update({(name, g): int(n) for g, n in table.read()["group"].value_counts().items()})
    return out


@functools.cache
def _plan_benchmark():
    """benchmarks/plan_realdata.py as a module (it is a script, not part of the package), loaded once."""
    return repo_scripts.load("benchmarks/plan_realdata.py")


def test_planning_goal_failures_and_the_thin_pilot_caveat():
    """docs/planning.md's account of which goals fail where, and the thin-pilot line of ``gpac plan``, follow
    benchmarks/plan_realdata*.csv: every setting that misses the total goal is thin, none thicker misses any goal,
    and THIN_PILOT_GAP is the largest gap of a thin setting, rounded up to a tenth."""
    import math

    from gpac_utils.prediction import THIN_PILOT, THIN_PILOT_GAP

    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata.csv")
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata_groups.csv")
    keys = ["table", "eps", "pilot_share"]
    mean_pilot = rows[rows["n_labels"] > 0].groupby(keys)["pilot_n"].mean()
    s = s.join(mean_pilot.rename("mean_pilot"), on=keys)
    goals = s.filter(like="goal_")
    assert_quoted("docs/planning.md", f"{int(goals.values.sum())} of the {goals.size} (setting, goal) checks pass")
    strict = goals.assign(goal_brier=s["brier"] < s["brier_const"])  # the Brier goal as the issue states it
    assert_quoted(
        "docs/planning.md", f"checks pass, {int(strict.values.sum())} with the Brier goal as the issue states"
    )
    assert s["goal_coverage"].all()
    thin = s["mean_pilot"] < THIN_PILOT
    assert (~s.loc[~s["goal_total"], "mean_pilot"].ge(THIN_PILOT)).all()  # every miss of the total is thin
    assert s.loc[~thin, ["goal_total", "goal_brier"]].all().all()  # thicker pilots: the total and the Brier goal hold
    assert (s.loc[~s["goal_total"], "pilot_share"] == 0.1).all() and (~s["goal_total"]).sum() == 2
    over = s[~s["goal_overclaim"]]  # the overclaims: MATH's two 25 % settings (the doc names them)
    assert over["table"].str.startswith("mathl5").all() and (over["pilot_share"] == 0.25).all() and len(over) == 2
    assert goals[s["table"].str.startswith("gpqa")].all().all()  # GPQA's settings, thin ones included, meet every goal
    low, high = s.loc[thin, "mean_pilot"], s.loc[~thin, "mean_pilot"]
    assert_quoted("docs/planning.md", f"average {low.min():g}–{low.max():.1f} items ({high.min():g}–{high.max():.1f}")
    worst = float(s.loc[thin, "gap"].abs().max())
    assert THIN_PILOT_GAP == math.ceil(10 * worst) / 10
    assert_quoted("docs/planning.md", f"fewer than {THIN_PILOT} labelled items")
    assert_quoted("docs/planning.md", f"off by up to {100 * THIN_PILOT_GAP:.0f} points of all traffic")
    assert_quoted("docs/planning.md", f"{100 * worst:.1f} points, rounded up), either way")
    brier = s[~s["goal_brier"]]
    assert len(brier) == 1 and brier.iloc[0]["table"].startswith("mathl5") and brier.iloc[0]["eps"] == 0.05
    # one pilot's total is off by far more than the mean gap (the thin-pilot figure is a bias, not a bound)
    weighted = rows.assign(p=rows["traffic"] * rows["pred_mean"], r=rows["traffic"] * rows["real_mean"])
    per_pilot = weighted.groupby([*keys, "pilot"])[["p", "r"]].sum()
    per_pilot = (100 * (per_pilot["p"] - per_pilot["r"])).groupby(level=keys).agg(["min", "max"])
    gpqa_thin = per_pilot.loc[("gpqa_gemma4_d30", 0.05, 0.1)]
    assert round(per_pilot.xs(("gpqa_gemma4_d30", 0.1), level=["table", "pilot_share"])["min"].min()) == -18
    assert round(gpqa_thin["max"]) == 43
    assert_quoted("docs/planning.md", "from −18 to +43 points on GPQA with a 10 %")
    thick = per_pilot.xs(0.25, level="pilot_share")
    assert round(thick.abs().max().max()) == 31
    assert_quoted("docs/planning.md", "by up to 31 points even with a 25 % pilot")
    assert_quoted("docs/planning.md", f"between {low.max():.1f} and {high.min():g} separates them")


def test_planning_the_groups_the_plan_is_wrongly_optimistic_about():
    """docs/planning.md's ratios of predicted to realised routed share for MATH's two over-predicted groups."""
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata_groups.csv")
    math_rows = rows[rows["table"].str.startswith("mathl5") & (rows["n_labels"] > 0)]
    by = math_rows.groupby(["group", "eps", "pilot_share"])[["pred_mean", "real_mean", "p_certify", "real_cert"]]
    means = by.mean()
    ratio = means["pred_mean"] / means["real_mean"]
    algebra = ratio.loc["Intermediate Algebra"]
    assert (round(algebra.min(), 1), round(algebra.max(), 1)) == (1.9, 2.6)
    precalc = means.loc["Precalculus"]
    assert set(precalc.index.get_level_values("eps")) == {0.1}  # planned only at eps = 0.1
    assert (int(ratio.loc["Precalculus"].min()), round(ratio.loc["Precalculus"].max())) == (4, 6)
    assert precalc["p_certify"].round(1).eq(0.8).all()
    assert (round(100 * precalc["real_cert"].min()), round(100 * precalc["real_cert"].max())) == (26, 27)
    assert ratio.loc["Intermediate Algebra"].size == 4  # all four MATH settings
    assert_quoted(
        "docs/planning.md", "1.9–2.6 times the\nrealised one in all four MATH settings, and Precalculus's 4–6 times"
    )
    assert_quoted("docs/planning.md", "while it certifies in 26–27 % of draws")


def test_planning_one_row_decides_prealgebra():
    """docs/planning.md: the one loss at MATH's lowest score, seen or missed by each pilot of the benchmark."""
    df = _plan_benchmark().TABLES["mathl5_zeroeval"].read()
    values = np.sort(df["score"].unique())
    counts = [(int(df.loc[df["score"] == v, "loss"].gt(0).sum()), int((df["score"] == v).sum())) for v in values[:4]]
    low, pre = counts[0], df[(df["score"] == values[0]) & (df["group"] == "Prealgebra")]
    assert low[0] == 1 and pre["loss"].gt(0).sum() == 1
    assert_quoted("docs/planning.md", f"one of the {low[1]} rows at that score (Prealgebra's 1 of {len(pre)})")
    nxt = ", ".join(f"{k} of {m}" for k, m in counts[1:])
    assert_quoted("docs/planning.md", f"above that of the next three scores ({nxt})")
    key = int(pre.index[pre["loss"].gt(0)][0])
    g = df["group"].to_numpy(str)
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata_groups.csv")
    rows = rows[rows["table"].eq("mathl5_zeroeval") & rows["group"].eq("Prealgebra") & rows["eps"].eq(0.05)]
    bench = _plan_benchmark()  # each pilot redrawn as the benchmark drew it
    seen = [bool(bench.pilot_rows(g, r.pilot_share, r.pilot, r.eps)[key]) for r in rows.itertuples()]
    left = int((g == "Prealgebra").sum()) - rows["pilot_n"]
    by = rows.assign(seen=seen, undrawn=1 - rows["n_labels"] / left).groupby(["pilot_share", "seen"])
    n, p, real, undrawn = by.size(), by["p_certify"].mean(), by["real_cert"].mean(), by["undrawn"].mean()
    assert (rows["n_labels"] > 0).all() and n.loc[(0.1, False)] + n.loc[(0.1, True)] == 30
    missed = [(0.1, False), (0.25, False)]
    assert_quoted(
        "docs/planning.md", f"({n.loc[missed[0]]} of 30 pilot draws with a 10 % pilot, {n.loc[missed[1]]} of 30"
    )
    assert_quoted(
        "docs/planning.md",
        f"on average {100 * undrawn.loc[missed[0]]:.0f} % and {100 * undrawn.loc[missed[1]]:.0f} % of its rows left"
        f" are not drawn (with a 10 % and a 25 % pilot), and it certifies in {100 * real.loc[missed[0]]:.0f} % and"
        f" {100 * real.loc[missed[1]]:.0f} % of calibrations, against a mean `p_certify` of {p.loc[missed[0]]:.2f}"
        f" and {p.loc[missed[1]]:.2f}",
    )
    assert real.loc[(0.1, True)] == real.loc[(0.25, True)] == 1.0  # "in every calibration"
    assert_quoted("docs/planning.md", f"holds it ({n.loc[(0.1, True)]} and {n.loc[(0.25, True)]} draws)")
    assert_quoted(
        "docs/planning.md", f"a mean `p_certify` of {p.loc[(0.1, True)]:.2f} and {p.loc[(0.25, True)]:.2f}. The"
    )


def test_planning_the_prealgebra_reversal_is_the_finite_tables():
    """docs/planning.md: in the deployment case (benchmarks/plan_deploy_math*.csv: pilots and calibration sets drawn
    i.i.d. from MATH's table as the population), Prealgebra certifies about as often whether or not the pilot holds
    its one loss at the lowest score; the finite-table benchmark's reversal does not appear."""
    bench = _plan_benchmark()
    df = bench.population("mathl5_zeroeval")
    g = df["group"].to_numpy(str)
    key = int(df.index[(g == "Prealgebra") & (df["score"] == df["score"].min()) & (df["loss"] > 0)][0])
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_math_groups.csv")
    rows = rows[rows["group"].eq("Prealgebra") & rows["eps"].eq(0.05)]
    held = [key in set(bench.iid_pilot(g, r.pilot_share, r.pilot, r.eps).tolist()) for r in rows.itertuples()]
    by = rows.assign(held=held).groupby(["pilot_share", "held"])
    n, p, real = by.size(), by["p_certify"].mean(), by["real_cert"].mean()
    pilots = rows["pilot"].nunique()
    assert (rows["n_labels"] > 0).all() and len(n) == 4
    assert (real.groupby(level="pilot_share").agg(lambda r: r.max() - r.min()) < 0.05).all()  # no reversal
    cells = [(s, h) for s in (0.1, 0.25) for h in (False, True)]
    certs = [f"{100 * real.loc[c]:.0f} %" for c in cells]
    assert_quoted(
        "docs/planning.md",
        f"({pilots} pilot draws per pilot size × 200 fresh calibrations)",
    )
    assert_quoted(
        "docs/planning.md",
        f"Prealgebra certifies in {certs[0]} of calibrations where the pilot misses the row and {certs[1]} where it "
        f"holds it ({n.loc[cells[0]]} and {n.loc[cells[1]]} of {pilots} pilots) with a 10 % pilot, and in "
        f"{certs[2]} and {certs[3]} with a 25 % pilot",
    )
    assert_quoted(
        "docs/planning.md",
        f"its `p_certify` still falls when the pilot holds the row ({p.loc[cells[0]]:.2f} to {p.loc[cells[1]]:.2f} "
        f"and {p.loc[cells[2]]:.2f} to {p.loc[cells[3]]:.2f})",
    )
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_math.csv")
    s = s.query("judged == 'all'").set_index(["population", "pilot_share"])
    gap = 100 * s.loc[("mathl5_zeroeval", 0.1), "gap"]
    assert_quoted("docs/planning.md", f"the total is still {abs(gap):.1f} points low there with a 10 % pilot")


def test_planning_one_row_decides_precalculus():
    """docs/planning.md: in the finite-table benchmark at eps 0.1 with a 25 % pilot, whether the pilot holds
    Precalculus's one loss at its lowest score decides how often it certifies (70 % vs 5 %), not chance."""
    bench = _plan_benchmark()
    df = bench.TABLES["mathl5_zeroeval"].read()
    g = df["group"].to_numpy(str)
    pre = df[(g == "Precalculus")]
    low = pre[pre["score"] == pre["score"].min()]
    assert len(low) == 2 and low["loss"].sum() == 1  # one loss among its two lowest rows
    key = int(low.index[low["loss"] > 0][0])
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_realdata_groups.csv")
    rows = rows[rows["table"].eq("mathl5_zeroeval") & rows["group"].eq("Precalculus")]
    rows = rows[rows["eps"].eq(0.1) & rows["pilot_share"].eq(0.25)]
    held = np.array([bool(bench.pilot_rows(g, r.pilot_share, r.pilot, r.eps)[key]) for r in rows.itertuples()])
    by = rows.assign(held=held).groupby("held")
    n, p, real = by.size(), by["p_certify"].mean(), by["real_cert"].mean()
    assert round(100 * real.loc[True]) == 70 and round(100 * real.loc[False]) == 5
    # not chance: each pilot's rate averages 100 calibrations, and the two sets of pilots barely overlap
    top_missed = rows.loc[~held, "real_cert"].max()
    high_held = int((rows.loc[held, "real_cert"] >= 0.85).sum())
    assert_quoted(
        "docs/planning.md",
        f"none of the {n.loc[False]} that miss it certifies in more than {100 * top_missed:.0f} % of its 100 "
        f"calibrations, {high_held} of the {n.loc[True]} that hold it in at least 85 %",
    )
    assert_quoted(
        "docs/planning.md",
        f"the {n.loc[True]} of {len(rows)} pilots that hold it leave rows that certify in "
        f"{100 * real.loc[True]:.0f} % of calibrations, the {n.loc[False]} that miss it in "
        f"{100 * real.loc[False]:.0f} %, against a mean `p_certify` of {p.loc[True]:.2f} and {p.loc[False]:.2f}",
    )


def test_planning_sequential_cost():
    """docs/planning.md: what a loss-free group costs the sequential mode per bet, and the fixed-n route's 59."""
    from gpac_utils import feasibility, sequential_labels

    u = np.random.default_rng(0).random(300)
    cost = {}
    for bet, batch in (("mixture", 1), ("max", 1), ("mixture", 20)):
        state = sequential_labels.start(u, np.zeros(300), eps=0.05, alpha=0.05, budget=300, batch_size=batch, bet=bet)
        sequential_labels.update(state, u, np.zeros(300))
        while sequential_labels.next_rows(state):
            sequential_labels.update(state, u, np.zeros(300))
        cost[bet, batch] = state["groups"]["0.0"]["labelled"]
    assert_quoted(
        "docs/planning.md",
        f"certifies after **{cost['mixture', 1]}** labels with the default mixture bet and\n"
        f"**{cost['max', 1]}** with the capped maximal bet (`--bet max`), against "
        f"**{feasibility.min_items(0.05, 0.05)}** for the fixed-n route",
    )
    assert_quoted("docs/planning.md", f"({cost['mixture', 20]} labels with batches of 20 and the mixture bet)")


def test_planning_thin_pilot_worst_rate():
    """docs/planning.md: the cautious p_certify's rate for a pilot of 9 clean items, and the pooled cut-off."""
    from gpac_utils import prediction

    rate = prediction.worst_rate([0.0] * 9, [0.0] * 9, [0.0, 1.0])
    assert_quoted("docs/planning.md", f"with 9\nclean items, {100 * rate:.0f} %)")
    assert_quoted("docs/planning.md", f"fewer than {prediction.THIN_PILOT} labelled items (`prediction.THIN_PILOT`)")


def test_planning_deployment_case_and_sequential_cost_are_the_committed_benchmarks():
    """docs/planning.md, "The deployment case, measured" and "Over the benchmark's populations", against
    benchmarks/plan_deploy*.csv (make plan-benchmark) and benchmarks/plan_sequential.csv."""
    page = " ".join((REPO_ROOT / "docs" / "planning.md").read_text().split())
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy.csv").query("judged == 'all'")
    overall, per = s[s["population"] == "ALL"], s[s["population"] != "ALL"]
    assert f"{overall['one_coverage'].min():.0%}"[:-1] == "82" and f"{overall['one_coverage'].max():.0%}" == "86%"
    assert round(overall["worst_cluster_coverage"].min(), 2) == 0.59 and "at least 59 %" in page
    assert (overall["brier"] < overall[["brier_const_other", "brier_pooled"]].min(axis=1)).all()
    assert overall["gap_thick"].dropna().abs().max() < 0.01 and overall["gap_thick"].isna().sum() == 2
    assert round(overall["gain_real"].min(), 3) == 0.043 and round(overall["gain_real"].max(), 3) == 0.057
    assert overall["gain_se"].max() < 0.005 and "4.3–5.7 points" in page
    bad = overall[~overall["goal_overclaim"]]
    assert list(zip(bad["eps"], bad["overclaim"], bad["sure"])) == [(0.05, 6, 101), (0.05, 7, 117)]
    goals = ["goal_band", "goal_total", "goal_brier", "goal_overclaim"]
    assert int(per[goals].all(axis=1).sum()) == 7 and len(per) == 32 and "all four hold in 7 of the 32" in page
    assert [int((~per[g]).sum()) for g in goals] == [7, 5, 9, 9]
    assert (per.loc[~per["goal_band"], "one_coverage"] > 0.9).all() and round(per["one_coverage"].min(), 3) == 0.747
    assert round(per.loc[~per["goal_total"], "gap_thick"].abs().max(), 3) == 0.068
    g = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_groups.csv")
    oc = g[(g["n_labels"] > 0) & (g["p_certify"] >= 0.95) & (g["real_cert"] < 0.8)]
    pooled, thick = oc[oc["pooled"]], oc[~oc["pooled"]]
    assert (len(oc), len(pooled), len(thick)) == (26, 15, 11)
    assert (pooled["pilot_n"].min(), pooled["pilot_n"].max(), round(pooled["p_cautious"].max(), 2)) == (3, 17, 0.77)
    assert (thick["pilot_n"].min(), thick["pilot_n"].max()) == (25, 62)
    assert "15 were groups marked *pooled* (pilots of 3–17 items, cautious `p_certify` at most 0.77)" in page
    t = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_sequential.csv")
    w = t.pivot_table(index=["population", "eps"], columns="route", values=["labels", "routed"])
    ratio = w["labels"]["sequential"] / w["labels"]["planned (pilot 10%)"]
    less = w["routed"]["planned (pilot 10%)"] - w["routed"]["sequential"]
    assert len(w) == 16 and int((ratio < 1).sum()) == 15 and round(ratio.median(), 2) == 0.67
    assert (less > 0).all() and (round(less.min(), 3), round(less.median(), 3)) == (0.034, 0.059)
    seq = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_sequential_groups.csv")
    assert len(seq) == 1720 and round(seq["violation"].mean(), 3) == 0.008
    assert "fewer labels in 15 of the 16" in page and "0.8 % of the 1,720" in page


def test_planning_deployment_case_untested_totals_and_sequential_certifications():
    """docs/planning.md's qualifications of the deployment-case figures (a statistician's read): where the total goal
    is untested, how many groups the sequential mode certifies, and its violations among certified groups."""
    page = " ".join((REPO_ROOT / "docs" / "planning.md").read_text().split())
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy.csv").query("judged == 'all'")
    per = s[s["population"] != "ALL"]
    goals = ["goal_band", "goal_total", "goal_brier", "goal_overclaim"]
    untested = per["gap_thick"].isna()
    assert (int(untested.sum()), int((per[goals].all(axis=1) & untested).sum())) == (22, 5)
    assert (int((~untested).sum()), int((~per["goal_total"]).sum())) == (10, 5)
    assert "in 5 of those 7 the total is not tested" in page and "in 5 of the 10 pairs where it is tested" in page
    t = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_sequential.csv")
    w = t.pivot_table(index=["population", "eps"], columns="route", values="certified")
    assert int((w["sequential"] < w["planned (pilot 10%)"]).sum()) == 10 and "fewer groups in 10 of the 16" in page
    g = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_sequential_groups.csv")
    cert = g[g["status"] == "certified"]
    assert (int(g["violation"].sum()), len(cert), int(cert["violation"].sum())) == (14, 1019, 14)
    assert int(g.groupby(["population", "eps", "group"])["violation"].sum().max()) == 2
    assert "14 of the 1,019 certified, 1.4 %" in page


def test_planning_where_one_loss_decides_against_the_committed_benchmark():
    """docs/planning.md, "Where one loss decides, the plan says it cannot predict" and "Judged on the cases the plan
    does predict", against benchmarks/plan_deploy*.csv (make plan-benchmark) and prediction.one_loss_items."""
    from gpac_utils import prediction
    from gpac_utils.settings import Settings

    page = " ".join((REPO_ROOT / "docs" / "planning.md").read_text().split())
    counts = [
        (prediction.one_loss_items(Settings(eps=e, alpha=0.1), 0.1), prediction.n_needed(Settings(eps=e, alpha=0.1), 1))
        for e in (0.1, 0.05)
    ]
    assert counts == [(47, 22), (96, 45)]
    assert "47 items at ε = 0.1 and 96 at ε = 0.05 with α = 0.1 and the default bound, against the 22 and 45" in page
    g = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_groups.csv")
    lab = g[g["n_labels"] > 0]
    need = lab["eps"].map({0.1: 47, 0.05: 96})
    assert (lab["one_loss_decides"] == (lab["n_labels"] < need) & (lab["p_certify"] > 0)).all()
    marked = lab["one_loss_decides"]
    sure, over = lab["p_certify"] >= 0.95, (lab["p_certify"] >= 0.95) & (lab["real_cert"] < 0.8)
    assert (int(marked.sum()), len(lab), f"{marked.mean():.0%}") == (967, 1514, "64%")
    assert (
        int((over & marked).sum()),
        int((sure & marked).sum()),
        int((over & ~marked).sum()),
        int((sure & ~marked).sum()),
    ) == (24, 191, 2, 483)
    assert "in 967 of the 1,514 planned cases of the benchmark (64 %" in page and "(24 of their 191 cases" in page
    assert "other cases 2 of 483 (0.4 %)" in page
    for pop, q in lab[marked].groupby("population"):
        s = q["p_certify"] >= 0.95
        row = (
            f"| `{pop}` | {len(q)} of {int((lab['population'] == pop).sum())} | {q['p_certify'].mean():.2f} | "
            f"{q['real_cert'].mean():.2f} | {int(s.sum())} | {int((s & (q['real_cert'] < 0.8)).sum())} |"
        )
        assert row in page, row
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy.csv")
    per = s[s["population"] != "ALL"]
    allc, un = per[per["judged"] == "all"], per[per["judged"] == "unmarked"]
    goals = [c for c in per.columns if c.startswith("goal_")]
    miss = [c for c in per.columns if c.startswith("miss_")]
    assert (len(allc), len(un), int(un[goals].all(axis=1).sum())) == (32, 28, 10)
    assert (int(un["goal_overclaim"].sum()), int(un["goal_reliability"].sum())) == (27, 28)
    assert "all five goals hold strictly in 10 of the 28 pairs" in page
    judged = (un["reliability_bins"] > 0) & un["gap_thick"].notna()
    assert (int((un[goals].all(axis=1) & judged).sum()), int((un["reliability_bins"] > 0).sum())) == (3, 10)
    assert int(un["gap_thick"].isna().sum()) == 8 and un.loc[un["reliability_bins"] > 0, "goal_reliability"].all()
    assert "but only 3 of those 10 are judged on every goal" in page and "(18 have none" in page
    assert "not judged in the 8 with no thick pilot" in page
    need = prediction.one_loss_items(Settings(eps=0.05, alpha=0.05), 0.005)
    assert need == 165 and f"below {need} items (`prediction.one_loss_items` at this level)" in page
    flagged = allc[allc[miss].any(axis=1)]
    assert len(flagged) == 9 and allc[miss].sum().to_dict() == {
        "miss_reliability": 2,
        "miss_band": 3,
        "miss_total": 0,
        "miss_brier": 2,
        "miss_overclaim": 3,
    }
    assert (flagged.loc[flagged["miss_band"], "one_coverage"] > 0.9).all()  # too wide
    assert set(flagged.loc[flagged["miss_overclaim"], "population"]) == {"sim0", "sim4"}
    flagged_un = un[un[miss].any(axis=1)]
    assert len(flagged_un) == 6 and un[miss].sum().to_dict() == {
        "miss_reliability": 0,
        "miss_band": 3,
        "miss_total": 1,
        "miss_brier": 3,
        "miss_overclaim": 0,
    }
    wide = flagged_un[flagged_un["miss_band"] & (flagged_un["one_coverage"] > 0.9)]
    assert sorted(wide["population"]) == ["sim2", "sim5"] and (wide["one_coverage"].round(2) == 0.97).all()
    low = flagged_un[flagged_un["miss_total"]]
    assert (low["population"].tolist(), round(float(low["gap_thick"].iloc[0]), 3)) == (["sim5"], -0.06)
    brier = flagged_un[flagged_un["miss_brier"]]
    assert (brier["clusters"] == 1).all() and (
        brier["brier"] - brier[["brier_pooled", "brier_const_other"]].min(axis=1)
    ).max() <= 0.0031 + 1e-9
    assert (
        "Over all cases 9 of the 32 pairs have one" in page
        and "Over the unmarked cases 6 of the 28 pairs have one" in page
    )


def test_planning_held_out_run_of_the_one_loss_mark():
    """docs/planning.md, "On populations and pilots the mark was not chosen on", against
    benchmarks/plan_deploy_heldout*.csv (make plan-benchmark: sim6-sim11, pilot draws 12-23)."""
    page = " ".join((REPO_ROOT / "docs" / "planning.md").read_text().split())
    g = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_heldout_groups.csv")
    assert set(g["population"]) == {f"sim{i}" for i in range(6, 12)} and g["pilot"].between(12, 23).all()
    lab = g[g["n_labels"] > 0]
    marked, sure = lab["one_loss_decides"], lab["p_certify"] >= 0.95
    over = sure & (lab["real_cert"] < 0.8)
    got = (int(marked.sum()), len(lab), int((over & marked).sum()), int((sure & marked).sum()))
    assert got == (821, 1235, 7, 148) and (int((over & ~marked).sum()), int((sure & ~marked).sum())) == (1, 385)
    assert "marks 821 of the 1,235 planned cases (66 %); they hold 7 of the 8 overclaims (7 of their 148" in page
    s = pd.read_csv(REPO_ROOT / "benchmarks" / "plan_deploy_heldout.csv")
    overall = s[(s["judged"] == "all") & (s["population"] == "ALL")]
    assert list(zip(overall["overclaim"], overall["sure"])) == [(3, 90), (0, 102), (1, 170), (4, 171)]
    assert (
        overall["goal_overclaim"].all()
        and (overall["brier"] < overall[["brier_const_other", "brier_pooled"]].min(axis=1)).all()
    )
    assert (f"{overall['one_coverage'].min():.0%}", f"{overall['one_coverage'].max():.0%}") == ("82%", "86%")
    assert (round(overall["gain_real"].min(), 3), round(overall["gain_real"].max(), 3)) == (0.043, 0.066)
    worst = overall.set_index(["eps", "pilot_share"])["worst_cluster_coverage"].round(2)
    assert (worst[(0.1, 0.1)], worst[(0.1, 0.25)]) == (0.1, 0.35) and "in only 10 % (10 % pilots) and 35 %" in page
    rel = overall.set_index(["eps", "pilot_share"])
    assert [round(100 * rel.loc[k, "reliability_off"], 1) for k in [(0.05, 0.1), (0.1, 0.1)]] == [6.3, 5.4]
    assert (
        round(rel.loc[(0.1, 0.25), "gap_thick"], 3) == -0.04 and not rel[["miss_reliability", "miss_total"]].any().any()
    )
    assert "off by 6.3 and 5.4 points" in page and "the total 4.0 points low at ε = 0.1 with 25 % pilots" in page
    assert overall["gain_se"].max() < 0.007 and "(standard error under 0.7)" in page
    miss = [c for c in s.columns if c.startswith("miss_")]
    per = s[s["population"] != "ALL"]
    allc, un = per[per["judged"] == "all"], per[per["judged"] == "unmarked"]
    assert (len(allc), int(allc[miss].any(axis=1).sum()), len(un), int(un[miss].any(axis=1).sum())) == (24, 4, 21, 5)
    assert un[miss].sum().to_dict() == {
        "miss_reliability": 0,
        "miss_band": 5,
        "miss_total": 1,
        "miss_brier": 0,
        "miss_overclaim": 0,
    }
    assert (un.loc[un["miss_band"], "clusters"] <= 2).all()
    high = un[un["miss_total"]]
    assert (high["population"].tolist(), round(float(high["gap_thick"].iloc[0]), 3)) == (["sim10"], 0.107)
    assert round(float(high["gap_thick_se"].iloc[0]), 3) == 0.032 and "predicted 10.7 points above realised" in page
    goals = [c for c in s.columns if c.startswith("goal_")]
    judged = (un["reliability_bins"] > 0) & un["gap_thick"].notna()
    assert (int(un[goals].all(axis=1).sum()), int((un[goals].all(axis=1) & judged).sum())) == (5, 0)
    assert (int((un["reliability_bins"] == 0).sum()), int(un["gap_thick"].isna().sum())) == (12, 3)
    tested = un[un["gap_thick"].notna()]
    off = tested[tested["gap_thick"].abs() > 0.03]
    assert (len(tested), len(off), int((off["gap_thick"] > 0).sum())) == (18, 7, 6)
    assert "off by more than 3 points in 7 of the 18 pairs where it is tested, predicted too high in 6" in page
    pooled_un = s[(s["judged"] == "unmarked") & (s["population"] == "ALL")].set_index(["eps", "pilot_share"])
    assert (
        round(pooled_un.loc[(0.05, 0.1), "gap_thick"], 3),
        round(pooled_un.loc[(0.05, 0.1), "gap_thick_se"], 3),
    ) == (0.052, 0.013)
    assert (int((over & lab["pooled"]).sum()), int((sure & ~lab["pooled"]).sum())) == (8, 345)
    assert "All 8 overclaims are in pooled groups (0 of the 345" in page
    assert "**Issue 53's condition is still not met** here either" in " ".join(page.split())
    m = lab[marked].assign(sure=sure[marked], over=over[marked]).groupby(["eps", "pilot_share"])[["sure", "over"]].sum()
    assert m.loc[(0.05, 0.1)].tolist() == [42, 3] and m.loc[(0.1, 0.25)].tolist() == [30, 3]
    assert "by setting, 3 of 42 at ε = 0.05 with 10 % pilots and 3 of 30 at ε = 0.1 with 25 % pilots exceed 5 %" in page
    w = overall.set_index(["eps", "pilot_share"])
    assert round(w.loc[(0.1, 0.1), "worst_cluster_z"], 1) == 2.8 and int(overall["miss_band"].sum()) == 1
    un_lab = lab[~marked & (lab["eps"] == 0.1)]
    low = un_lab.groupby(["pilot_share", "population", "group"])["one_coverage"].agg(["mean", "size"])
    low = low[low["mean"] < 0.5]
    assert low["mean"].round(2).tolist() == [0.44, 0.34, 0.2] and low["size"].max() <= 2
    assert "(one with 10 % pilots, 44 %; two with 25 % pilots, 34 % and 20 %" in page
