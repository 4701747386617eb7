"""The LiteLLM hook (issues 39 and 51): ``docs/deploying.md``'s configuration loads into a real
``litellm.Router`` (the optional ``gateway`` extra) whose certified routing strategy picks the cheap or
the thinking deployment from the request's pre-call score and group; every call is answered by
LiteLLM's ``mock_response``, and sockets are blocked: nothing reaches the network. Each response
carries its own decision (40 concurrent requests), identical to ``CertifiedRouter.decide``; a request
routed to the thinking model is never answered by the cheap one; what the hook needs is checked when
it is built. The proxy server: tests/test_proxy.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import re
import shutil
import socket

import numpy as np
import pandas as pd
import pytest
import yaml
from test_precall import ToyEmbedder, fitted, toy_embedder  # noqa: F401  (fixtures)
from test_serve import FakeEngine

from gpac_utils.calibrate import TOO_FEW, UNSEEN
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.llm.benchmarks import load_benchmark
from gpac_utils.llm.serve import DECISION_FIELDS, DECISION_LOGGER, CertifiedRouter, ServeOptions
from gpac_utils.scores import SCORES
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


def mocked(config: dict) -> dict:
    """The configuration with every deployment answering through mock_response."""
    config = json.loads(json.dumps(config))
    for d in config["model_list"]:
        d["litellm_params"]["mock_response"] = f"answer of {d['model_info']['id']}"
    return config


@pytest.fixture
def deployed(fitted, tmp_path, no_network):  # noqa: F811
    """The page's configuration, its files in place, one group set to always think, answers mocked."""
    model_path, _, cert_path = fitted
    config = mocked(page_config())
    doc = json.loads(cert_path.read_text())
    doc["thresholds"]["mul_1d"] = None
    doc["groups"]["mul_1d"].update(status=TOO_FEW, threshold=None, ucb=None)
    (tmp_path / config["gpac"]["certificate"]).write_text(json.dumps(doc))
    shutil.copy(model_path, tmp_path / config["gpac"]["score_model"])
    from gpac_utils.llm.gateway import build_router

    router, strategy = build_router(config, base=tmp_path, embedder=ToyEmbedder())
    return router, strategy, config, doc


def requests_of(n_per_group: int) -> pd.DataFrame:
    items = load_benchmark("arith").groupby("group").head(n_per_group).reset_index(drop=True)
    return items.assign(item_id=[f"req-{k}" for k in range(len(items))])


def expected(doc, items) -> list[dict]:
    """CertifiedRouter.decide's records of the same requests (the request id is the item id)."""
    router = CertifiedRouter.for_decisions(doc, ServeOptions(embedder=ToyEmbedder()))
    return router.records(router.decide(items))


def test_each_of_40_concurrent_responses_carries_its_own_decision(deployed, caplog):
    router, strategy, config, doc = deployed
    name = config["model_list"][0]["model_name"]
    ids = {d["model_info"]["gpac_route"]: d["model_info"]["id"] for d in config["model_list"]}
    items = requests_of(10).sample(40, random_state=0).reset_index(drop=True)
    assert len(items) == 40

    async def send_all():
        return await asyncio.gather(
            *(
                router.acompletion(
                    model=name,
                    messages=[{"role": "user", "content": q}],
                    metadata={"group": g},
                    litellm_call_id=i,  # the request id (one rule with the proxy: the call id)
                )
                for q, g, i in zip(items["question"], items["group"], items["item_id"])
            )
        )

    with caplog.at_level(logging.INFO, logger=DECISION_LOGGER):
        replies = asyncio.run(send_all())
    got = [r._hidden_params["gpac_decision"] for r in replies]
    want = expected(doc, items)
    for g, w, reply in zip(got, want, replies):
        assert {k: g[k] for k in DECISION_FIELDS} == w  # its own request's decision, field by field
        assert reply.choices[0].message.content == f"answer of {g['deployment']}" == f"answer of {ids[g['route']]}"
        heads = reply._hidden_params["additional_headers"]
        assert heads["x-gpac-request-id"] == w["request_id"] and heads["x-gpac-route"] == w["route"]
        assert heads["x-gpac-certificate-sha256"] == w["certificate_sha256"]
    assert {"nothink", "think"} <= {g["route"] for g in got}  # both routes occur
    # an always-think group always thinks, with its status
    assert {(g["route"], g["status"]) for g in got if g["group"] == "mul_1d"} == {("think", TOO_FEW)}
    # the certificate's SHA-256 is that of the file gpac calibrate writes (here: of its canonical JSON)
    cert_text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    assert got[0]["certificate_sha256"] == hashlib.sha256(cert_text.encode()).hexdigest()
    # every decision went to the named logger, one JSON line each
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == DECISION_LOGGER]
    assert sorted(r["request_id"] for r in logged) == sorted(items["item_id"])
    # nothing kept in memory
    assert not any(isinstance(v, list) and v for v in vars(strategy).values() if v is not strategy._pending)


