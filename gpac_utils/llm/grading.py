"""Prompts and graders for the paper's benchmarks (Sec. 5.1, App. F.1).

==============  ===========================================  =====================================
benchmark       prompt                                       grader
==============  ===========================================  =====================================
``math500``     problem + "put your final answer within      math-verify ``verify(gold, answer)``
                \\boxed{}"                                    (gold first), on the last ``\\boxed{}``
``gpqa``        question + 4 choices shuffled by a seeded    ``Answer: LETTER`` (last occurrence)
                per-item permutation
``zebralogic``  puzzle + JSON output format                  cell and puzzle accuracy of the JSON
``arena_hard``  the user prompt as is                        none: semantic loss (``scoring``)
``walk``        think: one-shot ``\\boxed{}`` example +      lenient: the last ``\\boxed{}`` when
                MATH instruction; nothink: "answer only"     there is one (math-verify), else the
                                                             last number of the reply (see
                                                             :func:`grade_lenient`)
==============  ===========================================  =====================================

The ``walk`` benchmark (``data/walk/items.jsonl``: arithmetic and easy algebra in MATH format) is
meant for tiny models (``gpac_utils.llm.tiny``), which rarely write ``\\boxed{}`` unprompted: its
grader is documented as lenient and is never used for the paper's benchmarks.

Binary loss (paper Eq. ``binary_loss``) = thinking correct and non-thinking wrong:
:func:`gpac_utils.data.binary_loss`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..checks import ParameterError
from ..registry import Registry
from ..scores import ROLES

LETTERS = "ABCD"

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
GPQA_TEMPLATE = (
    "Answer the following multiple choice question. The last line of your response should be of the "
    "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by "
    "step before answering.\n\n{question}\n\nA) {A}\nB) {B}\nC) {C}\nD) {D}"
)
ZEBRA_TEMPLATE = (
    "# Example Puzzle\n\nSolve the following logic grid puzzle. Each house has a unique value for each "
    "attribute.\n\n# Puzzle to Solve\n\n{puzzle}\n\n# Instruction\n\nNow please solve the above puzzle. "
    "Present your reasoning and solution in the following json format:\n\n{json_template}\n"
)


# --------------------------------------------------------------------------- MATH-500
def math_prompt(problem: str) -> str:
    return f"{problem}\n\n{MATH_INSTRUCTION}"


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) with nested braces matched.

    Returns ``None`` when there is none or its braces are unbalanced (truncated output).
    """
    for start in reversed([m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text or "")]):
        depth, k = 1, start
        while k < len(text) and depth:
            if text[k] == "\\" and text[k + 1 : k + 2] in ("{", "}"):  # an escaped brace
                k += 2
                continue
            depth += (text[k] == "{") - (text[k] == "}")
            k += 1
        if depth == 0:
            return text[start : k - 1].strip()
    return None


def grade_math(response: str, gold: str, *, timeout_seconds: int = 5) -> bool:
    r"""Is the last ``\boxed{}`` of ``response`` equal to ``gold`` (math-verify, gold first)?

    Works in worker threads: there the signal-based timeouts of math-verify (``signal.alarm``, main
    thread only) are switched off (``parsing_timeout=None``, ``timeout_seconds=None``) instead of raising.
    """
    from math_verify import LatexExtractionConfig, parse, verify

    boxed = last_boxed(response or "")
    if not boxed:
        return False
    t = timeout_seconds if threading.current_thread() is threading.main_thread() else None
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    gold_parsed = parse(f"\\boxed{{{gold}}}", extraction_config=config, parsing_timeout=t)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the gold answer {gold!r}")
    pred = parse(f"\\boxed{{{boxed}}}", extraction_config=config, parsing_timeout=t)
    return bool(pred) and bool(verify(gold_parsed, pred, timeout_seconds=t))


# --------------------------------------------------------------------------- walk (tiny models)
#: The one-shot example shown to the ``think`` role of the walk (format: steps, then ``\boxed{}``).
WALK_EXAMPLE = ("What is 7 times 6 plus 5?", "7 times 6 is 42. Then 42 + 5 = 47. The answer is \\boxed{47}.")
WALK_NOTHINK_INSTRUCTION = "Reply with the final answer only, as a number."


def walk_think_messages(problem: str) -> list[dict]:
    """The walk's ``think`` conversation (:attr:`gpac_utils.scores.Role.walk_messages`): a one-shot
    example of the answer format (worked steps ending in ``\\boxed{}``), then the problem, both with
    the MATH instruction."""
    example, answer = WALK_EXAMPLE
    user = [{"role": "user", "content": math_prompt(q)} for q in (example, problem)]
    return [user[0], {"role": "assistant", "content": answer}, user[1]]


