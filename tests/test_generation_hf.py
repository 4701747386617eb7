"""transformers backend end to end on CPU with a tiny random causal LM and tokenizer built here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gpac_utils.llm.engines import Sampling, TransformersEngine, prompt_ids  # noqa: E402
from gpac_utils.llm.generation import GenerationRequest, run_generation  # noqa: E402
from gpac_utils.llm.records import load_generations  # noqa: E402

WORDS = ["the", "answer", "is", "two", "three", "step", "so", "boxed", "yes", "no", "what", "plus", "one"]
SPECIAL = ["<pad>", "<eos>", "<unk>", "</think>"]
TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS + ["user:", "assistant:", "user", "assistant", ":"])}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.chat_template = TEMPLATE
    folder = tmp_path_factory.mktemp("tiny_lm")
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(vocab),
        n_positions=128,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=1,
        eos_token_id=1,
        pad_token_id=0,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def generate(engine, conversations, samplings):
    """One list of completions per conversation, in input order, from the engine's stream."""
    return [comps for _, comps in engine.stream(zip(range(len(samplings)), conversations, samplings))]


CONV = [{"role": "user", "content": "what is one plus one"}]


def test_raw_logprobs_match_teacher_forcing(tiny):
    eng = TransformersEngine(str(tiny), device="cpu")
    [comps] = generate(eng, [CONV], [Sampling(temperature=1.0, top_p=0.9, top_k=5, max_tokens=12, n=2, seed=4)])
    assert len(comps) == 2
    prompt = torch.tensor(prompt_ids(eng.tokenizer, CONV))
    for c in comps:
        assert 0 < len(c.token_ids) <= 12 and len(c.token_logprobs) == len(c.token_ids)
        assert c.finish_reason in ("stop", "length")
        assert (c.finish_reason == "stop") == (c.token_ids[-1] == 1)
        ids = torch.cat([prompt, torch.tensor(c.token_ids)]).unsqueeze(0)
        with torch.no_grad():
            logits = eng.hf_model(ids).logits[0, len(prompt) - 1 : -1]
        ref = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
        np.testing.assert_allclose(c.token_logprobs, ref.numpy(), atol=1e-4)
        assert c.text == eng.tokenizer.decode(c.token_ids, skip_special_tokens=True)


def test_processed_logprobs_and_seed(tiny):
    raw = TransformersEngine(str(tiny), device="cpu")
    proc = TransformersEngine(str(tiny), device="cpu", logprobs_mode="processed_logprobs")
    s = Sampling(temperature=0.7, top_p=1.0, top_k=3, max_tokens=10, seed=9)
    a, b = generate(raw, [CONV], [s])[0][0], generate(proc, [CONV], [s])[0][0]
    assert a.token_ids == b.token_ids  # same seed, same sample
    # independent reference: logits / T, keep the top 3, renormalise, take the sampled token
    prompt = torch.tensor(prompt_ids(raw.tokenizer, CONV))
    ids = torch.cat([prompt, torch.tensor(a.token_ids)]).unsqueeze(0)
    with torch.no_grad():
        logits = raw.hf_model(ids).logits[0, len(prompt) - 1 : -1].float() / 0.7
    kth = logits.topk(3, dim=-1).values[:, -1:]
    ref = torch.log_softmax(logits.masked_fill(logits < kth, float("-inf")), -1)
    ref = ref.gather(-1, torch.tensor(a.token_ids)[:, None])[:, 0]
    np.testing.assert_allclose(b.token_logprobs, ref.numpy(), atol=1e-4)
    assert np.all(np.array(b.token_logprobs) > np.array(a.token_logprobs))


def test_transformers_runner_end_to_end(tiny, tmp_path):
    eng = TransformersEngine(str(tiny), device="cpu", batch_size=2)
    items = pd.DataFrame({"item_id": ["a", "b", "c"], "messages": [CONV, CONV, [{"role": "user", "content": "yes"}]]})
    s = Sampling(temperature=1.0, max_tokens=8)
    request = GenerationRequest(samplings={"think": s}, progress=False)
    run_generation(items, eng, tmp_path, "think", request, thinking=True)
    g = load_generations(tmp_path, "think", items["item_id"])
    assert list(g["item_id"]) == ["a", "b", "c"] and (g["backend"] == "transformers").all()
    assert ((g["reasoning_tokens"] + g["answer_tokens"]) == g["n_tokens"]).all()
    assert (g["n_tokens"] == g["token_logprobs"].map(len)).all()
    for row in g.itertuples():
        if "</think>" in row.text:
            assert "</think>" not in row.answer
    # per-item seeds: regenerating one item alone gives the same text as in the batch
    alone = tmp_path / "alone"
    run_generation(items.iloc[[1]], eng, alone, "think", request, thinking=True)
    assert load_generations(alone, "think")["text"].iloc[0] == g["text"].iloc[1]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batched_equals_one_at_a_time(tiny, temperature):
    """Left padding, per-row generators: a request's record does not depend on its batch."""
    eng = TransformersEngine(str(tiny), device="cpu")
    convs = [CONV, [{"role": "user", "content": "yes"}], [{"role": "user", "content": "what is two plus three so"}]]
    ss = [Sampling(temperature=temperature, top_k=5, max_tokens=9, n=2, seed=k) for k in range(3)]
    batch = generate(eng, convs, ss)
    for c, s, b in zip(convs, ss, batch):
        [alone] = generate(eng, [c], [s])
        assert [x.token_ids for x in alone] == [x.token_ids for x in b]
        for x, y in zip(alone, b):
            np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=1e-4)
    capped = TransformersEngine(str(tiny), device="cpu", batch_size=2)  # one request per generate call
    assert [[x.token_ids for x in r] for r in generate(capped, convs, ss)] == [[x.token_ids for x in r] for r in batch]


def test_bad_arguments(tiny):
    with pytest.raises(ValueError, match="batch_size"):
        TransformersEngine(str(tiny), device="cpu", batch_size=0)
    with pytest.raises(ValueError, match="logprobs_mode"):
        TransformersEngine(str(tiny), device="cpu", logprobs_mode="raw")
