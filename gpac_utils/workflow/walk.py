"""``make walk``: the whole walk on CPU, from generation to a table, with the tiny model, in minutes.

Four notebooks through papermill (:func:`gpac_utils.workflow.runner.run_notebook`), everything
under one folder (default ``build/walk/``, never the committed ``figures/``):

1. ``01_generate`` on its ``fast`` profile: the tiny SmolLM2-135M-Instruct plays both roles on the
   shipped ``data/walk/items.jsonl`` (:data:`gpac_utils.llm.generation.WALK_SAMPLING`), records under ``generations/``;
2. ``02_scores`` (``fast``): grades and scores them into ``generated/<benchmark>__<pair>.parquet``;
3. ``21_table_known_groups`` with ``data_source="generated"`` (groups = the items' subjects,
   eps = ``--eps``: the walk is not a paper benchmark, so it has no paper eps; calibration ratio
   0.5, the default for benchmarks outside the paper);
4. ``25_ece_scores`` with ``data_source="generated"``.

Then it prints the layout and the per-group table of notebook 21 and the ECE table of 25, and
checks the committed generated table ``data/generated/arith__smollm2.parquet``: it regenerates a
few of its items per group and compares the records (:func:`gpac_utils.llm.arith_check.check`;
exact on the vLLM engine that wrote it, the greedy ``think`` role only on transformers).
The benchmark and pair are those of ``01_generate``'s ``fast`` profile (``walk``, ``smollm2``).

Command line::

    python -m gpac_utils.workflow.walk [--out build/walk] [--n-items N] [--eps 0.3] [--n-trials 5] [--timeout S]
        [--check-per-group 2]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..checks import check_int
from ..llm import arith_check
from ..settings import EPS
from . import config
from .paths import BUILD, NOTEBOOKS, REPO_ROOT
from .runner import NotebookFailed, duration, run_notebook

#: Where the walk writes by default.
WALK_DIR = BUILD / "walk"
#: eps of the walk's tables (its loss rate is about 0.2: the tiny model's think role is seldom right).
WALK_EPS = 0.3
#: The notebooks of the walk, in order.
WALK_NOTEBOOKS = ("01_generate", "02_scores", "21_table_known_groups", "25_ece_scores")


@dataclass
class WalkResult:
    """What a walk produced.

    Attributes
    ----------
    out : pathlib.Path
        The walk's folder.
    benchmark, pair : str
        The generated table's benchmark and pair.
    seconds : dict of str to float
        Wall time per notebook.
    notebooks : dict of str to pathlib.Path
        The executed notebooks.
    """

    out: Path
    benchmark: str
    pair: str
    seconds: dict = field(default_factory=dict)
    notebooks: dict = field(default_factory=dict)

    @property
    def generations(self) -> Path:
        """The run folder of ``01_generate``."""
        return self.out / "generations" / f"{self.benchmark}__{self.pair}"

    @property
    def scored_table(self) -> Path:
        """The scored table of ``02_scores``."""
        return self.out / "generated" / f"{self.benchmark}__{self.pair}.parquet"

    @property
    def tables(self) -> Path:
        """Where the notebooks' tables went."""
        return self.out / "figures" / "tables"

    @property
    def table_name(self) -> str:
        """File stem of notebook 21's long table."""
        return f"known__generated__{self.pair}"


def walk_target() -> tuple[str, str]:
    """The walk's ``(benchmark, pair)``: those of ``01_generate``'s ``fast`` profile."""
    raw = config.read_config("01_generate")
    values = {**raw["common"], **(raw["profiles"]["fast"] or {})}
    return str(values["benchmark"]), str(values["pair"])


