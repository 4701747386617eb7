"""Issue 32: the Python API refuses what it cannot answer; valid input is untouched.

* every example of the issue, table-driven: one error naming the argument (or a documented warning);
* hypothesis, malformed inputs: a :class:`ParameterError` whose message starts with the argument;
* hypothesis, valid inputs: the same answers in every container (list, array, Series of one frame)
  and as the unchecked core computation;
* the answers of the package before the layer (``fixtures/validation_reference.json``), recomputed.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import repo_scripts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpac_utils import CPAC, GPAC, PAC, ScorePartitioner, cli, from_json, threshold
from gpac_utils.allocation import _dp, _options, allocate
from gpac_utils.calibrate import CALIBRATORS, GroupWarning, risk_curve
from gpac_utils.checks import ParameterError
from gpac_utils.group_threshold import _threshold
from gpac_utils.online import Decisions, OnlineGPAC
from gpac_utils.prediction import PilotModel, PilotWarning, PlanCurves, PlanSpec, predict
from gpac_utils.recipe import as_recipe
from gpac_utils.risks import Problem
from gpac_utils.settings import Settings
from gpac_utils.thresholds_schema import SCHEMA_VERSION, ThresholdsFileError, validate_file

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
FIXTURES = Path(__file__).parent / "fixtures"


def population(n=300, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=n)
    groups = rng.choice(["a", "b"], n)
    loss = (rng.uniform(size=n) < np.where(groups == "a", 0.1, 0.5) * u).astype(float)
    return u, loss, groups


U, LOSS, G = population()
FITTED = {
    "PAC": PAC(0.1).fit(U, LOSS),
    "G-PAC": GPAC(0.1).fit(U, LOSS, G),
    "C-PAC": CPAC(0.1, partitioner=ScorePartitioner(2)).fit(U, LOSS),
}


def refused(call, name: str) -> str:
    with pytest.raises(ParameterError) as err:
        call()
    msg = str(err.value)
    assert msg.startswith(f"{name}:") or msg.startswith(f"{name}["), msg
    assert "\n" not in msg
    return msg


def edited_json(method, edit) -> str:
    payload = json.loads(FITTED[method].to_json())
    edit(payload)
    return json.dumps(payload)


def _swap_boundaries(p):
    p["partition"]["boundaries"] = [0.7, 0.2]
    p["settings"]["k"] = 3


# ------------------------------------------------------------------ every example of the issue
ISSUE_EXAMPLES = [
    ("route: a one-column DataFrame", lambda: FITTED["PAC"].route(pd.DataFrame({"u": U})), "scores", "Series"),
    ("route: an (n, 1) array", lambda: FITTED["PAC"].route(U[:, None]), "scores", "1-D"),
    ("route: (n, 1) to G-PAC", lambda: FITTED["G-PAC"].route(U[:, None], G), "scores", "1-D"),
    ("route: negative scores", lambda: FITTED["PAC"].route(np.log(U + 1e-3)), "scores", "log-probabilities"),
    ("route: a NaN score", lambda: FITTED["G-PAC"].route(np.r_[U[:-1], np.nan], G), "scores", "rows [299]"),
    ("C-PAC route: a NaN score", lambda: FITTED["C-PAC"].route([0.1, np.nan]), "scores", "rows [1]"),
    (
        "from_json: a threshold of 7",
        lambda: from_json(edited_json("G-PAC", lambda p: p["thresholds"].update(a=7))),
        "thresholds['a']",
        "[0, 1]",
    ),
    (
        "from_json: boundaries out of order",
        lambda: from_json(edited_json("C-PAC", _swap_boundaries)),
        "partition['boundaries']",
        "ascending",
    ),
    ("threshold: eps=1.5", lambda: threshold(U, LOSS, eps=1.5, alpha=0.05), "eps", "1.5"),
    ("threshold: NaN scores", lambda: threshold(np.r_[np.nan, U[1:]], LOSS, eps=0.1, alpha=0.05), "scores", "[0]"),
    (
        "Series whose indexes differ",
        lambda: GPAC(0.1).fit(pd.Series(U), pd.Series(LOSS, index=np.arange(300)[::-1]), G),
        "losses",
        "index",
    ),
    (
        "groups Series in another order",
        lambda: GPAC(0.1).fit(pd.Series(U), LOSS, pd.Series(G, index=np.arange(300)[::-1])),
        "groups",
        "index",
    ),
    ("a bool given 'false'", lambda: PilotModel(uncertainty="false"), "uncertainty", "'false'"),
    ("a mode given 'false'", lambda: OnlineGPAC(0.1, label_prob=0.5, labelling="false"), "labelling", "'false'"),
    ("PAC given groups (it would ignore them)", lambda: PAC(0.1).fit(U, LOSS, G), "groups", "GPAC"),
    ("group labels of mixed types", lambda: GPAC(0.1).fit(U[:3], LOSS[:3], ["a", 1, "a"]), "groups", "mixed"),
    ("an empty group label", lambda: GPAC(0.1).fit(U[:3], LOSS[:3], ["a", "", "a"]), "groups", "empty"),
    ("a missing group label", lambda: GPAC(0.1).fit(U[:3], LOSS[:3], ["a", None, "a"]), "groups", "missing"),
    ("scores as strings", lambda: PAC(0.1).fit(["0.1", "0.2"], [0, 1]), "scores", "strings"),
    ("boolean scores", lambda: PAC(0.1).fit(np.ones(3, bool), [0, 1, 0]), "scores", "booleans"),
    ("a scalar score", lambda: FITTED["PAC"].route(0.3), "scores", "scalar"),
    ("risk_curve: alpha=0", lambda: risk_curve(U, LOSS, eps=0.1, alpha=0), "alpha", "(0.0, 1.0)"),
    ("threshold: label_prob=0", lambda: threshold(U, LOSS, eps=0.1, alpha=0.05, label_prob=0.0), "label_prob", ""),
    ("threshold: rng=True", lambda: threshold(U, LOSS, eps=0.1, alpha=0.05, rng=True), "rng", "seed"),
    ("threshold: unknown recipe", lambda: threshold(U, LOSS, eps=0.1, alpha=0.05, recipe="magic"), "recipe", ""),
    (
        "predict: pilot=PilotModel(uncertainty='no')",
        lambda: predict(
            U, G, U, LOSS, G, settings=Settings(eps=0.1), spec=PlanSpec(model=PilotModel(uncertainty="no"))
        ),
        "uncertainty",
        "",
    ),
    ("allocate: not curves", lambda: allocate({"a": 1}, 10), "curves", "PlanCurves"),
]


@pytest.mark.parametrize("what, call, name, needle", ISSUE_EXAMPLES, ids=[e[0] for e in ISSUE_EXAMPLES])
def test_issue_examples_are_refused_naming_the_argument(what, call, name, needle):
    assert needle in refused(call, name)


def _one_block(losses_nan_at=None, int_flags=False):
    router = OnlineGPAC(0.1, label_prob=1.0, grid=11)
    u = np.linspace(0, 1, 20)
    d = router.decide(u, ["g"] * 20)
    loss = np.zeros(20)
    if losses_nan_at is not None:
        loss[losses_nan_at] = np.nan
    if int_flags:
        d = d._replace(route_nothink=d.route_nothink.astype(int), observe=d.observe.astype(int))
    return router, u, loss, d


def test_online_block_fed_twice_or_from_another_block_is_refused():
    router, u, loss, d = _one_block()
    router.update(u, loss, ["g"] * 20, d)
    seen = dict(router.n_seen_)
    assert "already fed" in refused(lambda: router.update(u, loss, ["g"] * 20, d), "decisions")  # cell re-run
    assert router.n_seen_ == seen  # nothing counted twice
    d2 = router.decide(u, ["g"] * 20)
    assert "another block" in refused(lambda: router.update(u[::-1], loss, ["g"] * 20, d2), "scores")
    assert "another router" in refused(
        lambda: OnlineGPAC(0.1, label_prob=1.0).update(u, loss, ["g"] * 20, d2), "decisions"
    )
    assert "no block" in refused(lambda: router.update(u, loss, ["g"] * 20, Decisions(*d2[:5])), "decisions")
    halves = [slice(0, 7), slice(7, 20)]
    for sl in halves:  # one block in parts, each row once
        router.update(u[sl], loss[sl], ["g"] * len(u[sl]), Decisions(*(f[sl] for f in d2)))
    assert router.n_seen_["g"] == 40


def test_online_int_flags_and_a_nan_loss_do_not_poison_a_group():
    router, u, loss, d = _one_block(losses_nan_at=3, int_flags=True)
    assert "bool" in refused(lambda: router.update(u, loss, ["g"] * 20, d), "decisions")
    router, u, loss, d = _one_block(losses_nan_at=3)
    assert "rows [3] of the block" in refused(lambda: router.update(u, loss, ["g"] * 20, d), "losses")
    assert router.thresholds_ == {}  # the group learned nothing from the refused block


# ------------------------------------------------------------------ the command-line corners
@pytest.fixture
def table(tmp_path):
    u, loss, g = population(400, seed=1)
    path = tmp_path / "t.csv"
    pd.DataFrame({"item_id": range(400), "group": g, "loss": loss.astype(int), "u": u}).to_csv(path, index=False)
    return path


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "Traceback" not in err[0], err
    return err[0]


def test_cli_corners_of_the_issue(table, tmp_path, capsys):
    calib = ["calibrate", "--score-col", "u", "--eps", "0.1"]
    df = pd.read_csv(table)
    dup = tmp_path / "dup.csv"
    df.assign(loss2=1 - df["loss"]).rename(columns={"loss2": "loss"}).to_csv(dup, index=False)
    assert cli.main([*calib, "--data", str(dup), "-o", str(tmp_path / "a.json")]) == 1
    assert "duplicate column name(s) ['loss']" in one_error(capsys)
    pq = tmp_path / "e.parquet"
    df.assign(group=df["group"].where(df.index != 5, "")).to_parquet(pq)
    assert cli.main([*calib, "--data", str(pq), "--group-col", "group", "-o", str(tmp_path / "a.json")]) == 1
    assert "'group'" in (msg := one_error(capsys)) and "row 6 (item_id=5)" in msg
    assert cli.main([*calib, "--data", str(table), "--method", "pac", "--group-col", "group", "-o", "x.json"]) == 2
    assert "--group-col" in one_error(capsys)
    out = tmp_path / "g.json"
    assert cli.main([*calib, "--data", str(table), "--group-col", "group", "-o", str(out)]) == 0  # inferred
    assert (
        json.loads(out.read_text())["method"] == "G-PAC"
        and json.loads(out.read_text())["schema_version"] == SCHEMA_VERSION
    )
    capsys.readouterr()
    assert cli.main([*calib, "--data", str(table), "-o", str(tmp_path)]) == 1
    assert "is a directory" in one_error(capsys)
    route = ["route", "--thresholds", str(out), "--data", str(table)]
    assert cli.main([*route, "-o", str(tmp_path)]) == 1 and "is a directory" in one_error(capsys)
    assert cli.main([*route, "-o", str(table)]) == 1 and "--data file" in one_error(capsys)
    plan = ["plan", "--data", str(table), "--score-col", "u", "--eps", "0.1", "--n-resamples", "10"]
    assert cli.main([*plan, "--pilot-fraction", "0.5", "--budget", "1e12", "-o", str(tmp_path / "p.csv")]) == 2
    assert "--budget: 1e+12 labels is more than this plan can spend" in one_error(capsys)
    pilot = tmp_path / "pilot.csv"
    df.assign(loss=df["loss"].where(df.index == 0)).to_csv(pilot, index=False)
    plan[2] = str(pilot)
    assert cli.main([*plan, "-o", str(tmp_path / "p.csv")]) == 1  # a group without a pilot row
    assert "have no labelled pilot row" in one_error(capsys)
    first = df.groupby("group").head(1).index  # one pilot row per group
    df.assign(loss=df["loss"].where(df.index.isin(first))).to_csv(pilot, index=False)
    assert cli.main([*plan, "-o", str(tmp_path / "p.csv")]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert "the pilot has 2 labelled item(s) (< 30)" in warned[0]


def test_cli_route_refuses_a_foreign_or_corrupt_file(table, tmp_path, capsys):
    thr = tmp_path / "t.json"
    for text, needle in [
        ('{"hello": 1}', "'method': missing; not a thresholds file"),
        (edited_json("C-PAC", _swap_boundaries), "partition['boundaries']"),
        (edited_json("PAC", lambda p: p.update(schema_version=SCHEMA_VERSION + 1)), "newer"),
    ]:
        thr.write_text(text)
        assert cli.main(["route", "--thresholds", str(thr), "--data", str(table), "-o", str(tmp_path / "r.csv")]) == 1
        assert needle in one_error(capsys)


# ------------------------------------------------------------------ the thresholds schema
SCHEMA_CASES = [
    ("PAC", lambda p: p.update(method="Z-PAC"), "method"),
    ("PAC", lambda p: p["thresholds"].update(__all__=-0.1), "thresholds['__all__']"),
    ("PAC", lambda p: p["thresholds"].update(__all__=True), "thresholds['__all__']"),
    ("PAC", lambda p: p.update(thresholds={"a": 0.5}), "thresholds"),
    ("G-PAC", lambda p: p["thresholds"].update({"": 0.5}), "thresholds['']"),
    ("G-PAC", lambda p: p["settings"].update(eps=1.5), "settings['eps']"),
    ("G-PAC", lambda p: p["settings"].update(alpha=0), "settings['alpha']"),
    ("G-PAC", lambda p: p["settings"].update(simultaneous="false"), "settings['simultaneous']"),
    ("G-PAC", lambda p: p["settings"].update(seed=1.5), "settings['seed']"),
    ("G-PAC", lambda p: p["settings"].update(bound="magic"), "settings['bound']"),
    ("G-PAC", lambda p: p["settings"].update(k=3), "settings['k']"),
    ("G-PAC", lambda p: p.update(partition={"algorithm": "kmeans", "boundaries": []}), "partition"),
    ("G-PAC", lambda p: p.update(provenance="x"), "provenance"),
    ("G-PAC", lambda p: p.update(schema_version="2"), "schema_version"),
    ("G-PAC", lambda p: p["group_sizes"].update(a=-1), "group_sizes"),
    ("C-PAC", lambda p: p.pop("partition"), "partition"),
    ("C-PAC", lambda p: p["partition"].update(boundaries=[0.5, 1.5]), "partition['boundaries']"),
    ("C-PAC", lambda p: p["partition"].update(algorithm="dbscan"), "partition['algorithm']"),
    ("C-PAC", lambda p: p["thresholds"].update(c7=0.5), "thresholds"),
    ("C-PAC", lambda p: p["settings"].update(mode="both"), "settings['mode']"),
    ("PAC", lambda p: p["settings"].update(sampling="full", label_prob=0.5), "settings['label_prob']"),
]


@pytest.mark.parametrize("method, edit, name", SCHEMA_CASES)
def test_schema_refuses_naming_the_field(method, edit, name):
    with pytest.raises(ThresholdsFileError) as err:
        from_json(edited_json(method, edit))
    assert str(err.value).startswith(name) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("method", list(FITTED))
def test_schema_reads_version_1_files(method):
    payload = json.loads(FITTED[method].to_json())
    assert payload.pop("schema_version") == SCHEMA_VERSION
    payload["settings"]["pi"] = payload["settings"].pop("label_prob")  # the older name
    assert validate_file(payload, CALIBRATORS)["schema_version"] == 1
    back = from_json(json.dumps(payload))
    assert back.thresholds_ == FITTED[method].thresholds_ and back.settings == FITTED[method].settings


def test_schema_refuses_non_text_and_broken_json():
    refused(lambda: from_json({"method": "PAC"}), "text")
    refused(lambda: from_json('{"method": '), "text")


# ------------------------------------------------------------------ hypothesis: malformed inputs
def _corrupt_scores(draw, u):
    how = draw(st.sampled_from(["nan", "inf", "negative", "above", "column", "frame", "strings", "bool", "scalar"]))
    u = u.copy()
    row = draw(st.integers(0, u.size - 1))
    if how in ("nan", "inf", "negative", "above"):
        u[row] = {"nan": np.nan, "inf": np.inf, "negative": -draw(st.floats(1e-9, 50)), "above": 1 + 1e-9}[how]
        return u
    return {
        "column": u[:, None],
        "frame": pd.DataFrame({"u": u}),
        "strings": u.astype(str),
        "bool": u > 0.5,
        "scalar": float(u[0]),
    }[how]


def _corrupt_losses(draw, loss):
    how = draw(st.sampled_from(["nan", "inf", "negative", "above", "short", "long", "column", "text"]))
    loss = loss.copy()
    row = draw(st.integers(0, loss.size - 1))
    if how in ("nan", "inf", "negative", "above"):
        loss[row] = {"nan": np.nan, "inf": -np.inf, "negative": -0.5, "above": 1.5}[how]
        return loss
    return {
        "short": loss[:-1],
        "long": np.r_[loss, 0.0],
        "column": loss[:, None],
        "text": np.array(["x"] * loss.size, dtype=object),
    }[how]


def _corrupt_groups(draw, g):
    how = draw(st.sampled_from(["none", "nan", "empty", "mixed", "short", "column", "reordered"]))
    g = g.astype(object).copy()
    row = draw(st.integers(0, g.size - 1))
    if how in ("none", "nan", "empty", "mixed"):
        g[row] = {"none": None, "nan": np.nan, "empty": "", "mixed": 7}[how]
        if how == "mixed":
            g[(row + 1) % g.size] = "a"
        return g
    if how == "reordered":
        return pd.Series(g, index=np.arange(g.size)[::-1])
    return {"short": g[:-1], "column": g[:, None]}[how]


BAD_NUMBERS = st.sampled_from([math.nan, math.inf, -0.1, 0, 1, 1.5, "0.1", True, None, [0.1]])
BAD_MODES = st.sampled_from(["false", "True", 0, 1, None, 0.0, "no", True])


@st.composite
def malformed_call(draw):
    """(entry, argument, call): one argument of one entry corrupted, the others valid."""
    n = draw(st.integers(12, 60))
    u, loss, g = population(n, seed=draw(st.integers(0, 50)))
    entry = draw(
        st.sampled_from(["threshold", "risk_curve", "PAC.fit", "GPAC.fit", "GPAC.route", "CPAC.fit", "online"])
    )
    choices = ["scores", "losses", "eps", "alpha"]
    if entry.startswith("GPAC") or entry == "online":
        choices += ["groups"]
    if entry == "GPAC.fit":
        choices += ["correction"]
    if entry == "GPAC.route":
        choices = ["scores", "groups"]
    arg = draw(st.sampled_from(choices))
    args = {"scores": u, "losses": loss, "groups": g, "eps": 0.2, "alpha": 0.1, "correction": "none"}
    args[arg] = {
        "scores": lambda: _corrupt_scores(draw, u),
        "losses": lambda: _corrupt_losses(draw, loss),
        "groups": lambda: _corrupt_groups(draw, g),
        "eps": lambda: draw(BAD_NUMBERS),
        "alpha": lambda: draw(BAD_NUMBERS),
        "correction": lambda: draw(BAD_MODES),
    }[arg]()
    a = args
    calls = {
        "threshold": lambda: threshold(a["scores"], a["losses"], eps=a["eps"], alpha=a["alpha"]),
        "risk_curve": lambda: risk_curve(a["scores"], a["losses"], eps=a["eps"], alpha=a["alpha"]),
        "PAC.fit": lambda: PAC(a["eps"], a["alpha"]).fit(a["scores"], a["losses"]),
        "GPAC.fit": lambda: GPAC(a["eps"], a["alpha"], correction=a["correction"]).fit(
            a["scores"], a["losses"], a["groups"]
        ),
        "GPAC.route": lambda: FITTED["G-PAC"].route(a["scores"], a["groups"]),
        "CPAC.fit": lambda: CPAC(a["eps"], a["alpha"]).fit(a["scores"], a["losses"]),
        "online": lambda: OnlineGPAC(a["eps"], a["alpha"], label_prob=1.0).fit(a["scores"], a["losses"], a["groups"]),
    }
    return entry, arg, calls[entry]


@SETTINGS
@given(malformed_call())
def test_malformed_inputs_give_a_parameter_error_naming_the_argument(case):
    entry, arg, call = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        with pytest.raises(ParameterError) as err:
            call()
    msg = str(err.value)
    assert msg.startswith(f"{arg}:") and "\n" not in msg, (entry, arg, msg)


@SETTINGS
@given(
    method=st.sampled_from(list(FITTED)),
    path=st.sampled_from(["method", "settings", "thresholds", "partition", "group_sizes", "schema_version"]),
    value=st.one_of(
        st.none(), st.integers(-3, 9), st.floats(allow_nan=True), st.text(max_size=3), st.lists(st.floats(), max_size=3)
    ),
)
def test_a_corrupt_field_is_refused_naming_it(method, path, value):
    payload = json.loads(FITTED[method].to_json())
    if path == "partition" and method == "C-PAC":
        payload["partition"]["boundaries"] = value
        path = "partition['boundaries']"
    else:
        payload[path] = value
    try:
        back = from_json(json.dumps(payload))
    except ThresholdsFileError as exc:
        first = path.split("[")[0]
        assert str(exc).startswith((path, first, f"'{first}'")), str(exc)
        return
    # accepted: only values the schema allows for that field
    assert path in ("schema_version", "partition['boundaries']") and back.thresholds_ == FITTED[method].thresholds_


# ------------------------------------------------------------------ hypothesis: valid inputs untouched
@st.composite
def valid_case(draw):
    n = draw(st.integers(1, 120))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    u = np.round(rng.uniform(size=n), draw(st.integers(1, 6)))
    k = draw(st.integers(1, 3))
    g = rng.choice(["x", "y", "z"][:k], n)
    loss = (rng.uniform(size=n) < draw(st.floats(0, 1)) * u).astype(int)
    recipe = draw(st.sampled_from(["valid", "paper", "valid-bernoulli"]))
    return u, loss, g, draw(st.sampled_from([0.05, 0.1, 0.3])), draw(st.sampled_from([0.05, 0.2])), recipe, seed


@SETTINGS
@given(valid_case(), st.sampled_from(["list", "array", "series", "bool-losses"]))
def test_valid_inputs_answer_as_the_core_in_every_container(case, container):
    u, loss, g, eps, alpha, recipe, seed = case
    if container == "list":
        args = (u.tolist(), loss.tolist(), g.tolist())
    elif container == "series":
        frame = pd.DataFrame({"u": u, "loss": loss, "g": g}, index=np.random.default_rng(seed).permutation(u.size))
        args = (frame["u"], frame["loss"], frame["g"])
    elif container == "bool-losses":
        args = (u, loss.astype(bool), g)
    else:
        args = (u, loss, g)
    core = _threshold(u, loss.astype(float), Problem(eps, alpha, as_recipe(recipe)), seed)
    assert np.array_equal(threshold(*args[:2], eps=eps, alpha=alpha, recipe=recipe, rng=seed), core)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        fitted = GPAC(eps, alpha, recipe, seed=seed).fit(*args)
        by_core = GPAC(eps, alpha, recipe, seed=seed).calibrate(
            u, loss.astype(float), g.astype(str), np.random.default_rng(seed)
        )
        assert fitted.thresholds_ == by_core.thresholds_
        per_item = np.array([fitted.thresholds_.get(x, -np.inf) for x in g])
        assert np.array_equal(fitted.route(args[0], args[2]), u <= per_item)


@SETTINGS
@given(budget=st.integers(0, 3000), seed=st.integers(0, 1000))
def test_allocate_answers_as_the_unbounded_dp_for_any_budget(budget, seed):
    rng = np.random.default_rng(seed)
    grid = np.unique(rng.integers(1, 400, size=4))
    shares = np.sort(rng.uniform(size=(3, grid.size, 1)), axis=1)
    curves = PlanCurves(
        ["a", "b", "c"],
        grid,
        shares,
        np.full(3, 1 / 3),
        np.full(3, np.inf),
        np.zeros((3, grid.size)),
        dict.fromkeys("abc", 0),
        dict.fromkeys("abc", "bootstrap"),
    )
    levels, _ = _dp([_options(curves, j) for j in range(3)], budget)  # the DP over the whole budget, as before
    assert allocate(curves, budget).n == {
        g: int(_options(curves, j)[0][k]) for j, (g, k) in enumerate(zip("abc", levels))
    }
    assert allocate(curves, 10**12).n == allocate(curves, int(3 * grid.max())).n  # no memory for labels it cannot use


def test_answers_equal_those_of_the_package_before_the_layer():
    ref = repo_scripts.load(FIXTURES / "validation_reference.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (GroupWarning, PilotWarning))
        got = json.loads(json.dumps(ref.compute(), sort_keys=True))
    want = json.loads(ref.REFERENCE.read_text())
    assert len(got) == ref.N_CASES == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a == b, f"case {i}: {[k for k in a if a[k] != b.get(k)]} changed"


def test_planner_warns_on_a_pilot_too_small_to_predict_from():
    first = pd.Series(G).drop_duplicates().index  # one pilot item per group
    with pytest.warns(PilotWarning, match=rf"{first.size} labelled item\(s\) \(< 30\)"):
        predict(
            U, G, U[first], LOSS[first], G[first], settings=Settings(eps=0.1), spec=PlanSpec(n_grid=[10], n_resamples=4)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PilotWarning)  # 300 items, many positive losses: no warning
        predict(U, G, U, LOSS, G, settings=Settings(eps=0.1), spec=PlanSpec(n_grid=[10], n_resamples=4))


def test_the_docs_page_shows_the_messages_the_api_gives():
    text = (Path(__file__).parents[1] / "docs" / "validation.md").read_text(encoding="utf-8")
    for bad in (pd.DataFrame({"score": U}), np.log([0.5, 0.9])):
        with pytest.raises(ParameterError) as err:
            FITTED["PAC"].route(bad)
        assert f"ParameterError: {err.value}" in text
