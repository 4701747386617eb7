"""Generation runs (records on disk, resume, shards, settings, run reports) and the whole
generate -> score pipeline on CPU, without a GPU or vLLM.

The real engines are tested elsewhere: transformers in ``test_generation_hf.py`` and
``test_tiny_model.py``, vLLM (the real CPU engine) in ``test_vllm_engine.py``. Here a stub engine
shows what a real engine cannot show on demand: a failure after a chosen number of items (an
injected CUDA error), and a thinking model's replies whose correctness is known in advance.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpac_utils import data
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.llm import generation as gen
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.engines import Completion, item_seed
from gpac_utils.llm.generation import (
    GenerationRequest,
    generate,
    model_defaults,
    pair_samplings,
    run_generation,
    split_thinking,
)
from gpac_utils.llm.records import load_generations, load_run_facts, parse_shard
from gpac_utils.scores import ROLES, Role

ROOT = Path(__file__).parents[1]
FIX = Path(__file__).parent / "fixtures"
FAKE_GOLD: dict[str, str] = {}


def _id(word: str) -> int:
    return 7 if word == "</think>" else 100 + int(hashlib.sha256(word.encode()).hexdigest()[:6], 16)


def fake_reply(content: str, model: str, rng: np.random.Generator) -> str:
    """Deterministic content per (request seed, sample, prompt); MATH answers right with a known coin."""
    if "Provide a probability" in content:
        return str(rng.choice(["0.9", "80%", "I cannot say", "Probability: 0.35", "0.6"]))
    right = rng.random() < (0.9 if "Thinking" in model else 0.6)
    if "boxed" in content:
        body = f"so the result is \\boxed{{{FAKE_GOLD.get(content.split(chr(10) * 2)[0], '0') if right else '12345'}}}"
    else:
        body = "a generic answer"
    if "Thinking" in model:
        return " ".join(["step"] * int(rng.integers(3, 9))) + " </think> " + body
    return body


class StubTokenizer:
    def get_vocab(self):
        return {"</think>": 7}


class StubEngine:
    """The engine interface (``stream``, ``tokenizer.get_vocab``) with replies known in advance and an
    optional failure after ``fail_after`` items. Whitespace tokens, ``</think>`` = 7."""

    backend, logprobs_mode, tokenizer = "stub", "raw_logprobs", StubTokenizer()

    def __init__(self, model: str, fail_after: int | None = None):
        self.model, self.fail_after, self.seen, self.closed = model, fail_after, [], False

    def close(self):
        self.closed = True

    def stream(self, requests, window=None):
        for k, (key, conv, s) in enumerate(requests):
            if self.fail_after is not None and k >= self.fail_after:
                raise RuntimeError("CUDA error: injected failure")
            self.seen.append(conv[-1]["content"])
            comps = []
            for j in range(s.n):
                rng = np.random.default_rng([s.seed, j])
                reply = fake_reply(conv[-1]["content"], self.model, rng).split()
                words = (reply * s.max_tokens if s.ignore_eos else reply)[: s.max_tokens]
                lps = np.log(rng.uniform(0.05, 1.0, len(words))).tolist()
                finish = "length" if s.ignore_eos or len(reply) > s.max_tokens else "stop"
                comps.append(Completion(" ".join(words), [_id(w) for w in words], lps, finish))
            yield key, comps


def _items(n=11):
    return pd.DataFrame(
        {
            "item_id": [f"it{k:02d}" for k in range(n)],
            "messages": [[{"role": "user", "content": f"question {k} \\boxed{{}}"}] for k in range(n)],
        }
    )


MODEL = "Qwen/Qwen3-4B-Instruct-2507"
S = model_defaults(MODEL)[0].with_(max_tokens=64)


def _run(out, shard="0/1", engine=None, items=None, **kw):
    items = _items() if items is None else items
    request = GenerationRequest(samplings={"nothink": kw.pop("sampling", S)}, shard=shard, seed=3, progress=False, **kw)
    return run_generation(items, engine or StubEngine(MODEL), out, "nothink", request)


def test_vllm_import_is_lazy():
    assert "vllm" not in sys.modules  # importing gpac_utils.llm.generation did not import vllm


def test_sampling_defaults_of_the_pairs():
    s = pair_samplings(gen.pair_models("qwen"), max_tokens=50, n_verbalized=3, verbalized_max_tokens=7)
    assert (s["think"].temperature, s["think"].top_p, s["think"].top_k, s["think"].max_tokens) == (0.6, 0.95, 20, 50)
    assert (s["nothink"].temperature, s["nothink"].top_p) == (0.7, 0.8)
    assert (s["verbalized"].n, s["verbalized"].max_tokens, s["verbalized"].temperature) == (3, 7, 0.7)
    w = gen.walk_samplings(think_max_tokens=8)
    assert (w["think"].temperature, w["think"].max_tokens, w["verbalized"].n) == (0.0, 8, 3)
    with pytest.raises(ValueError, match="n and max_tokens must be >= 1"):
        gen.walk_samplings(n_verbalized=0)
    assert model_defaults("deepseek-ai/DeepSeek-R1-Distill-Llama-8B")[1] and not model_defaults("my/model")[1]
    assert model_defaults("meta-llama/Llama-3.1-8B-Instruct")[0].top_p == 0.9


def test_split_thinking_cases():
    text = "<think> a b </think> x </think> y z"
    c = Completion(text, [_id(w) for w in text.split()], None, "stop")
    assert split_thinking(c, thinking=True, end_id=7) == ("a b </think> x", "y z", 6, 2)
    with pytest.raises(ValueError, match="end_id"):
        split_thinking(c, thinking=True, end_id=None)
    assert split_thinking(Completion("a b c", [1, 2, 3], None, "length"), thinking=True, end_id=7)[1:] == ("", 3, 0)
    assert split_thinking(Completion("a b c", [1, 2, 3], None, "stop"), thinking=True)[1:] == ("a b c", 0, 3)
    assert split_thinking(Completion("x </think> y", [1, 7, 2], None, "stop"), thinking=False)[1] == "x </think> y"


def test_parse_shard():
    assert parse_shard("1/4") == (1, 4) and parse_shard(None) == (0, 1) and parse_shard((2, 3)) == (2, 3)
    for bad in ("4/4", "-1/2", "x", "1/0"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)


def test_item_seed_is_stable():
    assert item_seed(0, "a") == item_seed(0, "a") != item_seed(1, "a")
    assert item_seed(0, "it01") == 635840566  # the seeds of every committed record depend on this
    assert 0 <= item_seed(5, "x") < 2**31


def test_resume_after_a_failure_matches_an_uninterrupted_run(tmp_path):
    clean, broken = tmp_path / "clean", tmp_path / "broken"
    for i in range(2):
        _run(clean, (i, 2))
    with pytest.raises(RuntimeError, match="injected"):  # shard 0 dies after 2 of its 6 items
        _run(broken, "0/2", StubEngine(MODEL, fail_after=2))
    _run(broken, "1/2")
    with pytest.raises(ValueError, match="not generated yet"):
        load_generations(broken, "nothink", _items()["item_id"])
    again = StubEngine(MODEL)
    rep = _run(broken, "0/2", again)
    assert rep["done_before"] == 2 and rep["generated"] == 4
    assert again.seen == [m[0]["content"] for m in _items()["messages"].iloc[0::2].iloc[2:]]
    a, b = (load_generations(f, "nothink", _items()["item_id"]) for f in (clean, broken))
    assert list(b["item_id"]) == list(_items()["item_id"])
    pd.testing.assert_frame_equal(a, b)
    assert _run(broken, "0/2")["generated"] == 0  # a second restart does nothing
    facts = load_run_facts(broken, "nothink")
    assert [f["status"][:6] for f in facts] == ["failed", "done", "done", "done"]
    assert facts[0]["generated"] == 2 and facts[0]["versions"]["python"] and facts[0]["gpu"]["count"] == 0
    with pytest.raises(ValueError, match="other settings"):
        _run(broken, "0/2", sampling=S.with_(temperature=0.1))


def test_a_torn_last_line_is_dropped_and_regenerated(tmp_path):
    with pytest.raises(RuntimeError):
        _run(tmp_path, "0/1", StubEngine(MODEL, fail_after=3))
    path = tmp_path / "nothink" / "shard-00-of-01.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[0][:20])  # killed in the middle of a write
    with pytest.raises(ValueError, match="not generated yet"):
        load_generations(tmp_path, "nothink", _items()["item_id"])
    assert _run(tmp_path)["generated"] == 8
    assert len(load_generations(tmp_path, "nothink", _items()["item_id"])) == 11


def test_per_item_sampling_overrides(tmp_path):
    long = {"it01": {"max_tokens": 9}}
    _run(tmp_path, items=_items(4), sampling=S.with_(ignore_eos=True), sampling_overrides=long)
    df = load_generations(tmp_path, "nothink").set_index("item_id")
    assert df.loc["it01", "n_tokens"] == 9 and (df.drop(index="it01")["n_tokens"] == 64).all()
    assert json.loads((tmp_path / "nothink" / "manifest.json").read_text())["sampling_overrides"] == long


def test_bad_items_are_named():
    with pytest.raises(ValueError, match="duplicate item_id"):
        _run(Path("/nonexistent"), items=pd.concat([_items(2), _items(2)]))
    with pytest.raises(ValueError, match="'messages'"):
        _run(Path("/nonexistent"), items=_items(2).drop(columns="messages"))


def test_pipeline_generate_then_score(tmp_path, monkeypatch):
    """A thinking pair on the MATH fixture in two shards, then grading, three scores and the table."""
    from gpac_utils.llm.scoring import score_run

    monkeypatch.setattr(gen, "make_engine", lambda backend, model, **kw: StubEngine(model))
    items = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    FAKE_GOLD.update(zip(items["question"], items["gold"]))
    models = gen.pair_models("qwen")
    for shard in ("0/2", "1/2"):
        request = GenerationRequest(backend="vllm", samplings=pair_samplings(models, 64), shard=shard, progress=False)
        generate(items, models, tmp_path, request)
    verbal = load_generations(tmp_path, "verbalized", items["item_id"])
    assert (verbal.groupby("item_id").size() == 10).all()
    res = score_run(tmp_path, "math500", router_folds=2)
    t = res.table
    assert list(t["item_id"]) == list(items["item_id"])
    assert list(t.columns) == [data.ID, data.GROUP, data.LOSS, *data.CORRECTNESS, *data.TOKENS, *data.PAPER_SCORES]
    data.validate(t, require_group=True, require_tokens=True, score_cols=data.PAPER_SCORES)
    np.testing.assert_array_equal(t["loss"], data.binary_loss(t["think_correct"], t["nothink_correct"]))
    think = load_generations(tmp_path, "think", items["item_id"])
    assert (think["reasoning_tokens"] > 0).all() and not think["answer"].str.contains("</think>").any()
    assert (t["think_correct"].to_numpy() == (~think["answer"].str.contains("12345")).to_numpy()).all()
    unparsable = (verbal["answer"] == "I cannot say").sum()
    assert int(res.reports["score_verbalized"].n_unparsable.sum()) == unparsable
    assert f"{unparsable} of {len(verbal)} replies unparsable" in res.reports["score_verbalized"].summary()


def test_a_role_without_its_prompt_is_refused_before_a_model_loads(tmp_path):
    """No silent fallback to another role's prompt: a role without its messages_<role> column is refused."""
    bare = Role("bare", "nothink", "a role with no prompt of its own", n_samples=2)
    engine = StubEngine(MODEL)
    with ROLES.registered(bare):
        request = GenerationRequest(samplings={"bare": bare.sampling(S)}, progress=False)
        with pytest.raises(DataError, match=r"items: role 'bare' is sent its prompt from the 'messages_bare' column"):
            generate(_items(), {"think": MODEL, "nothink": MODEL}, tmp_path, request, engine=engine)
        assert not engine.seen and not (tmp_path / "items.parquet").exists()
        items = _items().assign(
            group="g", question=lambda d: d["item_id"], prompt="", gold="1"
        )  # what save_items keeps
        items["messages_bare"] = [[{"role": "user", "content": "bare"}]] * len(items)
        generate(items, {"think": MODEL, "nothink": MODEL}, tmp_path, request, engine=engine)
    assert set(engine.seen) == {"bare"}  # its own prompt, twice per item (n_samples)
    assert (load_generations(tmp_path, "bare").groupby("item_id").size() == 2).all()


