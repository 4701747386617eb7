"""``gpac audit`` as a gate (issue 49): it tests only the groups the certificate certifies and never passes on
nothing (labels it lacks, an absent group, a group too small to see 2 eps), states per group the risk it
would flag four times in five (exact, against a direct power computation and a seeded Monte Carlo), refuses
audit items that are calibration items in any format, order or subset, and routes on the scores a recorded
score model gives rather than the table's column. Every input the command trusts is changed once here and
the refusal expected. The verdicts on the real table, as docs/deploying.md shows them: tests/test_audit.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_audit import SCORE, calibrate, halves
from test_precall import TOY, ToyEmbedder

from gpac_utils.audit import (
    BY_CONSTRUCTION,
    EXIT_PASS,
    EXIT_TOO_SMALL,
    EXIT_UNTESTED,
    EXIT_VIOLATED,
    NO_ITEMS,
    NO_ROUTED,
    POWER,
    _critical_count,
    _pvalue_and_bounds,
    audit,
    detectable_risk,
    gate,
)
from gpac_utils.certificate import Certificate, id_digests
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.cli import main
from gpac_utils.llm.router_model import EMBEDDERS, Embedding
from gpac_utils.workflow.paths import DATA, REPO_ROOT

PAGE = REPO_ROOT / "docs" / "deploying.md"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The real table's halves (calibration, held-out) and the G-PAC certificate of the first."""
    d = tmp_path_factory.mktemp("gate")
    cal, held = halves(d)
    return calibrate(cal, d / "thresholds.json"), pd.read_csv(cal), pd.read_csv(held), d


def run(capsys, *argv):
    """``gpac audit ...``: the exit status, standard output and the lines of standard error."""
    rc = main(["audit", *map(str, argv)])
    got = capsys.readouterr()
    return rc, got.out, got.err.strip().splitlines()


def one_error(err) -> str:
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def write(df: pd.DataFrame, path):
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


# --------------------------------------------------------------------------- groups
def test_labels_the_certificate_lacks_are_listed_and_nothing_passes_untested(real, capsys):
    """Title-cased labels: no certified group is tested; one warning line names them with a near match; exit 4."""
    cert, _, held, d = real
    renamed = held.assign(group=held["group"].str.upper().replace("GEOMETRY", "Analytic geometry"))
    rc, out, err = run(capsys, cert, "--data", write(renamed, d / "upper.csv"), "--binary", "-o", d / "u.csv")
    assert rc == EXIT_UNTESTED
    warned = [e for e in err if "not groups of the certificate" in e]
    assert len(warned) == 1 and warned[0].startswith("warning: 7 label(s)")
    assert "'ALGEBRA' (93 items; did you mean 'Algebra'?)" in warned[0] and "and 2 more" in warned[0]
    assert "'Analytic geometry' (22 items)," in warned[0]  # no near match: no hint
    assert "'ALGEBRA' (93 items; did you mean 'Algebra'?)" in PAGE.read_text()
    report = pd.read_csv(d / "u.csv")
    certified = report["status"] == "certified"
    assert (report.loc[certified, "verdict"] == NO_ITEMS).all() and (report.loc[certified, "n"] == 0).all()
    assert (report.loc[~certified, "verdict"] == BY_CONSTRUCTION).all()
    assert "NOT TESTED: 6 certified group(s)" in out and "over 0 certified group(s) tested" in out
    # whitespace folds too, for the hint
    spaced = held.assign(group=" " + held["group"].str.replace(" ", "  ") + " ")
    rc, _, err = run(capsys, cert, "--data", write(spaced, d / "spaced.csv"))
    assert rc == EXIT_UNTESTED and "did you mean 'Number Theory'?" in err[0]


