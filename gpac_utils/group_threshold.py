"""One group's threshold (paper Algorithms 1-2) and the group-label helpers every calibrator shares.

:func:`threshold` and :func:`batch_threshold` certify one group's threshold as a
:class:`~gpac_utils.recipe.Recipe` says (labels drawn, an upper confidence bound at every candidate,
the recipe's rule); :func:`routed_threshold` and :func:`routed_risk_curve` do it for the routed risk,
:func:`risk_curve` gives the bound at every candidate; :func:`factorize_groups` and
:func:`group_labels` turn group labels into codes. The calibrators of :mod:`gpac_utils.calibrate`
(which re-exports these names) are built on them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from . import bounds as _bounds
from . import risks as _risks
from . import sampling as _sampling
from . import selection as _selection
from .checks import (
    ParameterError,
    check_groups,
    check_label_prob,
    check_rng,
    check_xy,
)
from .recipe import VALID, Recipe, check_recipe
from .risks import Problem
from .settings import Settings, check_risk

__all__ = [
    "THRESHOLD_READS",
    "threshold",
    "batch_threshold",
    "routed_threshold",
    "routed_risk_curve",
    "risk_curve",
    "factorize_groups",
    "group_labels",
]


def _certify_joint(scores, losses, problem: Problem, rng):
    """The joint risk's step for one group (:attr:`gpac_utils.risks.Risk.certify`): :func:`_threshold`
    with the labels drawn and the upper confidence bound at the chosen candidate."""
    d, cand, ucb = _bound_curve(scores, losses, problem, rng)
    t = float(_selection.select(cand, ucb, problem.eps, problem.recipe.rule))
    at = np.searchsorted(cand, t, side="right") - 1  # the chosen candidate (ties share their bound)
    return t, int(np.asarray(d.n_queried)), float(ucb[at]) if math.isfinite(t) else None


def _threshold(scores, losses, problem: Problem, rng):
    """:func:`batch_threshold`'s joint-risk step on checked arguments (the thresholds only)."""
    _, cand, ucb = _bound_curve(scores, losses, problem, rng)
    return _selection.select(cand, ucb, problem.eps, problem.recipe.rule)


# the paper's risk: certified by the functions above (calibrate imports risks, not the other way round)
_risks.RISKS.register(
    dataclasses.replace(_risks.RISKS["joint"], certify=_certify_joint, threshold=_threshold), replace=True
)


def _bound_curve(scores, losses, problem: Problem, rng):
    """The label terms as the recipe draws them, the candidate thresholds and the bound at each of them."""
    recipe = problem.recipe
    bound = _bounds.BOUNDS[recipe.bound]
    # Only a sequential bound depends on the order of the terms.
    d = _sampling.draw(
        scores, losses, recipe.sampling, problem.probs, rng, problem.loss_bound, shuffle=bound.sequential
    )
    every_score = _selection.resolve_candidates(recipe.candidates, recipe.bound, scores.shape[-1]) == "all"
    if every_score and scores.ndim == 1 and not bound.sequential:  # shortcuts of the same bits
        curve = _bounds._curve_of_nonzero(bound, d.z, d.scores, scores, problem.alpha, d.term_range)
        if curve is not None:
            return d, *curve
        if d.items is None:  # the terms carry the scores in their order
            return d, *_bounds._curve_at_scores(bound, d.z, scores, problem.alpha, d.term_range)
    cand = _selection.candidate_grid(scores, recipe.candidates, recipe.bound, problem.interval)
    return d, cand, _bounds.ucb(recipe.bound, d.z, d.scores, cand, problem.alpha, d.term_range)


#: The :class:`~gpac_utils.settings.Settings` fields :func:`threshold` and :func:`batch_threshold` read
#: (they refuse the others away from their defaults: they would not change the answer).
THRESHOLD_READS = ("eps", "alpha", "recipe", "loss_bound", "risk")


