"""``gpac verify`` checks everything the certificate says (issue 49): the 17 edits it used to accept are
refused, what no data can tell is checked against ``--expect``, a recorded score model's scores are
recomputed (here and in ``gpac calibrate --score-model``), verify and ``inspect --data`` share one rule
for "the same table" (a Parquet copy passes both), one committed certificate of each schema version is
read (and verified where it has provenance), ``gpac --help`` names every command and ``fit-router``
refuses to replace a column unless told.

The committed certificates (``tests/fixtures/certificates/v1.json`` ... ``v5.json``) were written by the
code of each version (v1: b864958, v2: cc44041, v3: 7b9f516, v4: a01eae9, v5: this one) with
``SOURCE_DATE_EPOCH=1767225600`` from ``tests/`` paths, G-PAC at eps 0.1 on ``table.csv``, the
router-scored half of a synthetic table; v4 and v5 record the score model ``router.json``, which reads
the toy embedder registered here.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from gpac_utils.certificate import Certificate, file_sha256
from gpac_utils.cli import _parser, main
from gpac_utils.llm.router_model import EMBEDDERS, Embedding
from gpac_utils.thresholds_schema import SCHEMA_VERSION
from gpac_utils.workflow.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "certificates"
TABLE = FIXTURES / "table.csv"
MODEL = FIXTURES / "router.json"


class ToyFixture:
    """The embedder the committed router reads: counts of ``hard`` and ``easy``, the length mod 7."""

    model_name = "toy-fixture"

    def encode(self, texts):
        return np.asarray([[t.count("hard"), t.count("easy"), len(t) % 7] for t in texts], dtype=float)


@pytest.fixture(scope="module", autouse=True)
def toy_embedder():
    with EMBEDDERS.registered(Embedding("toy-fixture", ToyFixture, "word counts (tests)")):
        yield


def run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.fixture
def work(tmp_path):
    """The fixture table, model and v5 certificate, copied (so edits and the table's path are the test's)."""
    for name in ("table.csv", "router.json"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def calibrate(capsys, table, out, *extra, score="score_router", model=True):
    args = ["calibrate", "--data", table, "--score-col", score, "--group-col", "group", "--method", "gpac"]
    args += ["--eps", "0.1", *extra, "-o", out] + (["--score-model", table.parent / "router.json"] if model else [])
    rc, _, err = run(capsys, *args)
    assert rc == 0, err
    return out


# --------------------------------------------------------------------------- schema versions
@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_each_schema_versions_certificate_is_read_and_verified(version, capsys):
    path = FIXTURES / f"v{version}.json"
    cert = Certificate.read(path)
    assert cert.version == version and cert.document["schema_version"] == SCHEMA_VERSION
    assert cert.thresholds == Certificate.read(FIXTURES / "v5.json").thresholds  # one calibration, five writers
    rc, out, _ = run(capsys, "inspect", path)
    assert rc == 0 and f"schema version {version}" in out
    rc, out, err = run(capsys, "verify", path, "--data", TABLE, "--expect", "eps=0.1", "method=gpac")
    if version < 3:
        assert rc == 1 and f"no provenance to recompute from (a version-{version} file)" in one_error(err)
        return
    assert rc == 0, err
    assert "bit-identical" in out and "checked against --expect: method='G-PAC', eps=0.1" in out
    model = "its scores of 'question' equal column 'score_router' within 1e-05 in all 300 rows (recomputed)"
    assert (model in out) == (version >= 4)
    if version == 3:
        assert "(its overrides not recorded before schema version 5)" in Certificate.read(path).render()


def write_v5(out) -> int:
    """``v5.json`` as this version's ``gpac calibrate`` writes it (``python tests/test_verify.py`` rewrites
    the committed one, e.g. after a field is added to what calibrate records)."""
    import os

    here, epoch = os.getcwd(), os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "1767225600"
    os.chdir(REPO_ROOT)  # the paths recorded are the repository's
    try:
        args = ["calibrate", "--data", TABLE.relative_to(REPO_ROOT), "--score-col", "score_router"]
        args += ["--group-col", "group", "--method", "gpac", "--eps", "0.1"]
        return main([*map(str, args), "--score-model", str(MODEL.relative_to(REPO_ROOT)), "-o", str(out)])
    finally:
        os.chdir(here)
        if epoch is None:
            os.environ.pop("SOURCE_DATE_EPOCH")
        else:
            os.environ["SOURCE_DATE_EPOCH"] = epoch


def test_the_fixtures_are_what_this_version_writes(tmp_path):
    """v5.json is what gpac calibrate writes today from the same table and model (its package version aside)."""
    out = tmp_path / "v5.json"
    assert write_v5(out) == 0
    doc, committed = json.loads(out.read_text()), json.loads((FIXTURES / "v5.json").read_text())
    doc["provenance"]["package_version"] = committed["provenance"]["package_version"]  # descriptive
    assert doc == committed, "rewrite it: python tests/test_verify.py"


#: The refusals docs/deploying.md quotes (section 6), each asserted by a test below.
PAGE_REFUSALS = (
    "settings.eps is 0.100011; --expect eps=0.1",
    "groups.alg.n is 151; recomputed 150",
    "provenance.recipe 'valid' with provenance.recipe_overrides {} does not give the settings' recipe",
    "the settings override recipe 'paper' with {'bound': 'hoeffding_bentkus'}; --expect recipe=paper",
    "score is 'score_router', served by a fitted model, but provenance.score_model records none",
)


def test_the_deploying_page_quotes_verifys_refusals():
    page = " ".join((REPO_ROOT / "docs" / "deploying.md").read_text().split())
    for message in PAGE_REFUSALS:
        assert f"`{message}`" in page, message
    assert HOLES["groups.alg.n"][2] == PAGE_REFUSALS[1]


def test_the_pages_ci_gate_passes_the_shipped_certificate_and_refuses_a_clt_one(work, capsys):
    """docs/deploying.md section 7's gate, run as written on a certificate with a recorded model; a
    --recipe valid --bound clt certificate (inspect: NOT valid) fails it (review W3)."""
    page = (REPO_ROOT / "docs" / "deploying.md").read_text()
    [gate] = re.findall(r"gpac verify certificates/thresholds\.json (.*?)\n\s*gpac audit", page, flags=re.S)
    words = gate.replace("\\\n", " ").split()
    expect = words[words.index("--expect") + 1 :]
    assert words[words.index("--score-model") + 1] == "router.json"
    cert = calibrate(capsys, work / "table.csv", work / "c.json")
    rc, out, err = run(
        capsys, "verify", cert, "--data", work / "table.csv", "--score-model", work / "router.json", "--expect", *expect
    )
    assert rc == 0, err
    assert "taken on trust" not in out  # every stated field of a G-PAC certificate is stated
    clt = calibrate(capsys, work / "table.csv", work / "clt.json", "--bound", "clt")
    rc, _, err = run(capsys, "verify", clt, "--data", work / "table.csv", "--expect", *expect)
    assert rc == 1 and "--expect recipe=valid" in one_error(err)


def test_the_seed_moves_valid_bernoulli_thresholds_not_valid_ones(work, capsys):
    """Section 7: with the valid recipe the seed changes nothing for G-PAC; with valid-bernoulli it does."""

    def thresholds(recipe, seed):
        out = calibrate(
            capsys, work / "table.csv", work / f"{recipe}{seed}.json", "--recipe", recipe, "--seed", str(seed)
        )
        return json.loads(out.read_text())["thresholds"]

    assert thresholds("valid", 7) == thresholds("valid", 8) == thresholds("valid", 9)
    bern = [thresholds("valid-bernoulli", s) for s in (7, 8, 9)]
    assert bern[0] != bern[1] or bern[1] != bern[2]


# --------------------------------------------------------------------------- the 17 holes
def _set(doc, path, value):
    at = doc
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value


HOLES = {  # issue 49's 17 edits verify accepted: field -> (path, new value, what the refusal names)
    "columns.score": (("columns", "score"), "score_other", "columns.score"),
    "columns.loss": (("columns", "loss"), "loss_other", "columns.loss"),
    "columns.group": (("columns", "group"), "subject", "columns.group"),
    "columns.id": (("columns", "id"), "qid", "columns.id"),
    "groups.alg.n": (("groups", "alg", "n"), 151, "groups.alg.n is 151; recomputed 150"),
    "groups.geo.n": (("groups", "geo", "n"), 149, "groups.geo.n"),
    "n_items": (("n_items",), 301, "n_items"),
    "dtype score": (("provenance", "columns", "score", "dtype"), "object", "provenance.columns.score.dtype"),
    "dtype loss": (("provenance", "columns", "loss", "dtype"), "object", "provenance.columns.loss.dtype"),
    "dtype group": (("provenance", "columns", "group", "dtype"), "float64", "provenance.columns.group.dtype"),
    "dtype id": (("provenance", "columns", "id", "dtype"), "int64", "provenance.columns.id.dtype"),
    "table sha256": (("provenance", "table", "sha256"), "0" * 64, "provenance.table.sha256"),
    "provenance.seed": (("provenance", "seed"), 7, "provenance.seed"),
    "bound kind": (("settings", "bound_kind"), "paper", "settings.bound_kind"),
}


@pytest.mark.parametrize("hole", list(HOLES))
def test_an_edit_verify_used_to_accept_is_refused(hole, work, capsys):
    path, value, named = HOLES[hole]
    cert = calibrate(capsys, work / "table.csv", work / "c.json")
    doc = json.loads(cert.read_text())
    _set(doc, path, value)
    cert.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "verify", cert, "--data", work / "table.csv")
    assert rc == 1 and named in one_error(err), err


def test_the_recipe_name_is_checked_against_the_settings(work, capsys):
    """paper -> valid: `inspect` would print "recipe valid" for a clt, resampling, max certificate."""
    cert = calibrate(capsys, work / "table.csv", work / "p.json", "--recipe", "paper")
    assert run(capsys, "verify", cert, "--data", work / "table.csv")[0] == 0
    doc = json.loads(cert.read_text())
    doc["provenance"]["recipe"] = "valid"
    cert.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "verify", cert, "--data", work / "table.csv")
    assert rc == 1 and PAGE_REFUSALS[2] in one_error(err)
    assert "NOT valid" in Certificate.read(cert).render()
    # an override is recorded, and the name then checks: paper with bound hoeffding_bentkus
    over = calibrate(capsys, work / "table.csv", work / "o.json", "--recipe", "paper", "--bound", "hoeffding_bentkus")
    assert json.loads(over.read_text())["provenance"]["recipe_overrides"] == {"bound": "hoeffding_bentkus"}
    assert run(capsys, "verify", over, "--data", work / "table.csv", "--expect", "bound=hoeffding_bentkus")[0] == 0
    assert "recipe    paper with bound=hoeffding_bentkus" in Certificate.read(over).render()
    # --expect recipe=paper states the recipe exactly: an override is refused (review W3)
    rc, _, err = run(capsys, "verify", over, "--data", work / "table.csv", "--expect", "recipe=paper")
    assert rc == 1 and PAGE_REFUSALS[3] in one_error(err)
    # a valid certificate whose bound was overridden to clt is not "recipe=valid"
    clt = calibrate(capsys, work / "table.csv", work / "clt.json", "--recipe", "valid", "--bound", "clt")
    rc, _, err = run(capsys, "verify", clt, "--data", work / "table.csv", "--expect", "recipe=valid")
    assert rc == 1 and "the settings override recipe 'valid' with {'bound': 'clt'}" in one_error(err)


def test_what_no_data_can_tell_is_checked_against_the_statement(work, capsys):
    """eps 0.1 -> 0.100011 recomputes to the same thresholds: self-consistent; --expect eps=0.1 refuses it.
    The score's registry name null -> score_logits: the serving router would compute another score."""
    table = pd.read_csv(work / "table.csv").rename(columns={"score_router": "u"})
    table.to_csv(work / "u.csv", index=False)
    cert = calibrate(capsys, work / "u.csv", work / "u.json", score="u", model=False)
    doc = json.loads(cert.read_text())
    assert doc["score"] is None
    doc["settings"]["eps"], doc["score"] = 0.100011, "score_logits"
    cert.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "verify", cert, "--data", work / "u.csv")  # the providers' record names no score
    assert rc == 1 and "provenance.providers.score.name is absent; recomputed 'score_logits'" in one_error(err)
    provider = {
        "name": "score_logits",
        **{k: doc["provenance"]["providers"]["method"][k] for k in ("distribution", "version")},
    }
    doc["provenance"]["providers"]["score"] = provider  # an edit that also edits the record
    cert.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "verify", cert, "--data", work / "u.csv")
    assert rc == 0, err  # without a statement: passes, and says what it took on trust
    trusted = next(line for line in out.splitlines() if line.startswith("taken on trust"))
    assert "eps=0.100011" in trusted and "score='score_logits'" in trusted
    assert "checked against --expect: nothing (no --expect)" in out
    rc, _, err = run(capsys, "verify", cert, "--data", work / "u.csv", "--expect", "eps=0.1")
    assert rc == 1 and PAGE_REFUSALS[0] in one_error(err)
    rc, _, err = run(capsys, "verify", cert, "--data", work / "u.csv", "--expect", "eps=0.100011", "score=null")
    assert rc == 1 and "score is 'score_logits'; --expect score=null" in one_error(err)
    every = ["eps=0.100011", "alpha=0.05", "method=G-PAC", "score=score_logits", "seed=0", "risk=joint"]
    rc, out, _ = run(capsys, "verify", cert, "--data", work / "u.csv", "--expect", *every)
    assert rc == 0 and "checked against --expect: method='G-PAC', score='score_logits', eps=0.100011" in out


