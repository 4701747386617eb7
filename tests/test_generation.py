"""vLLM backend against a fake engine shaped like vLLM 0.33's outputs; resumable sharded runs;
the whole generate -> score pipeline on CPU."""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpac_utils import data
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.generation import (
    Completion,
    Sampling,
    default_sampling,
    generate,
    item_seed,
    load_generations,
    parse_shard,
    run_generation,
    split_thinking,
)
from gpac_utils.llm.generation.fake import CompletionOutput, FakeSamplingParams, Logprob, RequestOutput
from gpac_utils.llm.generation.vllm_backend import VLLMEngine

FIX = Path(__file__).parent / "fixtures"


# ----------------------------------------------------------------- vLLM-shaped fakes
# The record types and SamplingParams stand-in are the package's (gpac_utils.llm.generation.fake).
class FakeTokenizer:
    """Whitespace 'tokenizer': one token per word, stable ids, ``</think>`` is one token."""

    def __init__(self):
        self.vocab = {"</think>": 7}

    def _id(self, w):
        if w not in self.vocab:
            self.vocab[w] = 100 + int(hashlib.sha256(w.encode()).hexdigest()[:6], 16)
        return self.vocab[w]

    def encode(self, text, add_special_tokens=False):
        return [self._id(w) for w in text.split()]

    def get_vocab(self):
        return dict(self.vocab)


def fake_reply(content: str, model: str, rng: np.random.Generator) -> str:
    """Deterministic content per (request seed, prompt)."""
    if "Provide a probability" in content:
        return rng.choice(["0.9", "80%", "I cannot say", "Probability: 0.35", "0.6"])
    right = rng.random() < (0.9 if "Thinking" in model else 0.6)
    if "boxed" in content:  # MATH: the fake knows the fixture answers through the question text
        ans = FAKE_GOLD.get(content.split("\n\n")[0], "0") if right else "12345"
        body = f"so the result is \\boxed{{{ans}}}"
    else:
        body = "a generic answer"
    if "Thinking" in model:
        return " ".join(["step"] * int(rng.integers(3, 9))) + " </think> " + body
    return body


FAKE_GOLD: dict[str, str] = {}


class FakeLLM:
    """Stands in for ``vllm.LLM``: ``chat`` returns ``RequestOutput`` objects in input order."""

    def __init__(self, model: str, fail_on_call: int | None = None, max_tokens_cap: int | None = None):
        self.model, self.fail_on_call, self.calls, self.seen = model, fail_on_call, 0, []
        self.tok = FakeTokenizer()
        self.cap = max_tokens_cap

    def get_tokenizer(self):
        return self.tok

    def chat(self, messages, sampling_params, use_tqdm=True, **kw):
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise RuntimeError("CUDA error: injected failure")
        out = []
        for r, (conv, sp) in enumerate(zip(messages, sampling_params)):
            content = conv[-1]["content"]
            self.seen.append(content)
            comps = []
            for k in range(sp.n):
                rng = np.random.default_rng([sp.seed, k])
                text = fake_reply(content, self.model, rng)
                words = text.split()
                finish = "stop"
                if len(words) > sp.max_tokens:
                    words, finish = words[: sp.max_tokens], "length"
                ids = [self.tok._id(w) for w in words]
                lps = np.log(rng.uniform(0.05, 1.0, len(ids)))
                # a top-1 alternative listed first, as vLLM does when logprobs > 0 and the
                # sampled token is not the argmax: the backend must pick the sampled token's entry
                logprobs = [
                    {ids[j] + 1: Logprob(-0.01, 1, "alt"), ids[j]: Logprob(float(lps[j]), 2, w)}
                    for j, w in enumerate(words)
                ]
                comps.append(
                    CompletionOutput(
                        index=k,
                        text=" ".join(words),
                        token_ids=ids,
                        cumulative_logprob=float(lps.sum()),
                        logprobs=logprobs,
                        finish_reason=finish,
                    )
                )
            out.append(RequestOutput(str(r), None, None, None, comps[::-1], True))  # unordered outputs
        return out


def fake_engine(model, **kw):
    return VLLMEngine(model, llm=FakeLLM(model, **kw), sampling_params_cls=FakeSamplingParams)


# ----------------------------------------------------------------- tests
def test_vllm_import_is_lazy():
    assert "vllm" not in sys.modules  # importing gpac_utils.llm.generation did not import vllm


