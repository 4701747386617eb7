"""``python -m gpac_utils.llm.generation``: one shard of one benchmark x model pair (one process per GPU).

The JSON report goes to a file in the run folder (``<out>/report.json``, or
``<out>/reports/shard-ii-of-nn.json`` for one shard of several) and one summary line goes to
stderr; engine logs (vLLM prints to stdout) never mix into it. ``--engine-arg KEY=VALUE``
(repeatable, JSON values) passes extra keywords to the engine, e.g. ``max_num_seqs=512``,
``data_parallel_size=2``, ``enable_prefix_caching=true``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..benchmarks import load_benchmark
from .pipeline import generate, pair_models, resolve_backend, run_dir
from .runner import gpu_info, library_versions, load_run_facts, parse_shard

BENCHMARKS = ["math500", "gpqa", "zebralogic", "arena_hard"]


def _engine_arg(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--engine-arg must look like KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def build_parser() -> argparse.ArgumentParser:
    """The command line (shared with :mod:`.launcher`, which adds ``--shard`` and ``--out`` itself)."""
    ap = argparse.ArgumentParser(prog="python -m gpac_utils.llm.generation", description=__doc__)
    ap.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    ap.add_argument("--pair", default="qwen")
    ap.add_argument("--think-model")
    ap.add_argument("--nothink-model")
    ap.add_argument(
        "--backend", default="auto", choices=["auto", "vllm", "transformers", "fake"], help="fake: tests only"
    )
    ap.add_argument("--roles", default="think,nothink,verbalized")
    ap.add_argument("--n-items", type=int)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--distributed-executor-backend", choices=["ray", "mp"])
    ap.add_argument("--logprobs-mode", default="raw_logprobs", choices=["raw_logprobs", "processed_logprobs"])
    ap.add_argument("--shard", default="0/1", help="i/n: this process handles items k with k mod n == i")
    ap.add_argument("--batch-size", type=int, default=256, help="chunk size for engines that cannot stream")
    ap.add_argument("--window", type=int, help="requests in flight when streaming (default: the whole shard)")
    ap.add_argument("--no-stream", action="store_true", help="synchronous chunks even where the engine streams")
    ap.add_argument("--flush-every", type=int, default=256, help="items per parquet part")
    ap.add_argument("--engine-arg", action="append", type=_engine_arg, default=[], metavar="KEY=VALUE")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="local benchmark file (jsonl/parquet/csv)")
    ap.add_argument("--out", help="run folder (default: data/generations/<benchmark>__<pair>)")
    ap.add_argument("--progress", action="store_true", help="tqdm bars on stderr")
    return ap


def out_dir(a: argparse.Namespace) -> Path:
    return Path(a.out) if a.out else run_dir(a.benchmark, a.pair)


def report_path(out: Path, shard) -> Path:
    i, n = parse_shard(shard)
    return out / "report.json" if n == 1 else out / "reports" / f"shard-{i:02d}-of-{n:02d}.json"


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    for name in ("tensor_parallel_size", "batch_size", "flush_every"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.window is not None and a.window < 1:
        ap.error("--window must be >= 1")
    try:
        parse_shard(a.shard)
    except ValueError as exc:
        ap.error(f"--shard: {exc}")
    models = pair_models(a.pair, a.think_model, a.nothink_model)
    backend = resolve_backend(a.backend, models)
    if backend == "validate":
        ap.error("no GPU with vLLM and no local model folders: nothing to generate on this machine")
    items = load_benchmark(a.benchmark, a.data, n_items=a.n_items, seed=a.seed)
    kw = {"logprobs_mode": a.logprobs_mode, **dict(a.engine_arg)}
    if backend == "vllm" and a.distributed_executor_backend:
        kw["distributed_executor_backend"] = a.distributed_executor_backend
    out = out_dir(a)
    roles = a.roles.split(",")
    t0 = time.perf_counter()
    result = generate(
        items,
        models,
        out,
        backend=backend,
        roles=roles,
        shard=a.shard,
        seed=a.seed,
        max_tokens=a.max_tokens,
        batch_size=a.batch_size,
        tensor_parallel_size=a.tensor_parallel_size,
        engine_kwargs=kw,
        progress=a.progress,
        stream=False if a.no_stream else None,
        window=a.window,
        flush_every=a.flush_every,
    )
    wall = time.perf_counter() - t0
    report = {
        "benchmark": a.benchmark,
        "pair": a.pair,
        "models": models,
        "backend": backend,
        "shard": a.shard,
        "out": str(out),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "wall_s": round(wall, 3),
        "versions": library_versions(),
        "gpu": gpu_info(),
        "roles": {},
    }
    for role in roles:
        manifest = json.loads((out / role / "manifest.json").read_text())
        runs = [f for f in load_run_facts(out, role) if f["shard"] == "/".join(map(str, parse_shard(a.shard)))]
        report["roles"][role] = {**result[role], "settings": manifest, "run": runs[-1] if runs else None}
    path = report_path(out, a.shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    parts = ", ".join(
        f"{r} {v['generated']} new/{v['done_before']} before ({v['tokens_per_s'] or 0:.0f} tok/s)"
        for r, v in report["roles"].items()
    )
    print(
        f"generation {a.benchmark}__{a.pair} shard {a.shard} [{backend}]: {parts}; {wall:.1f} s; report {path}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
