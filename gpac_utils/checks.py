"""Parameter checks shared by the calibrators, the experiment runner and the command line.

Each check raises :class:`ParameterError` (a ``ValueError``) with a one-line message that names
the parameter and its allowed range, e.g. ``eps: must lie in (0.0, 1.0), got 1.5``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = [
    "ParameterError",
    "DataError",
    "check_range",
    "check_risk",
    "check_int",
    "check_array",
    "check_labels",
    "check_budget",
]


class ParameterError(ValueError):
    """A parameter is out of its allowed range; the message names it (command line: exit status 2)."""


class DataError(ValueError):
    """A missing or malformed file, column or row; the message names it (command line: exit status 1)."""


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name}: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ParameterError(f"{name}: must be a finite number, got {value!r}")
    return v


def check_range(name: str, value, lo: float = 0.0, hi: float = 1.0, *, closed_right: bool = False) -> float:
    """A finite number in ``(lo, hi)`` (or ``(lo, hi]`` with ``closed_right``).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : float
        The value to check (``True``/``False`` refused).
    lo, hi : float, default 0 and 1
        The open interval's ends (``hi`` may be ``inf``).
    closed_right : bool, default False
        Allow ``hi``.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ParameterError
        When it is not a finite number in the interval.

    Examples
    --------
    >>> check_range("label_prob", 1, closed_right=True)
    1.0
    >>> check_range("alpha", 1.5)
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: alpha: must lie in (0.0, 1.0), got 1.5
    """
    v = _number(name, value)
    if not (lo < v < hi or (closed_right and v == hi)):
        raise ParameterError(f"{name}: must lie in ({lo}, {hi}{']' if closed_right else ')'}, got {value!r}")
    return v


def check_risk(eps, alpha, loss_bound=1.0) -> tuple[float, float, float]:
    """The settings of every guarantee: ``loss_bound > 0``, ``0 < eps < loss_bound``, ``0 < alpha < 1``.

    At ``eps >= loss_bound`` every item could be routed unchecked.

    Parameters
    ----------
    eps : float
        The target risk.
    alpha : float
        The miscoverage level.
    loss_bound : float, default 1.0
        The loss bound ``B``.

    Returns
    -------
    tuple of float
        ``(eps, alpha, loss_bound)`` as floats.

    Raises
    ------
    ParameterError
        Naming the first of ``loss_bound``, ``eps``, ``alpha`` that is out of its range.
    """
    loss_bound = check_range("loss_bound", loss_bound, 0.0, math.inf)
    return check_range("eps", eps, 0.0, loss_bound), check_range("alpha", alpha), loss_bound


def check_int(name: str, value, minimum: int) -> int:
    """An integer ``>= minimum`` (``True``/``False`` and non-integral floats refused).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : int
        The value to check; an integral float such as ``3.0`` is accepted.
    minimum : int
        The smallest allowed value.

    Returns
    -------
    int
        ``value`` as an int.

    Raises
    ------
    ParameterError
        When it is not an integer, or is below ``minimum``.
    """
    whole = isinstance(value, numbers.Integral) or (isinstance(value, numbers.Real) and float(value).is_integer())
    if not whole or value < minimum:
        raise ParameterError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_array(name: str, values, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """A 1-D array of finite floats within ``[lo, hi]``.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    values : array_like
        The values to check.
    lo, hi : float, optional
        The allowed range (``None``: unbounded on that side).

    Returns
    -------
    numpy.ndarray
        ``values`` as a float array.

    Raises
    ------
    ParameterError
        When it is not 1-D, or a value is not finite or outside the range (the first bad rows named).

    Examples
    --------
    >>> check_array("scores", [0.1, 0.9], 0.0, 1.0).tolist()
    [0.1, 0.9]
    """
    a = np.asarray(values, dtype=float)
    if a.ndim != 1:
        raise ParameterError(f"{name}: must be 1-D, got shape {a.shape}")
    bad = ~np.isfinite(a) | (a < (-np.inf if lo is None else lo)) | (a > (np.inf if hi is None else hi))
    if bad.any():
        raise ParameterError(
            f"{name}: values must be finite and in [{lo}, {hi}]; bad at rows {np.flatnonzero(bad)[:5].tolist()}"
        )
    return a


def check_labels(name: str, labels, n: int) -> np.ndarray:
    """One label per item (``n`` of them), none missing; returned as strings.

    Parameters
    ----------
    name : str
        Named in the error message.
    labels : array_like
        The labels to check.
    n : int
        The number of items.

    Returns
    -------
    numpy.ndarray of str

    Raises
    ------
    ParameterError
        When the shape is not ``(n,)`` or a label is missing.
    """
    a = np.asarray(labels)
    if a.shape != (n,):
        raise ParameterError(f"{name}: need one label per item ({n}), got shape {a.shape}")
    missing = pd.isna(a)
    if missing.any():
        raise ParameterError(f"{name}: missing labels at rows {np.flatnonzero(missing)[:5].tolist()}")
    return a.astype(str)


def check_budget(budget) -> int:
    """A label budget: a non-negative number, rounded down to an integer.

    Parameters
    ----------
    budget : int or float
        Total labels.

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        When it is not a finite number >= 0.
    """
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not (math.isfinite(budget) and budget >= 0):
        raise ParameterError(f"budget: must be a non-negative number of labels, got {budget!r}")
    return int(budget)


def check_thresholds_file(payload, where: str, methods, settings_keys) -> None:
    """Check a thresholds JSON (as written by ``calibrate``); raise :class:`DataError` naming the field.

    Parameters
    ----------
    payload : object
        The parsed JSON.
    where : str
        Where it came from (the file name), to start the message.
    methods : sequence of str, or mapping of str to sequence of str
        The method names a file may give (``PAC``, ``G-PAC``, ``C-PAC``); a mapping also gives
        each method's extra JSON fields (C-PAC: ``partition``).
    settings_keys : sequence of str
        The keys ``settings`` must have.

    Raises
    ------
    DataError
        When it is not an object, lacks ``method``, ``settings`` (with every key of
        ``settings_keys``) or ``thresholds``, names an unknown method, has a threshold that is
        neither a number in ``[0, 1]`` nor ``null``, or is a C-PAC file without a partition.
    """
    if not isinstance(payload, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(payload).__name__}")
    for key in ("method", "settings", "thresholds"):
        if key not in payload:
            raise DataError(f"{where}: missing field {key!r}")
    if payload["method"] not in methods:
        raise DataError(f"{where}: 'method' must be one of {list(methods)}, got {payload['method']!r}")
    st = payload["settings"]
    if not isinstance(st, dict):
        raise DataError(f"{where}: 'settings' must be an object")
    missing = [k for k in settings_keys if k not in st]
    if missing:
        raise DataError(f"{where}: 'settings' lacks {missing}")
    thr = payload["thresholds"]
    if not isinstance(thr, dict) or not thr:
        raise DataError(f"{where}: 'thresholds' must be a non-empty object of group -> number or null")
    for g, t in thr.items():
        ok = t is None or (isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 1)
        if not ok:
            raise DataError(f"{where}: thresholds[{g!r}] must be a number in [0, 1] or null (always think), got {t!r}")
    extra = methods[payload["method"]] if isinstance(methods, Mapping) else ()
    if "partition" in extra:
        part = payload.get("partition")
        if not isinstance(part, dict) or not isinstance(part.get("boundaries"), list):
            raise DataError(f"{where}: a {payload['method']} file needs 'partition': {{'algorithm', 'boundaries'}}")
