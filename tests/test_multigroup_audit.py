"""``gpac audit`` of a certificate of several groupings (issue 54, item 2): per group of every grouping, each item
routed by its cell's threshold, Bonferroni over every group the certificate routes. End to end on a seeded table of
two groupings (a fresh table of the same population passes; one language's losses raised: violated, exit 3), the
refusals (a missing grouping column, ``--group-col`` other than the certificate's, ``--sequential``, a membership
matrix's certificate from the command line, a Python ``groups`` without a grouping), ``K`` against a hand count,
a certificate of one label column, and the audit's level on a population whose every group's risk is exact."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from gpac_utils.audit import (
    BY_CONSTRUCTION,
    COLUMNS,
    EXIT_PASS,
    EXIT_UNTESTED,
    EXIT_VIOLATED,
    NO_ITEMS,
    VIOLATED,
    AuditWarning,
    audit,
    gate,
    routing,
)
from gpac_utils.audit_sequential import SequentialAudit
from gpac_utils.calibrate import CERTIFIED, TOO_FEW
from gpac_utils.certificate import Certificate
from gpac_utils.checks import ParameterError
from gpac_utils.cli import main
from gpac_utils.group_collection import SEP, split_cell
from gpac_utils.multigroup import ShiftGPAC
from gpac_utils.paper.theory.overlap import POPULATIONS
from gpac_utils.workflow.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "certificates"
EPS = 0.1


def table(seed: int, n: int, start: int = 0, fr_loss: float | None = None) -> pd.DataFrame:
    """A seeded table of two groupings: geometry loses more; ``sw`` is too rare to be certified (always thinks).
    ``fr_loss``: the French items' loss is a coin of this probability, whatever the score (a risk far above eps)."""
    rng = np.random.default_rng(seed)
    subject = rng.choice(["algebra", "geometry", "counting & probability"], n, p=[0.4, 0.3, 0.3])
    language = rng.choice(["en", "fr", "sw"], n, p=[0.545, 0.45, 0.005])
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(subject == "geometry", 0.5, 0.1) * u).astype(int)
    if fr_loss is not None:
        loss = np.where(language == "fr", rng.uniform(size=n) < fr_loss, loss).astype(int)
    ids = np.arange(start, start + n)
    return pd.DataFrame({"item_id": ids, "subject": subject, "language": language, "score": u, "loss": loss})


def run(capsys, *args) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    rc = main([str(a) for a in args])
    got = capsys.readouterr()
    return rc, got.out, got.err.strip().splitlines()