def threshold(scores, losses, settings=None, *, rng=None, label_prob=None, interval=(0.0, 1.0), **fields) -> np.ndarray:
    """Calibrate one group: its threshold (``-inf``: always think).

    Parameters
    ----------
    scores, losses : array_like, shape (n,)
        Per-item scores in ``[0, 1]`` and losses in ``[0, loss_bound]``, 1-D (an ``(n, 1)`` array
        is refused: :func:`batch_threshold` calibrates many groups at once).
    settings : Settings, optional
        The settings, whole (:class:`~gpac_utils.settings.Settings`); it reads
        :data:`THRESHOLD_READS` and refuses the other fields away from their defaults.
    rng : numpy.random.Generator or int, optional
        Randomness of the label sampling.
    label_prob : array_like, optional
        Labelling probabilities broadcastable to ``losses`` (overrides ``recipe.label_prob``).
    interval : (float, float), default (0.0, 1.0)
        The span of the evenly spaced grids (``wsr``'s auto grid, the routed risk's grid): a split
        C-PAC group's interval, fixed before the calibration half
        (:func:`gpac_utils.selection.candidate_grid`).
    **fields
        Without ``settings``, its fields: ``eps`` (target risk, required), ``alpha`` (miscoverage,
        default 0.05), ``recipe`` (a :class:`~gpac_utils.recipe.Recipe` or its name, default
        :data:`~gpac_utils.recipe.VALID`), ``loss_bound`` (default 1.0) and ``risk`` (what is
        certified, :data:`~gpac_utils.risks.RISKS`, default ``"joint"``); with it, changes to them.

    Returns
    -------
    numpy.ndarray, shape ()
        The threshold; ``-inf`` where no candidate is certified (always think).

    Raises
    ------
    ParameterError
        Naming the argument: scores outside ``[0, 1]``, losses outside ``[0, loss_bound]``, NaN or
        infinity, shapes that differ or are not 1-D, pandas inputs whose indexes differ (never
        re-paired by position), ``eps``/``alpha``/``label_prob`` out of range, a bad ``recipe``,
        ``rng`` or ``risk``, a setting it would ignore.

    Examples
    --------
    >>> import numpy as np
    >>> u = np.linspace(0, 1, 500)
    >>> losses = (u > 0.8).astype(float)  # only the most uncertain fifth is lossy
    >>> float(threshold(u, losses, eps=0.05, alpha=0.05)) > 0.8
    True
    """
    entry, scores, losses, problem = _checked(scores, losses, settings, fields, label_prob, interval)
    return np.asarray(entry.certify(scores, losses, problem, check_rng("rng", rng))[0], dtype=float)


def batch_threshold(
    scores, losses, settings=None, *, rng=None, label_prob=None, interval=(0.0, 1.0), **fields
) -> np.ndarray:
    """:func:`threshold` of many independent calibrations at once (the planner's resamples, the audits).

    Parameters
    ----------
    scores, losses : array_like, shape (..., n)
        One calibration per index of the leading axes (at least one: a 1-D array is refused,
        :func:`threshold` calibrates one group), ``n`` items each.
    settings, rng, interval, **fields
        As for :func:`threshold`.
    label_prob : array_like, optional
        As for :func:`threshold`; e.g. a different probability per calibration, shape ``(..., 1)``.

    Returns
    -------
    numpy.ndarray, shape (...)
        One threshold per calibration; ``-inf`` where no candidate is certified.

    Examples
    --------
    >>> import numpy as np
    >>> u = np.tile(np.linspace(0, 1, 500), (3, 1))
    >>> batch_threshold(u, (u > 0.8).astype(float), eps=0.05).shape
    (3,)
    """
    entry, scores, losses, problem = _checked(scores, losses, settings, fields, label_prob, interval, batch=True)
    rng = check_rng("rng", rng)
    if entry.threshold is not None:
        return entry.threshold(scores, losses, problem, rng)
    # a risk that certifies one group at a time: one call per calibration (a per-row label_prob sliced)
    batch, n = scores.shape[:-1], scores.shape[-1]
    per_row = problem.label_prob is not None and np.ndim(problem.label_prob) > 1
    probs = np.broadcast_to(problem.label_prob, scores.shape).reshape(-1, n) if per_row else None
    out = [
        entry.certify(s, loss, dataclasses.replace(problem, label_prob=probs[i]) if per_row else problem, rng)[0]
        for i, (s, loss) in enumerate(zip(scores.reshape(-1, n), losses.reshape(-1, n), strict=True))
    ]
    return np.array(out, dtype=float).reshape(batch)


def _checked(scores, losses, settings, fields: dict, label_prob, interval, batch: bool = False):
    """The validation layer's calls of :func:`threshold`: its :class:`~gpac_utils.settings.Settings`, given
    whole (``fields`` then change it) or built from ``fields`` (a field it would ignore is refused), then the
    risk's entry, the checked scores and losses, and the :class:`Problem` with the call's ``label_prob`` and
    ``interval``."""
    if settings is None:
        settings = Settings(**fields)
    elif not isinstance(settings, Settings):
        raise ParameterError(f"settings: must be a Settings, got {type(settings).__name__}")
    elif fields:
        settings = settings.as_settings(**fields)
    for ignored in settings.ignored(THRESHOLD_READS)[:1]:
        raise ParameterError(
            f"{ignored}: threshold() does not read it (it reads {list(THRESHOLD_READS)}); leave it at its default"
        )
    binary = _bounds.BOUNDS[settings.recipe.bound].binary_terms
    scores, losses, _ = check_xy(
        scores, losses, loss_bound=settings.loss_bound, min_items=1, batch=batch, binary=binary
    )
    if batch and scores.ndim < 2:
        raise ParameterError(
            f"scores: batch_threshold takes calibrations along leading axes, shape (..., n); got shape {scores.shape}: "
            "use threshold() for one group"
        )
    check_label_prob(label_prob, losses.shape)
    problem = Problem(settings.eps, settings.alpha, settings.recipe, settings.loss_bound, label_prob, tuple(interval))
    return _risks.get_risk(settings.risk), scores, losses, problem


