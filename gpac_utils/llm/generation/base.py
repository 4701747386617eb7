"""Backend-independent pieces of generation: sampling settings, model pairs, completions,
splitting a thinking model's reasoning from its answer, and per-item seeds.

Nothing here imports vLLM or torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol, runtime_checkable

END_THINK = "</think>"
START_THINK = "<think>"
#: The two logprob kinds vLLM can return (``LLM(logprobs_mode=...)``): ``raw_logprobs`` are the
#: model's own log-softmax (before temperature / top-k / top-p), ``processed_logprobs`` are
#: taken after those sampling transformations. The logits-based score uses raw by default.
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request (mirrors ``vllm.SamplingParams``)."""

    temperature: float
    top_p: float = 1.0
    top_k: int = -1  # -1 / 0: disabled
    max_tokens: int = 1024
    n: int = 1
    seed: int = 0
    #: keep generating past the end-of-sequence token up to ``max_tokens`` (benchmarks only)
    ignore_eos: bool = False

    def with_(self, **kw) -> Sampling:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    def to_dict(self) -> dict:
        d = asdict(self)
        if not d["ignore_eos"]:  # keeps manifests written before the field existed valid
            del d["ignore_eos"]
        return d


#: Recommended sampling per model family (model cards; App. E: "following the original paper").
#: Qwen3-*-Thinking-2507: T=0.6, top-p 0.95, top-k 20; Qwen3-*-Instruct-2507: T=0.7, top-p 0.8,
#: top-k 20; DeepSeek-R1-Distill: T=0.6, top-p 0.95; Llama-3.1-Instruct: T=0.6, top-p 0.9
#: (its generation_config.json).
SAMPLING_DEFAULTS: dict[str, Sampling] = {
    "qwen3-thinking-2507": Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=32768),
    "qwen3-instruct-2507": Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=16384),
    "r1-distill": Sampling(temperature=0.6, top_p=0.95, top_k=-1, max_tokens=32768),
    "llama-3.1-instruct": Sampling(temperature=0.6, top_p=0.9, top_k=-1, max_tokens=8192),
}

#: The paper's model pairs (Sec. 5.1): thinking and non-thinking model per pair.
MODEL_PAIRS: dict[str, dict[str, str]] = {
    "qwen": {"think": "Qwen/Qwen3-4B-Thinking-2507", "nothink": "Qwen/Qwen3-4B-Instruct-2507"},
    "llama": {"think": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "nothink": "meta-llama/Llama-3.1-8B-Instruct"},
    # the CPU walk: one packaged tiny model in both roles, under two prompts (gpac_utils.llm.walk)
    "smollm2": {"think": "smollm2-135m", "nothink": "smollm2-135m"},
}


def model_family(model: str) -> str | None:
    """The :data:`SAMPLING_DEFAULTS` key for a model name or local path (``None`` if unknown)."""
    m = str(model).lower()
    if "qwen3" in m and "thinking" in m:
        return "qwen3-thinking-2507"
    if "qwen3" in m and "instruct" in m:
        return "qwen3-instruct-2507"
    if "r1-distill" in m or "r1_distill" in m:
        return "r1-distill"
    if "llama-3.1" in m and "instruct" in m:
        return "llama-3.1-instruct"
    return None


def default_sampling(model: str, *, fallback: Sampling | None = None) -> Sampling:
    """Recommended sampling for ``model``; ``fallback`` (or greedy-free T=0.7) when unknown."""
    fam = model_family(model)
    if fam is not None:
        return SAMPLING_DEFAULTS[fam]
    return fallback or Sampling(temperature=0.7, top_p=0.95, top_k=-1, max_tokens=4096)


def is_thinking_model(model: str) -> bool:
    fam = model_family(model)
    return fam in ("qwen3-thinking-2507", "r1-distill")


