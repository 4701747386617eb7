"""Generation with a thinking and a non-thinking LLM: one engine interface, three backends.

* :class:`~gpac_utils.llm.generation.vllm_backend.VLLMEngine` (GPU; ``vllm`` imported lazily):
  continuous batching through vLLM's step API (``LLMEngine.add_request`` + ``step``), the whole
  shard in flight, each completion written the moment it finishes;
* :class:`~gpac_utils.llm.generation.hf_backend.TransformersEngine` (CPU or GPU, any local model
  path): the batch API ``generate(conversations, samplings)``, run in synchronous chunks;
* ``fake`` (:mod:`.fake`): a continuous-batching model in simulated time for tests and the CPU
  benchmark.

All return :class:`Completion` records (text, token ids, sampled tokens' logprobs, finish reason);
the runner splits reasoning from answer at the last ``</think>``, counts both, and writes
resumable, sharded parquet parts plus a per-item journal (:mod:`.runner`): a killed run resumes
where it stopped and loses at most the requests in flight. Seeds are per item
(:func:`item_seed`), so records do not depend on scheduling, sharding or restarts.

Scale-out (vLLM's own mechanisms, nothing re-invented):

* **one process per GPU** -- shards split the items round-robin; the launcher starts one shard
  per visible GPU, waits, and merges (``<out>/merged/<role>.parquet``, ``<out>/report.json``)::

      python -m gpac_utils.llm.generation.launcher --gpus 0,1,2,3 -- --benchmark math500 --pair qwen

  or by hand: ``CUDA_VISIBLE_DEVICES=i python -m gpac_utils.llm.generation ... --shard i/4``;
* **tensor parallelism inside a node** (a model too large for one GPU):
  ``--tensor-parallel-size k`` (the launcher then gives each shard ``k`` GPUs);
* **across nodes**: a Ray cluster (``ray start --head`` on one node, ``ray start --address=HEAD:6379``
  on the others), then one process with ``--distributed-executor-backend ray`` and
  ``--tensor-parallel-size`` (and ``--engine-arg pipeline_parallel_size=p``) spanning the GPUs;
* **vLLM data parallelism**: ``--engine-arg data_parallel_size=d`` runs ``d`` engine replicas
  behind one process (useful for MoE models with expert parallelism); for dense models one
  shard per GPU is simpler and equally fast.
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
    StreamingEngine,
    default_sampling,
    is_thinking_model,
    item_seed,
    iter_completions,
    model_family,
    split_thinking,
)
from .pipeline import (
    BACKENDS,
    GENERATED,
    GENERATIONS,
    generate,
    load_items,
    make_engine,
    pair_models,
    resolve_backend,
    run_dir,
    save_items,
    vllm_available,
)
from .runner import (
    RECORD_COLUMNS,
    ROLES,
    gpu_info,
    library_versions,
    load_generations,
    load_run_facts,
    parse_shard,
    run_generation,
    shard_items,
)

__all__ = [
    "END_THINK",
    "LOGPROBS_MODES",
    "MODEL_PAIRS",
    "SAMPLING_DEFAULTS",
    "Completion",
    "Engine",
    "Sampling",
    "Split",
    "StreamingEngine",
    "default_sampling",
    "is_thinking_model",
    "item_seed",
    "iter_completions",
    "model_family",
    "split_thinking",
    "BACKENDS",
    "GENERATED",
    "GENERATIONS",
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
    "gpu_info",
    "library_versions",
    "load_generations",
    "load_run_facts",
    "parse_shard",
    "run_generation",
    "shard_items",
]
