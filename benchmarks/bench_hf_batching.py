"""Batched vs one-at-a-time transformers generation with the tiny model on CPU (same items, one run).

Prints ``hf_batch1_s``, ``hf_batch16_s`` and ``hf_batch16_speedup=<ratio>``; also checks that the
greedy token ids agree between the two runs. Usage::

    python benchmarks/bench_hf_batching.py [--items 16] [--max-tokens 32] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def generate(engine, conversations, samplings):
    """One list of completions per conversation, in input order, from the engine's stream."""
    return [comps for _, comps in engine.stream(zip(range(len(samplings)), conversations, samplings))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.0)
    a = ap.parse_args(argv)
    import torch

    from gpac_utils.llm.benchmarks import load_benchmark
    from gpac_utils.llm.engines import Sampling, TransformersEngine, item_seed

    torch.set_num_threads(a.threads)
    items = load_benchmark("walk").iloc[: a.items]
    eng = TransformersEngine("smollm2-135m", device="cpu")
    convs = list(items["messages_nothink"])
    s = Sampling(temperature=a.temperature, max_tokens=a.max_tokens)
    samplings = [s.with_(seed=item_seed(0, i)) for i in items["item_id"]]
    generate(eng, convs[:2], samplings[:2])  # warm-up
    t = time.perf_counter()
    one = [generate(eng, [c], [x])[0] for c, x in zip(convs, samplings)]
    t1 = time.perf_counter() - t
    t = time.perf_counter()
    many = generate(eng, convs, samplings)
    t16 = time.perf_counter() - t
    same = sum(a[0].token_ids == b[0].token_ids for a, b in zip(one, many))
    tokens = sum(len(c[0].token_ids) for c in many)
    print(f"items={len(convs)} max_tokens={a.max_tokens} threads={a.threads} tokens={tokens}")
    print(f"hf_batch1_s={t1:.2f} hf_batch16_s={t16:.2f}")
    print(f"hf_batch16_speedup={t1 / t16:.2f}")
    print(f"identical_token_ids={same}/{len(convs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
