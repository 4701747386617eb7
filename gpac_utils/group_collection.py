"""A collection of groups that may overlap, checked: its groups, memberships and cells (:mod:`gpac_utils.multigroup`).

Several label columns (a grouping each), one label array or a boolean membership matrix become one
:class:`Collection`: the groups' names, each item's memberships and its *cell* (the groups it is in,
joined by :data:`SEP`). The overlapping-group calibrators of :mod:`gpac_utils.multigroup` (which
re-exports these names) set a threshold per cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .checks import ParameterError, check_groups

#: Joins the parts of a cell's label: ``"subject=alg & lang=en"`` (a group of a grouping is ``column=label``).
SEP = " & "


def ambiguous(labels, groupings) -> np.ndarray:
    """Where a label holds :data:`SEP` followed by a grouping's ``name=`` (its cell's label would read as another
    cell's): refused; any other label may hold :data:`SEP` (:func:`split_cell` reads it back)."""
    text = np.asarray(labels).astype(str)
    return np.any([np.char.find(text, f"{SEP}{g}=") >= 0 for g in groupings], axis=0)


def split_cell(cell: str, groupings) -> list[str] | None:
    """A cell's groups: one ``grouping=label`` per grouping, in order (a label may hold :data:`SEP`); ``None``: not a
    cell of these groupings. No groupings (a membership matrix's cell): split at :data:`SEP`.

    Examples
    --------
    >>> split_cell("subject=Counting & Probability & lang=en", ("subject", "lang"))
    ['subject=Counting & Probability', 'lang=en']
    >>> split_cell("lang=en & subject=a", ("subject", "lang")) is None
    True
    """
    if not groupings:
        return cell.split(SEP) if isinstance(cell, str) else None
    parts, rest = [], cell if isinstance(cell, str) else ""
    for g, after in zip(groupings, [*groupings[1:], None]):
        end = len(rest) if after is None else rest.find(f"{SEP}{after}=", len(g) + 2)
        if not rest.startswith(f"{g}=") or end < len(g) + 2:
            return None
        parts.append(rest[:end])
        rest = rest[end + len(SEP) :]
    return parts


@dataclass(frozen=True)
class Collection:
    """A checked collection of groups that may overlap (:func:`collection`).

    Attributes
    ----------
    names : list of str
        The groups: ``column=label`` for a grouping given as a label column; the label itself for one
        grouping given as one label array; the column name of a membership matrix.
    member : numpy.ndarray of bool, shape (n, m)
        ``member[i, j]``: item ``i`` is in group ``names[j]``.
    cells : numpy.ndarray of str, shape (n,)
        Each item's cell: its groups joined by :data:`SEP` (``""``: an item in no group).
    groupings : tuple of str or None
        The grouping columns, in order (``None``: a membership matrix; ``()``: one label array).
    """

    names: list[str]
    member: np.ndarray
    cells: np.ndarray
    groupings: tuple[str, ...] | None


def _label_columns(groups) -> dict | None:
    """The label columns of ``groups`` (a dict or a DataFrame of labels), or ``None`` when it is not one."""
    if isinstance(groups, dict):
        return dict(groups)
    if isinstance(groups, pd.DataFrame) and not all(pd.api.types.is_bool_dtype(t) for t in groups.dtypes):
        return {str(c): groups[c] for c in groups.columns}
    return None