def test_an_absent_group_fails_unless_allowed_by_name(real, capsys):
    cert, _, held, d = real
    path = write(held[held["group"] != "Geometry"], d / "no_geometry.csv")
    args = [cert, "--data", path, "--binary", "--detectable", "0.5"]
    rc, out, _ = run(capsys, *args)
    assert rc == EXIT_UNTESTED and "NOT TESTED: 1 certified group(s) ['Geometry']" in out
    rc, out, _ = run(capsys, *args, "--allow-untested", "Geometry", "-o", d / "allowed.csv")
    assert rc == EXIT_PASS and "untested as allowed (--allow-untested): ['Geometry']" in out
    report = pd.read_csv(d / "allowed.csv").set_index("group")
    assert report.loc["Geometry", "gate"] == "untested (allowed)" and "over 5 certified group(s) tested" in out
    # an allowed absence is an absence: a group that is present and too small still fails
    rc, _, _ = run(capsys, cert, "--data", path, "--binary", "--allow-untested", "Geometry")
    assert rc == EXIT_TOO_SMALL
    # --allow-untested names a certified group, exactly
    rc, _, err = run(capsys, *args, "--allow-untested", "geometry")
    assert rc == 2 and "--allow-untested: 'geometry' is not a group the certificate certifies" in one_error(err)
    assert "did you mean 'Geometry'?" in err[0]
    rc, _, err = run(capsys, *args, "--allow-untested", "Precalculus")  # always thinks: nothing to allow
    assert rc == 2 and "'Precalculus' is not a group the certificate certifies" in one_error(err)


def test_a_routed_risk_group_with_nothing_routed_is_not_tested(real, tmp_path, capsys):
    """The routed risk's trials are the routed items: none routed, nothing tested (exit 4), unless allowed."""
    _, cal, held, d = real
    cert = calibrate(d / "calibration.csv", tmp_path / "routed.json", "--risk", "routed")
    high = write(held.assign(**{SCORE: 1.0}), tmp_path / "high.csv")  # above every threshold
    rc, out, _ = run(capsys, cert, "--data", high, "-o", tmp_path / "r.csv")
    report = pd.read_csv(tmp_path / "r.csv").set_index("group")
    assert rc == EXIT_UNTESTED and report.loc["Algebra", "verdict"] == NO_ROUTED and report.loc["Algebra", "n"] == 93
    assert "NOT TESTED: 1 certified group(s) ['Algebra']" in out
    rc, out, _ = run(capsys, cert, "--data", high, "--allow-untested", "Algebra")
    assert rc == EXIT_PASS and "untested as allowed (--allow-untested): ['Algebra']" in out
    assert "PASS: every certified group tested or allowed untested" in out


def test_the_gates_order_of_exit_statuses():
    def status(*marks):
        return gate(pd.DataFrame({"gate": list(marks)}))

    assert status("pass", "-", "untested (allowed)") == EXIT_PASS
    assert status("pass", "too small") == EXIT_TOO_SMALL
    assert status("too small", "untested") == EXIT_UNTESTED
    assert status("too small", "untested", "violated") == EXIT_VIOLATED
    assert (EXIT_VIOLATED, EXIT_UNTESTED, EXIT_TOO_SMALL) == (3, 4, 5)