def test_the_sync_path_and_requests_without_group_or_text(deployed):
    router, strategy, config, doc = deployed
    name = config["model_list"][0]["model_name"]
    ids = {d["model_info"]["gpac_route"]: d["model_info"]["id"] for d in config["model_list"]}
    items = requests_of(1)
    for q, g, i in zip(items["question"], items["group"], items["item_id"]):
        reply = router.completion(
            model=name, messages=[{"role": "user", "content": q}], metadata={"group": g}, litellm_call_id=i
        )
        got = reply._hidden_params["gpac_decision"]
        [want] = expected(doc, items[items["item_id"] == i])
        assert {k: got[k] for k in DECISION_FIELDS} == want
    # a request without a group thinks, unseen; without a user message, or with blank text, it thinks, unscored
    q = items["question"][0]
    cases = {
        "no group": ([{"role": "user", "content": q}], {}),
        "no user message": ([{"role": "system", "content": q}], {"group": "add_1d"}),
        "blank text": ([{"role": "user", "content": "  "}], {"group": "add_1d"}),
        "empty parts": ([{"role": "user", "content": [{"type": "text", "text": ""}]}], {"group": "add_1d"}),
    }
    from gpac_utils.llm.gateway import NO_GROUP, NO_TEXT

    for case, (messages, metadata) in cases.items():
        reply = asyncio.run(router.acompletion(model=name, messages=messages, metadata=metadata))
        got = reply._hidden_params["gpac_decision"]
        assert got["route"] == "think" and reply.choices[0].message.content == f"answer of {ids['think']}", case
        if case == "no group":
            assert (got["group"], got["status"]) == (NO_GROUP, UNSEEN)
        else:
            assert got["status"] == NO_TEXT and math.isnan(got["score"]), case


def refuse_constant(name):
    raise ValueError(f"not JSON: {name}")


def test_log_lines_are_strict_json_and_the_request_id_is_the_call_id(deployed, caplog):
    """Review W5: a NaN score and a -inf threshold are logged as null (json.loads refusing NaN and Infinity
    reads every line). Review W6: in litellm.Router, as in the proxy, the request id is the call id the
    response carries, also when the call names none or its metadata names a request_id."""
    router, strategy, config, doc = deployed
    name = config["model_list"][0]["model_name"]
    q = requests_of(1)["question"][0]
    calls = [
        ([{"role": "user", "content": "  "}], {"group": "add_1d", "request_id": "mine"}),  # no text: score nan
        ([{"role": "user", "content": q}], {"group": "mul_1d"}),  # always thinks: threshold -inf
        ([{"role": "user", "content": q}], {"group": "add_1d"}),
    ]
    with caplog.at_level(logging.INFO, logger=DECISION_LOGGER):
        replies = [router.completion(model=name, messages=m, metadata=md) for m, md in calls[:2]]
        replies.append(asyncio.run(router.acompletion(model=name, messages=calls[2][0], metadata=calls[2][1])))
    lines = [r.getMessage() for r in caplog.records if r.name == DECISION_LOGGER]
    logged = [json.loads(line, parse_constant=refuse_constant) for line in lines]
    assert len(logged) == 3 and logged[0]["score"] is None and logged[1]["threshold"] is None
    assert math.isnan(replies[0]._hidden_params["gpac_decision"]["score"])  # the record itself keeps nan
    for reply, line in zip(replies, logged):
        call_id = reply._hidden_params["litellm_call_id"]
        assert call_id and line["request_id"] == reply._hidden_params["gpac_decision"]["request_id"] == call_id
        assert reply._hidden_params["additional_headers"]["x-gpac-request-id"] == call_id
    with pytest.raises(ValueError, match="not JSON: NaN"):  # the check can fail: what json.dumps wrote before
        json.loads(json.dumps({"score": math.nan}), parse_constant=refuse_constant)


