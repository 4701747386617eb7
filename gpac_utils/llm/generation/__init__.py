"""Generation with a thinking and a non-thinking LLM: one engine interface, two backends.

* :class:`~gpac_utils.llm.generation.vllm_backend.VLLMEngine` (GPU; ``vllm`` imported lazily);
* :class:`~gpac_utils.llm.generation.hf_backend.TransformersEngine` (CPU or GPU, any local model path).

Both return :class:`Completion` records (text, token ids, sampled tokens' logprobs, finish reason);
the runner splits reasoning from answer at the last ``</think>``, counts both, and writes resumable,
sharded parquet parts (:mod:`.runner`). Command line, one process per GPU::

    CUDA_VISIBLE_DEVICES=0 python -m gpac_utils.llm.generation --benchmark math500 --pair qwen --shard 0/4 &
    CUDA_VISIBLE_DEVICES=1 python -m gpac_utils.llm.generation --benchmark math500 --pair qwen --shard 1/4 &
    ...

Models too large for one GPU: ``--tensor-parallel-size k``; across nodes: a Ray cluster and
``--distributed-executor-backend ray`` (vLLM's own mechanisms).
"""

from .base import (
    END_THINK,
    LOGPROBS_MODES,
    MODEL_PAIRS,
    SAMPLING_DEFAULTS,
    Completion,
    Engine,
    Sampling,
    Split,
    default_sampling,
    is_thinking_model,
    item_seed,
    model_family,
    split_thinking,
)
from .pipeline import (
    BACKENDS,
    GENERATED,
    GENERATIONS,
    PRESETS,
    generate,
    load_items,
    make_engine,
    pair_models,
    resolve_backend,
    run_dir,
    save_items,
    vllm_available,
)
from .runner import RECORD_COLUMNS, ROLES, load_generations, parse_shard, run_generation, shard_items

__all__ = [
    "END_THINK",
    "LOGPROBS_MODES",
    "MODEL_PAIRS",
    "SAMPLING_DEFAULTS",
    "Completion",
    "Engine",
    "Sampling",
    "Split",
    "default_sampling",
    "is_thinking_model",
    "item_seed",
    "model_family",
    "split_thinking",
    "BACKENDS",
    "GENERATED",
    "GENERATIONS",
    "PRESETS",
    "generate",
    "load_items",
    "make_engine",
    "pair_models",
    "resolve_backend",
    "run_dir",
    "save_items",
    "vllm_available",
    "RECORD_COLUMNS",
    "ROLES",
    "load_generations",
    "parse_shard",
    "run_generation",
    "shard_items",
]