def walk_nothink_messages(problem: str) -> list[dict]:
    """The walk's ``nothink`` conversation (:attr:`gpac_utils.scores.Role.walk_messages`): the problem
    and "reply with the final answer only"."""
    return [{"role": "user", "content": f"{problem}\n\n{WALK_NOTHINK_INSTRUCTION}"}]


def walk_messages(problem: str, role: str) -> list[dict]:
    """Conversation of the walk's ``role`` for ``problem``: its :data:`~gpac_utils.scores.ROLES` entry's
    :attr:`~gpac_utils.scores.Role.walk_messages` (``think``: :func:`walk_think_messages`; ``nothink``:
    :func:`walk_nothink_messages`).

    Raises
    ------
    ParameterError
        For a role that is not registered or has no walk prompt of its own.
    """
    entry = ROLES[ROLES.check(role, "role")]
    if entry.walk_messages is None:
        walk = [n for n, r in ROLES.items() if r.walk_messages is not None]
        raise ParameterError(f"role: {role!r} has no walk prompt of its own; the roles with one are {walk}")
    return entry.walk_messages(problem)


_LAST_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?(?![\w])")


def last_number(text: str) -> str | None:
    """The last number written in ``text`` (``-3``, ``1,250``, ``2.5``, ``3/4``), or ``None``."""
    hits = _LAST_NUMBER.findall(text or "")
    return hits[-1].replace(",", "").replace(" ", "") if hits else None


def grade_lenient(response: str, gold: str, *, timeout_seconds: int = 5) -> bool:
    r"""Walk grader: :func:`grade_math` when the reply has a ``oxed{}``; otherwise the reply's
    **last number** (:func:`last_number`) is compared with ``gold`` by math-verify.

    Lenient on purpose (tiny models seldom box their answer); a reply that ends with another number
    than its answer ("5 is the answer to 2+3") is graded on that last number.
    """
    if last_boxed(response or "") is None:
        if (num := last_number(response or "")) is None:
            return False
        response = f"\\boxed{{{num}}}"
    return grade_math(response, gold, timeout_seconds=timeout_seconds)


def grade_exact(response: str, gold: str) -> bool:
    r"""Exact grading: the last number of the reply's last ``\boxed{}`` (else of the whole reply)
    equals ``gold``.

    Numbers as :func:`last_number` reads them (``-3``, ``1,250``, ``2.5``,
    ``3/4``), compared as fractions, so ``47.0`` counts as ``47``. Deterministic and fast (no
    symbolic parser, no timeout), unlike the walk's lenient grader.
    """
    boxed = last_boxed(response or "")
    num = last_number(boxed if boxed is not None else (response or ""))
    try:
        return num is not None and Fraction(num) == Fraction(str(gold).strip())
    except (ValueError, ZeroDivisionError):
        return False


# --------------------------------------------------------------------------- GPQA
def shuffle_choices(correct: str, incorrect: list[str], item_id, seed: int = 0) -> tuple[tuple[str, ...], str]:
    """``(choices, correct letter)``: the correct answer and three distractors in a seeded per-item order."""
    if len(incorrect) != 3:
        raise ValueError(f"GPQA item {item_id!r}: expected 3 incorrect answers, got {len(incorrect)}")
    options = [str(correct).strip()] + [str(x).strip() for x in incorrect]
    digest = hashlib.sha256(f"gpqa:{int(seed)}:{item_id}".encode()).digest()  # stable across runs and machines
    perm = np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(4)
    return tuple(options[j] for j in perm), LETTERS[int(np.flatnonzero(perm == 0)[0])]


def gpqa_prompt(question: str, choices) -> str:
    return GPQA_TEMPLATE.format(question=str(question).strip(), **dict(zip(LETTERS, choices)))


_ANSWER_RE = re.compile(
    r"answer\s*(?:is)?\s*[:：]\s*[\*_\s]*\$?\s*(?:\\boxed\s*\{\s*)?(?:\\text(?:bf)?\s*\{\s*)?[\(\[]?\s*([A-D])\s*[\)\]]?"
    r"(?![A-Za-z])",
    re.IGNORECASE,
)


def extract_letter(response: str) -> str | None:
    """The letter of the last ``Answer: X`` line (tolerates ``**Answer:** (C)``, ``Answer: $\\boxed{C}$``).

    Letters elsewhere in the prose never count; the letter itself must be upper case.
    """
    hits = [m for m in _ANSWER_RE.finditer(response or "") if m.group(1).isupper()]
    return hits[-1].group(1) if hits else None


def grade_gpqa(response: str, answer_letter: str) -> bool:
    return extract_letter(response) == str(answer_letter).strip().upper()


