"""Overlapping groups from the command line (issue 54, item 2): ``gpac calibrate --group-col subject --group-col
language``, the certificate (its groupings, each group's status and certified bound, each cell's threshold),
``gpac route``, ``gpac inspect`` and ``gpac verify``, end to end on a small seeded table; the refusals (several
columns with G-PAC, a repeated column, a missing column at routing, an edited record, threshold or grouping);
and a certificate of the previous schema (``tests/fixtures/certificates/mingpac_v5.json``: Min-G-PAC on one label
column, written by the code before this one) that still reads, routes and verifies."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_verify import run

from gpac_utils.calibrate import CERTIFIED, GPAC
from gpac_utils.certificate import Certificate, column_sha256
from gpac_utils.cli import main
from gpac_utils.group_collection import SEP, split_cell
from gpac_utils.workflow.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "certificates"
GROUPINGS = ("subject", "language")


def one_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A seeded table of two groupings (geometry's losses high), and a certificate of each collection method."""
    d = tmp_path_factory.mktemp("mgcli")
    rng = np.random.default_rng(0)
    n = 2000
    subject = rng.choice(["algebra", "geometry", "counting & probability"], n)  # a label may hold ' & ' (MATH's)
    language = rng.choice(["en", "fr"], n)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(subject == "geometry", 0.5, 0.1) * u).astype(int)
    df = pd.DataFrame({"item_id": np.arange(n), "subject": subject, "language": language, "score": u, "loss": loss})
    df.to_csv(d / "cal.csv", index=False)
    certs = {}
    for method in ("shiftgpac", "mingpac", "pathgpac"):  # shiftgpac: without --method (the default of several)
        certs[method] = d / f"{method}.json"
        args = ["calibrate", "--data", d / "cal.csv", "--score-col", "score", "--eps", "0.1", "-o", certs[method]]
        args += [
            "--group-col",
            "subject",
            "--group-col",
            "language",
            *(["--method", method] if method != "shiftgpac" else []),
        ]
        assert main([str(a) for a in args]) == 0
    return d, df, certs


@pytest.mark.parametrize("method", ["shiftgpac", "mingpac", "pathgpac"])
def test_calibrate_two_groupings_then_inspect_route_and_verify(made, method, capsys):
    d, df, certs = made
    doc = json.loads(certs[method].read_text())
    # the certificate: which groupings, each group's status and bound, each cell's threshold, each column hashed
    names = {"shiftgpac": "Shift-G-PAC", "mingpac": "Min-G-PAC", "pathgpac": "Path-G-PAC"}
    assert doc["method"] == names[method]  # shiftgpac: the default
    assert doc["groupings"] == list(GROUPINGS) and doc["schema_version"] == 5
    groups = {f"{c}={v}" for c in GROUPINGS for v in np.unique(df[c])}
    assert set(doc["groups"]) == groups == set(doc["group_sizes"])
    assert all(e["status"] != CERTIFIED or 0 < e["ucb"] <= 0.1 for e in doc["groups"].values())
    assert doc["groups"]["subject=algebra"]["status"] == CERTIFIED
    cells = {f"subject={s}{SEP}language={g}" for s, g in zip(df["subject"], df["language"])}
    assert set(doc["thresholds"]) == cells
    for c in GROUPINGS:
        assert doc["columns"][f"group:{c}"] == c and "group" not in doc["columns"]
        assert doc["provenance"]["columns"][f"group:{c}"]["sha256"] == column_sha256(df[c].to_numpy())
    if method == "mingpac":  # each cell: the smallest of its groups' own thresholds
        own = {g: e["threshold"] for g, e in doc["groups"].items()}
        assert all(t == min(own[p] for p in split_cell(c, GROUPINGS)) for c, t in doc["thresholds"].items())
        assert doc["thresholds"][f"subject=counting & probability{SEP}language=en"] == min(
            own["subject=counting & probability"], own["language=en"]
        )
    # the accessor and a calibrator that routes from a table of those columns (its other columns not read)
    cert = Certificate.read(certs[method])
    assert cert.kind == "collection" and cert.group_columns == GROUPINGS and cert.groupings == GROUPINGS
    cal = cert.calibrator()
    routed = cal.route(df["score"], df)
    assert np.array_equal(routed, cal.route(df["score"], df[["language", "subject"]]))
    cell = df["subject"].radd("subject=") + SEP + df["language"].radd("language=")
    assert np.array_equal(routed, df["score"].to_numpy() <= cell.map(doc["thresholds"]).to_numpy(float))
    # gpac route: each item by its cell's threshold
    rc, out, err = run(capsys, "route", "--thresholds", certs[method], "--data", d / "cal.csv", "-o", d / "r.csv")
    assert rc == 0 and not err, err
    back = pd.read_csv(d / "r.csv")
    assert np.array_equal(back["route_nothink"], routed) and f"routed {routed.sum()}/{len(df)} items" in out
    # gpac inspect: the groupings, a row per group, a row per cell
    rc, out, _ = run(capsys, "inspect", certs[method], "--data", d / "cal.csv")
    assert rc == 0 and "grouping  subject (column 'subject'), language (column 'language')" in out
    assert "subject=geometry" in out and "subject=algebra & language=en" in out and "5 certified" in out
    assert "column group:language 'language': matches" in out
    # gpac verify: recomputed from the table
    rc, out, err = run(capsys, "verify", certs[method], "--data", d / "cal.csv", "--expect", "eps=0.1")
    assert rc == 0, err
    assert "recomputed 6 threshold(s) (one per cell of subject, language), every group entry" in out
    assert "bit-identical" in out


