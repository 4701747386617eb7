"""The LiteLLM hook (issue 39): ``docs/deploying.md``'s configuration loads into a real ``litellm.Router``
(the optional ``gateway`` extra) whose certified routing strategy picks the cheap or the thinking
deployment from the request's pre-call score and group; every call is answered by LiteLLM's
``mock_response``, and sockets are blocked: nothing reaches the network."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket

import numpy as np
import pandas as pd
import pytest
import yaml
from test_precall import ToyEmbedder, fitted, toy_embedder  # noqa: F401  (fixtures)

from gpac_utils.calibrate import TOO_FEW, UNSEEN
from gpac_utils.checks import ParameterError
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.serve import CertifiedRouter, ServeOptions
from gpac_utils.workflow.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "deploying.md"


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before the import: no model-cost map fetched
    pytest.importorskip("litellm")


def page_config() -> dict:
    """The LiteLLM configuration of docs/deploying.md (its one yaml block with a model_list)."""
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.S) if "model_list" in b]
    assert len(blocks) == 1
    return yaml.safe_load(blocks[0])


@pytest.fixture
def deployed(fitted, tmp_path, no_network):  # noqa: F811
    """The page's configuration, its files in place, one group set to always think, answers mocked."""
    model_path, _, cert_path = fitted
    config = page_config()
    doc = json.loads(cert_path.read_text())
    doc["thresholds"]["mul_1d"] = None
    doc["groups"]["mul_1d"].update(status=TOO_FEW, threshold=None, ucb=None)
    (tmp_path / config["gpac"]["certificate"]).write_text(json.dumps(doc))
    shutil.copy(model_path, tmp_path / config["gpac"]["score_model"])
    for d in config["model_list"]:
        d["litellm_params"]["mock_response"] = f"answer of {d['model_info']['id']}"
    from gpac_utils.llm.gateway import build_router

    router, strategy = build_router(config, base=tmp_path, embedder=ToyEmbedder())
    return router, strategy, config, doc


def test_the_hook_routes_each_request_as_the_certificate_does(deployed):
    router, strategy, config, doc = deployed
    name = config["model_list"][0]["model_name"]
    ids = {d["model_info"]["gpac_route"]: d["model_info"]["id"] for d in config["model_list"]}
    items = load_benchmark("arith").groupby("group").head(6).reset_index(drop=True)
    replies = []
    for q, g in zip(items["question"], items["group"]):
        out = router.completion(model=name, messages=[{"role": "user", "content": q}], metadata={"group": g})
        replies.append(out.choices[0].message.content)
    out = asyncio.run(
        router.acompletion(model=name, messages=[{"role": "user", "content": items["question"][0]}], metadata={})
    )
    replies.append(out.choices[0].message.content)
    got = pd.DataFrame(strategy.decisions)
    assert len(got) == len(items) + 1
    # the same decisions as the serving router's, from the certificate and the prompt alone
    want = CertifiedRouter(doc, None, None, ServeOptions(embedder=ToyEmbedder())).decide(items)
    np.testing.assert_array_equal(got["score"][:-1], want["score"])
    assert got["route_nothink"][:-1].tolist() == want["route_nothink"].tolist()
    assert {True, False} <= set(got["route_nothink"])
    # the deployment that answered is the one picked
    assert replies == [f"answer of {ids[r]}" for r in np.where(got["route_nothink"], "nothink", "think")]
    # an always-think group always thinks, with its status; a request without a group thinks, unseen
    assert (~got.loc[got["group"] == "mul_1d", "route_nothink"]).all()
    assert (got.loc[got["group"] == "mul_1d", "status"] == TOO_FEW).all()
    assert got.iloc[-1][["group", "status", "route_nothink"]].tolist() == ["(no group)", UNSEEN, False]


def test_the_hook_refuses_what_it_cannot_serve(deployed, fitted, tmp_path):  # noqa: F811
    from gpac_utils.llm.gateway import CertifiedRoutingStrategy

    _, strategy, config, doc = deployed
    with pytest.raises(ParameterError, match="not a certified model group"):
        strategy.decide("gpt-unknown", [{"role": "user", "content": "hi"}])
    one = [d for d in config["model_list"] if d["model_info"]["gpac_route"] == "think"]
    with pytest.raises(ParameterError, match="needs one 'nothink' and one 'think' deployment"):
        CertifiedRoutingStrategy(doc, one, embedder=ToyEmbedder(), score_model=fitted[0])
    cascade = json.loads(json.dumps(doc))
    cascade["score"] = cascade["columns"]["score"] = "score_logits"
    del cascade["provenance"]["score_model"]
    with pytest.raises(ParameterError, match="needs the cheap model's answer"):
        CertifiedRoutingStrategy(cascade, config["model_list"])
