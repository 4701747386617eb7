"""Generation runs: a benchmark's items through a thinking and a non-thinking model, records on disk.

Three roles per item: ``think`` (the thinking model's answer), ``nothink`` (the non-thinking
model's answer and its token logprobs) and ``verbalized`` (the non-thinking model's confidences
in its first answer, the paper's prompt). Engines: :mod:`gpac_utils.llm.engines` (vLLM or
transformers).

Layout of a run folder (one per benchmark x model pair)::

    <out>/items.parquet                         the items (02_scores needs no benchmark file)
    <out>/<role>/manifest.json                  settings: model, backend, sampling, seed, logprobs mode
    <out>/<role>/shard-00-of-04.jsonl           records, one line per finished item
    <out>/<role>/runs/shard-00-of-04.jsonl      the report of each run: versions, GPU, wall time,
                                                tokens per second, status

**Resumable.** Each item is appended to its shard's file the moment the engine finishes it (vLLM
streams: the whole shard is in flight) and flushed to the OS, so a killed run (SIGKILL, CUDA error,
pre-emption) loses at most the requests in flight. A rerun drops a torn last line, skips every
item already recorded and generates the rest. A rerun with other settings is refused.

**Seeds per item.** Request ``i`` samples with :func:`~.engines.item_seed` ``(seed, item_id)``:
records do not depend on batching, scheduling, sharding or restarts.

**One process per GPU.** Shards split the items round-robin (item ``k`` goes to shard ``k mod n``);
start one process per GPU and read the shards back together with :func:`~.records.load_generations`::

    for i in 0 1 2 3; do
      CUDA_VISIBLE_DEVICES=$i python -m gpac_utils.llm.generation --benchmark math500 --pair qwen \\
          --shard $i/4 > gen-$i.log 2>&1 &
    done; wait

The same loop without ``&`` runs the shards one after the other (finished items early in a long
run). vLLM's own mechanisms work through ``--engine-arg``: ``tensor_parallel_size=k`` (a model
that needs k GPUs), ``data_parallel_size=d`` (d replicas behind one process), and across nodes a
Ray cluster with ``distributed_executor_backend=ray``.

**The walk** (CPU, minutes): one tiny model (:mod:`gpac_utils.llm.tiny`) plays both roles under
two prompts and samplings (:data:`WALK_SAMPLING`): ``think`` = a one-shot ``\\boxed{}`` example and
"reason step by step", greedy, 64 tokens; ``nothink`` = "final answer only", T = 1, 16 tokens;
``verbalized`` = the paper's confidence prompt, T = 0.7, top-p 0.95, 3 samples of 12 tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..checks import ParameterError
from ..workflow.paths import DATA
from . import records
from .benchmarks import BENCHMARKS, load_benchmark
from .engines import Sampling, check_engine, item_seed, make_engine, resolve_backend
from .records import ROLES, load_generations, parse_shard
from .scoring import verbalized_messages

GENERATIONS = DATA / "generations"
GENERATED = DATA / "generated"
END_THINK = "</think>"
#: Recommended sampling per model family (model cards; App. F.1: "following the settings in the original paper"), the
#: family found by substrings of the model name, and whether it thinks (its answer follows ``</think>``).
MODEL_FAMILIES = (
    (("qwen3", "thinking"), Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=32768), True),
    (("qwen3", "instruct"), Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=16384), False),
    (("r1-distill",), Sampling(temperature=0.6, top_p=0.95, max_tokens=32768), True),
    (("llama-3.1", "instruct"), Sampling(temperature=0.6, top_p=0.9, max_tokens=8192), False),
)
#: The paper's model pairs (Sec. 5.1), and the walk's one tiny model in both roles.
MODEL_PAIRS: dict[str, dict[str, str]] = {
    "qwen": {"think": "Qwen/Qwen3-4B-Thinking-2507", "nothink": "Qwen/Qwen3-4B-Instruct-2507"},
    "llama": {"think": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "nothink": "meta-llama/Llama-3.1-8B-Instruct"},
    "smollm2": {"think": "smollm2-135m", "nothink": "smollm2-135m"},
}
#: The walk's sampling per role, as the built-in :data:`~gpac_utils.scores.ROLES` entries own it (their
#: ``walk_sampling`` and ``n_samples``; :func:`walk_samplings` reads the registry as it is now).
WALK_SAMPLING: dict[str, Sampling] = {r.name: r.sampling(Sampling(**r.walk_sampling)) for r in ROLES.values()}


def model_defaults(model: str) -> tuple[Sampling, bool]:
    """``(recommended sampling, thinking?)`` of ``model``'s family (:data:`MODEL_FAMILIES`); unknown models:
    T = 0.7, top-p 0.95, 4096 tokens, not thinking."""
    m = str(model).lower().replace("_", "-")
    other = (Sampling(temperature=0.7, top_p=0.95, max_tokens=4096), False)
    return next(((s, thinks) for keys, s, thinks in MODEL_FAMILIES if all(k in m for k in keys)), other)


def pair_samplings(models, max_tokens=None, n_verbalized=10, verbalized_max_tokens=64) -> dict[str, Sampling]:
    """Each role's sampling for a model pair: its model's recommended settings, with the options that
    apply to the role (:meth:`gpac_utils.scores.Role.sampling`)."""
    return {
        r.name: r.sampling(model_defaults(models[r.model])[0], max_tokens, n_verbalized, verbalized_max_tokens)
        for r in ROLES.values()
    }


def walk_samplings(think_max_tokens=None, nothink_max_tokens=None, n_verbalized=None, verbalized_max_tokens=None):
    """Each role's walk sampling (:attr:`gpac_utils.scores.Role.walk_sampling`) with some settings
    changed (``None`` keeps the default); ``*_max_tokens`` by the role's model."""
    most = {"think": think_max_tokens, "nothink": nothink_max_tokens}  # by model of the pair
    return {
        r.name: r.sampling(Sampling(**r.walk_sampling), most[r.model], n_verbalized, verbalized_max_tokens)
        for r in ROLES.values()
    }


