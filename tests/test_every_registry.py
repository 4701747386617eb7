"""A dummy entry in every registry, run through every command that consults that registry (issue 37.1).

Each registry gets one new entry, registered the permanent way (``register``, undone at the end of the
module); then ``gpac calibrate``, ``route``, ``inspect`` and ``plan`` (in process), ``run_experiment``,
an online stream, the serving router (fake engines) and a generation run (fake engine, scored by
``score_run``) use it. Each must work and name the entry.
"""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from test_precall import ToyEmbedder
from test_serve import FakeEngine, requests_table

from gpac_utils import GPAC, bounds, calibrate, cli, registry, risks, scores, settings
from gpac_utils.certificate import Certificate
from gpac_utils.experiment import ExperimentConfig, run_experiment, trial_split
from gpac_utils.llm import benchmarks, grading, router_model
from gpac_utils.llm.generation import GenerationRequest, generate, pair_samplings, walk_samplings
from gpac_utils.llm.records import load_generations
from gpac_utils.llm.scoring import score_run
from gpac_utils.llm.serve import CertifiedRouter
from gpac_utils.online import DRIFT_SCOPES, LABELLING, DriftScope, LabellingMode, OnlineGPAC
from gpac_utils.recipe import Recipe

BOUND, SCORE, ROLE, METHOD, CORRECTION = "dummy_bound", "score_dummy", "dummy_role", "D-PAC", "dummy_correction"
RISK, LABEL, DRIFT, BENCH = "dummy_risk", "dummy_labelling", "dummy_drift", "dummy_bench"
EMBEDDER = "dummy_embedder"
WSR = Recipe(bound="wsr")


def _one_sided(s1, s2, m, alpha, term_range):
    return s1 / m + term_range * math.sqrt(math.log(1 / alpha) / (2 * m))


def _one_sided_reference(x, alpha, R):
    return x.mean() + R * math.sqrt(math.log(1 / alpha) / (2 * len(x)))


def _serve_dummy(router, requests, cheap):
    """The cheap answer's length, squashed into [0, 1]."""
    return np.array([len(cheap[i][0][0]) / (1 + len(cheap[i][0][0])) for i in requests["item_id"]])


def _offline_dummy(generations):
    first = generations[generations["sample"] == 0].set_index("item_id")["answer"]
    return first.str.len() / (1 + first.str.len())


class DPAC(GPAC):
    """G-PAC under another name: a second calibrator of known groups."""

    name = METHOD


def _half_certify(scores_, losses, problem, rng):
    """Certify the joint risk at eps / 2."""
    return risks.RISKS["joint"].certify(scores_, losses, dataclasses.replace(problem, eps=problem.eps / 2), rng)


def _half_evaluate(losses, routed):
    return 2 * risks.RISKS["joint"].evaluate(losses, routed)


def _dummy_walk_messages(problem):
    """The dummy role's own walk prompt (no edit of grading needed)."""
    return [{"role": "user", "content": f"{problem} (dummy prompt)"}]


class RecordingEngine(FakeEngine):
    """A fake engine that also keeps each conversation it is sent."""

    def stream(self, requests, window=None):
        requests = list(requests)
        self.conversations = [*getattr(self, "conversations", []), *(c for _, c, _ in requests)]
        return super().stream(requests, window)


def _bench_items():
    return pd.DataFrame({"unique_id": [f"d{i}" for i in range(40)], "problem": [f"{i} + 1" for i in range(40)],
                         "answer": [str(i + 1) for i in range(40)], "subject": ["a", "b"] * 20,
                         "level": ["1"] * 40})  # fmt: skip


_ROLE = scores.Role(
    ROLE,
    "nothink",
    "a dummy role",
    {"temperature": 0.5, "max_tokens": 8},
    n_samples=2,
    walk_messages=_dummy_walk_messages,
)
with scores.ROLES.registered(_ROLE):  # a score names a registered role (checked when it is made)
    _SCORE = scores.Score(
        SCORE, ROLE, "cascade", "a dummy score", offline=_offline_dummy, serve=_serve_dummy, counts_role=True
    )

