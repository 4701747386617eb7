"""docs/extending.md runs: its python blocks, in order, in one namespace; nothing stays registered."""

from __future__ import annotations

import re

from gpac_utils import bounds, online, scores
from gpac_utils.workflow.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "extending.md"


def test_extending_page_runs_and_leaves_the_registries_as_they_were(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = [list(r) for r in (bounds.BOUNDS, scores.SCORES, online.LABELLING)]
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "GPAC thresholds" in out and "online thresholds" in out and "hoeffding_one_sided" in out
    assert [list(r) for r in (bounds.BOUNDS, scores.SCORES, online.LABELLING)] == before
