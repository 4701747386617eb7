"""Tests of the simulated default tables (gpac_utils.paper.simulate, data/simulated/)."""

from __future__ import annotations

import inspect
import math
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from gpac_utils import data as D
from gpac_utils.paper import simulate as S
from gpac_utils.paper.reference import TABLE_SPECS, accuracy

BINARY = ("math500", "zebralogic", "gpqa")
TABLES = [(b, p) for b in S.SIMULATED_BENCHMARKS for p in S.PAIRS]

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
    return {(b, p): S.load_simulated(b, p) for b, p in TABLES}


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
    D.validate(df, require_tokens=True, score_cols=D.PAPER_SCORES)
    assert len(df) == SIZES[benchmark]
    assert df[D.ID].is_unique
    expected = {D.ID, D.LOSS, D.THINK_TOKENS, D.NOTHINK_TOKENS, *D.PAPER_SCORES}
    if benchmark in BINARY:
        expected |= {D.GROUP, D.THINK_CORRECT, D.NOTHINK_CORRECT}
        assert set(np.unique(df[D.LOSS])) <= {0.0, 1.0}
        np.testing.assert_array_equal(df[D.LOSS], D.binary_loss(df[D.THINK_CORRECT], df[D.NOTHINK_CORRECT]))
    else:  # Arena-Hard: semantic loss, no groups, no correctness
        assert ((df[D.LOSS] > 0) & (df[D.LOSS] < 1)).all()
        assert df[D.LOSS].nunique() == len(df)
    assert set(df.columns) == expected
    assert (df[D.THINK_TOKENS] >= 1).all() and (df[D.NOTHINK_TOKENS] >= 1).all()
    assert (df[D.THINK_TOKENS] == np.rint(df[D.THINK_TOKENS])).all()


@pytest.mark.parametrize("benchmark", BINARY)
def test_group_counts_exact(committed, benchmark):
    for pair in S.PAIRS:
        counts = committed[(benchmark, pair)][D.GROUP].value_counts().to_dict()
        assert counts == GROUP_COUNTS[benchmark]
    # the same item has the same group in both pairs' tables
    q, l = committed[(benchmark, "qwen")], committed[(benchmark, "llama")]
    assert q[D.ID].tolist() == l[D.ID].tolist()
    assert q[D.GROUP].tolist() == l[D.GROUP].tolist()


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_accuracies_match_paper_to_the_item(committed, benchmark, pair):
    df = committed[(benchmark, pair)]
    n = len(df)
    think, nothink = PAPER_ACC[(benchmark, pair)]
    # the count whose percentage rounds to the paper's two decimals, and it is unique
    for col, pct in ((D.THINK_CORRECT, think), (D.NOTHINK_CORRECT, nothink)):
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
    rates = committed[(benchmark, pair)].groupby(D.GROUP)[D.LOSS].mean()
    het = HETEROGENEOUS[benchmark]
    assert S.SPECS[benchmark].heterogeneous == het
    assert rates.idxmax() == het
    # clearly higher: a two-proportion z-test against the pooled other groups rejects
    df = committed[(benchmark, pair)]
    inside = df[D.GROUP] == het
    p1, p0 = df.loc[inside, D.LOSS].mean(), df.loc[~inside, D.LOSS].mean()
    se = np.sqrt(p1 * (1 - p1) / inside.sum() + p0 * (1 - p0) / (~inside).sum())
    assert (p1 - p0) / se > 3.0


@pytest.mark.parametrize("benchmark,pair", list(PAPER_ACC))
def test_heterogeneity_is_a_design_property_not_seed_luck(benchmark, pair):
    het = HETEROGENEOUS[benchmark]
    for seed in (1, 2, 3):
        rates = S.simulate_table(benchmark, pair, seed=seed).groupby(D.GROUP)[D.LOSS].mean()
        assert rates.idxmax() == het


def _clt_pac_threshold(loss, scores, eps, rng, alpha=0.05, pi=0.5):
    """Paper Algorithm 1 (resample, CLT bound, max rule), written independently of the core."""
    n = loss.size
    m = int(np.ceil(n / pi))
    idx = rng.integers(0, n, m)
    xi = rng.random(m) < pi
    z, s = xi * loss[idx] / pi, scores[idx]
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
    loss, u = df[D.LOSS].to_numpy(), df["score_logits"].to_numpy()
    het = (df[D.GROUP] == HETEROGENEOUS[benchmark]).to_numpy()
    rng = np.random.default_rng(12345)
    n = len(df)
    n_cal = int(0.6 * n)
    errs, overall = [], []
    for _ in range(50):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        thr = _clt_pac_threshold(loss[cal], u[cal], eps, rng)
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
    wrong = 1 - df[D.NOTHINK_CORRECT]
    aucs = {s: auroc(wrong, df[s]) for s in D.PAPER_SCORES}
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
    target = 1 - df[D.NOTHINK_CORRECT].mean() if D.NOTHINK_CORRECT in df else df[D.LOSS].mean()
    assert df["score_logits"].mean() == pytest.approx(target, abs=1e-9)
    # verbalized: overconfident (mean uncertainty below the logits-based one)
    assert df["score_verbalized"].mean() < df["score_logits"].mean()


