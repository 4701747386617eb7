"""``python -m gpac_utils.llm.generation``: one shard of one benchmark x model pair (one process per GPU)."""

from __future__ import annotations

import argparse
import json

from ..benchmarks import load_benchmark
from .pipeline import generate, pair_models, resolve_backend, run_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--benchmark", required=True, choices=["math500", "gpqa", "zebralogic", "arena_hard"])
    ap.add_argument("--pair", default="qwen")
    ap.add_argument("--think-model")
    ap.add_argument("--nothink-model")
    ap.add_argument("--backend", default="auto", choices=["auto", "vllm", "transformers"])
    ap.add_argument("--roles", default="think,nothink,verbalized")
    ap.add_argument("--n-items", type=int)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--distributed-executor-backend", choices=["ray", "mp"])
    ap.add_argument("--logprobs-mode", default="raw_logprobs", choices=["raw_logprobs", "processed_logprobs"])
    ap.add_argument("--shard", default="0/1", help="i/n: this process handles items k with k mod n == i")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="local benchmark file (jsonl/parquet/csv)")
    a = ap.parse_args(argv)
    models = pair_models(a.pair, a.think_model, a.nothink_model)
    backend = resolve_backend(a.backend, models)
    if backend == "validate":
        ap.error("no GPU with vLLM and no local model folders: nothing to generate on this machine")
    items = load_benchmark(a.benchmark, a.data, n_items=a.n_items, seed=a.seed)
    kw = {"logprobs_mode": a.logprobs_mode}
    if backend == "vllm" and a.distributed_executor_backend:
        kw["distributed_executor_backend"] = a.distributed_executor_backend
    report = generate(
        items,
        models,
        run_dir(a.benchmark, a.pair),
        backend=backend,
        roles=a.roles.split(","),
        shard=a.shard,
        seed=a.seed,
        max_tokens=a.max_tokens,
        batch_size=a.batch_size,
        tensor_parallel_size=a.tensor_parallel_size,
        engine_kwargs=kw,
    )
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
