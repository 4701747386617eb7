"""Serving a certificate of several overlapping groupings (issue 54, item 2): ``CertifiedRouter`` and the LiteLLM
hook route each request by its cell (a label of each grouping: a request column each for the router,
``metadata[<column>]`` each for the gateway), exactly as ``gpac route`` routes the same rows; a request missing a
label, or with one the certificate lacks, thinks and its record says which; what a collection cannot be served
with (``group_key``, ``drift``, ``online``, a membership matrix) is refused in one line naming it; the proxy
configuration's ``gpac`` block loads a collection certificate; docs/overlapping-groups.md's serving example runs
as written. Offline: the toy embedder of tests/test_precall.py, LiteLLM's ``mock_response``, sockets blocked."""

from __future__ import annotations

import json
import logging
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from test_gateway import mocked, no_network, page_config  # noqa: F401  (fixtures)
from test_precall import ToyEmbedder, fitted, toy_embedder  # noqa: F401  (fixtures)
from test_serve import FakeEngine

from gpac_utils.calibrate import CERTIFIED, NO_FEASIBLE, UNSEEN
from gpac_utils.certificate import Certificate
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.cli import main
from gpac_utils.llm.drift import DriftStore
from gpac_utils.llm.serve import DECISION_FIELDS, DECISION_LOGGER, NO_GROUP, CertifiedRouter, ServeOptions
from gpac_utils.multigroup import MinGPAC
from gpac_utils.online import OnlineGPAC
from gpac_utils.workflow.paths import REPO_ROOT

GROUPINGS = ("group", "tier")
PAGE = REPO_ROOT / "docs" / "overlapping-groups.md"


@pytest.fixture(scope="module")
def two(fitted, tmp_path_factory):  # noqa: F811
    """The pre-call router's scored table with two groupings (``group``: the arithmetic operation; ``tier``: free
    or paid, alternating), calibrated as docs/overlapping-groups.md's Serving section does (Shift-G-PAC)."""
    model, scored, _ = fitted
    d = tmp_path_factory.mktemp("mgserve")
    table = pd.read_parquet(scored)
    table["tier"] = np.where(np.arange(len(table)) % 2, "paid", "free")
    table.to_parquet(d / "two.parquet")
    shutil.copy(model, d / "router.json")
    args = ["calibrate", "--data", d / "two.parquet", "--score-col", "score_router", "--group-col", "group"]
    args += ["--group-col", "tier", "--eps", "0.1", "--score-model", d / "router.json", "-o", d / "two.json"]
    assert main([str(a) for a in args]) == 0
    return d, table


