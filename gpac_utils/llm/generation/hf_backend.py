"""transformers backend (CPU or GPU, any local model path) producing the same records as vLLM.

Requests run one conversation at a time with ``torch.manual_seed(sampling.seed)`` so results do
not depend on batching, sharding or restarts. ``raw_logprobs`` are the log-softmax of the raw
logits of the sampled tokens; ``processed_logprobs`` those of the scores after temperature /
top-k / top-p (transformers' ``compute_transition_scores(normalize_logits=True)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import LOGPROBS_MODES, Completion, Sampling


class TransformersEngine:
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
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
        if hf_model is None and model is None:
            raise ValueError("give a local model path (model=...) or hf_model=")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.logprobs_mode = logprobs_mode
        self.chat_template_kwargs = chat_template_kwargs or {}
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

    def _encode(self, conversation: list[dict]):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
            )
        else:  # plain fallback for base models without a chat template
            text = "\n\n".join(f"{m['role']}: {m['content']}" for m in conversation) + "\n\nassistant:"
        return tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    def generate(self, conversations: Sequence[list[dict]], samplings: Sequence[Sampling]) -> list[list[Completion]]:
        if len(conversations) != len(samplings):
            raise ValueError("one Sampling per conversation")
        return [self._one(c, s) for c, s in zip(conversations, samplings)]

    def _one(self, conversation: list[dict], s: Sampling) -> list[Completion]:
        import torch

        input_ids = self._encode(conversation).to(self.device)
        greedy = s.temperature <= 0
        kw = dict(
            max_new_tokens=s.max_tokens,
            num_return_sequences=s.n,
            do_sample=not greedy,
            return_dict_in_generate=True,
            output_scores=True,
            output_logits=True,
            pad_token_id=self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else next(iter(self._eos), 0),
        )
        if not greedy:
            kw.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k and s.top_k > 0 else 0)
        torch.manual_seed(int(s.seed))
        with torch.no_grad():
            out = self.hf_model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **kw)
        gen = out.sequences[:, input_ids.shape[1] :]
        if self.logprobs_mode == "raw_logprobs":
            logits = torch.stack(out.logits, dim=1).float()  # (n, T, V)
            lp = torch.log_softmax(logits, dim=-1).gather(-1, gen.unsqueeze(-1)).squeeze(-1)
        else:
            lp = self.hf_model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        result = []
        for row in range(gen.shape[0]):
            ids = gen[row].tolist()
            stop = next((i for i, t in enumerate(ids) if t in self._eos), None)
            length = len(ids) if stop is None else stop + 1
            ids = ids[:length]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            result.append(
                Completion(
                    text=text,
                    token_ids=ids,
                    token_logprobs=lp[row, :length].tolist(),
                    finish_reason="length" if stop is None else "stop",
                )
            )
        return result

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def end_think_ids(self) -> set[int]:
        vocab = self.tokenizer.get_vocab()
        return {int(vocab["</think>"])} if "</think>" in vocab else set()