def run_walk(
    out: str | Path = WALK_DIR,
    *,
    n_items: int | None = None,
    eps: float = WALK_EPS,
    n_trials: int | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
    progress_bar: bool = False,
) -> WalkResult:
    """Run 01 → 02 → 21 → 25 on the ``fast`` profile, everything under ``out``.

    Parameters
    ----------
    out : str or Path, default ``build/walk``
        The walk's folder (relative: from the repository root); executed notebooks, generations,
        the scored table and the figures and tables (``figures/``) go there.
    n_items : int, optional
        A seeded subset of the walk's 48 items (``None``: all).
    eps : float, default 0.3
        eps of the table notebook.
    n_trials : int, optional
        Trials of the table notebook (``None``: the ``fast`` profile's, 5).
    max_tokens : int, optional
        The thinking role's token limit in 01 (``None``: the ``fast`` profile's, 64); its generation is most of
        the walk's time (the test suite's walk uses 32: the same pipeline at half the cost).
    timeout : float, optional
        Per-cell timeout (default: the runner's for ``fast``).
    progress_bar : bool, default False
        papermill's progress bars.

    Returns
    -------
    WalkResult

    Raises
    ------
    gpac_utils.workflow.runner.NotebookFailed
        A notebook failed; its executed copy (with the error) is kept under ``out``.
    """
    out = (REPO_ROOT / out).resolve()  # an absolute ``out`` stays as it is
    eps = EPS.check(eps)  # its declaration: 0 < eps < loss_bound (1)
    n_items, max_tokens = (
        None if v is None else check_int(k, v, 1) for k, v in [("n_items", n_items), ("max_tokens", max_tokens)]
    )
    benchmark, pair = walk_target()
    generations, generated = str(out / "generations"), str(out / "generated")
    source = {"benchmarks": [benchmark], "generated_root": generated}
    table = {"data_source": "generated", "pairs": [pair], "eps": eps, "overrides": source}
    params = {
        "01_generate": {
            "n_items": n_items,
            "overrides": {"generations_root": generations, **({"max_tokens": max_tokens} if max_tokens else {})},
        },
        "02_scores": {"overrides": {"generations_root": generations, "output_root": generated}},
        "21_table_known_groups": {**table, **({"n_trials": n_trials} if n_trials else {})},
        "25_ece_scores": {"data_source": "generated", "pair": pair, "overrides": source},
    }
    result = WalkResult(out, benchmark, pair)
    for stem in WALK_NOTEBOOKS:
        print(f"== walk: {stem}", flush=True)
        nb = run_notebook(
            NOTEBOOKS / f"{stem}.py",
            "fast",
            params[stem],
            out,
            timeout,
            figures_dir=out / "figures",
            progress_bar=progress_bar,
        )
        result.notebooks[stem], result.seconds[stem] = nb, duration(nb)
        print(f"   {stem}: {result.seconds[stem]:.1f} s", flush=True)
    return result


def walk_report(result: WalkResult) -> str:
    """The tables a walk produced, as text: notebook 21's layout and per-group table, 25's ECE.

    Parameters
    ----------
    result : WalkResult
        From :func:`run_walk`.

    Returns
    -------
    str
    """
    parts = []
    for stem, title in (
        (f"{result.table_name}_layout", "21_table_known_groups: the layout (ours; no paper numbers)"),
        (f"{result.table_name}_groups", "21_table_known_groups: mean test error per group (%), paper recipe"),
        (f"ece_scores__generated__{result.pair}", "25_ece_scores: ECE per score (%)"),
    ):
        md = result.tables / f"{stem}.md"
        parts.append(f"== {title}\n{md.read_text().rstrip() if md.exists() else f'(missing: {md})'}")
    times = ", ".join(f"{k} {v:.0f} s" for k, v in result.seconds.items())
    parts.append(f"walk: {sum(result.seconds.values()):.0f} s in the notebooks ({times}); outputs in {result.out}")
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpac_utils.workflow.walk``: run the walk and print its tables."""
    ap = argparse.ArgumentParser(prog="python -m gpac_utils.workflow.walk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=WALK_DIR, help="output folder (default build/walk)")
    ap.add_argument("--n-items", type=int, help="a seeded subset of the walk's items (default: all)")
    ap.add_argument("--eps", type=float, default=WALK_EPS, help=f"eps of the table notebook (default {WALK_EPS})")
    ap.add_argument("--n-trials", type=int, help="trials of the table notebook (default: the fast profile's)")
    ap.add_argument("--max-tokens", type=int, help="the thinking role's token limit (default: the fast profile's, 64)")
    ap.add_argument("--timeout", type=float, help="per-cell timeout in seconds (default: the fast profile's)")
    ap.add_argument("--check-per-group", type=int, default=2, help="arith items per group to regenerate (0: no check)")
    a = ap.parse_args(argv)
    try:
        result = run_walk(
            a.out, n_items=a.n_items, eps=a.eps, n_trials=a.n_trials, max_tokens=a.max_tokens, timeout=a.timeout
        )
    except (NotebookFailed, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\n{walk_report(result)}")
    if a.check_per_group > 0:
        check = arith_check.check(Path(a.out) / "arith-check", n_per_group=a.check_per_group)
        print(f"\n== the committed generated table {arith_check.TABLE.name}: {check.summary()}")
        return 0 if check.passed else 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