@pytest.mark.parametrize("benchmark,pair", TABLES)
def test_router_is_function_of_difficulty_and_own_noise(committed, benchmark, pair):
    comp = S.components(benchmark, pair)
    rebuilt = S.simulated_router_score(comp["difficulty"], comp["noise_score_router"])
    np.testing.assert_array_equal(rebuilt, committed[(benchmark, pair)]["score_router"].to_numpy())
    assert list(inspect.signature(S.simulated_router_score).parameters) == ["difficulty", "noise"]


def test_router_independent_of_nothink_correctness_given_difficulty():
    """Pooled over seeds: the router's noise (= its score given the difficulty) is
    uncorrelated with the realised non-thinking correctness; |r| < 4 / sqrt(n)."""
    noise, correct, resid = [], [], []
    for seed in range(8):
        for b in BINARY:
            comp = S.components(b, "qwen", seed=seed)
            df = S.simulate_table(b, "qwen", seed=seed)
            noise.append(comp["noise_score_router"])
            correct.append(df[D.NOTHINK_CORRECT].to_numpy() - df[D.NOTHINK_CORRECT].mean())
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
    comp = S.components(benchmark, pair)
    assert df[D.THINK_TOKENS].median() > 1.5 * df[D.NOTHINK_TOKENS].median()
    r = np.corrcoef(np.log(df[D.THINK_TOKENS]), comp["difficulty"])[0, 1]
    assert r > 4 / np.sqrt(len(df))  # thinking tokens grow with difficulty


# ---------------------------------------------------------------- seeding, files, errors


@pytest.mark.parametrize("cpu", ["native", "no-avx512"])
def test_regeneration_is_byte_identical(tmp_path, cpu, request):
    """The committed tables come out byte for byte, with numpy's full SIMD dispatch and with its
    AVX-512 code paths and OpenBLAS's kernels narrowed to AVX2 (what an AVX2-only machine runs)."""
    if cpu == "native":
        paths = S.write_all(tmp_path)
        assert len(paths) == 8
    else:
        request.getfixturevalue("run_narrowed")(
            [sys.executable, "-m", "gpac_utils.paper.simulate", "--folder", str(tmp_path)]
        )
    for b, p in TABLES:
        assert S.table_path(b, p, tmp_path).read_bytes() == S.table_path(b, p).read_bytes(), (b, p)


def test_portable_exp_is_within_one_ulp_of_libm():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-40, 40, 20_000), rng.uniform(-700, 700, 5_000), np.linspace(-1, 1, 2001)])
    ref = np.array([math.exp(v) for v in x])
    ulps = np.abs(S.portable_exp(x) - ref) / np.spacing(ref)
    assert ulps.max() <= 1.0
    assert S.portable_exp(np.array([0.0]))[0] == 1.0


def test_seed_changes_table_and_paths():
    a = S.simulate_table("gpqa", "qwen", seed=1)
    b = S.simulate_table("gpqa", "qwen", seed=1)
    c = S.simulate_table("gpqa", "qwen", seed=2)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["score_logits"], c["score_logits"])
    assert S.table_path("gpqa", "llama").name == "gpqa__llama.parquet"
    assert S.table_path("gpqa", "llama").parent.name == "simulated"


def test_bad_names_raise():
    with pytest.raises(ValueError, match="benchmark 'math'"):
        S.simulate_table("math", "qwen")
    with pytest.raises(ValueError, match="model pair 'gpt'"):
        S.table_path("gpqa", "gpt")


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
        row = acc.loc[S.SPECS[b].title]
        assert row[S.MODELS[pair][0]] == pytest.approx(think, abs=0.005)
        assert row[S.MODELS[pair][1]] == pytest.approx(nothink, abs=0.005)
    for ext in ("png", "pdf"):
        assert (ran.figures / f"dataset_category_distribution.{ext}").stat().st_size > 0


def _parameter_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The parameters (data/simulated/specs.yaml) as the data card's two tables: groups (benchmark, group,
    n, mu_g) and pairs (one row per benchmark x pair; offsets listed as ``group: o_think / o_nothink``)."""
    groups = pd.DataFrame(
        [
            {"benchmark": b, "group": g.name, "n": g.n, "mu_g": g.difficulty}
            for b, spec in S.SPECS.items()
            for g in spec.groups
        ]
    )
    pairs = []
    for b, spec in S.SPECS.items():
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

    before = {p: p.stat().st_mtime_ns for p in S.SIMULATED.glob("*.parquet")} if hasattr(S, "SIMULATED") else {}
    r = subprocess.run([sys.executable, "-m", "gpac_utils.paper.simulate", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "usage:" in r.stdout and "--folder" in r.stdout
    after = {p: p.stat().st_mtime_ns for p in before}
    assert before == after
