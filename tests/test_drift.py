"""Drift in production (issue 51, item 3): labels fed back with their decision records raise a
per-group alarm (gpac_utils.llm.drift) whose false alarms stay within the stated bound (seeded Monte
Carlo), which catches a rise in one group's loss and not in the others, sends that group to the
thinking model (records, log), and whose state is one SQLite store shared by processes feeding at
once and read back after a restart. The router's score here is a pre-call test score read from the
request (the real scores: tests/test_serve.py, tests/test_precall.py)."""

from __future__ import annotations

import logging
import math
import multiprocessing
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest
import yaml
from test_serve import FakeEngine

from gpac_utils import GPAC
from gpac_utils.calibrate import CERTIFIED
from gpac_utils.certificate import Certificate
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.eprocess import DETECTOR_BETS, EDetector, EProcess, shiryaev_roberts
from gpac_utils.llm.drift import DRIFT_STATUS, DriftAlarm, DriftStore, certificate_sha256
from gpac_utils.llm.serve import CertifiedRouter
from gpac_utils.scores import SCORES, Score
from gpac_utils.workflow.paths import REPO_ROOT

EPS = 0.1
SCORE = "score_test_drift"
GROUPS = ("a", "b", "c")
PAGE = REPO_ROOT / "docs" / "deploying.md"


def read_score(router, requests, cheap):
    """The score a request carries (as text in a gateway request, as a number in a table)."""
    return np.array([float(v) for v in requests["u_in"]])


@pytest.fixture(scope="module", autouse=True)
def drift_score():
    with SCORES.registered(
        Score(SCORE, None, "router", "read from the request (tests)", serve=read_score, request_columns=("u_in",))
    ):
        yield


def losses_for(u, rate):
    """Loss 1 with probability ``rate(u)``."""
    return lambda rng: (rng.uniform(size=u.size) < rate(u)).astype(float)


@pytest.fixture(scope="module")
def cert_doc(drift_score):
    """G-PAC at eps 0.1 on three groups whose loss is Bernoulli(0.2 u): joint risk 0.1 t^2 at threshold t."""
    rng = np.random.default_rng(0)
    u = rng.uniform(size=3000)
    g = np.array(GROUPS)[np.arange(3000) % 3]
    loss = (rng.uniform(size=u.size) < 0.2 * u).astype(float)
    cal = GPAC(EPS).fit(u, loss, g)
    cert = Certificate.from_calibrator(
        cal, columns={"score": (SCORE, u), "group": ("group", g)}, created="2026-01-01T00:00:00Z"
    )
    assert all(cert.groups[x]["status"] == CERTIFIED for x in GROUPS)
    return cert.document


def router_for(doc, store):
    return CertifiedRouter(doc, FakeEngine("cheap"), FakeEngine("thinker"), drift=store)


def traffic(n, seed, start=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "item_id": [f"req-{start + i}" for i in range(n)],
            "group": np.array(GROUPS)[rng.integers(0, 3, n)],
            "u_in": rng.uniform(size=n),
        }
    )


def labels(records, seed, drifted=()):
    """Losses Bernoulli(0.2 u), and Bernoulli(0.5) in the drifted groups (joint risk 0.5 t > eps)."""
    rng = np.random.default_rng(seed)
    p = np.where(records["group"].isin(drifted), 0.5, 0.2 * records["score"])
    return (rng.uniform(size=len(records)) < p).astype(float)


# --------------------------------------------------------------------------- the guarantee
def page() -> str:
    """docs/deploying.md with its line breaks as spaces (sentences quoted across lines)."""
    return " ".join(PAGE.read_text().split())


def test_false_alarms_within_the_horizon_stay_below_the_level():
    # The boundary of the null with the most spread-out terms: Bernoulli(eps), mean exactly eps at
    # every label. The store's detector (an EDetector at level / horizon) alarms within `horizon`
    # labels with probability <= level; the page quotes the measured rates.
    reps, rates = 2000, []
    for level, horizon in ((0.05, 200), (0.3, 100)):
        a = level / horizon
        x = (np.random.default_rng(int(horizon)).uniform(size=(reps, horizon)) < EPS).astype(float)
        rate = float(EDetector(EPS, shape=reps).update(x).alarms(a).mean())
        assert rate <= level + 3 * math.sqrt(level * (1 - level) / reps), (level, horizon, rate)
        assert rate > 0  # the test can see a false alarm at all
        rates.append(rate)
    assert rates == [0.0085, 0.0595]
    assert (
        f"within the horizon it is {rates[0]:g} at level 0.05 with horizon 200 and {rates[1]:g} at level 0.3 "
        "with horizon 100, each at most the level plus three Monte Carlo standard errors"
    ) in page()


