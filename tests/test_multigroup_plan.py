"""``gpac plan`` with several ``--group-col`` (issue 54, item 2): the feasibility table of every group of every
grouping, with the collection's count of groups (as the calibrators count it), no forecast; ``--budget`` and the
other options of the forecast refused in one line naming them, as are a repeated or missing column and a method
the table does not describe (docs/planning.md, "Several groupings")."""

from __future__ import annotations

import shlex
import warnings

import numpy as np
import pandas as pd
import pytest
from test_multigroup_cli import one_error, run

from gpac_utils.calibrate import TOO_FEW
from gpac_utils.feasibility import min_items, n_needed
from gpac_utils.multigroup import ShiftGPAC
from gpac_utils.settings import Settings
from gpac_utils.workflow.paths import REPO_ROOT

GROUPINGS = ("subject", "language")
EPS = 0.1


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Two groupings: subject (``small`` has 40 rows, ``geometry`` 145) and language; a third of the rows unlabelled."""
    d = tmp_path_factory.mktemp("mgplan")
    rng = np.random.default_rng(3)
    subject = np.repeat(["algebra", "geometry", "small"], [600, 145, 40])
    language = rng.choice(["en", "fr"], subject.size)
    u = rng.uniform(size=subject.size)
    loss = (rng.uniform(size=subject.size) < 0.1 * u).astype(float)
    loss[rng.uniform(size=subject.size) < 1 / 3] = np.nan
    df = pd.DataFrame({"subject": subject, "language": language, "score": u, "loss": loss})
    df.to_csv(d / "t.csv", index=False)
    df.assign(loss=df["loss"].fillna(0.0)).to_csv(d / "all.csv", index=False)  # every row labelled
    return d, df


def plan(d, *extra, data="t.csv", eps=EPS):
    args = ["plan", "--data", d / data, "--score-col", "score", "--eps", eps, "-o", d / "feas.csv"]
    return [*args, "--group-col", "subject", "--group-col", "language", *extra]


def by_hand(df: pd.DataFrame, need: int) -> pd.DataFrame:
    """Each group of each grouping: its rows, its labelled rows, the fewest items it needs and whether it has them."""
    rows = []
    for col in GROUPINGS:
        for label, part in df.groupby(col):
            n = int(part["loss"].notna().sum())
            rows.append({"group": f"{col}={label}", "rows": len(part), "n": n, "n_needed": need, "feasible": n >= need})
    return pd.DataFrame(rows).set_index("group")


@pytest.mark.parametrize("correction", ["none", "bonferroni"])
def test_the_rows_are_every_group_of_every_grouping_with_the_collections_count(table, capsys, correction):
    d, df = table
    rc, out, err = run(capsys, *plan(d, "--correction", correction))
    assert rc == 0, err
    got = pd.read_csv(d / "feas.csv").set_index("group")
    m = df["subject"].nunique() + df["language"].nunique()  # 5 groups: the collection's, both groupings'
    alpha = 0.05 / m if correction == "bonferroni" else 0.05
    need = max(min_items(EPS, alpha), 10)  # min-group-size 10
    assert need == n_needed(Settings(eps=EPS, correction=correction), m)
    expected = by_hand(df, need)
    assert (
        sorted(got.index)
        == sorted(expected.index)
        == sorted(["subject=algebra", "subject=geometry", "subject=small", "language=en", "language=fr"])
    )
    for col in expected.columns:
        assert got.loc[expected.index, col].tolist() == expected[col].tolist(), col
    assert got.loc["language=en", "grouping"] == "language" and got.loc["subject=small", "grouping"] == "subject"
    if correction == "bonferroni":  # m counts both groupings' groups, not one grouping's
        assert need == min_items(EPS, 0.05 / 5) > min_items(EPS, 0.05 / 3)
    assert f"{m} groups, each calibrated on its own labelled items at alpha {alpha:.4g}" in out
    assert f"certifies nothing with fewer than {need} items" in out
    assert "subject=small" in out and "language=fr" in out  # the table, printed


def test_a_group_too_small_is_flagged(table, capsys):
    d, df = table
    rc, out, err = run(capsys, *plan(d, eps=0.05))
    assert rc == 0
    got = pd.read_csv(d / "feas.csv").set_index("group")
    assert not got.loc["subject=small", "feasible"] and got.loc[["subject=algebra", "language=en"], "feasible"].all()
    assert got.loc["subject=small", "rows"] == 40 < got.loc["subject=small", "n_needed"] == min_items(0.05, 0.05)
    assert "1 group(s) have fewer rows than 59: even all labelled, they always think: 'subject=small'" in err
    assert "no forecast or allocation for several groupings" in out


def test_a_group_with_rows_but_too_few_labels_is_told_to_label_more(table, capsys):
    d, df = table
    few = df.copy()
    few.loc[(few["subject"] == "geometry") & (few.index % 10 != 0), "loss"] = np.nan  # at most 15 of 145 labelled
    few.to_csv(d / "few.csv", index=False)
    rc, _, err = run(capsys, *plan(d, data="few.csv"))
    assert rc == 0
    got = pd.read_csv(d / "feas.csv").set_index("group")
    assert got.loc["subject=geometry", "n"] == few.loc[few["subject"] == "geometry", "loss"].notna().sum() < 29
    assert "have too few labelled items to certify anything: 'subject=geometry'" in err


@pytest.mark.parametrize("correction", ["none", "bonferroni"])
def test_the_flagged_groups_are_those_calibration_leaves_too_few(table, capsys, correction):
    """Every row labelled: the groups the table flags are those Shift-G-PAC's fit records as too few (its m)."""
    d, df = table
    rc, _, err = run(capsys, *plan(d, "--correction", correction, data="all.csv", eps=0.03))
    assert rc == 0, err
    got = pd.read_csv(d / "feas.csv").set_index("group")
    full = pd.read_csv(d / "all.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = ShiftGPAC(0.03, correction=correction).fit(full["score"], full["loss"], full[list(GROUPINGS)])
    too_few = {g for g, r in cal.groups_.items() if r.status == TOO_FEW}
    assert set(got.index[~got["feasible"]]) == too_few and too_few  # some group is flagged
    # geometry's 145 rows: enough at alpha (99), not at alpha / 5 (152; one grouping's alpha / 3 would need 135)
    assert too_few == ({"subject=small", "subject=geometry"} if correction == "bonferroni" else {"subject=small"})
    assert min_items(0.03, 0.05) < 145 < min_items(0.03, 0.05 / 5) and min_items(0.03, 0.05 / 3) < 145


def test_budget_is_refused_naming_it_and_what_works_instead(table, capsys):
    d, _ = table
    (d / "feas.csv").unlink(missing_ok=True)
    rc, _, err = run(capsys, *plan(d, "--budget", "300"))
    assert rc == 2 and not (d / "feas.csv").exists()
    line = one_error(err)
    assert line.startswith("error: --budget: no forecast for several groupings")
    assert "one label counts for a group of every grouping" in line
    assert "gpac plan --group-col subject --budget 300: a forecast of that grouping's G-PAC" in line


@pytest.mark.parametrize(
    "extra,rc,needle",
    [
        (["--group-col", "subject"], 2, "--group-col: 'subject' given twice"),
        (["--group-col", "tier"], 1, "--group-col 'tier': no such column in"),
        (["--method", "gpac"], 2, "--group-col: --method gpac calibrates one grouping (a partition), got 2"),
        (["--method", "pathgpac"], 2, "--method pathgpac: the feasibility table calibrates each group on its own"),
        (["--method", "pac"], 2, "--method pac: gpac plan plans the labels of your groups"),
        (["--sequential"], 2, "--sequential: an option of one grouping's plan"),
        (["--pilot-fraction", "0.2"], 2, "--pilot-fraction: an option of one grouping's plan"),
        (["--seed", "3"], 2, "--seed: an option of one grouping's plan"),
        (["--n-resamples", "5"], 2, "--n-resamples: an option of one grouping's plan"),
        (["--risk", "routed"], 2, "--risk: Shift-G-PAC certifies the joint risk only"),
        (["--recipe", "paper"], 2, "--recipe: sampling 'resample' draws terms with replacement per group"),
        (["--loss-col", "nope"], 1, "--loss-col 'nope': no such column in"),
    ],
)
def test_refused_in_one_line(table, capsys, extra, rc, needle):
    d, _ = table
    (d / "feas.csv").unlink(missing_ok=True)
    code, _, err = run(capsys, *plan(d, *extra))
    assert code == rc and needle in one_error(err) and not (d / "feas.csv").exists()


def test_one_column_with_a_method_of_a_collection_is_refused(table, capsys):
    d, _ = table
    args = ["plan", "--data", d / "t.csv", "--score-col", "score", "--eps", EPS, "-o", d / "one.csv"]
    rc, _, err = run(capsys, *args, "--group-col", "subject", "--method", "shiftgpac")
    assert rc == 2 and "--method shiftgpac: with one --group-col gpac plan forecasts" in one_error(err)


def test_a_bad_loss_is_refused_naming_the_column(table, capsys):
    d, df = table
    df.assign(loss=df["loss"].where(df.index != 5, 2.0)).to_csv(d / "bad.csv", index=False)
    rc, _, err = run(capsys, *plan(d, data="bad.csv"))
    assert rc == 1 and "--loss-col: losses must lie in [0, 1.0]; bad in" in one_error(err)


def test_one_grouping_plan_is_the_same_with_method_gpac(table, capsys):
    """One column: the forecast of G-PAC, the same with ``--method gpac`` as without it."""
    d, _ = table
    args = ["plan", "--data", d / "t.csv", "--score-col", "score", "--eps", EPS, "--group-col", "subject"]
    args += ["--n-resamples", "5", "--grid", "30,100,200"]
    assert run(capsys, *args, "-o", d / "a.csv")[0] == 0
    assert run(capsys, *args, "--method", "gpac", "-o", d / "b.csv")[0] == 0
    pd.testing.assert_frame_equal(pd.read_csv(d / "a.csv"), pd.read_csv(d / "b.csv"))
    assert "allocation" in pd.read_csv(d / "a.csv").columns  # the forecast's table


def test_the_planning_page_shows_what_the_command_prints(tmp_path, monkeypatch, capsys):
    """docs/planning.md, "Several groupings": its command, run as written (from a folder holding its table),
    prints the page's output."""
    page = (REPO_ROOT / "docs" / "planning.md").read_text().split("## Several groupings")[1]
    command = next(line for line in page.splitlines() if line.startswith("gpac plan "))
    shown = page.split("```text\n")[1].split("```")[0].splitlines()
    t = pd.read_csv(REPO_ROOT / "data" / "real" / "mathl5_zeroeval.csv")
    monkeypatch.chdir(tmp_path)
    t.rename(columns={"group": "subject"}).assign(third=t["item_id"] % 3).to_csv("mathl5_two.csv", index=False)
    rc, out, err = run(capsys, *shlex.split(command)[1:])
    assert rc == 0
    assert [x for x in shown if x.startswith("warning: ")] == err.splitlines()
    assert [x for x in shown if not x.startswith("warning: ")] == out.splitlines()


def test_a_collection_method_with_a_setting_of_its_own_is_refused_naming_it(table, capsys):
    """A registered calibrator of a collection with a setting the feasibility table does not model (a heir's
    plugin that closes small cells) would get a table that is not its: refused in one line, naming the setting."""
    from gpac_utils.calibrate import CALIBRATORS, Method
    from gpac_utils.multigroup import MinGPAC
    from gpac_utils.settings import Interval, Setting
    from gpac_utils.thresholds_schema import GROUPING_NAMES

    class Closing(MinGPAC):
        """Min-G-PAC whose small cells always think (a test's stand-in for a plugin)."""

        name = "Min-G-PAC-closing"
        SETTINGS = (*MinGPAC.SETTINGS, Setting("min_cell_items", 30, Interval(int, 1), "cells below it think"))

    with CALIBRATORS.registered(Method(Closing.name, Closing, "collection", {"groupings": GROUPING_NAMES})):
        rc, _, err = run(capsys, *plan(table[0], "--method", "mingpacclosing"))
    assert rc == 2 and "it reads ['min_cell_items'], settings of its own" in one_error(err)
    assert "plan --method mingpac or shiftgpac" in one_error(err)
