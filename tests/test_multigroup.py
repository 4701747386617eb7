"""Calibrators of overlapping groups (gpac_utils.multigroup): brute force on tiny cases, refusals, a seeded audit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from gpac_utils import multigroup
from gpac_utils.bounds import ucb
from gpac_utils.calibrate import CALIBRATORS, GPAC, GroupWarning, threshold
from gpac_utils.checks import ParameterError
from gpac_utils.multigroup import SEP, MinGPAC, PathGPAC, ShiftGPAC, collection
from gpac_utils.paper.theory.overlap import POPULATIONS
from gpac_utils.recipe import Recipe
from gpac_utils.selection import upper_envelope


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    labels = {"subject": rng.choice(["a", "b", "c"], n), "lang": rng.choice(["en", "fr"], n)}
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(labels["subject"] == "c", 0.5, 0.1) * u).astype(float)
    return u, loss, labels


def test_min_gpac_is_the_smallest_of_each_groups_own_threshold_by_brute_force():
    u, loss, labels = _data()
    m = MinGPAC(0.05, correction="bonferroni").fit(u, loss, labels)
    own = {}
    for col, lab in labels.items():
        for v in np.unique(lab):
            at = lab == v
            own[f"{col}={v}"] = float(threshold(u[at], loss[at], eps=0.05, alpha=0.05 / 5))
    assert m.group_thresholds_ == own
    for s in "abc":
        for lang in ("en", "fr"):
            cell = f"subject={s}{SEP}lang={lang}"
            assert m.thresholds_[cell] == min(own[f"subject={s}"], own[f"lang={lang}"])
    # routing: an item goes to the non-thinking model exactly when its score is at most its cell's threshold
    cells = [f"subject={s}{SEP}lang={g}" for s, g in zip(labels["subject"], labels["lang"])]
    assert np.array_equal(m.route(u, labels), u <= np.array([m.thresholds_[c] for c in cells]))


def test_one_grouping_min_gpac_is_gpac():
    u, loss, labels = _data()
    assert (
        MinGPAC(0.05).fit(u, loss, labels["subject"]).thresholds_
        == GPAC(0.05).fit(u, loss, labels["subject"]).thresholds_
    )


@pytest.mark.parametrize("correction", ["none", "bonferroni"])
def test_shift_gpac_without_shifts_is_min_gpac(monkeypatch, correction):
    u, loss, labels = _data()
    monkeypatch.setattr(multigroup, "_shift_fit", lambda u, y, member: (1.0, np.zeros(member.shape[1]), 0.0))
    shifted = ShiftGPAC(0.05, correction=correction).fit(u, loss, labels)
    assert shifted.thresholds_ == MinGPAC(0.05, correction=correction).fit(u, loss, labels).thresholds_


def test_one_grouping_shift_gpac_is_gpac():
    u, loss, labels = _data()
    one = ShiftGPAC(0.05).fit(u, loss, labels["subject"])
    assert one.thresholds_ == GPAC(0.05).fit(u, loss, labels["subject"]).thresholds_
    assert all(d == 0 for shifts in one.shifts_.values() for d in shifts.values())


def test_shift_gpac_is_g_pac_on_each_groups_shifted_score_fitted_outside_it_by_brute_force():
    """Each group: the shifts solve the ridge logistic fit on the items outside it (its gradient vanishes), and its
    level is G-PAC's threshold on its items' shifted scores (mapped onto [0, 1] by an increasing affine map)."""
    from scipy.special import expit

    u, loss, labels = _data(1500, 4)
    m = ShiftGPAC(0.1, correction="bonferroni").fit(u, loss, labels)
    coll = collection(labels, u.size)
    member = coll.member.astype(float)
    for j, g in enumerate(coll.names):
        out = ~coll.member[:, j]
        b, o, b_se = multigroup._shift_fit(u[out], loss[out], member[out])
        grad = np.abs(
            member[out].T
            @ (expit(o @ member[out].T + b * u[out] + _intercept(u[out], loss[out], member[out], b, o)) - loss[out])
            + o
        )
        assert grad.max() < 1e-6 and o[j] == 0.0
        at = coll.member[:, j]
        d = np.array([m.shifts_[g][c] for c in coll.cells[at].tolist()])
        for c in m.shifts_[g]:
            shift = sum(o[coll.names.index(h)] for h in c.split(SEP)) / (b + multigroup.SHIFT_Z * b_se)
            assert m.shifts_[g][c] == np.clip(round(shift, 6), -1, 1)
        lo, hi = multigroup.SHIFTED
        t = float(threshold((u[at] + d - lo) / (hi - lo), loss[at], eps=0.1, alpha=0.05 / 5))
        assert math.isclose(m.group_levels_[g], lo + t * (hi - lo), abs_tol=1e-12) or (
            math.isinf(t) and m.group_levels_[g] == t
        )
    for c, t in m.thresholds_.items():  # each cell: the smallest of its groups' level less its shift there
        own = min(multigroup._below(m.group_levels_[g], m.shifts_[g][c]) for g in c.split(SEP))
        assert t == (-math.inf if own < 0 else min(own, 1.0))
        assert all(t + m.shifts_[g][c] <= m.group_levels_[g] for g in c.split(SEP))  # routed: counted


def test_a_cells_threshold_is_a_float_whose_shifted_score_the_bound_counted():
    """level - shift can round up, routing an item (U <= t) whose shifted score U + shift exceeds the level in floating
    point; _below steps down to a t with t + shift <= level, at most two spacings of the largest operand lower."""
    rng = np.random.default_rng(9)
    u1, u2 = rng.integers(0, 101, (2, 20000)) / 100
    d1, d2 = np.round(rng.uniform(-1, 1, (2, 20000)), 2)
    level = u1 + d1
    naive = level - d2
    assert np.sum(naive + d2 > level) > 0  # the float trap is real
    t = np.array([multigroup._below(a, b) for a, b in zip(level.tolist(), d2.tolist())])
    assert np.all(t + d2 <= level) and np.all(
        naive - t <= 2 * np.spacing(np.maximum.reduce([abs(naive), abs(level), abs(d2)]))
    )


def test_shift_gpac_routes_only_items_the_bound_counted_with_tied_scores_and_any_bound():
    """A score on a 0.01 grid, tied across cells: every routed item has U + d_c <= its group's level in floating
    point (the threshold is the largest float below level - shift); an evenly spaced grid (WSR) spans SHIFTED."""
    rng = np.random.default_rng(8)
    n = 3000
    labels = {"subject": rng.choice(["a", "b", "c"], n), "lang": rng.choice(["en", "fr"], n)}
    u = rng.integers(0, 101, n) / 100
    loss = (rng.uniform(size=n) < np.where(labels["subject"] == "c", 0.6, 0.05) * u).astype(float)
    for bound in ("hoeffding_bentkus", "wsr"):
        m = ShiftGPAC(0.1, recipe=Recipe(bound=bound)).fit(u, loss, labels)
        coll = collection(labels, n)
        routed = m.route(u, labels)
        for j, g in enumerate(coll.names):
            at = coll.member[:, j] & routed
            d = np.array([m.shifts_[g][c] for c in coll.cells[at].tolist()])
            assert np.all(u[at] + d <= m.group_levels_[g])


def _intercept(u, y, member, b, o):
    """The intercept at the fit: the root of the score equation in it, given the slope and offsets."""
    from scipy.optimize import brentq
    from scipy.special import expit

    return brentq(lambda a: np.sum(expit(a + b * u + member @ o) - y), -50, 50)


def test_shift_gpac_routes_more_of_a_group_whose_other_grouping_differs():
    """Where one subject loses more, each language's risk goes to its other subjects' cells: Shift-G-PAC gives a
    language's cells of the safe subjects a higher threshold than Min-G-PAC does, and routes more in all."""
    u, loss, labels = _data(4000, 5)
    shift, low = ShiftGPAC(0.05).fit(u, loss, labels), MinGPAC(0.05).fit(u, loss, labels)
    assert all(shift.shifts_["lang=en"][f"subject={s}{SEP}lang=en"] < 0 for s in "ab")
    assert shift.shifts_["lang=en"][f"subject=c{SEP}lang=en"] > 0
    assert shift.route(u, labels).mean() > low.route(u, labels).mean()