def test_beyond_the_horizon_a_group_at_eps_eventually_alarms():
    # The bound n * level / horizon grows with n: at level 0.3, horizon 100 (a = 0.003), run for
    # 1,000 labels at risk exactly eps, almost every stream has alarmed.
    reps, n, a = 500, 1000, 0.3 / 100
    x = (np.random.default_rng(1000).uniform(size=(reps, n)) < EPS).astype(float)
    rate = float(EDetector(EPS, shape=reps).update(x).alarms(a).mean())
    assert rate > 0.95, rate
    assert f"at level 0.3 with horizon 100 run for 1,000 labels, {round(100 * rate)} % of those streams" in page()


def test_the_change_detector_sees_a_late_change_that_a_ville_test_misses():
    # 50 streams: 2,000 labels at risk eps/2, then risk 3 eps. The e-detector (level 0.05, horizon
    # 10,000) alarms a median of about 75 labels after the change, whatever came before; the Ville
    # test of "risk <= eps" at 0.05 (EProcess "above") has stopped betting during the good stretch.
    reps, pre, post = 50, 2000, 300
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(size=(reps, pre)) < EPS / 2, rng.uniform(size=(reps, post)) < 3 * EPS], axis=1)
    x = x.astype(float)
    sr = shiryaev_roberts(np.full((reps, DETECTOR_BETS.size), -np.inf), x - EPS, np.ones(x.shape, bool), 0.9 / EPS)
    over = np.logaddexp.reduce(sr, axis=-1) - math.log(DETECTOR_BETS.size) >= math.log(10_000 / 0.05)
    assert not over[:, :pre].any()
    delay = over.argmax(axis=1) - pre + 1
    assert over.any(axis=1).all() and np.median(delay) <= 80, np.median(delay)
    ville = EProcess(EPS, "above", shape=reps).update(x)
    alarms = int(ville.rejects(0.05).sum())
    assert alarms <= 5  # at most 5 of 50 streams alarm within 300 labels of the change
    fresh = EProcess(EPS, "above", shape=reps).update(x[:, pre:])  # the same test started at the change
    assert fresh.rejects(0.05).all()
    # why: at the change the plug-in's running sum of (X - eps) is far below 0, so its bet is 0 (the
    # wealth is not driven down: the mixture's is at most 1/2, its constant-bet half spent), and
    # about pre (eps - r0) / (r1 - eps) labels at r1 must pass before it bets again
    before = EProcess(EPS, "above", shape=reps).update(x[:, :pre])
    s1, wealth = before.state["s1"][:, 0], before.e_value
    assert (s1 < 0).all() and (wealth <= 0.5 + 1e-9).all() and wealth.min() > 0.25
    undo = pre * (EPS - EPS / 2) / (3 * EPS - EPS)
    assert round(undo) == 500 > post
    s1_shown = f"{np.median(s1):.0f}".replace("-", "\N{MINUS SIGN}")
    assert (
        f"alarms in all 50 streams, a median of {np.median(delay):g} labels after the change (at most "
        f"{delay.max()}), and never before it. The Ville test at level 0.05 alarms within those 300 labels "
        f"in {alarms} of the 50 streams: at the change the mixture's wealth has median {np.median(wealth):.2f} "
        f"and the plug-in's running sum median {s1_shown}, which about 2,000 × 0.05 / 0.2 = {undo:.0f} labels "
        "at 3ε would undo, more than the 300 given"
    ) in page()