def test_generate_shuts_down_each_engine_it_builds_and_never_a_given_one(tmp_path, monkeypatch):
    built = []

    def make(backend, model, **kw):
        assert all(e.closed for e in built), "the previous model is shut down before the next one loads"
        built.append(StubEngine(model, fail_after=1 if tmp_path.joinpath("fail").exists() else None))
        return built[-1]

    monkeypatch.setattr(gen, "make_engine", make)
    items = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    FAKE_GOLD.update(zip(items["question"], items["gold"]))
    models = gen.pair_models("qwen")
    request = GenerationRequest(
        backend="vllm", samplings=pair_samplings(models, 64), roles=("think", "nothink"), progress=False
    )
    generate(items, models, tmp_path / "a", request)
    assert [e.model for e in built] == [models["think"], models["nothink"]] and all(e.closed for e in built)
    tmp_path.joinpath("fail").touch()  # a failing role still shuts its engine down
    with pytest.raises(RuntimeError, match="injected"):
        generate(items, models, tmp_path / "b", request)
    assert len(built) == 3 and built[-1].closed
    given = StubEngine(models["nothink"])  # the caller's engine: the caller closes it
    same = {"think": models["nothink"], "nothink": models["nothink"]}
    generate(items, same, tmp_path / "c", replace(request, samplings=pair_samplings(same, 64)), engine=given)
    assert given.seen and not given.closed and len(built) == 3


