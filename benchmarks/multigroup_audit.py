"""Validity audit and efficiency of the calibrators of overlapping groups (issue 54; notebook 36 reads the output).

On the populations of :mod:`gpac_utils.paper.theory.overlap` (several independent groupings, a loss
curve ``a_c u^k`` per cell: every group's joint risk is exact), each method is calibrated
``--calibrations`` times per calibration size, and for every group the violation event
``R(u_hat | G) > eps`` is read off the population, with the routed share. The methods:

* ``min`` (:class:`~gpac_utils.multigroup.MinGPAC`, ``correction="none"``): each group separately at alpha;
* ``min-bonferroni``: the same, all groups at once (each at alpha / m);
* ``shift`` (:class:`~gpac_utils.multigroup.ShiftGPAC`, ``correction="none"``): each group separately at alpha;
* ``shift-bonferroni``: the same, all groups at once (each at alpha / m);
* ``path`` (:class:`~gpac_utils.multigroup.PathGPAC`): all groups at once at alpha;
* ``cells-bonferroni``: G-PAC on the intersections (the cells) with Bonferroni over the cells (the
  guarantee then holds for every cell, hence every group, at once);
* ``last-column``: G-PAC on the last grouping alone, what ``gpac calibrate --group-col a --group-col b``
  did before: no guarantee for the other grouping's groups (a negative control).

Rows (``benchmarks/multigroup_audit.csv``), one per (population, n, method, group) and one per
(population, n, method) with ``group = "any"`` (the simultaneous event: some group violates):
``violation_rate``, ``mcse`` (sqrt(alpha (1 - alpha) / calibrations)), ``pass`` (violation rate at most
alpha + 3 mcse), ``routed_share`` (mean over calibrations; ``"any"``: of the whole population).

**Real table** (``benchmarks/multigroup_realdata.csv``): ``data/real/mathl5_zeroeval.csv`` (721 MATH Level-5
problems, o1-mini vs gpt-4o-mini, score ``weak_uncertainty_disagree``) with two groupings: the MATH subject
(7 groups) and ``item_id mod 3`` (3 groups). The second grouping is known at routing time and independent of the
losses by construction (the table stores no problem text, so no length of the question exists; the reply lengths
are outputs of the models, not attributes of the question). ``--real-splits`` random halves calibrate, the other
halves test: per (method, group) the mean routed share and the mean test risk ``mean(loss * routed)``, at
``REAL_EPS``.

Usage: python benchmarks/multigroup_audit.py [--calibrations 200] [--out benchmarks/multigroup_audit.csv]
(``make multigroup-audit``; about 10 minutes on two cores with the defaults). ``--fast``: 20 calibrations, one n.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
import pandas as pd

from gpac_utils.calibrate import GPAC, GroupWarning
from gpac_utils.multigroup import SEP, MinGPAC, PathGPAC, ShiftGPAC
from gpac_utils.paper.theory.overlap import POPULATIONS

EPS, ALPHA = 0.05, 0.05
SIZES = (1000, 4000)
METHODS = ("min", "min-bonferroni", "shift", "shift-bonferroni", "path", "cells-bonferroni", "last-column")
#: The guarantee each method claims: per group ("each"), all groups at once ("all") or none.
CLAIMS = {
    "min": "each",
    "min-bonferroni": "all",
    "shift": "each",
    "shift-bonferroni": "all",
    "path": "all",
    "cells-bonferroni": "all",
    "last-column": "none",
}


def calibrate(method: str, u, loss, labels: dict, seed: int) -> dict:
    """One calibration of ``method``: its threshold per cell (cell labels of :mod:`gpac_utils.multigroup`)."""
    if method == "min":
        return MinGPAC(EPS, ALPHA, seed=seed).fit(u, loss, labels).thresholds_
    if method == "min-bonferroni":
        return MinGPAC(EPS, ALPHA, seed=seed, correction="bonferroni").fit(u, loss, labels).thresholds_
    if method == "shift":
        return ShiftGPAC(EPS, ALPHA, seed=seed).fit(u, loss, labels).thresholds_
    if method == "shift-bonferroni":
        return ShiftGPAC(EPS, ALPHA, seed=seed, correction="bonferroni").fit(u, loss, labels).thresholds_
    if method == "path":
        return PathGPAC(EPS, ALPHA, seed=seed).fit(u, loss, labels).thresholds_
    parts = [np.char.add(f"{g}=", v) for g, v in labels.items()]
    cells = parts[0]
    for p in parts[1:]:
        cells = np.char.add(np.char.add(cells, SEP), p)
    if method == "cells-bonferroni":
        return GPAC(EPS, ALPHA, seed=seed, correction="bonferroni").fit(u, loss, cells).thresholds_
    if method == "last-column":
        last = list(labels)[-1]
        t = GPAC(EPS, ALPHA, seed=seed).fit(u, loss, labels[last]).thresholds_
        return {c: t[c.split(SEP)[-1].split("=", 1)[1]] for c in np.unique(cells).tolist()}
    raise ValueError(f"method: unknown {method!r}")


def audit(calibrations: int, sizes=SIZES, populations=None, methods=METHODS, seed: int = 0) -> pd.DataFrame:
    """Every (population, n, method, group) row (module description)."""
    rows = []
    for pi, (name, pop) in enumerate((populations or POPULATIONS).items()):
        for n in sizes:
            per = {m: [] for m in methods}
            for r in range(calibrations):
                rng = np.random.default_rng([seed, pi, int(n), r])
                u, loss, labels = pop.sample(int(n), rng)
                for m in methods:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", GroupWarning)
                        thr = calibrate(m, u, loss, labels, r)
                    per[m].append((pop.risk(thr), pop.share(thr)))
            for m, runs in per.items():
                for g in [*pop.groups, "any"]:
                    if g == "any":
                        viol = [max(risk[h] > EPS for h in pop.groups) for risk, _ in runs]
                        share = [sh["all"] for _, sh in runs]
                    else:
                        viol = [risk[g] > EPS for risk, _ in runs]
                        share = [sh[g] for _, sh in runs]
                    rate = float(np.mean(viol))
                    se = math.sqrt(ALPHA * (1 - ALPHA) / calibrations)
                    rows.append(
                        {
                            "population": name,
                            "n": int(n),
                            "method": m,
                            "claim": CLAIMS[m],
                            "group": g,
                            "calibrations": calibrations,
                            "violation_rate": rate,
                            "mcse": se,
                            "pass": rate <= ALPHA + 3 * se,
                            "routed_share": float(np.mean(share)),
                        }
                    )
    return pd.DataFrame(rows)


REAL_EPS = 0.15


def realdata(splits: int, seed: int = 0) -> pd.DataFrame:
    """The real table's rows (module description)."""
    from gpac_utils.paper import realdata as _real

    table = _real.read_raw("data/real/mathl5_zeroeval.csv")
    u = table["weak_uncertainty_disagree"].to_numpy(float)
    loss = table["loss"].to_numpy(float)
    labels = {"subject": table["group"].to_numpy(str), "id3": (table["item_id"] % 3).astype(str).to_numpy()}
    rows = []
    for r in range(splits):
        perm = np.random.default_rng([seed, r]).permutation(u.size)
        cal, test = perm[: u.size // 2], perm[u.size // 2 :]
        for m in METHODS[:-1]:
            global EPS
            saved, EPS = EPS, REAL_EPS
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GroupWarning)
                    thr = calibrate(m, u[cal], loss[cal], {k: v[cal] for k, v in labels.items()}, r)
            finally:
                EPS = saved
            cells = np.char.add(
                np.char.add("subject=", labels["subject"][test]), np.char.add(SEP + "id3=", labels["id3"][test])
            )
            t = np.array([thr.get(c, -np.inf) for c in cells.tolist()])
            routed = u[test] <= t
            for g, col in [("all", None)] + [(f"{k}={v}", k) for k in labels for v in np.unique(labels[k]).tolist()]:
                at = np.ones(test.size, bool) if col is None else labels[col][test] == g.split("=", 1)[1]
                rows.append(
                    {
                        "split": r,
                        "method": m,
                        "group": g,
                        "n_test": int(at.sum()),
                        "routed_share": float(routed[at].mean()),
                        "test_risk": float((loss[test] * routed)[at].mean()),
                    }
                )
    out = pd.DataFrame(rows)
    return out.groupby(["method", "group"], sort=False, as_index=False).agg(
        n_test=("n_test", "mean"),
        routed_share=("routed_share", "mean"),
        test_risk=("test_risk", "mean"),
        splits=("split", "size"),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrations", type=int, default=200)
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--out", default="benchmarks/multigroup_audit.csv")
    parser.add_argument("--real-splits", type=int, default=100)
    parser.add_argument("--real-out", default="benchmarks/multigroup_realdata.csv")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    out = audit(20, sizes=SIZES[:1]) if args.fast else audit(args.calibrations)
    out.to_csv(args.out, index=False, float_format="%.6g", lineterminator="\n")
    print(f"{len(out)} rows in {time.perf_counter() - t0:.0f} s -> {args.out}")
    print(out[out["group"] == "any"].to_string(index=False))
    real = realdata(5 if args.fast else args.real_splits)
    real.to_csv(args.real_out, index=False, float_format="%.6g", lineterminator="\n")
    print(real[real["group"] == "all"].to_string(index=False))


if __name__ == "__main__":
    main()