def test_help_names_every_exit_status(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("0 every certified group tested", "3 a group violated", "4 a certified group not tested", "5 an"):
        assert phrase in text, phrase
    assert "--allow-untested" in text and "--detectable" in text and "one look" in text


def test_the_deploying_page_states_the_gates_exit_statuses_and_power():
    page = " ".join(PAGE.read_text().split())
    assert f"four times in five (power {POWER:g}, `--power`)" in page and POWER == 0.8
    for status, meaning in [
        (EXIT_VIOLATED, "a group is violated"),
        (EXIT_UNTESTED, "a certified group was not tested"),
        (EXIT_TOO_SMALL, "an inconclusive group is too small"),
    ]:
        assert f"| {status} | {meaning}" in page
    assert "**for one look at the data**" in page and "`gpac audit --sequential`" in page
    assert "(default 2ε, at most the loss bound B)" in page


@pytest.mark.parametrize(
    "option, value", [("--level", "1.5"), ("--power", "0"), ("--detectable", "0.15"), ("--detectable", "1.5")]
)
def test_settings_out_of_range_are_usage_errors(real, capsys, option, value):
    cert, _, _, d = real
    held = d / "heldout.csv"
    rc, _, err = run(capsys, cert, "--data", held, option, value)
    assert rc == 2 and one_error(err).startswith(f"error: {option}:")


# --------------------------------------------------------------------------- power
@pytest.mark.parametrize(
    "m, eps, level", [(93, 0.15, 0.05 / 6), (22, 0.15, 0.05 / 6), (400, 0.1, 0.01), (15, 0.3, 0.05)]
)
def test_the_exact_tests_detectable_risk_is_where_its_power_is_four_in_five(m, eps, level):
    """Against a direct power computation: the critical count by brute force over every count, the power at
    the detectable risk exactly 0.8 and below it smaller."""
    r = detectable_risk(m, eps, level, binary=True)
    flagged = [k for k in range(m + 1) if _pvalue_and_bounds(k / m, m, eps, level, True)[0] <= level]
    k = flagged[0]
    assert flagged == list(range(k, m + 1)) and k == _critical_count(m, eps, level)
    assert stats.binom.sf(k - 1, m, r) == pytest.approx(POWER, abs=1e-9)
    assert stats.binom.sf(k - 1, m, r - 1e-4) < POWER < stats.binom.sf(k - 1, m, r + 1e-4)
    # in the loss's units
    assert detectable_risk(m, 2 * eps, 2 * level, binary=True, loss_bound=2.0) != r  # another level
    assert detectable_risk(m, 2 * eps, level, binary=True, loss_bound=2.0) == pytest.approx(2 * r, rel=1e-9)


def test_the_detectable_risk_against_a_monte_carlo_of_the_audits_own_test():
    """Seeded: binary losses at the detectable risk are flagged 0.8 of the time (within 3 Monte Carlo
    standard errors) by the exact test; Hoeffding's closed form flags them at least 0.8 of the time."""
    rng = np.random.default_rng(49)
    reps, m, eps, level = 4000, 93, 0.15, 0.05 / 6
    se = np.sqrt(POWER * (1 - POWER) / reps)
    for binary in (True, False):
        r = detectable_risk(m, eps, level, binary=binary)
        counts = rng.binomial(m, r, size=reps)
        flags = {c: _pvalue_and_bounds(c / m, m, eps, level, binary)[0] <= level for c in np.unique(counts)}
        rate = np.mean([flags[c] for c in counts])
        if binary:
            assert abs(rate - POWER) <= 3 * se, (rate, r)
        else:
            assert rate >= POWER - 3 * se, (rate, r)
    # Hoeffding's: any distribution in [0, 1] with that mean, e.g. a Beta, is flagged at least that often
    r = detectable_risk(m, eps, level, binary=False)
    assert r == pytest.approx(eps + np.sqrt(np.log(1 / level) / (2 * m)) + np.sqrt(np.log(5) / (2 * m)))
    draws = rng.beta(2 * r, 2 * (1 - r), size=(reps, m))
    rate = np.mean([_pvalue_and_bounds(x.mean(), m, eps, level, False)[0] <= level for x in draws])
    assert rate >= POWER - 3 * se


def test_the_audit_modules_examples_run():
    import doctest

    import gpac_utils.audit

    result = doctest.testmod(gpac_utils.audit, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_no_detectable_risk_for_a_group_too_small_to_flag_anything():
    assert detectable_risk(1, 0.15, 0.01, binary=True) == np.inf  # P(Bin(1, 0.15) >= 1) = 0.15 > 0.01
    assert detectable_risk(3, 0.15, 0.01, binary=False) == np.inf  # the closed form exceeds 1
    assert detectable_risk(0, 0.15, 0.01, binary=True) == np.inf


# --------------------------------------------------------------------------- calibration items
def reordered(cal):
    return cal.sample(frac=1.0, random_state=1)


def some_mixed_in(cal, held):
    """Fresh rows with five calibration rows in the middle."""
    return pd.concat([held.iloc[:100], cal.iloc[10:15], held.iloc[100:]])


def ids_as_text(cal):
    return cal.head(50).assign(item_id=cal["item_id"].head(50).astype(str))


def ids_as_floats(cal, held):
    """A held-out table with one calibration item, its id read as a float (a CSV column with a gap)."""
    df = pd.concat([held.iloc[:20], cal.iloc[[3]], held.iloc[20:]]).astype({"item_id": float})
    return df.assign(item_id=df["item_id"].where(np.arange(len(df)) != 5))  # one id missing


@pytest.mark.parametrize(
    "name, make, suffix, shared",
    [
        ("a CSV copy", lambda cal, held: cal, ".csv", 358),
        ("a Parquet copy", lambda cal, held: cal, ".parquet", 358),
        ("reordered", lambda cal, held: reordered(cal), ".csv", 358),
        ("a subset among fresh rows", some_mixed_in, ".csv", 5),
        ("ids as text, Parquet", lambda cal, held: ids_as_text(cal), ".parquet", 50),
        ("ids as floats with a gap", ids_as_floats, ".csv", 1),
    ],
)
def test_calibration_items_are_refused_in_any_format_order_or_subset(real, capsys, name, make, suffix, shared):
    cert, cal, held, d = real
    df = make(cal, held)
    path = write(df, d / f"overlap{suffix}")
    rc, _, err = run(capsys, cert, "--data", path)
    line = one_error(err)
    assert rc == 1 and f"{shared} of {len(df)} item(s) are calibration items of the certificate" in line, line
    # named: the first calibration item in the data's order, as the data spell its id
    ids = (pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path))["item_id"].tolist()
    first = next(v for v in ids if v == v and int(float(v)) in set(cal["item_id"]))
    assert f"(first id {first!r})" in line, line


def test_the_python_audit_needs_the_ids_a_certificate_records(real):
    cert, _, held, _ = real
    cert = Certificate.read(cert)
    args = (cert, held[SCORE], held["loss"], held["group"])
    with pytest.raises(ParameterError, match="ids: the certificate records its calibration items' ids"):
        audit(*args)
    with pytest.raises(DataError, match=f"ids: need one per item, got 10 for {len(held)} items"):
        audit(*args, ids=held["item_id"][:10])
    assert audit(*args, ids=held["item_id"]).attrs["K"] == 6


def test_the_calibration_table_under_other_ids_is_refused(real, tmp_path, capsys):
    cert, cal, _, _ = real
    path = write(cal.assign(item_id=cal["item_id"] + 10_000), tmp_path / "renamed.csv")
    rc, _, err = run(capsys, cert, "--data", path)
    assert rc == 1 and "its score and loss columns are the calibration table's" in one_error(err)


def test_the_certificate_records_the_calibration_ids_as_sorted_digests(real, tmp_path, monkeypatch):
    """Any order and format of one table give one record, byte for byte; the ids are not written."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    cert, cal, _, d = real
    records = []
    for i, df in enumerate([cal, reordered(cal), cal]):
        path = write(df, tmp_path / f"c{i}{'.parquet' if i == 2 else '.csv'}")
        records.append(json.loads(calibrate(path, tmp_path / f"c{i}.json").read_text())["provenance"]["item_ids"])
    assert records[0] == records[1] == records[2]
    rec = records[0]
    digests = sorted(set(id_digests(cal["item_id"])))
    assert rec == {"digest": "sha256-48", "n": len(cal), "values": "".join(digests)}
    assert Certificate.read(cert).calibration_ids == frozenset(digests)
    assert id_digests([7]) == id_digests(["7"]) == id_digests([7.0]) != id_digests([7.5])


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda r: r.update(digest="sha1"), "digest 'sha256-48'"),
        (lambda r: r.update(n=r["n"] + 1), "n="),
        (lambda r: r.update(values=r["values"][12:] + r["values"][:12]), "sorted"),
        (lambda r: r.update(values=r["values"].upper()), "lowercase hex"),
    ],
)
def test_an_edited_id_record_is_refused_on_reading(real, tmp_path, capsys, edit, needle):
    cert, _, _, d = real
    doc = json.loads(cert.read_text())
    edit(doc["provenance"]["item_ids"])
    (tmp_path / "t.json").write_text(json.dumps(doc))
    rc, _, err = run(capsys, tmp_path / "t.json", "--data", d / "heldout.csv")
    assert rc == 1 and "provenance.item_ids" in one_error(err) and needle in err[0]


def test_a_certificate_without_ids_refuses_a_copy_and_warns_it_cannot_check_overlap(real, tmp_path, capsys):
    cert, cal, held, d = real
    doc = json.loads(cert.read_text())
    del doc["provenance"]["item_ids"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    rc, _, err = run(capsys, old, "--data", d / "calibration.csv")
    assert rc == 1 and "its id column is the calibration table's" in one_error(err)
    no_ids = write(cal.drop(columns="item_id"), tmp_path / "no_ids.parquet")
    rc, _, err = run(capsys, old, "--data", no_ids)
    assert rc == 1 and "its score and loss columns are the calibration table's" in one_error(err)
    rc, _, err = run(capsys, old, "--data", d / "heldout.csv", "--binary")
    assert rc == EXIT_TOO_SMALL and len(err) == 1 and "overlap of the audit items" in err[0]
    assert err[0].startswith("warning: the certificate records no calibration item ids")
    # what such a certificate cannot see: the calibration rows in another order pass the overlap check
    rc, _, err = run(capsys, old, "--data", write(reordered(cal), tmp_path / "r.csv"))
    assert rc != 1 and "cannot be checked" in err[0]


def test_audit_items_need_ids_when_the_certificate_records_them(real, tmp_path, capsys):
    cert, _, held, d = real
    path = write(held.drop(columns="item_id"), tmp_path / "anonymous.csv")
    rc, _, err = run(capsys, cert, "--data", path)
    assert rc == 1 and "no id column 'item_id' (the certificate's) to check" in one_error(err)
    rc, _, err = run(capsys, cert, "--data", d / "heldout.csv", "--id-col", "qid")
    assert rc == 1 and "no id column 'qid'" in one_error(err)


# --------------------------------------------------------------------------- score model
TABLE = DATA / "generated" / "arith__smollm2.parquet"


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A router fitted on half of the arithmetic table (the toy embedder), a certificate calibrated with it on a
    half of the other rows, and the last quarter to audit."""
    with EMBEDDERS.registered(Embedding(TOY, ToyEmbedder, "word and digit counts (tests)")):
        d = tmp_path_factory.mktemp("score_model")
        model, rest = d / "router.json", d / "rest.parquet"
        args = [
            "fit-router",
            "--data",
            TABLE,
            "--benchmark",
            "arith",
            "--group-col",
            "group",
            "--embedder",
            TOY,
            "--overwrite-score-col",
        ]
        assert main([*map(str, args), "--scored", str(rest), "-o", str(model)]) == 0
        df = pd.read_parquet(rest)
        first = df.groupby("group").cumcount() % 2 == 0
        write(df[first], d / "cal.parquet")
        write(df[~first], d / "held.parquet")
        opts = ["--score-col", "score_router", "--group-col", "group", "--method", "gpac", "--eps", "0.1"]
        argv = ["calibrate", "--data", str(d / "cal.parquet"), *opts, "--score-model", str(model)]
        assert main([*argv, "-o", str(d / "cert.json")]) == 0
        yield d


def test_the_audit_routes_on_the_score_models_scores_not_the_column(scored, capsys):
    d = scored
    cert, held = d / "cert.json", pd.read_parquet(d / "held.parquet")
    rc, out, err = run(capsys, cert, "--data", d / "held.parquet", "--binary", "-o", d / "a.csv")
    assert not err and (pd.read_csv(d / "a.csv")["routed"] > 0).any()
    noise = held.assign(score_router=np.random.default_rng(0).uniform(size=len(held)))
    again, out2, err = run(capsys, cert, "--data", write(noise, d / "noise.parquet"), "--binary", "-o", d / "n.csv")
    assert again == rc and out2.replace("noise.parquet", "held.parquet") == out
    assert (
        len(err) == 1 and "column 'score_router' differs from the score model's scores by more than 1e-05 in" in err[0]
    )
    pd.testing.assert_frame_equal(pd.read_csv(d / "a.csv"), pd.read_csv(d / "n.csv"))
    # no score column at all: the model's scores are all the audit needs
    bare = write(held.drop(columns="score_router"), d / "bare.parquet")
    assert run(capsys, cert, "--data", bare, "--binary")[:2] == (rc, out.replace("held.parquet", "bare.parquet"))


def test_the_score_models_file_and_text_are_checked(scored, tmp_path, capsys):
    d = scored
    cert = d / "cert.json"
    doc = json.loads((d / "router.json").read_text())
    doc["intercept"] += 1.0
    (tmp_path / "router.json").write_text(json.dumps(doc))
    rc, _, err = run(capsys, cert, "--data", d / "held.parquet", "--score-model", tmp_path / "router.json")
    assert rc == 1 and "differs from the certificate's" in one_error(err)
    moved = json.loads(cert.read_text())
    moved["provenance"]["score_model"]["path"] = str(tmp_path / "gone.json")
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    rc, _, err = run(capsys, tmp_path / "moved.json", "--data", d / "held.parquet")
    assert rc == 1 and "cannot read the router model" in one_error(err)
    no_text = write(pd.read_parquet(d / "held.parquet").drop(columns="question"), tmp_path / "no_text.parquet")
    rc, _, err = run(capsys, cert, "--data", no_text)
    assert rc == 1 and "reads the 'question' column" in one_error(err)


def test_score_model_option_needs_a_certificate_that_records_one(real, capsys):
    cert, _, _, d = real
    rc, _, err = run(capsys, cert, "--data", d / "heldout.csv", "--score-model", d / "router.json")
    assert rc == 2 and "records no score model" in one_error(err)