def test_path_gpac_selects_the_first_crossing_of_every_groups_bound_by_brute_force():
    u, loss, labels = _data(2000, 3)
    p = PathGPAC(0.1, seed=2).fit(u, loss, labels)
    coll = collection(labels, u.size)
    rng = np.random.default_rng(2)
    perm = rng.permutation(u.size)
    test = perm[1000:]
    r = p.path_.scores(coll.cells, u)
    grid = p.path_.grid
    worst = np.zeros(grid.size)
    for j in range(len(coll.names)):  # every group's Hoeffding–Bentkus bound at every s, by its own call
        at = test[coll.member[test, j]]
        curve = ucb("hoeffding_bentkus", loss[at], np.where(np.isfinite(r[at]), r[at], 99.0), grid, 0.05, 1.0)
        worst = np.maximum(worst, curve)
    passed = upper_envelope(worst) <= 0.1
    expected = grid[passed.argmin() - 1] if not passed.all() else grid[-1]
    if not passed[0]:
        expected = -math.inf
    assert p.level_ == expected
    # the per-cell thresholds route exactly the items whose path score is at most the level
    assert np.array_equal(p.route(u, labels), r <= p.level_)


def test_membership_matrix_gives_the_same_as_label_columns():
    u, loss, labels = _data()
    frame = pd.DataFrame({f"{c}={v}": labels[c] == v for c in labels for v in np.unique(labels[c])})
    a = MinGPAC(0.05).fit(u, loss, labels)
    b = MinGPAC(0.05).fit(u, loss, frame)
    assert a.group_thresholds_ == b.group_thresholds_
    assert np.array_equal(a.route(u, labels), b.route(u, frame))


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (np.zeros((600, 2), bool), "^groups: group '0' has no items"),
        (np.ones((5, 2), bool), "^groups: the membership matrix has 5 rows for 600 items"),
        (np.ones((600, 2)), "^groups: a 2-D array must be a boolean membership matrix"),
        ({}, "^groups: no grouping given"),
        ({"a=b": ["x"] * 600}, "^groups: grouping name 'a=b' must not contain"),
        ({"subject": ["x"] * 599}, r"^groups\['subject'\]: need one label per item"),
        (None, "^groups: Min-G-PAC needs the items' groups"),
    ],
)
def test_refusals_are_one_line_naming_the_argument(groups, message):
    u, loss, _ = _data()
    with pytest.raises(ParameterError, match=message) as info:
        MinGPAC(0.05).fit(u, loss, groups)
    assert "\n" not in str(info.value)


