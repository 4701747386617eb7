# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 — Generate answers with a thinking and a non-thinking LLM
#
# **Reproduces** the model outputs behind every table of Sec. 5 (Sec. 5.1 and App. E: Qwen3-4B
# Thinking-2507 / Instruct-2507 and DeepSeek-R1-Distill-Llama-8B / Llama-3.1-8B-Instruct on
# MATH-500, GPQA, ZebraLogic and Arena-Hard): for every item the thinking model's answer, the
# non-thinking model's answer with its token logprobs, and 10 verbalized confidences.
#
# **Reads** a benchmark file `data/benchmarks/<benchmark>.{jsonl,parquet,csv}` (see
# `gpac_utils.llm.benchmarks` for the columns) and the model weights (Hugging Face ids or local folders).
#
# **Writes** `data/generations/<benchmark>__<pair>/{items.parquet, think/, nothink/, verbalized/}`:
# resumable sharded parquet parts (rerun after an interruption: finished items are skipped).
# `02_scores` turns them into the per-item table.
#
# **Backends**: `vllm` (GPU; `pip install -e .[gpu]`), `transformers` (CPU or GPU, local model
# folders), or `auto`: vLLM when installed with a GPU, transformers when both models are local
# folders, and otherwise **validate-embedded-tables mode**: nothing is generated, the embedded
# per-item tables under `data/simulated/` are validated instead (this is what `make reproduce`
# does on a machine without a GPU).
#
# **Scaling**: one process per GPU with `shard="i/n"` (or `python -m gpac_utils.llm.generation --shard i/n`);
# `tensor_parallel_size=k` for a model that needs k GPUs; several nodes: a Ray cluster and
# `distributed_executor_backend="ray"` (vLLM's own mechanisms).
#
# **Runtime**: validate mode a few seconds (both profiles). Generation, paper profile: hours per
# benchmark and pair on one GPU (thinking answers up to 32k tokens); `fast`: 8 items, 256 tokens.

# %%
from gpac_utils import data
from gpac_utils.llm import generation as gen
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.scoring import embedded_tables
from gpac_utils.workflow import config as profiles

# %% tags=["parameters"]
profile = "paper"
benchmark = None  # math500 | gpqa | zebralogic | arena_hard
pair = None  # qwen | llama (see gpac_utils.llm.generation.MODEL_PAIRS)
backend = None  # auto | vllm | transformers
n_items = None  # None: all items; else a seeded subset
max_tokens = None  # None: per-family defaults (32768 thinking, 16384 Qwen instruct)
tensor_parallel_size = None
shard = None  # "i/n": this process generates every n-th item from item i
think_model = None  # override the pair's thinking model (HF id or local folder)
nothink_model = None  # override the pair's non-thinking model
data_path = None  # a benchmark file; None: data/benchmarks/<benchmark>.*
seed = 0

# %%
cfg = profiles.resolve(profile, gen.PRESETS, benchmark=benchmark, pair=pair, backend=backend, n_items=n_items,
                       max_tokens=max_tokens, tensor_parallel_size=tensor_parallel_size, shard=shard)
models = gen.pair_models(cfg["pair"], think_model, nothink_model)
mode = gen.resolve_backend(cfg["backend"], models)
print(f"models: {models}\nbackend requested: {cfg['backend']!r} -> {mode!r}")

# %% [markdown]
# ## Mode
# Without a GPU running vLLM and without local model folders there is nothing to generate with:
# the notebook then validates the embedded tables against the data schema and stops there.

# %%
if mode == "validate":
    print("MODE: validate embedded tables -- no GPU with vLLM and no local model folders, so nothing is "
          "generated on this machine. Validating data/simulated/*.parquet against the data schema instead.")
    paths = embedded_tables()
    if not paths:
        print("No embedded tables found under data/simulated/ (run `python -m gpac_utils.paper.simulate`).")
    for p in paths:
        is_semantic = p.name.startswith("arena_hard")
        t = data.read_table(p, require_tokens=True, score_cols=data.PAPER_SCORES, require_group=not is_semantic)
        print(f"  {p.name:28s} {len(t):5d} rows  OK  (loss {'semantic' if is_semantic else 'binary'}, "
              f"mean {t['loss'].mean():.3f})")
else:
    print(f"MODE: generate with {mode}")

# %% [markdown]
# ## Generate (GPU or local models only)
# Items are loaded from the local benchmark file; the thinking model, then the non-thinking model,
# then the non-thinking model's 10 verbalized confidences (paper prompt, App. E) are generated for
# this shard. A progress bar counts finished items; rerunning resumes.

# %%
if mode != "validate":
    items = load_benchmark(cfg["benchmark"], data_path, n_items=cfg["n_items"], seed=seed)
    folder = gen.run_dir(cfg["benchmark"], cfg["pair"])
    report = gen.generate(items, models, folder, backend=mode, shard=cfg["shard"], seed=seed,
                          max_tokens=cfg["max_tokens"], batch_size=cfg["batch_size"],
                          n_verbalized=cfg["n_verbalized"], verbalized_max_tokens=cfg["verbalized_max_tokens"],
                          tensor_parallel_size=cfg["tensor_parallel_size"])
    print(report)
    think = gen.load_generations(folder, "think")
    print(think[["item_id", "n_tokens", "reasoning_tokens", "answer_tokens", "finish_reason"]].describe())