@pytest.mark.parametrize(
    "statement,status,message",
    [
        (["foo=1"], 2, "--expect foo: not a field to state"),
        (["eps"], 2, "--expect: expects KEY=VALUE, got 'eps'"),
        (["eps=0.1", "eps=0.2"], 2, "--expect eps: stated twice"),
        (["alpha=2"], 2, "--expect alpha: must lie in (0.0, 1.0), got 2"),
        (["method=nope"], 2, "--expect method:"),
        (["k=3"], 1, "a G-PAC certificate has no settings.k"),
        (["correction=bonferroni"], 1, "settings.correction is 'none'; --expect correction='bonferroni'"),
    ],
)
def test_a_bad_statement_is_refused_in_one_line(statement, status, message, capsys):
    rc, _, err = run(capsys, "verify", FIXTURES / "v5.json", "--data", TABLE, "--expect", *statement)
    assert rc == status and message in one_error(err)


# --------------------------------------------------------------------------- the score model
def test_a_tampered_model_is_refused_by_verify_and_inspect(work, capsys):
    cert = calibrate(capsys, work / "table.csv", work / "c.json")
    rc, out, _ = run(capsys, "inspect", cert)
    assert rc == 0
    shown = next(line for line in out.splitlines() if line.startswith("model"))
    assert str(work / "router.json") in shown and file_sha256(work / "router.json") in shown
    assert "embedder toy-fixture" in shown and "text column 'question'" in shown
    model = json.loads((work / "router.json").read_text())
    model["intercept"] += 1.0
    (work / "router.json").write_text(json.dumps(model))
    rc, _, err = run(capsys, "verify", cert, "--data", work / "table.csv")
    assert rc == 1 and "(provenance.score_model.sha256); refused" in one_error(err)
    rc, out, err = run(capsys, "inspect", cert, "--data", work / "table.csv")
    assert rc == 1 and "sha256 DIFFERS (provenance.score_model.sha256)" in out and one_error(err)


