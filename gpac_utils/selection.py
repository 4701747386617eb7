r"""Threshold selection from a curve of upper confidence bounds.

``first-crossing`` (default)
    scan candidates from the most conservative (smallest) upward and stop *before* the first
    ``u`` whose UCB exceeds ``eps``. The scan runs on the *monotone upper envelope* of the bound,
    ``E(u) = max_{u' <= u} UCB(u')`` (:func:`upper_envelope`): a running maximum of pointwise-valid
    bounds is still pointwise valid and is non-decreasing (``wsr`` and ``empirical_bernstein``
    are not monotone in ``u``). Its first crossing is the bound's own first crossing, so the
    envelope changes no threshold; it makes the argument below hold as stated.

    *Why it is valid, and on which grids.* ``R(u)`` is non-decreasing. (a) A grid fixed before
    the data: if the chosen threshold had risk above ``eps``, the scan passed the first unsafe grid
    point ``u+`` (the smallest with ``R(u+) > eps``), a fixed point, where the bound then failed:
    probability at most ``alpha`` (Bates et al. 2021, Angelopoulos et al. 2021). (b) Every distinct calibration
    score (``"all"``): every bound here depends on ``u`` only through the terms
    ``z_i 1{U_i <= u}``, which are constant between consecutive scores, so the scan over the scores
    is the scan over all of ``[0, 1]``; a violation means the scan passed a fixed ``v`` with
    ``R(v) > eps``, where the bound failed. (c) A grid of *quantiles of the calibration scores*
    is neither: it skips scores, so passing a grid point says nothing about the fixed points in
    between, and the point ``u+`` is random. The argument then needs a bound that is
    non-decreasing in every term, which ``wsr``, ``empirical_bernstein`` and ``clt`` are not.
    Hence ``candidates="auto"`` gives ``wsr`` (whose cost grows with the grid)
    :data:`WSR_AUTO_GRID` evenly spaced points of ``[0, 1]``, a grid fixed in advance; an explicit
    int ``candidates`` still gives score quantiles, outside this argument.

    *A group's interval* (``interval=(lo, hi)`` of :func:`candidate_grid`). Argument (a) needs the
    grid to be a function of data independent of the terms the bound is computed from, nothing
    more. A C-PAC group covers one interval ``(lo, hi]`` of the score axis and meets only the grid
    points inside it (a group of width ``w`` about ``64 w`` of them). In ``split`` mode the interval
    is learned on the clustering half, independent of the calibration half: given that half it is
    fixed, so ``WSR_AUTO_GRID`` evenly spaced points of ``[lo, hi]`` are a grid fixed in advance
    for the calibration half, and (a) holds conditionally on the partition, hence unconditionally
    (as Theorem 4.6, part 1, conditions on the partition). In ``joint`` mode the interval is a
    function of the calibration scores themselves, so a grid over it is neither fixed in advance
    (a) nor every score (b): joint C-PAC keeps the grid of ``[0, 1]``, so that its within-group
    selection step is no less valid than before (its guarantee is Theorem 4.6, part 2's, with the
    extra ``c * delta``).
``max``
    the paper's literal ``max{u : UCB(u) <= eps}`` (Eq. (2)); it may jump past a crossing
    where the bound dips back below ``eps``, so it is kept for reproduction only.

No feasible candidate gives the threshold ``-inf`` (always think), as in Theorem 4.2's proof
(``thm:known-grouping``, proof in Appendix B). Candidates are distinct calibration scores by default, evenly
spaced points of ``[0, 1]`` for ``wsr``, or a grid of score quantiles.
"""

from __future__ import annotations

import math

import numpy as np

from . import bounds as _bounds

RULES = ("first-crossing", "max")


#: ``candidates="auto"`` gives every distinct score, except for a sequential bound (``wsr``),
#: which uses this many evenly spaced points of ``[0, 1]`` when there are more scores (its cost
#: grows with the grid; a grid fixed in advance keeps first-crossing valid, module description).
WSR_AUTO_GRID = 64


def resolve_candidates(candidates, bound: str, n: int):
    """The candidate setting actually used: ``"auto"`` becomes ``"all"`` or :data:`WSR_AUTO_GRID`.

    Parameters
    ----------
    candidates : {"auto", "all"} or int
        The requested setting; anything but ``"auto"`` is returned unchanged.
    bound : str or None
        The bound the candidates are for (``"auto"`` gives a grid for a ``sequential`` bound,
        :attr:`gpac_utils.bounds.Bound.sequential`, such as ``"wsr"``).
    n : int
        The number of calibration scores.

    Returns
    -------
    str or int
        ``"all"`` or a grid size.

    Examples
    --------
    >>> resolve_candidates("auto", "wsr", 1000), resolve_candidates("auto", "hoeffding_bentkus", 1000)
    (64, 'all')
    """
    if candidates == "auto":
        sequential = bound is not None and _bounds.BOUNDS[bound].sequential
        return WSR_AUTO_GRID if (sequential and n > WSR_AUTO_GRID) else "all"
    return candidates


