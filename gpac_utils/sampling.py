r"""Expert-label sampling schemes: which calibration items get a thinking-model label.

Each scheme turns per-item losses into terms ``Z`` whose mean (given a threshold) estimates
the thresholded risk, and reports their range ``term_range = loss_bound / min(label_prob)`` (the paper's
:math:`B/\pi_{\min}`) for the bounds. ``label_prob`` is the per-item labelling probability (the paper's :math:`\pi_i`).

``resample`` (paper Algorithm 1)
    ``m = ceil(n / mean(label_prob))`` indices drawn uniformly *with replacement*; per draw
    ``xi ~ Bern(pi_i)`` and ``Z = xi * loss / pi_i``. Given the calibration set the terms are
    i.i.d. with mean equal to the *empirical* calibration risk, so a bound on their mean ignores
    the sampling variability of the calibration set itself: not valid for the population risk.
``bernoulli``
    each calibration item is queried once, independently, with probability ``pi_i``:
    ``Z_i = xi_i * loss_i / pi_i``. For i.i.d. calibration items these are i.i.d. with mean
    ``R(u)`` — the scheme under which the *valid* bounds are valid.
``full``
    every item labelled (``label_prob = 1``): ``Z_i = loss_i``.

Terms are returned in uniformly random order by default (sequential bounds such as ``wsr``
need an exchangeable order even when the input table is sorted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCHEMES = ("resample", "bernoulli", "full")
#: The most terms the ``resample`` scheme draws per calibration (``n / mean(label_prob)``).
MAX_RESAMPLE_TERMS = 10**8


@dataclass(frozen=True)
class Draw:
    """The expert-label terms of one or many calibrations (what :func:`draw` returns).

    Attributes
    ----------
    z : numpy.ndarray, shape (..., m)
        The terms ``Z``, in ``[0, term_range]``; their mean estimates the thresholded risk.
    scores : numpy.ndarray, shape (..., m)
        The score of each term's item.
    term_range : float or numpy.ndarray
        The range ``loss_bound / min(label_prob)`` of the terms, per calibration (a float for a
        single calibration, else the shape of the batch dimensions).
    n_queried : int or numpy.ndarray, shape (...)
        The number of expert labels used, per calibration.
    items : numpy.ndarray of int, shape (..., m), or None
        The index (last axis) of each term's item; ``None`` where the terms are the items in their
        input order.
    """

    z: np.ndarray  # (..., m) terms in [0, term_range]
    scores: np.ndarray  # (..., m) the score of each term's item
    term_range: float | np.ndarray  # loss_bound / min(label_prob), per calibration (shape of the batch)
    n_queried: np.ndarray  # (...) number of expert labels used
    items: np.ndarray | None = None  # (..., m) each term's item; None: the items in input order


def _check_label_prob(label_prob, shape):
    probs = np.broadcast_to(np.asarray(label_prob, dtype=float), shape)
    if not np.all(np.isfinite(probs)) or probs.min() <= 0 or probs.max() > 1:
        raise ValueError(f"label_prob: must lie in (0, 1]; got min {probs.min()}, max {probs.max()}")
    return probs


def draw(scores, losses, scheme: str, label_prob=0.5, rng=None, loss_bound: float = 1.0, shuffle: bool = True) -> Draw:
    """Draw the terms ``Z`` for one or many calibrations (batch dims lead, items last).

    ``shuffle=False`` keeps the input order for ``bernoulli`` / ``full`` (enough for bounds that
    depend on the terms only through sums; sequential bounds need the default).

    Parameters
    ----------
    scores : array_like, shape (..., n)
        Calibration scores.
    losses : array_like, shape (..., n)
        The losses of the same items, in ``[0, loss_bound]``.
    scheme : {"resample", "bernoulli", "full"}
        The sampling scheme (see the module description).
    label_prob : float or array_like, default 0.5
        Labelling probability of each item, in ``(0, 1]``, broadcast against ``losses``; ignored
        by ``"full"``. ``"resample"`` needs the same ``mean(label_prob)`` for every calibration
        of a batch.
    rng : None, int or numpy.random.Generator, optional
        Seed or generator (passed to :func:`numpy.random.default_rng`).
    loss_bound : float, default 1.0
        The upper end of the loss range (the paper's ``B``).
    shuffle : bool, default True
        Return the ``bernoulli`` / ``full`` terms in uniformly random order (``resample`` draws are
        in random order anyway).

    Returns
    -------
    Draw
        The terms, their items' scores, their range and the number of labels used. ``resample``
        gives ``m = ceil(n / mean(label_prob))`` terms per calibration, the other schemes ``n``.

    Raises
    ------
    ValueError
        For an unknown scheme, empty or mismatched ``scores`` / ``losses``, a loss outside
        ``[0, loss_bound]``, a ``label_prob`` outside ``(0, 1]``, or unequal
        ``mean(label_prob)`` in a ``resample`` batch.

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils.sampling import draw
    >>> d = draw([0.1, 0.4, 0.2, 0.9], [0.0, 1.0, 0.0, 1.0], "full", shuffle=False)
    >>> d.z.tolist(), d.term_range, int(d.n_queried)
    ([0.0, 1.0, 0.0, 1.0], 1.0, 4)
    >>> d = draw([0.1, 0.4, 0.2, 0.9], [0.0, 1.0, 0.0, 1.0], "bernoulli", label_prob=0.5, rng=0)
    >>> d.term_range  # loss_bound / min(label_prob)
    2.0
    >>> set(d.z.tolist()) <= {0.0, 2.0}  # an unlabelled item gives 0, a labelled one loss / label_prob
    True
    >>> draw(np.zeros((3, 10)), np.zeros((3, 10)), "resample", label_prob=0.5, rng=1).z.shape  # 3 calibrations
    (3, 20)
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown sampling scheme {scheme!r}; choose one of {SCHEMES}")
    rng = np.random.default_rng(rng)
    losses = np.asarray(losses, dtype=float)
    scores = np.asarray(scores, dtype=float)
    if losses.shape != scores.shape or losses.ndim == 0 or losses.shape[-1] == 0:
        raise ValueError(f"scores and losses must share a non-empty shape, got {scores.shape}, {losses.shape}")
    if losses.min() < 0 or losses.max() > loss_bound:
        raise ValueError(f"losses must lie in [0, loss_bound={loss_bound}]")
    n = losses.shape[-1]
    if scheme == "full":
        probs = np.ones_like(losses)
    elif np.ndim(label_prob) == 0:  # one probability for every item: no array of it (same bits)
        probs = float(_check_label_prob(label_prob, ()))
    else:
        probs = _check_label_prob(label_prob, losses.shape)
    # The range of the terms is per calibration (per batch row): one calibration's labelling
    # probabilities never widen another's bound.
    every = np.broadcast_to(probs, losses.shape)  # a view: no copy of one probability
    term_range = loss_bound / every.min(axis=-1)
    if term_range.ndim == 0:
        term_range = float(term_range)
    if scheme == "resample":
        means = every.mean(axis=-1)
        if np.ndim(means) and not np.all(means == means.flat[0]):
            raise ValueError(
                "label_prob: the resample scheme draws n / mean(label_prob) terms, so mean(label_prob) must be "
                "equal across a batch"
            )
        n_terms = n / float(np.mean(means))
        if n_terms > MAX_RESAMPLE_TERMS:
            raise ValueError(
                f"label_prob: the resample scheme would draw n / mean(label_prob) = {n_terms:.3g} terms "
                f"(at most {MAX_RESAMPLE_TERMS:.0e}); use a larger label_prob"
            )
        m = int(math.ceil(n_terms - 1e-9))
        order = rng.integers(0, n, size=losses.shape[:-1] + (m,))  # m draws with replacement
    else:
        order = rng.permuted(np.broadcast_to(np.arange(n), losses.shape), axis=-1) if shuffle else None
    drawn_losses, drawn_scores, drawn_probs = (_take(a, order) for a in (losses, scores, probs))
    if scheme == "full":
        return Draw(drawn_losses, drawn_scores, term_range, np.full(losses.shape[:-1], n), order)
    xi = rng.random(drawn_losses.shape) < drawn_probs
    return Draw(xi * drawn_losses / drawn_probs, drawn_scores, term_range, xi.sum(axis=-1), order)


def _take(a, idx):
    """``a`` at the items ``idx`` along the last axis (a float: one value for every item, and ``idx`` None: the
    items in their order, as it is)."""
    if isinstance(a, float) or idx is None:
        return a
    return a[idx] if a.ndim == 1 else np.take_along_axis(a, idx, axis=-1)
