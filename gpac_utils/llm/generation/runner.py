"""Resumable, shardable generation runs that write each completion as it finishes.

Layout of a run folder (one per benchmark x model pair)::

    <out>/report.json                                 the CLI's report (what ran, where, how fast)
    <out>/<role>/manifest.json                        settings: model, backend, sampling, seed, logprobs mode
    <out>/<role>/runs/shard-00-of-04.jsonl            run facts, one line per invocation: versions, GPU,
                                                      wall time, tokens per second, status
    <out>/<role>/shard-00-of-04/part-00000.parquet    finished records (atomic rename)
    <out>/<role>/shard-00-of-04/journal.bin           completions not yet in a part (append-only)

``role`` is ``think``, ``nothink`` or ``verbalized``. Requests go to the engine through
:func:`~.base.iter_completions`: engines that stream (vLLM) get the whole shard and keep their batch
full (continuous batching); the others get synchronous chunks of ``batch_size``. Each finished
item is appended to the shard's journal at once (flushed to the OS, so it survives a killed
process), and every ``flush_every`` items or ``flush_seconds`` the journal becomes a parquet part.
On restart the journal's complete entries are recovered into a part first, then every item
already present in any part under ``<out>/<role>/`` is skipped: a killed run (SIGKILL, CUDA error,
pre-emption) loses at most the requests that were in flight, and the merged result is identical
to an uninterrupted run, because each request uses its own seed (:func:`~.base.item_seed`),
independent of batching, scheduling and restarts.

``manifest.json`` holds only settings: a restart with other settings is refused, while a restart
on another machine (other GPU, other wall time, other library versions) is not; those facts go to
``runs/``. Shards split the items round-robin (item ``k`` goes to shard ``k mod n``): run one
process per GPU (see :mod:`.launcher`).
"""

from __future__ import annotations

import json
import os
import pickle
import platform
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pandas as pd

from .base import Engine, Sampling, is_thinking_model, item_seed, iter_completions, split_thinking

