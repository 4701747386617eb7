"""The data source of the table notebooks (gpac_utils.paper.sources): each kind, the column mapping,
each "missing capability" message, and the switch that sets the paper's numbers beside ours only
when the paper's setting is reproduced."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpac_utils import data
from gpac_utils.paper import reference, results_tables, sources
from gpac_utils.paper import simulate as sim
from gpac_utils.workflow import config, paths


def make_tables(cfg) -> dict[str, results_tables.ResultsTable]:
    """What a table notebook does with its configuration."""
    return results_tables.make_tables(results_tables.TableSettings(**cfg))


def _with(cfg, **changes):
    """``cfg`` with some settings changed (as ``config.load(..., **overrides)`` would give)."""
    assert set(changes) <= set(cfg), set(changes) - set(cfg)
    return config.Config({**cfg, **changes}, cfg.name, cfg.profile)


def _table(n: int = 60, *, groups: bool = True, tokens: bool = True, correctness: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    think = rng.integers(0, 2, n)
    nothink = rng.integers(0, 2, n)
    df = pd.DataFrame({"item_id": [f"i{i}" for i in range(n)]})
    if groups:
        df["group"] = np.array(["A", "B", "C"])[np.arange(n) % 3]
    df["loss"] = data.binary_loss(think, nothink)
    if correctness:
        df["think_correct"] = think
        df["nothink_correct"] = nothink
    if tokens:
        df["think_tokens"] = rng.integers(100, 1000, n).astype(float)
        df["nothink_tokens"] = rng.integers(10, 100, n).astype(float)
    for s in data.PAPER_SCORES:
        df[s] = rng.uniform(0, 1, n)
    return df


@pytest.fixture
def figures(tmp_path, monkeypatch):
    out = tmp_path / "figures"
    monkeypatch.setenv(paths.FIGURES_ENV, str(out))
    return out


@pytest.fixture
def generated(tmp_path):
    root = tmp_path / "generated"
    data.write_table(_table(), root / "walk__smollm2.parquet")
    return root


# ------------------------------------------------------------------ the kinds


def test_resolve_source_kinds(tmp_path):
    assert sources.resolve_source("simulated").kind == "simulated"
    assert sources.resolve_source(None).is_simulated
    g = sources.resolve_source("generated", generated_root=tmp_path)
    assert g.kind == "generated" and g.table_path("walk", "smollm2") == tmp_path / "walk__smollm2.parquet"
    assert sources.resolve_source("generated").root == paths.DATA / "generated"
    p = sources.resolve_source("data/x.csv", columns={"a": "score_a"})
    assert p.kind == "path" and p.path == paths.REPO_ROOT / "data" / "x.csv" and p.columns == {"a": "score_a"}
    assert p.dataset == "x" and p.tag() == "path__x"
    assert g.tag(None, "smollm2") == "generated__smollm2"
    with pytest.raises(sources.SourceError, match="data_source: 'nonsense' is neither"):
        sources.resolve_source("nonsense")
    with pytest.raises(sources.SourceError, match="data_source: expected"):
        sources.resolve_source(3)


def test_simulated_source_reads_the_stand_ins():
    src = sources.resolve_source("simulated")
    t = sources.load_table(src, "gpqa", "qwen", notebook="21_table_known_groups", scores=data.PAPER_SCORES)
    pd.testing.assert_frame_equal(t, sim.load_simulated("gpqa", "qwen"))
    with pytest.raises(sources.SourceError, match="data_source='simulated': unknown model pair 'smollm2'"):
        sources.load_table(src, "gpqa", "smollm2")


def test_generated_source_reads_02s_tables_and_says_how_to_make_a_missing_one(generated):
    src = sources.resolve_source("generated", generated_root=generated)
    t = sources.load_table(src, "walk", "smollm2", notebook="21_table_known_groups", scores=data.PAPER_SCORES)
    assert len(t) == 60 and set(t["group"]) == {"A", "B", "C"}
    with pytest.raises(sources.SourceError, match=r"no scored table at .*math500__qwen\.parquet; run 01_generate"):
        sources.load_table(src, "math500", "qwen")


def test_path_source_maps_columns_through_read_table(tmp_path):
    raw = _table().rename(columns={"think_correct": "strong_correct", "nothink_correct": "weak_correct"})
    raw = raw.drop(columns="loss").rename(columns={"score_logits": "my_uncertainty"})
    f = tmp_path / "mine.csv"
    raw.to_csv(f, index=False)
    cols = {"strong_correct": "think_correct", "weak_correct": "nothink_correct", "my_uncertainty": "score_mine"}
    src = sources.resolve_source(str(f), columns=cols)
    t = sources.load_table(src, notebook="25_ece_scores", scores=["score_mine"])
    assert {"think_correct", "nothink_correct", "score_mine", "loss"} <= set(t.columns)
    np.testing.assert_array_equal(t["loss"], data.binary_loss(t["think_correct"], t["nothink_correct"]))
    with pytest.raises(data.SchemaError, match="lacks"):
        sources.load_table(sources.resolve_source(str(f), columns={"absent": "score_x"}))
    with pytest.raises(sources.SourceError, match="no table at"):
        sources.load_table(sources.resolve_source(str(tmp_path / "absent.csv")))


# ------------------------------------------------------------------ missing capabilities


@pytest.mark.parametrize(
    "notebook, table, message",
    [
        (
            "21_table_known_groups",
            _table(groups=False),
            r"^21_table_known_groups needs a 'group' column; the table at \S+ has none: use 22_table_cpac "
            r"\(C-PAC learns groups\) or map a column with overrides=\{'columns': \{'<column>': 'group'\}\}$",
        ),
        ("24_calibration_ratio", _table(groups=False), r"^24_calibration_ratio needs a 'group' column for G-PAC"),
        ("26_concept_figure", _table(groups=False), r"^26_concept_figure needs a 'group' column .*22_table_cpac"),
        (
            "20_data_overview",
            _table(correctness=False),
            r"^20_data_overview needs columns \['think_correct', 'nothink_correct'\] for the accuracy table; "
            r".* lacks them: a semantic-loss table has none",
        ),
        ("25_ece_scores", _table(correctness=False), r"^25_ece_scores needs a 'nothink_correct' column \(ECE"),
        ("22_table_cpac", _table(n=12), r"^22_table_cpac needs at least 20 rows .* has 12: generate more items"),
    ],
)
def test_missing_capability_messages(tmp_path, notebook, table, message):
    f = tmp_path / "t.parquet"
    data.write_table(table, f)
    with pytest.raises(sources.SourceError, match=message) as err:
        sources.load_table(sources.resolve_source(str(f)), notebook=notebook)
    assert "\n" not in str(err.value)


def test_missing_score_columns_name_what_the_table_has(generated):
    src = sources.resolve_source("generated", generated_root=generated)
    with pytest.raises(sources.SourceError, match=r"needs score column\(s\) \['score_x'\]; .* has \['score_logits'"):
        sources.load_table(src, "walk", "smollm2", notebook="22_table_cpac", scores=["score_x"])


def test_without_token_counts_stp_is_nan_and_left_out_of_the_layout(tmp_path, figures):
    f = tmp_path / "notokens.parquet"
    data.write_table(_table(tokens=False), f)
    cfg = config.load("21_table_known_groups", "fast", data_source=str(f), eps=0.3, n_trials=2, valid_bounds=["wsr"])
    built = make_tables(cfg)
    (t,) = built.values()
    assert any("STP is not computed" in n for n in t.notes)
    assert t.summary["STP"].isna().all()
    assert "STP (%)" not in set(t.layout["Metric"]) and "Error (%)" in set(t.layout["Metric"])
    assert (figures / "tables" / "known__path__notokens_layout.md").exists()


# ------------------------------------------------------------------ eps and calibration ratio outside the paper


def test_benchmarks_outside_the_paper_need_an_eps_and_get_ratio_one_half():
    with pytest.raises(ValueError, match=r"eps: benchmark\(s\) \['walk'\] are not in the paper"):
        reference.benchmark_eps(["walk"], None, reference.TABLE_SPECS["01_results_known"].eps)
    assert reference.benchmark_eps(["walk", "gpqa"], {"walk": 0.3}, {"gpqa": 0.15}) == {"walk": 0.3, "gpqa": 0.15}
    assert reference.benchmark_eps(["walk"], 0.2) == {"walk": 0.2}
    assert reference.resolve_cal_ratio(["walk", "math500"]) == {"walk": 0.5, "math500": 0.6}
    assert reference.DEFAULT_CAL_RATIO == 0.5


def test_generated_walk_without_eps_is_refused(generated):
    cfg = config.load(
        "21_table_known_groups", "fast", data_source="generated", pairs=["smollm2"], benchmarks=["walk"], n_trials=2
    )
    with pytest.raises(ValueError, match="eps: .*'walk'.* no default eps"):
        make_tables(_with(cfg, generated_root=str(generated)))
    cfg = _with(cfg, benchmarks=None)
    with pytest.raises(ValueError, match="benchmarks: pair 'smollm2' has no paper table"):
        make_tables(cfg)


# ------------------------------------------------------------------ the paper-reference switch


def _known(**kw):
    base = dict(n_trials=2, valid_bounds=["wsr"], pairs=["qwen"], benchmarks=["gpqa"])
    return config.load("21_table_known_groups", "fast", **{**base, **kw})


def _has_paper(t: results_tables.ResultsTable, figures) -> bool:
    long = pd.read_csv(figures / "tables" / f"{t.name}.csv")
    cells = t.layout.drop(columns=["Dataset", "Clustering", "Metric"]).to_numpy().ravel()
    in_layout = any("(" in str(c) for c in cells)
    in_long = "Error paper (%)" in long.columns
    assert in_layout == in_long == (t.paper_table is not None)
    return in_long


def test_paper_numbers_for_simulated_data_at_the_papers_eps(figures):
    (t,) = make_tables(_known()).values()
    assert t.name == "01_results_known" and _has_paper(t, figures)
    long = pd.read_csv(figures / "tables" / "01_results_known.csv")
    assert long.loc[long.Setting == "paper", "Error paper (%)"].notna().all()


def test_no_paper_numbers_at_another_eps(figures):
    (t,) = make_tables(_known(eps=0.2)).values()
    assert t.name == "01_results_known" and not _has_paper(t, figures)


def test_no_paper_numbers_for_generated_data_even_of_a_paper_benchmark(tmp_path, figures):
    root = tmp_path / "generated"
    data.write_table(sim.load_simulated("gpqa", "qwen"), root / "gpqa__qwen.parquet")
    (t,) = make_tables(_known(data_source="generated", generated_root=str(root))).values()
    assert t.name == "known__generated__qwen" and not _has_paper(t, figures)
    assert t.summary["eps"].iloc[0] == reference.TABLE_SPECS["01_results_known"].eps["gpqa"]
    assert (figures / "tables" / "known__generated__qwen_groups.csv").exists()


def test_generated_table_has_one_row_per_group(generated, figures):
    cfg = _known(data_source="generated", generated_root=str(generated), pairs=["smollm2"], benchmarks=["walk"])
    (t,) = make_tables(_with(cfg, eps=0.3)).values()
    groups = pd.read_csv(figures / "tables" / f"{t.name}_groups.csv")
    assert groups["group"].tolist() == ["A", "B", "C", "Overall"]
    assert groups["n"].tolist() == [20, 20, 20, 60]
    assert reference.resolve_cal_ratio(["walk"]) == {"walk": 0.5}
    assert not _has_paper(t, figures)


def test_paper_eps():
    """The paper's eps of a table family and pair (the reference-number switch itself is checked
    through make_tables above: the paper's eps, another eps, generated data)."""
    assert sources.paper_eps("known", "qwen") == reference.TABLE_SPECS["01_results_known"].eps
    assert sources.paper_eps("known", "smollm2") is None
