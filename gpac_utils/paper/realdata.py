"""The real-data case study (notebook 31): where the real table lives, how it is read and mapped.

:func:`resolve_data_path` finds the real table (default: the committed ``data/real/mathl5_zeroeval.csv``,
see its data card ``data/real/README.md``), :func:`read_raw` and :func:`read_real` read it after
:func:`verify` has checked a committed table's SHA-256 against ``data/real/SHA256SUMS``,
:func:`realdata_table` maps it into the schema with an explicit token-cost model, :func:`group_summary`
describes it per known group. The notebook runs it through
:func:`gpac_utils.paper.results_tables.build_table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..certificate import file_sha256 as sha256  # the SHA-256 of a file's bytes (hex)
from ..workflow import paths

#: The default real table, committed under ``data/real/`` (data card: ``data/real/README.md``).
DEFAULT_TABLE = paths.REALDATA / "mathl5_zeroeval.csv"
#: ``sha256sum`` lines (``<hex>  <file name>``) of every committed file under ``data/real/`` that is read.
CHECKSUMS = paths.REALDATA / "SHA256SUMS"
#: Columns of the saved per-group violation table.
VIOLATION_COLUMNS = [
    "setting",
    "method",
    "score",
    "bound",
    "group",
    "violation_rate",
    "violation_mcse",
    "mean_error",
    "mean_pop_risk",
    "n_test",
]


def resolve_data_path(data_path=None) -> Path:
    """The real table to read.

    Parameters
    ----------
    data_path : str or Path, optional
        A table; relative paths are taken from the repository root (notebooks run in a scratch
        folder). ``None``: :data:`DEFAULT_TABLE`.

    Returns
    -------
    pathlib.Path
    """
    return DEFAULT_TABLE if data_path is None else paths.from_root(data_path)


class ChecksumError(ValueError):
    """A committed table under ``data/real/`` whose bytes are not the ones its checksum records."""


def stored_checksums() -> dict[str, str]:
    """File name -> SHA-256 (hex) as recorded in :data:`CHECKSUMS`."""
    pairs = (line.split(maxsplit=1) for line in CHECKSUMS.read_text().splitlines() if line.strip())
    return {name.strip().lstrip("*"): digest.lower() for digest, name in pairs}


def verify(path: str | Path) -> Path:
    """``path``, after checking its SHA-256 if it is a committed table under ``data/real/``.

    A file elsewhere (a user's own table) is returned unchecked. A file under ``data/real/`` must be
    listed in :data:`CHECKSUMS` with its SHA-256; else :class:`ChecksumError`, one line naming the file.
    A missing file is left to the reader (its ``FileNotFoundError`` names it).
    """
    path = Path(path)
    if path.resolve().parent != paths.REALDATA.resolve() or not path.is_file():
        return path
    where = paths.as_shown(path)
    expected = stored_checksums().get(path.name)
    if expected is None:
        raise ChecksumError(f"{where}: no checksum recorded in {CHECKSUMS.name}; add `sha256sum {path.name}` there")
    got = sha256(path)
    if got != expected:
        raise ChecksumError(
            f"{where}: SHA-256 {got[:12]}… differs from the recorded {expected[:12]}… ({CHECKSUMS.name}); "
            f"the table was changed, restore it with `git checkout -- {where}`"
        )
    return path


def read_raw(data_path=None, **kw) -> pd.DataFrame:
    """The real table as stored (:func:`gpac_utils.data.read_frame`), after :func:`verify`.

    ``data_path`` as for :func:`resolve_data_path`; ``kw`` goes to the pandas reader.
    """
    return data.read_frame(verify(resolve_data_path(data_path)), **kw)


def read_real(data_path=None, columns: Mapping[str, str] | None = None, **kw) -> pd.DataFrame:
    """:func:`gpac_utils.data.read_table` (mapped and validated) of :func:`resolve_data_path`, after :func:`verify`."""
    return data.read_table(verify(resolve_data_path(data_path)), columns, **kw)


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per known group: size, accuracies (if present) and loss rate in %, plus an ``ALL`` row.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema.

    Returns
    -------
    pandas.DataFrame
    """
    cols = [c for c in (data.THINK_CORRECT, data.NOTHINK_CORRECT, data.LOSS) if c in table.columns]
    parts = [*(table.groupby(data.GROUP, sort=True) if data.GROUP in table.columns else ()), ("ALL", table)]
    return pd.DataFrame([{"group": g, "n": len(df), **{c: 100 * df[c].mean() for c in cols}} for g, df in parts])


def realdata_table(
    raw: pd.DataFrame,
    columns: Mapping[str, str] | None,
    *,
    chars_per_token: float = 4.0,
    hidden_think_tokens: float | None = None,
    think_chars: str | None = "strong_chars",
    nothink_chars: str | None = "weak_chars",
) -> pd.DataFrame:
    """Map a real per-item table into the schema, with an explicit token-cost model.

    Parameters
    ----------
    raw : pandas.DataFrame
        The source table.
    columns : Mapping[str, str] or None
        Source column -> schema column (:func:`gpac_utils.data.apply_mapping`; ``loss`` is derived
        from the correctness columns when absent; an existing ``loss`` is checked against them).
    chars_per_token : float, default 4.0
        Characters per token of the cost model.
    hidden_think_tokens : float, optional
        Assumed hidden reasoning tokens per item. When the source has no token counts,
        ``think_tokens = think_chars / chars_per_token + hidden_think_tokens`` and
        ``nothink_tokens = nothink_chars / chars_per_token``; ``None`` leaves the table without
        tokens, so STP is not computed.
    think_chars, nothink_chars : str, optional
        Character-count columns of the cost model.

    Returns
    -------
    pandas.DataFrame
        The validated table (id, group, loss, correctness, tokens, scores).
    """
    df = data.apply_mapping(raw, dict(columns or {}))
    if all(c in df.columns for c in data.CORRECTNESS) and data.LOSS in df.columns:
        derived = data.binary_loss(df[data.THINK_CORRECT], df[data.NOTHINK_CORRECT])
        bad = np.flatnonzero(derived != df[data.LOSS].to_numpy(float))
        if bad.size:
            raise data.SchemaError(f"column 'loss' disagrees with the correctness columns at rows {bad[:5].tolist()}")
    if hidden_think_tokens is not None and not all(c in df.columns for c in data.TOKENS):
        for col in (think_chars, nothink_chars):
            if col is None or col not in df.columns:
                raise data.SchemaError(f"cost model needs character column {col!r}; the table has {list(df.columns)}")
        df = df.copy()
        df[data.THINK_TOKENS] = df[think_chars].to_numpy(float) / chars_per_token + float(hidden_think_tokens)
        df[data.NOTHINK_TOKENS] = df[nothink_chars].to_numpy(float) / chars_per_token
    keep = [c for c in (data.ID, data.GROUP, data.LOSS, *data.CORRECTNESS, *data.TOKENS) if c in df.columns]
    keep += data.score_columns(df)
    return data.validate(df[keep])
