"""vLLM backend (GPU). ``vllm`` is imported only when an engine is built, never at import.

Scaling (vLLM's own mechanisms, not re-invented here):

* one GPU per process: run one process per GPU with ``--shard i/n`` and
  ``CUDA_VISIBLE_DEVICES=i`` (the runner writes one shard folder per process);
* a model too large for one GPU: ``tensor_parallel_size=k`` (k GPUs in one process);
* across nodes: start a Ray cluster (``ray start --head`` / ``ray start --address=...``) and pass
  ``distributed_executor_backend="ray"`` with ``tensor_parallel_size`` (and optionally
  ``pipeline_parallel_size`` through ``engine_kwargs``) spanning the nodes' GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import LOGPROBS_MODES, Completion, Sampling


class VLLMEngine:
    """``vllm.LLM`` + ``LLM.chat`` with one ``SamplingParams`` per request (per-item seeds).

    ``llm`` and ``sampling_params_cls`` can be injected (tests use a fake engine that returns
    objects shaped like vLLM's ``RequestOutput`` / ``CompletionOutput`` / ``Logprob``).
    """

    backend = "vllm"

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        seed: int = 0,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        logprobs_mode: str = "raw_logprobs",
        distributed_executor_backend: str | None = None,
        chat_template_kwargs: dict | None = None,
        llm: Any = None,
        sampling_params_cls: Any = None,
        **engine_kwargs,
    ):
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
        self.model = str(model)
        self.logprobs_mode = logprobs_mode
        self.chat_template_kwargs = chat_template_kwargs
        if llm is None:
            try:
                import vllm  # lazy: GPU extra only
            except ImportError as exc:  # pragma: no cover - depends on the machine
                raise ImportError(
                    "the vLLM backend needs `pip install -e .[gpu]` (vllm>=0.33) and a "
                    "CUDA GPU; use backend='transformers' otherwise"
                ) from exc
            kw = dict(
                model=self.model,
                tensor_parallel_size=int(tensor_parallel_size),
                seed=int(seed),
                gpu_memory_utilization=float(gpu_memory_utilization),
                logprobs_mode=logprobs_mode,
            )
            if max_model_len is not None:
                kw["max_model_len"] = int(max_model_len)
            if distributed_executor_backend is not None:
                kw["distributed_executor_backend"] = distributed_executor_backend
            kw.update(engine_kwargs)
            llm = vllm.LLM(**kw)
            sampling_params_cls = sampling_params_cls or vllm.SamplingParams
        if sampling_params_cls is None:
            raise ValueError("an injected llm needs sampling_params_cls as well")
        self.llm = llm
        self._sp = sampling_params_cls
        self._tok = llm.get_tokenizer() if hasattr(llm, "get_tokenizer") else None

    def _params(self, s: Sampling):
        return self._sp(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_tokens=s.max_tokens,
            n=s.n,
            seed=s.seed,
            logprobs=0,
        )

    def generate(self, conversations: Sequence[list[dict]], samplings: Sequence[Sampling]) -> list[list[Completion]]:
        if len(conversations) != len(samplings):
            raise ValueError("one Sampling per conversation")
        if not conversations:
            return []
        kw = {"use_tqdm": False}
        if self.chat_template_kwargs:
            kw["chat_template_kwargs"] = self.chat_template_kwargs
        outs = self.llm.chat(list(conversations), [self._params(s) for s in samplings], **kw)
        if len(outs) != len(conversations):
            raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(conversations)} requests")
        return [self._convert(ro, s) for ro, s in zip(outs, samplings)]

    def _convert(self, ro, s: Sampling) -> list[Completion]:
        if not getattr(ro, "finished", True):
            raise RuntimeError(f"vLLM request {ro.request_id} is not finished")
        outs = sorted(ro.outputs, key=lambda c: c.index)
        if len(outs) != s.n:
            raise RuntimeError(f"vLLM request {ro.request_id}: {len(outs)} completions, expected n={s.n}")
        result = []
        for c in outs:
            ids = [int(t) for t in c.token_ids]
            lps = None
            if c.logprobs is not None:
                if len(c.logprobs) != len(ids):
                    raise RuntimeError(
                        f"vLLM request {ro.request_id}: {len(c.logprobs)} logprob positions for {len(ids)} tokens"
                    )
                lps = []
                for pos, (tid, d) in enumerate(zip(ids, c.logprobs)):
                    if tid not in d:
                        raise RuntimeError(
                            f"vLLM request {ro.request_id}: no logprob for sampled token {tid} at position {pos}"
                        )
                    lps.append(float(d[tid].logprob))
            result.append(
                Completion(
                    text=c.text,
                    token_ids=ids,
                    token_logprobs=lps,
                    finish_reason=c.finish_reason,
                    extra={"cumulative_logprob": c.cumulative_logprob},
                )
            )
        return result

    def count_tokens(self, text: str) -> int:
        if self._tok is None:
            raise RuntimeError("no tokenizer available to count tokens")
        return len(self._tok.encode(text, add_special_tokens=False))

    def end_think_ids(self) -> set[int]:
        if self._tok is None:
            return set()
        vocab = self._tok.get_vocab()
        return {int(vocab["</think>"])} if "</think>" in vocab else set()
