"""The paper's results tables: the transcribed numbers (gpac_utils.paper.reference), the side-by-side
builders (table_layout), the per-group violation rates and the shared run path (results_tables),
the real-data mapping (realdata), the paper's qualitative claim on the simulated tables; plus the
table notebooks on the fast profile."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpac_utils import Recipe, ScorePartitioner, data, experiment
from gpac_utils.data import PAPER_SCORES
from gpac_utils.paper import realdata, reference, results_tables, table_layout
from gpac_utils.paper import simulate as sim
from gpac_utils.workflow import config

#: The default file's column mapping (notebooks/config/31_realdata_case_study.yaml).
REALDATA_COLUMNS = config.load("31_realdata_case_study", "fast").columns

# ------------------------------------------------------------------ transcribed paper numbers


@pytest.mark.parametrize(
    "name, dataset, grouping, score, method, metric, value",
    [
        # table:01_results_known (Qwen)
        ("01_results_known", "math500", "known", "score_logits", "PAC", "Error", 3.08),
        ("01_results_known", "math500", "known", "score_logits", "G-PAC", "STP", 43.44),
        ("01_results_known", "zebralogic", "known", "score_verbalized", "PAC", "STP", 4.97),
        ("01_results_known", "zebralogic", "known", "score_logits", "PAC", "Error_Gap", 10.30),
        ("01_results_known", "gpqa", "known", "score_router", "G-PAC", "STP", 30.54),
        # table:01_llama_results
        ("01_llama_results", "math500", "known", "score_logits", "PAC", "Error_Gap", 19.27),
        ("01_llama_results", "math500", "known", "score_verbalized", "G-PAC", "STP", -2.21),
        ("01_llama_results", "zebralogic", "known", "score_verbalized", "PAC", "STP", -30.68),
        ("01_llama_results", "gpqa", "known", "score_router", "G-PAC", "Error", 11.90),
        # table:01_results_unknown (disjoint = split, then joint)
        ("01_results_unknown", "math500", "split", "score_logits", "PAC", "Error_Gap", 0.17),
        ("01_results_unknown", "zebralogic", "split", "score_router", "C-PAC", "STP", 35.38),
        ("01_results_unknown", "gpqa", "joint", "score_verbalized", "C-PAC", "STP", 0.54),
        ("01_results_unknown", "gpqa", "joint", "score_router", "PAC", "Error_Gap", 1.36),
        # table:01_results_unknown_llama
        ("01_results_unknown_llama", "zebralogic", "split", "score_verbalized", "C-PAC", "STP", -31.89),
        ("01_results_unknown_llama", "gpqa", "joint", "score_logits", "PAC", "Error_Gap", 12.32),
        ("01_results_unknown_llama", "math500", "joint", "score_router", "C-PAC", "Error", 34.83),
        # table:arena_results / arena_results_llama (rows score x method in the paper)
        ("arena_results", "arena_hard", "split", "score_verbalized", "C-PAC", "Error", 5.27),
        ("arena_results", "arena_hard", "joint", "score_router", "PAC", "Error_Gap", 4.69),
        ("arena_results_llama", "arena_hard", "split", "score_router", "PAC", "STP", 13.00),
        ("arena_results_llama", "arena_hard", "joint", "score_router", "C-PAC", "STP", 35.96),
    ],
)
def test_paper_spot_checks(name, dataset, grouping, score, method, metric, value):
    df = reference.paper_long(name)
    hit = df[(df.dataset == dataset) & (df.grouping == grouping) & (df.score == score) & (df.method == method)]
    assert hit.loc[hit.metric == metric, "paper"].item() == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("name", list(reference.TABLE_SPECS))
def test_paper_tables_complete_and_consistent(name):
    spec = reference.TABLE_SPECS[name]
    long = reference.paper_long(name)
    n_cols = 6 * len(spec.groupings)
    assert len(long) == len(spec.benchmarks) * 3 * n_cols
    assert set(long.dataset) == set(spec.benchmarks)
    assert not long.duplicated(["dataset", "grouping", "score", "method", "metric"]).any()
    # The paper's headline: the group method always has Error_Gap = 0.00 (green cells).
    gaps = long[(long.method == spec.method) & (long.metric == "Error_Gap")]["paper"]
    assert (gaps == 0).all()
    # Errors are percentages of a loss below its bound, STP can be negative but is below 100.
    assert long[long.metric == "Error"]["paper"].between(0, 100).all()
    assert (long[long.metric == "STP"]["paper"] < 100).all()
    # Error_Gap >= Error - eps cannot hold in general, but a gap can never be negative.
    assert (long[long.metric == "Error_Gap"]["paper"] >= 0).all()


def test_every_transcribed_row_carries_a_known_source_label():
    cells = pd.read_csv(reference.REFERENCE_DATA / "paper_tables.csv")
    assert set(cells["table"]) == {s.label for s in reference.TABLE_SPECS.values()}
    acc = reference.paper_accuracy()
    assert set(acc["table"]) == {"table:llm_accuracy"} and len(acc) == 12
    assert reference.accuracy("math500", "qwen", "think") == 0.962


def test_table_specs_eps_and_ratios():
    assert reference.TABLE_SPECS["01_results_known"].eps == {"math500": 0.05, "zebralogic": 0.08, "gpqa": 0.15}
    assert reference.TABLE_SPECS["01_results_unknown"].eps["zebralogic"] == 0.10
    assert reference.TABLE_SPECS["01_llama_results"].eps == {"math500": 0.42, "zebralogic": 0.20, "gpqa": 0.20}
    assert reference.TABLE_SPECS["01_results_unknown_llama"].eps == {"math500": 0.40, "zebralogic": 0.20, "gpqa": 0.15}
    assert reference.TABLE_SPECS["arena_results"].eps == {"arena_hard": 0.10}
    assert reference.TABLE_SPECS["arena_results_llama"].eps == {"arena_hard": 0.15}
    assert reference.resolve_cal_ratio(["math500", "gpqa"]) == {"math500": 0.6, "gpqa": 0.5}
    known = reference.TABLE_SPECS["01_results_known"]
    assert reference.benchmark_eps(known.benchmarks, 0.1) == {"math500": 0.1, "zebralogic": 0.1, "gpqa": 0.1}
    assert reference.benchmark_eps(known.benchmarks, {"gpqa": 0.2}, known.eps)["gpqa"] == 0.2
    with pytest.raises(ValueError, match="eps: benchmark"):
        reference.benchmark_eps(known.benchmarks, {"arena_hard": 0.2}, known.eps)
    with pytest.raises(ValueError, match="unknown paper table"):
        reference.paper_long("no_such_table")
    assert reference.table_name("arena", "llama") == "arena_results_llama"
    with pytest.raises(ValueError, match="family/pair"):
        reference.table_name("known", "gpt")


# ------------------------------------------------------------------ side-by-side builders


def _summary_rows():
    base = {
        "dataset": "math500",
        "grouping": "known",
        "score": "score_logits",
        "sampling": "resample",
        "rule": "max",
        "eps": 0.05,
        "routed_share": 80.0,
        "violation_any_group": 50.0,
        "violation_max_group": 40.0,
        "violation_max_group_mcse": 4.9,
        "trials": 100,
    }
    return pd.DataFrame(
        [
            {
                **base,
                "method": "PAC",
                "setting": "paper",
                "bound": "clt",
                "Error": 3.00,
                "Error_Gap": 1.50,
                "STP": 50.0,
            },
            {
                **base,
                "method": "G-PAC",
                "setting": "paper",
                "bound": "clt",
                "Error": 2.00,
                "Error_Gap": 0.0,
                "STP": 40.0,
            },
            {
                **base,
                "method": "G-PAC",
                "setting": "valid",
                "bound": "hoeffding_bentkus",
                "sampling": "bernoulli",
                "rule": "first-crossing",
                "Error": 0.5,
                "Error_Gap": 0.0,
                "STP": 10.0,
                "violation_max_group": 2.0,
            },
        ]
    )


def test_side_by_side_attaches_paper_numbers_to_paper_rows_only():
    side = table_layout.side_by_side(_summary_rows(), "01_results_known")
    assert len(side) == 3  # nothing dropped
    pac = side[(side.method == "PAC")].iloc[0]
    assert pac["paper_Error"] == pytest.approx(3.08)
    assert pac["paper_Error_Gap"] == pytest.approx(1.02)
    assert pac["paper_STP"] == pytest.approx(56.86)
    gp = side[(side.method == "G-PAC") & (side.setting == "paper")].iloc[0]
    assert gp["paper_STP"] == pytest.approx(43.44)
    valid = side[side.setting == "valid"].iloc[0]
    assert np.isnan(valid["paper_Error"]) and np.isnan(valid["paper_STP"])


def test_side_by_side_without_paper_and_bad_input():
    side = table_layout.side_by_side(_summary_rows(), None)
    assert side["paper_Error"].isna().all()
    with pytest.raises(ValueError, match="lacks column"):
        table_layout.side_by_side(_summary_rows().drop(columns=["STP"]), "01_results_known")


def test_paper_layout_cells_and_report_table():
    side = table_layout.side_by_side(_summary_rows(), "01_results_known")
    layout = table_layout.paper_layout(side, "hoeffding_bentkus")
    err = layout[layout.Metric == "Error (%)"].iloc[0]
    assert err["Logits PAC"] == "3.00 (3.08)"
    assert err["Logits G-PAC"] == "2.00 (2.78)"
    assert err["Logits G-PAC valid"] == "0.50"
    viol = layout[layout.Metric == "Violation (%)"].iloc[0]
    assert viol["Logits PAC"] == "40.00" and viol["Logits G-PAC valid"] == "2.00"
    rep = table_layout.report_table(side)
    assert rep["Dataset"].unique().tolist() == ["MATH-500"]
    assert {"Error (%)", "Error paper (%)", "Max group violation (%)"} <= set(rep.columns)


def test_pick_valid_bound_takes_the_highest_routed_share():
    s = _summary_rows()
    extra = s.iloc[[2]].assign(bound="wsr", routed_share=90.0)
    best, comp = results_tables.pick_valid_bound(pd.concat([s, extra], ignore_index=True))
    assert best == "wsr"
    assert set(comp["bound"]) == {"hoeffding_bentkus", "wsr"}
    assert results_tables.pick_valid_bound(s[s.setting == "paper"])[0] is None


# ------------------------------------------------------------------ violation rates


def test_group_violations_counts_trials_and_mcse():
    rows = []
    for trial in range(10):
        for g, risk in (("a", 0.2 if trial < 3 else 0.01), ("b", 0.01)):
            rows.append(
                {
                    "dataset": "d",
                    "grouping": "known",
                    "setting": "paper",
                    "method": "G-PAC",
                    "score": "s",
                    "risk": "joint",
                    "bound": "clt",
                    "sampling": "resample",
                    "label_prob": 0.5,
                    "rule": "max",
                    "candidates": "auto",
                    "trial": trial,
                    "group": g,
                    "error": risk,
                    "pop_risk": risk,
                    "n_test": 10,
                    "eps": 0.05,
                }
            )
        rows.append({**rows[-1], "group": "__all__"})
    gv = experiment.group_violations(pd.DataFrame(rows), None, results_tables.GROUP_KEYS).set_index("group")
    assert gv.loc["a", "violation_rate"] == pytest.approx(0.3)
    assert gv.loc["b", "violation_rate"] == 0.0
    assert gv.loc["a", "violation_mcse"] == pytest.approx(np.sqrt(0.3 * 0.7 / 10))
    assert "__all__" not in gv.index


# ------------------------------------------------------------------ the paper's claim on the simulated data


@pytest.fixture(scope="module")
def known_qwen():
    name = "01_results_known"
    cfg = config.load("21_table_known_groups", "paper", valid_bounds=[])
    tables = {b: sim.load_simulated(b, "qwen") for b in reference.TABLE_SPECS[name].benchmarks}
    spec = reference.TABLE_SPECS[name]
    results = results_tables.run_results(
        tables,
        results_tables.TableSettings(**cfg),
        eps=spec.eps,
        cal_ratio=reference.resolve_cal_ratio(spec.benchmarks),
        groupings=["known"],
    )
    return results, results_tables.summarize_results(results)


def test_simulated_known_groups_reproduce_the_papers_qualitative_claim(known_qwen):
    """PAC overshoots eps in the category the paper names (Precalculus / X-Large / Biology) for
    every score, by more than 3 Monte Carlo standard errors over T = 100 seeded splits; G-PAC has
    Error_Gap = 0, every category's mean test error at least one standard error below eps."""
    results, summary = known_qwen
    per = results[results.group != "__all__"]
    stats = per.groupby(["dataset", "score", "method", "group"])["error"].agg(["mean", "std", "count"])
    stats["se"] = stats["std"] / np.sqrt(stats["count"])
    for b, eps in reference.TABLE_SPECS["01_results_known"].eps.items():
        het = sim.SPECS[b].heterogeneous
        for s in PAPER_SCORES:
            pac = stats.loc[(b, s, "PAC", het)]
            assert pac["mean"] - eps > 3 * pac["se"], (b, s, pac.to_dict())
            g = stats.loc[(b, s, "G-PAC")]
            assert (g["mean"] + g["se"] <= eps).all(), (b, s, g.to_dict())
            row = summary[(summary.dataset == b) & (summary.score == s)].set_index("method")
            assert row.loc["PAC", "Error_Gap"] > 0
            assert row.loc["G-PAC", "Error_Gap"] == 0
            assert row.loc["PAC", "worst_group"] == het


