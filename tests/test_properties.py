"""Property-based tests: random parameters and random malformed tables, through the API and the CLI.

Every input ends either in a clean error (a one-line ``ValueError`` from the API; exit 2 or 1 and
one ``error:`` line from the CLI) or in a valid result. Never exit 0 with an invalid parameter,
and never a silently dropped row.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpac_utils import CPAC, GPAC, PAC, Recipe, ScorePartitioner, cli, data
from gpac_utils.sampling import MAX_RESAMPLE_TERMS

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-5, max_value=5),
    st.sampled_from([0, 1, 0.0, 1.0, 0.5, -0.0, 1e-300, 1 - 1e-16]),
)


def _valid_eps(eps, loss_bound=1.0):
    return isinstance(eps, int | float) and math.isfinite(eps) and 0 < eps < loss_bound


def _valid_fraction(x, closed=False):
    return isinstance(x, int | float) and math.isfinite(x) and (0 < x <= 1 if closed else 0 < x < 1)


def _population(n=300, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    loss = (rng.random(n) < u**2).astype(float)
    groups = rng.choice(["a", "b", "c"], n)
    return u, loss, groups


@SETTINGS
@given(eps=numbers, alpha=numbers, label_prob=numbers, sampling=st.sampled_from(["full", "bernoulli", "resample"]))
def test_api_parameters_clean_error_or_valid_result(eps, alpha, label_prob, sampling):
    u, loss, groups = _population()
    ok = _valid_eps(eps) and _valid_fraction(alpha) and (sampling == "full" or _valid_fraction(label_prob, closed=True))
    # resample draws n / label_prob terms: a vanishing label_prob is refused by name
    ok = ok and not (sampling == "resample" and u.size / label_prob > MAX_RESAMPLE_TERMS)
    try:
        recipe = Recipe(sampling=sampling, label_prob=None if sampling == "full" else label_prob)
        cal = GPAC(eps, alpha, recipe).fit(u, loss, groups)
    except ValueError as exc:
        assert not ok, f"valid parameters refused: {exc}"
        assert "\n" not in str(exc) and str(exc)
        return
    assert ok, f"invalid parameters accepted: eps={eps!r} alpha={alpha!r} label_prob={label_prob!r} ({sampling})"
    assert set(cal.thresholds_) == {"a", "b", "c"}
    routed = cal.route(u, groups)
    assert routed.shape == u.shape


@SETTINGS
@given(k=st.one_of(st.integers(-3, 6), st.floats(allow_nan=True)), frac=numbers, mgs=st.integers(-3, 50))
def test_cpac_parameters(k, frac, mgs):
    u, loss, _ = _population()
    ok = isinstance(k, int) and k >= 1 and _valid_fraction(frac) and mgs >= 1
    try:
        cal = CPAC(0.1, partitioner=ScorePartitioner(k=k), cluster_fraction=frac, min_group_size=mgs)
        n_cluster = int(round(frac * len(u)))
        ok = ok and 0 < n_cluster < len(u)
        cal.fit(u, loss)
    except ValueError as exc:
        assert not ok, f"valid parameters refused: {exc}"
        assert "\n" not in str(exc)
        return
    assert ok
    assert len(cal.thresholds_) <= k


@st.composite
def malformed_tables(draw):
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    df = pd.DataFrame(
        {
            "item_id": pd.Series(np.arange(n), dtype=object),
            "group": pd.Series(rng.choice(["x", "y"], n), dtype=object),
            "loss": pd.Series(rng.integers(0, 2, n), dtype=object),
            "u": pd.Series(rng.random(n), dtype=object),
        }
    )
    # Corrupt a few cells with values of the wrong kind or range.
    bad_values = st.sampled_from([np.nan, -1, 2, 1.5, "x", None, np.inf, ""])
    for _ in range(draw(st.integers(0, 3))):
        col = draw(st.sampled_from(["item_id", "group", "loss", "u"]))
        row = draw(st.integers(0, n - 1))
        df.at[row, col] = draw(bad_values)
    if draw(st.booleans()):
        df = df.drop(columns=[draw(st.sampled_from(["item_id", "loss", "u"]))])
    return df


def _clean(df: pd.DataFrame) -> bool:
    need = {"item_id", "loss", "u"}
    if not need <= set(df.columns):
        return False
    if df["item_id"].isna().any() or df["item_id"].duplicated().any() or (df["item_id"] == "").any():
        return False
    for col, hi in (("loss", 1.0), ("u", 1.0)):
        v = pd.to_numeric(df[col], errors="coerce")
        if v.isna().any() or not np.all(np.isfinite(v)) or (v < 0).any() or (v > hi).any():
            return False
    return True


@SETTINGS
@given(df=malformed_tables(), method=st.sampled_from(["pac", "gpac"]))
def test_cli_malformed_tables(tmp_path_factory, capsys, df, method):
    tmp = tmp_path_factory.mktemp("prop")
    path = tmp / "t.csv"
    df.to_csv(path, index=False)
    out = tmp / "thr.json"
    argv = ["calibrate", "--data", str(path), "--score-col", "u", "--eps", "0.2", "--method", method, "-o", str(out)]
    if method == "gpac":
        argv += ["--group-col", "group"]
    capsys.readouterr()
    code = cli.main(argv)
    err = capsys.readouterr().err
    reread = pd.read_csv(path)  # what the CLI saw (CSV round trip)
    expect_ok = _clean(reread) and (method == "pac" or not reread.get("group", pd.Series(dtype=str)).isna().any())
    if code == 0:
        assert expect_ok, f"exit 0 on a malformed table:\n{reread}"
        payload = json.loads(out.read_text())
        assert payload["n_items"] == len(reread)  # no row silently dropped
        assert sum(payload["group_sizes"].values()) == len(reread)
    else:
        assert code in (1, 2) and not expect_ok, err
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in err


@SETTINGS
@given(eps=numbers, alpha=numbers, label_prob=numbers, sampling=st.sampled_from(["full", "bernoulli"]))
def test_cli_parameters_exit_status(tmp_path_factory, capsys, eps, alpha, label_prob, sampling):
    tmp = tmp_path_factory.mktemp("cli")
    u, loss, _ = _population(200)
    path = tmp / "t.parquet"
    data.write_table(pd.DataFrame({"item_id": range(200), "loss": loss, "u": u}), path)
    argv = [
        "calibrate",
        "--data",
        str(path),
        "--score-col",
        "u",
        f"--eps={float(eps)!r}",
        f"--alpha={float(alpha)!r}",
        "--sampling",
        sampling,
        f"--label-prob={float(label_prob)!r}",
        "-o",
        str(tmp / "t.json"),
    ]
    capsys.readouterr()
    code = cli.main(argv)
    ok = (
        _valid_eps(eps)
        and _valid_fraction(alpha)
        and (_valid_fraction(label_prob, closed=True) if sampling == "bernoulli" else float(label_prob) == 1.0)
    )
    assert (code == 0) == ok, (argv, capsys.readouterr().err)
    if not ok:
        assert code == 2


@pytest.mark.parametrize("cls", [PAC, GPAC])
def test_route_keeps_every_row(cls):
    u, loss, groups = _population(500, seed=3)
    cal = cls(0.1).fit(u, loss, groups if cls is GPAC else None)
    assert cal.route(u, groups if cls is GPAC else None).shape == (500,)