def routed_threshold(scores, losses, settings=None, **options) -> np.ndarray:
    """:func:`threshold` with ``risk="routed"``: the routed risk ``E[loss | U <= u] <= eps`` (module description).

    Returns
    -------
    numpy.ndarray, shape (...)
        The largest threshold of the grid whose hypothesis the fallback procedure rejects;
        ``-inf`` if none (always think).

    Examples
    --------
    >>> import numpy as np
    >>> u = np.linspace(0, 1, 2000)
    >>> losses = (u > 0.5).astype(float)  # the upper half is always wrong
    >>> t = float(routed_threshold(u, losses, eps=0.1, alpha=0.05))
    >>> 0.5 < t < 0.56  # among the items with U <= t at most about 10 % are wrong
    True
    """
    return threshold(scores, losses, settings, **{**options, "risk": "routed"})


def routed_risk_curve(scores, losses, settings=None, *, rng=None, label_prob=None, interval=(0.0, 1.0), **fields):
    """The mechanism of one routed-risk calibration, per grid point (same ``rng`` → same threshold).

    Parameters
    ----------
    scores, losses : array_like, shape (n,)
        One group's scores and losses.
    settings, rng, label_prob, interval, **fields
        As for :func:`threshold` (``risk`` is ``"routed"``), checked as there.

    Returns
    -------
    pandas.DataFrame
        Columns ``u``, ``routed`` (count), ``routed_risk`` (mean routed term), ``p_value``,
        ``level`` (the fallback procedure's level there), ``rejected`` and ``selected``.
    """
    fields = {**fields, "risk": "routed"}
    _, scores, losses, problem = _checked(scores, losses, settings, fields, label_prob, interval)
    d = _risks.terms(scores, losses, problem, check_rng("rng", rng))
    grid = _risks.routed_grid(problem.interval)
    p, m = _risks.routed_pvalues(d.z, d.scores, grid, problem.eps, d.term_range, problem.recipe.bound)
    rejected = _risks.fallback_reject(p, problem.alpha)
    level, carried = np.zeros(grid.size), 0.0
    for k in range(grid.size):
        level[k] = problem.alpha / grid.size + carried
        carried = level[k] if rejected[k] else 0.0
    s = (d.z[None, :] * (d.scores[None, :] <= grid[:, None])).sum(axis=1)
    chosen = float(_risks.largest_rejected(grid, rejected))
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = np.where(m > 0, s / np.maximum(m, 1), np.nan)
    return pd.DataFrame(
        {
            "u": grid,
            "routed": m,
            "routed_risk": risk,
            "p_value": p,
            "level": level,
            "rejected": rejected,
            "selected": grid == chosen,
        }
    )


def risk_curve(
    scores, losses, *, eps: float, alpha: float, recipe: Recipe | str = VALID, loss_bound: float = 1.0, rng=None
) -> pd.DataFrame:
    """The mechanism of one calibration: empirical risk and its upper confidence bound against ``u``.

    Draws the label terms exactly as :func:`threshold` does (same ``rng`` → same threshold) and
    returns, at every candidate threshold, the empirical thresholded risk of the terms, the upper
    confidence bound, and whether the candidate is the selected threshold.

    Parameters
    ----------
    scores, losses : array_like, shape (n,)
        One group's calibration scores and losses.
    eps, alpha, recipe, loss_bound, rng
        As for :func:`threshold`.

    Returns
    -------
    pandas.DataFrame
        Columns ``u``, ``empirical_risk``, ``ucb``, ``envelope`` (its running maximum, what
        first-crossing scans) and ``selected`` (one row per candidate).

    Examples
    --------
    >>> import numpy as np
    >>> u = np.linspace(0, 1, 200)
    >>> curve = risk_curve(u, (u > 0.7).astype(float), eps=0.1, alpha=0.05)
    >>> list(curve.columns)
    ['u', 'empirical_risk', 'ucb', 'envelope', 'selected']
    """
    recipe, eps, alpha, loss_bound = check_recipe(recipe), *check_risk(eps, alpha, loss_bound)
    binary = _bounds.BOUNDS[recipe.bound].binary_terms
    scores, losses, _ = check_xy(scores, losses, loss_bound=loss_bound, min_items=1, binary=binary)
    d, cand, ucb = _bound_curve(scores, losses, Problem(eps, alpha, recipe, loss_bound), check_rng("rng", rng))
    chosen = _selection.select(cand, ucb, eps, recipe.rule)
    emp = (d.z[None, :] * (d.scores[None, :] <= cand[:, None])).mean(axis=1)
    envelope = _selection.upper_envelope(ucb)
    return pd.DataFrame(
        {"u": cand, "empirical_risk": emp, "ucb": ucb, "envelope": envelope, "selected": cand == chosen}
    )


