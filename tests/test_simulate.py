"""Tests of the simulated default tables (gpac_utils.paper.simulate, data/simulated/)."""

from __future__ import annotations

import inspect
import math
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from gpac_utils import data
from gpac_utils.paper import simulate
from gpac_utils.paper.reference import TABLE_SPECS, accuracy

BINARY = ("math500", "zebralogic", "gpqa")
TABLES = [(b, p) for b in simulate.SIMULATED_BENCHMARKS for p in simulate.PAIRS]

# Independent oracles, copied from the paper (not from SPECS).
GROUP_COUNTS = {
    "math500": {
        "Algebra": 124,
        "Intermediate Algebra": 97,
        "Prealgebra": 82,
        "Number Theory": 62,
        "Precalculus": 56,
        "Geometry": 41,
        "Counting & Probability": 38,
    },
    "zebralogic": {"Small": 320, "Medium": 280, "Large": 200, "X-Large": 200},
    "gpqa": {"Physics": 187, "Chemistry": 183, "Biology": 78},
}
SIZES = {"math500": 500, "zebralogic": 1000, "gpqa": 448, "arena_hard": 500}
# table:llm_accuracy, percent: (thinking, non-thinking)
PAPER_ACC = {
    ("math500", "qwen"): (96.20, 92.80),
    ("math500", "llama"): (85.80, 45.20),
    ("zebralogic", "qwen"): (89.20, 80.40),
    ("zebralogic", "llama"): (38.40, 12.50),
    ("gpqa", "qwen"): (48.88, 46.43),
    ("gpqa", "llama"): (39.73, 27.23),
}
HETEROGENEOUS = {"math500": "Precalculus", "zebralogic": "X-Large", "gpqa": "Biology"}
PAPER_EPS = {
    ("math500", "qwen"): 0.05,
    ("zebralogic", "qwen"): 0.08,
    ("gpqa", "qwen"): 0.15,
    ("math500", "llama"): 0.42,
    ("zebralogic", "llama"): 0.20,
    ("gpqa", "llama"): 0.20,
    ("arena_hard", "qwen"): 0.10,
    ("arena_hard", "llama"): 0.15,
}


@pytest.fixture(scope="module")
def committed():
    return {(b, p): simulate.load_simulated(b, p) for b, p in TABLES}