def item_seed(seed: int, item_id) -> int:
    """A per-item seed that does not depend on batching, sharding or restarts."""
    digest = hashlib.sha256(f"{int(seed)}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass
class Completion:
    """One sampled completion, whatever the backend."""

    text: str
    token_ids: list[int]
    token_logprobs: list[float] | None
    finish_reason: str | None
    extra: dict = field(default_factory=dict)


class Engine(Protocol):
    """What the runner needs from a backend."""

    backend: str
    model: str
    logprobs_mode: str

    def generate(self, conversations: Sequence[list[dict]], samplings: Sequence[Sampling]) -> list[list[Completion]]:
        """One list of ``n`` completions per conversation, in input order."""

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens)."""

    def end_think_ids(self) -> set[int]:
        """Token ids of ``</think>`` in this tokenizer (empty when it is not one token)."""


@runtime_checkable
class StreamingEngine(Protocol):
    """An engine that keeps its own batch full and reports each request when it finishes."""

    def stream(
        self, requests: Iterable[tuple[Hashable, list[dict], Sampling]], *, window: int | None = None
    ) -> Iterator[tuple[Hashable, list[Completion]]]:
        """Yield ``(key, completions)`` in *finishing* order for ``(key, conversation, sampling)`` requests."""


def iter_completions(
    engine: Engine,
    requests: Sequence[tuple[Hashable, list[dict], Sampling]],
    *,
    stream: bool | None = None,
    batch_size: int = 64,
    window: int | None = None,
) -> Iterator[tuple[Hashable, list[Completion]]]:
    """``(key, completions)`` for each request, as soon as the engine has them.

    Parameters
    ----------
    engine : Engine
        Any backend. Engines with a ``stream`` method (:class:`StreamingEngine`, e.g. vLLM) get
        every request at once (or ``window`` of them, refilled as they finish): no batch barrier.
        Others get synchronous chunks of ``batch_size`` through ``generate``.
    requests : sequence of (key, conversation, Sampling)
    stream : bool, optional
        ``None``: stream when the engine can; ``False``: force chunks (the pre-streaming path);
        ``True``: require streaming.
    batch_size : int
        Chunk size of the synchronous path.
    window : int, optional
        Requests in flight in the streaming path (``None``: all).
    """
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    can = callable(getattr(engine, "stream", None)) and getattr(engine, "can_stream", True)
    if stream and not can:
        raise ValueError(f"stream=True but the {getattr(engine, 'backend', '?')} engine has no stream()")
    if can and stream is not False:
        yield from engine.stream(requests, window=window)
        return
    requests = list(requests)
    for start in range(0, len(requests), int(batch_size)):
        chunk = requests[start : start + int(batch_size)]
        outs = engine.generate([c for _, c, _ in chunk], [s for _, _, s in chunk])
        if len(outs) != len(chunk):
            raise RuntimeError(f"engine returned {len(outs)} results for {len(chunk)} requests")
        for (key, _, _), comps in zip(chunk, outs):
            yield key, comps


@dataclass(frozen=True)
class Split:
    reasoning: str
    answer: str
    reasoning_tokens: int
    answer_tokens: int


def split_thinking(
    completion: Completion, *, thinking: bool, end_ids: set[int] | None = None, count_tokens=None
) -> Split:
    """Split a completion into reasoning and answer at the **last** ``</think>``.

    Non-thinking models: everything is answer. Thinking models without ``</think>``: when the
    generation hit the length limit the whole text is (truncated) reasoning and the answer is
    empty; otherwise the model skipped thinking and the whole text is the answer.
    Token counts come from the position of the last ``</think>`` token id when the tokenizer
    has one, else from re-tokenising the answer text (``count_tokens``).
    """
    text = completion.text
    n = len(completion.token_ids)
    if not thinking:
        return Split("", text, 0, n)
    cut = text.rfind(END_THINK)
    if cut < 0:
        if completion.finish_reason == "length":
            return Split(_strip_start(text), "", n, 0)
        return Split("", text, 0, n)
    reasoning = _strip_start(text[:cut])
    answer = text[cut + len(END_THINK) :].strip()
    ids = completion.token_ids
    if end_ids:
        last = max((i for i, t in enumerate(ids) if t in end_ids), default=-1)
        if last >= 0:
            return Split(reasoning, answer, last + 1, n - last - 1)
    if count_tokens is None:
        raise ValueError("split_thinking needs end_ids or count_tokens to count answer tokens")
    n_answer = min(int(count_tokens(answer)) if answer else 0, n)
    return Split(reasoning, answer, n - n_answer, n_answer)


def _strip_start(s: str) -> str:
    s = s.strip()
    return s[len(START_THINK) :].strip() if s.startswith(START_THINK) else s