def test_one_column_with_a_collection_method_is_a_partition_and_min_g_pac_is_g_pac_there(made, capsys):
    d, df, _ = made
    args = ["calibrate", "--data", d / "cal.csv", "--score-col", "score", "--eps", "0.1", "--group-col", "subject"]
    assert run(capsys, *args, "--method", "mingpac", "-o", d / "one.json")[0] == 0
    doc = json.loads((d / "one.json").read_text())
    gpac = GPAC(0.1).fit(df["score"], df["loss"].astype(float), df["subject"])
    assert doc["groupings"] == ["subject"] and {
        g.removeprefix("subject="): t for g, t in doc["thresholds"].items()
    } == (gpac.thresholds_)
    assert Certificate.read(d / "one.json").group_columns == ("subject",)
    assert run(capsys, "verify", d / "one.json", "--data", d / "cal.csv")[0] == 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--method", "gpac", "--group-col", "subject", "--group-col", "language"], "--group-col: --method gpac "),
        (["--group-col", "subject", "--group-col", "subject"], "--group-col: 'subject' given twice"),
        (["--method", "pac", "--group-col", "subject", "--group-col", "language"], "only --method gpac or mingpac"),
        (["--method", "pathgpac"], "--group-col: --method pathgpac needs the column"),
        (["--group-col", "subject", "--group-col", "nope"], "--group-col 'nope': no such column"),
        (["--group-col", "subject", "--group-col", "score"], "--group-col 'score': the same column as --score-col"),
    ],
)
def test_calibrate_refusals_name_the_option(made, capsys, extra, needle):
    d, _, _ = made
    out = d / "refused.json"
    rc, _, err = run(
        capsys, "calibrate", "--data", d / "cal.csv", "--score-col", "score", "--eps", "0.1", *extra, "-o", out
    )
    assert rc in (1, 2) and needle in one_error(err) and not out.exists()
    if needle.startswith("--group-col: --method gpac"):  # names the methods that take several groupings
        assert "need --method mingpac or shiftgpac or pathgpac" in err


def test_bad_grouping_names_and_labels_are_refused_before_calibration(made, tmp_path, capsys):
    _, df, _ = made
    bad = df.assign(subject=df["subject"].replace("algebra", "a & language=x"), **{"lang=x": df["language"]})
    bad.to_csv(tmp_path / "bad.csv", index=False)
    base = ["calibrate", "--data", tmp_path / "bad.csv", "--score-col", "score", "--eps", "0.1", "-o", tmp_path / "o"]
    rc, _, err = run(capsys, *base, "--group-col", "subject", "--group-col", "lang=x")
    assert rc == 2 and "--group-col 'lang=x': a grouping's column name must not contain '='" in one_error(err)
    rc, _, err = run(capsys, *base, "--group-col", "language", "--group-col", "subject")
    assert rc == 1 and "column 'subject' has labels containing ' & ' and a grouping's 'name='" in one_error(err)


def test_route_refuses_a_table_without_a_grouping_and_another_number_of_columns(made, tmp_path, capsys):
    d, df, certs = made
    df.drop(columns="language").to_csv(tmp_path / "nolang.csv", index=False)
    rc, _, err = run(
        capsys, "route", "--thresholds", certs["mingpac"], "--data", tmp_path / "nolang.csv", "-o", tmp_path / "r.csv"
    )
    assert rc == 1 and "--group-col 'language': no such column in" in one_error(err)
    rc, _, err = run(
        capsys,
        "route",
        "--thresholds",
        certs["mingpac"],
        "--data",
        d / "cal.csv",
        "--group-col",
        "subject",
        "-o",
        tmp_path / "r.csv",
    )
    assert rc == 2 and "routes by 2 column(s) ['subject', 'language'], got 1" in one_error(err)
    twice = ["--group-col", "subject", "--group-col", "subject", "-o", tmp_path / "r.csv"]
    rc, _, err = run(capsys, "route", "--thresholds", certs["mingpac"], "--data", d / "cal.csv", *twice)
    assert rc == 2 and "--group-col: 'subject' given twice; give each grouping's column once" in one_error(err)
    assert not (tmp_path / "r.csv").exists()
    # renamed columns, one per grouping in its order: routed as the certificate's; a label it lacks thinks
    df.rename(columns={"subject": "topic"}).replace({"algebra": "physics"}).to_csv(tmp_path / "new.csv", index=False)
    args = ["--group-col", "topic", "--group-col", "language", "-o", tmp_path / "r.csv"]
    rc, _, err = run(capsys, "route", "--thresholds", certs["mingpac"], "--data", tmp_path / "new.csv", *args)
    assert rc == 0 and "group 'topic' (calibrated on 'subject')" in err
    assert "1 group(s) in the data are not in the thresholds file" in err and "'subject=physics'" in err
    assert not pd.read_csv(tmp_path / "r.csv").loc[df["subject"].eq("algebra"), "route_nothink"].any()


