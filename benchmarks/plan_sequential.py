"""What the sequential mode costs against the planned fixed-n route, on the deployment case's populations (issue 53).

For each population of ``benchmarks/plan_realdata.py``'s deployment case (the real tables of ``data/real/`` and
the simulated populations ``sim0`` ... ``sim5``, each a finite table taken as the population), each ``eps`` (0.05,
0.1; alpha 0.1, as the planner's benchmark) and ``--reps`` repetitions:

1. **A fresh pool.** Each group's rows are drawn i.i.d. from its population rows, as many as it has (the
   deployment case: calibration labels are fresh draws).
2. **Label sequentially** (:mod:`gpac_utils.sequential_labels`, its defaults: the mixture bet, batches of 10, a grid
   of 50 score quantiles, no correction), with the planner benchmark's label budget (half the population's rows),
   feeding the losses of the rows the mode asks for, until every group has stopped.
3. **Read off the population**: per group the labels spent, its status, the routed share of its population rows at
   its threshold, and the **exact** joint risk there (the mean of ``loss 1{score <= t}`` over its population rows):
   a violation when above ``eps``.

Compared with the planner (``benchmarks/plan_deploy_groups.csv``, ``make plan-benchmark``): its labels are the
pilot's plus the planned calibration labels, its routed share the realised mean over fresh calibrations at the
planned counts; both as shares of all traffic, mean over pilot draws. Writes ``<out>.csv`` (one row per population,
eps and route: ``sequential``, ``planned (pilot 10 %)``, ``planned (pilot 25 %)``; labels, routed share of all
traffic, certified share of groups) and ``<out>_groups.csv`` (the sequential runs per group and repetition, with
``violation``). About 2 minutes on two cores.

Usage: python benchmarks/plan_sequential.py [--reps 20] [--out benchmarks/plan_sequential]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_realdata  # noqa: E402

from gpac_utils import sequential_labels  # noqa: E402
from gpac_utils.workflow import paths  # noqa: E402

ALPHA = 0.1


def run(populations, eps_values, reps: int) -> pd.DataFrame:
    """One row per (population, eps, repetition, group): the sequential run read off the population."""
    out = []
    for pname in populations:
        df = plan_realdata.population(pname)
        s, loss, g = df["score"].to_numpy(float), df["loss"].to_numpy(float), df["group"].to_numpy(str)
        names = sorted(set(g.tolist()))
        rows = {x: np.flatnonzero(g == x) for x in names}
        budget = int(round(0.5 * g.size))  # the planner benchmark's budget
        for eps in eps_values:
            for r in range(reps):
                rng = np.random.default_rng([r, int(eps * 1000), 54])
                pool = np.concatenate([rng.choice(rows[x], rows[x].size, replace=True) for x in names])
                ps, pl, pg = s[pool], loss[pool], g[pool]
                state = sequential_labels.start(ps, pg, eps=eps, alpha=ALPHA, budget=budget, seed=r)
                sequential_labels.update(state, ps, pl)
                while sequential_labels.next_rows(state):
                    sequential_labels.update(state, ps, pl)
                for x in names:
                    e = state["groups"][x]
                    t = -np.inf if e["threshold"] is None else float(e["threshold"])
                    at = s[rows[x]] <= t
                    risk = float(np.mean(loss[rows[x]] * at))
                    out.append(
                        {
                            "population": pname,
                            "eps": eps,
                            "rep": r,
                            "group": x,
                            "traffic": rows[x].size / g.size,
                            "labels": int(e["requested"]),
                            "status": e["status"],
                            "routed": float(at.mean()),
                            "risk": risk,
                            "violation": risk > eps,
                        }
                    )
    return pd.DataFrame(out)


def compare(seq: pd.DataFrame, planned: pd.DataFrame) -> pd.DataFrame:
    """Per population and eps: labels, routed share of all traffic and certified share of groups, per route."""
    out = []
    per_rep = seq.assign(w=seq["traffic"] * seq["routed"], c=seq["status"] == "certified")
    per_rep = per_rep.groupby(["population", "eps", "rep"]).agg(
        labels=("labels", "sum"), routed=("w", "sum"), certified=("c", "mean")
    )
    for (pop, eps), r in per_rep.groupby(level=["population", "eps"]):
        out.append({"population": pop, "eps": eps, "route": "sequential", **r.mean().to_dict(), "draws": len(r)})
    planned = planned.assign(
        w=planned["traffic"] * planned["real_mean"], labels=planned["pilot_n"] + planned["n_labels"]
    )
    per_pilot = planned.groupby(["population", "eps", "pilot_share", "pilot"]).agg(
        labels=("labels", "sum"), routed=("w", "sum"), certified=("real_cert", "mean")
    )
    for (pop, eps, share), r in per_pilot.groupby(level=["population", "eps", "pilot_share"]):
        route = f"planned (pilot {share:.0%})"
        out.append({"population": pop, "eps": eps, "route": route, **r.mean().to_dict(), "draws": len(r)})
    return pd.DataFrame(out).sort_values(["population", "eps", "route"], kind="stable").reset_index(drop=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/plan_sequential"))
    ap.add_argument("--planned", type=Path, default=Path("benchmarks/plan_deploy_groups.csv"))
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    planned = pd.read_csv(paths.REPO_ROOT / a.planned if not a.planned.is_absolute() else a.planned)
    pops = list(dict.fromkeys(planned["population"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seq = run(pops, sorted(set(planned["eps"])), a.reps)
    table = compare(seq, planned)
    out = a.out if a.out.is_absolute() else paths.REPO_ROOT / a.out
    seq.to_csv(out.with_name(out.name + "_groups.csv"), index=False, float_format="%.4f", lineterminator="\n")
    table.to_csv(out.with_name(out.name + ".csv"), index=False, float_format="%.4f", lineterminator="\n")
    with pd.option_context("display.width", 200):
        print(table.round(3).to_string(index=False))
    print(f"sequential: violation rate {seq['violation'].mean():.4f} over {len(seq)} (group, run) cases")
    print(f"elapsed_s={time.perf_counter() - t0:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