def split_thinking(completion, *, thinking: bool, end_id: int | None = None) -> tuple[str, str, int, int]:
    """``(reasoning, answer, reasoning_tokens, answer_tokens)``, cut at the **last** ``</think>``.

    Non-thinking models: all answer. Thinking models without ``</think>``: truncated reasoning
    and no answer when the length limit was hit, else all answer (the model skipped thinking).
    Token counts come from the last token ``end_id`` (the tokenizer's ``</think>``).
    """
    text, ids = completion.text, completion.token_ids
    n, cut = len(ids), text.rfind(END_THINK)
    if not thinking or (cut < 0 and completion.finish_reason != "length"):
        return "", text, 0, n
    if cut < 0:
        return text.strip().removeprefix("<think>").strip(), "", n, 0
    last = max((i for i, t in enumerate(ids) if t == end_id), default=-1)
    if last < 0:
        raise ValueError(f"end_id: {end_id} is not among the tokens of a completion that writes {END_THINK}")
    reasoning = text[:cut].strip().removeprefix("<think>").strip()
    return reasoning, text[cut + len(END_THINK) :].strip(), last + 1, n - last - 1


def run_dir(benchmark: str, pair: str, root: Path | None = None) -> Path:
    return Path(root or GENERATIONS) / f"{benchmark}__{pair}"


def pair_models(pair: str, think_model: str | None = None, nothink_model: str | None = None) -> dict[str, str]:
    if pair not in MODEL_PAIRS and not (think_model and nothink_model):
        raise ValueError(f"unknown model pair {pair!r}; choose {sorted(MODEL_PAIRS)} or give both model paths")
    return {**MODEL_PAIRS.get(pair, {}), **{k: v for k, v in (("think", think_model), ("nothink", nothink_model)) if v}}