def test_a_grader_of_cheap_answers_only_sees_the_routed_risk():
    """The page's example: P(U <= u) = 0.6 and E[loss | U <= u] = 0.15 give a joint risk of 0.09 <= eps,
    but a detector fed only routed labels sees terms of mean 0.15 > eps."""
    p, routed = 0.6, 0.15
    assert round(p * routed, 2) == 0.09 <= EPS < routed
    assert (
        f"P(U ≤ û) = {p:g} and E[ℓ | U ≤ û] = {routed:g} give a joint risk of {p * routed:.2f} ≤ {EPS:g}, "
        f"and a detector fed only routed labels sees {routed:g}"
    ) in page()


# --------------------------------------------------------------------------- the stream
def test_a_group_whose_loss_rises_alarms_and_then_thinks(cert_doc, tmp_path, caplog):
    store = DriftStore(tmp_path / "drift.sqlite")
    router = router_for(cert_doc, store)
    sha = certificate_sha256(cert_doc)
    caplog.set_level(logging.INFO, "gpac_utils.llm.drift")
    fed_b, alarm_after = 0, None
    for batch in range(30):  # 30 batches of 60 labelled requests; group b's loss rises after 10 batches
        records = router.decide(traffic(60, seed=batch, start=60 * batch))
        assert (records["certificate_sha256"] == sha).all()
        drifted = ("b",) if batch >= 10 else ()
        report = router.feedback(records, labels(records, 100 + batch, drifted)).set_index("group")
        if batch >= 10 and alarm_after is None and report.loc["b", "new_alarm"]:
            before = router.drift.report().set_index("group").loc["b", "alarm_labels"]
            alarm_after = int(before) - fed_b
        if batch < 10:
            fed_b = int(report.loc["b", "labels"])
    final = router.drift.report().set_index("group")
    assert final["alarmed"].to_dict() == {"a": False, "b": True, "c": False}
    assert alarm_after is not None and alarm_after <= 60, alarm_after  # group b's labels after the rise
    assert final.loc["a", "labels"] > 500 and final.loc["c", "labels"] > 500
    later = router.decide(traffic(300, seed=99, start=10_000))
    b = later["group"] == "b"
    assert (~later.loc[b, "route_nothink"]).all() and (later.loc[b, "status"] == DRIFT_STATUS).all()
    assert later.loc[~b, "route_nothink"].any() and (later.loc[~b, "status"] == CERTIFIED).all()
    alarms = [r for r in caplog.records if r.levelno == logging.WARNING and "drift alarm: group 'b'" in r.getMessage()]
    assert len(alarms) == 1 and sha[:12] in alarms[0].getMessage()
    # served (the cascade path of the same router): b's requests go to the thinking engine
    req = traffic(30, seed=5, start=20_000)
    req["messages"] = [[{"role": "user", "content": f"q {i}"}] for i in range(30)]
    served = router.serve(req)
    assert (served.loc[served["group"] == "b", "status"] == DRIFT_STATUS).all()
    assert set(served.loc[served["group"] == "b", "item_id"]) <= {k for k, _ in router.think.requests}


def test_duplicates_other_certificates_and_bad_records(cert_doc, tmp_path, caplog):
    router = router_for(cert_doc, tmp_path / "drift.sqlite")  # a path opens a store with the defaults
    records = router.decide(traffic(40, seed=1))
    loss = labels(records, 2)
    first = router.feedback(records, loss)
    again = router.feedback(records, loss)  # a retried pipeline: each label counts once
    assert first["fed"].sum() == 40 and again["fed"].sum() == 0 and again["duplicates"].sum() == 40
    assert router.drift.report()["labels"].sum() == 40
    other = records.assign(certificate_sha256="0" * 64, item_id=records["item_id"] + "-x")
    with caplog.at_level(logging.WARNING, "gpac_utils.llm.drift"):
        out = router.feedback(other, loss)
    assert out.attrs["other_certificate"] == 40 and out.empty and "another certificate" in caplog.text
    with pytest.raises(DataError, match="^records: a decision record needs 'certificate_sha256'"):
        router.feedback(records.drop(columns="certificate_sha256"), loss)
    with pytest.raises(ParameterError, match=r"^losses: values must lie in \[0.0, 1.0\]"):
        router.feedback(records, loss + 2)
    with pytest.raises(ParameterError, match="^losses: one per record"):
        router.feedback(records, loss[:-1])
    cheat = records.assign(route_nothink=True, score=1.0, threshold=0.5)
    with pytest.raises(DataError, match="went to the cheap model with score 1.0 > threshold"):
        router.feedback(cheat, loss)
    with pytest.raises(ParameterError, match=r"^drift: feedback needs a drift store"):
        router_for(cert_doc, None).feedback(records, loss)
    with pytest.raises(ParameterError, match="^drift: .* at level=0.05, horizon=10000; open it with those"):
        router_for(cert_doc, DriftStore(tmp_path / "drift.sqlite", horizon=500))
    (tmp_path / "junk.sqlite").write_text("not a database, " * 100)
    with pytest.raises(DataError, match="junk.sqlite: not a drift store"):
        DriftStore(tmp_path / "junk.sqlite")