ROLES = ("think", "nothink", "verbalized")
RECORD_COLUMNS = (
    "item_id",
    "role",
    "sample",
    "model",
    "backend",
    "logprobs_mode",
    "seed",
    "text",
    "reasoning",
    "answer",
    "n_tokens",
    "reasoning_tokens",
    "answer_tokens",
    "token_logprobs",
    "finish_reason",
)


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"i/n"`` or ``(i, n)`` -> ``(i, n)`` with ``0 <= i < n``; ``None`` -> ``(0, 1)``."""
    if shard is None:
        return (0, 1)
    if isinstance(shard, str):
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError as exc:
            raise ValueError(f"shard must look like 'i/n' (e.g. '0/4'), got {shard!r}") from exc
    else:
        i, n = (int(x) for x in shard)
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard index must satisfy 0 <= i < n, got {i}/{n}")
    return (i, n)


def shard_items(items: pd.DataFrame, shard) -> pd.DataFrame:
    """Rows ``k`` of ``items`` with ``k mod n == i`` (round-robin, so shards have similar lengths)."""
    i, n = parse_shard(shard)
    return items.iloc[i::n]


def _done_ids(role_dir: Path) -> set:
    done: set = set()
    for part in sorted(role_dir.glob("shard-*/part-*.parquet")):
        done.update(pd.read_parquet(part, columns=["item_id"])["item_id"].tolist())
    return done


def _check_manifest(role_dir: Path, manifest: dict) -> None:
    path = role_dir / "manifest.json"
    text = json.dumps(manifest, sort_keys=True, indent=1)
    if path.exists():
        old = json.loads(path.read_text())
        if old != json.loads(text):
            diff = {k: (old.get(k), manifest.get(k)) for k in set(old) | set(manifest) if old.get(k) != manifest.get(k)}
            raise ValueError(
                f"{role_dir} holds a run with other settings {diff}: use another output "
                "folder or delete it to start afresh"
            )
        return
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)


JOURNAL = "journal.bin"
#: libraries whose versions each run records (those installed; none is imported for this)
VERSIONED = ("gpac-utils", "vllm", "torch", "transformers", "numpy", "pandas", "pyarrow")


def library_versions(names: Sequence[str] = VERSIONED) -> dict:
    """Installed versions of ``names`` (absent ones left out) and Python's, without importing them."""
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def gpu_info(probe: bool | None = None) -> dict:
    """GPU name(s) and count from ``torch.cuda`` (``count: 0`` without torch or CUDA).

    ``probe=None`` asks torch only when it is already imported (an engine loaded it), so a fake
    or CPU-only run does not pay for importing torch.
    """
    info = {"count": 0, "names": [], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if probe is None:
        probe = "torch" in sys.modules
    if not probe:
        return info
    try:
        import torch

        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            info.update(count=n, names=[torch.cuda.get_device_name(k) for k in range(n)], cuda=torch.version.cuda)
    except Exception as exc:  # pragma: no cover - broken driver etc.
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


def _shard_name(i: int, n: int) -> str:
    return f"shard-{i:02d}-of-{n:02d}"


def _read_journal(path: Path) -> list[list[dict]]:
    """Complete entries of a journal; a torn last entry (killed mid-write) is dropped."""
    entries = []
    if not path.exists():
        return entries
    data = path.read_bytes()
    pos = 0
    while pos + 8 <= len(data):
        size = int.from_bytes(data[pos : pos + 8], "little")
        if pos + 8 + size > len(data):
            break
        try:
            entries.append(pickle.loads(data[pos + 8 : pos + 8 + size]))
        except Exception:  # torn or corrupt entry: stop here
            break
        pos += 8 + size
    return entries


def _next_part(shard_dir: Path) -> int:
    parts = shard_dir.glob("part-*.parquet")
    return 1 + max((int(p.stem.split("-")[1]) for p in parts), default=-1)


def _write_part(shard_dir: Path, index: int, rows: list[dict]) -> Path:
    part = shard_dir / f"part-{index:05d}.parquet"
    tmp = part.with_name(part.name + f".tmp{os.getpid()}")
    pd.DataFrame(rows, columns=list(RECORD_COLUMNS)).to_parquet(tmp, index=False)
    os.replace(tmp, part)  # atomic: a killed process never leaves a half-written part
    return part


def _recover_journal(shard_dir: Path, done: set) -> int:
    """Move the journal's complete, not yet stored items into a part; return how many."""
    path = shard_dir / JOURNAL
    rows, ids = [], set()
    for entry in _read_journal(path):
        iid = entry[0]["item_id"] if entry else None
        if entry and iid not in done and iid not in ids:
            rows.extend(entry)
            ids.add(iid)
    if rows:
        _write_part(shard_dir, _next_part(shard_dir), rows)
    path.unlink(missing_ok=True)
    return len(ids)


class _PartWriter:
    """Journal every item at once; turn the journal into a parquet part every so often."""

    def __init__(self, shard_dir: Path, flush_every: int, flush_seconds: float):
        self.dir, self.flush_every, self.flush_seconds = shard_dir, int(flush_every), float(flush_seconds)
        self.next_part = _next_part(shard_dir)
        self.journal = open(shard_dir / JOURNAL, "ab")
        self.rows: list[dict] = []
        self.items = 0
        self.last = time.monotonic()

    def add(self, rows: list[dict]) -> None:
        data = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
        self.journal.write(len(data).to_bytes(8, "little") + data)
        self.journal.flush()  # in the OS's hands: survives the process being killed
        self.rows.extend(rows)
        self.items += 1
        if self.items >= self.flush_every or time.monotonic() - self.last >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            _write_part(self.dir, self.next_part, self.rows)
            self.next_part += 1
        # a kill between the rename above and this truncation leaves items in both: recovery dedups
        self.journal.seek(0)
        self.journal.truncate()
        self.rows, self.items, self.last = [], 0, time.monotonic()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.journal.close()
        (self.dir / JOURNAL).unlink(missing_ok=True)


def _plain(x):
    """numpy scalars -> Python (item ids are pickled into the journal and compared as keys)."""
    return x.item() if hasattr(x, "item") and not isinstance(x, (str, bytes)) else x


def run_generation(
    items: pd.DataFrame,
    engine: Engine,
    out_dir: str | Path,
    *,
    role: str,
    sampling: Sampling,
    thinking: bool | None = None,
    shard=None,
    batch_size: int = 64,
    seed: int = 0,
    messages_col: str = "messages",
    progress: bool = True,
    stream: bool | None = None,
    window: int | None = None,
    flush_every: int = 256,
    flush_seconds: float = 30.0,
    sampling_overrides: Mapping | None = None,
) -> dict:
    """Generate ``role`` completions for every item of this shard not yet on disk.

    Parameters
    ----------
    items : DataFrame
        Needs ``item_id`` (unique) and ``messages_col`` (lists of ``{"role", "content"}`` dicts).
    engine : Engine
        Streaming engines (vLLM) get the whole shard; others synchronous chunks of ``batch_size``.
    out_dir : path
        The run folder; records go to ``<out_dir>/<role>/shard-ii-of-nn/``.
    role : {"think", "nothink", "verbalized"}
    sampling : Sampling
        Shared settings; the seed of item ``i`` is ``item_seed(seed, i)``.
    thinking : bool, optional
        Split reasoning from answer (default: from the model name).
    shard : "i/n" or (i, n), optional
    batch_size : int
        Chunk size when the engine cannot stream (or ``stream=False``).
    seed : int
    messages_col : str
    progress : bool
        A tqdm bar.
    stream : bool, optional
        ``None``: stream when the engine can; ``False``: the synchronous chunked path.
    window : int, optional
        Requests in flight when streaming (``None``: the whole shard).
    flush_every, flush_seconds : int, float
        A parquet part is written every ``flush_every`` items or ``flush_seconds`` seconds; in
        between, finished items live in the shard's append-only journal.
    sampling_overrides : mapping, optional
        ``{item_id: {"max_tokens": ...}}``: per-item changes to ``sampling`` (benchmarks with
        long-tailed lengths); recorded in the manifest.

    Returns
    -------
    dict
        ``done_before``, ``recovered`` (journal items saved from a killed run), ``generated``,
        ``shard``, ``tokens``, ``wall_s``, ``tokens_per_s``, ``stream``.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    for col in ("item_id", messages_col):
        if col not in items.columns:
            raise ValueError(f"items lack column {col!r}; they have {list(items.columns)}")
    if items["item_id"].duplicated().any():
        dup = items["item_id"][items["item_id"].duplicated()].tolist()[:5]
        raise ValueError(f"duplicate item_id(s) {dup}")
    if int(flush_every) < 1:
        raise ValueError(f"flush_every must be >= 1, got {flush_every}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    t0 = time.perf_counter()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    thinking = is_thinking_model(engine.model) if thinking is None else bool(thinking)
    i, n = parse_shard(shard)
    role_dir = Path(out_dir) / role
    shard_dir = role_dir / _shard_name(i, n)
    shard_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "model": engine.model,
        "backend": engine.backend,
        "logprobs_mode": engine.logprobs_mode,
        "thinking": thinking,
        "sampling": {k: v for k, v in sampling.to_dict().items() if k != "seed"},
        "seed": int(seed),
    }
    overrides = {_plain(k): dict(v) for k, v in (sampling_overrides or {}).items()}
    if overrides:
        settings["sampling_overrides"] = {str(k): v for k, v in sorted(overrides.items(), key=lambda kv: str(kv[0]))}
    _check_manifest(role_dir, settings)
    mine = shard_items(items, (i, n))
    recovered = _recover_journal(shard_dir, _done_ids(role_dir))
    done = _done_ids(role_dir)
    todo = mine[~mine["item_id"].isin(done)]
    end_ids = engine.end_think_ids() if thinking else set()
    requests = [
        (
            iid,
            conv,
            sampling.with_(seed=item_seed(seed, iid), **overrides.get(_plain(iid), {})),
        )
        for iid, conv in zip(todo["item_id"].map(_plain), todo[messages_col])
    ]
    streaming = (
        callable(getattr(engine, "stream", None)) and getattr(engine, "can_stream", True) and stream is not False
    )
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), initial=len(mine) - len(todo), desc=f"{role} shard {i}/{n}", unit="item")
    generated = tokens = 0
    status = "running"
    writer = _PartWriter(shard_dir, flush_every, flush_seconds)
    try:
        for iid, comps in iter_completions(engine, requests, stream=stream, batch_size=batch_size, window=window):
            s_seed = item_seed(seed, iid)
            rows = []
            for k, c in enumerate(comps):
                sp = split_thinking(c, thinking=thinking, end_ids=end_ids, count_tokens=engine.count_tokens)
                rows.append(
                    {
                        "item_id": iid,
                        "role": role,
                        "sample": k,
                        "model": engine.model,
                        "backend": engine.backend,
                        "logprobs_mode": engine.logprobs_mode,
                        "seed": s_seed,
                        "text": c.text,
                        "reasoning": sp.reasoning,
                        "answer": sp.answer,
                        "n_tokens": len(c.token_ids),
                        "reasoning_tokens": sp.reasoning_tokens,
                        "answer_tokens": sp.answer_tokens,
                        "token_logprobs": c.token_logprobs,
                        "finish_reason": c.finish_reason,
                    }
                )
                tokens += len(c.token_ids)
            writer.add(rows)
            generated += 1
            if bar is not None:
                bar.update(1)
        status = "done"
    except BaseException as exc:
        status = f"failed: {type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        writer.close()  # what finished before a failure is kept
        if bar is not None:
            bar.close()
        wall = time.perf_counter() - t0
        facts = {
            "shard": f"{i}/{n}",
            "status": status,
            "started": started,
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_s": round(wall, 3),
            "done_before": len(mine) - len(todo),
            "recovered": recovered,
            "generated": generated,
            "tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None,
            "stream": streaming,
            "window": window,
            "batch_size": int(batch_size),
            "model": engine.model,
            "backend": engine.backend,
            "sampling": sampling.to_dict(),
            "seed": int(seed),
            "item_seeds": "item_seed(seed, item_id) = sha256('seed:item_id')[:4] & 0x7fffffff",
            "versions": library_versions(),
            "gpu": gpu_info(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        _append_run_facts(role_dir, i, n, facts)
    return {
        "done_before": len(mine) - len(todo),
        "recovered": recovered,
        "generated": generated,
        "shard": (i, n),
        "tokens": tokens,
        "wall_s": facts["wall_s"],
        "tokens_per_s": facts["tokens_per_s"],
        "stream": streaming,
    }


def _append_run_facts(role_dir: Path, i: int, n: int, facts: dict) -> None:
    runs = role_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    with open(runs / f"{_shard_name(i, n)}.jsonl", "a") as f:
        f.write(json.dumps(facts, default=str) + "\n")


def load_run_facts(out_dir: str | Path, role: str) -> list[dict]:
    """Every recorded invocation of ``role`` (all shards, oldest first per shard)."""
    facts = []
    for path in sorted((Path(out_dir) / role / "runs").glob("shard-*.jsonl")):
        facts.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return facts


def load_generations(out_dir: str | Path, role: str, items: Sequence | pd.Series | None = None) -> pd.DataFrame:
    """Merge every shard of ``role``; rows ordered as ``items`` (then by sample).

    With ``items`` given, a missing item raises an error naming it (run the missing shards).
    """
    role_dir = Path(out_dir) / role
    parts = sorted(role_dir.glob("shard-*/part-*.parquet"))
    if not parts:
        raise FileNotFoundError(f"no generations under {role_dir}: run 01_generate first")
    df = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    dup = df.duplicated(["item_id", "sample"])
    if dup.any():
        raise ValueError(f"{role_dir}: item(s) {df.loc[dup, 'item_id'].unique()[:5].tolist()} generated twice")
    if items is not None:
        order = pd.Index(list(items))
        missing = order.difference(pd.Index(df["item_id"].unique()))
        if len(missing):
            raise ValueError(
                f"{role_dir}: {len(missing)} item(s) not generated yet, e.g. "
                f"{missing[:5].tolist()}; run the remaining shards"
            )
        df = df[df["item_id"].isin(order)]
        df = df.assign(_o=order.get_indexer(df["item_id"])).sort_values(["_o", "sample"]).drop(columns="_o")
    else:
        df = df.sort_values(["item_id", "sample"])
    return df.reset_index(drop=True)
