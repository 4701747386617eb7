"""The certificate (one value, `Certificate`): provenance, per-group status, migration, `gpac inspect`, `gpac route`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gpac_utils import CPAC, GPAC, Partition, ScorePartitioner, from_json
from gpac_utils.calibrate import NO_FEASIBLE, TOO_FEW, UNSEEN
from gpac_utils.certificate import Certificate, column_sha256, file_sha256
from gpac_utils.checks import DataError
from gpac_utils.cli import main
from gpac_utils.thresholds_schema import SCHEMA_VERSION

EPOCH = "1767225600"  # 2026-01-01T00:00:00Z


@pytest.fixture
def table(tmp_path):
    """Four groups: one certifies, one is below min_group_size, one below the bound's minimum, one is all loss."""
    rng = np.random.default_rng(0)
    g = np.repeat(["fine", "tiny", "short", "lossy"], [400, 6, 40, 200])
    u = np.where(g == "lossy", 0.5, rng.uniform(size=g.size))
    loss = np.where(g == "lossy", 1, (rng.uniform(size=g.size) < 0.05 * u).astype(int))
    df = pd.DataFrame({"qid": np.arange(g.size), "subject": g, "err": loss, "unc": u, "unc2": u[::-1]})
    p = tmp_path / "cal.csv"
    df.to_csv(p, index=False)
    return p


def calibrate(table, out, *extra):
    args = ["calibrate", "--data", str(table), "--score-col", "unc", "--loss-col", "err", "--group-col", "subject"]
    return main([*args, "--id-col", "qid", "--method", "gpac", "--eps", "0.05", "-o", str(out), *extra])


def test_calibrate_writes_provenance_and_statuses(table, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    out = tmp_path / "thr.json"
    assert calibrate(table, out) == 0
    err = capsys.readouterr().err
    assert "'tiny'" in err and "'short'" in err and "needs to certify anything (59)" in err
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and Certificate.read(doc).version == SCHEMA_VERSION
    prov = doc["provenance"]
    assert prov["created"] == "2026-01-01T00:00:00Z" and prov["recipe"] == "valid" and prov["seed"] == 0
    assert prov["table"]["sha256"] == file_sha256(table)
    df = pd.read_csv(table)
    for role, col in (("score", "unc"), ("loss", "err"), ("group", "subject"), ("id", "qid")):
        assert prov["columns"][role] == {**prov["columns"][role], "name": col, "sha256": column_sha256(df[col])}
    status = {g: e["status"] for g, e in doc["groups"].items()}
    assert status == {"fine": "certified", "tiny": TOO_FEW, "short": TOO_FEW, "lossy": NO_FEASIBLE}
    fine = doc["groups"]["fine"]
    assert fine["n"] == 400 and fine["labelled"] == 400 and 0 < fine["ucb"] <= 0.05
    assert fine["threshold"] == doc["thresholds"]["fine"]
    assert doc["groups"]["short"] == {"n": 40, "labelled": 40, "status": TOO_FEW, "threshold": None, "ucb": None}
    # byte-stable under SOURCE_DATE_EPOCH; from_json still reads it
    again = tmp_path / "again.json"
    assert calibrate(table, again) == 0 and again.read_bytes() == out.read_bytes()
    assert from_json(out.read_text()).thresholds_["fine"] == fine["threshold"]


def test_inspect_prints_the_review_table_and_verifies_hashes(table, tmp_path, capsys):
    out = tmp_path / "thr.json"
    calibrate(table, out)
    capsys.readouterr()
    assert main(["inspect", str(out), "--data", str(table)]) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()[:1] in (["fine"], ["lossy"])}
    assert "certified" in rows["fine"] and NO_FEASIBLE in rows["lossy"]
    assert rows["lossy"].split()[-2:] == ["-", "-"]  # always think: no threshold, no bound
    assert "sha256 " + file_sha256(table) in text and f"schema version {SCHEMA_VERSION}" in text
    assert "1 certified; 2 always think: too few items; 1 always think: no feasible threshold" in text
    assert "table file cal.csv: matches" in text and "column score 'unc': matches" in text
    # a changed table: its file and the changed column differ, the rest matches
    df = pd.read_csv(table)
    df.loc[0, "err"] = 1 - df.loc[0, "err"]
    df.to_csv(table, index=False)
    assert main(["inspect", str(out), "--data", str(table)]) == 1  # a table that does not match: non-zero
    captured = capsys.readouterr()
    text = captured.out
    assert "table file cal.csv: DIFFERS" in text and "column loss 'err': DIFFERS" in text
    assert "column score 'unc': matches" in text
    [line] = captured.err.strip().splitlines()
    assert line.startswith("error: --data") and "does not match" in line