def collection(groups, n: int, name: str = "groups", *, every_group_used: bool = True) -> Collection:
    """Check a collection of groups of ``n`` items (one-line :class:`~gpac_utils.checks.ParameterError` naming it).

    Parameters
    ----------
    groups : array_like, dict, pandas.DataFrame or numpy.ndarray of bool
        One of: one label per item (one grouping: a partition, as for G-PAC); several groupings, as a
        dict of column name to labels or a DataFrame of label columns; or a boolean membership matrix
        of shape ``(n, m)`` (a DataFrame of boolean columns names its groups; a numpy array's groups
        are named ``"0"``, ``"1"``, ...).
    n : int
        The number of items.
    name : str, default "groups"
        Named in the error messages.
    every_group_used : bool, default True
        Refuse a membership-matrix column with no item (at calibration; items to route need not
        cover every group).

    Returns
    -------
    Collection

    Raises
    ------
    ParameterError
        For labels that :func:`~gpac_utils.checks.check_groups` refuses (naming the column), a
        membership matrix of another shape or not boolean, a group with no items, no grouping, a
        column name that contains ``=`` or :data:`SEP`, or a label that contains :data:`SEP` followed by
        a grouping's ``name=`` (:func:`ambiguous`; MATH's ``Counting & Probability`` is a label).

    Examples
    --------
    >>> c = collection({"subject": ["a", "b", "a"], "lang": ["en", "en", "fr"]}, 3)
    >>> c.names
    ['subject=a', 'subject=b', 'lang=en', 'lang=fr']
    >>> c.cells.tolist()
    ['subject=a & lang=en', 'subject=b & lang=en', 'subject=a & lang=fr']
    >>> collection(np.array([[True, False], [False, False]]), 2)
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: groups: group '1' has no items (column 1 of the membership matrix is all False)
    """
    if groups is None:
        raise ParameterError(f"{name}: needs the items' groups (label columns or a boolean membership matrix)")
    columns = _label_columns(groups)
    if columns is not None:
        if not columns:
            raise ParameterError(f"{name}: no grouping given (an empty dict or DataFrame)")
        names, member_cols, parts = [], [], []
        for col, labels in columns.items():
            if "=" in col or SEP in col:
                raise ParameterError(f"{name}: grouping name {col!r} must not contain '=' or {SEP!r}")
            lab = check_groups(f"{name}[{col!r}]", labels, n)
            joined = ambiguous(lab, columns)
            if joined.any():  # a cell's label would not tell its groups apart
                raise ParameterError(
                    f"{name}[{col!r}]: label {str(lab[joined][0])!r} contains {SEP!r} and a grouping's 'name=', "
                    "which join a cell's groups"
                )
            levels = np.unique(lab)
            names += [f"{col}={v}" for v in levels.tolist()]
            member_cols += [lab == v for v in levels]
            parts.append(np.char.add(f"{col}=", lab))
        cells = parts[0]
        for p in parts[1:]:
            cells = np.char.add(np.char.add(cells, SEP), p)
        return Collection(names, np.column_stack(member_cols), cells.astype(str), tuple(columns))
    if isinstance(groups, pd.DataFrame):  # boolean columns: a membership matrix with named groups
        gnames = [str(c) for c in groups.columns]
        matrix = groups.to_numpy(dtype=bool)
    else:
        a = np.asarray(groups)
        if a.ndim == 1 or (a.ndim == 0):
            lab = check_groups(name, groups, n)
            levels = np.unique(lab)
            return Collection(levels.tolist(), lab[:, None] == levels[None, :], lab, ())
        if a.ndim != 2:
            raise ParameterError(f"{name}: a membership matrix must be 2-D (n items, m groups), got shape {a.shape}")
        if a.dtype != bool:
            raise ParameterError(
                f"{name}: a 2-D array must be a boolean membership matrix, got dtype {a.dtype}; "
                "pass label columns as a dict or a DataFrame"
            )
        gnames, matrix = [str(j) for j in range(a.shape[1])], a
    if matrix.shape[0] != n:
        raise ParameterError(f"{name}: the membership matrix has {matrix.shape[0]} rows for {n} items (one per item)")
    if matrix.shape[1] == 0:
        raise ParameterError(f"{name}: the membership matrix has no columns (no group)")
    empty = np.flatnonzero(~matrix.any(axis=0))
    if empty.size and every_group_used:
        j = int(empty[0])
        raise ParameterError(
            f"{name}: group {gnames[j]!r} has no items (column {j} of the membership matrix is all False)"
        )
    bad = [g for g in gnames if SEP in g or g == ""]
    if bad:
        raise ParameterError(f"{name}: group name {bad[0]!r} must be non-empty and not contain {SEP!r}")
    if len(set(gnames)) != len(gnames):
        raise ParameterError(f"{name}: the membership matrix's group names repeat")
    order = np.argsort(gnames)  # a cell's label names its groups sorted: the columns' order does not matter
    cells = np.array([SEP.join(gnames[j] for j in order[row[order]]) for row in matrix], dtype=str)
    return Collection(gnames, matrix.astype(bool), cells, None)