def test_vllm_backend_converts_request_outputs():
    eng = fake_engine("Qwen/Qwen3-4B-Thinking-2507")
    s = default_sampling(eng.model).with_(max_tokens=50, n=3, seed=11)
    assert (s.temperature, s.top_p, s.top_k) == (0.6, 0.95, 20)
    [comps] = eng.generate([[{"role": "user", "content": "What is 1+1?\n\n\\boxed{}"}]], [s])
    assert len(comps) == 3
    again = fake_engine(eng.model).generate([[{"role": "user", "content": "What is 1+1?\n\n\\boxed{}"}]], [s])[0]
    for k, c in enumerate(comps):
        assert len(c.token_logprobs) == len(c.token_ids) > 0
        # the sampled token's logprob, not the listed alternative's (-0.01), sample order by index
        rng = np.random.default_rng([11, k])
        fake_reply("What is 1+1?\n\n\\boxed{}", eng.model, rng)
        assert c.text == again[k].text
        assert all(lp < 0 and lp != -0.01 for lp in c.token_logprobs)
        assert math.isclose(sum(c.token_logprobs), c.extra["cumulative_logprob"], rel_tol=1e-9)
        sp = split_thinking(c, thinking=True, end_ids=eng.end_think_ids(), count_tokens=eng.count_tokens)
        assert sp.reasoning_tokens + sp.answer_tokens == len(c.token_ids)
        assert sp.answer.startswith("so the result is") and "</think>" not in sp.answer
        assert sp.answer_tokens == eng.count_tokens(sp.answer)


def test_vllm_backend_rejects_missing_sampled_logprob():
    class Broken(FakeLLM):
        def chat(self, *a, **k):
            out = super().chat(*a, **k)
            c = out[0].outputs[0]
            c.logprobs[0] = {c.token_ids[0] + 1: Logprob(-0.1)}
            return out

    eng = VLLMEngine("m", llm=Broken("m"), sampling_params_cls=FakeSamplingParams)
    with pytest.raises(RuntimeError, match="no logprob for sampled token"):
        eng.generate([[{"role": "user", "content": "x"}]], [Sampling(0.7, max_tokens=5)])


def test_split_thinking_cases():
    tok = FakeTokenizer()
    c = Completion(
        "<think> a b </think> x </think> y z", tok.encode("<think> a b </think> x </think> y z"), None, "stop"
    )
    with_ids = split_thinking(c, thinking=True, end_ids={7})
    no_ids = split_thinking(c, thinking=True, end_ids=set(), count_tokens=lambda t: len(t.split()))
    assert with_ids == no_ids
    assert with_ids.answer == "y z" and with_ids.reasoning_tokens == 6 and with_ids.answer_tokens == 2
    trunc = split_thinking(Completion("a b c", [1, 2, 3], None, "length"), thinking=True, end_ids={7})
    assert (trunc.answer, trunc.reasoning_tokens) == ("", 3)
    skipped = split_thinking(Completion("a b c", [1, 2, 3], None, "stop"), thinking=True, end_ids={7})
    assert (skipped.answer, skipped.answer_tokens) == ("a b c", 3)
    plain = split_thinking(Completion("x </think> y", [1, 7, 2], None, "stop"), thinking=False)
    assert (plain.answer, plain.answer_tokens) == ("x </think> y", 3)


