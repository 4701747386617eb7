"""Issue 37, item 5: ordinary mistakes at every public entry end in one line naming what is wrong.

The cases the issue-32 tables (``test_validation.py``, ``test_cli_errors.py``) did not cover: each is
refused (a :class:`ParameterError` or, for a file, :class:`SchemaError` / exit 1) or warned about,
never silently accepted, and a command-line usage error exits 2 with one ``error:`` line.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import repo_scripts

from gpac_utils import CPAC, GPAC, PAC, Partition, ScorePartitioner, Settings, cli, summarize, validate, write_table
from gpac_utils.audit import audit
from gpac_utils.calibrate import calibrator, risk_curve, threshold
from gpac_utils.certificate import Certificate
from gpac_utils.checks import NotFittedError, ParameterError, SettingWarning
from gpac_utils.data import SchemaError
from gpac_utils.recipe import VALID
from gpac_utils.workflow import runner

REPO_ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
N = 300
U = RNG.uniform(size=N)
G = RNG.choice(["a", "b"], N)
LOSS = (RNG.uniform(size=N) < 0.3 * U).astype(float)
BINARY = VALID.replace(bound="clopper_pearson")  # a bound whose terms are 0/1 (binary_terms)
TABLE = pd.DataFrame({"item_id": np.arange(N), "group": G, "loss": LOSS, "score_logits": U})
FRESH_LOSS = (np.random.default_rng(1).uniform(size=N) < 0.3 * U).astype(float)  # audit data: other draws


def _twice_named() -> pd.DataFrame:
    df = TABLE.copy()
    df.columns = ["item_id", "group", "loss", "loss"]
    return df


def refused(call, name: str, error=ParameterError) -> str:
    with pytest.raises(error) as err:
        call()
    msg = str(err.value)
    assert name in msg.split(":")[0] or msg.startswith(name), msg
    assert "\n" not in msg
    return msg


API_MISTAKES = [
    # a non-binary loss under a bound that needs 0/1 losses (the CLI refused it; the API ran on)
    ("GPAC: 0.5 losses, binary bound", lambda: GPAC(0.1, recipe=BINARY).fit(U, LOSS * 0.5, G), "losses", "0 or 1"),
    ("PAC: 0.5 losses, binary bound", lambda: PAC(0.1, recipe=BINARY).fit(U, LOSS * 0.5), "losses", "0 or 1"),
    ("CPAC: 0.5 losses, binary bound", lambda: CPAC(0.1, recipe=BINARY).fit(U, LOSS * 0.5), "losses", "0 or 1"),
    (
        "threshold: 0.5 losses, binary bound",
        lambda: threshold(U, LOSS * 0.5, eps=0.1, alpha=0.05, recipe=BINARY),
        "losses",
        "0 or 1",
    ),
    ("risk_curve: 0.5 losses", lambda: risk_curve(U, LOSS * 0.5, eps=0.1, alpha=0.05, recipe=BINARY), "losses", ""),
    # calling route before fit: a ParameterError naming the router
    ("G-PAC route before fit", lambda: GPAC(0.1).route(U, G), "G-PAC", "fit("),
    ("PAC route before fit", lambda: PAC(0.1).route(U), "PAC", "fit("),
    ("C-PAC route before fit", lambda: CPAC(0.1).route(U), "C-PAC", "fit("),
    ("G-PAC to_json before fit", lambda: GPAC(0.1).to_json(), "G-PAC", "not fitted"),
    # Settings fields of the wrong type
    ("Settings: min_group_size=True", lambda: Settings(eps=0.1, min_group_size=True), "min_group_size", "True"),
    ("Settings: seed=False", lambda: Settings(eps=0.1, seed=False), "seed", "False"),
    # misspelt registry names and bad recipe fields: ParameterError, not a bare ValueError
    ("Recipe: sampling misspelt", lambda: VALID.replace(sampling="bernouli"), "sampling", "bernoulli"),
    ("Recipe: rule misspelt", lambda: VALID.replace(rule="firstcrossing"), "rule", "first-crossing"),
    ("Recipe: candidates=-1", lambda: VALID.replace(candidates=-1), "candidates", "-1"),
    ("Recipe: full with label_prob", lambda: VALID.replace(label_prob=0.5), "label_prob", "full"),
    ("calibrator: method misspelt", lambda: calibrator("gpca", 0.1), "method", "G-PAC"),
    ("ScorePartitioner: k=0", lambda: ScorePartitioner(0), "k", "0"),
    ("ScorePartitioner: algorithm misspelt", lambda: ScorePartitioner(3, "kmean"), "partition", "kmeans"),
    # a partition built by hand is checked as one read from a file is
    ("Partition: boundaries descending", lambda: Partition([0.7, 0.2]), "boundaries", "ascending"),
    ("Partition: boundary above 1", lambda: Partition([1.7]), "boundaries", "1.7"),
    ("Partition: algorithm misspelt", lambda: Partition([0.5], "kmean"), "algorithm", "kmean"),
    # summarize of something that is not run_experiment's rows
    ("summarize: empty frame", lambda: summarize(pd.DataFrame(), 0.1), "results", "run_experiment"),
    ("summarize: other columns", lambda: summarize(pd.DataFrame({"a": [1]}), 0.1), "results", "missing"),
]


@pytest.mark.parametrize("what, call, name, needle", API_MISTAKES, ids=[m[0] for m in API_MISTAKES])
def test_api_mistakes_are_refused_naming_the_argument(what, call, name, needle):
    assert needle in refused(call, name)


def test_not_fitted_is_still_a_runtime_error():
    with pytest.raises(RuntimeError):
        GPAC(0.1).route(U, G)
    assert issubclass(NotFittedError, ParameterError)


def test_binary_losses_pass_a_binary_bound():
    # 0/1 losses (and booleans, a loss flag) are what such a bound is for: nothing refused
    GPAC(0.1, recipe=BINARY).fit(U, LOSS, G)
    GPAC(0.1, recipe=BINARY).fit(U, LOSS.astype(bool), G)


def test_an_audit_level_that_looks_like_a_confidence_warns():
    cert = Certificate.from_calibrator(GPAC(0.1).fit(U, LOSS, G))
    with pytest.warns(SettingWarning, match="level=0.95"):
        audit(cert, U, LOSS, G, level=0.95)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        audit(cert, U, LOSS, G, level=0.05)


TABLE_MISTAKES = [
    ("boolean score column", lambda: validate(TABLE.assign(score_logits=TABLE.score_logits > 0.5)), "booleans"),
    ("a column named twice", lambda: validate(_twice_named()), "more than once"),
    ("write_table: not a frame", lambda: write_table([1, 2], "x.csv"), "DataFrame"),
]


@pytest.mark.parametrize("what, call, needle", TABLE_MISTAKES, ids=[m[0] for m in TABLE_MISTAKES])
def test_table_mistakes_are_refused_naming_the_column(what, call, needle):
    with pytest.raises(SchemaError, match=needle):
        call()


# ------------------------------------------------------------------ the command line
@pytest.fixture
def files(tmp_path):
    TABLE.to_csv(tmp_path / "t.csv", index=False)
    for name, df in {
        "strscore": TABLE.assign(score_logits=TABLE.score_logits.astype(str) + "x"),
        "nanscore": TABLE.assign(score_logits=np.r_[np.nan, U[1:]]),
        "boolscore": TABLE.assign(score_logits=TABLE.score_logits > 0.5),
        "dupid": TABLE.assign(item_id=0),
        "fresh": TABLE.assign(item_id=TABLE.item_id + N, loss=FRESH_LOSS),  # other items: an audit's data
    }.items():
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    cert = tmp_path / "cert.json"
    argv = ["calibrate", "--data", str(tmp_path / "t.csv"), "--score-col", "score_logits", "--group-col", "group"]
    assert cli.main([*argv, "--eps", "0.1", "-o", str(cert)]) == 0
    return tmp_path


def one_line(capsys, prefix="error:") -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [e for e in err if e.startswith(prefix)]
    assert len(lines) == 1 and not any("Traceback" in e for e in err), err
    return lines[0]


@pytest.mark.parametrize(
    "table, needle",
    [("strscore", "is not numeric"), ("nanscore", "NaN"), ("boolscore", "booleans")],
)
def test_route_names_what_is_wrong_with_the_scores(files, capsys, table, needle):
    argv = ["route", "--thresholds", str(files / "cert.json"), "--data", str(files / f"{table}.csv")]
    assert cli.main([*argv, "-o", str(files / "r.csv")]) == 1
    assert needle in one_line(capsys)


def test_calibrate_refuses_a_boolean_score_column(files, capsys):
    argv = ["calibrate", "--data", str(files / "boolscore.csv"), "--score-col", "score_logits"]
    assert cli.main([*argv, "--group-col", "group", "--eps", "0.1", "-o", str(files / "x.json")]) == 1
    assert "booleans" in one_line(capsys)


def test_audit_cli_warns_on_a_level_like_a_confidence(files, capsys):
    argv = ["audit", str(files / "cert.json"), "--data", str(files / "fresh.csv"), "--level", "0.9"]
    argv += ["--detectable", "0.3"]  # large enough groups: the gate passes, the warning is the only line
    assert cli.main(argv) == 0
    assert "level=0.9" in one_line(capsys, "warning:")


def test_route_warns_on_duplicate_ids(files, capsys):
    argv = ["route", "--thresholds", str(files / "cert.json"), "--data", str(files / "dupid.csv")]
    assert cli.main([*argv, "-o", str(files / "r.csv")]) == 0
    assert "duplicate ids" in one_line(capsys, "warning:")


def test_plan_default_budget_blames_the_pilot_not_budget(files, capsys):
    # every row labelled: no rows outside the pilot; the user gave no --budget, so it must not be blamed
    argv = ["plan", "--data", str(files / "t.csv"), "--score-col", "score_logits", "--group-col", "group"]
    assert cli.main([*argv, "--eps", "0.1", "-o", str(files / "plan.csv")]) == 1
    line = one_line(capsys)
    assert "pilot" in line and "--budget" not in line


def _script(name: str):
    return repo_scripts.load(f"workflow/scripts/{name}.py").main


@pytest.mark.parametrize(
    "main, argv",
    [
        (lambda argv: _script("homework")(argv), ["--out"]),
        (lambda argv: _script("homework")(argv), ["grade", ".", "--out"]),
        (lambda argv: _script("answer_key")(argv), ["--out"]),
        (lambda argv: runner.main(argv), ["00_quickstart", "--build-dir"]),
    ],
    ids=["homework", "homework grade", "answer_key", "runner"],
)
def test_an_output_folder_that_is_a_file_is_a_usage_error(tmp_path, capsys, main, argv):
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*argv, str(blocked)]) == 2
    assert "must be a folder" in one_line(capsys)


def test_fit_router_checks_the_embedder_name_before_the_data(tmp_path, capsys):
    argv = ["fit-router", "--data", str(tmp_path / "absent.csv"), "--scored", str(tmp_path / "s.csv")]
    assert cli.main([*argv, "-o", str(tmp_path / "rm.json"), "--embedder", "nope"]) == 2
    assert "--embedder" in one_line(capsys)


def test_fit_router_names_a_loss_that_is_not_a_number(tmp_path, capsys):
    TABLE.assign(question="q", loss="x").to_csv(tmp_path / "q.csv", index=False)
    argv = ["fit-router", "--data", str(tmp_path / "q.csv"), "--scored", str(tmp_path / "s.csv")]
    assert cli.main([*argv, "-o", str(tmp_path / "rm.json")]) == 1
    assert "--loss-col 'loss'" in one_line(capsys)