@dataclass(frozen=True)
class GenerationRequest:
    """What a generation run does, declared once and passed whole (the command line, ``01_generate``,
    the arithmetic check and the tests build one; :func:`generate` and :func:`run_generation` read it).

    Checked when built (:class:`~gpac_utils.checks.ParameterError`, one line naming the field), before
    any model loads.

    Parameters
    ----------
    backend : str, default "auto"
        The engine :func:`generate` builds per model (:func:`~.engines.make_engine`); ``"auto"``:
        :func:`~.engines.resolve_backend`. Unused when an engine is given.
    samplings : mapping, optional
        Sampling per role (default: :func:`pair_samplings` of the models; the walk: :func:`walk_samplings`).
    roles : tuple of str, optional
        The roles to run, in order (default: every :data:`~gpac_utils.scores.ROLES` entry with a
        sampling; all of them when ``samplings`` is not given).
    shard : str or (int, int), default "0/1"
        ``i/n``: this process handles the items ``k`` with ``k mod n == i``.
    seed : int, default 0
        Base seed; item ``i`` samples with :func:`~.engines.item_seed` ``(seed, item_id)``.
    engine_kwargs : mapping, default {}
        Passed to :func:`~.engines.make_engine` (``tensor_parallel_size``, ``device``, ...).
    progress : bool, default True
        tqdm bars on stderr.
    windows : mapping, default {}
        Per role, requests in flight at a time on a streaming engine (default all; records do not
        depend on it). vLLM's CPU build fails on seeded sampling when a prompt's prefill is split over
        engine steps ("CPU Generator does not use offset"): a sampled role's window times its prompt
        tokens must stay below one step's tokens.
    sampling_overrides : mapping, optional
        ``{item_id: {"max_tokens": ...}}``: per-item changes of the sampling (benchmarks).
    """

    backend: str = "auto"
    samplings: Mapping[str, Sampling] | None = None
    roles: tuple[str, ...] | None = None
    shard: str | tuple = "0/1"
    seed: int = 0
    engine_kwargs: Mapping = field(default_factory=dict)
    progress: bool = True
    windows: Mapping[str, int] = field(default_factory=dict)
    sampling_overrides: Mapping | None = None

    def __post_init__(self):
        every = [r for r in ROLES if self.samplings is None or r in self.samplings]
        roles = tuple(every) if self.roles is None else tuple(self.roles)
        unknown = [r for r in roles if r not in ROLES]
        missing = [r for r in roles if self.samplings is not None and r not in self.samplings]
        if unknown or missing:
            raise ParameterError(
                f"roles: {list(roles)} must be among {list(ROLES)}, each with a sampling "
                f"({sorted(self.samplings or ROLES)})"
            )
        parse_shard(self.shard)
        windows = self.windows or {}
        if not isinstance(windows, Mapping) or not all(
            r in ROLES and type(v) is int and v > 0 for r, v in windows.items()
        ):
            raise ParameterError(f"windows: must map roles {list(ROLES)} to integers >= 1, got {windows!r}")
        object.__setattr__(self, "roles", roles)
        object.__setattr__(self, "windows", dict(windows))
        object.__setattr__(self, "engine_kwargs", dict(self.engine_kwargs or {}))

    def sampling(self, role: str) -> Sampling:
        """``role``'s sampling (ParameterError when the request has none for it)."""
        if self.samplings is None or role not in self.samplings:
            raise ParameterError(f"samplings: the request has no sampling for role {role!r}")
        return self.samplings[role]


