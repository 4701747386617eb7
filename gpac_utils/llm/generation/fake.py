"""A fake vLLM for tests and the CPU benchmark: continuous batching in simulated time.

:class:`FakeLLM` stands in for ``vllm.LLM``: ``get_tokenizer()``, a synchronous ``chat()`` (the
batch API: it returns when the *last* request of the call has finished) and ``llm_engine``, a
:class:`FakeLLMEngine` with vLLM's step API (``add_request`` / ``step`` /
``has_unfinished_requests``). Outputs are shaped like vLLM's ``RequestOutput`` /
``CompletionOutput`` / ``Logprob``, so :class:`~.vllm_backend.VLLMEngine` drives it unchanged.

The engine models a GPU's continuous batching: ``slots`` sequences decode at once, every
:meth:`FakeLLMEngine.step` writes one token for each running sequence and costs ``step_time``
simulated seconds whatever the occupancy; a finished sequence frees its slot for the next waiting
one. Time the caller spends between two steps (its own host work) is added to the clock as well
(``count_host_time``), as it stalls a synchronous engine loop. Nothing sleeps: :attr:`clock` is
the simulated wall time.

Replies are deterministic per (request seed, sample index, prompt): the default writes
``"w<k>"`` words, stops after a seed-dependent length (or exactly ``max_tokens`` with
``ignore_eos``), and thinking-model names (``*Thinking*``, ``*R1-Distill*``) get a
``... </think> answer`` shape. ``reply=`` overrides the text.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .base import END_THINK


@dataclass(slots=True)
class Logprob:  # vllm.logprobs.Logprob
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:  # vllm.outputs.CompletionOutput
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None
    logprobs: list | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:  # vllm.outputs.RequestOutput
    request_id: str
    prompt: str | None
    prompt_token_ids: list | None
    prompt_logprobs: list | None
    outputs: list
    finished: bool


class FakeSamplingParams:
    """``vllm.SamplingParams`` stand-in (the keywords :class:`~.vllm_backend.VLLMEngine` passes)."""

    def __init__(self, *, temperature, top_p, top_k, max_tokens, n=1, seed=None, logprobs=None, ignore_eos=False, **kw):
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.max_tokens, self.n, self.seed, self.logprobs = int(max_tokens), int(n), seed, logprobs
        self.ignore_eos = bool(ignore_eos)
        self.extra = kw


class FakeTokenizer:
    """Whitespace 'tokenizer': one token per word, stable ids, ``</think>`` is one token (id 7)."""

    def __init__(self):
        self.vocab = {END_THINK: 7}
        self.chat_template = "fake"

    def _id(self, w: str) -> int:
        if w not in self.vocab:
            self.vocab[w] = 100 + int(hashlib.sha256(w.encode()).hexdigest()[:6], 16)
        return self.vocab[w]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self._id(w) for w in text.split()]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        inv = {v: k for k, v in self.vocab.items()}
        return " ".join(inv[int(i)] for i in ids)

    def get_vocab(self) -> dict:
        return dict(self.vocab)

    def apply_chat_template(self, conversation, tokenize=False, add_generation_prompt=True, **kw) -> str:
        text = " ".join(f"<{m['role']}> {m['content']}" for m in conversation)
        return text + (" <assistant>" if add_generation_prompt else "")


def default_reply(prompt: str, model: str, rng: np.random.Generator, max_tokens: int, ignore_eos: bool) -> list[str]:
    """Words of one deterministic fake reply."""
    length = max_tokens if ignore_eos else int(rng.integers(4, 40))
    thinking = "thinking" in model.lower() or "r1-distill" in model.lower()
    body = ["the", "answer", "is", f"w{int(rng.integers(0, 10))}"]
    if thinking and length > len(body) + 1:
        words = [f"w{k % 97}" for k in range(length - len(body) - 1)] + [END_THINK] + body
    else:
        words = (body * (length // len(body) + 1))[:length]
    return words


def _id_words(words: Sequence[str], tok: FakeTokenizer) -> list[int]:
    return [tok._id(w) for w in words]


class _Seq:
    __slots__ = ("rid", "k", "tokens", "finish", "words")


class FakeLLMEngine:
    """vLLM's ``LLMEngine`` step API over a slot-limited continuous-batching model in simulated time.

    Parameters
    ----------
    model : str
        Model name (thinking names give ``</think>`` replies).
    tokenizer : FakeTokenizer
        Shared with the owning :class:`FakeLLM`.
    slots : int
        Sequences decoded concurrently (vLLM's ``max_num_seqs``).
    step_time : float
        Simulated seconds per decoding step.
    count_host_time : bool
        Add the real time the caller spends between steps to :attr:`clock`.
    reply : callable, optional
        ``reply(prompt, model, rng, max_tokens, ignore_eos) -> list[str]``.
    token_time : float
        Extra simulated seconds per running sequence and step (a step costs
        ``step_time + token_time * running``).
    fail_after, kill_after : int, optional
        After this many finished requests, raise ``RuntimeError`` (an injected CUDA error) or
        send the process ``SIGKILL`` (a pre-empted job) at the next step.
    logprobs : bool
        Return a logprob per token when the request asks (``SamplingParams.logprobs``).
    alternatives : bool
        List a higher-ranked alternative before each sampled token's logprob, as vLLM does.
    """

    def __init__(
        self,
        model: str,
        tokenizer: FakeTokenizer,
        *,
        slots: int = 256,
        step_time: float = 0.02,
        count_host_time: bool = True,
        reply: Callable | None = None,
        fail_after: int | None = None,
        kill_after: int | None = None,
        logprobs: bool = True,
        alternatives: bool = True,
        token_time: float = 0.0,
    ):
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.model, self.tok, self.slots, self.step_time = model, tokenizer, int(slots), float(step_time)
        self.count_host_time, self.reply = count_host_time, reply or default_reply
        self.fail_after, self.kill_after, self.logprobs = fail_after, kill_after, logprobs
        self.alternatives, self.token_time = alternatives, float(token_time)
        self.clock = 0.0  # simulated seconds
        self.steps = 0
        self.tokens = 0
        self.finished_requests = 0
        self.max_running = 0
        self.seen: list[str] = []  # prompts in arrival order
        self._waiting: deque[_Seq] = deque()
        self._running: list[tuple[int, int, _Seq]] = []  # heap of (finish step, order, seq)
        self._requests: dict[str, dict] = {}
        self._order = 0
        self._last_return: float | None = None
        self._counter = 0

    # ------------------------------------------------------------------ vLLM API
    def add_request(self, request_id: str, prompt, params, **kw) -> str:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a string, got {type(request_id)}")
        if request_id in self._requests:
            raise ValueError(f"request_id {request_id!r} already added")
        if isinstance(prompt, str):
            text = prompt
        elif "prompt_token_ids" in prompt:  # vLLM's TokensPrompt
            text = self.tok.decode(prompt["prompt_token_ids"])
        else:  # TextPrompt
            text = prompt["prompt"]
        self.seen.append(text)
        seqs = []
        h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        for k in range(params.n):
            rng = np.random.default_rng([int(params.seed or 0), k, h])
            words = self.reply(text, self.model, rng, params.max_tokens, params.ignore_eos)
            finish = "stop"
            if len(words) > params.max_tokens:
                words, finish = words[: params.max_tokens], "length"
            elif params.ignore_eos:
                finish = "length"
            s = _Seq()
            s.rid, s.k, s.tokens, s.finish, s.words = request_id, k, max(len(words), 1), finish, words
            seqs.append(s)
            self._waiting.append(s)
        self._requests[request_id] = {"params": params, "seqs": seqs, "left": len(seqs), "prompt": text}
        self._counter += 1
        return f"{request_id}-{self._counter:08x}"  # vLLM >= 0.11 returns an internal id like this

    def has_unfinished_requests(self) -> bool:
        return bool(self._requests)

    def get_num_unfinished_requests(self) -> int:
        return len(self._requests)

    def abort_request(self, request_ids) -> None:
        for rid in [request_ids] if isinstance(request_ids, str) else request_ids:
            self._requests.pop(rid, None)
        self._waiting = deque(s for s in self._waiting if s.rid in self._requests)
        self._running = [e for e in self._running if e[2].rid in self._requests]
        heapq.heapify(self._running)

    def step(self) -> list[RequestOutput]:
        now = time.perf_counter()
        if self.count_host_time and self._last_return is not None:
            self.clock += now - self._last_return
        if self.kill_after is not None and self.finished_requests >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail_after is not None and self.finished_requests >= self.fail_after:
            raise RuntimeError("CUDA error: injected failure")
        while self._waiting and len(self._running) < self.slots:
            s = self._waiting.popleft()
            self._order += 1
            heapq.heappush(self._running, (self.steps + s.tokens, self._order, s))
        self.max_running = max(self.max_running, len(self._running))
        out: list[RequestOutput] = []
        if self._running:
            self.steps += 1
            self.tokens += len(self._running)
            self.clock += self.step_time + self.token_time * len(self._running)
            while self._running and self._running[0][0] <= self.steps:
                _, _, s = heapq.heappop(self._running)
                req = self._requests.get(s.rid)
                if req is None:
                    continue
                req["left"] -= 1
                if req["left"] == 0:
                    out.append(self._output(s.rid, self._requests.pop(s.rid)))
                    self.finished_requests += 1
        self._last_return = time.perf_counter()
        return out

    # ------------------------------------------------------------------ helpers
    def _output(self, rid: str, req: dict) -> RequestOutput:
        comps = []
        for s in req["seqs"]:
            ids = _id_words(s.words, self.tok)
            lps, cum = None, None
            if self.logprobs and req["params"].logprobs is not None:
                rng = np.random.default_rng([int(req["params"].seed or 0), s.k, 1])
                vals = np.log(rng.uniform(0.05, 1.0, len(ids)))
                # a top-1 alternative listed first, as vLLM does when the sampled token is not the
                # argmax: the backend must pick the sampled token's entry
                if self.alternatives:
                    lps = [
                        {t + 1: Logprob(-0.01, 1, "alt"), t: Logprob(v, 2, None)} for t, v in zip(ids, vals.tolist())
                    ]
                else:
                    lps = [{t: Logprob(v)} for t, v in zip(ids, vals.tolist())]
                cum = float(vals.sum())
            comps.append(CompletionOutput(s.k, " ".join(s.words), ids, cum, lps, s.finish))
        return RequestOutput(rid, req["prompt"], None, None, comps[::-1], True)  # unordered, as vLLM may


class FakeLLM:
    """``vllm.LLM`` stand-in: ``chat`` (synchronous batch) and ``llm_engine`` (step API).

    Keyword arguments go to :class:`FakeLLMEngine`. ``chat`` runs the same engine until the
    call's last request finishes, so successive calls pay the batch barrier as ``LLM.chat`` does.
    """

    def __init__(self, model: str = "fake-model", **engine_kw):
        self.model = model
        self.tok = FakeTokenizer()
        self.llm_engine = FakeLLMEngine(model, self.tok, **engine_kw)
        self.chat_calls = 0

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tok

    @property
    def seen(self) -> list[str]:
        return self.llm_engine.seen

    def chat(self, messages, sampling_params, use_tqdm: bool = False, chat_template_kwargs=None, **kw):
        self.chat_calls += 1
        eng = self.llm_engine
        if not isinstance(sampling_params, (list, tuple)):
            sampling_params = [sampling_params] * len(messages)
        ids = []
        for conv, sp in zip(messages, sampling_params):
            rid = f"chat{self.chat_calls}-{len(ids)}"
            text = self.tok.apply_chat_template(conv, add_generation_prompt=True, **(chat_template_kwargs or {}))
            eng.add_request(rid, {"prompt_token_ids": self.tok.encode(text)}, sp)
            ids.append(rid)
        done: dict[str, RequestOutput] = {}
        eng._last_return = None  # LLM.chat's own loop has no host gaps worth modelling
        while eng.has_unfinished_requests():
            for ro in eng.step():
                done[ro.request_id] = ro
            eng._last_return = None
        return [done[r] for r in ids]