def test_scores_and_losses_are_checked_as_g_pac_checks_them():
    """The validation layer's one check (check_xy, check_same_index): the same messages as G-PAC's."""
    u, loss, labels = _data()
    with pytest.raises(ParameterError, match=r"^losses: must be of equal length to scores \(one loss per score\)"):
        MinGPAC(0.05).fit(u, loss[:10], labels)
    with pytest.raises(ParameterError, match="^groups: its pandas index differs from that of scores"):
        PathGPAC(0.05).fit(pd.Series(u), loss, pd.DataFrame(labels, index=np.arange(1, u.size + 1)))
    with pytest.raises(ParameterError, match="^scores: need at least 2 item"):
        PathGPAC(0.05).fit(u[:1], loss[:1], {"subject": labels["subject"][:1]})


def test_the_routed_risk_and_resampling_are_refused_in_one_line():
    with pytest.raises(ParameterError, match="^risk: Min-G-PAC certifies the joint risk only; the risk among routed"):
        MinGPAC(0.05, risk="routed")
    with pytest.raises(ParameterError, match="^risk: Path-G-PAC certifies the joint risk only"):
        PathGPAC(0.05, risk="routed")
    with pytest.raises(ParameterError, match="^risk: Shift-G-PAC certifies the joint risk only"):
        ShiftGPAC(0.05, risk="routed")
    u, loss, labels = _data()
    with pytest.raises(ParameterError, match="^recipe: sampling 'resample'"):
        MinGPAC(0.05, recipe="paper").fit(u, loss, labels)


def test_unseen_cells_and_other_groupings_at_routing():
    u, loss, labels = _data()
    m = MinGPAC(0.05).fit(u, loss, labels)
    with pytest.warns(GroupWarning, match="not seen at calibration"):
        assert not m.route([0.0], {"subject": ["z"], "lang": ["en"]})[0]
    with pytest.raises(ParameterError, match=r"^groups: calibrated on groupings \['subject', 'lang'\]"):
        m.route([0.1], {"subject": ["a"]})


def test_the_three_are_registered_calibrators():
    assert {"Min-G-PAC", "Path-G-PAC", "Shift-G-PAC"} <= set(CALIBRATORS)
    assert CALIBRATORS["Path-G-PAC"].cls is PathGPAC and CALIBRATORS["Min-G-PAC"].groups == "collection"
    assert CALIBRATORS["Shift-G-PAC"].default and not CALIBRATORS["Min-G-PAC"].default  # several --group-col
    assert all(CALIBRATORS[m].needs_groups for m in ("Min-G-PAC", "Shift-G-PAC", "Path-G-PAC", "G-PAC"))