def factorize_groups(labels) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and the sorted distinct labels (hash-based: fast for millions of rows).

    Parameters
    ----------
    labels : array_like, shape (n,)
        One group label per item.

    Returns
    -------
    codes : numpy.ndarray of int, shape (n,)
        Each item's index into ``names``.
    names : numpy.ndarray of str
        The distinct labels, sorted.

    Examples
    --------
    >>> codes, names = factorize_groups(["b", "a", "b"])
    >>> codes.tolist(), names.tolist()
    ([1, 0, 1], ['a', 'b'])
    """
    a = np.asarray(labels)
    if a.dtype.kind == "U" and a.ndim == 1 and a.size >= _PACKED_FROM:
        packed = _factorize_unicode(a)
        if packed is not None:
            return packed
    codes, names = pd.factorize(a, sort=True)
    return codes, np.asarray(names).astype(str)


#: From this many labels on, a numpy string array is factorised through its code points (below,
#: pandas' hash table, which first converts every label to a Python object, is as fast).
_PACKED_FROM = 4096


def _factorize_unicode(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`factorize_groups` of a 1-D numpy string array without a Python object per label.

    Each label is a row of code points (``NUL``-padded); the columns that hold a character anywhere
    are packed into one ``uint64`` key per label, exactly when they fit in 64 bits, else hashed
    (the hash is then checked: every label must equal its key's first label; ``None`` on a
    collision, and pandas factorises). Same codes and names as :func:`pandas.factorize`.
    """
    chars = np.ascontiguousarray(a).view(np.uint32).reshape(a.size, -1)
    top = _column_max(chars)
    used = np.flatnonzero(top)
    if used.size == 0:  # every label is '' (refused by the checks; pandas says the same)
        return None
    bits = int(top.max()).bit_length()
    exact = bits * used.size <= 64
    cols = chars[:, used].astype(np.uint64)  # the used columns, in one pass over the labels
    key = np.zeros(a.size, np.uint64)
    for column in cols.T:
        key = (key << np.uint64(bits)) | column if exact else (key ^ column) * np.uint64(0x100000001B3)
    hashed, _ = pd.factorize(key)
    first = np.empty(hashed.max() + 1, np.intp)
    first[hashed] = np.arange(a.size)  # one label of each key
    if not exact and not np.array_equal(cols[first[hashed]], cols):
        return None
    names = a[first]
    order = np.argsort(names)
    rank = np.empty(order.size, np.intp)
    rank[order] = np.arange(order.size)
    return rank[hashed], names[order].astype(str)


def _column_max(chars: np.ndarray, rows: int = 256) -> np.ndarray:
    """``chars.max(axis=0)`` of a C-ordered ``(n, L)`` array, with long inner loops: blocks of ``rows`` rows
    side by side (a reduction over axis 0 of a few columns costs a call per row)."""
    n, width = chars.shape
    whole = n - n % rows
    top = chars[:whole].reshape(-1, rows * width).max(axis=0).reshape(rows, width).max(axis=0) if whole else 0
    return np.maximum(top, chars[whole:].max(axis=0)) if whole < n else top


def group_labels(groups, n: int) -> np.ndarray:
    """The checked group labels of ``n`` items (one-line :class:`~gpac_utils.checks.ParameterError` naming ``groups``).

    Parameters
    ----------
    groups : array_like or None
        One label per item; ``None`` is refused (a calibrator with known groups needs them).
    n : int
        The number of items.

    Returns
    -------
    numpy.ndarray of str, shape (n,)
        The labels, as strings.

    Examples
    --------
    >>> group_labels(["x", "y"], 2).tolist()
    ['x', 'y']
    """
    if groups is None:
        raise ParameterError("groups: G-PAC needs one group label per item (groups=...)")
    return check_groups("groups", groups, n)