def test_a_request_routed_to_think_is_never_answered_by_the_cheap_model(deployed, fitted, tmp_path):  # noqa: F811
    from gpac_utils.llm.gateway import build_router

    _, _, config, doc = deployed
    name = config["model_list"][0]["model_name"]
    # fallbacks from the certified group (or its deployments), or default ones, are refused at build
    for settings in (
        {"fallbacks": [{name: ["other"]}]},
        {"context_window_fallbacks": [{"qwen3-4b-thinking": ["qwen3-4b-instruct"]}]},
        {"default_fallbacks": ["other"]},
    ):
        with pytest.raises(ParameterError, match="fallback") as info:
            build_router({**config, "router_settings": settings}, base=tmp_path, embedder=ToyEmbedder())
        assert "\n" not in str(info.value)
    # a failing thinking deployment, retried: the error comes back, never the cheap answer
    failing = json.loads(json.dumps(config))
    for d in failing["model_list"]:
        if d["model_info"]["gpac_route"] == "think":
            d["litellm_params"]["mock_response"] = "litellm.InternalServerError"
    router, _ = build_router(failing, base=tmp_path, embedder=ToyEmbedder(), num_retries=2)
    items = requests_of(1)
    mul = items[items["group"] == "mul_1d"].iloc[0]  # always thinks
    with pytest.raises(Exception) as info:
        router.completion(
            model=name, messages=[{"role": "user", "content": mul["question"]}], metadata={"group": "mul_1d"}
        )
    assert "answer of qwen3-4b-instruct" not in str(info.value)


def test_what_the_hook_needs_is_checked_when_it_is_built(deployed, fitted, tmp_path):  # noqa: F811
    from gpac_utils.llm.gateway import CertifiedRoutingStrategy

    _, strategy, config, doc = deployed
    with pytest.raises(ParameterError, match="not a certified model group"):
        strategy.decide("gpt-unknown", [{"role": "user", "content": "hi"}])
    one = [d for d in config["model_list"] if d["model_info"]["gpac_route"] == "think"]
    with pytest.raises(ParameterError, match="needs one 'nothink' and one 'think' deployment"):
        CertifiedRoutingStrategy(doc, one, embedder=ToyEmbedder(), score_model=fitted[0])
    no_id = json.loads(json.dumps(config["model_list"]))
    del no_id[0]["model_info"]["id"]
    with pytest.raises(ParameterError, match=r"model_list\[0\]: a certified deployment needs a model_info.id"):
        CertifiedRoutingStrategy(doc, no_id, embedder=ToyEmbedder(), score_model=fitted[0])
    cascade = json.loads(json.dumps(doc))
    cascade["score"] = cascade["columns"]["score"] = "score_logits"
    del cascade["provenance"]["score_model"]
    with pytest.raises(ParameterError, match="needs the cheap model's answer"):
        CertifiedRoutingStrategy(cascade, config["model_list"])
    # a score_router certificate without its model: refused at build, by the strategy and by the router
    bare = json.loads(json.dumps(doc))
    del bare["provenance"]["score_model"]
    for build in (
        lambda: CertifiedRoutingStrategy(bare, config["model_list"]),
        lambda: CertifiedRouter.for_decisions(bare),
        lambda: CertifiedRouter(bare, FakeEngine("a"), FakeEngine("b")),
    ):
        with pytest.raises(ParameterError, match="served by its fitted model .* records none") as info:
            build()
        assert "\n" not in str(info.value)
    # engines are checked at build, in one line
    for engines, role in (((None, None), "nothink"), ((FakeEngine("a"), object()), "think")):
        with pytest.raises(ParameterError, match=f"^{role}: needs an engine") as info:
            CertifiedRouter(doc, *engines, ServeOptions(embedder=ToyEmbedder()))
        assert "\n" not in str(info.value)
    with pytest.raises(ParameterError, match="serve: this router decides only"):
        CertifiedRouter.for_decisions(doc, ServeOptions(embedder=ToyEmbedder())).serve(requests_of(1))


