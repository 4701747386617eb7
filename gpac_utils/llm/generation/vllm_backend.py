"""vLLM backend (GPU). ``vllm`` is imported only when an engine is built, never at import.

Two ways to run requests:

* :meth:`VLLMEngine.stream` (what the runner uses): continuous batching through vLLM's own step
  API, ``LLM.llm_engine.add_request(request_id, prompt, params)`` + ``step()`` +
  ``has_unfinished_requests()`` -- the loop ``LLM.generate`` / ``LLM.chat`` run internally (checked
  against ``vllm/v1/engine/llm_engine.py`` and ``vllm/entrypoints`` for 0.26-0.33). The engine gets
  the whole shard (or a ``window`` of requests kept full), and each request is yielded the step it
  finishes, so the runner writes it to disk at once. Prompts are rendered as ``LLM.chat`` does:
  the tokenizer's chat template (``add_generation_prompt=True``), then token ids without added
  special tokens, passed as ``{"prompt_token_ids": ids}`` (a ``TokensPrompt``). Outputs are
  requested ``FINAL_ONLY`` (``RequestOutputKind``), as ``LLM`` does, so a step returns only
  finished requests.
* :meth:`VLLMEngine.generate` (the batch API of every engine): one ``LLM.chat`` call per batch,
  which waits for its longest request.

Scaling (vLLM's own mechanisms, not re-invented here):

* one GPU per process: run one process per GPU with ``--shard i/n`` and
  ``CUDA_VISIBLE_DEVICES=i`` (the runner writes one shard folder per process);
* a model too large for one GPU: ``tensor_parallel_size=k`` (k GPUs in one process);
* across nodes: start a Ray cluster (``ray start --head`` / ``ray start --address=...``) and pass
  ``distributed_executor_backend="ray"`` with ``tensor_parallel_size`` (and optionally
  ``pipeline_parallel_size`` through ``engine_kwargs``) spanning the nodes' GPUs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from .base import LOGPROBS_MODES, Completion, Sampling


class VLLMEngine:
    """``vllm.LLM`` with one ``SamplingParams`` per request (per-item seeds).

    ``llm`` and ``sampling_params_cls`` can be injected (tests and the CPU benchmark use
    :class:`~.fake.FakeLLM`, whose outputs are shaped like vLLM's ``RequestOutput`` /
    ``CompletionOutput`` / ``Logprob``). Extra keywords go to ``vllm.LLM`` (e.g.
    ``data_parallel_size``, ``pipeline_parallel_size``, ``max_num_seqs``).
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
                    "the vLLM backend needs `pip install -e .[gpu]` (vllm>=0.26) and a "
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
        self._final_only = None
        if str(getattr(sampling_params_cls, "__module__", "")).startswith("vllm"):
            try:  # only finished requests come out of step(), as in LLM.generate
                from vllm.sampling_params import RequestOutputKind

                self._final_only = RequestOutputKind.FINAL_ONLY
            except ImportError:  # pragma: no cover - very old vLLM
                pass
        if sampling_params_cls is None:
            raise ValueError("an injected llm needs sampling_params_cls as well")
        self.llm = llm
        self._sp = sampling_params_cls
        self._tok = llm.get_tokenizer() if hasattr(llm, "get_tokenizer") else None
        self._next_id = 0
        #: vLLM's step API is there (an injected stand-in may offer only ``chat``)
        self.can_stream = hasattr(llm, "llm_engine")

    def _params(self, s: Sampling, *, final_only: bool = False):
        kw = dict(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_tokens=s.max_tokens,
            n=s.n,
            seed=s.seed,
            logprobs=0,
        )
        if s.ignore_eos:
            kw["ignore_eos"] = True
        if final_only and self._final_only is not None:
            kw["output_kind"] = self._final_only
        return self._sp(**kw)

    def render(self, conversation: list[dict]) -> dict:
        """A chat as vLLM's ``TokensPrompt``: chat template, generation prompt, no extra special tokens."""
        if self._tok is None:
            raise RuntimeError("no tokenizer available to render chat prompts")
        text = self._tok.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, **(self.chat_template_kwargs or {})
        )
        return {"prompt_token_ids": list(self._tok.encode(text, add_special_tokens=False))}

    def stream(
        self, requests: Iterable[tuple[Hashable, list[dict], Sampling]], *, window: int | None = None
    ) -> Iterator[tuple[Hashable, list[Completion]]]:
        """Continuous batching: yield ``(key, completions)`` the step each request finishes.

        Parameters
        ----------
        requests : iterable of (key, conversation, Sampling)
            Keys must be unique; they come back with the completions.
        window : int, optional
            Requests handed to vLLM at a time, topped up after every step (``None``: all at once).
            Keep it well above ``max_num_seqs`` so the scheduler is never starved.

        Notes
        -----
        On an exception (or when the consumer stops early) the requests still in flight are
        aborted, so the engine can be reused.
        """
        if window is not None and int(window) < 1:
            raise ValueError(f"window must be >= 1 or None, got {window}")
        engine = self.llm.llm_engine
        it = iter(requests)
        pending: dict[str, tuple[Hashable, Sampling]] = {}
        alias: dict[str, str] = {}  # vLLM's internal request id -> ours

        def top_up() -> None:
            room = None if window is None else int(window) - len(pending)
            if room is not None and room <= 0:
                return
            for key, conv, s in islice(it, room):
                rid = f"gpac-{self._next_id}"
                self._next_id += 1
                internal = engine.add_request(rid, self.render(conv), self._params(s, final_only=True))
                pending[rid] = (key, s)
                if isinstance(internal, str) and internal != rid:  # vLLM >= 0.11 returns its internal id
                    alias[internal] = rid

        try:
            top_up()
            while pending:
                if not engine.has_unfinished_requests():
                    raise RuntimeError(f"vLLM has no unfinished requests but {len(pending)} are pending")
                for ro in engine.step():
                    if not getattr(ro, "finished", True):
                        continue
                    rid = ro.request_id if ro.request_id in pending else alias.pop(ro.request_id, None)
                    if rid is None or rid not in pending:
                        continue  # not ours (the engine may be shared)
                    key, s = pending.pop(rid)
                    yield key, self._convert(ro, s)
                top_up()
        finally:
            if pending and hasattr(engine, "abort_request"):
                try:
                    engine.abort_request(list(pending))
                except Exception:  # pragma: no cover - best effort on the way out
                    pass

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
