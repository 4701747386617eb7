r"""Notebook 13's validity audit of every upper confidence bound, and its committed table.

On :data:`~.populations.AUDIT_POPULATION` (the risk of every threshold known in closed form), each cell
(bound × labelling scheme and probability × selection rule × group size × ε × group) calibrates
``calibrations`` times and counts how often the certified threshold is unsafe, ``R(û | G_j) > ε``:
Assumption 4.1 (``assump:ucb-validity``) bounds that share by α for a valid bound read off by
first-crossing. Notebook 13 explains every step of :func:`audit_cell`.

The paper-profile audit (1 440 cells of 1 000 calibrations, about two minutes of CPU, most of it the
``wsr`` bound) is computed by ``make validity-audit`` (``python -m gpac_utils.paper.theory.validity_audit``),
which writes :data:`AUDIT_TABLE` (``benchmarks/validity_audit.csv``, committed). Notebook 13 reads it on the paper
profile (its setting ``from_table``) and recomputes its smallest cell live, comparing the rows;
``tests/test_theory.py`` recomputes a sample of its cells and fails when a row differs from the code's.

Usage: python -m gpac_utils.paper.theory.validity_audit [--out benchmarks/validity_audit.csv]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ... import sampling, selection
from ...bounds import BOUNDS, ucb_many
from ...checks import DataError, ParameterError
from ...metrics import mcse
from ...workflow import config
from ...workflow.paths import REPO_ROOT, as_shown
from . import populations

__all__ = [
    "AUDIT_TABLE",
    "AUDIT_SETTINGS",
    "audit_schemes",
    "audit_cell",
    "validity_audit",
    "settings_of",
    "read_audit",
]

#: The committed paper-profile audit (``make validity-audit`` writes it; notebook 13 reads it).
AUDIT_TABLE = REPO_ROOT / "benchmarks" / "validity_audit.csv"
#: The settings of notebook 13's configuration that decide the audit (``bounds`` "all": the registry's).
AUDIT_SETTINGS = ("bounds", "label_probs", "group_sizes", "eps_list", "rules", "alpha", "calibrations", "seed")
#: The columns of one cell's rows that depend on the machine (left out of the committed table).
TIMING = ("ucb_seconds",)
#: Relative tolerance of a float of a committed row recomputed on another machine: a CPU's SIMD code paths (numpy's
#: AVX-512 ``exp``, ``log`` and ``power``) may change its last bits (the reason for ``plotting.CSV_DIGITS``), never
#: its 12th digit. On the machine that wrote the table the rows are equal bit for bit (:func:`write_audit`).
RTOL = 1e-12
#: Per setting of the audit: the column of the table that records it, and its type.
_RECORDED = {
    "bounds": ("bound", str),
    "label_probs": ("pi", float),
    "group_sizes": ("n_group", int),
    "eps_list": ("eps", float),
    "rules": ("rule", str),
    "calibrations": ("calibrations", int),
    "alpha": ("alpha", float),
    "seed": ("seed", int),
}


def audit_schemes(label_probs):
    """The distinct (scheme, labelling probability) cells for the probabilities ``label_probs``.

    ``full`` is π = 1, and ``bernoulli`` at π = 1 would query every item exactly like ``full``, so
    both appear once, as (full, 1).
    """
    cells = [("resample", float(p)) for p in label_probs]
    cells += [("bernoulli", float(p)) for p in label_probs if p < 1]
    cells.append(("full", 1.0))
    return cells


def audit_cell(pop, n, seeds, scheme, label_prob, settings):
    """The rows of one (n, scheme, π) cell: every bound, rule, ε and group (notebook 13 explains each step).

    ``settings`` holds the audit's settings (:data:`AUDIT_SETTINGS`, :func:`settings_of`); a cell reads its
    ``bounds``, ``rules``, ``eps_list``, ``alpha`` and ``calibrations``.

    For each group, ``calibrations`` independent calibration sets of ``n`` items (the same sets for every
    scheme and bound of this ``n``: common random numbers), the labels of the scheme drawn once, every
    bound's UCB curve on the candidate grid in one batched call, a threshold per rule and ε, and the exact
    risk ``R(û | G_j)`` of the population: the violation rate is the share of calibrations with
    ``R(û | G_j) > ε``. ``ucb_seconds`` is the time of a bound's curves on this machine.
    """
    bounds, rules, eps_list = settings["bounds"], settings["rules"], settings["eps_list"]
    alpha, calibrations = float(settings["alpha"]), int(settings["calibrations"])
    names, n_groups = pop.names, len(pop.names)
    rng = np.random.default_rng(seeds[:2] + [int(n)])  # same calibration sets for every scheme
    draws = [pop.group(g).sample((calibrations, int(n)), rng) for g in names]
    loss, scores = (np.concatenate(x) for x in zip(*draws))  # each (groups * calibrations, n)
    d = sampling.draw(scores, loss, scheme, label_prob, np.random.default_rng(seeds + [1]))
    # the oracle's routed share P(U <= u*_j | G_j) per eps and group: the denominator of the oracle ratio
    oracle_share = {
        eps: {g: pop.share(populations.oracle_threshold(pop, eps, g), g) for g in names} for eps in eps_list
    }
    assert all(share > 0 for per_group in oracle_share.values() for share in per_group.values())
    # bounds on the same candidate grid share one call (and its prefix sums): the curves are those of ucb()
    by_grid = {}
    for bound in bounds:
        by_grid.setdefault(selection.resolve_candidates("auto", bound, int(n)), []).append(bound)
    curves = {}
    for same in by_grid.values():
        t0 = time.perf_counter()
        cand = selection.candidate_grid(scores, "auto", same[0])
        ucbs = ucb_many(same, d.z, d.scores, cand, alpha, d.term_range)
        secs = (time.perf_counter() - t0) / len(same)
        curves.update({b: (cand, ucbs[b], secs) for b in same})
    rows = []
    for bound in bounds:
        cand, ucb, secs = curves[bound]
        for rule in rules:
            for eps in eps_list:
                thr = selection.select(cand, ucb, eps, rule).reshape(n_groups, calibrations)
                for gi, g in enumerate(names):
                    risk = pop.risk(thr[gi], g)
                    ratio = pop.share(thr[gi], g) / oracle_share[eps][g]  # -inf (always think) counts as 0
                    rate = float(np.mean(risk > eps))
                    rows.append(
                        {
                            "bound": bound,
                            "kind": BOUNDS[bound].kind,
                            "scheme": scheme,
                            "pi": label_prob,
                            "rule": rule,
                            "n_group": int(n),
                            "eps": eps,
                            "group": g,
                            "calibrations": calibrations,
                            "violation_rate": rate,
                            "mcse": float(mcse(rate, calibrations)),
                            "oracle_ratio": float(np.mean(ratio)),
                            "oracle_ratio_se": float(np.std(ratio, ddof=1) / math.sqrt(calibrations)),
                            "always_think": float(np.mean(~np.isfinite(thr[gi]))),
                            "mean_labels": float(np.mean(d.n_queried.reshape(n_groups, calibrations)[gi])),
                            "ucb_seconds": secs,
                        }
                    )
    return rows


def with_pass(rows, alpha) -> pd.DataFrame:
    """The rows as a table with the pass limit ``alpha + 3 sqrt(alpha (1 - alpha) / calibrations)`` and the verdict."""
    out = pd.DataFrame(rows)
    out["pass_threshold"] = alpha + 3 * np.sqrt(alpha * (1 - alpha) / out["calibrations"])
    out["pass"] = out["violation_rate"] <= out["pass_threshold"]
    return out


def validity_audit(pop, settings: dict):
    """Every cell's rows; a pass is a violation rate <= alpha + 3 sqrt(alpha (1 - alpha) / calibrations).

    ``settings`` holds exactly the keys :data:`AUDIT_SETTINGS` (:func:`settings_of` reads them from notebook 13's
    configuration); a key missing or unknown is refused, naming it.

    Cell ``(n, scheme, π)`` draws from the seeds ``[seed, i, j]``, ``i`` the index of ``n`` in
    ``group_sizes`` and ``j`` that of ``(scheme, π)`` in :func:`audit_schemes`: its rows do not depend on the
    other cells.
    """
    if not isinstance(settings, Mapping):
        raise ParameterError(f"settings: a mapping of {list(AUDIT_SETTINGS)}, got {type(settings).__name__}")
    if set(settings) != set(AUDIT_SETTINGS):
        missing, unknown = sorted(set(AUDIT_SETTINGS) - set(settings)), sorted(set(settings) - set(AUDIT_SETTINGS))
        raise ParameterError(f"settings: missing {missing}, unknown {unknown} (the audit's: {list(AUDIT_SETTINGS)})")
    seed = int(settings["seed"])
    rows = [
        row
        for ni, n in enumerate(settings["group_sizes"])
        for si, (scheme, label_prob) in enumerate(audit_schemes(settings["label_probs"]))
        for row in audit_cell(pop, int(n), [seed, ni, si], scheme, label_prob, settings)
    ]
    return with_pass(rows, float(settings["alpha"]))


def same_rows(got: pd.DataFrame, want: pd.DataFrame) -> bool:
    """Whether two tables hold the same rows: the same columns, dtypes and length, every string, integer and boolean
    equal, every float equal to within :data:`RTOL` relative."""
    if list(got.columns) != list(want.columns) or len(got) != len(want) or not got.dtypes.equals(want.dtypes):
        return False
    floats = [c for c in got.columns if got[c].dtype.kind == "f"]
    exact = [c for c in got.columns if c not in floats]
    close = np.allclose(got[floats].to_numpy(), want[floats].to_numpy(), rtol=RTOL, atol=0.0, equal_nan=True)
    return close and bool((got[exact].to_numpy() == want[exact].to_numpy()).all())


def settings_of(cfg) -> dict:
    """The audit's keyword arguments from notebook 13's configuration (``bounds`` "all": the registry's, now)."""
    settings = {key: cfg[key] for key in AUDIT_SETTINGS}
    if settings["bounds"] == "all":
        settings["bounds"] = list(BOUNDS)
    return settings


def read_audit(path: Path | str = AUDIT_TABLE, *, settings: dict) -> pd.DataFrame:
    """The committed audit at ``path``, refused unless it is the audit of ``settings`` (:func:`settings_of`).

    Its rows are bit for bit those :func:`validity_audit` computes (floats written and read back exactly),
    without the machine's ``ucb_seconds``; the settings it was computed with (``alpha``, ``seed``) are
    columns of the file, checked and dropped.

    Raises
    ------
    DataError
        The file is missing, or holds the audit of other settings (the message names the first that differs).
    """
    path = Path(path)
    shown = as_shown(path)
    if not path.is_file():
        raise DataError(f"{shown}: no audit table; make validity-audit writes it")
    table = pd.read_csv(path)  # pandas 3 reads every float back exactly (write_audit checks it)
    resample = table[table["scheme"] == "resample"]  # label_probs: every π has a resample cell
    for key, (column, kind) in _RECORDED.items():
        # the settings a table covers, in the order of its rows (the order decides each cell's seeds)
        have = list(dict.fromkeys(kind(v) for v in (resample if key == "label_probs" else table)[column]))
        want = [kind(v) for v in settings[key]] if np.ndim(settings[key]) else [kind(settings[key])]
        if have != want:
            raise DataError(
                f"{shown}: holds the audit of {key} = {have}, not {want}; make validity-audit recomputes it "
                "(or compute this audit live: the setting from_table = False)"
            )
    return table.drop(columns=["alpha", "seed"])


def write_audit(path: Path | str = AUDIT_TABLE, *, settings: dict) -> pd.DataFrame:
    """Compute the audit of ``settings`` and write it to ``path`` (CSV, every float exact); returns the rows."""
    audit = validity_audit(populations.AUDIT_POPULATION, settings).drop(columns=list(TIMING))
    out = audit.assign(alpha=float(settings["alpha"]), seed=int(settings["seed"]))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False, lineterminator="\n")
    back = read_audit(path, settings=settings)
    pd.testing.assert_frame_equal(back, audit, check_exact=True)  # what the notebook reads is what was computed
    return audit


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=AUDIT_TABLE, help="the table to write (default %(default)s)")
    parser.add_argument("--profile", default="paper", help="notebook 13's profile whose settings to audit")
    args = parser.parse_args(argv)
    settings = settings_of(config.load("13_validity_audit", args.profile))
    t0 = time.process_time()
    audit = write_audit(args.out, settings=settings)
    print(f"{args.out}: {len(audit)} rows, {time.process_time() - t0:.0f} s of CPU")


if __name__ == "__main__":
    main()
