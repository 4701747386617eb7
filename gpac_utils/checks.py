"""The validation layer: parameter and input checks shared by every public entry point.

Each check raises :class:`ParameterError` (a ``ValueError``) with a one-line message that names
the argument (and the rows, for arrays), e.g. ``eps: must lie in (0.0, 1.0), got 1.5``. The
calibrators, the functional API, ``from_json``, the online router, the planner and the command
line call these checks at their top, once; the computations below them trust their inputs
(scikit-learn's ``check_array`` / ``check_consistent_length`` / ``validate_params`` are the model).

What the layer decides (``docs/api`` and each entry's docstring say it again):

* **One error class.** Every refusal of the Python API is a :class:`ParameterError`, a subclass of
  ``ValueError`` (a wrong *type* too: one ``except ValueError`` catches every refusal).
  :class:`DataError` is the command line's file, column or row error (exit status 1).
* **Shapes.** Per-item inputs are 1-D: an ``(n, 1)`` array or a one-column DataFrame is refused
  (not squeezed), with a message saying to pass a 1-D array or a Series; a scalar is refused.
  Per-item inputs of one call have equal lengths.
* **pandas.** Inputs that are pandas objects are paired by position only when their indexes are
  equal; differing indexes (the same rows in another order, or other rows) are refused, never
  re-paired by position and never silently aligned: align them first (``y.loc[x.index]``) or
  pass ``.to_numpy()``.
* **dtypes.** Scores and losses are numbers (int or float; strings, dates and objects refused);
  boolean *losses* are accepted as 0/1 (a loss flag), boolean *scores* are refused. Decision
  flags of the online router must be bool (0/1 integers refused).
* **Ranges.** Scores lie in ``[0, 1]`` (a negative score is reported as a probable
  log-probability), losses in ``[0, loss_bound]``; NaN and infinity are refused, naming the rows
  (0-based positions within the array).
* **Group labels** are of one type (all strings, all integers, ...), none missing (``None``,
  NaN) and none empty (``''``); they are returned as strings, as before.
* **Typed parameters.** A bool is a bool (``"false"`` and ``0`` refused), an int is an int
  (``True`` and ``2.5`` refused), a fraction is a finite number in its interval.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

__all__ = [
    "ParameterError",
    "DataError",
    "SettingWarning",
    "NotFittedError",
    "check_fitted",
    "check_range",
    "warn_risk",
    "warn_level",
    "check_int",
    "check_bool",
    "check_choice",
    "check_array",
    "check_groups",
    "check_same_index",
    "check_consistent_length",
    "check_xy",
    "check_budget",
    "check_rng",
    "check_label_prob",
    "check_decisions",
    "check_observed_losses",
]


class ParameterError(ValueError):
    """An argument the API cannot answer for: wrong type, shape, dtype or range; the one-line message
    names it (command line: exit status 2). One class for every refusal, a ``ValueError``."""


class DataError(ValueError):
    """A missing or malformed file, column or row; the message names it (command line: exit status 1)."""


class NotFittedError(ParameterError, RuntimeError):
    """A fitted router's method (``route``, ``thresholds_for``, ``to_json``) called before ``fit``; the message
    names the router and says what to call (a ``ParameterError``, and a ``RuntimeError`` as before)."""


def check_fitted(router, fitted: bool) -> None:
    """Refuse a method of ``router`` called before ``fit`` (:class:`NotFittedError`, naming it)."""
    if not fitted:
        name = getattr(router, "name", type(router).__name__)
        raise NotFittedError(f"{name}: not fitted; call fit(scores, losses, groups) first (or from_json)")


class SettingWarning(UserWarning):
    """A setting that is allowed but looks like a mistake (``alpha >= 0.5``; ``eps`` and ``alpha`` swapped);
    the message names it (command line: a ``warning:`` line)."""


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
    >>> check_range("cal_ratio", 1.5)
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: cal_ratio: must lie in (0.0, 1.0), got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name}: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ParameterError(f"{name}: must be a finite number, got {value!r}")
    if not (lo < v < hi or (closed_right and v == hi)):
        raise ParameterError(f"{name}: must lie in ({lo}, {hi}{']' if closed_right else ')'}, got {value!r}")
    return v


def warn_risk(eps: float, alpha: float, loss_bound: float = 1.0) -> None:
    """A :class:`SettingWarning` for checked settings that look like a mistake: ``alpha >= 0.5`` (the
    guarantee would hold with probability at most one half), or ``eps`` and ``alpha`` that look swapped
    (``alpha >= 0.25`` with ``eps <= 0.1 loss_bound`` below half of it). The public entries call it once
    (:class:`~gpac_utils.settings.Settings`, :class:`~gpac_utils.online.OnlineSettings`,
    :func:`~gpac_utils.calibrate.threshold`).
    """
    if alpha >= 0.5:
        message = (
            f"alpha={alpha:g}: the guarantee then holds with probability only 1 - alpha = {1 - alpha:.3g}; "
            "alpha is the miscoverage (usually 0.05 or 0.1)"
        )
    elif alpha >= 0.25 and eps <= 0.1 * loss_bound and eps < alpha / 2:
        message = (
            f"eps={eps:g}, alpha={alpha:g}: they look swapped (eps is the target risk, alpha the miscoverage: "
            f"the guarantee holds with probability {1 - alpha:.3g}); pass them by name, eps=..., alpha=..."
        )
    else:
        return
    warnings.warn(message, SettingWarning, stacklevel=3)


def warn_level(name: str, level: float) -> None:
    """A :class:`SettingWarning` for a checked test level ``>= 0.5`` (a confidence such as 0.95 given as the
    level): the level is the chance of a false alarm, usually 0.05."""
    if level >= 0.5:
        warnings.warn(
            f"{name}={level:g}: a false alarm then has probability up to {level:g}; {name} is the test's error "
            f"rate (usually 0.05), not its confidence (1 - {name})",
            SettingWarning,
            stacklevel=3,
        )


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
    if isinstance(value, bool | np.bool_) or not whole or value < minimum:
        raise ParameterError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    """A bool: ``True``/``False`` (numpy's too); ``"false"``, ``0``, ``1`` and ``None`` refused.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : bool
        The value to check.

    Returns
    -------
    bool

    Raises
    ------
    ParameterError
        When it is not a bool (a string ``"false"`` is truthy: it would mean True).

    Examples
    --------
    >>> check_bool("simultaneous", "false")
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: simultaneous: must be True or False, got 'false' (str)
    """
    if not isinstance(value, bool | np.bool_):
        raise ParameterError(f"{name}: must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_choice(name: str, value, choices) -> str:
    """One of ``choices`` (compared as given; the message lists them).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        The value to check.
    choices : sequence
        The allowed values.

    Returns
    -------
    object
        ``value``.

    Raises
    ------
    ParameterError
        When ``value`` is not one of ``choices``.
    """
    if not isinstance(value, str | int | float | type(None)) or value not in list(choices):
        raise ParameterError(f"{name}: must be one of {list(choices)}, got {value!r}")
    return value


def _first(mask, show: int = 5) -> str:
    """The first flagged positions (0-based; ``(i, j)`` tuples for batched input), and how many more."""
    mask = np.asarray(mask)
    where = np.argwhere(mask)
    shown = [tuple(int(v) for v in w) if len(w) > 1 else int(w[0]) for w in where[:show]]
    more = f" and {len(where) - show} more" if len(where) > show else ""
    return f"{shown}{more}"


def _refuse(bad, message: str, after: str = "") -> None:
    """A :class:`ParameterError` ``"<message> <the first flagged rows><after>"`` when any entry of ``bad`` is set."""
    if bad.any():
        raise ParameterError(f"{message} {_first(bad)}{after}")


def _kind(x) -> str:
    """The type family of one label or value, for messages about mixed types."""
    families = ((str, "str"), (bool | np.bool_, "bool"), (numbers.Integral, "int"), (numbers.Real, "float"))
    return next((family for t, family in families if isinstance(x, t)), type(x).__name__)


def _one_d(name: str, values, batch: bool = False, as_object: bool = False):
    """``values`` as an array (pandas and lists included), refusing DataFrames, strings and non-1-D shapes.

    ``as_object``: a list or tuple becomes an object array (its items' types kept: ``["a", 1]`` is mixed).
    """
    import pandas as pd  # here, not at the top: the notebook runner reads this module without pandas

    if isinstance(values, pd.DataFrame):
        raise ParameterError(
            f"{name}: got a DataFrame with {values.shape[1]} column(s); pass one column as a Series (df['col']) "
            "or a 1-D array"
        )
    if isinstance(values, str | bytes | dict | set):
        raise ParameterError(f"{name}: must be an array with one value per item, got {type(values).__name__}")
    if isinstance(values, pd.Series | pd.Index):
        dtype = values.dtype
        if not pd.api.types.is_extension_array_dtype(dtype):
            a = values.to_numpy()
        elif not as_object and pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            a = values.to_numpy(dtype=float, na_value=np.nan)  # nullable Int64 / Float64: pd.NA as NaN
        else:  # categorical, nullable strings and booleans: their values, pd.NA as None
            a = np.array(values.astype(object).to_numpy(), dtype=object)
            a[pd.isna(a)] = None
    else:
        try:
            a = np.asarray(values, dtype=object if as_object and isinstance(values, list | tuple) else None)
        except ValueError:  # a ragged nested sequence
            raise ParameterError(
                f"{name}: must be a 1-D array with one value per item, got a ragged sequence"
            ) from None
    if a.ndim == 0:
        raise ParameterError(f"{name}: must be a 1-D array with one value per item, got the scalar {values!r}")
    if a.ndim != 1 and not batch:
        raise ParameterError(
            f"{name}: must be 1-D (one value per item), got shape {a.shape}; pass a 1-D array (x.ravel()) or a Series"
        )
    return a


def _numeric(name: str, a: np.ndarray, allow_bool: bool) -> np.ndarray:
    """A float copy-or-view of ``a``; strings, dates, objects (and booleans unless allowed) refused by row."""
    import pandas as pd

    kind = a.dtype.kind
    if kind in "iuf":
        return a.astype(float, copy=False)
    if kind == "b":
        if not allow_bool:
            raise ParameterError(f"{name}: must be numbers, got booleans (dtype bool)")
        return a.astype(float)
    if kind == "O":
        flat = a.ravel()
        number = [isinstance(x, numbers.Real) and (allow_bool or not isinstance(x, bool | np.bool_)) for x in flat]
        ok = (np.array(number, dtype=bool) | pd.isna(flat)).reshape(a.shape)  # None and NaN read as NaN
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise ParameterError(f"{name}: must be numbers; {_kind(flat[i])} {flat[i]!r} at rows {_first(~ok)}")
        return np.array([np.nan if x is None or pd.isna(x) else float(x) for x in flat], float).reshape(a.shape)
    what = "strings" if kind in "US" else "values"
    raise ParameterError(f"{name}: must be numbers, got {what} (dtype {a.dtype})")


def check_array(
    name: str, values, lo: float | None = None, hi: float | None = None, *, batch: bool = False, allow_bool: bool = True
) -> np.ndarray:
    """A 1-D array of finite numbers within ``[lo, hi]`` (with ``batch``: any shape ``(..., n)``).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    values : array_like or pandas.Series
        The values to check; a DataFrame, a string, a scalar or (without ``batch``) an array that
        is not 1-D is refused (an ``(n, 1)`` array is not squeezed).
    lo, hi : float, optional
        The allowed range (``None``: unbounded on that side).
    batch : bool, default False
        Allow leading batch axes (independent calibrations at once).
    allow_bool : bool, default True
        Read booleans as 0/1 (loss flags); False refuses them (scores).

    Returns
    -------
    numpy.ndarray
        ``values`` as a float array.

    Raises
    ------
    ParameterError
        When the shape or dtype is wrong, or a value is NaN, infinite or outside the range (the
        first bad rows named, 0-based). A negative value where ``[0, 1]`` is expected is reported
        as a probable log-probability.

    Examples
    --------
    >>> check_array("scores", [0.1, 0.9], 0.0, 1.0).tolist()
    [0.1, 0.9]
    >>> check_array("scores", [[0.1], [0.9]], 0.0, 1.0)
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: scores: must be 1-D (one value per item), got shape (2, 1); ...
    """
    a = _numeric(name, _one_d(name, values, batch), allow_bool)
    _refuse(~np.isfinite(a), f"{name}: must be finite; NaN or infinite at rows")
    low = a < (-np.inf if lo is None else lo)
    bad = low | (a > (np.inf if hi is None else hi))
    if bad.any():
        first = float(a[tuple(np.argwhere(bad)[0])])
        log_probabilities = low.any() and lo == 0 and hi == 1 and "score" in name
        hint = " (a negative score: log-probabilities? pass uncertainties in [0, 1])" if log_probabilities else ""
        raise ParameterError(f"{name}: values must lie in [{lo}, {hi}]; {first!r} at rows {_first(bad)}{hint}")
    return a


def check_groups(name: str, labels, n: int | None = None) -> np.ndarray:
    """One group label per item: 1-D, ``n`` of them, of one type, none missing or empty; as strings.

    Parameters
    ----------
    name : str
        Named in the error message.
    labels : array_like or pandas.Series
        The labels (strings, integers, ...; a categorical Series gives its values).
    n : int, optional
        The number of items (checked when given).

    Returns
    -------
    numpy.ndarray of str
        The labels as strings (``1`` and ``"1"`` would be one group: mixed types are refused).

    Raises
    ------
    ParameterError
        For a shape other than ``(n,)``, a missing label (``None``, NaN), an empty label ``''``, or
        labels of mixed types (the first row of each type named).

    Examples
    --------
    >>> check_groups("groups", ["a", 1, "b"])
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: groups: labels of mixed types (str at row 0, int at row 1); use one type
    """
    import pandas as pd

    a = _one_d(name, labels, as_object=True)
    if n is not None and a.shape != (n,):
        raise ParameterError(f"{name}: need one label per item ({n}), got {a.shape[0]}")
    missing = pd.isna(a) if a.dtype.kind in "OfcmM" else np.zeros(a.shape, bool)  # pd.isna reads strings one by one
    _refuse(missing, f"{name}: missing labels (None or NaN) at rows")
    if a.dtype.kind == "O" and a.size:
        inferred = pd.api.types.infer_dtype(a, skipna=False)
        if inferred not in ("string", "integer", "boolean", "floating", "bytes"):
            firsts = pd.Series([_kind(x) for x in a]).drop_duplicates()
            if len(firsts) > 1:
                shown = ", ".join(f"{k} at row {i}" for i, k in firsts.items())
                raise ParameterError(f"{name}: labels of mixed types ({shown}); use one type")
    if a.dtype.kind not in "USOiubf":
        raise ParameterError(f"{name}: labels must be strings or integers, got dtype {a.dtype}")
    out = a.astype(str, copy=False)  # a numpy string array is returned as it is (read, never written)
    _refuse(out == "", f"{name}: empty labels ('') at rows")
    return out


def check_same_index(**named) -> None:
    """pandas inputs of one call must have equal indexes (the same rows in the same order).

    Two Series whose indexes differ would be paired by position by numpy, and by label by
    pandas: either way some reader gets wrong pairs. They are refused, never re-paired and never
    silently aligned. Non-pandas inputs (and ``None``) are skipped: they pair by position.

    Parameters
    ----------
    **named
        The inputs by argument name, in the order they are named in the message.

    Raises
    ------
    ParameterError
        Naming the first input whose index differs from the first pandas input's.

    Examples
    --------
    >>> import pandas as pd
    >>> check_same_index(scores=pd.Series([0.1, 0.2], index=[0, 1]), losses=pd.Series([0, 1], index=[1, 0]))
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: losses: its pandas index differs from that of scores ...
    """
    import pandas as pd

    pandas = (pd.Series, pd.DataFrame, pd.Index)
    indexes = [(k, v if isinstance(v, pd.Index) else v.index) for k, v in named.items() if isinstance(v, pandas)]
    for name, index in indexes[1:]:
        ref, first = indexes[0]
        if not index.equals(first):
            same = len(index) == len(first) and set(index) == set(first)
            how = "the same rows in another order" if same else "other rows"
            raise ParameterError(
                f"{name}: its pandas index differs from that of {ref} ({how}); rows are never re-paired by "
                f"position: align it first ({name}.loc[{ref}.index]) or pass .to_numpy() of both"
            )


def check_consistent_length(**named) -> int:
    """All given inputs (``None`` skipped) have the length of the first one.

    Parameters
    ----------
    **named
        Arrays by argument name.

    Returns
    -------
    int
        The common length.

    Raises
    ------
    ParameterError
        Naming the first input of another length.
    """
    lengths = [(name, len(v)) for name, v in named.items() if v is not None]
    for name, n in lengths[1:]:
        if n != lengths[0][1]:
            raise ParameterError(f"{name}: need one value per item of {lengths[0][0]} ({lengths[0][1]}), got {n}")
    return lengths[0][1] if lengths else 0


def check_xy(
    scores, losses=None, groups=None, *, loss_bound: float = 1.0, min_items: int = 0, batch: bool = False, binary=False
):
    """The per-item inputs of one call, checked together: the layer's one call at a public entry.

    Scores in ``[0, 1]``, losses in ``[0, loss_bound]`` (when given), group labels (when given);
    equal lengths and, for pandas inputs, equal indexes (:func:`check_same_index`).

    Parameters
    ----------
    scores : array_like or pandas.Series, shape (n,) (``(..., n)`` with ``batch``)
        Uncertainty scores; larger = less certain.
    losses : array_like or pandas.Series, optional
        Losses, same shape as ``scores``.
    groups : array_like or pandas.Series, optional
        One label per item (not with ``batch``).
    loss_bound : float, default 1.0
        Upper end of the loss range.
    min_items : int, default 0
        Fewest items accepted (1 to calibrate: an empty calibration set is refused).
    batch : bool, default False
        Allow leading batch axes on scores and losses (:func:`~gpac_utils.calibrate.threshold`).
    binary : bool, default False
        Losses must be exactly 0 or ``loss_bound`` (a bound whose terms are binary: its registry entry's
        ``binary_terms``), the first other rows named; nothing is rounded.

    Returns
    -------
    tuple
        ``(scores, losses, groups)`` as float, float and str arrays (``None`` where not given).

    Raises
    ------
    ParameterError
        Naming the argument (and rows) at the first problem.
    """
    check_same_index(scores=scores, losses=losses, groups=groups)
    s = check_array("scores", scores, 0.0, 1.0, batch=batch, allow_bool=False)
    loss = None if losses is None else check_array("losses", losses, 0.0, loss_bound, batch=batch)
    if loss is not None and loss.shape != s.shape and s.ndim > loss.ndim:  # e.g. an (n, 1) column given as scores
        raise ParameterError(
            f"scores: shape {s.shape} is not that of losses {loss.shape}; pass 1-D arrays (x.ravel()) or a Series"
        )
    if loss is not None and loss.shape != s.shape:
        raise ParameterError(
            f"losses: must be of equal length to scores (one loss per score), got {loss.shape} for {s.shape}"
        )
    if s.shape[-1] < min_items:
        raise ParameterError(f"scores: need at least {min_items} item(s), got {s.shape[-1]} (empty calibration set)")
    g = None if groups is None else check_groups("groups", groups, s.size)
    if binary and loss is not None:
        z = loss / loss_bound
        needs = f"losses: this bound needs losses of exactly 0 or {loss_bound:g} (the loss bound); rows"
        _refuse((z != 0) & (z != 1), needs, " have other values")
    return s, loss, g


def check_rng(name: str, rng):
    """A seed or generator: ``None``, an int ``>= 0``, a sequence of them, or a numpy ``Generator`` /
    ``BitGenerator`` / ``SeedSequence`` (``True`` and ``0.5`` refused).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    rng : object
        The value to check.

    Returns
    -------
    object
        ``rng`` unchanged (:func:`numpy.random.default_rng` reads it).

    Raises
    ------
    ParameterError
        For anything else.
    """
    if rng is None or isinstance(rng, np.random.Generator | np.random.BitGenerator | np.random.SeedSequence):
        return rng
    seeds = list(rng) if isinstance(rng, list | tuple | np.ndarray) else [rng]
    if not seeds or any(isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Integral) or x < 0 for x in seeds):
        raise ParameterError(
            f"{name}: must be a seed (an int >= 0, or a list of them) or a numpy Generator, got {rng!r}"
        )
    return rng


def check_label_prob(label_prob, shape) -> None:
    """Labelling probabilities in ``(0, 1]`` broadcastable to ``shape`` (``None`` passes).

    Parameters
    ----------
    label_prob : float or array_like or None
        The probabilities.
    shape : tuple of int
        The shape of the losses they apply to.

    Raises
    ------
    ParameterError
        Naming ``label_prob``.
    """
    if label_prob is None:
        return
    if isinstance(label_prob, bool | str):
        raise ParameterError(f"label_prob: must be numbers in (0, 1], got {label_prob!r}")
    p = _numeric("label_prob", np.asarray(label_prob), allow_bool=False)
    if not np.all(np.isfinite(p) & (p > 0) & (p <= 1)):
        where = f"{label_prob!r}" if p.ndim == 0 else f"values outside at {_first(~((p > 0) & (p <= 1)))}"
        raise ParameterError(f"label_prob: must lie in (0, 1], got {where}")
    try:
        np.broadcast_shapes(p.shape, tuple(shape))
    except ValueError:
        raise ParameterError(f"label_prob: shape {p.shape} does not broadcast to the losses' {tuple(shape)}") from None


def check_decisions(decisions, n: int):
    """The five decision fields of an online block: shape ``(n,)``, ``route``/``observe`` bool, the rest float.

    Parameters
    ----------
    decisions : Decisions
        As returned by :meth:`~gpac_utils.online.OnlineGPAC.decide`.
    n : int
        The number of items of the call.

    Returns
    -------
    Decisions
        The same type, its fields as arrays.

    Raises
    ------
    ParameterError
        Naming ``decisions`` and the field: a wrong shape, or a wrong dtype (0/1 integer flags
        would index rows by position instead of masking them).
    """
    names = ("route_nothink", "observe", "propensity", "rate", "threshold")
    if not (isinstance(decisions, tuple) and hasattr(decisions, "_fields") and len(decisions) >= len(names)):
        raise ParameterError(f"decisions: must be the Decisions that decide() returned, got {type(decisions).__name__}")
    out = []
    for name, f in zip(names, decisions):
        a = np.asarray(f)
        if a.shape != (n,):
            raise ParameterError(
                f"decisions: need the decisions of these {n} items (from decide), field {name!r} has shape {a.shape}"
            )
        want, why = ("b", "bool (0/1 integers would index rows by position)") if name in names[:2] else ("f", "float")
        if a.dtype.kind != want:
            raise ParameterError(
                f"decisions: field {name!r} must be {why}, as decide() returns it; got dtype {a.dtype}"
            )
        out.append(a)
    return type(decisions)(*out, *decisions[len(names) :])


def check_observed_losses(losses, observe: np.ndarray, loss_bound: float) -> np.ndarray:
    """One loss per item of a block; finite and in ``[0, loss_bound]`` where ``observe`` (NaN elsewhere is fine).

    Parameters
    ----------
    losses : array_like
        The block's losses.
    observe : numpy.ndarray of bool
        Which items' losses are read.
    loss_bound : float
        Upper end of the loss range.

    Returns
    -------
    numpy.ndarray of float

    Raises
    ------
    ParameterError
        Naming ``losses`` and the rows within the block.
    """
    loss = _numeric("losses", _one_d("losses", losses), allow_bool=True)
    if loss.shape != observe.shape:
        raise ParameterError(f"losses: need one loss per item ({observe.size}), got shape {loss.shape}")
    with np.errstate(invalid="ignore"):
        bad = observe & ~(np.isfinite(loss) & (loss >= 0) & (loss <= loss_bound))
    _refuse(bad, f"losses: an observed item needs a finite loss in [0, {loss_bound}]; bad at rows", " of the block")
    return loss


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
