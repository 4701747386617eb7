"""From a benchmark and a model pair to generation records on disk (used by 01_generate and the CLI)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ...workflow.paths import DATA
from .. import tiny
from .base import MODEL_PAIRS, Sampling, default_sampling, is_thinking_model
from .runner import load_generations, run_generation, shard_items

GENERATIONS = DATA / "generations"
GENERATED = DATA / "generated"
#: ``fake``: :class:`~.fake.FakeLLM` behind the vLLM backend (tests, launcher checks, CPU benchmark)
BACKENDS = ("auto", "vllm", "transformers", "validate", "fake")


def run_dir(benchmark: str, pair: str, root: Path | None = None) -> Path:
    return Path(root or GENERATIONS) / f"{benchmark}__{pair}"


def pair_models(pair: str, think_model: str | None = None, nothink_model: str | None = None) -> dict[str, str]:
    if pair not in MODEL_PAIRS and not (think_model and nothink_model):
        raise ValueError(f"unknown model pair {pair!r}; choose {sorted(MODEL_PAIRS)} or give both model paths")
    base = dict(MODEL_PAIRS.get(pair, {}))
    if think_model:
        base["think"] = think_model
    if nothink_model:
        base["nothink"] = nothink_model
    return base


def vllm_available() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def resolve_backend(backend: str, models: dict[str, str]) -> str:
    """``auto``: vLLM when it is installed and a GPU is visible; else transformers when both models
    are local folders or packaged tiny models (:mod:`gpac_utils.llm.tiny`); else ``validate`` (no
    generation: validate the embedded tables instead)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    if vllm_available():
        return "vllm"
    if all(Path(m).is_dir() or tiny.is_tiny(m) for m in models.values()):
        return "transformers"
    return "validate"


def make_engine(
    backend: str, model: str, *, seed: int = 0, tensor_parallel_size: int = 1, max_model_len: int | None = None, **kw
):
    """An engine for ``backend`` (``vllm``, ``transformers`` or ``fake``); ``kw`` go to its constructor.

    For ``fake``, ``logprobs_mode`` goes to the vLLM backend and the other keywords to
    :class:`~.fake.FakeLLM` (``slots``, ``step_time``, ``fail_after``, ``kill_after``, ...).
    """
    if backend == "fake":
        from .fake import FakeLLM, FakeSamplingParams
        from .vllm_backend import VLLMEngine

        mode = kw.pop("logprobs_mode", "raw_logprobs")
        kw.pop("distributed_executor_backend", None)
        engine = VLLMEngine(model, llm=FakeLLM(model, **kw), sampling_params_cls=FakeSamplingParams, logprobs_mode=mode)
        engine.backend = "fake"  # recorded as such: never mistaken for real generations
        return engine
    if backend == "vllm":
        from .vllm_backend import VLLMEngine

        if tiny.is_tiny(model):  # vLLM reads a plain transformers folder: convert the packaged file once
            model = str(tiny.model_dir(model))
        return VLLMEngine(
            model, seed=seed, tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len, **kw
        )
    if backend == "transformers":
        from .hf_backend import TransformersEngine

        return TransformersEngine(model, **kw)
    raise ValueError(f"backend must be one of vllm, transformers, fake to build an engine, got {backend!r}")


def save_items(items: pd.DataFrame, folder: Path) -> Path:
    """Keep the benchmark items beside the generations (02_scores needs no benchmark file)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "items.parquet"
    keep = items[["item_id", "group", "question", "prompt", "gold"]].copy()
    keep["messages"] = [json.dumps(m) for m in items["messages"]]
    if path.exists():
        old = pd.read_parquet(path)
        if old["item_id"].tolist() != keep["item_id"].tolist():
            raise ValueError(f"{path} holds other items (another n_items or seed?): use another folder")
        return path
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    keep.to_parquet(tmp, index=False)
    os.replace(tmp, path)  # shard processes start together: never let one read a half-written file
    return path


def load_items(folder: Path) -> pd.DataFrame:
    path = Path(folder) / "items.parquet"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: run 01_generate for this benchmark and model pair first")
    df = pd.read_parquet(path)
    df["messages"] = [json.loads(m) for m in df["messages"]]
    return df


def generate(
    items: pd.DataFrame,
    models: dict[str, str],
    folder: Path,
    *,
    backend: str,
    roles=("think", "nothink", "verbalized"),
    shard="0/1",
    seed: int = 0,
    max_tokens: int | None = None,
    n_verbalized: int = 10,
    verbalized_max_tokens: int = 64,
    batch_size: int = 64,
    tensor_parallel_size: int = 1,
    engine_factory: Callable | None = None,
    progress: bool = True,
    engine_kwargs: dict | None = None,
    stream: bool | None = None,
    window: int | None = None,
    flush_every: int = 256,
) -> dict:
    """Run the roles one model at a time for this shard; ``{role: run_generation(...) result}``.

    ``engine_factory(model) -> Engine`` overrides :func:`make_engine` (tests inject fake engines).
    ``stream`` / ``window`` / ``flush_every`` / ``batch_size``: see :func:`.runner.run_generation`.
    """
    from ..scoring import verbalized_messages

    save_items(items, folder)
    report = {}
    engines: dict[str, object] = {}

    def engine_for(model: str, sampling: Sampling):
        if model not in engines:
            engines.clear()  # one model in memory at a time
            if engine_factory is not None:
                engines[model] = engine_factory(model)
            else:
                mml = default_max_model_len(sampling) if backend == "vllm" else None
                engines[model] = make_engine(
                    backend,
                    model,
                    seed=seed,
                    tensor_parallel_size=tensor_parallel_size,
                    max_model_len=mml,
                    **(engine_kwargs or {}),
                )
        return engines[model]

    for role in roles:
        model = models["think" if role == "think" else "nothink"]
        sampling = default_sampling(model).with_(max_tokens=max_tokens)
        role_items = items
        if role == "verbalized":
            sampling = sampling.with_(n=n_verbalized, max_tokens=verbalized_max_tokens)
            mine = shard_items(items, shard)
            nothink = load_generations(folder, "nothink", mine["item_id"])
            first = nothink[nothink["sample"] == 0].set_index("item_id")["answer"]
            role_items = items.copy()
            role_items["messages"] = [
                verbalized_messages(q, first.get(i, "")) for i, q in zip(items["item_id"], items["question"])
            ]
        report[role] = run_generation(
            role_items,
            engine_for(model, sampling),
            folder,
            role=role,
            sampling=sampling,
            thinking=is_thinking_model(model) if role == "think" else False,
            shard=shard,
            batch_size=batch_size,
            seed=seed,
            progress=progress,
            stream=stream,
            window=window,
            flush_every=flush_every,
        )
    return report


def default_max_model_len(sampling: Sampling, prompt_tokens: int = 4096) -> int:
    return int(sampling.max_tokens) + prompt_tokens