def test_parse_shard():
    assert parse_shard("1/4") == (1, 4) and parse_shard(None) == (0, 1)
    for bad in ("4/4", "-1/2", "x", "1/0"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def _items(n=11):
    return pd.DataFrame(
        {
            "item_id": [f"it{k:02d}" for k in range(n)],
            "messages": [[{"role": "user", "content": f"question {k} \\boxed{{}}"}] for k in range(n)],
        }
    )


def test_resume_after_interruption_matches_uninterrupted(tmp_path):
    items = _items()
    model = "Qwen/Qwen3-4B-Instruct-2507"
    s = default_sampling(model).with_(max_tokens=64)
    clean, broken = tmp_path / "clean", tmp_path / "broken"
    for i in range(2):
        run_generation(
            items,
            fake_engine(model),
            clean,
            role="nothink",
            sampling=s,
            shard=(i, 2),
            batch_size=2,
            seed=3,
            progress=False,
        )
    # shard 0 dies on its 2nd batch (after 2 of its 6 items), shard 1 runs through
    eng = fake_engine(model, fail_on_call=2)
    with pytest.raises(RuntimeError, match="injected"):
        run_generation(
            items, eng, broken, role="nothink", sampling=s, shard="0/2", batch_size=2, seed=3, progress=False
        )
    run_generation(
        items, fake_engine(model), broken, role="nothink", sampling=s, shard="1/2", batch_size=2, seed=3, progress=False
    )
    with pytest.raises(ValueError, match="not generated yet"):
        load_generations(broken, "nothink", items["item_id"])
    # restart shard 0: the two finished items are skipped, the others generated
    eng2 = fake_engine(model)
    rep = run_generation(
        items, eng2, broken, role="nothink", sampling=s, shard="0/2", batch_size=2, seed=3, progress=False
    )
    assert rep["done_before"] == 2 and rep["generated"] == 4
    assert sorted(eng2.llm.seen) == sorted(items["messages"].iloc[0::2].iloc[2:].map(lambda m: m[0]["content"]))
    a = load_generations(clean, "nothink", items["item_id"])
    b = load_generations(broken, "nothink", items["item_id"])
    assert list(b["item_id"]) == list(items["item_id"])
    pd.testing.assert_frame_equal(a, b)
    # a second restart does nothing
    eng3 = fake_engine(model)
    assert (
        run_generation(items, eng3, broken, role="nothink", sampling=s, shard="0/2", seed=3, progress=False)[
            "generated"
        ]
        == 0
    )
    assert eng3.llm.seen == []
    # other settings in the same folder are refused
    with pytest.raises(ValueError, match="other settings"):
        run_generation(
            items,
            fake_engine(model),
            broken,
            role="nothink",
            sampling=s.with_(temperature=0.1),
            shard="0/2",
            seed=3,
            progress=False,
        )


def test_item_seed_is_stable():
    assert item_seed(0, "a") == item_seed(0, "a") != item_seed(1, "a")
    assert 0 <= item_seed(5, "x") < 2**31


def test_pipeline_generate_then_score(tmp_path):
    """Fake GPU run on the MATH fixture, then grading, three scores and the schema table."""
    from gpac_utils.llm.scoring import score_run

    items = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    FAKE_GOLD.update({q: g for q, g in zip(items["question"], items["gold"])})
    models = {"think": "Qwen/Qwen3-4B-Thinking-2507", "nothink": "Qwen/Qwen3-4B-Instruct-2507"}
    for shard in ("0/2", "1/2"):
        generate(
            items,
            models,
            tmp_path,
            backend="vllm",
            shard=shard,
            seed=0,
            max_tokens=64,
            batch_size=4,
            engine_factory=fake_engine,
            progress=False,
        )
    verbal = load_generations(tmp_path, "verbalized", items["item_id"])
    assert (verbal.groupby("item_id").size() == 10).all()
    assert verbal["text"].iloc[0] in {"0.9", "80%", "I cannot say", "Probability: 0.35", "0.6"}
    res = score_run(tmp_path, "math500", router_folds=2)
    t = res.table
    assert list(t["item_id"]) == list(items["item_id"])
    data.validate(t, require_group=True, require_tokens=True, score_cols=data.PAPER_SCORES)
    np.testing.assert_array_equal(t["loss"], data.binary_loss(t["think_correct"], t["nothink_correct"]))
    # correctness equals the fake's coin (gold answer vs 12345) through the real grader
    think = load_generations(tmp_path, "think", items["item_id"])
    assert (t["think_correct"].to_numpy() == (~think["answer"].str.contains("12345")).to_numpy()).all()
    assert t["think_correct"].sum() > 0
    unparsable = (verbal["answer"] == "I cannot say").sum()
    assert int(res.verbalized.n_unparsable.sum()) == unparsable
    assert f"{unparsable} of {len(verbal)} replies unparsable" in res.verbalized.summary()
    assert (t["think_tokens"] > t["nothink_tokens"]).all()


@pytest.mark.notebook
@pytest.mark.slow
def test_02_scores_notebook_scores_a_generation_run(tmp_path, monkeypatch):
    """02_scores in generation mode on a fake-engine run (papermill, fast profile)."""
    jupytext = pytest.importorskip("jupytext")
    papermill = pytest.importorskip("papermill")
    items = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    FAKE_GOLD.update({q: g for q, g in zip(items["question"], items["gold"])})
    models = {"think": "Qwen/Qwen3-4B-Thinking-2507", "nothink": "Qwen/Qwen3-4B-Instruct-2507"}
    runs = tmp_path / "generations"
    generate(
        items, models, runs / "math500__qwen", backend="vllm", max_tokens=64, engine_factory=fake_engine, progress=False
    )
    nb = jupytext.read(Path(__file__).parents[1] / "notebooks" / "02_scores.py")
    monkeypatch.setenv("GPAC_FIGURES", str(tmp_path / "figures"))  # the kernel's output folder
    papermill.execute_notebook(
        nb,
        str(tmp_path / "out.ipynb"),
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
        parameters={
            "profile": "fast",
            "benchmark": "math500",
            "pair": "qwen",
            "router_folds": 2,
            "overrides": {"generations_root": str(runs), "output_root": str(tmp_path / "generated")},
        },
    )
    t = data.read_table(
        tmp_path / "generated" / "math500__qwen.parquet",
        score_cols=data.PAPER_SCORES,
        require_group=True,
        require_tokens=True,
    )
    assert list(t["item_id"]) == list(items["item_id"])
    out = (tmp_path / "out.ipynb").read_text()
    assert "MODE: score generations" in out and "replies unparsable" in out
    assert (tmp_path / "figures" / "02_scores__generated__math500__qwen.png").exists()
    assert (tmp_path / "figures" / "tables" / "02_scores_summary.csv").exists()