ENTRIES = [
    (bounds.BOUNDS, bounds.Bound(BOUND, _one_sided, True, _one_sided_reference, "test", monotone=True)),
    (scores.ROLES, _ROLE),
    (scores.SCORES, _SCORE),
    (calibrate.CALIBRATORS, calibrate.Method(METHOD, DPAC, "known")),
    (settings.CORRECTIONS, settings.Correction(CORRECTION, lambda alpha, k: alpha / 2, "each group at alpha / 2")),
    (
        risks.RISKS,
        risks.Risk(
            RISK,
            "the joint risk at eps / 2",
            _half_certify,
            _half_evaluate,
            fewest_terms=lambda bound, eps, alpha, r: bound.fewest_terms(eps / 2, alpha, r),
        ),
    ),
    (LABELLING, LabellingMode(LABEL, lambda cheap, rate: np.where(cheap, rate, 0.5 + rate / 2), "a dummy mode")),
    (DRIFT_SCOPES, DriftScope(DRIFT, lambda a, k: a / 2, False)),
    (
        benchmarks.BENCHMARKS,
        benchmarks.Benchmark(
            BENCH,
            None,
            benchmarks.MATH_COLUMNS,
            {"id": "unique_id"},
            benchmarks._math_items,
            walk=True,
            generate=_bench_items,
        ),
    ),  # fmt: skip
    (grading.GRADERS, grading.Grader(BENCH, grading.grade_exact)),
    (router_model.EMBEDDERS, router_model.Embedding(EMBEDDER, ToyEmbedder, "word and digit counts")),
]


def test_every_registry_has_a_dummy_here():
    """A new registry must get its dummy entry in this module."""
    import gpac_utils

    found = set()
    for name in (
        "bounds",
        "scores",
        "calibrate",
        "settings",
        "risks",
        "online",
        "llm.benchmarks",
        "llm.grading",
        "llm.router_model",
    ):
        module = __import__(f"gpac_utils.{name}", fromlist=["x"])
        found |= {id(v) for v in vars(module).values() if isinstance(v, registry.Registry)}
    assert found == {id(r) for r, _ in ENTRIES}, "a registry without a dummy entry in tests/test_every_registry.py"
    assert gpac_utils  # the package imports every module above


@pytest.fixture(scope="module")
def dummies():
    added = []
    try:
        for reg, entry in ENTRIES:
            reg.register(entry)
            added.append((reg, getattr(entry, "column", None) or entry.name))
        yield
    finally:
        for reg, name in reversed(added):
            reg.unregister(name)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 800
    g = rng.choice(["algebra", "geometry"], n)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(g == "geometry", 0.3, 0.1) * u).astype(float)
    df = pd.DataFrame(
        {
            "item_id": np.arange(n),
            "group": g,
            "loss": loss,
            "score_logits": u,
            SCORE: np.clip(u + rng.normal(0, 0.05, n), 0, 1),
            "think_tokens": rng.integers(200, 2000, n).astype(float),
            "nothink_tokens": rng.integers(10, 100, n).astype(float),
        }
    )
    path = tmp_path_factory.mktemp("every") / "items.csv"
    df.to_csv(path, index=False)
    return df, path


