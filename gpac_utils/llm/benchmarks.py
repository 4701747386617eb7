"""Benchmark loaders: MATH-500, GPQA, ZebraLogic and Arena-Hard from local files, and the shipped walk.

Nothing downloads at import or in tests. Put a ``.jsonl``, ``.parquet`` or ``.csv`` file at
``data/benchmarks/<name>.<ext>`` (or pass ``path=``; or set ``GPAC_BENCHMARKS`` to a folder).
When no local file exists and the optional ``datasets`` library is installed, the loader uses
its local cache only (``HF_DATASETS_OFFLINE=1``; run ``datasets.load_dataset(<repo>)`` once
yourself, online, to fill it).

Expected source columns (the public releases' names; aliases in :data:`BENCHMARKS`):

==============  =================================  ==========================================================
name            Hugging Face source                columns
==============  =================================  ==========================================================
``math500``     HuggingFaceH4/MATH-500 (test)      ``problem``, ``answer``, ``subject``, ``unique_id``
``gpqa``        Idavidrein/gpqa (gpqa_main, 448)   ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``,
                                                   ``High-level domain``, ``Record ID``
``zebralogic``  WildEval/ZebraLogic (grid_mode)    ``id``, ``size`` ("N*M"), ``puzzle``, ``solution``
                                                   (``{"header": [...], "rows": [[...]]}``, dict or JSON text)
``arena_hard``  arena-hard-auto question.jsonl     ``question_id`` or ``uid``; ``turns[0].content`` or
                                                   ``prompt``; ``category`` / ``cluster`` (optional)
``walk``        ``data/walk/items.jsonl``          MATH's columns (``problem``, ``answer``, ``subject``,
                                                   ``unique_id``), shipped: 48 arithmetic / easy algebra
                                                   items in 4 subjects, for tiny models on CPU
==============  =================================  ==========================================================

:func:`load_benchmark` returns one row per item with canonical columns ``item_id``, ``group``,
``question`` (text shown to the router and the verbalized prompt), ``prompt`` (the full user
message), ``gold`` (answer string / correct letter / solution JSON / empty), ``messages``.
The ``walk`` has one conversation per role: ``messages`` (``think``: a one-shot ``\\boxed{}``
example, :func:`gpac_utils.llm.grading.walk_messages`) and ``messages_nothink``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..workflow.paths import DATA
from . import arithmetic, grading

BENCHMARK_DIR = DATA / "benchmarks"
#: Item files that the repository ships (used when no local file overrides them).
SHIPPED = {"walk": DATA / "walk" / "items.jsonl"}
EXTENSIONS = (".jsonl", ".parquet", ".csv")


@dataclass(frozen=True)
class Spec:
    hf_repo: str
    hf_config: str | None
    hf_split: str
    required: tuple[str, ...]  # canonical source columns (after aliasing)
    aliases: dict


BENCHMARKS: dict[str, Spec] = {
    "math500": Spec(
        "HuggingFaceH4/MATH-500",
        None,
        "test",
        ("problem", "answer", "subject", "unique_id"),
        {"id": "unique_id", "type": "subject"},
    ),
    "gpqa": Spec(
        "Idavidrein/gpqa",
        "gpqa_main",
        "train",
        (
            "Question",
            "Correct Answer",
            "Incorrect Answer 1",
            "Incorrect Answer 2",
            "Incorrect Answer 3",
            "High-level domain",
            "Record ID",
        ),
        {
            "question": "Question",
            "correct_answer": "Correct Answer",
            "incorrect_answer_1": "Incorrect Answer 1",
            "incorrect_answer_2": "Incorrect Answer 2",
            "incorrect_answer_3": "Incorrect Answer 3",
            "domain": "High-level domain",
            "record_id": "Record ID",
            "id": "Record ID",
        },
    ),
    "zebralogic": Spec("WildEval/ZebraLogic", "grid_mode", "test", ("id", "size", "puzzle", "solution"), {}),
    "arena_hard": Spec("lmarena-ai/arena-hard-auto", None, "train", ("question_id", "prompt"), {"uid": "question_id"}),
    "walk": Spec("", None, "", ("problem", "answer", "subject", "unique_id"), {"id": "unique_id", "type": "subject"}),
    "arith": Spec("", None, "", ("problem", "answer", "subject", "unique_id"), {}),  # drawn by .arithmetic
}
#: Benchmarks that share the walk's two conversations (one-shot ``think``, answer-only ``nothink``).
WALK_LIKE = ("walk", "arith")


def benchmark_dir() -> Path:
    return Path(os.environ.get("GPAC_BENCHMARKS", BENCHMARK_DIR))


def find_local(name: str) -> Path | None:
    folder = benchmark_dir()
    for ext in EXTENSIONS:
        p = folder / f"{name}{ext}"
        if p.exists():
            return p
    return None


def read_items(path: str | Path) -> pd.DataFrame:
    """A benchmark item file (.jsonl, .parquet, .csv, .tsv) read as it is: text stays text.

    Uses the one reader of the package (:func:`gpac_utils.data.read_frame`).
    """
    fmt = data.table_format(path)
    if fmt == "jsonl":
        return data.read_frame(path, dtype=False)
    if fmt in ("csv", "tsv"):
        return data.read_frame(path, dtype=str, keep_default_na=False)
    return data.read_frame(path)


def _from_hf_cache(spec: Spec, name: str) -> pd.DataFrame:
    try:
        import datasets  # optional
    except ImportError as exc:
        raise FileNotFoundError(
            _missing_message(name, spec, hf_note="the `datasets` library is not installed either")
        ) from exc
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        ds = datasets.load_dataset(spec.hf_repo, spec.hf_config, split=spec.hf_split)
    except Exception as exc:  # offline and not cached
        raise FileNotFoundError(
            _missing_message(
                name, spec, hf_note=f"and {spec.hf_repo} is not in the local `datasets` cache ({type(exc).__name__})"
            )
        ) from exc
    return ds.to_pandas()


def _missing_message(name: str, spec: Spec, hf_note: str) -> str:
    folder = benchmark_dir()
    return (
        f"no local file for benchmark {name!r}: put {name}.jsonl, {name}.parquet or {name}.csv with columns "
        f"{list(spec.required)} into {folder} (or pass path=..., or set GPAC_BENCHMARKS); {hf_note}. "
        f"Source: https://huggingface.co/datasets/{spec.hf_repo}"
    )


def _canonical_source(df: pd.DataFrame, name: str, spec: Spec, where: str) -> pd.DataFrame:
    if name == "arena_hard":
        df = df.rename(columns={k: v for k, v in spec.aliases.items() if k in df.columns and v not in df.columns})
        if "prompt" not in df.columns and "turns" in df.columns:
            df = df.assign(prompt=[_first_turn(t, i) for i, t in enumerate(df["turns"])])
    else:
        df = df.rename(columns={k: v for k, v in spec.aliases.items() if k in df.columns and v not in df.columns})
    missing = [c for c in spec.required if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing} for benchmark {name!r}; it has {list(df.columns)}")
    for c in spec.required:
        bad = df[c].isna().to_numpy()
        if bad.any():
            raise ValueError(f"{where}: column {c!r} is empty in row(s) {np.flatnonzero(bad)[:5].tolist()}")
    return df.reset_index(drop=True)


def _first_turn(turns, row) -> str:
    if isinstance(turns, str):
        turns = json.loads(turns)
    try:
        return str(turns[0]["content"])
    except (TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"arena_hard row {row}: 'turns' has no first turn with 'content'") from exc


def _solution(v, row):
    if isinstance(v, dict):
        sol = v
    else:
        try:
            sol = json.loads(v)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"zebralogic row {row}: 'solution' is neither a dict nor JSON text") from exc
    if "header" not in sol or "rows" not in sol:
        raise ValueError(f"zebralogic row {row}: 'solution' needs keys 'header' and 'rows'")
    return {"header": [str(h) for h in sol["header"]], "rows": [[str(x) for x in r] for r in sol["rows"]]}


def load_benchmark(
    name: str,
    path: str | Path | None = None,
    *,
    n_items: int | None = None,
    seed: int = 0,
    system_prompt: str | None = None,
) -> pd.DataFrame:
    """Load ``name`` into canonical columns (see module doc). ``n_items`` keeps a seeded random subset
    (in the file's order); ``seed`` also drives GPQA's choice shuffling."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {sorted(BENCHMARKS)}")
    spec = BENCHMARKS[name]
    if path is None:
        path = find_local(name) or SHIPPED.get(name)
    if path is not None:
        src, where = read_items(path), str(path)
    elif name == "arith":  # procedurally generated: gpac_utils.llm.arithmetic (seed 0, its default size)
        src, where = arithmetic.make_items(), "gpac_utils.llm.arithmetic"
    else:
        src, where = _from_hf_cache(spec, name), spec.hf_repo
    df = _canonical_source(src, name, spec, where)
    if name in (*WALK_LIKE, "math500"):  # the walk's items are in MATH format
        out = pd.DataFrame(
            {
                "item_id": df["unique_id"].astype(str),
                "group": df["subject"].astype(str),
                "question": df["problem"].astype(str),
                "prompt": [grading.math_prompt(p) for p in df["problem"]],
                "gold": df["answer"].astype(str),
            }
        )
    elif name == "gpqa":
        mcs = [
            grading.shuffle_choices(
                r["Correct Answer"], [r[f"Incorrect Answer {k}"] for k in (1, 2, 3)], r["Record ID"], seed
            )
            for _, r in df.iterrows()
        ]
        out = pd.DataFrame(
            {
                "item_id": df["Record ID"].astype(str),
                "group": df["High-level domain"].astype(str),
                "question": df["Question"].astype(str).str.strip(),
                "prompt": [grading.gpqa_prompt(q, mc.choices) for q, mc in zip(df["Question"], mcs)],
                "gold": [mc.answer for mc in mcs],
            }
        )
    elif name == "zebralogic":
        sols = [_solution(v, i) for i, v in enumerate(df["solution"])]
        out = pd.DataFrame(
            {
                "item_id": df["id"].astype(str),
                "group": [grading.zebra_size_group(s) for s in df["size"]],
                "question": df["puzzle"].astype(str),
                "prompt": [grading.zebra_prompt(p, s) for p, s in zip(df["puzzle"], sols)],
                "gold": [json.dumps(s) for s in sols],
            }
        )
    else:  # arena_hard
        group = df["category"].astype(str) if "category" in df.columns else pd.Series("all", index=df.index)
        out = pd.DataFrame(
            {
                "item_id": df["question_id"].astype(str),
                "group": group,
                "question": df["prompt"].astype(str),
                "prompt": df["prompt"].astype(str),
                "gold": "",
            }
        )
    dup = out["item_id"].duplicated()
    if dup.any():
        raise ValueError(f"{where}: duplicate item ids {out.loc[dup, 'item_id'].tolist()[:5]}")
    if n_items is not None and n_items < len(out):
        keep = np.sort(np.random.default_rng(seed).choice(len(out), size=int(n_items), replace=False))
        out = out.iloc[keep].reset_index(drop=True)
    sys_msg = [{"role": "system", "content": system_prompt}] if system_prompt else []
    if name in WALK_LIKE:
        out["messages"] = [sys_msg + grading.walk_messages(q, "think") for q in out["question"]]
        out["messages_nothink"] = [sys_msg + grading.walk_messages(q, "nothink") for q in out["question"]]
        return out
    out["messages"] = [sys_msg + [{"role": "user", "content": p}] for p in out["prompt"]]
    return out