def test_table_settings_type_a_table_notebooks_configuration():
    """Every key of notebooks/config/2[123]_*.yaml is a field; the recipes and the partitioner are built
    from them; a key the class does not have is refused, named."""
    for notebook in ("21_table_known_groups", "22_table_cpac", "23_table_arena"):
        cfg = config.load(notebook, "fast")
        s = results_tables.TableSettings(**cfg)
        assert s.paper == Recipe(bound="clt", sampling="resample", rule="max", label_prob=cfg.label_prob)
        assert s.valid == tuple(
            Recipe(bound=b, label_prob=cfg.label_prob, **cfg.valid_recipe) for b in cfg.valid_bounds
        )
        assert s.partitioner == ScorePartitioner(**cfg.partition) and s.n_trials == 5
    with pytest.raises(TypeError, match="nonsense"):
        results_tables.TableSettings(**cfg, nonsense=1)


def test_make_tables_refuses_groupings_the_table_does_not_have():
    cfg = config.load("21_table_known_groups", "fast", groupings=["split"], pairs=["qwen"])
    with pytest.raises(ValueError, match="groupings"):
        results_tables.make_tables(results_tables.TableSettings(**cfg))


def test_run_results_refuses_unknown_groupings_and_missing_eps():
    cfg = config.load("22_table_cpac", "fast")
    table = sim.load_simulated("gpqa", "qwen")
    with pytest.raises(ValueError, match="groupings"):
        results_tables.run_results(
            {"gpqa": table},
            results_tables.TableSettings(**cfg),
            eps={"gpqa": 0.1},
            cal_ratio={"gpqa": 0.5},
            groupings=["disjoint"],
        )
    with pytest.raises(ValueError, match="eps"):
        results_tables.run_results(
            {"gpqa": table}, results_tables.TableSettings(**cfg), eps={}, cal_ratio={"gpqa": 0.5}, groupings=["split"]
        )


