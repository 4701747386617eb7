"""Benchmark loaders: MATH-500, GPQA, ZebraLogic and Arena-Hard from local files, and the shipped walk.

Nothing downloads. Put a ``.jsonl``, ``.parquet`` or ``.csv`` file at
``data/benchmarks/<name>.<ext>`` (or pass ``path=``; or set ``GPAC_BENCHMARKS`` to a folder); the
error for a missing file gives the ``datasets`` command that writes it from Hugging Face (online).

Expected source columns (the public releases' names; other case and ``_`` for a space are
accepted too, and the aliases in :data:`BENCHMARKS`):

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
``arith``       :mod:`gpac_utils.llm.arithmetic`   MATH's columns, drawn procedurally (seed 0, 2,030 items)
==============  =================================  ==========================================================

:func:`load_benchmark` returns one row per item with canonical columns ``item_id``, ``group``,
``question`` (text shown to the router and the verbalized prompt), ``prompt`` (the full user
message), ``gold`` (answer string / correct letter / solution JSON / empty), ``messages``.
The ``walk`` has one conversation per role with a walk prompt (:attr:`gpac_utils.scores.Role.walk_messages`,
:func:`gpac_utils.llm.grading.walk_messages`): ``messages`` (the first such role's, ``think``: a one-shot
``\\boxed{}`` example) and ``messages_<role>`` for each other (``messages_nothink``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..checks import ParameterError
from ..registry import Registry, removed
from ..scores import ROLES
from ..workflow.paths import DATA
from . import arithmetic, grading

BENCHMARK_DIR = DATA / "benchmarks"
EXTENSIONS = (".jsonl", ".parquet", ".csv")
MATH_COLUMNS = ("problem", "answer", "subject", "unique_id")
GPQA_WRONG = tuple(f"Incorrect Answer {k}" for k in (1, 2, 3))
GPQA_COLUMNS = ("Question", "Correct Answer", *GPQA_WRONG, "High-level domain", "Record ID")


# --------------------------------------------------------------------------- canonical columns per format
def _math_items(df: pd.DataFrame, seed: int) -> dict:
    """MATH's format (``problem``, ``answer``, ``subject``, ``unique_id``)."""
    prompts = [grading.math_prompt(p) for p in df["problem"]]
    return {
        "item_id": df["unique_id"],
        "group": df["subject"],
        "question": df["problem"],
        "prompt": prompts,
        "gold": df["answer"],
    }


def _gpqa_items(df: pd.DataFrame, seed: int) -> dict:
    wrong = df[list(GPQA_WRONG)].to_numpy().tolist()
    mcs = [grading.shuffle_choices(*x, seed) for x in zip(df["Correct Answer"], wrong, df["Record ID"])]
    prompts = [grading.gpqa_prompt(q, choices) for q, (choices, _) in zip(df["Question"], mcs)]
    return {
        "item_id": df["Record ID"],
        "group": df["High-level domain"],
        "question": df["Question"].astype(str).str.strip(),
        "prompt": prompts,
        "gold": [letter for _, letter in mcs],
    }


def _zebra_items(df: pd.DataFrame, seed: int) -> dict:
    sols = [_solution(v, i) for i, v in enumerate(df["solution"])]
    prompts = [grading.zebra_prompt(p, s) for p, s in zip(df["puzzle"], sols)]
    return {
        "item_id": df["id"],
        "group": [grading.zebra_size_group(s) for s in df["size"]],
        "question": df["puzzle"],
        "prompt": prompts,
        "gold": [json.dumps(s) for s in sols],
    }


def _arena_prompts(df: pd.DataFrame) -> pd.DataFrame:
    """Arena-Hard's first turn as the ``prompt`` of a release that has only ``turns``."""
    if "prompt" not in df.columns and "turns" in df.columns:
        df = df.assign(prompt=[_first_turn(t, i) for i, t in enumerate(df["turns"])])
    return df


