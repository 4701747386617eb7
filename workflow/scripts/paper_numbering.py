r"""The paper's numbering, derived once from its LaTeX: label -> kind, number, title.

The committed table ``gpac_utils/paper/data/paper_numbering.csv`` (columns ``label, kind, number,
title``) is what every citation in the notebooks, the README, the book and the docstrings is checked
against (tests/test_paper_citations.py). Regenerate it with

    python workflow/scripts/paper_numbering.py PAPER.tex

or with no argument: ``$GPAC_PAPER_TEX``, else the workplace's copy beside the repository
(:func:`find_latex`). The LaTeX is not ours to redistribute, so it is not in the repository; without
it the check of the committed table against it skips with :data:`WHERE_TO_GET`. (A script beside the
workflow, not a module of the package: nothing in gpac_utils needs it.)

The counters follow the preamble's ``\newtheorem`` lines: ``theorem`` is numbered within sections
and shared by every environment declared with ``[theorem]`` (proposition, definition, assumption);
``remark`` has a counter of its own, not within sections. Sections are numbered 1, 2, ... and,
after ``\appendix``, A, B, ... (their subsections A.1, ...); ``\section*`` is unnumbered. Figures,
tables and algorithms are numbered through the document (``figure`` and ``figure*`` share one
counter), equations too (each numbered line of an ``align``). Every numbered section and appendix
has a row, labelled or not (label empty), so that "Section 1" or "Appendix G" can be checked too;
remarks and equations appear only where labelled.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "gpac_utils" / "paper" / "data" / "paper_numbering.csv"
#: Environment variable naming the paper's LaTeX source (the file holding ``\begin{document}``).
LATEX_ENV = "GPAC_PAPER_TEX"
#: Where the LaTeX is looked for when ``$GPAC_PAPER_TEX`` is unset: the copy of the workplace the
#: compendium was written in, beside the repository (absent in any other clone).
WORKPLACE_LATEX = Path(__file__).resolve().parents[3] / "shared" / "paper"
WHERE_TO_GET = (
    "the paper's LaTeX is not redistributed here: download the source of 'Conditional Performance "
    "Guarantee for Large Reasoning Models' (ICML 2026, CITATION.cff) from its authors or arXiv and set "
    f"{LATEX_ENV} to its .tex file"
)
COLUMNS = ("label", "kind", "number", "title")

_NEWTHEOREM = re.compile(r"\\newtheorem\{(\w+)\}(?:\[(\w+)\])?\{([^}]*)\}(?:\[(\w+)\])?")
_TOKEN = re.compile(
    r"\\(?P<cmd>section|subsection|appendix|begin|end|label|caption|\\)(?P<star>\*?)"
    r"|(?P<nonum>\\nonumber|\\notag)|(?P<comment>(?<!\\)%[^\n]*)"
)
_FLOATS = {"figure": "Figure", "table": "Table", "algorithm": "Algorithm"}
_EQUATIONS = {"equation", "align"}
_GREEK = {"alpha": "α", "epsilon": "ε", "delta": "δ", "pi": "π"}


def _group(text: str, start: int, open_: str = "{", close: str = "}") -> tuple[str, int]:
    """The balanced ``{...}`` (or ``[...]``) group starting at ``text[start]``, and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise ValueError(f"error: unbalanced {open_} at character {start} of the paper")


def _optional(text: str, pos: int) -> tuple[str, int]:
    """An optional ``[...]`` argument (skipping blanks) at ``pos``, or ``""``."""
    j = pos
    while j < len(text) and text[j] in " \t":
        j += 1
    if j < len(text) and text[j] == "[":
        return _group(text, j, "[", "]")
    return "", pos