def test_inspect_shows_every_setting(table, tmp_path, capsys):
    """A routed, Bonferroni certificate does not print the settings line of a default one."""
    out = tmp_path / "thr.json"
    assert calibrate(table, out, "--risk", "routed", "--correction", "bonferroni") == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "risk=routed" in first and "correction=bonferroni" in first
    for key in Certificate.read(out).settings.to_dict(GPAC.OPTIONS):
        assert f"{key}=" in first


def test_inspect_ends_quietly_on_a_closed_pipe(table, tmp_path):
    """``gpac inspect ... | head -1``: no traceback."""
    import subprocess
    import sys

    out = tmp_path / "thr.json"
    calibrate(table, out)
    cmd = f"{sys.executable} -m gpac_utils inspect {out} | head -1"
    done = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=False)
    assert done.stdout.startswith("G-PAC thresholds") and done.stderr == ""


def test_certificate_is_one_value_with_one_migration(table, tmp_path):
    """From a calibrator and from a file, back to a calibrator; old versions read through one migration."""
    out = tmp_path / "thr.json"
    calibrate(table, out, "--score", "score_logits")
    cert = Certificate.read(out)
    assert cert.score == "score_logits" and cert.columns["score"] == "unc" and cert.version == SCHEMA_VERSION
    cal = cert.calibrator()
    assert cal.config == cert.settings and cal.thresholds_ == from_json(out.read_text()).thresholds_
    again = Certificate.from_calibrator(cal, columns={"score": ("unc", None)}, score="score_logits")
    assert again.thresholds == cert.thresholds and again.score == cert.score
    # version 3: no score (its column is not a registered score's name); read as the current version
    old = json.loads(out.read_text())
    old.pop("score")
    old["schema_version"] = 3
    read = Certificate.read(old)
    assert read.version == 3 and read.document["schema_version"] == SCHEMA_VERSION and read.score is None
    assert read.calibrator().thresholds_ == cal.thresholds_
    with pytest.raises(DataError, match="score"):
        Certificate.read(json.loads(out.read_text()) | {"score": "score_magic"})


def test_column_hash_is_independent_of_the_file_format(table, tmp_path):
    df = pd.read_csv(table)
    pq = tmp_path / "cal.parquet"
    df.astype({"err": "float32"}).to_parquet(pq)
    back = pd.read_parquet(pq)
    for col in ("unc", "err", "subject", "qid"):
        assert column_sha256(back[col].to_numpy()) == column_sha256(df[col].to_numpy()), col
    assert column_sha256(df["unc"]) != column_sha256(df["unc2"])


