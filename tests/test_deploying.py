"""docs/deploying.md's example of serving one's own score runs (issue 39): a user registers a score
(a function of the requests and the cheap answers) and serves a certificate calibrated on it."""

from __future__ import annotations

import re

from test_serve import FakeEngine, requests_table

from gpac_utils.scores import SCORES
from gpac_utils.workflow.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "deploying.md"


def test_the_own_score_example_runs(capsys):
    [block] = [b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S) if "SCORES.registered" in b]
    cheap, thinker = FakeEngine("cheap"), FakeEngine("thinker")
    requests = requests_table(40, groups=("a", "b", "new"))
    namespace = {"cheap": cheap, "thinker": thinker, "requests": requests}
    before = list(SCORES)
    exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102
    served = namespace["served"]
    assert list(SCORES) == before  # registered for the block only
    assert served["score"].tolist() == [min(len(a) / 100, 1.0) for a in served["nothink_answer"]]
    assert {True, False} <= set(served["route_nothink"])
    assert (~served.loc[served["group"] == "new", "route_nothink"]).all()
    assert len(cheap.requests) == len(requests)  # a cascade score: every request gets a cheap answer
    assert [k for k, _ in thinker.requests] == served.loc[~served["route_nothink"], "item_id"].tolist()
    assert "score" in capsys.readouterr().out