def _edit(doc, how):
    out = json.loads(json.dumps(doc))
    how(out)
    return out


EDITS = {
    "a group's bound": (
        lambda d: d["groups"]["subject=algebra"].update(ucb=d["groups"]["subject=algebra"]["ucb"] * 0.999),
        "groups.subject=algebra.ucb is",
    ),
    "a group's status": (
        lambda d: d["groups"]["language=en"].update(status="always think: too few items", threshold=None),
        "for a cell of group 'language=en', whose status is 'always think: too few items'",
    ),
    "a group's size": (
        lambda d: d["group_sizes"].update({"language=fr": d["group_sizes"]["language=fr"] + 1}),
        "group_sizes.language=fr is",
    ),
    "a cell's threshold": (
        lambda d: d["thresholds"].update({f"subject=algebra{SEP}language=fr": 0.5}),
        "threshold of cell 'subject=algebra & language=fr' is 0.5",
    ),
    "the groupings' order": (
        lambda d: d.update(groupings=d["groupings"][::-1]),
        "not a cell of the groupings ['language', 'subject']",
    ),
    "a grouping's column": (
        lambda d: d["columns"].update({"group:language": "subject"}),
        "columns.group:language is 'subject', but provenance",
    ),
    "a grouping's hash": (
        lambda d: d["provenance"]["columns"]["group:subject"].update(sha256="0" * 64),
        "column group:subject 'subject': DIFFERS",
    ),
    "a group removed": (
        lambda d: d["groups"].pop("language=en"),
        "the cell's group 'language=en' has no entry in 'groups'",
    ),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_verify_refuses_an_edited_record_threshold_or_grouping(made, tmp_path, capsys, what):
    d, _, certs = made
    how, needle = EDITS[what]
    (tmp_path / "edited.json").write_text(json.dumps(_edit(json.loads(certs["mingpac"].read_text()), how)))
    rc, _, err = run(capsys, "verify", tmp_path / "edited.json", "--data", d / "cal.csv")
    assert rc == 1 and needle in one_error(err)


def test_a_certificate_of_the_previous_schema_still_reads_routes_and_verifies(tmp_path, capsys):
    """mingpac_v5.json: Min-G-PAC on one label column (``group``), written before groupings were recorded."""
    path, table = FIXTURES / "mingpac_v5.json", FIXTURES / "table.csv"
    cert = Certificate.read(path)
    assert "groupings" not in json.loads(path.read_text()) and cert.kind == "collection"
    assert cert.groupings == () and cert.group_columns == ("group",) and set(cert.groups) == {"alg", "geo"}
    assert Certificate.read(FIXTURES / "v5.json").group_columns == ("group",)  # G-PAC: one name
    rc, out, _ = run(capsys, "inspect", path)
    assert rc == 0 and "Min-G-PAC thresholds, schema version 5" in out and "grouping " not in out
    rc, out, err = run(capsys, "route", "--thresholds", path, "--data", table, "-o", tmp_path / "r.csv")
    assert rc == 0, err
    routed = pd.read_csv(tmp_path / "r.csv")
    assert (routed["route_nothink"] == (routed["score_router"] <= routed["group"].map(cert.thresholds))).all()
    rc, out, err = run(capsys, "verify", path, "--data", table)
    assert rc == 0 and "bit-identical" in out, err


def test_a_collection_entry_without_groupings_is_refused_at_registration():
    """A calibrator of a collection writes `groupings`; an entry that does not declare the field would write
    certificates every reader refuses (a heir's report), so Method refuses it in one line."""
    from gpac_utils.multigroup import GROUPING_NAMES, MinGPAC
    from gpac_utils.settings import Method

    class Mine(MinGPAC):
        name = "Min-G-PAC-mine"

    with pytest.raises(ValueError, match="a calibrator of a collection records its groupings; declare json_fields"):
        Method(Mine.name, Mine, "collection", {})
    assert Method(Mine.name, Mine, "collection", {"groupings": GROUPING_NAMES}).groups == "collection"
