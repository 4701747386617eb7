"""Every citation of the paper names a statement the paper has (issue 25, item 1).

The paper's numbering is derived once from its LaTeX (workflow/scripts/paper_numbering.py) and committed
as gpac_utils/paper/data/paper_numbering.csv. Every notebook, README.md, the book's pages (docs/) and
the package's sources are read; a citation "Theorem 4.3", "Thm 3.4.1", "Prop. 3.3", "Def. 3.x",
"Assumption 4.1", "Algorithm 2", "App. F", "Appendices B–E", "Section 4.2", ... fails unless the table
has that kind and number (for a range, both ends), and a label written beside it in backticks
("Theorem 4.3 (`thm:empirical-known-grouping`)") must be the label of that very number. A citation of
another paper is recognised by its author-year just before it ("Maurer & Pontil (2009), Theorem 4")
or after it ("Theorem 4 of Howard et al. (2021)"). Appendices B–E are proofs: a single one of them is
cited on a line that says "proof" or names the statement ("App. E" alone for the experimental setup,
as an older draft numbered it, fails: that is Appendix F).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import repo_scripts

from gpac_utils.workflow.paths import REPO_ROOT

numbering = repo_scripts.load("workflow/scripts/paper_numbering.py")

KINDS = {
    "theorem": "Theorem",
    "thm": "Theorem",
    "proposition": "Proposition",
    "prop": "Proposition",
    "definition": "Definition",
    "def": "Definition",
    "assumption": "Assumption",
    "lemma": "Lemma",
    "lemmata": "Lemma",
    "corollary": "Corollary",
    "corollarie": "Corollary",
    "algorithm": "Algorithm",
    "alg": "Algorithm",
    "remark": "Remark",
    "appendix": "Appendix",
    "appendice": "Appendix",
    "app": "Appendix",
    "section": "Section",
    "sec": "Section",
    "equation": "Equation",
    "eq": "Equation",
}
_NUMBER = r"(?:\d+|[A-Z](?![A-Za-z]))(?:\.(?:\d+|x)(?![\w]))*"
CITATION = re.compile(
    r"\b(?P<kind>Theorem|Thm|Proposition|Prop|Definition|Def|Assumption|Lemmata|Lemma|Corollar(?:y|ie)"
    r"|Algorithm|Alg|Remark|Appendix|Appendice|App|Section|Sec)s?\.?[ ~\u00a0]*"
    rf"(?P<numbers>{_NUMBER}(?:\s*(?:–|—|-|,|and|or|to)\s*{_NUMBER})*)"
    r"(?:\s*\(`(?P<label>[^`]+)`\))?"
)
#: A statement cited by its label's name ("Thm. `unknown-grouping`", "Eq. (pac-optimal-threshold)").
BY_NAME = re.compile(
    r"\b(?P<kind>Theorem|Thm|Proposition|Prop|Definition|Def|Assumption|Algorithm|Alg|Appendix|App|Equation|Eq)"
    r"s?\.?[ ~]*\(?`?(?P<name>[a-z][\w^-]*-[\w^-]+|[a-z]+_[\w^-]+)`?"
)
PREFIX = {"Theorem": "thm", "Proposition": "prop", "Definition": "def", "Assumption": "assump", "Algorithm": "alg"}
PREFIX |= {"Appendix": "app", "Equation": "eq"}
LABEL = re.compile(r"`((?:thm|prop|def|assump|alg|app|sec|fig|table|tab|eq|remark):[\w^-][^`\s]*)`")
OTHER_PAPER_BEFORE = re.compile(r"(?:et al\.?|\(\d{4}[a-z]?\))[^.;:]{0,40}$")
OTHER_PAPER_AFTER = re.compile(r"^\s*(?:of|in)\s+[A-Z][\w-]+(?:\s+(?:&|and)\s+[A-Z][\w-]+|\s+et al\.?)?,?\s+\(?\d{4}")


def sources() -> list[Path]:
    """The notebooks, README.md, the book's pages and the package's sources."""
    docs = [
        path
        for pattern in ("*.md", "*.rst", "*.py")
        for path in (REPO_ROOT / "docs").rglob(pattern)
        if not {"_mathjax", "node_modules", "notebooks", "_build"} & set(path.relative_to(REPO_ROOT).parts)
    ]
    return sorted(
        [
            *(REPO_ROOT / "notebooks").glob("*.py"),
            REPO_ROOT / "README.md",
            *docs,
            *(REPO_ROOT / "gpac_utils").rglob("*.py"),
        ]
    )


def table() -> tuple[set[tuple[str, str]], dict[str, tuple[str, str]]]:
    rows = numbering.read_table()
    known = {(row["kind"], row["number"]) for row in rows if row["number"]}
    labels = {row["label"]: (row["kind"], row["number"]) for row in rows if row["label"]}
    return known, labels


def proofs() -> dict[str, str]:
    """Appendix letter -> the statement it proves ("E" -> "Theorem 4.6"), from the appendix titles."""
    return {
        row["number"]: row["title"].removeprefix("Proof of ")
        for row in numbering.read_table()
        if row["kind"] == "Appendix" and row["title"].startswith("Proof of ")
    }


def wrong_citations(text: str, where: str = "") -> list[str]:
    """``where:line: citation (why)`` for every citation the paper's table does not have."""
    known, labels = table()
    proved = proofs()
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in CITATION.finditer(line):
            if OTHER_PAPER_BEFORE.search(line[: match.start()]) or OTHER_PAPER_AFTER.match(line[match.end() :]):
                continue
            kind = KINDS[match.group("kind").lower()]
            numbers = re.findall(_NUMBER, match.group("numbers"))
            missing = [number for number in numbers if (kind, number) not in known]
            if missing:
                problems.append(f"{where}:{lineno}: {match.group(0)!r} (the paper has no {kind} {missing[0]})")
            elif (
                kind == "Appendix"
                and len(numbers) == 1
                and numbers[0] in proved
                and not re.search(rf"proof|{re.escape(proved[numbers[0]])}\b", line, re.IGNORECASE)
            ):  # "App. E" meant as the old experimental setup: a proof appendix cited without its statement
                problems.append(
                    f"{where}:{lineno}: {match.group(0)!r} (Appendix {numbers[0]} is the proof of "
                    f"{proved[numbers[0]]}; say so on the line, or cite the right appendix)"
                )
            elif match.group("label") and labels.get(match.group("label")) != (kind, numbers[0]):
                got = labels.get(match.group("label"), ("no such label", ""))
                problems.append(f"{where}:{lineno}: {match.group(0)!r} (the label is {' '.join(got).strip()})")
        for match in BY_NAME.finditer(line):
            kind = KINDS.get(match.group("kind").lower(), "Equation")
            if f"{PREFIX[kind]}:{match.group('name')}" not in labels:
                problems.append(
                    f"{where}:{lineno}: {match.group(0)!r} (the paper has no {PREFIX[kind]}:{match.group('name')})"
                )
        problems += [
            f"{where}:{lineno}: `{label}` (the paper has no such label)"
            for label in LABEL.findall(line)
            if label not in labels
        ]
    return problems