def test_a_score_column_that_is_not_the_models_is_refused(work, capsys):
    """calibrate --score-model recomputes the scores before writing; verify recomputes them too."""
    df = pd.read_csv(work / "table.csv")
    noise = df.assign(score_router=np.random.default_rng(0).uniform(size=len(df)))
    noise.to_csv(work / "noise.csv", index=False)
    out = work / "n.json"
    args = ["calibrate", "--data", work / "noise.csv", "--score-col", "score_router", "--group-col", "group"]
    rc, _, err = run(capsys, *args, "--eps", "0.1", "--score-model", work / "router.json", "-o", out)
    assert rc == 1 and "column 'score_router' is not the model's score of 'question': 300 of 300" in one_error(err)
    assert not out.exists()
    # a certificate of the noise column, with the model's record added by hand: verify recomputes and refuses
    cert = calibrate(capsys, work / "noise.csv", out, model=False)
    good = json.loads(calibrate(capsys, work / "table.csv", work / "c.json").read_text())
    doc = json.loads(cert.read_text())
    doc["provenance"]["score_model"] = good["provenance"]["score_model"]
    cert.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "verify", cert, "--data", work / "noise.csv")
    assert rc == 1 and "is not the model's score of 'question'" in one_error(err)


def test_a_score_router_certificate_without_a_model_is_refused(work, capsys):
    """score=score_router with no recorded model: the column (here, as in the tables, not a fitted model's
    score) is served by nothing; and --score-model for a certificate that records none is refused, not
    ignored (review W3)."""
    cert = calibrate(capsys, work / "table.csv", work / "bare.json", model=False)
    assert json.loads(cert.read_text())["score"] == "score_router"
    rc, _, err = run(capsys, "verify", cert, "--data", work / "table.csv", "--expect", "score=score_router")
    assert rc == 1 and PAGE_REFUSALS[4] in one_error(err)
    table = pd.read_csv(work / "table.csv").rename(columns={"score_router": "u"})
    table.to_csv(work / "u.csv", index=False)
    plain = calibrate(capsys, work / "u.csv", work / "u.json", score="u", model=False)
    assert run(capsys, "verify", plain, "--data", work / "u.csv")[0] == 0
    rc, _, err = run(capsys, "verify", plain, "--data", work / "u.csv", "--score-model", work / "router.json")
    assert rc == 2 and "the certificate records no score model (provenance.score_model)" in one_error(err)


