"""Graders on fixture strings, nasty cases included."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gpac_utils.llm import grading as gr

pytest.importorskip("math_verify")


@pytest.mark.parametrize(
    "text, boxed",
    [
        (r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{ \left\{ 1, 2 \right\} }", r"\left\{ 1, 2 \right\}"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),
        (r"first \boxed{3} then \boxed{x^{2}}", "x^{2}"),
        (r"\fbox{7}", "7"),
        (r"\boxed{\frac{1}{2", None),  # truncated: unbalanced braces
        ("no box at all: 5", None),
        ("", None),
    ],
)
def test_last_boxed(text, boxed):
    assert gr.last_boxed(text) == boxed


@pytest.mark.parametrize(
    "response, gold, ok",
    [
        (r"The answer is \boxed{\frac{1}{2}}.", r"\frac12", True),
        (r"\boxed{0.5}", r"\frac{1}{2}", True),
        (r"\boxed{\dfrac{\sqrt{3}}{2}}", r"\frac{\sqrt3}{2}", True),
        (r"\boxed{10\text{ cm}}", "10", True),  # units
        (r"\boxed{90^\circ}", "90", True),
        (r"\boxed{(3, \frac{\pi}{2})}", r"\left( 3, \frac{\pi}{2} \right)", True),
        (r"\boxed{3} wait, actually \boxed{4}", "4", True),  # last box counts
        (r"\boxed{4} wait, actually \boxed{3}", "4", False),
        (r"\boxed{2}", "3", False),
        (r"\boxed{\frac{1}{2", r"\frac12", False),  # truncated
        (r"the answer is 1/2", r"\frac12", False),  # no box: not accepted
        (r"\boxed{}", "0", False),
    ],
)
def test_grade_math(response, gold, ok):
    assert gr.grade_math(response, gold) is ok


def test_grade_math_is_not_symmetric_gold_first():
    # math-verify treats gold and prediction differently; the grader must pass gold first
    assert gr.grade_math(r"\boxed{x=2}", "2") is True


def test_grade_math_in_threads():
    cases = [(r"\boxed{\frac{1}{2}}", "0.5", True), (r"\boxed{3}", "4", False)] * 4
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda c: gr.grade_math(c[0], c[1]), cases))
    assert got == [c[2] for c in cases]
    assert threading.current_thread() is threading.main_thread()


@pytest.mark.parametrize(
    "text, letter",
    [
        ("A careful look at option B suggests... Answer: C", "C"),
        ("**Answer:** (B)", "B"),
        (r"Answer: $\boxed{D}$", "D"),
        ("Final answer: \\text{A}", "A"),
        ("Answer: A\nHmm, no. Answer: D.", "D"),
        ("I think it is A, B or C.", None),  # letters in prose never count
        ("Answer: Because of B", None),
        ("Answer: AB", None),
        ("answer: c", None),  # lower-case letter is not a choice
        ("", None),
    ],
)
def test_extract_letter(text, letter):
    assert gr.extract_letter(text) == letter


def test_shuffle_is_seeded_and_uniformish():
    a = gr.shuffle_choices("right", ["w1", "w2", "w3"], "rec7", seed=1)
    assert a == gr.shuffle_choices("right", ["w1", "w2", "w3"], "rec7", seed=1)
    assert a[0][gr.LETTERS.index(a[1])] == "right"
    pos = np.array([gr.LETTERS.index(gr.shuffle_choices("r", ["a", "b", "c"], f"id{k}")[1]) for k in range(2000)])
    counts = np.bincount(pos, minlength=4)
    # each letter ~ Binomial(2000, 1/4): mean 500, sd ~19.4; 5 sd band
    assert np.all(np.abs(counts - 500) < 5 * np.sqrt(2000 * 0.25 * 0.75))
    with pytest.raises(ValueError, match="3 incorrect"):
        gr.shuffle_choices("r", ["a"], "x")


SOL = {"header": ["House", "Name", "Color"], "rows": [["1", "Eric", "red"], ["2", "Bob", "blue"]]}


@pytest.mark.parametrize(
    "text, cell, correct, parsed",
    [
        (
            '{"reasoning": "...", "solution": {"House 1": {"Name": "Eric", "Color": "red"}, '
            '"House 2": {"Name": "Bob", "Color": "blue"}}}',
            1.0,
            True,
            True,
        ),
        (
            '```json\n{"reasoning": "use {braces}", "solution": {"House 1": {"Name": " eric ", "Color": "RED"}, '
            '"House 2": {"Name": "Bob", "Color": "green"}}}\n```',
            0.75,
            False,
            True,
        ),
        ('{"solution": {"House 1": {"Name": "Eric"}}}', 0.25, False, True),  # missing cells are wrong
        ('{"reasoning": "...", "solution": {"House 1": {"Name": "Eric", "Col', 0.0, False, False),  # truncated
        ("no json here", 0.0, False, False),
    ],
)
def test_grade_zebra(text, cell, correct, parsed):
    g = gr.grade_zebra(text, SOL)
    assert (g.cell_accuracy, g.correct, g.parsed) == (cell, correct, parsed)


def test_zebra_size_groups():
    assert [gr.zebra_size_group(s) for s in ["2*2", "3*4", "4*5", "5*6"]] == ["Small", "Medium", "Large", "X-Large"]
    with pytest.raises(ValueError, match="N\\*M"):
        gr.zebra_size_group("five")


def test_dispatch():
    assert gr.grade("gpqa", "Answer: B", "B") and not gr.grade("gpqa", "Answer: C", "B")
    with pytest.raises(ValueError, match="semantic loss"):
        gr.grade("arena_hard", "x", "")
    with pytest.raises(ValueError, match="benchmark: unknown .mmlu."):
        gr.grade("mmlu", "x", "")


def test_walk_lenient_grader():
    from gpac_utils.llm import grading as g

    assert g.grade("walk", "2 + 3 = 5", "5") and g.grade("walk", "The answer is 5.", "5")
    assert g.grade("walk", "x = -3", "-3") and g.grade("walk", "1,250 apples", "1250")
    assert not g.grade("walk", "5 is the answer to 2 + 3", "5")  # documented: the last number counts
    assert g.grade("walk", "42 ... \\boxed{12} then 5", "12")  # a box wins over later numbers
    assert not g.grade("walk", "no number here", "1")
    assert g.last_number("3/4 of it") == "3/4" and g.last_number("") is None
    with pytest.raises(ValueError, match="role"):
        g.walk_messages("q", "other")
