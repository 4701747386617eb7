"""The command line: calibrate a real table, write JSON, route another table."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpac_utils", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    n = 600
    g = rng.choice(["x", "y"], n)
    u = rng.random(n)
    loss = (rng.random(n) < np.where(g == "x", 0.1, 0.5) * u).astype(int)
    p = tmp_path / "cal.csv"
    pd.DataFrame({"qid": np.arange(n), "subject": g, "err": loss, "unc": u}).to_csv(p, index=False)
    return p


@pytest.mark.parametrize("method", ["pac", "gpac", "cpac"])
def test_calibrate_then_route(tmp_path, table, method):
    out = tmp_path / "thr.json"
    r = run(
        "calibrate",
        "--data",
        str(table),
        "--score-col",
        "unc",
        "--loss-col",
        "err",
        *(["--group-col", "subject"] if method == "gpac" else []),  # the other methods refuse it
        "--id-col",
        "qid",
        "--method",
        method,
        "--eps",
        "0.1",
        "--alpha",
        "0.05",
        "--bound",
        "hoeffding_bentkus",
        "--sampling",
        "bernoulli",
        "--label-prob",
        "0.5",
        "--rule",
        "first-crossing",
        "--seed",
        "3",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    payload = json.loads(out.read_text())
    assert payload["settings"]["bound"] == "hoeffding_bentkus" and payload["settings"]["seed"] == 3
    assert payload["columns"]["score"] == "unc"
    if method == "gpac":
        assert set(payload["thresholds"]) == {"x", "y"}
    routed = tmp_path / "routed.csv"
    r = run("route", "--thresholds", str(out), "--data", str(table), "-o", str(routed), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(routed)
    assert df["route_nothink"].dtype == bool
    assert (df["route_nothink"] == (df["unc"] <= df["threshold"])).all()


def test_cli_errors_name_the_column(tmp_path, table):
    r = run(
        "calibrate",
        "--data",
        str(table),
        "--score-col",
        "nope",
        "--eps",
        "0.1",
        "-o",
        str(tmp_path / "t.json"),
        cwd=tmp_path,
    )
    assert r.returncode != 0 and "nope" in r.stderr
    bad = pd.read_csv(table)
    bad.loc[3, "unc"] = 1.7
    bad.to_csv(tmp_path / "bad.csv", index=False)
    r = run(
        "calibrate",
        "--data",
        str(tmp_path / "bad.csv"),
        "--score-col",
        "unc",
        "--loss-col",
        "err",
        "--id-col",
        "qid",
        "--eps",
        "0.1",
        "-o",
        str(tmp_path / "t.json"),
        cwd=tmp_path,
    )
    assert r.returncode == 1 and "'unc'" in r.stderr and "row 4" in r.stderr


def test_method_is_named_as_the_cli_or_the_certificate_names_it(tmp_path, table, monkeypatch):
    """--method G-PAC (the certificate's name) is --method gpac; a misspelt name is still argparse's one line."""
    from gpac_utils.cli import main

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")  # both files' creation time (not a second boundary apart)

    args = ["calibrate", "--data", str(table), "--score-col", "unc", "--loss-col", "err", "--group-col", "subject"]
    args += ["--id-col", "qid"]
    for name in ("gpac", "G-PAC"):
        assert main([*args, "--method", name, "--eps", "0.1", "-o", str(tmp_path / f"{name}.json")]) == 0
    assert (tmp_path / "gpac.json").read_text() == (tmp_path / "G-PAC.json").read_text().replace(
        "G-PAC.json", "gpac.json"
    )
    r = run(*args, "--method", "G-PACC", "--eps", "0.1", "-o", str(tmp_path / "x.json"), cwd=tmp_path)
    assert r.returncode == 2 and "argument --method: invalid choice: 'gpacc'" in r.stderr.splitlines()[-1]