def test_audit_every_group_within_alpha_plus_three_mcse_and_the_last_column_fails():
    """The validity audit in small (benchmarks/multigroup_audit.py runs it in full): on a population whose
    per-group risk is exact, every group's violation rate stays within alpha + 3 MCSE for both constructions, and
    G-PAC on the last grouping alone (what a repeated --group-col did) does not."""
    from tests.repo_scripts import load

    audit = load("benchmarks/multigroup_audit.py").audit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        out = audit(60, sizes=(600,), populations={"two-by-two": POPULATIONS["two-by-two"]}, seed=7)
    valid = out[(out["claim"] != "none") & (out["group"] != "any")]
    assert set(valid["method"]) == {"min", "min-bonferroni", "shift", "shift-bonferroni", "path", "cells-bonferroni"}
    assert valid["pass"].all(), valid[~valid["pass"]]
    together = out[(out["claim"] == "all") & (out["group"] == "any")]
    assert together["pass"].all()
    last = out[(out["method"] == "last-column") & (out["group"] == "subject=s1")]
    assert not last["pass"].iloc[0]  # the subject the last column ignores exceeds eps far more often than alpha


def test_the_docs_page_statements_are_those_of_the_committed_audit():
    """docs/overlapping-groups.md, "What it costs: measured", against benchmarks/multigroup_{audit,realdata}.csv."""
    from gpac_utils.workflow.paths import REPO_ROOT

    sim = pd.read_csv(REPO_ROOT / "benchmarks" / "multigroup_audit.csv")
    real = pd.read_csv(REPO_ROOT / "benchmarks" / "multigroup_realdata.csv")
    page = " ".join((REPO_ROOT / "docs" / "overlapping-groups.md").read_text().split())
    valid = sim[(sim["claim"] != "none") & (sim["group"] != "any")]
    assert {"min", "min-bonferroni", "shift", "shift-bonferroni", "path"} <= set(valid["method"])
    assert valid["pass"].all()
    assert sim[(sim["claim"] == "all") & (sim["group"] == "any")]["pass"].all()
    assert not sim[(sim["method"] == "last-column") & (sim["group"] == "any")]["pass"].any()
    share = sim[sim["group"] == "any"].pivot_table(index=["population", "n"], columns="method", values="routed_share")
    assert (share["shift"] > share["min"]).all() and (share["shift-bonferroni"] > share["min-bonferroni"]).all()
    assert (share["shift-bonferroni"] > share["cells-bonferroni"]).all()
    assert (share["path"] < share["min-bonferroni"]).all()
    total = real[real["group"] == "all"].set_index("method")["routed_share"]
    assert (
        total["shift"] > total["min"]
        and total["cells-bonferroni"] < total["min-bonferroni"] < total["shift-bonferroni"]
    )
    assert total["path"] < total["min-bonferroni"]
    said = [
        f"{100 * total[m]:.1f} %" for m in ("shift-bonferroni", "min-bonferroni", "cells-bonferroni", "shift", "min")
    ]
    assert said == ["31.5 %", "29.8 %", "0.3 %", "42.7 %", "39.6 %"] and all(x in page for x in said)
    four, two = share.loc[("four-by-three", 1000)], share.loc[("two-by-two", 4000)]
    assert [f"{100 * four[m]:.1f} %" for m in ("shift-bonferroni", "min-bonferroni", "cells-bonferroni")] == [
        "30.4 %",
        "26.6 %",
        "11.6 %",
    ]
    assert [f"{100 * two[m]:.1f} %" for m in ("shift-bonferroni", "cells-bonferroni")] == ["46.7 %", "46.2 %"]
    assert "**Shift-G-PAC routes more than Min-G-PAC**" in page and "30.4 % against 26.6 % and 11.6 %" in page


def test_an_experiment_names_a_collection_calibrator_without_importing_multigroup():
    """run_experiment resolves 'Shift-G-PAC' by name in a fresh interpreter (it was unknown unless
    gpac_utils.multigroup had been imported first)."""
    import subprocess
    import sys

    code = (
        "from gpac_utils.experiment import ExperimentConfig; "
        "print(ExperimentConfig(eps=0.1, methods=('Shift-G-PAC', 'Min-G-PAC')).methods)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "('Shift-G-PAC', 'Min-G-PAC')" in r.stdout, r.stderr[-500:]
