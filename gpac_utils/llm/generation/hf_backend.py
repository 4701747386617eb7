"""transformers backend (CPU or GPU, any local model folder or tiny model name), batched.

Requests with the same sampling settings (all but the seed) share one ``model.generate`` call per
chunk of at most ``max_batch_rows`` sequences: prompts are left-padded, each request's ``n``
samples are rows of the same batch. Sampling is done by :class:`RowSampler`, a logits processor
that draws every row's token with **its own** CPU ``torch.Generator`` seeded from the request's
seed and the sample index (inverse-CDF with one uniform per row and step); ``generate`` itself
then runs greedily on the sampler's one-hot output. Hence:

* greedy outputs do not depend on the batch (size, neighbours, padding) beyond floating-point
  noise: identical token ids unless two logits tie to within ~1e-6;
* sampled outputs of a request depend only on its seed and the model's probabilities: the same
  token ids in any batch (and the same on CPU and CUDA) unless a row's uniform draw falls within
  float noise of a CDF boundary (probability ~1e-6 per token);
* logprobs agree to float noise (~1e-5).

``raw_logprobs`` are the log-softmax of the raw logits at the sampled tokens;
``processed_logprobs`` those of the distribution actually sampled from (after temperature,
top-k, top-p; for greedy decoding the raw ones). Sampling order is temperature, top-k, top-p,
as in vLLM and transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import LOGPROBS_MODES, Completion, Sampling, item_seed


def _torch():
    import torch

    return torch


class RowSampler:
    """Logits processor: per-row temperature / top-k / top-p sampling with per-row generators.

    Called by ``model.generate`` with the raw next-token logits ``scores`` of shape
    ``(rows, vocab)``; returns scores that are ``0`` at the chosen token and ``-inf`` elsewhere
    (``generate`` runs with ``do_sample=False``). Records per step the raw and processed
    logprobs of the chosen tokens.

    Parameters
    ----------
    sampling : Sampling
        Shared settings of all rows (the seed is ignored: see ``seeds``).
    seeds : sequence of int
        One generator seed per row.
    """

    def __init__(self, sampling: Sampling, seeds: Sequence[int]):
        torch = _torch()
        self.temperature = float(sampling.temperature)
        self.top_k = int(sampling.top_k) if sampling.top_k and sampling.top_k > 0 else 0
        self.top_p = float(sampling.top_p)
        self.greedy = self.temperature <= 0
        self.generators = []
        if not self.greedy:
            for s in seeds:
                g = torch.Generator(device="cpu")
                g.manual_seed(int(s))
                self.generators.append(g)
        self.raw: list = []  # per step, (rows,) float tensors
        self.processed: list = []

    def processed_logits(self, logits):
        """Logits after temperature, top-k and top-p (masked entries are ``-inf``)."""
        torch = _torch()
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
        torch = _torch()
        logits = scores.float()
        raw_lp = torch.log_softmax(logits, dim=-1)
        if self.greedy:
            chosen = torch.argmax(logits, dim=-1)
            proc_lp = raw_lp
        else:
            if len(self.generators) != logits.shape[0]:
                raise RuntimeError(f"RowSampler has {len(self.generators)} generators for {logits.shape[0]} rows")
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
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(-1, chosen[:, None], 0.0)
        return out


class TransformersEngine:
    """The :class:`~gpac_utils.llm.generation.base.Engine` of a transformers causal LM.

    Parameters
    ----------
    model : str, optional
        A local model folder, a Hugging Face id already in the local cache, or a tiny model
        name from :data:`gpac_utils.llm.tiny.TINY_MODELS` (e.g. ``"smollm2-135m"``).
    device : str
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ...
    dtype : str, optional
        torch dtype name; default float32 on CPU, the checkpoint's own on GPU.
    logprobs_mode : str
        ``"raw_logprobs"`` or ``"processed_logprobs"``.
    hf_model, tokenizer : optional
        An already loaded model and tokenizer (then ``model`` is only the recorded name).
    chat_template_kwargs : dict, optional
        Extra keyword arguments of ``apply_chat_template``.
    max_batch_rows : int
        Most sequences (requests x ``n``) in one ``generate`` call.
    """

    backend = "transformers"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "auto",
        dtype: str | None = None,
        logprobs_mode: str = "raw_logprobs",
        hf_model: Any = None,
        tokenizer: Any = None,
        chat_template_kwargs: dict | None = None,
        max_batch_rows: int = 256,
    ):
        torch = _torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .. import tiny

        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
        if hf_model is None and model is None:
            raise ValueError("model: give a local model path, a tiny model name, or hf_model=")
        if int(max_batch_rows) < 1:
            raise ValueError(f"max_batch_rows must be >= 1, got {max_batch_rows}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.logprobs_mode = logprobs_mode
        self.chat_template_kwargs = chat_template_kwargs or {}
        self.max_batch_rows = int(max_batch_rows)
        if hf_model is None and tiny.is_tiny(model):
            hf_model, tok = tiny.load_model(model, device="cpu", dtype=dtype or "float32")
            tokenizer = tokenizer if tokenizer is not None else tok
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(model)
        if hf_model is None:
            torch_dtype = getattr(torch, dtype) if dtype else ("auto" if device != "cpu" else torch.float32)
            hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
        self.hf_model = hf_model.to(device).eval()
        self.model = str(model) if model is not None else type(hf_model).__name__
        eos = self.hf_model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self._eos = set(eos if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos]))
        if not self._eos:
            raise ValueError("model: neither the generation config nor the tokenizer defines an end token")
        pad = self.tokenizer.pad_token_id
        self._pad = int(pad) if pad is not None else min(self._eos)

    def _encode(self, conversation: list[dict]):
        """Token ids ``(1, L)`` of a conversation with the generation prompt appended."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
            )
        else:  # plain fallback for base models without a chat template
            text = "\n\n".join(f"{m['role']}: {m['content']}" for m in conversation) + "\n\nassistant:"
        return tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    def generate(self, conversations: Sequence[list[dict]], samplings: Sequence[Sampling]) -> list[list[Completion]]:
        """One list of ``n`` completions per conversation, in input order (see the module doc)."""
        if len(conversations) != len(samplings):
            raise ValueError("samplings: one Sampling per conversation")
        prompts = [self._encode(c)[0].tolist() for c in conversations]
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(samplings):
            if int(s.n) < 1 or int(s.max_tokens) < 1:
                raise ValueError(f"samplings: n and max_tokens must be >= 1, got n={s.n}, max_tokens={s.max_tokens}")
            key = (float(s.temperature), float(s.top_p), int(s.top_k), int(s.max_tokens), int(s.n))
            groups.setdefault(key, []).append(i)
        results: list[list[Completion] | None] = [None] * len(conversations)
        for idx in groups.values():
            n = int(samplings[idx[0]].n)
            per_call = max(1, self.max_batch_rows // n)
            idx = sorted(idx, key=lambda i: len(prompts[i]))  # similar lengths together: less padding
            for start in range(0, len(idx), per_call):
                chunk = idx[start : start + per_call]
                outs = self._batch([prompts[i] for i in chunk], [samplings[i] for i in chunk])
                for i, comps in zip(chunk, outs):
                    results[i] = comps
        return results  # type: ignore[return-value]

    def _batch(self, prompts: list[list[int]], samplings: list[Sampling]) -> list[list[Completion]]:
        """One ``generate`` call: left-padded prompts, ``n`` rows per request, per-row generators."""
        torch = _torch()
        from transformers import GenerationConfig, LogitsProcessorList

        s0 = samplings[0]
        n = int(s0.n)
        width = max(len(p) for p in prompts)
        rows_ids, rows_mask, seeds = [], [], []
        for p, s in zip(prompts, samplings):
            for k in range(n):
                rows_ids.append([self._pad] * (width - len(p)) + p)
                rows_mask.append([0] * (width - len(p)) + [1] * len(p))
                seeds.append(int(s.seed) if n == 1 else item_seed(int(s.seed), f"sample{k}"))
        input_ids = torch.tensor(rows_ids, dtype=torch.long, device=self.device)
        attention_mask = torch.tensor(rows_mask, dtype=torch.long, device=self.device)
        sampler = RowSampler(s0, seeds)
        gc = GenerationConfig(
            max_new_tokens=int(s0.max_tokens),
            do_sample=False,
            num_beams=1,
            eos_token_id=sorted(self._eos),
            pad_token_id=self._pad,
        )
        with torch.no_grad():
            seq = self.hf_model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=gc,
                logits_processor=LogitsProcessorList([sampler]),
            )
        gen = seq[:, width:].cpu()
        lps = torch.stack(sampler.raw if self.logprobs_mode == "raw_logprobs" else sampler.processed, dim=1)
        result: list[list[Completion]] = []
        for r in range(0, gen.shape[0], n):
            comps = []
            for row in range(r, r + n):
                ids = gen[row].tolist()
                stop = next((i for i, t in enumerate(ids) if t in self._eos), None)
                length = len(ids) if stop is None else stop + 1
                ids = ids[:length]
                comps.append(
                    Completion(
                        text=self.tokenizer.decode(ids, skip_special_tokens=True),
                        token_ids=ids,
                        token_logprobs=[float(x) for x in lps[row, :length]],
                        finish_reason="length" if stop is None else "stop",
                    )
                )
            result.append(comps)
        return result

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def end_think_ids(self) -> set[int]:
        """Token ids of ``</think>`` (empty when it is not one token)."""
        vocab = self.tokenizer.get_vocab()
        return {int(vocab["</think>"])} if "</think>" in vocab else set()
