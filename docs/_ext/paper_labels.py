"""Paper labels (``table:01_results_known``, ``fig:errorbar_category``) as anchors of the book.

:mod:`gpac_utils.workflow.book` scans the notebooks' markdown for backticked paper labels and writes
``_generated/labels.json``: for every label, the page that *owns* it (the notebook whose header says
it **Reproduces** it, else one with a section named after it, else the first that mentions it) and
its anchor id (``table:01_results_known`` -> ``table-01_results_known``). This extension then

* puts that id on the owner page: on the section titled with the label when there is one, else on
  the paragraph that first names it -- so ``notebooks/21_table_known_groups.html#table-01_results_known``
  is a stable link the README and the notebooks can use;
* registers the label with Sphinx's standard domain, so ``{ref}`table:01_results_known``` works;
* turns every backticked mention of a label, on any page, into a link to that anchor.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes

LABEL = re.compile(r"^(?:table|fig):[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def anchor_id(label: str) -> str:
    """``table:01_results_known`` -> ``table-01_results_known`` (kept in step with the book builder)."""
    return label.replace(":", "-")


def _labels(app) -> dict[str, dict]:
    cached = getattr(app.env, "_paper_labels", None)
    if cached is None:
        path = Path(app.config.paper_labels_file or "")
        cached = json.loads(path.read_text()) if path.is_file() else {}
        app.env._paper_labels = cached
    return cached


def _std(env):
    domains = getattr(env, "domains", None)
    if domains is not None and hasattr(domains, "standard_domain"):
        return domains.standard_domain
    return env.get_domain("std")


def _target_node(doctree, label: str):
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is not None and title.astext().strip() == label:
            return section, label
    for literal in doctree.findall(nodes.literal):
        if literal.astext() == label:
            node = literal.parent if isinstance(literal.parent, nodes.paragraph) else literal
            return node, label
    return None, None


def on_doctree_read(app, doctree) -> None:
    docname = app.env.docname
    std = _std(app.env)
    for label, info in _labels(app).items():
        if info.get("doc") != docname:
            continue
        node, _ = _target_node(doctree, label)
        if node is None:
            # Not named on its own page (it should be): anchor the page's first section.
            node = next(iter(doctree.findall(nodes.section)), None)
            if node is None:
                continue
        ident = anchor_id(label)
        if ident not in node["ids"]:
            node["ids"].append(ident)
        title = info.get("title") or label
        std.labels[label.lower()] = (docname, ident, title)
        std.anonlabels[label.lower()] = (docname, ident)


def on_doctree_resolved(app, doctree, fromdocname: str) -> None:
    labels = _labels(app)
    if not labels or app.builder.format != "html":
        return
    for literal in list(doctree.findall(nodes.literal)):
        text = literal.astext()
        if not LABEL.match(text) or text not in labels:
            continue
        if isinstance(literal.parent, nodes.reference):
            continue
        owner = labels[text]["doc"]
        ident = anchor_id(text)
        if owner == fromdocname:
            uri = f"#{ident}"
        else:
            uri = f"{app.builder.get_relative_uri(fromdocname, owner)}#{ident}"
        ref = nodes.reference("", "", internal=True, refuri=uri, classes=["paper-label"])
        literal.replace_self(ref)
        ref.append(literal)


def setup(app):
    app.add_config_value("paper_labels_file", "", "env")
    app.connect("doctree-read", on_doctree_read)
    app.connect("doctree-resolved", on_doctree_resolved)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
