"""The CPU walk: both roles from one tiny model, on the shipped ``walk`` items, in minutes.

The paper's pairs are two models (thinking / non-thinking). The walk imitates a pair with a single
tiny instruct model (:mod:`gpac_utils.llm.tiny`) under two prompts and samplings, so that the two
roles differ in accuracy and the binary loss is not all zero:

* ``think``: a one-shot ``\\boxed{}`` example, then the problem with "reason step by step"
  (:func:`gpac_utils.llm.grading.walk_messages`); greedy, up to 64 tokens;
* ``nothink``: the problem and "reply with the final answer only"; T = 1.0, up to 16 tokens;
* ``verbalized``: the paper's confidence prompt on the nothink answer; T = 0.7, top-p 0.95,
  3 samples of up to 12 tokens (see :data:`WALK_SAMPLING`).

Records go to the same run folder layout as :func:`gpac_utils.llm.generation.generate`
(``items.parquet``, ``think/``, ``nothink/``, ``verbalized/``; resumable), so ``02_scores`` and
:func:`gpac_utils.llm.scoring.score_run` read them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from .generation.base import Sampling
from .generation.pipeline import save_items
from .generation.runner import ROLES, load_generations, run_generation, shard_items

#: Default model of the walk (a :data:`gpac_utils.llm.tiny.TINY_MODELS` name).
WALK_MODEL = "smollm2-135m"
WALK_SAMPLING: dict[str, Sampling] = {
    "think": Sampling(temperature=0.0, max_tokens=64),
    "nothink": Sampling(temperature=1.0, max_tokens=16),
    "verbalized": Sampling(temperature=0.7, top_p=0.95, max_tokens=12, n=3),
}
#: Item column holding each role's conversation.
MESSAGES_COLUMN = {"think": "messages", "nothink": "messages_nothink", "verbalized": "messages_verbalized"}


def walk_samplings(
    think_max_tokens: int | None = None,
    nothink_max_tokens: int | None = None,
    n_verbalized: int | None = None,
    verbalized_max_tokens: int | None = None,
) -> dict[str, Sampling]:
    """:data:`WALK_SAMPLING` with some settings changed (``None`` keeps the default)."""
    for name, v in {
        "think_max_tokens": think_max_tokens,
        "nothink_max_tokens": nothink_max_tokens,
        "n_verbalized": n_verbalized,
        "verbalized_max_tokens": verbalized_max_tokens,
    }.items():
        if v is not None and int(v) < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    return {
        "think": WALK_SAMPLING["think"].with_(max_tokens=think_max_tokens),
        "nothink": WALK_SAMPLING["nothink"].with_(max_tokens=nothink_max_tokens),
        "verbalized": WALK_SAMPLING["verbalized"].with_(n=n_verbalized, max_tokens=verbalized_max_tokens),
    }


def generate_walk(
    items: pd.DataFrame,
    folder: str | Path,
    *,
    model: str = WALK_MODEL,
    samplings: Mapping[str, Sampling] | None = None,
    roles=ROLES,
    shard="0/1",
    batch_size: int = 16,
    seed: int = 0,
    engine=None,
    engine_factory: Callable | None = None,
    device: str = "cpu",
    progress: bool = True,
    windows: Mapping[str, int] | None = None,
) -> dict:
    """Generate the walk's roles for ``items`` (from ``load_benchmark("walk")``) into ``folder``.

    Parameters
    ----------
    items : DataFrame
        Needs ``item_id``, ``group``, ``question``, ``prompt``, ``gold``, ``messages`` and
        ``messages_nothink``.
    folder : str or Path
        The run folder (``data/generations/walk__<pair>``).
    model : str
        Model name or folder for both roles (default the tiny SmolLM2-135M-Instruct).
    samplings : mapping, optional
        Per-role :class:`Sampling` (default :data:`WALK_SAMPLING`).
    roles : sequence of str
        Which roles to run (``verbalized`` needs ``nothink`` first).
    shard : str
        ``"i/n"``: this process handles every n-th item from item i.
    batch_size : int
        Items per engine call (the transformers engine runs one ``generate`` per call).
    seed : int
        Base of the per-item seeds.
    engine, engine_factory : optional
        An engine to use, or ``engine_factory(model) -> Engine``; default a
        :class:`~gpac_utils.llm.generation.hf_backend.TransformersEngine` on ``device``.
    device : str
        Device of the default engine.
    progress : bool
        Show progress bars.
    windows : mapping, optional
        Per role, requests in flight at a time on a streaming engine (vLLM; default all). On vLLM's
        CPU build, seeded sampling fails when a prompt's prefill is split over steps ("CPU Generator
        does not use offset"): keep a sampled role's window times its prompt tokens (times ``n``)
        below the engine's ``max_num_batched_tokens``.

    Returns
    -------
    dict
        Per role, the runner's report (``done_before``, ``generated``, ``shard``).
    """
    from .scoring import verbalized_messages

    folder = Path(folder)
    samplings = dict(samplings or WALK_SAMPLING)
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"roles: unknown {unknown}; choose from {ROLES}")
    missing = [r for r in roles if r not in samplings]
    if missing:
        raise ValueError(f"samplings: no Sampling for role(s) {missing}")
    need = ["item_id", "question", "messages"] + (["messages_nothink"] if "nothink" in roles else [])
    lacking = [c for c in need if c not in items.columns]
    if lacking:
        raise ValueError(f"items: missing column(s) {lacking} (load them with load_benchmark('walk'))")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    save_items(items, folder)
    if engine is None:
        if engine_factory is not None:
            engine = engine_factory(model)
        else:
            from .generation.hf_backend import TransformersEngine

            engine = TransformersEngine(model, device=device)
    report = {}
    for role in roles:
        role_items = items
        if role == "verbalized":
            mine = shard_items(items, shard)
            nothink = load_generations(folder, "nothink", mine["item_id"])
            first = nothink[nothink["sample"] == 0].set_index("item_id")["answer"]
            role_items = items.copy()
            role_items[MESSAGES_COLUMN[role]] = [
                verbalized_messages(q, first.get(i, "")) for i, q in zip(items["item_id"], items["question"])
            ]
        report[role] = run_generation(
            role_items,
            engine,
            folder,
            role=role,
            sampling=samplings[role],
            thinking=False,
            shard=shard,
            batch_size=int(batch_size),
            seed=seed,
            messages_col=MESSAGES_COLUMN[role],
            progress=progress,
            window=(windows or {}).get(role),
        )
    return report


def generations_status(folder: str | Path) -> str:
    """``"missing"`` (no run), ``"incomplete"`` (some role lacks some item) or ``"complete"``."""
    from .generation.pipeline import load_items

    folder = Path(folder)
    if not (folder / "items.parquet").exists():
        return "missing"
    ids = load_items(folder)["item_id"]
    for role in ROLES:
        try:
            load_generations(folder, role, ids)
        except (FileNotFoundError, ValueError):
            return "incomplete"
    return "complete"
