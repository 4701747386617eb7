"""Pre-call routing on the router-based score (issue 39): ``gpac fit-router`` writes the router as a
JSON artefact, ``gpac calibrate --score-model`` records its hash and embedder, and ``CertifiedRouter``
decides from the prompt: the cheap engine answers only the items routed to it, the thinking engine
only the rest (engines that record their calls). The embedder here is a small deterministic one
registered for the test (the bundled MiniLM takes about a minute for the table on 2 cores); the
real engine: tests/test_vllm_engine.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_serve import FakeEngine

from gpac_utils.checks import DataError, ParameterError
from gpac_utils.cli import main
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.router_model import EMBEDDERS, SCORE_TOLERANCE, Embedding, RouterModel, load_router_model
from gpac_utils.llm.serve import CertifiedRouter, ServeOptions
from gpac_utils.workflow.paths import DATA

TABLE = DATA / "generated" / "arith__smollm2.parquet"
TOY = "toy-arith"


class ToyEmbedder:
    """Counts of the arithmetic words and digits of a question (a stand-in for sentence embeddings)."""

    model_name = TOY
    WORDS = ("times", "plus", "+", "-", "Solve", "x")

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        rows = [[t.count(w) for w in self.WORDS] + [len(re.findall(r"\d", t)), len(t)] for t in texts]
        return np.asarray(rows, dtype=float)


@pytest.fixture(scope="module", autouse=True)
def toy_embedder():
    with EMBEDDERS.registered(Embedding(TOY, ToyEmbedder, "word and digit counts (tests)")):
        yield


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("precall")
    model, scored, cert = d / "router.json", d / "calibration.parquet", d / "thresholds.json"
    args = ["fit-router", "--data", str(TABLE), "--benchmark", "arith", "--group-col", "group", "--embedder", TOY]
    args += ["--overwrite-score-col"]  # the table's score_router is the cross-fitted one: replaced by the model's
    assert main([*args, "--scored", str(scored), "-o", str(model)]) == 0
    cal = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.1"]
    assert main(["calibrate", "--data", str(scored), *cal, "--score-model", str(model), "-o", str(cert)]) == 0
    return model, scored, cert


def test_the_artefact_is_json_and_the_calibration_rows_are_disjoint(fitted):
    model_path, scored_path, cert_path = fitted
    model = load_router_model(model_path)
    doc = json.loads(model_path.read_text())
    assert doc["artefact"] == "gpac-router-model" and doc["embedder"] == TOY and doc["text"] == "question"
    scored = pd.read_parquet(scored_path)
    fit_ids = set(model.fitted_on["item_ids"])
    assert len(fit_ids) + len(scored) == len(pd.read_parquet(TABLE)) and not fit_ids & set(scored["item_id"])
    # the scored column is the artefact's own score of the question
    np.testing.assert_array_equal(scored["score_router"], model.score_texts(scored["question"], ToyEmbedder()))
    # a row's score does not depend on the batch it comes in (served one by one, calibrated in bulk)
    one = [model.score_texts([q], ToyEmbedder())[0] for q in scored["question"][:50]]
    np.testing.assert_array_equal(one, scored["score_router"][:50])
    # round trip: the file reads back to the same function
    again = RouterModel.from_json(model.to_json())
    assert again.to_json() == model.to_json()
    record = json.loads(cert_path.read_text())["provenance"]["score_model"]
    import hashlib

    assert record["sha256"] == hashlib.sha256(model_path.read_bytes()).hexdigest() and record["embedder"] == TOY


def test_precall_the_cheap_engine_answers_only_the_items_routed_to_it(fitted):
    model_path, _, cert_path = fitted
    model = load_router_model(model_path)
    fit_ids = set(model.fitted_on["item_ids"])
    items = load_benchmark("arith")
    items = items[~items["item_id"].isin(fit_ids)].groupby("group").head(20).reset_index(drop=True)
    cheap, thinker = FakeEngine("cheap"), FakeEngine("thinker")
    served = CertifiedRouter(cert_path, cheap, thinker).serve(items)
    thr = json.loads(cert_path.read_text())["thresholds"]
    thr = np.array([np.inf * -1 if thr[g] is None else thr[g] for g in items["group"]])
    np.testing.assert_array_equal(served["score"], model.score_texts(items["question"], ToyEmbedder()))
    routed = (served["score"] <= thr).to_numpy()
    assert 0 < routed.sum() < len(items)  # both routes occur
    assert (served["route_nothink"] == routed).all()
    # one call per request in all, each on the engine of its route
    assert [k for k, _ in cheap.requests] == served.loc[routed, "item_id"].tolist()
    assert [k for k, _ in thinker.requests] == served.loc[~routed, "item_id"].tolist()
    assert served.loc[~routed, "nothink_answer"].isna().all() and served.loc[routed, "think_answer"].isna().all()
    assert (served["answer"] == np.where(routed, served["nothink_answer"], served["think_answer"])).all()
    print(f"pre-call: {len(items) - routed.sum()} of {len(items)} cheap-model calls saved")


def test_a_tampered_model_file_is_refused(fitted, tmp_path):
    model_path, _, cert_path = fitted
    doc = json.loads(model_path.read_text())
    doc["intercept"] += 1.0
    bad = tmp_path / "router.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"SHA-256 .* differs from the certificate's") as info:
        CertifiedRouter(cert_path, FakeEngine("a"), FakeEngine("b"), ServeOptions(score_model=bad))
    assert "\n" not in str(info.value)


def test_another_embedder_or_no_model_is_refused(fitted):
    _, _, cert_path = fitted
    other = ToyEmbedder()
    other.model_name = "all-MiniLM-L6-v2"
    with pytest.raises(ParameterError, match="reads 'toy-arith' embeddings, not 'all-MiniLM-L6-v2'"):
        CertifiedRouter(cert_path, FakeEngine("a"), FakeEngine("b"), ServeOptions(embedder=other))
    doc = json.loads(cert_path.read_text())
    del doc["provenance"]["score_model"]
    with pytest.raises(ParameterError, match="served by its fitted model .* records none"):  # when built
        CertifiedRouter(doc, FakeEngine("a"), FakeEngine("b"))


def test_calibrating_on_the_routers_own_fitting_rows_is_refused(fitted, tmp_path, capsys):
    model_path, _, _ = fitted
    table = pd.read_parquet(TABLE).assign(score_router=0.5)
    path = tmp_path / "all.parquet"
    table.to_parquet(path)
    cal = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.1"]
    rc = main(
        ["calibrate", "--data", str(path), *cal, "--score-model", str(model_path), "-o", str(tmp_path / "t.json")]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "were fitting items of the router" in err and err.count("\n") == 1


def test_a_request_of_an_unknown_group_always_thinks(fitted):
    _, _, cert_path = fitted
    items = load_benchmark("arith").head(4).assign(group="div_3d")
    cheap, thinker = FakeEngine("cheap"), FakeEngine("thinker")
    served = CertifiedRouter(cert_path, cheap, thinker).serve(items)
    assert (~served["route_nothink"]).all() and (served["status"] == "unseen at calibration").all()
    assert cheap.requests == [] and len(thinker.requests) == 4


class BatchedEmbedder(ToyEmbedder):
    """The toy embedder, off in the last bits by the size of the batch (as MiniLM's float32 embeddings
    can be across batchings and CPUs)."""

    model_name = "toy-batched"

    def encode(self, texts):
        return super().encode(texts) * (1 + 1e-9 * len(texts))


def test_a_table_scored_in_another_batching_is_calibrated_and_verified(tmp_path, capsys):
    """fit-router scores the held-out rows inside the batch of the whole table; calibrate, verify and audit
    re-encode only the calibration rows: the scores differ in their last bits, and all three accept them
    (one tolerance, SCORE_TOLERANCE), while a column off by 1e-3 is still refused."""
    model, scored, cert = tmp_path / "router.json", tmp_path / "calibration.parquet", tmp_path / "thresholds.json"
    with EMBEDDERS.registered(Embedding(BatchedEmbedder.model_name, BatchedEmbedder, "batch-dependent (tests)")):
        args = ["fit-router", "--data", str(TABLE), "--benchmark", "arith", "--group-col", "group"]
        args += ["--embedder", BatchedEmbedder.model_name, "--overwrite-score-col"]
        assert main([*args, "--scored", str(scored), "-o", str(model)]) == 0
        table = pd.read_parquet(scored)
        again = load_router_model(model).score_texts(table["question"], BatchedEmbedder())
        gap = np.abs(table["score_router"].to_numpy() - again)
        assert 0 < gap.max() < SCORE_TOLERANCE and (gap > 0).sum() > 10  # not bit-identical, within tolerance
        cal = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.1"]
        assert main(["calibrate", "--data", str(scored), *cal, "--score-model", str(model), "-o", str(cert)]) == 0
        assert main(["verify", str(cert), "--data", str(scored)]) == 0
        held = table.assign(item_id="fresh-" + table["item_id"])
        held.to_parquet(tmp_path / "held.parquet")
        capsys.readouterr()
        main(["audit", str(cert), "--data", str(tmp_path / "held.parquet"), "--binary"])
        assert "differs from the score model's scores" not in capsys.readouterr().err
        table.assign(score_router=table["score_router"] + 1e-3).to_parquet(tmp_path / "off.parquet")
        off = ["calibrate", "--data", str(tmp_path / "off.parquet"), *cal, "--score-model", str(model)]
        rc = main([*off, "-o", str(tmp_path / "off.json")])
        assert rc == 1 and f"rows differ by more than {SCORE_TOLERANCE:g}" in capsys.readouterr().err