# --------------------------------------------------------------------------- the same table
def test_a_parquet_copy_passes_verify_and_inspect_by_one_rule(work, capsys):
    cert = calibrate(capsys, work / "table.csv", work / "c.json")
    copy = work / "copy.parquet"
    pd.read_csv(work / "table.csv").to_parquet(copy)
    rc, out, err = run(capsys, "verify", cert, "--data", copy)
    assert rc == 0, err
    assert "table file copy.parquet: DIFFERS from the recorded bytes (a copy: its columns' values decide)" in out
    rc, out, err = run(capsys, "inspect", cert, "--data", copy)
    assert rc == 0 and "a copy: its columns' values decide" in out and "score model" in out, err
    # the file the certificate names, with a changed column: both refuse
    df = pd.read_csv(work / "table.csv")
    df.loc[0, "loss"] = 1 - df.loc[0, "loss"]
    df.to_csv(work / "table.csv", index=False)
    assert run(capsys, "verify", cert, "--data", work / "table.csv")[0] == 1
    assert run(capsys, "inspect", cert, "--data", work / "table.csv")[0] == 1


def test_a_dtype_within_its_class_is_descriptive(work, capsys):
    """A column's dtype as read: its class (number or text) is checked, the rest shown (a copy may read
    int64 as float64)."""
    cert = calibrate(capsys, work / "table.csv", work / "c.json")
    doc = json.loads(cert.read_text())
    doc["provenance"]["columns"]["loss"]["dtype"] = "float64"
    cert.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "verify", cert, "--data", work / "table.csv")
    assert rc == 0, err
    assert "provenance.columns.loss.dtype=float64 (read now: int64)" in out