def one_error(err) -> str:
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The calibration table, its Shift-G-PAC certificate (``gpac calibrate``, two ``--group-col``), fresh tables."""
    d = tmp_path_factory.mktemp("mgaudit")
    table(0, 3000).to_csv(d / "cal.csv", index=False)
    cert = d / "shift.json"
    args = ["calibrate", "--data", d / "cal.csv", "--score-col", "score", "--eps", EPS, "-o", cert]
    assert main([str(a) for a in [*args, "--group-col", "subject", "--group-col", "language"]]) == 0
    table(1, 3000, start=10_000).to_csv(d / "fresh.csv", index=False)
    table(2, 3000, start=20_000, fr_loss=0.6).to_csv(d / "drift.csv", index=False)
    return d, cert


def hand_k(doc: dict) -> int:
    """The groups of every grouping in a cell with a threshold, counted from the JSON by hand."""
    routed = set()
    for cell, t in doc["thresholds"].items():
        if t is not None:
            routed.update(split_cell(cell, doc["groupings"]))
    return len(routed)


def test_a_fresh_table_of_the_same_population_passes_with_a_row_per_group_of_every_grouping(made, capsys):
    d, cert = made
    doc = json.loads(cert.read_text())
    assert doc["method"] == "Shift-G-PAC" and doc["groupings"] == ["subject", "language"]
    assert doc["groups"]["language=sw"]["status"] == TOO_FEW  # its cells always think
    rc, out, err = run(capsys, "audit", cert, "--data", d / "fresh.csv", "-o", d / "report.csv")
    assert rc == EXIT_PASS and not err, (out, err)
    report = pd.read_csv(d / "report.csv")
    assert list(report.columns) == COLUMNS  # the one-grouping report's columns; a group is named column=label
    groups = {f"{c}={v}" for c in ("subject", "language") for v in table(0, 3000)[c].unique()}
    assert set(report["group"]) == groups == set(doc["groups"]) and len(report) == len(groups)
    assert VIOLATED not in set(report["verdict"])
    by = report.set_index("group")
    assert by.loc["language=sw", "verdict"] == BY_CONSTRUCTION and by.loc["language=sw", "gate"] == "-"
    assert by.loc["language=sw", "status"] == TOO_FEW and by.loc["subject=geometry", "status"] == CERTIFIED
    fresh = pd.read_csv(d / "fresh.csv")
    for c in ("subject", "language"):  # each item a trial of one group per grouping
        rows = by.loc[[g for g in by.index if g.startswith(f"{c}=")]]
        assert rows["n"].sum() == len(fresh)
        assert (rows["n"] == [int((fresh[c] == g.split("=", 1)[1]).sum()) for g in rows.index]).all()
    # routed by the cells' thresholds, as gpac route routes them
    assert main(["route", "--thresholds", str(cert), "--data", str(d / "fresh.csv"), "-o", str(d / "r.csv")]) == 0
    routed = pd.read_csv(d / "r.csv")
    for g in ("subject=geometry", "language=fr"):
        c, v = g.split("=", 1)
        assert by.loc[g, "routed"] == routed.loc[routed[c] == v, "route_nothink"].sum()
        at = routed[c] == v
        assert by.loc[g, "risk"] == pytest.approx((routed["loss"] * routed["route_nothink"])[at].mean(), abs=1e-4)
    assert "the 5 group(s) the certificate routes in groupings subject, language" in out.splitlines()[-1]


def test_one_language_far_above_eps_is_violated_and_the_gate_fails(made, capsys):
    d, cert = made
    rc, out, err = run(capsys, "audit", cert, "--data", d / "drift.csv", "--binary", "-o", d / "drift_report.csv")
    assert rc == EXIT_VIOLATED, (out, err)
    report = pd.read_csv(d / "drift_report.csv").set_index("group")
    assert report.loc["language=fr", "verdict"] == VIOLATED and report.loc["language=fr", "gate"] == VIOLATED
    assert report.loc["language=en", "verdict"] != VIOLATED  # English is the calibration population's
    assert "FAIL (exit 3); VIOLATED in" in out and "'language=fr'" in out.splitlines()[-1]


def test_k_is_every_group_the_certificate_routes_against_a_hand_count(made, capsys):
    d, cert = made
    doc = json.loads(cert.read_text())
    k = hand_k(doc)
    assert k == 5 and routing(Certificate.read(cert)) == {g for g in doc["groups"] if g != "language=sw"}
    fresh = pd.read_csv(d / "fresh.csv")
    c = Certificate.read(cert)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn of
        report = audit(c, fresh["score"], fresh["loss"], fresh, ids=fresh["item_id"], level=0.05)
    assert report.attrs["K"] == k and report.attrs["per_group_level"] == pytest.approx(0.05 / k)
    assert report.attrs["groupings"] == ("subject", "language")
    # K is fixed by the certificate: a group without items stays counted (its test's level is not handed on)
    no_fr = fresh[fresh["language"] != "fr"]
    report = audit(c, no_fr["score"], no_fr["loss"], no_fr, ids=no_fr["item_id"], level=0.05)
    assert report.attrs["K"] == k and report.set_index("group").loc["language=fr", "verdict"] == NO_ITEMS
    assert gate(report) == EXIT_UNTESTED
    allowed = audit(
        c, no_fr["score"], no_fr["loss"], no_fr, ids=no_fr["item_id"], allow_untested=["language=fr"], detectable=0.5
    )
    assert gate(allowed) == EXIT_PASS and allowed.attrs["K"] == k


def test_a_missing_grouping_column_is_refused_naming_it(made, capsys):
    d, cert = made
    pd.read_csv(d / "fresh.csv").drop(columns="language").to_csv(d / "no_lang.csv", index=False)
    rc, _, err = run(capsys, "audit", cert, "--data", d / "no_lang.csv")
    assert rc == 1 and "no group column 'language'" in one_error(err)
    fresh = pd.read_csv(d / "fresh.csv")
    with pytest.raises(ParameterError, match="groups: no column 'language' of the certificate's groupings"):
        audit(Certificate.read(cert), fresh["score"], fresh["loss"], fresh[["subject"]], ids=fresh["item_id"])
    with pytest.raises(ParameterError, match="groups: a Shift-G-PAC certificate routes by the cells"):
        audit(Certificate.read(cert), fresh["score"], fresh["loss"], ids=fresh["item_id"])


@pytest.mark.parametrize(
    "cols, needle",
    [
        (["language", "subject"], "--group-col: a Shift-G-PAC certificate is audited by the columns"),
        (["subject"], "--group-col: a Shift-G-PAC certificate is audited by the columns"),
    ],
)
def test_group_col_other_than_the_certificates_groupings_is_refused(made, capsys, cols, needle):
    d, cert = made
    rc, _, err = run(capsys, "audit", cert, "--data", d / "fresh.csv", *[x for c in cols for x in ("--group-col", c)])
    assert rc == 2 and needle in one_error(err)


def test_group_col_naming_the_certificates_groupings_in_order_is_accepted(made, capsys):
    d, cert = made
    rc, out, err = run(
        capsys, "audit", cert, "--data", d / "fresh.csv", "--group-col", "subject", "--group-col", "language"
    )
    assert rc == EXIT_PASS and not err and "subject=geometry" in out


def test_the_sequential_mode_of_a_collection_is_refused(made, capsys):
    d, cert = made
    rc, _, err = run(
        capsys, "audit", cert, "--data", d / "fresh.csv", "--sequential", "--order-col", "item_id", "--state", d / "s"
    )
    assert rc == 2 and one_error(err).startswith("error: --sequential: a Shift-G-PAC certificate")
    assert not (d / "s").exists()
    with pytest.raises(ParameterError, match="certificate: a Shift-G-PAC certificate .* audited in one look"):
        SequentialAudit.start(Certificate.read(cert), "0" * 64)


def test_labels_and_cells_the_certificate_lacks_are_warned_per_grouping(made, capsys):
    d, cert = made
    fresh = pd.read_csv(d / "fresh.csv")
    fresh.loc[:99, "language"] = "de"  # a language it never saw: its items always think
    fresh.loc[100:109, "subject"] = "Algebra "  # a near match
    fresh.to_csv(d / "unknown.csv", index=False)
    rc, out, err = run(capsys, "audit", cert, "--data", d / "unknown.csv", "-o", d / "unknown_report.csv")
    assert rc == EXIT_PASS, (out, err)
    assert len(err) == 2 and all(e.startswith("warning: ") for e in err), err
    lang = next(e for e in err if "grouping 'language'" in e)
    subj = next(e for e in err if "grouping 'subject'" in e)
    assert "'language=de' (100 items)" in lang and "always think" in lang
    assert "'subject=Algebra ' (10 items; did you mean 'subject=algebra'?)" in subj
    report = pd.read_csv(d / "unknown_report.csv").set_index("group")
    assert "language=de" not in report.index  # not tested, not counted
    # the 'de' items are trials of their subjects, routing nothing
    assert report.loc[[g for g in report.index if g.startswith("subject=")], "n"].sum() == len(fresh) - 10


def test_a_cell_not_calibrated_is_warned_and_tested_as_routing_nothing(made):
    d, cert = made
    doc = json.loads(cert.read_text())
    del doc["thresholds"][f"subject=algebra{SEP}language=en"]  # as if no such item at calibration
    c = Certificate.parse(doc)
    fresh = pd.read_csv(d / "fresh.csv")
    with pytest.warns(AuditWarning, match=r"1 cell\(s\) of the data's groups were not calibrated .* always think"):
        report = audit(c, fresh["score"], fresh["loss"], fresh, ids=fresh["item_id"])
    by = report.set_index("group")
    alg, en = fresh["subject"] == "algebra", fresh["language"] == "en"
    cheap = fresh["score"] <= fresh["language"].map(lambda v: c.thresholds.get(f"subject=algebra{SEP}language={v}"))
    assert by.loc["subject=algebra", "n"] == alg.sum()  # its en items are trials, routing nothing
    assert by.loc["subject=algebra", "routed"] == (alg & ~en & cheap).sum()


def test_a_membership_matrix_certificate_is_audited_from_python_not_the_command_line(tmp_path, capsys):
    df = table(0, 3000)
    member = pd.DataFrame({"alg": df["subject"] == "algebra", "en": df["language"] == "en"})
    member["rest"] = ~(member["alg"] | member["en"])
    cal = ShiftGPAC(eps=EPS).fit(df["score"], df["loss"], member)
    cert = Certificate.from_calibrator(cal, columns={"score": ("score", df["score"]), "loss": ("loss", df["loss"])})
    assert cert.groupings is None
    (tmp_path / "m.json").write_text(cert.to_json())
    table(1, 100, start=10_000).to_csv(tmp_path / "fresh.csv", index=False)
    rc, _, err = run(capsys, "audit", tmp_path / "m.json", "--data", tmp_path / "fresh.csv")
    assert rc == 2 and "--group-col: a Shift-G-PAC certificate calibrated on a membership matrix" in one_error(err)
    fresh = table(1, 3000, start=10_000)
    m = pd.DataFrame({"alg": fresh["subject"] == "algebra", "en": fresh["language"] == "en"})
    m["rest"] = ~(m["alg"] | m["en"])
    with pytest.warns(AuditWarning, match="records no calibration item ids"):
        report = audit(Certificate.read(tmp_path / "m.json"), fresh["score"], fresh["loss"], m)
    assert set(report["group"]) == {"alg", "en", "rest"} and report.attrs["K"] == len(routing(cert))
    assert (report.set_index("group")["n"] == m.sum()).all()


def test_a_certificate_of_one_label_column_is_audited_by_its_labels(capsys, tmp_path):
    """mingpac_v5.json: Min-G-PAC on one label column (``group``), a file before groupings were recorded."""
    fixture = pd.read_csv(FIXTURES / "table.csv")
    fresh = fixture.assign(item_id="new-" + fixture["item_id"].astype(str), score_router=fixture["score_router"] * 0.9)
    fresh.to_csv(tmp_path / "fresh.csv", index=False)
    rc, out, err = run(
        capsys, "audit", FIXTURES / "mingpac_v5.json", "--data", tmp_path / "fresh.csv", "-o", tmp_path / "r.csv"
    )
    assert rc in (EXIT_PASS, 5) and not [e for e in err if e.startswith("error")], (out, err)
    report = pd.read_csv(tmp_path / "r.csv")
    assert set(report["group"]) == {"alg", "geo"} and report["n"].sum() == len(fresh)


def test_a_collection_certificate_of_the_routed_risk_does_not_read(made, tmp_path, capsys):
    d, cert = made
    doc = json.loads(cert.read_text())
    doc["settings"]["risk"] = "routed"
    (tmp_path / "routed.json").write_text(json.dumps(doc))
    rc, _, err = run(capsys, "audit", tmp_path / "routed.json", "--data", d / "fresh.csv")
    assert rc == 1 and "certifies the joint risk only" in one_error(err)


def test_a_partition_certificate_takes_one_group_col(capsys, tmp_path):
    rc, _, err = run(
        capsys, "audit", FIXTURES / "v5.json", "--data", FIXTURES / "table.csv", "--group-col", "a", "--group-col", "b"
    )
    assert rc == 2 and "--group-col: a G-PAC certificate audits by one group column, got 2" in one_error(err)


def _cells_at_eps(pop, eps: float) -> dict:
    """Each cell's threshold where its exact risk ``a_c t^(k+1) / (k+1)`` is ``eps`` (at most 1: a cell of small loss
    routes everything, below eps): every group's risk at most eps, a group of such cells only exactly eps."""
    t = (eps * (pop.k + 1) / pop.a.ravel()) ** (1 / (pop.k + 1))
    return dict(zip(pop.cells, np.minimum(t, 1.0).tolist()))


