"""docs/extending.md runs: its python blocks, in order, in one namespace; nothing stays registered."""

from __future__ import annotations

import re

from gpac_utils import bounds, calibrate, online, risks, scores
from gpac_utils.workflow.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "extending.md"


def test_extending_page_runs_and_leaves_the_registries_as_they_were(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    registries = (bounds.BOUNDS, scores.SCORES, calibrate.CALIBRATORS, risks.RISKS, online.LABELLING)
    before = [list(r) for r in registries]
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 9
    namespace: dict = {}
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102
        after = [list(r) for r in registries]  # the page's last block removed what it added
    finally:  # a failing block must not leave its entries registered for the other tests
        for registry, names in zip(registries, before):
            for name in [n for n in registry if n not in names]:
                registry.unregister(name)
    out = capsys.readouterr().out
    assert "GPAC thresholds" in out and "online thresholds" in out and "hoeffding_one_sided" in out
    assert (
        "G-PAC-wsr" in out
        and "pooled: [" in out
        and "with the margin" in out
        and "feasibility (hoeffding_one_sided" in out
    )
    assert after == before
    assert namespace["status"] == 0