def run_generation(
    items: pd.DataFrame,
    engine,
    out_dir,
    role: str,
    request: GenerationRequest,
    *,
    thinking: bool = False,
    messages_col: str = "messages",
) -> dict:
    """Generate ``role`` for every item of the request's shard not yet on disk (see the module doc).

    ``items`` need ``item_id`` (unique) and ``messages_col`` (lists of ``{"role", "content"}``);
    ``request``: the run's settings (:class:`GenerationRequest`: the role's sampling and window, the
    shard, seed, per-item sampling overrides, progress bars); ``thinking``: split reasoning from
    answer at ``</think>``. Returns ``done_before``, ``generated``, ``shard``, ``tokens``, ``wall_s``,
    ``tokens_per_s``.
    """
    if role not in ROLES:
        raise ParameterError(f"role: must be one of {list(ROLES)}, got {role!r}")
    sampling, seed, shard = request.sampling(role), request.seed, request.shard
    for col in ("item_id", messages_col):
        if col not in items.columns:
            raise ValueError(f"items lack column {col!r}; they have {list(items.columns)}")
    if items["item_id"].duplicated().any():
        raise ValueError(f"duplicate item_id(s) {items['item_id'][items['item_id'].duplicated()].tolist()[:5]}")
    t0, started = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
    (i, n), role_dir = parse_shard(shard), Path(out_dir) / role
    (role_dir / "runs").mkdir(parents=True, exist_ok=True)
    overrides = {k: dict(v) for k, v in (request.sampling_overrides or {}).items()}
    settings = {
        "model": engine.model,
        "backend": engine.backend,
        "logprobs_mode": engine.logprobs_mode,
        "thinking": bool(thinking),
        "sampling": {k: v for k, v in asdict(sampling).items() if k != "seed"},
        "seed": int(seed),
        **({"sampling_overrides": {str(k): v for k, v in overrides.items()}} if overrides else {}),
    }
    records.check_manifest(role_dir, settings)
    path = role_dir / f"shard-{i:02d}-of-{n:02d}.jsonl"
    records.read_records(path, repair=True)
    done = {e[0]["item_id"] for p in role_dir.glob("shard-*.jsonl") for e in records.read_records(p) if e}
    mine = items.iloc[i::n]
    todo = mine[~mine["item_id"].isin(done)]
    requests = [
        (iid, conv, sampling.with_(seed=item_seed(seed, iid), **overrides.get(iid, {})))
        for iid, conv in zip(todo["item_id"].tolist(), todo[messages_col])  # Python ids: JSON keys
    ]
    end_id = engine.tokenizer.get_vocab().get(END_THINK) if thinking else None
    bar = tqdm(
        total=len(mine), initial=len(mine) - len(todo), desc=f"{role} shard {i}/{n}", disable=not request.progress
    )
    generated, tokens, status = 0, 0, "running"
    try:
        with open(path, "a") as f:
            for iid, comps in engine.stream(requests, request.windows.get(role)):
                rows = []
                for k, c in enumerate(comps):
                    sp = split_thinking(c, thinking=thinking, end_id=end_id)
                    rows.append(
                        dict(
                            zip(
                                records.RECORD_COLUMNS,
                                (
                                    iid,
                                    role,
                                    k,
                                    engine.model,
                                    engine.backend,
                                    engine.logprobs_mode,
                                    item_seed(seed, iid),
                                    c.text,
                                    *sp[:2],
                                    len(c.token_ids),
                                    *sp[2:],
                                    c.token_logprobs,
                                    c.finish_reason,
                                ),
                            )
                        )
                    )
                    tokens += len(c.token_ids)
                f.write(json.dumps(rows) + "\n")
                f.flush()  # in the OS's hands: survives the process being killed
                generated += 1
                bar.update(1)
        status = "done"
    except BaseException as exc:
        status = f"failed: {type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        bar.close()
        wall = time.perf_counter() - t0
        report = {
            "shard": f"{i}/{n}",
            "status": status,
            "started": started,
            "wall_s": round(wall, 3),
            "done_before": len(mine) - len(todo),
            "generated": generated,
            "tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None,
            "model": engine.model,
            "backend": engine.backend,
            "sampling": asdict(sampling),
            "seed": int(seed),
            **records.run_facts(),
        }
        with open(role_dir / "runs" / path.name, "a") as f:
            f.write(json.dumps(report, default=str) + "\n")
    return {k: report[k] for k in ("done_before", "generated", "tokens", "wall_s", "tokens_per_s")} | {"shard": (i, n)}


# --------------------------------------------------------------------------- a whole run
def generate(items: pd.DataFrame, models: dict[str, str], folder, request: GenerationRequest, *, engine=None) -> dict:
    """Run the request's roles for its shard, one model in memory at a time; ``{role: run_generation(...)}``.

    ``request``: the run's settings (:class:`GenerationRequest`; its samplings default to
    :func:`pair_samplings` of ``models``). Each role is sent the items' column its entry names
    (:meth:`gpac_utils.scores.Role.prompt_column`: ``think`` and ``nothink`` their ``messages_<role>``,
    else the benchmark's ``messages``), or builds it (``verbalized``, from the first ``nothink`` answer:
    :attr:`gpac_utils.scores.Role.conversation`); a role without its column is refused before a model loads.
    ``engine``: one engine for every role (the walk's one model; e.g. shared by several calls), else one
    is built per model by :func:`make_engine` with the request's backend and ``engine_kwargs``.
    """
    folder = Path(folder)
    if request.samplings is None:
        request = replace(request, samplings=pair_samplings(models))
    if engine is not None and {models["think"], models["nothink"]} != {check_engine(engine).model}:
        raise ValueError(f"engine: serves {engine.model!r}, the roles need {models}")
    backend = request.backend
    if engine is None and backend == "auto" and (backend := resolve_backend(backend, models)) == "validate":
        raise ParameterError("backend: no GPU with vLLM and no local model folders: nothing to generate here")
    for role in request.roles:  # each role's prompt, before a model loads
        if ROLES[role].conversation is None:
            ROLES[role].prompt_column(items.columns)
    records.save_items(items, folder)
    report = {}
    owned = None  # the engine built here, shut down here; a caller's engine is the caller's to close
    try:
        for role in request.roles:
            model = models[ROLES[role].model]
            if engine is None or engine.model != model:
                _close(owned)  # one model in memory at a time
                engine = owned = None
                room = {"max_model_len": int(request.sampling(role).max_tokens) + 4096} if backend == "vllm" else {}
                engine = owned = make_engine(backend, model, seed=request.seed, **{**room, **request.engine_kwargs})
            report[role] = _run_role(items, engine, folder, role, request, model)
    finally:
        _close(owned)
    return report


