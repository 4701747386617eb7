"""``arith``: a procedurally generated arithmetic benchmark with exact gold answers, shipped as code.

The items are drawn, not downloaded: every group is a template (``What is 7 times 6 plus 5?``)
whose integer operands are drawn uniformly from fixed ranges by a seeded NumPy generator, and the
gold answer is computed exactly with Python integers. The groups differ in how much the walk's
tiny model (SmolLM2-135M-Instruct, :data:`gpac_utils.llm.generation.WALK_SAMPLING`) gains from its ``think`` prompt (a
one-shot worked example that ends in ``\\boxed{}``) over its ``nothink`` prompt ("final answer
only"): a probe with the real vLLM CPU engine gave losses (think right, nothink wrong) from 0 on
``1-digit x 1-digit`` to 0.6 on ``a x b + c``. See :data:`GROUPS`.

Drawing
-------
Group ``g`` (its position in :data:`GROUPS`) draws its ``n`` items from
``numpy.random.default_rng([seed, g])``: one independent stream per group, so adding items to one
group never changes another's. Operands are drawn with replacement: small groups (``1-digit x
1-digit`` has 64 distinct questions) repeat questions, as i.i.d. draws from the group's question
distribution do. Items are ordered group by group; ``item_id`` is ``arith/<group>/<k>``.

Grading (:func:`grade_exact`) is exact and needs no symbolic parser: the reply's last ``\\boxed{}``
(else the whole reply) is read for its last number, which must equal the gold integer.

The items are in MATH-500's columns (``problem``, ``answer``, ``subject`` = the group,
``level``, ``unique_id``), so :func:`gpac_utils.llm.benchmarks.load_benchmark` treats them like
the shipped ``walk`` items (one-shot ``think`` and final-answer-only ``nothink`` conversations).
"""

from __future__ import annotations

import importlib.util
import operator
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..workflow.paths import BUILD, DATA

#: Default seed of the benchmark's draw.
SEED = 0
#: Default number of items per group (7 groups: 2,030 items).
ITEMS_PER_GROUP = 290


