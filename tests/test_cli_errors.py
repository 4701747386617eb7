"""Every bad input to the command line ends in a one-line error with the right exit status.

Exit 2: a usage error (bad option or parameter value). Exit 1: a data error (file, column, row).
No traceback, nothing silently dropped, warnings as ``warning:`` lines with counts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from gpac_utils import cli


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    g = rng.choice(["x", "y"], n)
    u = rng.random(n)
    loss = (rng.random(n) < np.where(g == "x", 0.1, 0.5) * u).astype(int)
    p = tmp_path / "cal.csv"
    pd.DataFrame({"item_id": np.arange(n), "group": g, "loss": loss, "u": u}).to_csv(p, index=False)
    return p


def calibrate(table, tmp_path, *extra, capsys=None):
    """``gpac calibrate`` on ``table`` at eps 0.1 with ``extra`` (an ``--eps`` there replaces the 0.1: an option
    given twice is refused)."""
    out = tmp_path / "thr.json"
    base = {"--data": str(table), "--score-col": "u", "--eps": "0.1", "-o": str(out)}
    argv = ["calibrate", *(x for k, v in base.items() if k not in extra for x in (k, v)), *extra]
    return cli.main(argv), out


@pytest.mark.parametrize("repeated", [["--id-col", "item_id", "--id-col", "u"], ["--eps", "0.1", "--eps", "0.2"]])
def test_an_option_given_twice_is_refused_not_its_last_value_kept(table, tmp_path, capsys, repeated):
    with pytest.raises(SystemExit) as exc:
        calibrate(table, tmp_path, *repeated)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {repeated[0]}: given twice (" in err and "; it takes one value" in err, err
    assert "docs/overlapping-groups.md" not in err  # --group-col repeats: several groupings (test_multigroup_cli.py)
    assert not (tmp_path / "thr.json").exists()


def one_line_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    errors = [e for e in err if e.startswith("error:")]
    assert len(errors) == 1, err
    assert not any("Traceback" in e for e in err)
    return errors[0]


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--eps", "0"], "eps"),
        (["--eps", "-0.1"], "eps"),
        (["--eps", "nan"], "eps"),
        (["--eps", "1.5"], "eps"),
        (["--alpha", "0"], "alpha"),
        (["--alpha", "1"], "alpha"),
        (["--sampling", "full", "--label-prob", "1.2"], "label-prob"),
        (["--sampling", "bernoulli", "--label-prob", "0"], "label-prob"),
        (["--sampling", "bernoulli", "--label-prob", "1.2"], "label-prob"),
        (["--min-group-size", "-5"], "min-group-size"),
        (["--method", "cpac", "--k", "0"], "k"),
        (["--candidates", "foo"], "candidates"),
        (["--candidates", "0"], "candidates"),
        (["--method", "gpac"], "--group-col"),
        (["--map", "broken"], "--map"),
    ],
)
def test_bad_parameters_exit_2(table, tmp_path, capsys, extra, needle):
    code, out = calibrate(table, tmp_path, *extra)
    assert code == 2
    assert needle in one_line_error(capsys)
    assert not out.exists()


def test_bad_files_exit_1(table, tmp_path, capsys):
    code, _ = calibrate(tmp_path / "nope.csv", tmp_path)
    assert code == 1 and "no such file" in one_line_error(capsys)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, _ = calibrate(empty, tmp_path)
    assert code == 1 and "empty" in one_line_error(capsys)
    code, _ = calibrate(table, tmp_path, "--map", "nosuch=x")
    assert code == 1 and "nosuch" in one_line_error(capsys)
    code, _ = calibrate(table, tmp_path, "--score-col", "group")
    assert code == 1 and "'group'" in one_line_error(capsys)


def test_tsv_is_read_as_tsv_and_output_follows_suffix(table, tmp_path, capsys):
    tsv = tmp_path / "cal.tsv"
    pd.read_csv(table).to_csv(tsv, sep="\t", index=False)
    code, thr = calibrate(tsv, tmp_path, "--method", "gpac", "--group-col", "group")
    assert code == 0, capsys.readouterr().err
    out = tmp_path / "routed.parquet"
    assert cli.main(["route", "--thresholds", str(thr), "--data", str(tsv), "-o", str(out)]) == 0
    routed = pd.read_parquet(out)  # really parquet
    assert len(routed) == 400 and routed["route_nothink"].dtype == bool


def test_clopper_pearson_refusal_names_the_loss_bound(table, tmp_path, capsys):
    code, _ = calibrate(table, tmp_path, "--bound", "clopper_pearson", "--loss-bound", "2")
    assert code == 1
    msg = one_line_error(capsys)
    assert "loss bound" in msg and "sampling" not in msg
    frac = pd.read_csv(table).assign(loss=0.5)
    frac.to_csv(tmp_path / "frac.csv", index=False)
    code, _ = calibrate(tmp_path / "frac.csv", tmp_path, "--bound", "clopper_pearson")
    assert code == 1 and "0 or 1.0" in one_line_error(capsys)


def test_default_recipe_is_valid_and_uses_every_label(table, tmp_path, capsys):
    code, thr = calibrate(table, tmp_path)
    assert code == 0
    st = json.loads(thr.read_text())["settings"]
    assert st["sampling"] == "full" and st["bound"] == "hoeffding_bentkus" and st["rule"] == "first-crossing"
    first = json.loads(thr.read_text())["thresholds"]
    code, thr = calibrate(table, tmp_path, "--seed", "7")
    assert json.loads(thr.read_text())["thresholds"] == first  # no label is thrown away at random


def test_small_groups_warn_once_with_a_count(tmp_path, capsys):
    n = 300
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"item_id": range(n), "group": [f"g{i}" for i in range(n)], "loss": 0, "u": rng.random(n)})
    df.loc[:99, "group"] = "big"
    df.to_csv(tmp_path / "t.csv", index=False)
    code, _ = calibrate(tmp_path / "t.csv", tmp_path, "--method", "gpac", "--group-col", "group")
    assert code == 0
    captured = capsys.readouterr()
    warns = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warns) == 1 and "200 group(s)" in warns[0]
    assert "always think" in captured.out  # null thresholds are explained, not printed as None


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda p: p["thresholds"].update(x="high"), "thresholds['x']"),
        (lambda p: p["thresholds"].update(x=7), "thresholds['x']"),
        (lambda p: p["thresholds"].update(x="0.875"), "thresholds['x']"),
        (lambda p: p.pop("settings"), "settings"),
        (lambda p: p.pop("thresholds"), "thresholds"),
        (lambda p: p.pop("method"), "method"),
        (lambda p: p["settings"].pop("eps"), "eps"),
    ],
)
def test_hand_edited_thresholds_are_refused(table, tmp_path, capsys, edit, needle):
    code, thr = calibrate(table, tmp_path, "--method", "gpac", "--group-col", "group")
    assert code == 0
    payload = json.loads(thr.read_text())
    edit(payload)
    thr.write_text(json.dumps(payload))
    capsys.readouterr()
    code = cli.main(["route", "--thresholds", str(thr), "--data", str(table), "-o", str(tmp_path / "r.csv")])
    assert code == 1 and needle in one_line_error(capsys)


def test_route_truncated_json_missing_file_nan_group(table, tmp_path, capsys):
    code, thr = calibrate(table, tmp_path, "--method", "gpac", "--group-col", "group")
    text = thr.read_text()
    thr.write_text(text[: len(text) // 2])
    assert cli.main(["route", "--thresholds", str(thr), "--data", str(table), "-o", str(tmp_path / "r.csv")]) == 1
    assert "not valid JSON" in one_line_error(capsys)
    assert cli.main(["route", "--thresholds", str(tmp_path / "no.json"), "--data", str(table), "-o", "r.csv"]) == 1
    assert "no such file" in one_line_error(capsys)
    thr.write_text(text)
    bad = pd.read_csv(table)
    bad.loc[4, "group"] = np.nan
    bad.to_csv(tmp_path / "bad.csv", index=False)
    assert cli.main(["route", "--thresholds", str(thr), "--data", str(tmp_path / "bad.csv"), "-o", "r.csv"]) == 1
    assert "row 5 (item_id=4)" in one_line_error(capsys)  # named as calibrate names rows


def test_route_reports_renamed_groups(table, tmp_path, capsys):
    code, thr = calibrate(table, tmp_path, "--method", "gpac", "--group-col", "group")
    payload = json.loads(thr.read_text())
    payload["thresholds"]["renamed"] = payload["thresholds"].pop("y")
    payload["groups"]["renamed"] = payload["groups"].pop("y")  # the certificate's entry too (else refused)
    thr.write_text(json.dumps(payload))
    capsys.readouterr()
    out = tmp_path / "r.csv"
    assert cli.main(["route", "--thresholds", str(thr), "--data", str(table), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 group(s) in the data are not in the thresholds file (unseen at calibration)" in err and "'y'" in err
    assert "1 group(s) of the thresholds file do not occur in the data" in err and "'renamed'" in err
    routed = pd.read_csv(out)
    assert not routed.loc[routed.group == "y", "route_nothink"].any()


def test_help_documents_defaults_and_direction():
    text = cli._parser()._subparsers._group_actions[0].choices["calibrate"].format_help()
    assert "default: 0.05" in text and "larger = less certain" in text and "DISCARDS" in text


def test_no_traceback_from_a_real_process(table, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpac_utils",
            "calibrate",
            "--data",
            str(table),
            "--score-col",
            "u",
            "--eps",
            "2",
            "-o",
            str(tmp_path / "t.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


# ------------------------------------------------------------------ gpac plan
def plan(data, tmp_path, *extra):
    """``gpac plan`` on ``data`` with ``extra`` (which replaces a default here: an option given twice is refused)."""
    out = tmp_path / "plan.csv"
    base = {"--data": str(data), "--score-col": "u", "--eps": "0.1", "--n-resamples": "20", "-o": str(out)}
    argv = ["plan", *(x for k, v in base.items() if k not in extra for x in (k, v)), *extra]
    return cli.main(argv), out


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--budget", "-5"], "--budget: "),
        (["--budget", "nan"], "--budget: "),
        (["--budget", "1.5"], "--budget: must be a whole number of labels, got 1.5"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
        (["--pilot-fraction", "0"], "--pilot-fraction: "),
        (["--pilot-fraction", "2"], "--pilot-fraction: "),
        (["--target", "2"], "--target: "),
        (["--n-resamples", "1"], "--n-resamples: "),
        (["--recipe", "nope"], "--recipe: "),
        (["--bound", "nope"], "--bound: unknown 'nope'; choose one of ['clt', 'hoeffding', 'hoeffding_bentkus'"),
        (["--grid", "1,x"], "--grid: expected comma-separated integers"),
        (["--grid", "0,5"], "--grid: label counts must be positive"),
        (["--eps", "2"], "--eps: "),
        (["--alpha", "0"], "--alpha: "),
        (["--loss-bound", "0"], "--loss-bound: "),
    ],
)
def test_plan_bad_parameters_exit_2(table, tmp_path, capsys, extra, needle):
    code, out = plan(table, tmp_path, *extra)
    assert code == 2
    assert needle in one_line_error(capsys)
    assert not out.exists()


def test_plan_bad_data_exit_1_naming_the_column_or_file(table, tmp_path, capsys):
    df = pd.read_csv(table)
    for option, col in [("--score-col", "nope"), ("--group-col", "grp"), ("--loss-col", "lz")]:
        code, _ = plan(table, tmp_path, option, col)
        assert code == 1 and f"{option} {col!r}: no such column" in one_line_error(capsys)
    code, _ = plan(tmp_path / "missing.csv", tmp_path)
    assert code == 1 and "missing.csv: no such file" in one_line_error(capsys)
    bad = tmp_path / "bad.csv"
    df.assign(u=df.u.where(df.index != 3, 2.0)).to_csv(bad, index=False)
    code, _ = plan(bad, tmp_path)
    assert code == 1 and "column 'u' must lie in [0, 1]; bad in 1 row(s): row 4 (item_id=3)" in one_line_error(capsys)
    df.assign(loss=df.loss.where(df.index != 3, -1)).to_csv(bad, index=False)
    code, _ = plan(bad, tmp_path)
    assert code == 1 and "--loss-col: losses must lie in [0, 1.0]; bad in 1 row(s): row 4" in one_line_error(capsys)
    df.assign(loss=df.loss.astype(object).where(df.index != 5, "abc")).to_csv(bad, index=False)
    code, _ = plan(bad, tmp_path)
    assert code == 1 and "--loss-col 'loss': losses must be numbers (or empty: unlabelled); bad in 1 row(s): row 6" in (
        one_line_error(capsys)
    )
    df.assign(loss=np.nan).to_csv(bad, index=False)
    code, _ = plan(bad, tmp_path)
    assert code == 1 and "--loss-col: no labelled rows" in one_line_error(capsys)
    df.assign(group=df.group.where(df.index != 7, None)).to_csv(bad, index=False)
    code, _ = plan(bad, tmp_path)
    assert code == 1 and "column 'group' has missing group labels" in one_line_error(capsys)


def test_plan_unwritable_output_names_the_option(table, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = cli.main(
        [
            "plan",
            "--data",
            str(table),
            "--score-col",
            "u",
            "--eps",
            "0.1",
            "--n-resamples",
            "20",
            "-o",
            str(blocker / "plan.csv"),
        ]
    )
    assert code == 1 and f"-o {blocker / 'plan.csv'}: cannot write it" in one_line_error(capsys)


def test_one_column_for_two_roles_names_both_options(tmp_path, capsys):
    """The same column as score and loss: both options named, not an internal column."""
    import numpy as np
    import pandas as pd

    from gpac_utils.cli import main

    p = tmp_path / "t.csv"
    pd.DataFrame({"item_id": range(100), "u": np.linspace(0, 1, 100), "loss": np.zeros(100)}).to_csv(p, index=False)
    base = ["calibrate", "--data", str(p), "--eps", "0.1", "-o", str(tmp_path / "o.json")]
    assert main([*base, "--score-col", "u", "--loss-col", "u"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --loss-col 'u': the same column as --score-col; give each its own column"
    assert "score_cli" not in err
    assert main([*base, "--score-col", "u", "--alpha", "0.9"]) == 0  # allowed, with a warning line
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "alpha=0.9" in warned[0]