# ------------------------------------------------------------------ real-data mapping


def _raw():
    return pd.DataFrame(
        {
            "item_id": [0, 1, 2],
            "group": ["A", "A", "B"],
            "strong_correct": [1, 1, 0],
            "weak_correct": [1, 0, 0],
            "loss": [0, 1, 0],
            "strong_chars": [400, 800, 1200],
            "weak_chars": [200, 400, 40],
            "weak_uncertainty_disagree": [0.0, 0.5, 1.0],
            "weak_uncertainty_len": [0.1, 0.5, 0.9],
        }
    )


def test_realdata_table_maps_columns_and_applies_the_cost_model():
    tab = realdata.realdata_table(_raw(), REALDATA_COLUMNS, chars_per_token=4.0, hidden_think_tokens=1000)
    assert {"think_correct", "nothink_correct", "score_disagree", "score_length", "think_tokens"} <= set(tab.columns)
    assert tab["think_tokens"].tolist() == [1100.0, 1200.0, 1300.0]
    assert tab["nothink_tokens"].tolist() == [50.0, 100.0, 10.0]
    no_cost = realdata.realdata_table(_raw(), REALDATA_COLUMNS, hidden_think_tokens=None)
    assert data.THINK_TOKENS not in no_cost.columns
    summ = realdata.group_summary(tab).set_index("group")
    assert summ.loc["ALL", "n"] == 3 and summ.loc["A", "loss"] == pytest.approx(50.0)


