"""The committed ``arith`` table and its regeneration check.

:data:`TABLE` holds SmolLM2-135M-Instruct on every item of the ``arith`` benchmark
(:mod:`gpac_utils.llm.arithmetic`), generated on the real vLLM engine on CPU with the settings
below and scored by ``02_scores``. :func:`check` regenerates a few of its items the same way and
:func:`compare` reads them against the committed rows.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..checks import check_int
from ..workflow.paths import BUILD, DATA
from . import generation
from .benchmarks import load_benchmark
from .engines import check_engine
from .scoring import score_run

#: The committed scored table: SmolLM2-135M-Instruct on every item, in the walk's roles, on the real
#: vLLM engine on CPU, scored by ``02_scores`` (data card: ``data/generated/README.md``).
TABLE = DATA / "generated" / "arith__smollm2.parquet"
#: ``vllm.LLM`` settings of the committed run (real vLLM on CPU, fp32; vLLM's default memory share fails
#: on a CPU, this one works; see docs/generation.md).
VLLM_CPU = {"dtype": "float32", "gpu_memory_utilization": 0.3, "max_model_len": 1024, "block_size": 32}
#: Requests in flight per role: vLLM's CPU build fails on seeded sampling when a prefill is split over
#: steps, so the sampled roles never hold more prompt tokens than one step takes (4096; nothink prompts
#: ~55 tokens, verbalized ~84 tokens). Records do not depend on it (per-item seeds).
WINDOWS = {"nothink": 48, "verbalized": 40}
#: Verbalized confidences per item in the committed run (the walk's three cost too much prefill on 2 cores).
VERBALIZED_SAMPLES = 1
#: Same engine, same seeds: scores may differ only in the last float bits.
SAME_ENGINE_ATOL = 1e-4
#: Another engine: least share of items whose greedy ``think`` correctness agrees.
OTHER_ENGINE_THINK_AGREEMENT = 0.8
#: Columns compared exactly on the same engine, and scores compared with :data:`SAME_ENGINE_ATOL`
#: (the router is cross-fitted on the whole table: not compared).
EXACT = (data.THINK_CORRECT, data.NOTHINK_CORRECT, data.THINK_TOKENS, data.NOTHINK_TOKENS)
CLOSE = ("score_logits", "score_verbalized")


@dataclass
class CheckResult:
    """What :func:`compare` found: per column the share of items that agree, and whether it passes."""

    same_engine: bool
    agreement: dict
    passed: bool
    n_items: int

    def summary(self) -> str:
        kind = "same engine: exact" if self.same_engine else "another engine: think agreement only"
        rows = ", ".join(f"{k} {v:.0%}" for k, v in self.agreement.items())
        return f"{'PASS' if self.passed else 'FAIL'} ({kind}) on {self.n_items} items: {rows}"


def compare(new: pd.DataFrame, committed: pd.DataFrame, *, same_engine: bool) -> CheckResult:
    """Agreement of regenerated rows ``new`` with the committed table, item by item.

    Same engine: every :data:`EXACT` column equal and every :data:`CLOSE` score within
    :data:`SAME_ENGINE_ATOL` on every item. Another engine: ``think_correct`` agrees on at least
    :data:`OTHER_ENGINE_THINK_AGREEMENT` of the items (the other columns are reported).
    """
    ref = committed.set_index(data.ID)
    unknown = sorted(set(new[data.ID]) - set(ref.index))
    if unknown:
        raise ValueError(f"new: item ids {unknown[:3]} are not in the committed table")
    new, ref = new.set_index(data.ID), ref.loc[new[data.ID]]
    diff = {col: np.abs(new[col].to_numpy(float) - ref[col].to_numpy(float)) for col in (*EXACT, *CLOSE)}
    agree = {col: float(np.mean(d <= (SAME_ENGINE_ATOL if col in CLOSE else 0))) for col, d in diff.items()}
    passed = min(agree.values()) == 1.0 if same_engine else agree[data.THINK_CORRECT] >= OTHER_ENGINE_THINK_AGREEMENT
    return CheckResult(same_engine, agree, passed, len(new))


def check_items(table: pd.DataFrame, n_per_group: int, seed: int = 0) -> pd.DataFrame:
    """A seeded choice of ``n_per_group`` committed items per group, as ``load_benchmark`` items."""
    chosen = table.groupby(data.GROUP).sample(n=check_int("n_per_group", n_per_group, 1), random_state=seed)[data.ID]
    return load_benchmark("arith").set_index("item_id").loc[chosen].reset_index()


def check(
    out=BUILD / "arith-check", *, table=TABLE, n_per_group=2, backend="auto", eager=False, engine=None
) -> CheckResult:
    """Regenerate ``n_per_group`` committed items per group as the committed run did, score them as
    ``02_scores`` does, and :func:`compare` them with :data:`TABLE`.

    ``backend="auto"``: vLLM when it is installed (the committed table's engine, :data:`VLLM_CPU`),
    else transformers on CPU. ``out`` is emptied first: the check always generates afresh. ``eager``:
    vLLM without torch.compile (``enforce_eager``), which starts in seconds instead of minutes on a CPU;
    its records equalled the compiled engine's on all 14 items of ``n_per_group=2``. ``engine``: an engine
    of SmolLM2-135M-Instruct to generate with instead of building one (its backend replaces ``backend``;
    the same-engine comparison is exact only for a vLLM engine built with :data:`VLLM_CPU`).
    """
    if engine is not None:
        backend = check_engine(engine).backend
    elif backend == "auto":
        backend = "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"
    committed = data.read_table(table)
    folder = Path(out) / "arith__smollm2"
    shutil.rmtree(folder, ignore_errors=True)
    generation.generate(
        check_items(committed, n_per_group),
        generation.pair_models("smollm2"),
        folder,
        generation.GenerationRequest(
            backend=backend,
            samplings=generation.walk_samplings(n_verbalized=VERBALIZED_SAMPLES),
            progress=False,
            windows=WINDOWS,
            engine_kwargs={**VLLM_CPU, "enforce_eager": eager} if backend == "vllm" else {"device": "cpu"},
        ),
        engine=engine,
    )
    return compare(score_run(folder, "arith").table, committed, same_engine=backend == "vllm")
