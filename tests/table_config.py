"""The table notebooks' configuration turned into the library's explicit arguments (for the tests).

The notebooks 21–23 do the same in their own cells: the library never reads a notebook's ``cfg``.
"""

from __future__ import annotations

from gpac_utils.paper import results_tables as R
from gpac_utils.paper import sources


def table_settings(cfg) -> R.TableSettings:
    """The method settings of a table notebook's configuration."""
    keys = ("scores", "pi", "recipe", "valid_bounds", "valid_recipe", "partition")
    keys += ("alpha", "trials", "loss_bound", "seed")
    return R.table_settings(**{k: cfg[k] for k in keys})


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
