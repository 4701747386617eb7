"""docs/extending.md runs: its python blocks, in order, in one namespace; nothing stays registered. Its
answer-entropy module, as written, is generated, scored and served with stub engines (no package edit)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from test_serve import FakeEngine

from gpac_utils import PAC, bounds, calibrate, online, risks, scores
from gpac_utils.certificate import Certificate
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.engines import item_seed
from gpac_utils.llm.generation import GenerationRequest, generate, walk_samplings
from gpac_utils.llm.records import generations_status, load_generations
from gpac_utils.llm.scoring import score_run
from gpac_utils.llm.serve import CertifiedRouter
from gpac_utils.workflow.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "extending.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
REGISTRIES = (bounds.BOUNDS, scores.SCORES, scores.ROLES, calibrate.CALIBRATORS, risks.RISKS, online.LABELLING)


def _exec(blocks, namespace, registries=REGISTRIES):
    """Run ``blocks`` in ``namespace``; whatever they leave registered is removed; the registries after the blocks."""
    before = [list(r) for r in registries]
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102
        return [list(r) for r in registries]
    finally:  # a failing block must not leave its entries registered for the other tests
        for registry, names in zip(registries, before):
            for name in [n for n in registry if n not in names]:
                registry.unregister(name)


def test_extending_page_runs_and_leaves_the_registries_as_they_were(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = [list(r) for r in REGISTRIES]
    assert len(BLOCKS) == 11
    namespace: dict = {}
    after = _exec(BLOCKS, namespace)  # the page's last block removed what it added
    out = capsys.readouterr().out
    assert "GPAC thresholds" in out and "online thresholds" in out and "hoeffding_one_sided" in out
    assert (
        "G-PAC-wsr" in out
        and "pooled: [" in out
        and "with the margin" in out
        and "feasibility (hoeffding_one_sided" in out
        and "closed: ['group=logic & tier=free'" in out
    )
    assert "score_entropy" in out
    assert after == before
    assert namespace["status"] == 0


class _Recording(FakeEngine):
    """The fake engine, keeping the answers per request and the last message of each conversation."""

    def stream(self, requests, window=None):
        requests = list(requests)
        self.sent = [*getattr(self, "sent", []), *((s.n, c[-1]["content"]) for _, c, s in requests)]
        return super().stream(requests, window)


def test_the_pages_multi_sample_score_is_generated_scored_and_served(tmp_path):
    """The module block as one module: its role samples five non-thinking answers per item (declared, sent
    the non-thinking prompt), ``score_run`` computes its column and still scores a run made before it was
    registered, and the serving router samples the role through its public ``generate``."""
    [module] = [b for b in BLOCKS if "ROLES.register(" in b]
    items = load_benchmark("arith", n_items=16)
    engine, models = _Recording("tiny"), {"think": "tiny", "nothink": "tiny"}
    embedder = SimpleNamespace(model_name="fake", encode=lambda texts: np.eye(len(texts)))
    generate(
        items, models, tmp_path / "old", GenerationRequest(samplings=walk_samplings(), progress=False), engine=engine
    )
    namespace: dict = {}
    try:
        _exec([module], namespace, ())
        # an earlier run without the role: complete, scored without the new column, which it names
        old = tmp_path / "old"
        assert generations_status(old) == "complete"
        run = score_run(old, "arith", embedder=embedder, router_folds=2)
        assert "score_entropy" not in run.table and any("score_entropy" in note for note in run.notes)
        with pytest.raises(FileNotFoundError, match=r"role 'sampled': no generations under .*old.sampled") as info:
            score_run(old, "arith", scores=["score_entropy"], embedder=embedder)
        assert "\n" not in str(info.value)
        # a run with it: five answers per item, each sent the non-thinking prompt at the item's seed
        request = GenerationRequest(samplings=walk_samplings(), progress=False)
        assert request.roles[-1] == "sampled" and request.sampling("sampled").n == 5
        generate(items, models, tmp_path / "new", request, engine=engine)
        sampled = load_generations(tmp_path / "new", "sampled", items["item_id"])
        assert (sampled.groupby("item_id").size() == 5).all()
        assert {p for n, p in engine.sent if n == 5} == {m[-1]["content"] for m in items["messages_nothink"]}
        run = score_run(tmp_path / "new", "arith", embedder=embedder, router_folds=2)
        expected = [namespace["answer_entropy"](list(a)) for _, a in sampled.groupby("item_id", sort=False)["answer"]]
        np.testing.assert_allclose(run.table["score_entropy"], expected)
        assert list(run.table.columns[-3:]) == ["score_verbalized", "score_entropy", "score_router"]
        # served: the router samples the role on the cheap engine, the same answers at the same seeds
        u = run.table["score_entropy"].to_numpy()
        cal = PAC(0.5).fit(u, run.table["loss"].to_numpy())
        cert = Certificate.from_calibrator(cal, columns={"score": ("score_entropy", u)})
        served = CertifiedRouter(cert, engine, engine).serve(items)
        np.testing.assert_allclose(served["score"], u)
        first = items.iloc[0]
        s = walk_samplings()["sampled"].with_(seed=item_seed(0, first["item_id"]))
        want = [engine.complete(first["messages_nothink"], s, k).text for k in range(5)]
        assert sampled[sampled["item_id"] == first["item_id"]]["answer"].tolist() == want
    finally:
        for registry, name in ((scores.SCORES, "score_entropy"), (scores.ROLES, "sampled")):
            if name in registry:
                registry.unregister(name)