def _clean(title: str, refs: dict[str, str]) -> str:
    """A title as plain text: ``\ref``s resolved, macros and braces dropped, blanks collapsed."""
    title = re.sub(r"\\(?:ref|cref|Cref)\{([^}]*)\}", lambda m: refs.get(m.group(1), "??"), title)
    title = title.replace("~", " ").replace("\\%", "%").replace("$", "")
    title = re.sub(r"\\(var)?(alpha|epsilon|delta|pi)\b", lambda m: _GREEK[m.group(2)], title)
    title = re.sub(r"\\[a-zA-Z]+\*?", "", title)
    title = re.sub(r"[{}]", "", title)
    return " ".join(title.split()).strip(" .")


def _theorem_kinds(text: str) -> dict[str, tuple[str, str, str | None]]:
    """env -> (printed kind, counter name, the counter it is numbered within)."""
    kinds: dict[str, tuple[str, str, str | None]] = {}
    for env, shared, name, within in _NEWTHEOREM.findall(text):
        if shared:
            kinds[env] = (name, shared, kinds[shared][2])
        else:
            kinds[env] = (name, env, within or None)
    return kinds


def derive(latex: str) -> list[dict[str, str]]:
    """Every labelled (and every appendix) unit of the paper, in document order."""
    kinds = _theorem_kinds(latex)
    body = latex[latex.index("\\begin{document}") :]
    counters: dict[str, int] = {}
    section = ""  # the current section's printed number ("4", "F")
    in_appendix = False
    stack: list[dict] = []  # open counted environments: {"kind", "number", "title"}
    last_heading: dict | None = None
    rows: list[dict[str, str]] = []
    pending: list[tuple[dict, str]] = []  # (row, raw title): titles resolved once every label is known

    def unit(kind: str, number: str, title: str, label: str = "") -> dict:
        return {"label": label, "kind": kind, "number": number, "title": title}

    def pending_title(row: dict) -> str:
        return next(title for candidate, title in pending if candidate is row)

    pos = 0
    while (m := _TOKEN.search(body, pos)) is not None:
        pos = m.end()
        cmd = m.group("cmd")
        if m.group("comment"):
            continue
        if m.group("nonum"):
            if stack and stack[-1].get("line_numbered"):
                stack[-1]["line_numbered"] = False
            continue
        if cmd == "appendix":
            in_appendix, counters["section"] = True, 0
        elif cmd in ("section", "subsection"):
            title, pos = _group(body, body.index("{", pos))
            if m.group("star"):
                last_heading = None
                continue
            if cmd == "section":
                counters["section"] = counters.get("section", 0) + 1
                counters["subsection"] = 0
                for _, counter, within in kinds.values():
                    if within == "section":
                        counters[counter] = 0
                n = counters["section"]
                section = chr(ord("A") + n - 1) if in_appendix else str(n)
                number, kind = section, "Appendix" if in_appendix else "Section"
            else:
                counters["subsection"] += 1
                number, kind = f"{section}.{counters['subsection']}", "Appendix" if in_appendix else "Section"
            last_heading = unit(kind, number, "")
            pending.append((last_heading, title))
            rows.append(last_heading)
        elif cmd == "begin":
            env, pos = _group(body, body.index("{", pos))
            base = env.rstrip("*")
            if env in kinds:
                name, counter, within = kinds[env]
                counters[counter] = counters.get(counter, 0) + 1
                number = f"{section}.{counters[counter]}" if within == "section" else str(counters[counter])
                title, pos = _optional(body, pos)
                if not title and body[pos : pos + 1] == "{":  # \begin{remark}{(Group partition)}
                    title, pos = _group(body, pos)
                title = title.strip("()")
                stack.append(unit(name, number, "") | {"raw": title, "env": env})
            elif base in _FLOATS:
                counters[base] = counters.get(base, 0) + 1
                stack.append(unit(_FLOATS[base], str(counters[base]), "") | {"raw": "", "env": env})
            elif env in _EQUATIONS:
                stack.append({"kind": "Equation", "env": env, "line_numbered": True, "labels": []})
            elif base in _EQUATIONS or env in ("subfigure", "minipage"):
                stack.append({"kind": None, "env": env})
        elif cmd == "\\":
            if stack and stack[-1].get("kind") == "Equation" and stack[-1]["env"] == "align":
                _close_equation_line(stack[-1], counters, rows)
        elif cmd == "end":
            env, pos = _group(body, body.index("{", pos))
            if stack and stack[-1]["env"] == env:
                top = stack.pop()
                if top.get("kind") == "Equation":
                    _close_equation_line(top, counters, rows)
        elif cmd == "caption":
            if m.group("star"):
                continue
            _, pos = _optional(body, pos)
            title, pos = _group(body, body.index("{", pos))
            if stack and stack[-1].get("kind") in _FLOATS.values() and not stack[-1]["raw"]:
                stack[-1]["raw"] = title.split("\\label")[0]
        elif cmd == "label":
            label, pos = _group(body, body.index("{", pos))
            target = stack[-1] if stack and stack[-1].get("kind") else None
            if target is not None and target["kind"] == "Equation":
                target["labels"].append(label)
            elif target is not None:
                row = unit(target["kind"], target["number"], "", label)
                rows.append(row)
                target.setdefault("rows", []).append(row)
                pending.append((row, target.get("raw", "")))
            elif stack and stack[-1]["env"].endswith("*") and stack[-1]["env"].rstrip("*") in _EQUATIONS:
                rows.append(unit("Equation", "", "unnumbered", label))
            elif last_heading is not None:
                if not last_heading["label"]:
                    last_heading["label"] = label
                else:
                    rows.append(dict(last_heading, label=label))
                    pending.append((rows[-1], pending_title(last_heading)))
    refs = {row["label"]: row["number"] for row in rows if row["label"]}
    for row, title in pending:
        if row["kind"] != "Equation":
            row["title"] = _clean(_first_sentence(title), refs)
    return rows