# --------------------------------------------------------------------------- the store
def _feeder(path, doc, ids, seed, barrier, out):
    """One worker: its own store connection, feeding its labels in batches of 10 at once with the other."""
    alarm = DriftAlarm(DriftStore(path), doc)
    rng = np.random.default_rng(seed)
    barrier.wait()
    fed = 0
    for k in range(0, len(ids), 10):
        chunk = ids[k : k + 10]
        records = pd.DataFrame(
            {
                "request_id": chunk,
                "group": [GROUPS[int(i.split("-")[1]) % 3] for i in chunk],
                "score": 0.1,
                "threshold": 0.5,
                "route_nothink": True,
                "certificate_sha256": alarm.sha256,
            }
        )
        fed += int(alarm.feed(records, (rng.uniform(size=len(chunk)) < 0.05).astype(float))["fed"].sum())
    out.put(fed)


def test_two_processes_feed_at_once_without_losing_updates_and_a_restart_reads_the_same(cert_doc, tmp_path):
    path = tmp_path / "drift.sqlite"
    DriftAlarm(DriftStore(path), cert_doc)  # the rows exist before the workers start
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    ids = [f"r-{i}" for i in range(400)]
    shared = ids[180:220]  # 40 labels both workers feed: counted once
    work = [ids[:220], ids[180:]]
    procs = [ctx.Process(target=_feeder, args=(path, cert_doc, w, s, barrier, out)) for s, w in enumerate(work)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert out.get(timeout=5) + out.get(timeout=5) == 400 and len(shared) == 40  # each label fed once, by one
    store = DriftStore(path)
    alarm = DriftAlarm(store, cert_doc)
    report = alarm.report().set_index("group")
    assert report["labels"].sum() == 400 and report["trials"].sum() == 400  # no update lost, none doubled
    assert report["labels"].to_dict() == {
        g: sum(int(i.split("-")[1]) % 3 == k for i in ids) for k, g in enumerate(GROUPS)
    }
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT COUNT(*) FROM drift_labels").fetchone()[0] == 400
    assert db.execute("SELECT COUNT(*) FROM drift_groups").fetchone()[0] == 3  # one row per (certificate, group)
    db.close()
    # a restart: the same rows read back, exactly
    before = alarm.state()
    store.close()
    assert DriftAlarm(DriftStore(path), cert_doc).state() == before
    # a new certificate (another SHA-256) starts fresh in the same store; the old one's rows stay
    edited = {**cert_doc, "provenance": {**cert_doc["provenance"], "created": "2026-02-01T00:00:00Z"}}
    new = DriftAlarm(DriftStore(path), edited)
    assert new.sha256 != alarm.sha256
    assert new.report()["labels"].tolist() == [0, 0, 0] and not new.report()["alarmed"].any()
    assert DriftAlarm(DriftStore(path), cert_doc).state() == before


def test_a_feed_split_over_a_restart_gives_the_state_of_one_feed(cert_doc, tmp_path):
    records = pd.DataFrame(
        {
            "request_id": [f"r-{i}" for i in range(300)],
            "group": "a",
            "score": np.random.default_rng(3).uniform(size=300),
            "threshold": 0.5,
            "certificate_sha256": certificate_sha256(cert_doc),
        }
    )
    records["route_nothink"] = records["score"] <= 0.5
    loss = (np.random.default_rng(4).uniform(size=300) < 0.15).astype(float)
    one = DriftAlarm(DriftStore(tmp_path / "one.sqlite"), cert_doc)
    one.feed(records, loss)
    DriftAlarm(DriftStore(tmp_path / "two.sqlite"), cert_doc).feed(records[:120], loss[:120])
    two = DriftAlarm(DriftStore(tmp_path / "two.sqlite"), cert_doc)  # reopened
    two.feed(records[120:], loss[120:])
    a, b = one.state()["a"], two.state()["a"]
    assert (a["labels"], a["trials"]) == (b["labels"], b["trials"]) == (300, 300)
    da, db = EDetector.from_json(a["detector"]), EDetector.from_json(b["detector"])
    np.testing.assert_allclose(da.state["log_sr"], db.state["log_sr"], rtol=1e-12)  # batch sums: within rounding


def page_drift_block() -> dict:
    """docs/deploying.md's gpac block with a drift store (its one yaml block naming one)."""
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.S) if "drift:" in b]
    return yaml.safe_load(block)["gpac"]


