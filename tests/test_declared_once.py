"""Each fact declared once: workflow/notebooks.yaml is the one list of the notebooks, the paper
artefacts they reproduce and the files they write. The README's notebook table and the book's
paper-artefact index are generated from it (docs/_ext/notebook_index.py) and must not be stale; the
notebooks' MyST targets and the **Writes** lists of their headers must agree with it; the README
lands (short, one glossary, in the book)."""

from __future__ import annotations

import re
import sys
from itertools import product

import pytest

from gpac_utils.workflow.paths import REPO_ROOT
from gpac_utils.workflow.runner import discover

sys.path.insert(0, str(REPO_ROOT / "docs" / "_ext"))
import notebook_index  # noqa: E402

SPEC = notebook_index.load()
README = (REPO_ROOT / "README.md").read_text()
NOTEBOOKS = {path.stem: path.read_text() for path in discover()}


def test_generated_blocks_are_up_to_date():
    stale = [str(p.relative_to(REPO_ROOT)) for p in notebook_index.stale()]
    assert not stale, f"stale: {stale}; run python docs/_ext/notebook_index.py"


def test_a_stale_block_is_detected(tmp_path):
    """The check can fail: a notebook added to the list changes the README's table."""
    spec = {**SPEC, "99_new": {"about": "a new notebook", "gpu": "no", "data": "none"}}
    assert notebook_index.stale(spec) == [REPO_ROOT / "README.md"]
    made = notebook_index.blocks(spec)["notebooks"]
    assert "| `99_new` | a new notebook | — | not timed | no | none |" in made


def test_every_notebook_is_listed_once_with_what_the_readme_shows():
    assert list(SPEC) == sorted(NOTEBOOKS), "notebooks.yaml lists every notebook, in number order"
    for name, entry in SPEC.items():
        assert {"about", "gpu", "data"} <= set(entry), name
        assert set(entry) <= {
            "about",
            "paper",
            "artefacts",
            "gpu",
            "data",
            "reads",
            "after",
            "writes",
            "priority",
        }
    # every README row comes from notebooks.yaml and the measured runtimes, nothing typed beside them
    block = README.split("<!-- notebooks:start", 1)[1].split("<!-- notebooks:end", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| `") and "_" in line.split("|")[1]]
    assert [row.split("`")[1] for row in rows] == list(SPEC)


def test_runtimes_in_the_readme_are_the_measured_ones():
    times = notebook_index.runtimes()
    assert times, "benchmarks/reproduce_timings.csv"
    for name, seconds in times.items():
        row = next(line for line in README.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"| {seconds:.0f} s |" in row


def test_artefact_labels_are_the_notebooks_myst_targets():
    targets = {name: set(re.findall(r"^# \(((?:table|fig):[^)]+)\)=$", text, re.M)) for name, text in NOTEBOOKS.items()}
    for name, entry in SPEC.items():
        assert set(entry.get("artefacts", {})) == targets[name], name
    index = (REPO_ROOT / "docs" / "artefacts.md").read_text()
    for label in set().union(*targets.values()):
        assert f"<{label}>`" in index


def expand(pattern: str) -> list[str]:
    """Shell-style braces: ``a{,_b}.{png,pdf}`` -> a.png, a.pdf, a_b.png, a_b.pdf."""
    parts = re.split(r"\{([^{}]*)\}", pattern)
    choices = [[part] if i % 2 == 0 else part.split(",") for i, part in enumerate(parts)]
    return ["".join(combo).strip() for combo in product(*choices)]


def header_writes(text: str) -> list[str]:
    """The files named in the **Writes** paragraph of a notebook's first markdown cell."""
    cell = text.split("# %% [markdown]", 1)[1].split("\n# %%", 1)[0]
    paragraph = cell[cell.index("**Writes**") :].split("\n#\n")[0] if "**Writes**" in cell else ""
    return [f for token in re.findall(r"`([^`]+)`", paragraph) for f in expand(token)]


def declared_writes(entry: dict) -> set[str]:
    names = entry.get("writes", [])
    return {
        f"figures/{n}{s}" for n in names for s in ((".csv", ".md") if n.startswith("tables/") else (".png", ".pdf"))
    }


# Notebooks whose header does not yet list what they write (none).
HEADER_TO_FIX: set[str] = set()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="header to fix")) if n in HEADER_TO_FIX else n
        for n in sorted(SPEC)
    ],
)
def test_notebook_header_writes_what_notebooks_yaml_declares(name):
    """A header lists what the notebook writes (what a reader sees first); notebooks.yaml is the
    source: every declared file is in the header (a <placeholder> matches any name), and every
    figures/ file the header names is declared."""
    named = header_writes(NOTEBOOKS[name])
    declared = declared_writes(SPEC[name])
    patterns = [re.compile(re.sub(r"<[^>]*>", ".+", re.escape(f))) for f in named if f.startswith("figures/")]
    missing = sorted(f for f in declared if not any(p.fullmatch(f) for p in patterns))
    extra = sorted(f for f in named if f.startswith("figures/") and "<" not in f and f not in declared)
    assert not missing and not extra, f"{name}: header misses {missing}; header names undeclared {extra}"


def test_readme_lands():
    lines = README.splitlines()
    assert len(lines) <= 250
    for command in ("make reproduce", "make test"):
        assert f"\n{command}" in README
    # one glossary, in the book; every page the README sends a reader to exists and is in the book
    assert "| term | meaning |" not in README and "](docs/glossary.md)" in README
    index = (REPO_ROOT / "docs" / "index.md").read_text()
    for page in re.findall(r"\]\(docs/([a-z_]+)\.md\)", README):
        assert (REPO_ROOT / "docs" / f"{page}.md").is_file(), page
        assert re.search(rf"^{page}$", index, re.M), f"docs/{page}.md is not in docs/index.md's toctree"


def test_no_column_that_no_code_produces():
    """The README's batch table once showed an "Efficiency (%)" column; the notebooks write none."""
    pages = [README] + [p.read_text() for p in (REPO_ROOT / "docs").glob("*.md")]
    assert not any("Efficiency (%)" in page for page in pages)
