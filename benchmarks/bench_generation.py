"""Throughput of the project's generation against the engine alone, on long-tailed outputs.

Requests: ``--n`` prompts (2048) whose ``max_tokens`` are lognormal (median 404, capped at 6000),
generated with ``ignore_eos`` so every request writes exactly its ``max_tokens`` -- the length
profile of thinking traces, where a batch barrier hurts most.

* **GPU with vLLM** (``--model PATH``; default when vLLM and CUDA are present): one bare
  ``LLM.chat`` call on all requests, then :func:`~gpac_utils.llm.generation.run_generation` on the
  same ``LLM`` (continuous batching + per-item journal). Prints
  ``throughput_vs_bare_vllm=<bare seconds / project seconds>`` (goal: >= 0.95), and the old
  chunked path's ratio with ``--chunked``.
* **CPU** (``--fake``; default otherwise): the same comparison against
  :class:`~gpac_utils.llm.generation.fake.FakeLLM`, a continuous-batching model in simulated time
  (``--slots`` sequences at once, ``--step-ms`` per decoding step; the runner's own host time
  between steps is counted). Prints ``throughput_vs_ideal_fake=<ratio>`` for the streaming path
  and ``chunked_throughput_vs_ideal_fake=<ratio>`` for synchronous chunks of ``--batch-size``
  (the barrier the streaming path removes). Takes seconds.

Usage::

    python benchmarks/bench_generation.py                       # CPU, fake engine
    python benchmarks/bench_generation.py --model /path/to/SmolLM2-135M-Instruct --chunked   # GPU
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpac_utils.llm.generation import Sampling, item_seed, run_generation  # noqa: E402
from gpac_utils.llm.generation.vllm_backend import VLLMEngine  # noqa: E402


def long_tailed_requests(n: int = 2048, median: float = 404.0, sigma: float = 0.8, cap: int = 6000, seed: int = 0):
    """``(items, overrides)``: ``n`` chat prompts and lognormal per-item ``max_tokens``."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(median), sigma, n)), 1, cap).astype(int)
    items = pd.DataFrame(
        {
            "item_id": [f"r{k:05d}" for k in range(n)],
            "messages": [[{"role": "user", "content": f"Write a long story, number {k}."}] for k in range(n)],
        }
    )
    overrides = {iid: {"max_tokens": int(m)} for iid, m in zip(items["item_id"], lengths)}
    return items, overrides


SAMPLING = Sampling(temperature=0.8, top_p=0.95, top_k=-1, max_tokens=6000, ignore_eos=True)


def bare_chat(engine: VLLMEngine, items: pd.DataFrame, overrides: dict, seed: int = 0) -> float:
    """Seconds of one ``LLM.chat`` call on every request, with the project's own SamplingParams."""
    params = [engine._params(SAMPLING.with_(seed=item_seed(seed, iid), **overrides[iid])) for iid in items["item_id"]]
    t = time.perf_counter()
    engine.llm.chat(list(items["messages"]), params, use_tqdm=False)
    return time.perf_counter() - t


def run_project(engine: VLLMEngine, items, overrides, *, stream: bool, batch_size: int, clock=None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter() if clock is None else clock()
        rep = run_generation(
            items,
            engine,
            tmp,
            role="nothink",
            sampling=SAMPLING,
            thinking=False,
            stream=stream,
            batch_size=batch_size,
            progress=False,
            sampling_overrides=overrides,
        )
        assert rep["generated"] == len(items)
        return (time.perf_counter() if clock is None else clock()) - t


def main_fake(a) -> None:
    from gpac_utils.llm.generation.fake import FakeLLM, FakeSamplingParams

    items, overrides = long_tailed_requests(a.n)
    tokens = sum(v["max_tokens"] for v in overrides.values())

    def engine():
        llm = FakeLLM(
            "fake-model",
            slots=a.slots,
            step_time=a.step_ms / 1000.0,
            token_time=a.token_ms / 1000.0,
            alternatives=False,
        )
        return VLLMEngine("fake-model", llm=llm, sampling_params_cls=FakeSamplingParams)

    w0 = time.perf_counter()
    e = engine()
    bare_chat(e, items, overrides)
    ideal = e.llm.llm_engine.clock
    e = engine()
    stream = run_project(
        e, items, overrides, stream=True, batch_size=a.batch_size, clock=lambda: e.llm.llm_engine.clock
    )
    e2 = engine()
    chunked = run_project(
        e2, items, overrides, stream=False, batch_size=a.batch_size, clock=lambda: e2.llm.llm_engine.clock
    )
    print(
        f"fake engine: {a.n} requests, {tokens} tokens, {a.slots} slots, {a.step_ms} ms/step + {a.token_ms} ms "
        "per sequence (simulated): "
        f"ideal {ideal:.1f} s, streaming {stream:.1f} s, chunks of {a.batch_size} {chunked:.1f} s "
        f"[benchmark wall {time.perf_counter() - w0:.1f} s]",
        file=sys.stderr,
    )
    print(f"throughput_vs_ideal_fake={ideal / stream:.3f}")
    print(f"chunked_throughput_vs_ideal_fake={ideal / chunked:.3f}")


def main_gpu(a) -> None:
    import vllm

    items, overrides = long_tailed_requests(a.n)
    llm = vllm.LLM(model=a.model, seed=0, gpu_memory_utilization=a.gpu_memory_utilization, max_model_len=6000 + 512)
    engine = VLLMEngine(a.model, llm=llm, sampling_params_cls=vllm.SamplingParams)
    bare = bare_chat(engine, items, overrides)
    project = run_project(engine, items, overrides, stream=True, batch_size=a.batch_size)
    print(f"vLLM {vllm.__version__}: bare LLM.chat {bare:.1f} s, project {project:.1f} s", file=sys.stderr)
    print(f"throughput_vs_bare_vllm={bare / project:.3f}")
    if a.chunked:
        chunked = run_project(engine, items, overrides, stream=False, batch_size=a.batch_size)
        print(f"chunked_throughput_vs_bare_vllm={bare / chunked:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2048, help="requests")
    ap.add_argument("--batch-size", type=int, default=256, help="chunk size of the synchronous (old) path")
    ap.add_argument("--fake", action="store_true", help="CPU comparison against the fake engine")
    ap.add_argument("--slots", type=int, default=256, help="fake: concurrent sequences")
    ap.add_argument("--step-ms", type=float, default=8.0, help="fake: simulated milliseconds per decoding step")
    ap.add_argument("--token-ms", type=float, default=0.05, help="fake: extra milliseconds per running sequence")
    ap.add_argument("--model", help="GPU: local model folder for vLLM")
    ap.add_argument("--chunked", action="store_true", help="GPU: also time the chunked path")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    a = ap.parse_args(argv)
    for name in ("n", "batch_size", "slots"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    gpu = not a.fake and importlib.util.find_spec("vllm") is not None
    if gpu:
        import torch

        gpu = torch.cuda.is_available()
    if gpu:
        if not a.model:
            ap.error("--model PATH is needed on a GPU (or pass --fake)")
        main_gpu(a)
    else:
        main_fake(a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