def test_a_certificate_with_a_group_named_like_the_no_group_label_is_refused(deployed, fitted):  # noqa: F811
    """A request without a group is labelled "(no group)"; a certified group of that name would take its
    threshold, so such a certificate is refused when the gateway is built (review, style)."""
    from gpac_utils.llm.gateway import NO_GROUP, CertifiedRoutingStrategy

    _, _, config, doc = deployed
    doc = json.loads(json.dumps(doc))
    doc["thresholds"][NO_GROUP] = doc["thresholds"].pop("add_1d")
    doc["groups"][NO_GROUP] = doc["groups"].pop("add_1d")
    with pytest.raises(ParameterError, match="has a group named"):
        CertifiedRoutingStrategy(doc, config["model_list"], score_model=fitted[0], embedder=ToyEmbedder())


def test_decide_returns_item_ids_and_refuses_duplicates(deployed):
    _, _, _, doc = deployed
    assert SCORES["score_router"].request_columns == ("question",)
    router = CertifiedRouter.for_decisions(doc, ServeOptions(embedder=ToyEmbedder()))
    assert router.request_columns == ("question",)
    items = requests_of(2)
    decided = router.decide(items)
    assert decided["item_id"].tolist() == items["item_id"].tolist()
    assert (decided["route"] == np.where(decided["route_nothink"], "nothink", "think")).all()
    twice = pd.concat([items, items.head(1)])
    with pytest.raises(DataError, match="item_id 'req-0' appears more than once"):
        router.decide(twice)
    with pytest.raises(DataError, match="needs the 'question' column"):
        router.decide(items.drop(columns="question"))
    with pytest.raises(DataError, match="need a unique 'item_id'"):
        router.decide(items.drop(columns="item_id"))


def test_the_performance_page_quotes_the_benchmark_csv():
    """docs/performance.md's gateway figures are those of benchmarks/gateway.csv (benchmarks/bench_gateway.py)."""
    rows = pd.read_csv(REPO_ROOT / "benchmarks" / "gateway.csv").set_index("case")
    page = (REPO_ROOT / "docs" / "performance.md").read_text()
    section = page[page.index("## The certified gateway hook") :]
    assert {"proxy_default", "proxy_certified", "proxy_added", "hook_without_embedding", "decision"} <= set(rows.index)
    for case in rows.index.drop("batch_vs_alone"):  # every timed row is on the page
        med, p99 = rows.loc[case, ["median_ms", "p99_ms"]]
        fmt = "{:.4f}" if abs(med) < 0.01 else "{:.2f}"
        assert f"| {fmt.format(med)} ms | {fmt.format(p99)} ms |" in section, case
    # the page's claim: the decision without the embedding within 1 ms at the 99th percentile
    assert rows.loc["decision", "p99_ms"] < 1.0
    assert rows.loc["hook_without_embedding", "p99_ms"] < 1.0
    assert f"the largest difference rounds to {rows.loc['batch_vs_alone', 'median_ms']:.4f}" in section
    burst = rows.loc["proxy_certified_burst16_wall", "median_ratio"]  # the burst's wall time per request, certified
    assert f"grows by {rows.loc['proxy_added_burst16_wall', 'median_ms']:.2f} ms (+{(burst - 1) * 100:.0f} %" in section
    assert f"load average {rows['machine'].iloc[0].rsplit(' ', 1)[1]}" in section