def _arena_items(df: pd.DataFrame, seed: int) -> dict:
    groups = df["category"] if "category" in df.columns else "all"
    return {"item_id": df["question_id"], "group": groups, "question": df["prompt"], "prompt": df["prompt"], "gold": ""}


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: where its items come from and how they become the canonical columns.

    Parameters
    ----------
    name : str
        Its name (``load_benchmark(name)``, ``--benchmark name``; its grader in
        :data:`gpac_utils.llm.grading.GRADERS`).
    hf : tuple or None
        Hugging Face ``(repo, config, split)`` (named in the error for a missing file); ``None``:
        shipped or generated.
    required : tuple of str
        Source columns (after aliasing).
    aliases : dict
        Other releases' column names -> ours.
    items : callable
        ``items(df, seed) -> dict`` of the canonical columns ``item_id``, ``group``, ``question``,
        ``prompt``, ``gold``.
    walk : bool, default False
        The walk's two conversations (one-shot ``think``, answer-only ``nothink``) and samplings.
    prepare : callable, optional
        ``prepare(df) -> df`` before the required columns are checked.
    generate : callable, optional
        ``generate() -> df``: the source items when there is no file (drawn procedurally).
    shipped : Path, optional
        The item file the repository ships (used when no local file overrides it).
    """

    name: str
    hf: tuple | None
    required: tuple[str, ...]
    aliases: dict
    items: Callable[[pd.DataFrame, int], dict]
    walk: bool = False
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    generate: Callable[[], pd.DataFrame] | None = None
    shipped: Path | None = None


_MATH_ALIASES = {"id": "unique_id", "type": "subject"}
#: The benchmarks, by name.
BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark",
    [
        Benchmark("math500", ("HuggingFaceH4/MATH-500", None, "test"), MATH_COLUMNS, _MATH_ALIASES, _math_items),
        Benchmark(
            "gpqa",
            ("Idavidrein/gpqa", "gpqa_main", "train"),
            GPQA_COLUMNS,
            {"domain": "High-level domain", "id": "Record ID"},
            _gpqa_items,
        ),
        Benchmark(
            "zebralogic",
            ("WildEval/ZebraLogic", "grid_mode", "test"),
            ("id", "size", "puzzle", "solution"),
            {},
            _zebra_items,
        ),
        Benchmark(
            "arena_hard",
            ("lmarena-ai/arena-hard-auto", None, "train"),
            ("question_id", "prompt"),
            {"uid": "question_id"},
            _arena_items,
            prepare=_arena_prompts,
        ),
        Benchmark(
            "walk", None, MATH_COLUMNS, _MATH_ALIASES, _math_items, walk=True, shipped=DATA / "walk" / "items.jsonl"
        ),
        Benchmark("arith", None, MATH_COLUMNS, {}, _math_items, walk=True, generate=arithmetic.make_items),
    ],
)
__getattr__ = removed(
    __name__,
    {"WALK_LIKE": "BENCHMARKS.names(walk=True)", "Spec": "Benchmark", "SHIPPED": "BENCHMARKS[name].shipped"},
)


def benchmark_dir() -> Path:
    return Path(os.environ.get("GPAC_BENCHMARKS", BENCHMARK_DIR))


def find_local(name: str) -> Path | None:
    return next((p for ext in EXTENSIONS if (p := benchmark_dir() / f"{name}{ext}").exists()), None)


def read_items(path: str | Path) -> pd.DataFrame:
    """A benchmark item file (.jsonl, .parquet, .csv, .tsv) read as it is: text stays text.

    Uses the one reader of the package (:func:`gpac_utils.data.read_frame`).
    """
    text = {"dtype": str, "keep_default_na": False}
    kw = {"jsonl": {"dtype": False}, "csv": text, "tsv": text}.get(data.table_format(path), {})
    return data.read_frame(path, **kw)


def _missing(name: str) -> FileNotFoundError:
    """Where to put ``name``'s file, and the one command that writes it from Hugging Face (online)."""
    (repo, config, split), required = BENCHMARKS[name].hf, list(BENCHMARKS[name].required)
    export = f"datasets.load_dataset({repo!r}, {config!r}, split={split!r}).to_json('{name}.jsonl')"
    return FileNotFoundError(
        f"no local file for benchmark {name!r}: put {name}.jsonl, {name}.parquet or {name}.csv with columns "
        f"{required} into {benchmark_dir()} (or pass path=..., or set GPAC_BENCHMARKS), e.g. with `{export}` "
        f"(Source: https://huggingface.co/datasets/{repo})"
    )