CASES = {  # registry entry -> the calibrate options that use it, and what the thresholds file records
    "bound": (["--bound", BOUND], ("settings", "bound"), BOUND),
    "score": (["--score-col", SCORE], ("columns", "score"), SCORE),
    "method": (["--method", "dpac"], ("method",), METHOD),
    "correction": (["--correction", CORRECTION], ("settings", "correction"), CORRECTION),
    "risk": (["--risk", RISK], ("settings", "risk"), RISK),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_command_line_runs_and_names_the_entry(dummies, table, case, tmp_path, capsys):
    _, path = table
    options, field, name = CASES[case]
    score = SCORE if case == "score" else "score_logits"
    base = ["--data", str(path), "--group-col", "group", "--eps", "0.1"]
    base += [] if case == "score" else ["--score-col", score]
    out = tmp_path / "thr.json"
    assert cli.main(["calibrate", *base, *options, "-o", str(out)]) == 0
    payload = json.loads(out.read_text())
    value = payload
    for key in field:
        value = value[key]
    assert value == name
    assert name in capsys.readouterr().out or case in ("score", "correction")  # the summary line
    routed = tmp_path / "routed.csv"
    assert (
        cli.main(["route", "--thresholds", str(out), "--data", str(path), "--group-col", "group", "-o", str(routed)])
        == 0
    )
    assert len(pd.read_csv(routed)) == len(table[0])
    capsys.readouterr()
    assert cli.main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    if case in ("bound", "score", "method"):  # the settings line names every setting once 37.3 lands
        assert name in shown
    fresh = tmp_path / "fresh.csv"  # the audit refuses calibration items: other ids, the losses shuffled
    df = table[0]
    df.assign(item_id=df["item_id"] + len(df), loss=np.random.default_rng(1).permutation(df["loss"])).to_csv(
        fresh, index=False
    )
    for command in (["audit", str(out), "--data", str(fresh)], ["verify", str(out), "--data", str(path)]):
        assert cli.main(command) in (0, 3, 4, 5)  # the audit's gate: 3 violated, 4 a group untested, 5 too small
        shown = capsys.readouterr().out
        assert name in shown or case == "correction", f"gpac {command[0]} does not name the {case} {name}"
    if case in ("bound", "score", "risk"):  # plan consults BOUNDS, SCORES and RISKS
        plan = tmp_path / "plan.csv"
        risk_options = ["--risk", RISK] if case == "risk" else []
        bound_options = options if case == "bound" else []
        args = ["plan", "--data", str(path), "--score-col", score, "--group-col", "group", "--eps", "0.1"]
        args += [*bound_options, *risk_options, "--pilot-fraction", "0.3", "--n-resamples", "2", "--grid", "20,100"]
        args += ["-o", str(plan)]
        assert cli.main(args) == 0
        printed = capsys.readouterr().out
        assert "feasibility (" in printed and (name in printed or case == "score")
        assert pd.read_csv(plan)["n_needed"].notna().any()


def test_the_default_calibrator_of_known_groups_stays(dummies, table, tmp_path):
    """A second calibrator of known groups (D-PAC) does not become --group-col's default."""
    _, path = table
    out = tmp_path / "thr.json"
    args = ["calibrate", "--data", str(path), "--score-col", "score_logits", "--group-col", "group"]
    assert cli.main([*args, "--eps", "0.1", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["method"] == "G-PAC"
    assert calibrate.default_method("known").name == "G-PAC"


def test_a_calibrator_with_a_default_of_its_own_is_refused():
    """gpac calibrate, run_experiment and certificates build it from Settings: its own default would hold in
    Python only (the CLI would record 'G-PAC-wsr' and calibrate with Hoeffding-Bentkus)."""

    class OwnDefault(GPAC):
        def __init__(self, eps, alpha=0.05, recipe=WSR, **options):
            super().__init__(eps, alpha, recipe, **options)

    with pytest.raises(ValueError, match=r"OwnDefault.__init__ has recipe=.*--recipe"):
        calibrate.Method("own-default", OwnDefault, "known")
    assert calibrate.Method(METHOD, DPAC, "known").cls is DPAC


@pytest.mark.filterwarnings("ignore::gpac_utils.calibrate.GroupWarning")  # eps / 2, alpha / 2: small groups
def test_run_experiment_names_each_entry(dummies, table):
    df, _ = table
    cfg = ExperimentConfig(
        eps=0.3,
        methods=(METHOD, "PAC"),
        scores=(SCORE,),
        recipes=(Recipe(bound=BOUND),),
        correction=CORRECTION,
        risk=RISK,
        n_trials=2,
        cal_ratio=0.5,
        min_group_size=1,
    )
    rows = run_experiment(df, cfg)
    assert set(rows["method"]) == {METHOD, "PAC"} and set(rows["score"]) == {SCORE} and set(rows["bound"]) == {BOUND}
    # its STP counts its role's two answers per item: the same routes under an unregistered name save that more
    plain = run_experiment(df.rename(columns={SCORE: "score_plain"}), cfg.replace(scores=("score_plain",)))
    every = (rows["group"] == calibrate.ALL).to_numpy()
    share = [np.mean(df["nothink_tokens"].to_numpy()[t] / df["think_tokens"].to_numpy()[t]) for t in
             (trial_split(len(df), cfg.cal_ratio, cfg.seed, k)[1] for k in rows.loc[every, "trial"])]  # fmt: skip
    np.testing.assert_allclose(plain.loc[every, "stp"] - rows.loc[every, "stp"], 2 * np.array(share))
    # pop_risk is the dummy risk's evaluation: twice the joint risk, the test error's estimand
    per = rows[rows["group"] != "__all__"]
    assert (per["pop_risk"] >= 0).all() and per["pop_risk"].max() > 0


@pytest.mark.filterwarnings("ignore::gpac_utils.calibrate.GroupWarning")
def test_gpac_audit_evaluates_the_certificate_through_the_risk_entry(dummies, table, tmp_path, capsys):
    """The certificate's realised risk on routed test items is its Risk entry's evaluate (37.1, 37.3):
    the dummy risk reports twice the joint risk, as run_experiment's pop_risk does."""
    df, path = table
    half = len(df) // 2
    cal_path, test_path = tmp_path / "cal.csv", tmp_path / "test.csv"
    df.iloc[:half].to_csv(cal_path, index=False)
    df.iloc[half:].to_csv(test_path, index=False)
    out, report = tmp_path / "thr.json", tmp_path / "audit.csv"
    args = ["--score-col", "score_logits", "--group-col", "group", "--eps", "0.3", "--risk", RISK]
    assert cli.main(["calibrate", "--data", str(cal_path), *args, "-o", str(out)]) == 0
    assert cli.main(["audit", str(out), "--data", str(test_path), "-o", str(report)]) in (0, 3)
    assert RISK in capsys.readouterr().out  # the verdict line names the risk
    got = pd.read_csv(report).set_index("group")
    cert = Certificate.read(out)
    test = df.iloc[half:]
    cheap = cert.calibrator().route(test["score_logits"].to_numpy(), test["group"].to_numpy())
    for g, row in got.iterrows():
        at = (test["group"] == g).to_numpy()
        loss = test["loss"].to_numpy()[at]
        assert row["risk"] == pytest.approx(_half_evaluate(loss, cheap[at]))
        assert row["risk"] == pytest.approx(2 * np.mean(loss * cheap[at]))  # not the joint risk itself
    assert (got["routed"] > 0).any()


def test_an_online_stream_with_the_labelling_mode_and_drift_scope(dummies, table):
    df, _ = table
    router = OnlineGPAC(eps=0.1, label_prob=0.3, labelling=LABEL, drift_scope=DRIFT, drift_alpha=1e-3, grid=11)
    u, loss, g = df[SCORE].to_numpy(), df["loss"].to_numpy(), df["group"].to_numpy()
    for block in np.array_split(np.arange(len(df)), 8):
        d = router.decide(u[block], g[block])
        router.update(u[block], np.where(d.observe, loss[block], np.nan), g[block], d)
    assert router.labelling == LABEL and router.drift_scope == DRIFT and router.thresholds_


def test_the_serving_router_serves_the_dummy_score_method_bound_and_risk(dummies):
    cheap, thinker = FakeEngine("cheap"), FakeEngine("thinker")
    cal_reqs = requests_table(600, seed=1)
    served_scores = _serve_dummy(None, cal_reqs, {i: [(f"answer {i}", None)] for i in cal_reqs["item_id"]})
    loss = (np.random.default_rng(3).uniform(size=len(cal_reqs)) < 0.2 * served_scores).astype(float)
    cal = DPAC(0.3, recipe=Recipe(bound=BOUND), correction=CORRECTION, risk=RISK).fit(
        served_scores, loss, cal_reqs["group"].to_numpy()
    )
    cert = Certificate.from_calibrator(
        cal, columns={"score": (SCORE, served_scores), "group": ("group", cal_reqs["group"].to_numpy())}
    )
    online = OnlineGPAC(eps=0.3, label_prob=0.5, labelling=LABEL, grid=11)
    router = CertifiedRouter(cert, cheap, thinker, online=online, loss_fn=lambda r, a, b: float(a != b))
    served = router.serve(requests_table(50))
    assert router.score is scores.SCORES[SCORE] and cert.method == METHOD and cert.score == SCORE
    assert served["score"].between(0, 1).all() and served["route_nothink"].any()  # certified, used
    assert served["observed"].any() and np.isfinite(served.loc[served["observed"], "loss"]).all()


def test_a_generation_run_with_the_role_benchmark_grader_and_score(dummies, tmp_path):
    items = benchmarks.load_benchmark(BENCH, n_items=12)
    assert walk_samplings()[ROLE].temperature == 0.5
    assert ROLE in pair_samplings({"think": "my/think", "nothink": "my/nothink"})
    assert items[f"messages_{ROLE}"].tolist() == [_dummy_walk_messages(q) for q in items["question"]]
    assert grading.walk_messages("2 + 2", ROLE) == _dummy_walk_messages("2 + 2")
    engine = RecordingEngine("tiny")
    request = GenerationRequest(backend="fake", samplings=walk_samplings(), progress=False)
    report = generate(items, {"think": "tiny", "nothink": "tiny"}, tmp_path, request, engine=engine)
    assert ROLE in report and report[ROLE]["tokens"] > 0
    assert (load_generations(tmp_path, ROLE).groupby("item_id").size() == 2).all()  # its declared n_samples
    assert _dummy_walk_messages(items["question"].iloc[0]) in engine.conversations  # its walk prompt was sent
    embedder = SimpleNamespace(model_name="fake", encode=lambda texts: np.eye(len(texts)))
    run = score_run(tmp_path, BENCH, embedder=embedder, router_folds=2)
    assert SCORE in run.table.columns and run.table[SCORE].between(0, 1).all()
    assert grading.grade(BENCH, "13", "13")


def test_the_router_score_with_the_dummy_embedder(dummies, tmp_path):
    """gpac fit-router, gpac calibrate --score-model and the serving router's pre-call decision."""
    from gpac_utils.workflow.paths import DATA

    model, scored, cert = tmp_path / "r.json", tmp_path / "c.parquet", tmp_path / "t.json"
    table = str(DATA / "generated" / "arith__smollm2.parquet")
    fit = ["fit-router", "--data", table, "--benchmark", "arith", "--group-col", "group", "--embedder", EMBEDDER]
    fit += ["--overwrite-score-col"]  # the table's cross-fitted score_router, replaced by the model's
    assert cli.main([*fit, "--scored", str(scored), "-o", str(model)]) == 0
    cal = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.3"]
    assert cli.main(["calibrate", "--data", str(scored), *cal, "--score-model", str(model), "-o", str(cert)]) == 0
    assert Certificate.read(cert).provenance["score_model"]["embedder"] == EMBEDDER
    items = benchmarks.load_benchmark("arith").groupby("group").head(2)
    decided = CertifiedRouter.for_decisions(cert).decide(items)
    assert decided["score"].between(0, 1).all() and len(decided) == len(items)