def test_route_warns_when_the_columns_differ(table, tmp_path, capsys):
    out = tmp_path / "thr.json"
    calibrate(table, out)
    capsys.readouterr()
    route = ["route", "--thresholds", str(out), "--data", str(table), "-o", str(tmp_path / "r.csv")]
    assert main(route) == 0
    assert "differ" not in capsys.readouterr().err
    assert main([*route, "--score-col", "unc2"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "differ from the certificate" in line]
    assert warned == ["warning: the data's columns differ from the certificate's: score 'unc2' (calibrated on 'unc')"]


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d.update(schema_version=7), "schema_version"),
        (lambda d: d["groups"]["fine"].update(status="fine"), "status must be one of"),
        (lambda d: d["groups"]["fine"].update(status=TOO_FEW), "status"),
        (lambda d: d["groups"]["fine"].pop("ucb"), "lacks"),
        (lambda d: d["groups"]["fine"].update(threshold=0.001), "differs from thresholds"),
        (lambda d: d["groups"].pop("fine"), "no entry in 'groups'"),
        (lambda d: d["provenance"].pop("created"), "provenance"),
        (lambda d: d["provenance"].update(recipe=["paper"]), "'recipe'"),  # a one-line error, not a TypeError
    ],
)
def test_route_refuses_a_malformed_certificate(table, tmp_path, capsys, change, message):
    out = tmp_path / "thr.json"
    calibrate(table, out)
    doc = json.loads(out.read_text())
    change(doc)
    out.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=message):
        Certificate.read(doc)
    capsys.readouterr()
    assert main(["route", "--thresholds", str(out), "--data", str(table), "-o", str(tmp_path / "r.csv")]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and message.split()[0] in line


def test_version_1_file_is_still_read(table, tmp_path, capsys):
    out = tmp_path / "thr.json"
    calibrate(table, out)
    doc = json.loads(out.read_text())
    for key in ("schema", "schema_version", "provenance", "groups"):
        doc.pop(key)
    out.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "schema version 1" in text and "provenance: none" in text
    status = Certificate.read(doc).review().set_index("group")["status"].to_dict()
    assert status == {"fine": "certified", "tiny": TOO_FEW, "short": TOO_FEW, "lossy": NO_FEASIBLE}
    assert main(["route", "--thresholds", str(out), "--data", str(table), "-o", str(tmp_path / "r.csv")]) == 0


def test_cpac_learned_group_without_items_is_unseen():
    """A learned C-PAC group that got no calibration item is listed with status 'unseen at calibration'."""
    u = np.r_[np.full(50, 0.1), np.full(50, 0.9)]
    cal = CPAC(0.2, partitioner=ScorePartitioner(k=3, algorithm="quantile"), mode="joint").fit(u, np.zeros(100))
    assert sorted(cal.thresholds_) == ["c0", "c1"]  # two distinct scores: two groups with items
    # as if the partition, learned on another half (split mode), had a third group that no item fell in
    cal.partition_ = Partition(np.array([0.5, 0.95]), "quantile")
    doc = Certificate.from_calibrator(cal, created="2026-01-01T00:00:00Z").document
    assert {g: e["status"] for g, e in doc["groups"].items()} == {"c0": "certified", "c1": "certified", "c2": UNSEEN}
    assert doc["groups"]["c2"]["n"] == 0 and Certificate.read(doc).version == SCHEMA_VERSION


def test_certify_in_python_matches_fit():
    rng = np.random.default_rng(1)
    g = np.repeat(["a", "b"], 300)
    u = rng.uniform(size=600)
    cal = GPAC(0.1, recipe="valid-bernoulli").fit(u, (rng.uniform(size=600) < 0.2 * u).astype(float), g)
    doc = Certificate.from_calibrator(cal, columns={"score": ("u", u)}, created="2026-01-01T00:00:00Z").document
    for name, rec in cal.groups_.items():
        e = doc["groups"][name]
        assert (e["n"], e["labelled"], e["status"], e["ucb"]) == tuple(rec)
        assert 0 < e["labelled"] < e["n"]  # Bernoulli at 0.5 labels about half
    assert doc["provenance"]["columns"]["score"]["sha256"] == column_sha256(u)


def test_a_certificate_refuses_a_setting_it_would_not_record():
    """The certificate records the settings its method reads; another one away from its default is refused."""
    from gpac_utils import Settings
    from gpac_utils.calibrate import calibrator
    from gpac_utils.checks import ParameterError

    u = np.linspace(0, 1, 300)
    cal = calibrator("pac", Settings(eps=0.1, mode="joint")).fit(u, (u > 0.8).astype(float))
    with pytest.raises(ParameterError, match="^settings: mode='joint' is not read by PAC"):
        Certificate.from_calibrator(cal)


def test_the_deploying_page_names_the_schema_version_from_the_code():
    """docs/deploying.md names the constant rather than a number that a bump would leave stale."""
    import re

    from gpac_utils.workflow.paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "docs" / "deploying.md").read_text().split())
    assert "`gpac_utils.thresholds_schema.SCHEMA_VERSION`" in text
    assert not re.search(r"schema version \d", text), "quote SCHEMA_VERSION, not its value"


def test_inspect_shows_the_methods_own_fields(table, tmp_path, capsys):
    """`gpac inspect` prints every field its method declares beyond the schema's (C-PAC's partition; a plugin's own,
    which a heir could not see before), one line each."""
    out = tmp_path / "c.json"
    args = ["calibrate", "--data", str(table), "--score-col", "unc", "--loss-col", "err", "--id-col", "qid"]
    assert main([*args, "--method", "cpac", "--eps", "0.05", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("field ")]
    partition = json.dumps(json.loads(out.read_text())["partition"], sort_keys=True)
    assert shown == [f"field     partition: {partition}"]