def _canonical_source(df: pd.DataFrame, name: str, where: str) -> pd.DataFrame:
    """``df`` with the required columns under their names (aliases, case and ``_`` for a space)."""
    spec, norm = BENCHMARKS[name], lambda c: re.sub(r"[^a-z0-9]", "", str(c).lower())
    renames = {norm(c): c for c in spec.required} | {norm(k): v for k, v in spec.aliases.items()}
    df = df.rename(columns={c: renames[norm(c)] for c in df.columns if renames.get(norm(c), c) not in df.columns})
    if spec.prepare is not None:
        df = spec.prepare(df)
    missing = [c for c in spec.required if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing} for benchmark {name!r}; it has {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{where}: no items (the file has a header and no rows)")
    for c in spec.required:
        bad = df[c].isna().to_numpy()
        if bad.any():
            raise ValueError(f"{where}: column {c!r} is empty in row(s) {np.flatnonzero(bad)[:5].tolist()}")
    return df.reset_index(drop=True)


def _first_turn(turns, row) -> str:
    try:
        return str((json.loads(turns) if isinstance(turns, str) else turns)[0]["content"])
    except (TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"arena_hard row {row}: 'turns' has no first turn with 'content'") from exc


def _solution(v, row) -> dict:
    try:
        sol = v if isinstance(v, dict) else json.loads(v)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"zebralogic row {row}: 'solution' is neither a dict nor JSON text") from exc
    if "header" not in sol or "rows" not in sol:
        raise ValueError(f"zebralogic row {row}: 'solution' needs keys 'header' and 'rows'")
    return {"header": [str(h) for h in sol["header"]], "rows": [[str(x) for x in r] for r in sol["rows"]]}


def load_benchmark(name: str, path: str | Path | None = None, *, n_items: int | None = None, seed=0) -> pd.DataFrame:
    """Load ``name`` into canonical columns (see module doc). ``n_items`` keeps a seeded random subset
    (in the file's order); ``seed`` also drives GPQA's choice shuffling."""
    spec = BENCHMARKS[name]  # an unknown name: one line listing the known ones
    if n_items is not None and int(n_items) < 1:
        raise ParameterError(f"n_items: must be >= 1, got {n_items}")
    path = path or find_local(name) or spec.shipped
    if path is not None:
        src, where = read_items(path), str(path)
    elif spec.generate is not None:  # procedurally generated (arith: gpac_utils.llm.arithmetic, seed 0)
        src, where = spec.generate(), spec.generate.__module__
    else:
        raise _missing(name)
    df = _canonical_source(src, name, where)
    out = pd.DataFrame(spec.items(df, seed), index=df.index).astype(str)
    dup = out["item_id"].duplicated()
    if dup.any():
        raise ValueError(f"{where}: duplicate item ids {out.loc[dup, 'item_id'].tolist()[:5]}")
    if n_items is not None and n_items < len(out):
        keep = np.sort(np.random.default_rng(seed).choice(len(out), size=int(n_items), replace=False))
        out = out.iloc[keep].reset_index(drop=True)
    if spec.walk:  # each role's walk prompt (Role.walk_messages): the first role's is the items' conversation
        prompted = [r for r in ROLES.values() if r.walk_messages is not None]
        for k, role in enumerate(prompted):
            out[f"messages_{role.name}" if k else "messages"] = [role.walk_messages(q) for q in out["question"]]
    else:
        out["messages"] = [[{"role": "user", "content": p}] for p in out["prompt"]]
    return out