def _close(engine) -> None:
    """Shut ``engine`` down if it can be (its ``close()``; vLLM's runs a background engine process)."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()


def _run_role(items, engine, folder, role: str, request: GenerationRequest, model: str) -> dict:
    """One role of :func:`generate` on ``engine``: :func:`run_generation`'s report."""
    build = ROLES[role].conversation
    col = f"messages_{role}" if build else ROLES[role].prompt_column(items.columns)
    if build is not None:
        items = items.assign(**{col: build(items, folder, request.shard)})
    thinking = ROLES[role].model == "think" and model_defaults(model)[1]
    return run_generation(items, engine, folder, role, request, thinking=thinking, messages_col=col)


def verbalized_conversations(items: pd.DataFrame, folder, shard) -> list:
    """The ``verbalized`` role's conversations (:attr:`gpac_utils.scores.Role.conversation`): the
    paper's confidence prompt on each item's question and first ``nothink`` answer."""
    k, n = parse_shard(shard)
    nothink = load_generations(folder, "nothink", items["item_id"].iloc[k::n])
    first = nothink[nothink["sample"] == 0].set_index("item_id")["answer"]
    return [verbalized_messages(q, first.get(i, "")) for i, q in zip(items["item_id"], items["question"])]


# --------------------------------------------------------------------------- command line
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2: a usage error
        self.exit(2, f"error: {message}\n")


def main(argv=None) -> int:
    """``python -m gpac_utils.llm.generation``: one shard of one benchmark x model pair.

    Bad input ends in one ``error:`` line before a model loads: exit 2 for an option, 1 for a file.
    """
    ap = _Parser(prog="python -m gpac_utils.llm.generation", description=__doc__.split("\n")[0])
    ap.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    ap.add_argument("--pair", default="qwen", choices=sorted(MODEL_PAIRS))
    ap.add_argument("--backend", default="auto", choices=["auto", "vllm", "transformers"])
    ap.add_argument("--roles", default=",".join(ROLES))
    ap.add_argument("--n-items", type=int)
    ap.add_argument("--max-tokens", type=int, help="of the thinking role")
    ap.add_argument("--n-verbalized", type=int, help="verbalized confidences per item")
    ap.add_argument("--shard", default="0/1", help="i/n: this process handles items k with k mod n == i")
    ap.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE", help="tensor_parallel_size=2")
    ap.add_argument("--windows", type=json.loads, default={}, help='vLLM requests in flight per role: {"nothink": 48}')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="local benchmark file (jsonl/parquet/csv)")
    ap.add_argument("--out", help="run folder (default: data/generations/<benchmark>__<pair>)")
    ap.add_argument("--progress", action="store_true", help="tqdm bars on stderr")
    args = ap.parse_args(argv)
    models, engine_kwargs = pair_models(args.pair), {}
    for text in args.engine_arg:
        key, sep, value = text.partition("=")
        if not (sep and key):
            ap.error(f"--engine-arg: must look like KEY=VALUE, got {text!r}")
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
        engine_kwargs[key] = value
    out, roles = Path(args.out) if args.out else run_dir(args.benchmark, args.pair), args.roles.split(",")
    try:
        if BENCHMARKS[args.benchmark].walk:
            samplings = walk_samplings(args.max_tokens, n_verbalized=args.n_verbalized)
        else:
            samplings = pair_samplings(models, args.max_tokens, *[n for n in [args.n_verbalized] if n is not None])
        request = GenerationRequest(
            backend=args.backend,
            samplings=samplings,
            roles=roles,
            shard=args.shard,
            seed=args.seed,
            engine_kwargs=engine_kwargs,
            progress=args.progress,
            windows=args.windows,
        )
        if (backend := resolve_backend(args.backend, models)) == "validate":
            raise ParameterError("--backend: no GPU with vLLM and no local model folders: nothing to generate here")
        items = load_benchmark(args.benchmark, args.data, n_items=args.n_items, seed=args.seed)
        result = generate(items, models, out, replace(request, backend=backend))
    except ParameterError as exc:  # shard, roles, windows, n_items, max_tokens, engine arguments: before a model loads
        ap.error(str(exc))
    except (OSError, ValueError, ImportError) as exc:  # a file, its columns or rows; a run's settings; no vllm
        print(f"error: {exc}", file=sys.stderr)
        return 1
    parts = ", ".join(f"{r} {v['generated']} new/{v['done_before']} before" for r, v in result.items())
    print(f"{out} shard {args.shard} [{backend}]: {parts}; reports under <role>/runs/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