def test_the_checker_finds_wrong_citations_and_passes_right_ones():
    wrong = (
        "Prop. 3.3\nTheorem 3.2: x\nThm 3.4.1\n(Def. 3.x)\nApp. E: models\nAppendices B–H\nTheorems 4.2–4.7\n"
        "Lemma 1\nTheorem 4.2 (`thm:empirical-known-grouping`)\nthe label `thm:nonexistent`\n"
        "Thm. `known-groupings`\nEq. (pac-optimal)\n"
    )
    found = wrong_citations(wrong, "x")
    assert [problem.split(":")[1] for problem in found] == [str(line) for line in range(1, 13)], found
    right = (
        "Theorem 4.3 (`thm:empirical-known-grouping`), Proposition 4.5, Def. 4.4, Assumption 4.1, "
        "Theorems 4.2–4.6, Appendices B–E, App. F.3, Algorithms 1–2, Section 4.2, Remark 4\n"
        "Maurer & Pontil (2009), Theorem 4; Theorem 2 of Howard et al. (2021)\n"
        "Thm. `unknown-grouping`, Eq. (pac-optimal-threshold), Assumption `ucb-validity`, Eq. `semantic_loss`\n"
    )
    assert wrong_citations(right) == []


def test_every_citation_of_the_paper_is_in_its_numbering():
    problems = []
    for path in sources():
        problems += wrong_citations(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))
    assert not problems, "citations the paper does not have:\n" + "\n".join(problems)


def test_the_theory_section_is_numbered_as_the_issue_states():
    _, labels = table()
    assert labels["assump:ucb-validity"] == ("Assumption", "4.1")
    assert labels["thm:empirical-known-grouping"] == ("Theorem", "4.3")
    assert labels["prop:grouping-benefit"] == ("Proposition", "4.5")
    assert labels["app:exp_setup"] == ("Appendix", "F")


def test_the_committed_table_is_what_the_latex_gives():
    latex = numbering.find_latex()
    if latex is None:
        pytest.skip(numbering.WHERE_TO_GET)
    derived = numbering.to_csv(numbering.derive(latex.read_text()))
    assert numbering.DATA.read_text() == derived, (
        f"gpac_utils/paper/data/paper_numbering.csv is stale: python workflow/scripts/paper_numbering.py {latex}"
    )