# --------------------------------------------------------------------------- ZebraLogic
def zebra_size_group(size: str) -> str:
    """ZebraLogic size class from ``"N*M"`` by search space (N!)^M:
    Small < 1e3 <= Medium < 1e6 <= Large < 1e10 <= X-Large."""
    try:
        n, m = (int(x) for x in str(size).lower().replace("x", "*").split("*"))
    except ValueError as exc:
        raise ValueError(f"ZebraLogic size must look like 'N*M', got {size!r}") from exc
    log10s = m * math.log10(math.factorial(n))
    return "Small" if log10s < 3 else "Medium" if log10s < 6 else "Large" if log10s < 10 else "X-Large"


def zebra_json_template(solution: dict) -> str:
    header, rows = solution["header"], solution["rows"]
    attrs = [h for h in header if h.lower() != "house"]
    houses = {f"House {i + 1}": {a: "___" for a in attrs} for i in range(len(rows))}
    return json.dumps({"reasoning": "___", "solution": houses}, indent=4)


def zebra_prompt(puzzle: str, solution: dict) -> str:
    return ZEBRA_TEMPLATE.format(puzzle=str(puzzle).strip(), json_template=zebra_json_template(solution))


def extract_json(text: str) -> dict | None:
    """The last parseable JSON object in ``text`` (code fences allowed; one with a ``solution`` object
    preferred); ``None`` if there is none, e.g. a truncated output."""
    decoder, objects = json.JSONDecoder(), []
    for m in re.finditer(r"\{", text or ""):
        try:
            obj = decoder.raw_decode(text, m.start())[0]
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    with_solution = [o for o in objects if isinstance(o.get("solution"), dict)]
    return (with_solution or objects or [None])[-1]


def _norm(v) -> str:
    return re.sub(r"\s+", " ", str(v)).strip().lower()


@dataclass(frozen=True)
class ZebraGrade:
    cell_accuracy: float
    correct: bool
    parsed: bool


def grade_zebra(response: str, solution: dict) -> ZebraGrade:
    """Cell accuracy and puzzle accuracy (all cells right) of a JSON answer.

    ``solution`` is ZebraLogic's ``{"header": ["House", attr...], "rows": [["1", v...], ...]}`` (or its JSON text).
    An unparseable or truncated answer scores 0 cells and is flagged ``parsed=False``.
    """
    solution = json.loads(solution) if isinstance(solution, str) else solution
    header, rows = list(solution["header"]), solution["rows"]
    obj = extract_json(response)
    pred = obj.get("solution") if obj is not None else None
    if not isinstance(pred, dict):
        return ZebraGrade(0.0, False, False)
    keyed = {_norm(k).replace("house", "").strip(): v for k, v in pred.items()}
    total = right = 0
    for r, row in enumerate(rows):
        house = keyed.get(str(r + 1))
        house = {_norm(k): v for k, v in house.items()} if isinstance(house, dict) else {}
        cells = [(attr, value) for attr, value in zip(header, row) if attr.lower() != "house"]
        total += len(cells)
        right += sum(_norm(house.get(_norm(attr), "\0")) == _norm(value) for attr, value in cells)
    return ZebraGrade(right / total if total else 0.0, total > 0 and right == total, True)


# --------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Grader:
    """How a benchmark's answers are judged.

    Parameters
    ----------
    name : str
        The benchmark (a name of :data:`gpac_utils.llm.benchmarks.BENCHMARKS`).
    function : callable or None
        ``function(response, gold) -> bool``: correctness of one answer; ``None`` for a benchmark
        without right answers.
    loss : {"binary", "semantic"}
        The loss of the benchmark's table: binary (thinking right, non-thinking wrong; a
        ``function`` is needed) or semantic (``1 - cos`` of the two answers' embeddings, bound 2:
        :func:`gpac_utils.llm.scoring.semantic_loss`).
    """

    name: str
    function: Callable[[str, object], bool] | None
    loss: str = "binary"

    @property
    def needs_gold(self) -> bool:
        """Whether an item's loss needs its gold answer: a ``binary`` loss grades both answers against it,
        so even a thinking-routed item, whose two answers are known, costs a gold label (unless the
        two answers agree: then the loss is 0); the semantic loss compares the two answers only."""
        return self.function is not None


#: The graders, by benchmark.
GRADERS: Registry[Grader] = Registry(
    "benchmark",
    [
        Grader("math500", grade_math),
        Grader("gpqa", grade_gpqa),
        Grader("zebralogic", lambda response, gold: grade_zebra(response, gold).correct),
        Grader("arena_hard", None, "semantic"),
        Grader("walk", grade_lenient),
        Grader("arith", grade_exact),  # exact integers, no symbolic parser
    ],
)


def grade(benchmark: str, response: str, gold) -> bool:
    """Correctness of one answer (``gold``: answer string, correct letter, or solution dict/JSON)."""
    grader = GRADERS[benchmark]  # an unknown benchmark: one line listing the known ones
    if grader.function is None:
        raise ValueError(f"{benchmark} has no grader: use the {grader.loss} loss (gpac_utils.llm.scoring)")
    return grader.function(response, gold)