def test_vllm_engine_close_shuts_its_engine_core_down_once():
    from gpac_utils.llm.engines import VLLMEngine

    calls = []
    engine = object.__new__(VLLMEngine)  # no vllm here: the engine-core client vLLM 0.32 gives LLM.llm_engine
    engine.llm = types.SimpleNamespace(
        llm_engine=types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=lambda: calls.append(1)))
    )
    with engine as same:
        assert same is engine and not calls
    engine.close()
    assert calls == [1] and engine.llm is None


def test_cli_rejects_bad_options_in_one_line():
    cases = (["--shard", "3/2"], "shard"), (["--engine-arg", "x"], "KEY=VALUE"), (["--pair", "x"], "pair")
    for args, msg in (*cases, (["--windows", "nothink=3"], "windows")):
        p = subprocess.run(
            [sys.executable, "-m", "gpac_utils.llm.generation", "--benchmark", "math500", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert p.returncode == 2 and msg in p.stderr.splitlines()[-1], p.stderr


@pytest.mark.notebook
@pytest.mark.slow
def test_02_scores_notebook_scores_a_generation_run(tmp_path, monkeypatch):
    """02_scores in generation mode on a stub-engine run (papermill, fast profile)."""
    jupytext = pytest.importorskip("jupytext")
    papermill = pytest.importorskip("papermill")
    monkeypatch.setattr(gen, "make_engine", lambda backend, model, **kw: StubEngine(model))
    items = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    FAKE_GOLD.update(zip(items["question"], items["gold"]))
    runs = tmp_path / "generations"
    models = gen.pair_models("qwen")
    request = GenerationRequest(backend="vllm", samplings=pair_samplings(models, 64), progress=False)
    generate(items, models, runs / "math500__qwen", request)
    nb = jupytext.read(ROOT / "notebooks" / "02_scores.py")
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


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(n_samples="2"), "n_samples: must be an integer >= 1"),
        (dict(n_samples=0), "n_samples: must be an integer >= 1"),
        (dict(messages="messages"), "messages: a tuple of column names"),
    ],
)
def test_a_role_refuses_a_wrong_declaration_naming_it(kw, message):
    with pytest.raises(ParameterError, match=message):
        Role("bare", "nothink", "a role", **kw)