def candidate_grid(scores, candidates="all", bound: str | None = None, interval=(0.0, 1.0)) -> np.ndarray:
    """Ascending candidate thresholds for one or many calibrations (batch dims lead).

    Parameters
    ----------
    scores : array_like, shape (..., n)
        Calibration scores.
    candidates : {"auto", "all"} or int
        ``"all"``: every score (sorted; duplicates share a bound value, so selection is
        unaffected); an int ``G``: ``G`` score quantiles (``inverted_cdf``, so every candidate
        is an observed score); ``"auto"``: see :func:`resolve_candidates` (needs ``bound``); where
        that gives a grid size, ``G`` evenly spaced points of ``[0, 1]``.
    bound : str, optional
        The bound the grid is for (only read by ``"auto"``).
    interval : (float, float), default (0.0, 1.0)
        The evenly spaced grid of ``"auto"`` spans ``[lo, hi]`` (a split C-PAC group's interval,
        fixed before the calibration half: module description); ignored otherwise.

    Returns
    -------
    numpy.ndarray, shape (..., K)
        Candidates, ascending along the last axis.

    Examples
    --------
    >>> candidate_grid(np.linspace(0, 1, 100), "auto", "wsr")[:2].round(4).tolist()
    [0.0, 0.0159]
    >>> candidate_grid(np.linspace(0.5, 0.75, 100), "auto", "wsr", interval=(0.5, 0.75))[[0, -1]].tolist()
    [0.5, 0.75]
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim == 0 or s.shape[-1] == 0:
        raise ValueError("no scores to build candidate thresholds from")
    setting = resolve_candidates(candidates, bound, s.shape[-1])
    if isinstance(setting, str):
        if setting != "all":
            raise ValueError(f"candidates: must be 'auto', 'all' or a positive int, got {candidates!r}")
        return np.sort(s, axis=-1)
    size = int(setting)
    if size < 1:
        raise ValueError(f"candidates: grid size must be >= 1, got {candidates}")
    if candidates == "auto":  # fixed in advance, not read off the calibration scores
        lo, hi = (float(v) for v in interval)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"interval: must be finite with lo <= hi, got {interval!r}")
        return np.broadcast_to(np.linspace(lo, hi, size), (*s.shape[:-1], size)).copy()
    return np.moveaxis(np.quantile(s, np.linspace(0, 1, size), axis=-1, method="inverted_cdf"), 0, -1)


def upper_envelope(ucb) -> np.ndarray:
    """The running maximum of a bound over ascending candidates (last axis): monotone, still valid.

    Parameters
    ----------
    ucb : array_like, shape (..., K)
        The bound at each candidate, candidates ascending.

    Returns
    -------
    numpy.ndarray, shape (..., K)
        ``E[..., k] = max_{k' <= k} ucb[..., k']``.

    Examples
    --------
    >>> upper_envelope([0.01, 0.2, 0.03, 0.5]).tolist()
    [0.01, 0.2, 0.2, 0.5]
    """
    return np.maximum.accumulate(np.asarray(ucb, dtype=float), axis=-1)


def select(candidates, ucb, eps: float, rule: str = "first-crossing") -> np.ndarray:
    """Pick the threshold from ``candidates`` (..., K) given their ``ucb`` (..., K).

    Parameters
    ----------
    candidates : array_like, shape (..., K)
        Ascending candidate thresholds (broadcast against ``ucb``).
    ucb : array_like, shape (..., K)
        Upper confidence bound on the risk at each candidate.
    eps : float
        Target risk.
    rule : {"first-crossing", "max"}
        Stop before the first candidate whose bound exceeds ``eps`` (valid), or take the largest
        candidate whose bound is at most ``eps`` (the paper's literal rule).

    Returns
    -------
    numpy.ndarray, shape (...)
        The chosen threshold; ``-inf`` when no candidate is certified.

    Examples
    --------
    >>> select([0.1, 0.2, 0.3, 0.4], [0.01, 0.2, 0.03, 0.5], eps=0.05).item()
    0.1
    >>> select([0.1, 0.2, 0.3, 0.4], [0.01, 0.2, 0.03, 0.5], eps=0.05, rule="max").item()
    0.3
    >>> select([0.1, 0.2], [0.2, 0.3], eps=0.05).item()
    -inf
    """
    if rule not in RULES:
        raise ValueError(f"unknown selection rule {rule!r}; choose one of {RULES}")
    ucb = np.asarray(ucb, dtype=float)
    if rule == "max":
        return largest_rejected(candidates, ucb <= eps)
    # first-crossing: the candidates before the envelope's first crossing
    return largest_rejected(candidates, ~np.logical_or.accumulate(upper_envelope(ucb) > eps, axis=-1))


def largest_rejected(grid, rejected) -> np.ndarray:
    """The largest grid point flagged in ``rejected`` (``-inf`` where none), over the last axis: the routed
    risk's largest rejected hypothesis (:mod:`gpac_utils.risks`), :func:`select`'s last certified candidate.

    Examples
    --------
    >>> largest_rejected([0.1, 0.2, 0.3], [True, True, False]).item()
    0.2
    """
    rejected = np.asarray(rejected, dtype=bool)
    grid = np.broadcast_to(np.asarray(grid, dtype=float), rejected.shape)
    K = rejected.shape[-1]
    last = K - 1 - rejected[..., ::-1].argmax(axis=-1)
    chosen = np.take_along_axis(grid, last[..., None], axis=-1)[..., 0]
    return np.where(rejected.any(axis=-1), chosen, -np.inf)