def test_realdata_table_rejects_inconsistent_or_incomplete_input():
    bad = _raw()
    bad.loc[2, "loss"] = 1
    with pytest.raises(data.SchemaError, match="disagrees"):
        realdata.realdata_table(bad, REALDATA_COLUMNS)
    with pytest.raises(data.SchemaError, match="weak_chars"):
        realdata.realdata_table(_raw().drop(columns=["weak_chars"]), REALDATA_COLUMNS, hidden_think_tokens=10)
    with pytest.raises(data.SchemaError, match="lacks"):
        realdata.realdata_table(_raw(), {"no_such_column": "score_x"})


def test_resolve_data_path(tmp_path):
    from gpac_utils.workflow import paths

    assert realdata.resolve_data_path(None) == paths.REPO_ROOT / "data" / "real" / "mathl5_zeroeval.csv"
    assert realdata.resolve_data_path(None).is_file()
    assert realdata.resolve_data_path(tmp_path / "x.csv") == tmp_path / "x.csv"
    assert realdata.resolve_data_path("data/x.csv") == paths.REPO_ROOT / "data" / "x.csv"


# ------------------------------------------------------------------ the notebooks (fast profile)

NOTEBOOK_OUTPUTS = {
    "21_table_known_groups": [
        "tables/01_results_known.csv",
        "tables/01_llama_results.csv",
        "tables/01_results_known_paper_layout.md",
        "errorbar_category.png",
        "errorbar_category_llama.pdf",
    ],
    "22_table_cpac": [
        "tables/01_results_unknown.csv",
        "tables/01_results_unknown_llama.md",
        "tables/01_results_unknown_paper_layout.csv",
    ],
    "23_table_arena": ["tables/arena_results.csv", "tables/arena_results_llama.md"],
    "24_calibration_ratio": [
        "results_calibration_ratio_math500.png",
        "results_calibration_ratio_other.pdf",
        "tables/calibration_ratio.csv",
    ],
    "25_ece_scores": ["expected_error_uncertainty.png", "tables/ece_scores.csv"],
    "26_concept_figure": ["clustered-pac.png", "tables/clustered-pac_thresholds.csv"],
}


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("notebook", list(NOTEBOOK_OUTPUTS))
def test_table_notebooks_fast_profile(notebook, fast_run):
    ran = fast_run(notebook)
    for rel in NOTEBOOK_OUTPUTS[notebook]:
        f = ran.figures / rel
        assert f.exists() and f.stat().st_size > 0, f
    if notebook == "21_table_known_groups":
        t = pd.read_csv(ran.tables / "01_results_known.csv")
        paper_rows = t[t["Setting"] == "paper"]
        assert paper_rows["Error paper (%)"].notna().all()
        assert (t["Setting"] == "valid").any()
        assert t.loc[
            (t.Dataset == "MATH-500") & (t.Score == "Logits") & (t.Method == "PAC") & (t.Setting == "paper"),
            "Error paper (%)",
        ].iloc[0] == pytest.approx(3.08)


@pytest.mark.slow
@pytest.mark.notebook
def test_realdata_notebook_fast_profile(fast_run):
    t = pd.read_csv(fast_run("31_realdata_case_study").tables / "realdata_case_study.csv")
    assert set(t["Method"]) == {"PAC", "G-PAC", "C-PAC"}
    assert set(t["Setting"]) == {"paper", "valid"}


@pytest.mark.slow
@pytest.mark.notebook
def test_realdata_notebook_without_data_explains_and_writes_nothing(tmp_path):
    from gpac_utils.workflow import paths
    from gpac_utils.workflow import runner as run

    missing = tmp_path / "absent.csv"
    out = run.run_notebook(
        paths.NOTEBOOKS / "31_realdata_case_study.py",
        profile="fast",
        out_dir=tmp_path,
        parameters={"data_source": str(missing)},
        progress_bar=False,
    )
    text = out.read_text()
    assert "NOT FOUND" in text and "data_source" in text
