"""The table notebooks' configuration turned into the library's explicit arguments (for the tests).

The notebooks 21–23 do the same in their own cells: the library never reads a notebook's ``cfg``.
"""

from __future__ import annotations

from gpac_utils import Recipe
from gpac_utils.paper import results_tables as R
from gpac_utils.paper import sources
from gpac_utils.partition import ScorePartitioner


def table_settings(cfg) -> R.TableSettings:
    """The method settings of a table notebook's configuration."""
    return R.TableSettings(
        scores=tuple(cfg.scores),
        alpha=cfg.alpha,
        trials=cfg.trials,
        loss_bound=cfg.loss_bound,
        seed=cfg.seed,
        paper=Recipe(pi=cfg.pi, **cfg.recipe),
        valid=tuple(Recipe(bound=b, pi=cfg.pi, **cfg.valid_recipe) for b in cfg.valid_bounds),
        partitioner=ScorePartitioner(**cfg.partition),
    )


def make_tables(cfg) -> dict[str, R.ResultsTable]:
    """:func:`gpac_utils.paper.results_tables.make_tables` with a table notebook's configuration."""
    source = sources.resolve_source(cfg.data_source, columns=cfg.columns, generated_root=cfg.generated_root)
    return R.make_tables(
        table_settings(cfg),
        family=cfg.family,
        source=source,
        pairs=cfg.pairs,
        eps=cfg.eps,
        cal_ratio=cfg.cal_ratio,
        groupings=cfg.groupings,
        benchmarks=cfg.benchmarks,
        figures=cfg.figures,
    )