def requests_of(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rows as requests (the request id: the item id), the grouping columns in another order."""
    return table[["item_id", "question", "tier", "group"]].reset_index(drop=True)


def routed_by_cli(d, tmp_path) -> pd.DataFrame:
    rc = main(
        ["route", "--thresholds", str(d / "two.json"), "--data", str(d / "two.parquet"), "-o", str(tmp_path / "r.csv")]
    )
    assert rc == 0
    return pd.read_csv(tmp_path / "r.csv")


def test_the_router_decides_every_request_as_gpac_route_routes_its_row(two, tmp_path, caplog):
    d, table = two
    cert = Certificate.read(d / "two.json")
    assert cert.kind == "collection" and cert.group_columns == GROUPINGS
    router = CertifiedRouter.for_decisions(d / "two.json", ServeOptions(embedder=ToyEmbedder()))
    assert router.group_columns == GROUPINGS
    with caplog.at_level(logging.INFO, logger=DECISION_LOGGER):
        got = router.decide(requests_of(table))
    cli = routed_by_cli(d, tmp_path)
    # the same score (the recorded model on the question), threshold and route as gpac route, row by row
    np.testing.assert_allclose(got["score"], table["score_router"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got["threshold"], cli["threshold"])
    np.testing.assert_array_equal(got["route_nothink"], cli["route_nothink"])
    assert {"nothink", "think"} == set(got["route"])  # both routes occur
    # the record's group is the request's cell, as the certificate names it; its threshold is that cell's
    cells = "group=" + table["group"] + " & tier=" + table["tier"]
    assert got["group"].tolist() == cells.tolist() and set(cells) == set(cert.thresholds)
    want = cells.map(lambda c: -math.inf if cert.thresholds[c] is None else cert.thresholds[c])
    np.testing.assert_array_equal(got["threshold"], want)
    # the status: certified where every group of the cell is; else the first group's that does not route
    status = {g: e["status"] for g, e in cert.groups.items()}
    assert {status[g] for g in status} == {CERTIFIED, NO_FEASIBLE}
    for cell, st in zip(got["group"], got["status"]):
        parts = [status[p] for p in cell.split(" & ")]
        assert st == next((s for s in parts if s != CERTIFIED), CERTIFIED)
    assert (got.loc[got["status"] != CERTIFIED, "route"] == "think").all()
    # each decision logged, with the cell
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == DECISION_LOGGER]
    assert [r["group"] for r in logged] == got["group"].tolist()
    assert list(logged[0]) == list(DECISION_FIELDS)  # the record's fields, unchanged
    # one request at a time (the gateway's path) gives the same records
    one = [
        router.decide_one(i, {"group": o, "tier": t}, u)
        for i, o, t, u in zip(got["item_id"], table["group"], table["tier"], got["score"])
    ]
    assert one == router.records(got)


def test_a_request_without_a_label_or_with_an_unknown_one_thinks_and_says_which(two):
    d, table = two
    router = CertifiedRouter.for_decisions(d / "two.json", ServeOptions(embedder=ToyEmbedder()))
    cert = router.certificate
    good = table[table["group"] == "solve_x"].head(1)  # a certified cell whose request routes cheap
    base = requests_of(good)
    assert router.decide(base)["route"].iloc[0] == "nothink"
    rows = pd.concat(
        [
            base.assign(item_id="no-tier", tier=None),
            base.assign(item_id="nan-op", group=np.nan),
            base.assign(item_id="blank-op", group=""),
            base.assign(item_id="new-tier", tier="enterprise"),
            base.assign(item_id="new-op", group="div_2d"),
        ],
        ignore_index=True,
    )
    got = router.decide(rows).set_index("item_id")
    assert (got["route"] == "think").all() and np.isneginf(got["threshold"]).all()
    assert got.loc["no-tier", "status"] == f"{UNSEEN}: no 'tier'"
    assert got.loc["nan-op", "status"] == got.loc["blank-op", "status"] == f"{UNSEEN}: no 'group'"
    assert got.loc["new-tier", "status"] == f"{UNSEEN}: group 'tier=enterprise'"
    assert got.loc["new-op", "status"] == f"{UNSEEN}: group 'group=div_2d'"
    # the group is the cell, with the missing label marked: nothing re-paired to another cell
    assert got.loc["no-tier", "group"] == "group=solve_x & tier=" + NO_GROUP
    assert got.loc["new-tier", "group"] == "group=solve_x & tier=enterprise"
    assert not set(got["group"]) & set(cert.thresholds)
    # the same, one at a time: an absent key, None, NaN
    for group, status in [
        ({"group": "solve_x"}, f"{UNSEEN}: no 'tier'"),
        ({"group": None, "tier": "paid"}, f"{UNSEEN}: no 'group'"),
        ({"group": math.nan, "tier": "paid"}, f"{UNSEEN}: no 'group'"),
        ({"group": "solve_x", "tier": "gold"}, f"{UNSEEN}: group 'tier=gold'"),
    ]:
        record = router.decide_one("r", group, 0.0)
        assert (record["route"], record["status"], record["threshold"]) == ("think", status, -math.inf), group


def test_what_a_collection_cannot_be_served_with_is_refused_naming_it(two, tmp_path):
    d, table = two
    options = ServeOptions(embedder=ToyEmbedder())
    router = CertifiedRouter.for_decisions(d / "two.json", options)
    with pytest.raises(DataError, match=r"^requests: Shift-G-PAC needs the group column 'tier' \(one per grouping"):
        router.decide(requests_of(table).drop(columns="tier"))
    bad = requests_of(table.head(1)).assign(group="x & tier=paid")  # would read as another cell
    with pytest.raises(DataError, match=r"^requests: column 'group' has the label 'x & tier=paid'"):
        router.decide(bad)
    with pytest.raises(ParameterError, match=r"^group: a Shift-G-PAC certificate takes a label per grouping"):
        router.decide_one("r", "solve_x", 0.1)
    with pytest.raises(DataError, match=r"^score: must be in \[0, 1\]"):
        router.decide_one("r", {"group": "solve_x", "tier": "paid"}, 1.5)
    with pytest.raises(ParameterError, match=r"^drift: watches one group per request; a Shift-G-PAC certificate"):
        CertifiedRouter.for_decisions(d / "two.json", options, drift=DriftStore(tmp_path / "drift.sqlite"))
    engine = FakeEngine("m")
    online = OnlineGPAC(eps=0.1, label_prob=0.5)
    with pytest.raises(ParameterError, match=r"^online: watches one group per request; .* serve it without online$"):
        CertifiedRouter(d / "two.json", engine, engine, options, online=online, loss_fn=lambda *a: 0.0)
    # a certificate with a group named as a request without a label is named
    doc = json.loads((d / "two.json").read_text())
    doc["groups"][f"tier={NO_GROUP}"] = doc["groups"].pop("tier=paid")
    doc["group_sizes"][f"tier={NO_GROUP}"] = doc["group_sizes"].pop("tier=paid")
    doc["thresholds"] = {c.replace("tier=paid", f"tier={NO_GROUP}"): t for c, t in doc["thresholds"].items()}
    with pytest.raises(ParameterError, match=r"^certificate: has a group 'tier=\(no group\)'"):
        CertifiedRouter.for_decisions(doc, options)
    # a membership matrix names no request attribute
    rng = np.random.default_rng(0)
    member = pd.DataFrame({"a": rng.uniform(size=600) < 0.5, "b": rng.uniform(size=600) < 0.7})
    u = rng.uniform(size=600)
    cal = MinGPAC(eps=0.2).fit(u, (rng.uniform(size=600) < 0.1 * u).astype(float), member)
    cert = Certificate.from_calibrator(cal, columns={"score": ("score_router", u)})
    with pytest.raises(
        ParameterError, match=r"^certificate: this Min-G-PAC certificate was calibrated on a membership"
    ):
        CertifiedRouter.for_decisions(cert, options)


def test_serve_routes_by_the_cell_and_calls_each_engine_for_its_requests(two):
    d, table = two
    cheap, thinker = FakeEngine("cheap"), FakeEngine("thinker")
    router = CertifiedRouter(d / "two.json", cheap, thinker, ServeOptions(embedder=ToyEmbedder()))
    items = requests_of(table.groupby(["group", "tier"]).head(3)).assign(
        messages=lambda t: [[{"role": "user", "content": q}] for q in t["question"]]
    )
    served = router.serve(items)
    decided = CertifiedRouter.for_decisions(d / "two.json", ServeOptions(embedder=ToyEmbedder())).decide(items)
    pd.testing.assert_frame_equal(served[decided.columns], decided)
    assert sorted(k for k, _ in cheap.requests) == sorted(served.loc[served["route_nothink"], "item_id"])
    assert sorted(k for k, _ in thinker.requests) == sorted(served.loc[~served["route_nothink"], "item_id"])


# ------------------------------------------------------------------------------------------ the LiteLLM hook
def collection_config(d) -> dict:
    """docs/deploying.md's configuration for the collection certificate: no group_key (a key per grouping)."""
    config = mocked(page_config())
    config["gpac"].pop("group_key")
    config["gpac"].update(certificate="two.json", score_model="router.json")
    return config


@pytest.fixture
def gateway(two, no_network):  # noqa: F811
    from gpac_utils.llm.gateway import build_router

    d, table = two
    router, strategy = build_router(collection_config(d), base=d, embedder=ToyEmbedder())
    return router, strategy, table


def test_the_gateway_picks_each_deployment_from_both_groupings_in_metadata(gateway, two, tmp_path):
    router, strategy, table = gateway
    d, _ = two
    assert strategy.group_keys == GROUPINGS and strategy.group_key is None
    items = requests_of(table.groupby(["group", "tier"]).head(4))
    want = CertifiedRouter.for_decisions(d / "two.json", ServeOptions(embedder=ToyEmbedder())).decide(items)
    ids = {"nothink": "qwen3-4b-instruct", "think": "qwen3-4b-thinking"}
    for (_, row), (_, w) in zip(items.iterrows(), want.iterrows()):
        reply = router.completion(
            model="certified",
            messages=[{"role": "user", "content": row["question"]}],
            metadata={"group": row["group"], "tier": row["tier"]},
            litellm_call_id=row["item_id"],
        )
        got = reply._hidden_params["gpac_decision"]
        assert {k: got[k] for k in DECISION_FIELDS} == {
            "request_id": w["item_id"],
            **{k: w[k] for k in ("group", "status", "score", "threshold", "route", "certificate_sha256")},
        }
        assert (
            got["deployment"] == ids[got["route"]]
            and reply.choices[0].message.content == f"answer of {ids[got['route']]}"
        )
        assert reply._hidden_params["additional_headers"]["x-gpac-group"] == w["group"]  # ' & ' and '=' kept
    assert {"nothink", "think"} == set(want["route"])
    # the decisions equal gpac route's on the same rows
    cli = routed_by_cli(d, tmp_path).set_index("item_id").loc[items["item_id"]]
    np.testing.assert_array_equal(want["route_nothink"], cli["route_nothink"])


def test_the_gateway_thinks_for_a_missing_or_unknown_label_and_records_it(gateway):
    router, strategy, table = gateway
    q = table.loc[table["group"] == "solve_x", "question"].iloc[0]
    cases = [
        ({"group": "solve_x", "tier": "paid"}, None, "group=solve_x & tier=paid"),
        ({"group": "solve_x"}, f"{UNSEEN}: no 'tier'", f"group=solve_x & tier={NO_GROUP}"),
        ({"tier": "free", "op": "solve_x"}, f"{UNSEEN}: no 'group'", f"group={NO_GROUP} & tier=free"),
        ({"group": "solve_x", "tier": "gold"}, f"{UNSEEN}: group 'tier=gold'", "group=solve_x & tier=gold"),
        (None, f"{UNSEEN}: no 'group'", f"group={NO_GROUP} & tier={NO_GROUP}"),
    ]
    for metadata, status, cell in cases:
        record = strategy.decide("certified", [{"role": "user", "content": q}], {"metadata": metadata})
        assert record["group"] == cell, metadata
        if status is None:
            assert record["status"] == CERTIFIED and record["route"] == "nothink"
        else:
            assert (record["status"], record["route"], record["threshold"]) == (status, "think", -math.inf)
    # no user text: thinks, its cell recorded
    record = strategy.decide(
        "certified", [{"role": "user", "content": " "}], {"metadata": {"group": "solve_x", "tier": "paid"}}
    )
    assert record["group"] == "group=solve_x & tier=paid" and record["route"] == "think" and math.isnan(record["score"])


def test_group_key_and_drift_with_a_collection_certificate_are_refused_naming_them(two, tmp_path, no_network):  # noqa: F811
    from gpac_utils.llm.gateway import CertifiedProxyHook, build_router

    d, _ = two
    config = collection_config(d)
    with pytest.raises(ParameterError, match=r"^group_key: a Shift-G-PAC certificate reads a label per grouping"):
        build_router({**config, "gpac": {**config["gpac"], "group_key": "group"}}, base=d, embedder=ToyEmbedder())
    with pytest.raises(ParameterError, match=r"^drift: watches one group per request"):
        build_router(
            {**config, "gpac": {**config["gpac"], "drift": {"store": str(tmp_path / "s.sqlite")}}},
            base=d,
            embedder=ToyEmbedder(),
        )
    # a request whose label would read as another cell's: refused (HTTP 400 in the proxy), naming the key
    hook = CertifiedProxyHook(config, base=d, embedder=ToyEmbedder())
    data = {"model": "certified", "messages": [{"role": "user", "content": "What is 7 times 8?"}]}
    data["metadata"] = {"group": "x & tier=paid", "tier": "free"}
    import asyncio

    with pytest.raises(Exception, match=r"metadata key 'group' has the label 'x & tier=paid'") as caught:
        asyncio.run(hook.async_pre_call_hook(None, None, data, "acompletion"))
    assert getattr(caught.value, "status_code", 400) == 400


def test_the_proxy_configuration_loads_a_collection_certificate(two, tmp_path, no_network):  # noqa: F811
    """The proxy's config.yaml (a gpac block naming the collection certificate, no group_key) builds the hook from
    its file; its pre-call hook sets each request's deployment from both groupings in the metadata."""
    import asyncio

    from gpac_utils.llm.gateway import CertifiedProxyHook

    d, table = two
    for name in ("two.json", "router.json"):
        shutil.copy(d / name, tmp_path / name)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(collection_config(d)))
    hook = CertifiedProxyHook(tmp_path / "config.yaml", embedder=ToyEmbedder())
    assert hook.strategy.router.certificate.kind == "collection" and hook.strategy.group_keys == GROUPINGS
    items = requests_of(table.groupby(["group", "tier"]).head(2))
    want = CertifiedRouter.for_decisions(d / "two.json", ServeOptions(embedder=ToyEmbedder())).decide(items)
    ids = {"nothink": "qwen3-4b-instruct", "think": "qwen3-4b-thinking"}

    async def each():
        out = []
        for _, row in items.iterrows():
            data = {
                "model": "certified",
                "messages": [{"role": "user", "content": row["question"]}],
                "metadata": {"group": row["group"], "tier": row["tier"]},
                "litellm_call_id": row["item_id"],
            }
            out.append(await hook.async_pre_call_hook(None, None, data, "acompletion"))
        return out

    got = asyncio.run(each())
    assert [g["model"] for g in got] == [ids[r] for r in want["route"]]
    assert [g["metadata"]["gpac_decision"]["group"] for g in got] == want["group"].tolist()
    heads = asyncio.run(hook.async_post_call_response_headers_hook(got[0], None, None))
    assert heads["x-gpac-group"] == want["group"].iloc[0]


