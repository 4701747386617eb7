"""Split C-PAC with ``wsr``: the auto grid over each learned group's interval vs over ``[0, 1]`` (issue 34.6).

On :data:`~gpac_utils.paper.theory.populations.PARTITION_POPULATION` (closed-form risk on any interval),
seeded calibrations of C-PAC (``wsr``, ``full`` labels, first-crossing) with k learned groups, in both modes;
per calibration, the routed share relative to the oracle on the same learned partition (the PAC-optimal
threshold of each learned interval) and, per learned group, whether its risk exceeds ``eps``. ``unit`` runs
the same fits with every group's grid over ``[0, 1]`` (the behaviour before), ``interval`` the current one
(split mode only; joint mode keeps ``[0, 1]``: :mod:`gpac_utils.selection`), ``scores`` every distinct
calibration score (``candidates="all"``: valid too, but ``wsr``'s cost grows with it).

    PYTHONPATH=$PWD python benchmarks/cpac_wsr_grid.py --trials 300 --n 2000
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import pandas as pd

from gpac_utils import CPAC, GroupWarning, Recipe, ScorePartitioner
from gpac_utils.paper.theory.populations import PARTITION_POPULATION, sup_feasible


class UnitGridCPAC(CPAC):
    """C-PAC with every group's grid over [0, 1] (the behaviour before issue 34.6)."""

    def intervals(self):
        return {}


def one(pop, cls, k, mode, n, eps, alpha, seed, candidates="auto"):
    loss, u, _ = pop.sample(n, np.random.default_rng([seed, 0]))
    recipe = Recipe(bound="wsr", candidates=candidates)
    c = cls(eps, alpha, recipe, partitioner=ScorePartitioner(k=k), mode=mode, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        c.fit(u, loss)
    ends = np.array([0.0, *np.clip(c.partition_.boundaries, 0, 1), 1.0])
    lo, hi = ends[:-1], ends[1:]
    thr = np.array([c.thresholds_.get(f"c{j}", -math.inf) for j in range(len(lo))])
    oracle = sup_feasible(lambda x: pop.interval_risk(x, lo, hi), eps, lo, hi)
    oracle = np.where(np.isposinf(oracle), hi, oracle)
    mass = pop.mass(lo, hi)
    share = pop.mass(lo, np.clip(np.maximum(thr, lo), lo, hi)).sum()
    oracle_share = pop.mass(lo, np.clip(np.maximum(oracle, lo), lo, hi)).sum()
    risk = pop.interval_risk(np.where(np.isfinite(thr), thr, lo), lo, hi)
    return share / oracle_share, (risk > eps) & (mass > 0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("-o", "--output", default=None, help="CSV of the summary")
    a = ap.parse_args(argv)
    rows = []
    for k in (3, 5):
        for mode in ("split", "joint"):
            for grid, cls, cand in (
                ("unit", UnitGridCPAC, "auto"),
                ("interval", CPAC, "auto"),
                ("scores", CPAC, "all"),
            ):
                res = [one(PARTITION_POPULATION, cls, k, mode, a.n, a.eps, a.alpha, s, cand) for s in range(a.trials)]
                ratio = np.array([r for r, _ in res])
                worst = max(float(np.mean([v[j] for _, v in res if j < len(v)])) for j in range(k))
                rows.append(
                    {
                        "k": k,
                        "mode": mode,
                        "grid": grid,
                        "trials": a.trials,
                        "oracle_ratio": ratio.mean(),
                        "oracle_ratio_se": ratio.std(ddof=1) / math.sqrt(a.trials),
                        "worst_group_violation": worst,
                        "mcse": math.sqrt(a.alpha * (1 - a.alpha) / a.trials),
                    }
                )
                print(rows[-1], flush=True)
    out = pd.DataFrame(rows)
    print(out.round(4).to_string(index=False))
    if a.output:
        out.to_csv(a.output, index=False)


if __name__ == "__main__":
    main()
