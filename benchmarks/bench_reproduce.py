"""Time the library calls behind the slowest notebooks of ``make reproduce`` (paper profile), one by one.

Each row runs one call exactly as its notebook does with the ``paper`` configuration (nothing
lowered) in this process, with the cores it is given: the learned partitions' routed shares and
the grid search for the best interval partition (11) and the simulated label-planning curves (32).
(The Prop. 3.3 scan of 10, the validity audit of 13 and the quickstart sweep of 00 are steps of
their notebooks; ``--workflow`` times every notebook.)

``--workflow`` times the whole ``make reproduce`` instead (Snakemake, paper profile, 2 jobs): a
full run (every executed notebook removed first; it writes the per-notebook times papermill
recorded, ``metadata.papermill.duration`` of each ``build/paper/<name>.ipynb``, to
``benchmarks/reproduce_timings.csv``), then three incremental runs around one notebook (``--touch``,
default ``26_concept_figure``): after ``touch`` (new mtime, same content: Snakemake compares
checksums, nothing runs), after an edit (that notebook alone runs), after restoring it (again).

``--cells`` writes ``benchmarks/reproduce_cells.csv`` from the executed notebooks of the last run
(``build/paper/*.ipynb``, nothing is run): per notebook the seconds of its cells (papermill's
``metadata.papermill.duration`` of each cell, summed) and its slowest cell, with that cell's first line,
longest first.

Usage: python benchmarks/bench_reproduce.py [--only NAME ...]
       python benchmarks/bench_reproduce.py --workflow [--touch NOTEBOOK] [--jobs 2] [--no-full]
       python benchmarks/bench_reproduce.py --cells
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import re
import subprocess
import sys
import time

import numpy as np

from gpac_utils import data, prediction
from gpac_utils.paper.theory import partition_gap, populations
from gpac_utils.recipe import as_recipe
from gpac_utils.settings import Settings
from gpac_utils.workflow import config, paths, runner


def partition_rows():
    cfg = config.load("11_partition_gap", "paper")
    pop, ref = populations.PARTITION_POPULATION, populations.PARTITION_GENERATING
    rng = np.random.default_rng(cfg.seed)
    learned = np.sort(rng.random((len(cfg.n_grid) * cfg.n_trials * 2, cfg.k - 1)), axis=1)  # as many as notebook 11
    share = partition_gap.interval_partition_routed_share
    yield "11 interval_partition_routed_share", lambda: share(pop, learned, cfg.eps)
    yield "11 interval_confusion", lambda: [partition_gap.interval_confusion(pop, b, ref) for b in learned]
    pts = np.linspace(0, 1, int(cfg.search_grid) + 1)[1:-1]
    grid = np.array(list(itertools.combinations(pts, cfg.k - 1)))  # notebook 11's search for the best partition
    yield "11 best interval partition (grid search)", lambda: share(pop, grid, cfg.eps)


def planning_rows():
    cfg = config.load("32_label_budget", "paper")
    sim = data.read_table(paths.REPO_ROOT / cfg.sim_table)

    def curves():
        for score in cfg.sim_scores:
            prediction.predict(
                sim[score],
                sim["group"],
                sim[score],
                sim["loss"],
                sim["group"],
                settings=Settings(eps=cfg.sim_eps, alpha=cfg.alpha, recipe=as_recipe(cfg.recipe), seed=cfg.seed),
                spec=prediction.PlanSpec(n_grid=cfg.sim_grid, n_resamples=cfg.n_resamples),
            )

    yield "32 predict (simulated)", curves


def snakemake(jobs: int) -> tuple[float, str]:
    """Run the paper-profile workflow; return its wall time and Snakemake's log."""
    cmd = [sys.executable, "-m", "snakemake", "-s", "workflow/Snakefile", "--cores", str(jobs)]
    cmd += ["--config", "profile=paper"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=paths.REPO_ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"snakemake failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0, done.stderr


def ran(log: str) -> list[str]:
    """The notebooks a Snakemake run executed (its log's ``Finished jobid: N (Rule: nb_<name>)`` lines)."""
    return sorted(re.findall(r"\(Rule: nb_(\S+)\)", log))


def workflow(touch: str, jobs: int, full: bool) -> int:
    """Full run, then reruns after touching and after editing one notebook; write reproduce_timings.csv."""
    build = paths.BUILD / "paper"
    if full:
        for executed in build.glob("*.ipynb"):
            executed.unlink()
        seconds, log = snakemake(jobs)
        rows = [(p.stem, f"{runner.duration(p):.1f}") for p in sorted(build.glob("*.ipynb"))]
        out = paths.REPO_ROOT / "benchmarks" / "reproduce_timings.csv"
        with out.open("w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows([("notebook", "seconds"), *rows])
        print(f"full run: {seconds:.0f} s, ran {len(ran(log))} notebooks ({jobs} jobs); per notebook in {out.name}")
    path = runner.resolve_notebook(touch)
    os.utime(path)  # a new mtime, the same content: Snakemake compares checksums, nothing reruns
    seconds, log = snakemake(jobs)
    print(f"after `touch {path.name}`: {seconds:.0f} s, ran {ran(log)}")
    text = path.read_text()
    try:
        path.write_text(text + "\n# edited by bench_reproduce.py\n")
        seconds, log = snakemake(jobs)
        print(f"after editing {path.name}: {seconds:.0f} s, ran {ran(log)}")
    finally:
        path.write_text(text)
    seconds, log = snakemake(jobs)
    print(f"after restoring it: {seconds:.0f} s, ran {ran(log)}")
    return 0


def cells() -> int:
    """Write benchmarks/reproduce_cells.csv from build/paper/*.ipynb (module description)."""
    import json

    rows = []
    for path in sorted((paths.BUILD / "paper").glob("*.ipynb")):
        timed = [
            (float(c["metadata"]["papermill"]["duration"]), "".join(c["source"]).splitlines()[0][:70])
            for c in json.loads(path.read_text())["cells"]
            if c.get("metadata", {}).get("papermill", {}).get("duration")
        ]
        slowest = max(timed)
        rows.append((path.stem, round(sum(d for d, _ in timed), 1), round(slowest[0], 1), slowest[1]))
    if not rows:
        raise SystemExit("build/paper/ holds no executed notebook: make reproduce first")
    rows.sort(key=lambda r: -r[1])
    out = paths.REPO_ROOT / "benchmarks" / "reproduce_cells.csv"
    with out.open("w", newline="") as fh:
        header = ("notebook", "cells_seconds", "slowest_cell_seconds", "slowest_cell_first_line")
        csv.writer(fh, lineterminator="\n").writerows([header, *rows])
    print(f"{out.name}: {len(rows)} notebooks, {sum(r[1] for r in rows):.1f} s of cells")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="rows whose name contains one of these strings")
    ap.add_argument("--workflow", action="store_true", help="time make reproduce: a full and an incremental run")
    ap.add_argument("--touch", default="26_concept_figure", help="the notebook touched, then edited")
    ap.add_argument("--no-full", action="store_true", help="skip the full run (reuse build/paper/)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cells", action="store_true", help="write reproduce_cells.csv from build/paper/ (no run)")
    a = ap.parse_args(argv)
    if a.cells:
        return cells()
    if a.workflow:
        return workflow(a.touch, a.jobs, not a.no_full)
    rows = [*partition_rows(), *planning_rows()]
    if a.only:
        rows = [(name, fn) for name, fn in rows if any(s in name for s in a.only)]
    print(f"{'call':<32} {'seconds':>8}")
    total = 0.0
    for name, fn in rows:
        t0 = time.perf_counter()
        fn()
        secs = time.perf_counter() - t0
        total += secs
        print(f"{name:<32} {secs:8.1f}", flush=True)
    print(f"{'total':<32} {total:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