def test_the_serving_example_of_the_page_runs_as_written(two, tmp_path, monkeypatch, no_network):  # noqa: F811
    """docs/overlapping-groups.md's Serving section: its gpac block in docs/deploying.md's configuration (answers
    mocked) and its Python block, run as written in the configuration's folder (the toy embedder, registered)."""
    d, _ = two
    section = PAGE.read_text().split("### Serving", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    [gpac] = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, flags=re.S)]
    assert "group_key" not in gpac["gpac"] and gpac["gpac"] == collection_config(d)["gpac"]
    for name in ("two.json", "router.json"):
        shutil.copy(d / name, tmp_path / name)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**mocked(page_config()), **gpac}))
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(block, scope)  # noqa: S102  (the page's own code)
    record = scope["record"]
    assert record["group"] == "group=mul_1d & tier=paid" and record["request_id"] == "req-1"
    shown = re.findall(r"# (\{'request_id'.*?\})$", block, flags=re.M)
    assert len(shown) == 1 and {k: record[k] for k in eval(shown[0])} == eval(shown[0])  # noqa: S307


def test_a_cell_that_never_routes_is_not_recorded_as_certified():
    """A cell whose groups are certified but whose own threshold is null (Shift-G-PAC: a level below its shift; a
    plugin that closes small cells) thinks, and its record says so, not 'certified' (a heir's report)."""
    from types import SimpleNamespace

    from gpac_utils.calibrate import CERTIFIED, NO_FEASIBLE, TOO_FEW
    from gpac_utils.llm.serve import CertifiedRouter

    cert = SimpleNamespace(
        groups={"a=x": {"status": CERTIFIED}, "b=y": {"status": CERTIFIED}, "b=z": {"status": TOO_FEW}},
        thresholds={"a=x & b=y": None, "a=x & b=z": None, "a=x & b=w": 0.4},
    )
    router = SimpleNamespace(certificate=cert)
    status = lambda cell, groups: CertifiedRouter._cell_status(router, cell, None, groups)  # noqa: E731
    assert status("a=x & b=y", ["a=x", "b=y"]) == NO_FEASIBLE
    assert status("a=x & b=z", ["a=x", "b=z"]) == TOO_FEW  # a group that never routes names the cause