# --------------------------------------------------------------------------- item 3
def test_the_help_describes_every_command(capsys):
    ap = _parser()
    commands = next(a for a in ap._actions if a.choices and "verify" in a.choices).choices
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    described = {line.strip() for line in text.splitlines() if line and not line.startswith(" ")}
    assert set(commands) <= described, sorted(set(commands) - described)
    for name in commands:
        with pytest.raises(SystemExit):
            main([name, "--help"])
    assert "--expect KEY=VALUE" in capsys.readouterr().out


def test_fit_router_refuses_to_replace_a_column_unless_told(tmp_path, capsys):
    args = ["fit-router", "--data", TABLE, "--group-col", "group", "--embedder", "toy-fixture"]
    args += ["--scored", tmp_path / "s.csv", "-o", tmp_path / "r.json"]
    rc, _, err = run(capsys, *args)
    assert rc == 1 and "--score-col 'score_router'" in one_error(err) and "--overwrite-score-col" in err
    assert not (tmp_path / "s.csv").exists() and not (tmp_path / "r.json").exists()
    assert run(capsys, *args, "--overwrite-score-col")[0] == 0
    assert run(capsys, *args[:-4], "--score-col", "score_new", *args[-4:])[0] == 0


if __name__ == "__main__":  # rewrite tests/fixtures/certificates/v5.json with this version's calibrate
    with EMBEDDERS.registered(Embedding("toy-fixture", ToyFixture, "word counts (tests)")):
        raise SystemExit(write_v5(FIXTURES / "v5.json"))
