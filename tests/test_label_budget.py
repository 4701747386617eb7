"""Notebook 32's committed allocation trials (``make label-budget``): the rows the code computes."""

from __future__ import annotations

import pytest

from gpac_utils.checks import DataError
from gpac_utils.paper import label_budget as lb
from gpac_utils.workflow import config


def _paper() -> dict:
    """Notebook 32's paper-profile settings (read from its file: config.load would switch the profile)."""
    raw = config.read_config("32_label_budget")
    return {**raw["common"], **raw["profiles"]["paper"]}


@pytest.mark.parametrize("trial", [0, 29])
def test_the_committed_allocation_trials_hold_the_rows_the_code_computes(trial):
    """benchmarks/label_budget_{trials,predicted}.csv, which notebook 32 reads on the paper profile: a split
    recomputed from its own seeds, every row equal (floats to within RTOL; the notebook itself checks split 0). A
    change to the planner, the calibration, the table or notebook 32's settings without `make label-budget`
    fails here."""
    cfg = _paper()
    res, pred = lb.read_tables(cfg)
    assert len(res) == 30 * 4 * 7 and len(pred) == 30 * 3  # splits x allocations (x subjects)
    assert lb.check_trial(cfg, res, pred, trial=trial) == 4 * 7 + 3  # same_rows: values and dtypes


def test_a_changed_row_or_another_trial_count_is_refused(tmp_path):
    cfg = _paper()
    res, pred = lb.read_tables(cfg)
    changed = res.copy()
    changed.loc[0, "routed_share"] += 1e-12
    with pytest.raises(DataError, match=r"label_budget_trials.csv: trial 0's trials differ from what the code"):
        lb.check_trial(cfg, changed, pred, trial=0)
    with pytest.raises(DataError, match=r"holds trials .* \(30\), not the 3 of n_trials; make label-budget"):
        lb.read_tables({**cfg, "n_trials": 3})
    with pytest.raises(DataError, match=r"missing.csv: no table of the allocation trials; make label-budget"):
        lb.read_tables(cfg, tmp_path / "missing.csv")
