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

Grading (:func:`gpac_utils.llm.grading.grade_exact`) is exact and needs no symbolic parser: the
reply's last ``\\boxed{}`` (else the whole reply) is read for its last number, which must equal the
gold integer. The committed scored table and its regeneration check: :mod:`gpac_utils.llm.arith_check`.

The items are in MATH-500's columns (``problem``, ``answer``, ``subject`` = the group,
``level``, ``unique_id``), so :func:`gpac_utils.llm.benchmarks.load_benchmark` treats them like
the shipped ``walk`` items (one-shot ``think`` and final-answer-only ``nothink`` conversations).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..checks import check_int

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
    n_per_group, seed = check_int("n_per_group", n_per_group, 1), check_int("seed", seed, 0)
    unknown = [g for g in groups if g not in GROUP_NAMES]
    if unknown:
        raise ValueError(f"groups: unknown {unknown}; choose from {list(GROUP_NAMES)}")
    rows = []
    for name in groups:
        index = GROUP_NAMES.index(name)
        rng = np.random.default_rng([seed, index])
        for k in range(n_per_group):
            question, answer = GROUPS[index].draw(rng)
            solution = f"The answer is \\boxed{{{answer}}}."
            rows.append((question, str(answer), name, GROUPS[index].level, f"arith/{name}/{k:04d}", solution))
    return pd.DataFrame(rows, columns=["problem", "answer", "subject", "level", "unique_id", "solution"])