def test_the_litellm_strategy_consults_the_same_store(cert_doc, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytest.importorskip("litellm")
    from gpac_utils.llm.gateway import build_router

    gpac = page_drift_block()
    (tmp_path / gpac["certificate"]).write_text(Certificate.read(cert_doc).to_json())
    model_list = [
        {
            "model_name": "certified",
            "litellm_params": {"model": f"openai/{r}"},
            "model_info": {"id": r, "gpac_route": r},
        }
        for r in ("nothink", "think")
    ]
    _, strategy = build_router({"model_list": model_list, "gpac": gpac}, base=tmp_path)
    path = tmp_path / gpac["drift"]["store"]
    assert strategy.router.drift.store.path == path and strategy.router.drift.store.horizon == 10_000

    seen = []

    def ask(group, u):
        messages = [{"role": "user", "content": str(u)}]
        seen.append(strategy.decide("certified", messages, {"metadata": {"group": group}}))
        return seen[-1]["deployment"]

    assert ask("b", 0.05) == "nothink"
    # another worker (its own router, the same file) feeds group b's risen losses
    worker = CertifiedRouter(tmp_path / gpac["certificate"], FakeEngine("cheap"), FakeEngine("thinker"), drift=path)
    assert worker.certificate_sha256 == strategy.router.certificate_sha256 == seen[-1]["certificate_sha256"]
    records = worker.decide(traffic(300, seed=3).assign(group="b", u_in=0.05))
    with caplog.at_level(logging.WARNING, "gpac_utils.llm.drift"):
        assert worker.feedback(records, np.ones(300))["new_alarm"].tolist() == [True]
        assert [ask("b", 0.05), ask("b", 0.05), ask("a", 0.05)] == ["think", "think", "nothink"]
    assert seen[-2]["status"] == DRIFT_STATUS
    # one WARNING from the worker that raised it, one from the strategy that found it in the store
    assert [r.getMessage().startswith("drift alarm: group 'b'") for r in caplog.records] == [True, True]
    with pytest.raises(ParameterError, match=r"^config: gpac.drift.ttl is not a setting"):
        build_router(
            {"model_list": model_list, "gpac": {**gpac, "drift": {"store": "x.sqlite", "ttl": 1}}}, base=tmp_path
        )


def test_records_parsed_from_the_strict_json_log_are_fed(tmp_path, cert_doc):
    """A decision log line writes an always-think threshold and a missing score as null (strict JSON): fed back,
    such a thinking request counts as a term 0, and a cheap route without a threshold is refused in one line."""
    import json

    router = router_for(cert_doc, tmp_path / "d.sqlite")
    records = router.decide(traffic(40, seed=5))
    lines = [json.loads(json.dumps(r, default=str).replace("NaN", "null").replace("-Infinity", "null")) for r in
             records.to_dict("records")]  # fmt: skip
    for r in lines[:3]:
        r.update(score=None, threshold=None, route_nothink=False)
    fed = router.feedback(lines, np.zeros(len(lines)))
    assert int(fed["labels"].sum()) == len(lines)
    lines[0].update(route_nothink=True, score=0.1)
    with pytest.raises(DataError, match=r"^records.threshold: not a number at row 0 \(a cheap route\)$"):
        router.feedback(lines, np.zeros(len(lines)))
