"""The procedurally generated ``arith`` benchmark: exact gold answers, seeded draws, its groups."""

import re

import pandas as pd
import pytest

from gpac_utils.llm import arith_check, arithmetic, grading
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


# --------------------------------------------------------------------------- the committed table and its check
def _records(n=6):
    from gpac_utils import data

    return pd.DataFrame(
        {
            data.ID: [f"arith/add_1d/{k:04d}" for k in range(n)],
            data.GROUP: "add_1d",
            data.THINK_CORRECT: [1, 0, 1, 1, 0, 1][:n],
            data.NOTHINK_CORRECT: [0, 0, 1, 1, 0, 1][:n],
            data.THINK_TOKENS: 20.0,
            data.NOTHINK_TOKENS: 3.0,
            "score_logits": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6][:n],
            "score_verbalized": 0.5,
        }
    )


def test_compare_same_engine_is_exact():
    ref = _records()
    assert arith_check.compare(ref, ref, same_engine=True).passed
    near = ref.assign(score_logits=ref["score_logits"] + arith_check.SAME_ENGINE_ATOL / 2)
    assert arith_check.compare(near, ref, same_engine=True).passed
    flipped = ref.copy()
    flipped.loc[2, "nothink_correct"] = 0
    result = arith_check.compare(flipped, ref, same_engine=True)
    assert not result.passed and result.agreement["nothink_correct"] == pytest.approx(5 / 6)
    far = ref.assign(score_logits=ref["score_logits"] + 10 * arith_check.SAME_ENGINE_ATOL)
    assert not arith_check.compare(far, ref, same_engine=True).passed


def test_compare_other_engine_checks_think_only():
    ref = _records()
    other = ref.assign(nothink_correct=1 - ref["nothink_correct"], score_logits=0.9)
    assert arith_check.compare(other, ref, same_engine=False).passed
    other.loc[:1, "think_correct"] = 1 - other.loc[:1, "think_correct"]  # 2 of 6 disagree: 67% < 80%
    assert not arith_check.compare(other, ref, same_engine=False).passed
    with pytest.raises(ValueError, match="not in the committed table"):
        arith_check.compare(ref.assign(item_id="arith/x/0"), ref, same_engine=True)


def test_committed_table_matches_the_benchmark():
    from gpac_utils import data

    if not arith_check.TABLE.exists():
        pytest.skip(f"{arith_check.TABLE} not generated yet")
    table = data.read_table(arith_check.TABLE)
    items = load_benchmark("arith").set_index("item_id")
    assert table[data.GROUP].nunique() >= 5 and table[data.ID].is_unique
    # its items are benchmark items (the data card says how many), in the benchmark's order
    assert table[data.ID].isin(items.index).all()
    assert table[data.ID].map(items.index.get_loc).is_monotonic_increasing
    assert (table[data.GROUP].to_numpy() == items.loc[table[data.ID], "group"].to_numpy()).all()
    assert (table[data.LOSS] == table[data.THINK_CORRECT] * (1 - table[data.NOTHINK_CORRECT])).all()
    chosen = arith_check.check_items(table, 2)
    assert len(chosen) == 2 * table[data.GROUP].nunique()
    assert chosen["item_id"].tolist() == arith_check.check_items(table, 2)["item_id"].tolist()


def test_check_refuses_an_engine_that_is_not_one(tmp_path):
    from gpac_utils.checks import ParameterError

    with pytest.raises(ParameterError, match="^engine: an engine of generation.make_engine, got 'vllm'$"):
        arith_check.check(tmp_path, engine="vllm")


@pytest.mark.slow
def test_regenerating_a_subset_on_another_engine_agrees_with_the_committed_table(tmp_path):
    """transformers (another engine than the table's vLLM): the greedy think role's correctness agrees on
    >= 80 % of the items. The same engine's exact check is in tests/test_vllm_engine.py (the vLLM tier)."""
    pytest.importorskip("transformers")
    result = arith_check.check(tmp_path, n_per_group=1, backend="transformers")
    assert not result.same_engine and result.n_items >= 5
    assert result.passed, result.summary()


@pytest.mark.parametrize(
    "reply, gold, ok",
    [
        ("7 times 6 is 42. Then 42 + 5 = 47. The answer is \\boxed{47}.", "47", True),
        ("The answer is \\boxed{47}. (42 + 5)", "47", True),  # the box wins over later numbers
        ("\\boxed{x = 5}", "5", True),
        ("\\boxed{46}", "47", False),
        ("47", "47", True),
        ("It is 47.0", "47", True),
        ("1,250", "1250", True),
        ("-12", "-12", True),
        ("12", "-12", False),
        ("47 is the answer to 40 + 7", "47", False),  # the last number counts
        ("no number here", "3", False),
        ("", "3", False),
    ],
)
def test_grade_is_exact(reply, gold, ok):
    assert grading.grade_exact(reply, gold) is ok
    assert grading.grade("arith", reply, gold) is ok