@dataclass(frozen=True)
class Group:
    """One template: ``draw(rng) -> (question, exact integer answer)``; ``level`` orders difficulty."""

    name: str
    level: int
    draw: Callable[[np.random.Generator], tuple[str, int]]


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A uniform integer in ``[lo, hi]`` (both included), as a Python int."""
    return int(rng.integers(lo, hi + 1))


def _two(template: str, op: Callable[[int, int], int], a: tuple[int, int], b: tuple[int, int]):
    """A draw: ``template`` with two operands, uniform in the ranges ``a`` and ``b`` (in this order); ``op`` of them."""

    def draw(rng):
        x, y = _int(rng, *a), _int(rng, *b)
        return template.format(x, y), op(x, y)

    return draw


def _mul_add(rng):
    a, b, c = _int(rng, 2, 9), _int(rng, 2, 9), _int(rng, 1, 9)
    return f"What is {a} times {b} plus {c}?", a * b + c


def _solve_x(rng):
    x, a = _int(rng, 1, 20), _int(rng, 1, 20)
    return f"Solve for x: x + {a} = {x + a}. What is x?", x


#: The groups, easiest first by construction (not by the model's accuracy).
GROUPS: tuple[Group, ...] = (
    Group("add_1d", 1, _two("What is {} + {}?", operator.add, (0, 9), (0, 9))),
    Group("mul_1d", 1, _two("What is {} times {}?", operator.mul, (2, 9), (2, 9))),
    Group("add_2d", 2, _two("What is {} + {}?", operator.add, (10, 99), (10, 99))),
    Group("sub_2d", 2, _two("What is {} - {}?", operator.sub, (10, 99), (10, 99))),  # negative answers possible
    Group("solve_x", 2, _solve_x),  # solve x + a = b for x; x and a in 1..20
    Group("mul_2d1d", 3, _two("What is {} times {}?", operator.mul, (10, 99), (2, 9))),
    Group("mul_add", 3, _mul_add),  # a times b plus c; a and b in 2..9, c in 1..9
)
GROUP_NAMES = tuple(g.name for g in GROUPS)


def make_items(n_per_group: int = ITEMS_PER_GROUP, seed: int = SEED, groups=GROUP_NAMES) -> pd.DataFrame:
    """Draw the benchmark: ``n_per_group`` items of each group, in MATH-500's columns.

    Parameters
    ----------
    n_per_group : int
        Items per group (>= 1).
    seed : int
        Seed of the draw; group ``g`` uses ``numpy.random.default_rng([seed, g])``.
    groups : sequence of str
        Names from :data:`GROUP_NAMES` (default all, in that order).

    Returns
    -------
    DataFrame
        ``problem``, ``answer`` (exact integer, as text), ``subject`` (the group), ``level``,
        ``unique_id`` (``arith/<group>/<k>``) and ``solution`` (a one-line worked answer).
    """
    if int(n_per_group) < 1:
        raise ValueError(f"n_per_group must be >= 1, got {n_per_group}")
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    unknown = [g for g in groups if g not in GROUP_NAMES]
    if unknown:
        raise ValueError(f"groups: unknown {unknown}; choose from {list(GROUP_NAMES)}")
    rows = []
    for name in groups:
        index = GROUP_NAMES.index(name)
        rng = np.random.default_rng([int(seed), index])
        for k in range(int(n_per_group)):
            question, answer = GROUPS[index].draw(rng)
            solution = f"The answer is \\boxed{{{answer}}}."
            rows.append((question, str(answer), name, GROUPS[index].level, f"arith/{name}/{k:04d}", solution))
    return pd.DataFrame(rows, columns=["problem", "answer", "subject", "level", "unique_id", "solution"])


def grade_exact(response: str, gold: str) -> bool:
    r"""Exact grading: the last number of the reply's last ``\boxed{}`` (else of the whole reply)
    equals ``gold``.

    Numbers as :func:`gpac_utils.llm.grading.last_number` reads them (``-3``, ``1,250``, ``2.5``,
    ``3/4``), compared as fractions, so ``47.0`` counts as ``47``. Deterministic and fast (no
    symbolic parser, no timeout), unlike the walk's lenient grader.
    """
    from .grading import last_boxed, last_number

    boxed = last_boxed(response or "")
    num = last_number(boxed if boxed is not None else (response or ""))
    if num is None:
        return False
    try:
        return Fraction(num) == Fraction(str(gold).strip())
    except (ValueError, ZeroDivisionError):
        return False


# --------------------------------------------------------------------------- the committed table and its check
#: The committed scored table: SmolLM2-135M-Instruct on every item, in the walk's roles, on the real
#: vLLM engine on CPU, scored by ``02_scores`` (data card: ``data/generated/README.md``).
TABLE = DATA / "generated" / "arith__smollm2.parquet"
#: ``vllm.LLM`` settings of the committed run (real vLLM on CPU: fp32; see shared/vllm-cpu.md).
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
    from .benchmarks import load_benchmark

    if int(n_per_group) < 1:
        raise ValueError(f"n_per_group must be >= 1, got {n_per_group}")
    chosen = table.groupby(data.GROUP).sample(n=int(n_per_group), random_state=seed)[data.ID]
    return load_benchmark("arith").set_index("item_id").loc[chosen].reset_index()


def check(out=BUILD / "arith-check", *, table=TABLE, n_per_group=2, backend="auto", eager=False) -> CheckResult:
    """Regenerate ``n_per_group`` committed items per group as the committed run did, score them as
    ``02_scores`` does, and :func:`compare` them with :data:`TABLE`.

    ``backend="auto"``: vLLM when it is installed (the committed table's engine, :data:`VLLM_CPU`),
    else transformers on CPU. ``out`` is emptied first: the check always generates afresh. ``eager``:
    vLLM without torch.compile (``enforce_eager``), which starts in seconds instead of minutes on a CPU;
    its records equalled the compiled engine's on all 14 items of ``n_per_group=2``.
    """
    from . import generation as gen
    from .scoring import score_run

    if backend == "auto":
        backend = "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"
    committed = data.read_table(table)
    folder = Path(out) / "arith__smollm2"
    shutil.rmtree(folder, ignore_errors=True)
    gen.generate(
        check_items(committed, n_per_group), gen.pair_models("smollm2"), folder, backend=backend,
        samplings=gen.walk_samplings(n_verbalized=VERBALIZED_SAMPLES), progress=False, windows=WINDOWS,
        engine_kwargs={**VLLM_CPU, "enforce_eager": eager} if backend == "vllm" else {"device": "cpu"},
    )  # fmt: skip
    return compare(score_run(folder, "arith").table, committed, same_engine=backend == "vllm")