def _first_sentence(caption: str) -> str:
    """A caption's bold lead (``\textbf{...}``) or its first sentence; a heading as it is."""
    bold = re.match(r"\s*\\textbf\{", caption)
    if bold:
        return _group(caption, caption.index("{", bold.start()))[0]
    return re.split(r"(?<=[a-z)$])\.\s", caption, maxsplit=1)[0]


def _close_equation_line(env: dict, counters: dict[str, int], rows: list[dict[str, str]]) -> None:
    """One line of an equation environment ends: number it unless ``\nonumber``, attach its labels."""
    if env["line_numbered"]:
        counters["equation"] = counters.get("equation", 0) + 1
        rows.extend(
            {"label": label, "kind": "Equation", "number": str(counters["equation"]), "title": ""}
            for label in env["labels"]
        )
    env["line_numbered"], env["labels"] = True, []


def to_csv(rows: list[dict[str, str]]) -> str:
    """The table as CSV text (LF line ends), as committed."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({key: row[key] for key in COLUMNS} for row in rows)
    return out.getvalue()


def read_table(path: Path = DATA) -> list[dict[str, str]]:
    """The committed numbering table."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def find_latex() -> Path | None:
    """The paper's LaTeX: ``$GPAC_PAPER_TEX`` if set, else the first file of :data:`WORKPLACE_LATEX`
    holding ``\\begin{document}``; ``None`` if neither is there."""
    if os.environ.get(LATEX_ENV):
        path = Path(os.environ[LATEX_ENV]).expanduser()
        return path if path.is_file() else None
    candidates = sorted(WORKPLACE_LATEX.glob("*")) if WORKPLACE_LATEX.is_dir() else []
    return next((p for p in candidates if p.is_file() and "\\begin{document}" in p.read_text(errors="replace")), None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: python workflow/scripts/paper_numbering.py [PAPER.tex]  (writes " + str(DATA) + ")")
        return 2
    if not args and find_latex() is None:
        print(f"error: {WHERE_TO_GET}")
        return 1
    source = Path(args[0]) if args else find_latex()
    if not source.is_file():
        print(f"error: paper LaTeX not found: {source}")
        return 1
    DATA.write_text(to_csv(derive(source.read_text())))
    print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
