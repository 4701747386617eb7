r"""Where the table notebooks' data come from: one parameter, ``data_source``.

Every notebook from 20 to 26, and 31, takes ``data_source``:

* ``"simulated"`` (the default of 20–26): the embedded stand-ins ``data/simulated/<benchmark>__<pair>.parquet``
  (:func:`gpac_utils.paper.simulate.load_simulated`);
* ``"generated"``: the scored tables that ``02_scores`` wrote,
  ``<generated_root>/<benchmark>__<pair>.parquet`` (default root ``data/generated``);
* a path to any table in the data schema (CSV, TSV, parquet, JSON lines), with a column mapping
  (config key ``columns``, e.g. ``{strong_correct: think_correct, weak_correct: nothink_correct}``).

Every table is read by :func:`gpac_utils.data.read_table` (the CLI's reader) and validated; then
:func:`check_table` checks that it has what the notebook needs (:data:`NEEDS`: known groups for
21, 24 and 26; correctness columns for 20 and 25; the score columns asked for; enough rows) and
otherwise raises :class:`SourceError`, one line saying what is missing and what works instead.
Token counts are optional everywhere: without them STP is not computed (NaN in the long tables,
its row dropped from the layouts, see :func:`source_notes`).

The paper's reference numbers are set beside ours only when the paper's setting is reproduced:
the simulated stand-ins, paper benchmarks and pairs, at the paper's eps
(:func:`~gpac_utils.paper.results_tables.make_tables`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import data
from ..workflow import paths
from . import simulate
from .reference import TABLE_SPECS

#: The named sources; anything else is a path.
SOURCE_KINDS = ("simulated", "generated")
#: Where ``02_scores`` writes the scored tables by default.
GENERATED_ROOT = paths.DATA / "generated"
#: Rows a notebook that calibrates needs at least (calibration and test sets, a few per group).
MIN_ROWS = 20


class SourceError(ValueError):
    """A data source cannot serve a notebook; the one-line message says what is missing and what works."""


@dataclass(frozen=True)
class Needs:
    """What one notebook needs of a table.

    Parameters
    ----------
    columns : tuple of str
        Schema columns it cannot do without.
    why : str
        What they are for (in the message).
    instead : str
        What works instead (in the message).
    min_rows : int
        Fewest rows.
    """

    columns: tuple[str, ...] = ()
    why: str = ""
    instead: str = ""
    min_rows: int = 1


#: Per notebook: the columns it needs, why, and what works instead.
_KNOWN = (data.GROUP,)
_USE_CPAC = "use 22_table_cpac (C-PAC learns groups)"
NEEDS: dict[str, Needs] = {
    "20_data_overview": Needs(
        data.CORRECTNESS,
        "for the accuracy table",
        "a semantic-loss table has none: use 22_table_cpac or 23_table_arena",
    ),
    "21_table_known_groups": Needs(_KNOWN, "", _USE_CPAC, MIN_ROWS),
    "22_table_cpac": Needs(min_rows=MIN_ROWS),
    "23_table_arena": Needs(min_rows=MIN_ROWS),
    "24_calibration_ratio": Needs(_KNOWN, "for G-PAC on known groups", _USE_CPAC, MIN_ROWS),
    "25_ece_scores": Needs(
        (data.NOTHINK_CORRECT,),
        "(ECE is measured against the non-thinking model's correctness)",
        "a semantic-loss table has no ECE",
        2,
    ),
    "26_concept_figure": Needs(_KNOWN, "for the per-group risk curves", _USE_CPAC),
    "31_realdata_case_study": Needs(min_rows=MIN_ROWS),
}


@dataclass(frozen=True)
class DataSource:
    """A resolved ``data_source``.

    Parameters
    ----------
    kind : {"simulated", "generated", "path"}
        Which kind of source.
    path : pathlib.Path, optional
        The table (``kind == "path"``).
    columns : Mapping[str, str]
        Source column -> schema column (``kind == "path"`` only).
    root : pathlib.Path
        Folder of the generated tables (``kind == "generated"``).
    """

    kind: str
    path: Path | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    root: Path = GENERATED_ROOT

    @property
    def is_simulated(self) -> bool:
        """True for the embedded stand-ins."""
        return self.kind == "simulated"

    @property
    def dataset(self) -> str:
        """The dataset name of a path source (the file's stem); ``""`` for the named kinds."""
        return self.path.stem if self.path is not None else ""

    def table_path(self, benchmark: str | None = None, pair: str | None = None) -> Path:
        """The file read for ``(benchmark, pair)``.

        Parameters
        ----------
        benchmark, pair : str, optional
            Needed by the simulated and generated kinds.

        Returns
        -------
        pathlib.Path
        """
        if self.kind == "path":
            return self.path
        if self.kind == "generated":
            return self.root / f"{benchmark}__{pair}.parquet"
        return simulate.table_path(benchmark, pair)

    def where(self, benchmark: str | None = None, pair: str | None = None) -> str:
        """How messages name the table read for ``(benchmark, pair)``."""
        if self.kind == "simulated":
            return f"the simulated table {benchmark}__{pair}"
        what = "the generated table" if self.kind == "generated" else "the table"
        return f"{what} at {self.table_path(benchmark, pair)}"

    def tag(self, benchmark: str | None = None, pair: str | None = None) -> str:
        """A file-name tag for outputs from this source (``generated__walk__smollm2``, ``path__mytable``)."""
        if self.kind == "path":
            return f"path__{self.dataset}"
        return "__".join([self.kind, *(p for p in (benchmark, pair) if p)])


def resolve_source(
    data_source: str | Path | None = "simulated",
    *,
    columns: Mapping[str, str] | None = None,
    generated_root: str | Path | None = None,
) -> DataSource:
    """Turn the ``data_source`` parameter into a :class:`DataSource`.

    Parameters
    ----------
    data_source : str or Path or None, default "simulated"
        ``"simulated"`` (also ``None``), ``"generated"``, or a table's path (relative paths are
        taken from the repository root: notebooks run in a scratch folder).
    columns : Mapping[str, str], optional
        Column mapping of a path source (source name -> schema name); ignored for the named kinds,
        whose tables are in the schema already.
    generated_root : str or Path, optional
        Folder of the generated tables (default ``data/generated``; relative: from the repository root).

    Returns
    -------
    DataSource
    """
    data_source = "simulated" if data_source is None else data_source
    if not isinstance(data_source, str | Path):
        raise SourceError(f"data_source: expected 'simulated', 'generated' or a path, got {type(data_source).__name__}")
    root = paths.from_root(generated_root) if generated_root is not None else GENERATED_ROOT
    if isinstance(data_source, str) and data_source in SOURCE_KINDS:
        return DataSource(data_source, root=root)
    text = str(data_source)
    if columns is not None and not isinstance(columns, Mapping):
        raise SourceError(f"columns: expected a mapping {{source: schema column}}, got {type(columns).__name__}")
    path = paths.from_root(text)
    try:
        data.table_format(path)
    except data.SchemaError as exc:
        raise SourceError(
            f"data_source: {text!r} is neither 'simulated' nor 'generated' nor a table file ({exc})"
        ) from None
    return DataSource("path", path, dict(columns or {}), root)


def check_table(table: pd.DataFrame, notebook: str, where: str, *, scores: Sequence[str] = ()) -> pd.DataFrame:
    """Check that ``table`` has what ``notebook`` needs (:data:`NEEDS`); return it unchanged.

    Parameters
    ----------
    table : pandas.DataFrame
        A validated table.
    notebook : str
        The notebook's stem (a key of :data:`NEEDS`; others only get the score check).
    where : str
        How the message names the table (:meth:`DataSource.where`).
    scores : sequence of str
        Score columns the notebook will use.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    SourceError
        One line: what is missing, and which notebook or option works instead.
    """
    need = NEEDS.get(notebook, Needs())
    missing = [c for c in need.columns if c not in table.columns]
    if missing:
        what = f"a {missing[0]!r} column" if len(missing) == 1 else f"columns {missing}"
        why = f" {need.why}" if need.why else ""
        none = "has none" if len(missing) == 1 else "lacks them"
        maps = ", ".join(f"'<column>': {c!r}" for c in missing)
        raise SourceError(
            f"{notebook} needs {what}{why}; {where} {none}: {need.instead} or map "
            f"{'a column' if len(missing) == 1 else 'columns'} with overrides={{'columns': {{{maps}}}}}"
        )
    absent = [s for s in scores if s not in table.columns]
    if absent:
        raise SourceError(
            f"{notebook} needs score column(s) {absent}; {where} has {data.score_columns(table)}: "
            f"choose them with scores=[...] or map them with overrides={{'columns': {{...}}}}"
        )
    if len(table) < need.min_rows:
        raise SourceError(
            f"{notebook} needs at least {need.min_rows} rows (calibration and test sets); {where} has "
            f"{len(table)}: generate more items (01_generate n_items) or use a larger table"
        )
    return table


def load_table(
    source: DataSource,
    benchmark: str | None = None,
    pair: str | None = None,
    *,
    notebook: str = "",
    scores: Sequence[str] = (),
    loss_bound: float = 1.0,
) -> pd.DataFrame:
    """Read one table of ``source``, validated (:func:`gpac_utils.data.read_table`), and check it for ``notebook``.

    Parameters
    ----------
    source : DataSource
        From :func:`resolve_source`.
    benchmark, pair : str, optional
        The table of the simulated and generated kinds.
    notebook : str
        The notebook's stem (:func:`check_table`).
    scores : sequence of str
        Score columns the notebook will use.
    loss_bound : float, default 1.0
        Upper bound of the loss.

    Returns
    -------
    pandas.DataFrame
    """
    if source.kind == "simulated":
        try:
            table = simulate.load_simulated(benchmark, pair)
        except ValueError as exc:
            raise SourceError(
                f"data_source='simulated': {exc}; for other benchmarks or pairs use data_source='generated' or a path"
            ) from None
    else:
        path = source.table_path(benchmark, pair)
        if not path.is_file() and source.kind == "generated":
            raise SourceError(
                f"data_source='generated': no scored table at {path}; run 01_generate then 02_scores with "
                f"benchmark={benchmark!r}, pair={pair!r} (or choose benchmarks and pairs with overrides)"
            )
        if not path.is_file():
            raise SourceError(f"data_source: no table at {path}")
        table = data.read_table(path, source.columns or None, loss_bound=loss_bound)
    return check_table(table, notebook, source.where(benchmark, pair), scores=scores)


def source_notes(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """What the tables cannot give, as notes to print (today one: no token counts, so no STP).

    Parameters
    ----------
    tables : Mapping[str, pandas.DataFrame]
        Tables by name.

    Returns
    -------
    list of str
    """
    no_tokens = [n for n, t in tables.items() if not set(data.TOKENS) <= set(t.columns)]
    note = f"note: {no_tokens} have no token counts ({list(data.TOKENS)}): STP is not computed"
    return [f"{note} (NaN in the long table, its row left out of the layout)"] if no_tokens else []


def paper_eps(family: str, pair: str | None) -> dict[str, float] | None:
    """The paper's eps per benchmark for table ``family`` and ``pair`` (``None`` for a pair outside the paper).

    Parameters
    ----------
    family : str
        ``known``, ``cpac`` or ``arena``.
    pair : str or None
        Model pair.

    Returns
    -------
    dict of str to float, or None
    """
    hits = [s for s in TABLE_SPECS.values() if s.family == family and s.pair == pair]
    return dict(hits[0].eps) if len(hits) == 1 else None
