"""Resumable, shardable generation runs.

Layout of a run folder (one per benchmark x model pair)::

    <out>/<role>/manifest.json                      model, backend, sampling, logprobs mode
    <out>/<role>/shard-00-of-04/part-00000.parquet  one file per finished batch (atomic rename)

``role`` is ``think``, ``nothink`` or ``verbalized``. On restart every item already present in
any part file under ``<out>/<role>/`` is skipped, so an interrupted run (killed process, CUDA
error, pre-emption) resumes where it stopped and the merged result is identical to an
uninterrupted run: each request uses its own seed (:func:`item_seed`), independent of batching.
Shards split the items round-robin (item ``k`` goes to shard ``k mod n``): run one process per GPU.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .base import Engine, Sampling, item_seed, split_thinking

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
) -> dict:
    """Generate ``role`` completions for every item of this shard not yet on disk.

    ``items`` needs ``item_id`` and ``messages`` (a list of ``{"role", "content"}`` dicts).
    Returns ``{"done_before": k, "generated": m, "shard": (i, n)}``.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    for col in ("item_id", messages_col):
        if col not in items.columns:
            raise ValueError(f"items lack column {col!r}; they have {list(items.columns)}")
    if items["item_id"].duplicated().any():
        dup = items["item_id"][items["item_id"].duplicated()].tolist()[:5]
        raise ValueError(f"duplicate item_id(s) {dup}")
    from .base import is_thinking_model

    thinking = is_thinking_model(engine.model) if thinking is None else bool(thinking)
    i, n = parse_shard(shard)
    role_dir = Path(out_dir) / role
    shard_dir = role_dir / f"shard-{i:02d}-of-{n:02d}"
    shard_dir.mkdir(parents=True, exist_ok=True)
    _check_manifest(
        role_dir,
        {
            "model": engine.model,
            "backend": engine.backend,
            "logprobs_mode": engine.logprobs_mode,
            "thinking": thinking,
            "sampling": {k: v for k, v in sampling.to_dict().items() if k != "seed"},
            "seed": int(seed),
        },
    )
    mine = shard_items(items, (i, n))
    done = _done_ids(role_dir)
    todo = mine[~mine["item_id"].isin(done)]
    parts = sorted(shard_dir.glob("part-*.parquet"))
    next_part = 1 + max((int(p.stem.split("-")[1]) for p in parts), default=-1)
    end_ids = engine.end_think_ids() if thinking else set()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), initial=len(mine) - len(todo), desc=f"{role} shard {i}/{n}", unit="item")
    generated = 0
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo.iloc[start : start + batch_size]
            samplings = [sampling.with_(seed=item_seed(seed, iid)) for iid in batch["item_id"]]
            outs = engine.generate(list(batch[messages_col]), samplings)
            rows = []
            for iid, s, comps in zip(batch["item_id"], samplings, outs):
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
                            "seed": s.seed,
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
            part = shard_dir / f"part-{next_part:05d}.parquet"
            tmp = part.with_name(part.name + f".tmp{os.getpid()}")
            pd.DataFrame(rows, columns=list(RECORD_COLUMNS)).to_parquet(tmp, index=False)
            os.replace(tmp, part)  # atomic: a killed process never leaves a half-written part
            next_part += 1
            generated += len(batch)
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    return {"done_before": len(mine) - len(todo), "generated": generated, "shard": (i, n)}


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