def auroc(y, s):
    """Mann-Whitney AUROC of score ``s`` for labels ``y`` (ties count one half)."""
    y = np.asarray(y, bool)
    ranks = pd.Series(s).rank(method="average").to_numpy()
    n1, n0 = y.sum(), (~y).sum()
    return (ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


# ---------------------------------------------------------------- schema and counts


@pytest.mark.parametrize("benchmark,pair", TABLES)
def test_schema(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    data.validate(df, require_tokens=True, score_cols=data.PAPER_SCORES)
    assert len(df) == SIZES[benchmark]
    assert df[data.ID].is_unique
    expected = {data.ID, data.LOSS, data.THINK_TOKENS, data.NOTHINK_TOKENS, *data.PAPER_SCORES}
    if benchmark in BINARY:
        expected |= {data.GROUP, data.THINK_CORRECT, data.NOTHINK_CORRECT}
        assert set(np.unique(df[data.LOSS])) <= {0.0, 1.0}
        np.testing.assert_array_equal(df[data.LOSS], data.binary_loss(df[data.THINK_CORRECT], df[data.NOTHINK_CORRECT]))
    else:  # Arena-Hard: semantic loss, no groups, no correctness
        assert ((df[data.LOSS] > 0) & (df[data.LOSS] < 1)).all()
        assert df[data.LOSS].nunique() == len(df)
    assert set(df.columns) == expected
    assert (df[data.THINK_TOKENS] >= 1).all() and (df[data.NOTHINK_TOKENS] >= 1).all()
    assert (df[data.THINK_TOKENS] == np.rint(df[data.THINK_TOKENS])).all()


@pytest.mark.parametrize("benchmark", BINARY)
def test_group_counts_exact(committed, benchmark):
    for pair in simulate.PAIRS:
        counts = committed[(benchmark, pair)][data.GROUP].value_counts().to_dict()
        assert counts == GROUP_COUNTS[benchmark]
    # the same item has the same group in both pairs' tables
    qwen, llama = committed[(benchmark, "qwen")], committed[(benchmark, "llama")]
    assert qwen[data.ID].tolist() == llama[data.ID].tolist()
    assert qwen[data.GROUP].tolist() == llama[data.GROUP].tolist()


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_accuracies_match_paper_to_the_item(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    n = len(df)
    think, nothink = PAPER_ACC[(benchmark, pair)]
    # the count whose percentage rounds to the paper's two decimals, and it is unique
    for col, pct in ((data.THINK_CORRECT, think), (data.NOTHINK_CORRECT, nothink)):
        k = int(df[col].sum())
        assert round(100 * k / n, 2) == pct, (col, k, n)
        assert round(100 * (k + 1) / n, 2) != pct and round(100 * (k - 1) / n, 2) != pct


def test_eps_table():
    """The paper's eps per (benchmark, pair) in the table specifications (Tables 01_results_known,
    01_llama_results, arena), against the oracle copied from the paper."""
    eps = {(b, s.pair): s.eps[b] for s in TABLE_SPECS.values() if s.family in ("known", "arena") for b in s.benchmarks}
    assert eps == PAPER_EPS


# ---------------------------------------------------------------- heterogeneity


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_heterogeneous_group_has_highest_loss(committed, benchmark, pair):
    rates = committed[(benchmark, pair)].groupby(data.GROUP)[data.LOSS].mean()
    het = HETEROGENEOUS[benchmark]
    assert simulate.SPECS[benchmark].heterogeneous == het
    assert rates.idxmax() == het
    # clearly higher: a two-proportion z-test against the pooled other groups rejects
    df = committed[(benchmark, pair)]
    inside = df[data.GROUP] == het
    p1, p0 = df.loc[inside, data.LOSS].mean(), df.loc[~inside, data.LOSS].mean()
    se = np.sqrt(p1 * (1 - p1) / inside.sum() + p0 * (1 - p0) / (~inside).sum())
    assert (p1 - p0) / se > 3.0


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_heterogeneity_is_a_design_property_not_seed_luck(benchmark, pair):
    het = HETEROGENEOUS[benchmark]
    for seed in (1, 2, 3):
        rates = simulate.simulate_table(benchmark, pair, seed=seed).groupby(data.GROUP)[data.LOSS].mean()
        assert rates.idxmax() == het


def _clt_pac_threshold(scores, losses, eps, rng, alpha=0.05, label_prob=0.5):
    """Paper Algorithm 1 (resample, CLT bound, max rule), written independently of the core."""
    n = losses.size
    m = int(np.ceil(n / label_prob))
    idx = rng.integers(0, n, m)
    xi = rng.random(m) < label_prob
    z, s = xi * losses[idx] / label_prob, scores[idx]
    order = np.argsort(s, kind="stable")
    z, s = z[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(s) > 0), m - 1]  # last position of each distinct score
    s1, s2 = np.cumsum(z)[last], np.cumsum(z * z)[last]
    mean = s1 / m
    sd = np.sqrt(np.maximum((s2 - m * mean**2) / (m - 1), 0.0))
    ucb = mean + norm.ppf(1 - alpha) * sd / np.sqrt(m)
    ok = np.flatnonzero(ucb <= eps)
    return s[last][ok.max()] if ok.size else -np.inf


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_marginal_pac_overshoots_eps_in_heterogeneous_group(committed, benchmark, pair):
    """The reason the data exist: marginal PAC (logits score, cal ratio 0.6) fails in the
    heterogeneous group on average over 50 random splits, by more than 3 MCSE."""
    df = committed[(benchmark, pair)]
    eps = PAPER_EPS[(benchmark, pair)]
    loss, u = df[data.LOSS].to_numpy(), df["score_logits"].to_numpy()
    het = (df[data.GROUP] == HETEROGENEOUS[benchmark]).to_numpy()
    rng = np.random.default_rng(12345)
    n = len(df)
    n_cal = int(0.6 * n)
    errs, overall = [], []
    for _ in range(50):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        thr = _clt_pac_threshold(u[cal], loss[cal], eps, rng)
        routed_loss = loss[test] * (u[test] <= thr)
        errs.append(routed_loss[het[test]].mean())
        overall.append(routed_loss.mean())
    errs = np.asarray(errs)
    mcse = errs.std(ddof=1) / np.sqrt(errs.size)
    assert errs.mean() > eps + 3 * mcse, (errs.mean(), mcse)
    assert np.mean(overall) <= eps  # while the marginal error is controlled


# ---------------------------------------------------------------- scores


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_scores_informative_but_imperfect(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    wrong = 1 - df[data.NOTHINK_CORRECT]
    aucs = {s: auroc(wrong, df[s]) for s in data.PAPER_SCORES}
    for s, a in aucs.items():
        assert 0.6 <= a <= 0.9, (s, a)
    assert aucs["score_logits"] == max(aucs.values())


@pytest.mark.parametrize("benchmark,pair", TABLES)
def test_score_shapes(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    v = df["score_verbalized"].to_numpy()
    np.testing.assert_allclose(v * 100, np.rint(v * 100), atol=1e-9)  # 0.01 grid
    assert df["score_verbalized"].nunique() < len(df) / 4  # coarse, many ties
    # logits score: calibrated in the large (mean = non-thinking error rate or mean loss)
    target = 1 - df[data.NOTHINK_CORRECT].mean() if data.NOTHINK_CORRECT in df else df[data.LOSS].mean()
    assert df["score_logits"].mean() == pytest.approx(target, abs=1e-9)
    # verbalized: overconfident (mean uncertainty below the logits-based one)
    assert df["score_verbalized"].mean() < df["score_logits"].mean()


@pytest.mark.parametrize("benchmark,pair", TABLES)
def test_router_is_function_of_difficulty_and_own_noise(committed, benchmark, pair):
    comp = simulate.components(benchmark, pair)
    rebuilt = simulate.simulated_router_score(comp["difficulty"], comp["noise_score_router"])
    np.testing.assert_array_equal(rebuilt, committed[(benchmark, pair)]["score_router"].to_numpy())
    assert list(inspect.signature(simulate.simulated_router_score).parameters) == ["difficulty", "noise"]


def test_router_independent_of_nothink_correctness_given_difficulty():
    """Pooled over seeds: the router's noise (= its score given the difficulty) is
    uncorrelated with the realised non-thinking correctness; |r| < 4 / sqrt(n)."""
    noise, correct, resid = [], [], []
    for seed in range(8):
        for b in BINARY:
            comp = simulate.components(b, "qwen", seed=seed)
            df = simulate.simulate_table(b, "qwen", seed=seed)
            noise.append(comp["noise_score_router"])
            correct.append(df[data.NOTHINK_CORRECT].to_numpy() - df[data.NOTHINK_CORRECT].mean())
            # positive control: the non-thinking answer's own noise does drive correctness
            resid.append(comp["nothink_noise"])
    noise, correct, resid = map(np.concatenate, (noise, correct, resid))
    n = noise.size
    assert abs(np.corrcoef(noise, correct)[0, 1]) < 4 / np.sqrt(n)
    assert abs(np.corrcoef(resid, correct)[0, 1]) > 10 / np.sqrt(n)


# ---------------------------------------------------------------- tokens


@pytest.mark.parametrize("benchmark,pair", TABLES)
def test_tokens(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    comp = simulate.components(benchmark, pair)
    assert df[data.THINK_TOKENS].median() > 1.5 * df[data.NOTHINK_TOKENS].median()
    r = np.corrcoef(np.log(df[data.THINK_TOKENS]), comp["difficulty"])[0, 1]
    assert r > 4 / np.sqrt(len(df))  # thinking tokens grow with difficulty


# ---------------------------------------------------------------- seeding, files, errors


@pytest.mark.parametrize("cpu", ["native", "no-avx512"])
def test_regeneration_is_byte_identical(tmp_path, cpu, request):
    """The committed tables come out byte for byte, with numpy's full SIMD dispatch and with its
    AVX-512 code paths and OpenBLAS's kernels narrowed to AVX2 (what an AVX2-only machine runs)."""
    if cpu == "native":
        paths = simulate.write_all(tmp_path)
        assert len(paths) == 8
    else:
        request.getfixturevalue("run_narrowed")(
            [sys.executable, "-m", "gpac_utils.paper.simulate", "--folder", str(tmp_path)]
        )
    for b, p in TABLES:
        assert simulate.table_path(b, p, tmp_path).read_bytes() == simulate.table_path(b, p).read_bytes(), (b, p)


def test_portable_exp_is_within_one_ulp_of_libm():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-40, 40, 20_000), rng.uniform(-700, 700, 5_000), np.linspace(-1, 1, 2001)])
    ref = np.array([math.exp(v) for v in x])
    ulps = np.abs(simulate.portable_exp(x) - ref) / np.spacing(ref)
    assert ulps.max() <= 1.0
    assert simulate.portable_exp(np.array([0.0]))[0] == 1.0


def test_seed_changes_table_and_paths():
    a = simulate.simulate_table("gpqa", "qwen", seed=1)
    b = simulate.simulate_table("gpqa", "qwen", seed=1)
    c = simulate.simulate_table("gpqa", "qwen", seed=2)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["score_logits"], c["score_logits"])
    assert simulate.table_path("gpqa", "llama").name == "gpqa__llama.parquet"
    assert simulate.table_path("gpqa", "llama").parent.name == "simulated"


def test_bad_names_raise():
    with pytest.raises(ValueError, match="benchmark 'math'"):
        simulate.simulate_table("math", "qwen")
    with pytest.raises(ValueError, match="model pair 'gpt'"):
        simulate.table_path("gpqa", "gpt")


# ---------------------------------------------------------------- paper tables (notebook 20 computes them)


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_20_data_overview(fast_run):
    ran = fast_run("20_data_overview")
    splits = pd.read_csv(ran.tables / "splitting_settings.csv")
    assert splits["Dataset"].tolist() == ["MATH-500", "ZebraLogic", "GPQA"]
    assert splits["Dataset Size"].tolist() == [500, 1000, 448]
    assert splits["PAC Calibration"].tolist() == [300, 500, 224]
    assert splits["PAC Test"].tolist() == [200, 500, 224]
    acc = pd.read_csv(ran.tables / "llm_accuracy.csv").set_index("Dataset")
    assert acc.loc["MATH-500", "Llama-3.1-8B-Instruct"] == pytest.approx(45.20)
    assert acc.loc["GPQA", "DeepSeek-R1-Distill-Llama-8B"] == pytest.approx(39.73, abs=0.005)
    for (b, pair), (think, nothink) in PAPER_ACC.items():  # every cell, against the oracle copied from the paper
        row = acc.loc[simulate.SPECS[b].title]
        assert row[simulate.MODELS[pair][0]] == pytest.approx(think, abs=0.005)
        assert row[simulate.MODELS[pair][1]] == pytest.approx(nothink, abs=0.005)
    for ext in ("png", "pdf"):
        assert (ran.figures / f"dataset_category_distribution.{ext}").stat().st_size > 0


def _parameter_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The parameters (data/simulated/specs.yaml) as the data card's two tables: groups (benchmark, group,
    n, mu_g) and pairs (one row per benchmark x pair; offsets listed as ``group: o_think / o_nothink``)."""
    groups = pd.DataFrame(
        [
            {"benchmark": b, "group": g.name, "n": g.n, "mu_g": g.difficulty}
            for b, spec in simulate.SPECS.items()
            for g in spec.groups
        ]
    )
    pairs = []
    for b, spec in simulate.SPECS.items():
        for pair, p in spec.pairs.items():
            offsets = sorted(set(p.think_offset) | set(p.nothink_offset))
            pairs.append(
                {
                    "benchmark": b,
                    "pair": pair,
                    "n": spec.n,
                    "loss": spec.loss,
                    "think acc": "" if spec.loss == "semantic" else f"{accuracy(b, pair, 'think'):.4g}",
                    "nothink acc": "" if spec.loss == "semantic" else f"{accuracy(b, pair, 'nothink'):.4g}",
                    "eps": f"{PAPER_EPS[(b, pair)]:g}",
                    "a_think": "" if spec.loss == "semantic" else f"{p.a_think:g}",
                    "a_nothink": f"{p.a_nothink:g}",
                    "offsets o_think / o_nothink": "; ".join(
                        f"{g}: {p.think_offset.get(g, 0.0):+g} / {p.nothink_offset.get(g, 0.0):+g}" for g in offsets
                    ),
                    "mean loss": "" if p.mean_loss is None else f"{p.mean_loss:g}",
                    "tokens med_T, med_N, sd_T, sd_N, gr_T, gr_N": ", ".join(f"{t:g}" for t in p.tokens),
                }
            )
    return groups, pd.DataFrame(pairs)


def test_data_card_states_simulation_and_current_parameters():
    from gpac_utils.paper import plotting
    from gpac_utils.workflow import paths

    card = (paths.SIMULATED / "README.md").read_text()
    assert "SIMULATED" in card
    groups, pairs = _parameter_tables()
    assert plotting.to_markdown(groups, ".4g") in card  # the card's parameter tables are current
    assert plotting.to_markdown(pairs) in card


def test_help_prints_help_and_writes_nothing(tmp_path):
    import subprocess
    import sys

    before = (
        {p: p.stat().st_mtime_ns for p in simulate.SIMULATED.glob("*.parquet")}
        if hasattr(simulate, "SIMULATED")
        else {}
    )
    r = subprocess.run([sys.executable, "-m", "gpac_utils.paper.simulate", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "usage:" in r.stdout and "--folder" in r.stdout
    after = {p: p.stat().st_mtime_ns for p in before}
    assert before == after
