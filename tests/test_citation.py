"""CITATION.cff: parses as YAML and has the keys Citation File Format 1.2.0 requires.

(Checked once against the CFF 1.2.0 JSON schema with ``cffconvert --validate``; this test keeps
the required structure without a schema download.)
"""

from __future__ import annotations

import re

import yaml

from gpac_utils.workflow.paths import REPO_ROOT


def _check_authors(authors, where: str) -> None:
    assert isinstance(authors, list) and authors, f"{where}: authors must be a non-empty list"
    for person in authors:
        assert "name" in person or "family-names" in person, f"{where}: author without a name: {person}"


def test_citation_cff_has_the_required_keys():
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff.get(key), f"CITATION.cff: missing {key!r}"
    assert cff["title"].startswith("gpac-compendium")
    _check_authors(cff["authors"], "authors")
    paper = cff["preferred-citation"]
    for key in ("type", "title", "authors"):
        assert paper.get(key), f"preferred-citation: missing {key!r}"
    assert paper["title"] == "Conditional Performance Guarantee for Large Reasoning Models"
    _check_authors(paper["authors"], "preferred-citation")
    assert [a["family-names"] for a in paper["authors"]] == ["Huang", "Zeng", "Jing", "Wei", "An"]


ARXIV = "2601.22790"


def test_the_paper_is_linked_on_arxiv_in_the_citation_and_the_syllabus():
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    paper = cff["preferred-citation"]
    assert paper["url"] == f"https://arxiv.org/abs/{ARXIV}"
    assert {"type": "doi", "value": f"10.48550/arXiv.{ARXIV}"}.items() <= paper["identifiers"][0].items()
    (preprint,) = cff["references"]
    assert preprint["title"] == paper["title"] and preprint["year"] == paper["year"] == 2026
    assert [a["family-names"] for a in preprint["authors"]] == [a["family-names"] for a in paper["authors"]]
    # the syllabus's BibTeX says the same: title, authors in order, year, the arXiv identifier
    syllabus = (REPO_ROOT / "docs" / "syllabus.md").read_text()
    bibtex = syllabus.split("```bibtex\n", 1)[1].split("```", 1)[0]
    fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?$", bibtex, re.M))
    assert fields["title"] == paper["title"] and fields["year"] == str(paper["year"]) and fields["eprint"] == ARXIV
    assert fields["author"] == " and ".join(f"{a['family-names']}, {a['given-names']}" for a in paper["authors"])
    assert f"[arXiv:{ARXIV}](https://arxiv.org/abs/{ARXIV})" in syllabus


def test_the_readme_names_the_paper_in_its_first_paragraph():
    """Title, authors in order, venue and arXiv link, as CITATION.cff gives them (issue 50)."""
    paper = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())["preferred-citation"]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    first = " ".join(readme.split("\n## ", 1)[0].split("\n\n")[1].split())  # the paragraph under the title
    assert f"*{paper['title']}*" in first, "README: the first paragraph does not give the paper's title"
    names = [f"{a['given-names']} {a['family-names']}" for a in paper["authors"]]
    assert f"{', '.join(names[:-1])} and {names[-1]}" in first, "README: the authors, in the paper's order"
    venue = re.search(r"\((ICML \d{4})\)", paper["collection-title"])[1]
    assert f"{venue}, [arXiv:{ARXIV}]({paper['url']})" in first, "README: the venue and the arXiv link"