def test_the_audits_level_on_a_population_of_exact_risk():
    """Every group's risk at most eps, most exactly eps: some group violated in at most level + 3 MCSE of 200 fresh
    tables (exact per-group risks: gpac_utils.paper.theory.overlap). With K = 1 (no Bonferroni) it fails."""
    pop, eps, level, reps, n = POPULATIONS["four-by-three"], 0.05, 0.05, 200, 800
    rng = np.random.default_rng(0)
    u, loss, labels = pop.sample(4000, rng)
    doc = json.loads(Certificate.from_calibrator(ShiftGPAC(eps=eps).fit(u, loss, labels)).to_json())
    assert set(doc["thresholds"]) == set(pop.cells)
    doc["thresholds"] = _cells_at_eps(pop, eps)  # the certificate's cells, at the boundary of the null
    cert = Certificate.parse(doc)
    risk = pop.risk(cert.thresholds)
    assert max(risk.values()) <= eps + 1e-12 and sum(r > eps - 1e-9 for r in risk.values()) >= 4
    assert len(routing(cert)) == len(pop.groups) == 7
    flagged = np.zeros(reps, bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AuditWarning)  # no calibration ids recorded
        for i in range(reps):
            u, loss, labels = pop.sample(n, rng)
            report = audit(cert, u, loss, labels, level=level, binary=True)
            flagged[i] = (report["verdict"] == VIOLATED).any()
    mcse = math.sqrt(level * (1 - level) / reps)
    assert flagged.mean() <= level + 3 * mcse, flagged.mean()
    assert flagged.mean() == 0.025  # the figure docs/overlapping-groups.md states
