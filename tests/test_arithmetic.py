"""The procedurally generated ``arith`` benchmark: exact gold answers, seeded draws, its groups."""

import re

import pandas as pd
import pytest

from gpac_utils.llm import arithmetic
from gpac_utils.llm.benchmarks import load_benchmark


def _solve(question: str) -> int:
    """An independent reference: parse the question's template and compute the answer."""
    m = re.fullmatch(r"Solve for x: x \+ (\d+) = (\d+)\. What is x\?", question)
    if m:
        return int(m[2]) - int(m[1])
    m = re.fullmatch(r"What is (\d+) (\+|-|times) (\d+)(?: plus (\d+))?\?", question)
    assert m, question
    a, op, b = int(m[1]), m[2], int(m[3])
    value = {"+": a + b, "-": a - b, "times": a * b}[op]
    return value + int(m[4]) if m[4] else value


def test_gold_answers_are_exact():
    items = arithmetic.make_items(200, seed=3)
    assert len(items) == 200 * len(arithmetic.GROUPS)
    for q, a in zip(items["problem"], items["answer"]):
        assert a == str(_solve(q)), q


def test_operand_ranges_and_templates_per_group():
    items = arithmetic.make_items(300)
    ops = {
        "add_1d": (r"What is (\d) \+ (\d)\?", 0, 9),
        "mul_1d": (r"What is ([2-9]) times ([2-9])\?", 2, 9),
        "add_2d": (r"What is (\d\d) \+ (\d\d)\?", 10, 99),
        "sub_2d": (r"What is (\d\d) - (\d\d)\?", 10, 99),
        "mul_2d1d": (r"What is (\d\d) times ([2-9])\?", 2, 99),
        "mul_add": (r"What is ([2-9]) times ([2-9]) plus ([1-9])\?", 1, 9),
    }
    for group, df in items.groupby("subject"):
        if group == "solve_x":
            assert df["problem"].str.fullmatch(r"Solve for x: x \+ \d+ = \d+\. What is x\?").all()
            assert df["answer"].astype(int).between(1, 20).all()
            continue
        pattern, lo, hi = ops[group]
        for q in df["problem"]:
            m = re.fullmatch(pattern, q)
            assert m, (group, q)
            assert all(lo <= int(x) <= hi for x in m.groups())
        # every draw from a group's range shows up: the draws are not stuck
        assert df["problem"].nunique() > 30


def test_seeded_and_groups_independent():
    a = arithmetic.make_items(50, seed=7)
    pd.testing.assert_frame_equal(a, arithmetic.make_items(50, seed=7))
    assert not a["problem"].equals(arithmetic.make_items(50, seed=8)["problem"])
    # a group's items do not depend on which other groups are drawn, nor on the size (prefix)
    only = arithmetic.make_items(20, seed=7, groups=["mul_add"])
    assert only["problem"].tolist() == a[a.subject == "mul_add"]["problem"].head(20).tolist()


def test_groups_ids_and_levels():
    items = arithmetic.make_items(10)
    assert items["subject"].unique().tolist() == list(arithmetic.GROUP_NAMES)
    assert len(arithmetic.GROUPS) >= 5
    assert items["unique_id"].is_unique
    assert items["unique_id"].iloc[0] == "arith/add_1d/0000"
    assert items.groupby("subject")["level"].nunique().eq(1).all()


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="n_per_group"):
        arithmetic.make_items(0)
    with pytest.raises(ValueError, match="groups"):
        arithmetic.make_items(5, groups=["nope"])


def test_load_benchmark_arith_is_walk_like():
    items = load_benchmark("arith")
    assert len(items) == arithmetic.ITEMS_PER_GROUP * len(arithmetic.GROUPS)
    assert set(items["group"]) == set(arithmetic.GROUP_NAMES)
    row = items.iloc[0]
    assert row["messages"][-1]["content"].startswith(row["question"])
    assert row["messages"][1]["role"] == "assistant" and "\\boxed{" in row["messages"][1]["content"]
    assert row["messages_nothink"] == [
        {"role": "user", "content": f"{row['question']}\n\nReply with the final answer only, as a number."}
    ]
    sub = load_benchmark("arith", n_items=70, seed=1)
    assert len(sub) == 70 and set(sub["item_id"]) <= set(items["item_id"])
