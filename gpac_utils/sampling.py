r"""Expert-label sampling schemes: which calibration items get a thinking-model label.

Each scheme turns per-item losses into terms ``Z`` whose mean (given a threshold) estimates
the thresholded risk, and reports their range ``R = B / pi_min`` for the bounds.

``resample`` (paper Algorithm 1)
    ``m = ceil(n / mean(pi))`` indices drawn uniformly *with replacement*; per draw
    ``xi ~ Bern(pi_i)`` and ``Z = xi * loss / pi_i``. Given the calibration set the terms are
    i.i.d. with mean equal to the *empirical* calibration risk, so a bound on their mean ignores
    the sampling variability of the calibration set itself: not valid for the population risk.
``bernoulli``
    each calibration item is queried once, independently, with probability ``pi_i``:
    ``Z_i = xi_i * loss_i / pi_i``. For i.i.d. calibration items these are i.i.d. with mean
    ``R(u)`` — the scheme under which the *valid* bounds are valid.
``full``
    every item labelled (``pi = 1``): ``Z_i = loss_i``.

Terms are returned in uniformly random order by default (sequential bounds such as ``wsr``
need an exchangeable order even when the input table is sorted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCHEMES = ("resample", "bernoulli", "full")


@dataclass(frozen=True)
class Draw:
    """The expert-label terms of one or many calibrations (what :func:`draw` returns).

    Attributes
    ----------
    z : numpy.ndarray, shape (..., m)
        The terms ``Z``, in ``[0, value_range]``; their mean estimates the thresholded risk.
    scores : numpy.ndarray, shape (..., m)
        The score of each term's item.
    value_range : float or numpy.ndarray
        The range ``R = loss_bound / pi_min`` of the terms, per calibration (a float for a single
        calibration, else the shape of the batch dimensions).
    n_queried : int or numpy.ndarray, shape (...)
        The number of expert labels used, per calibration.
    """

    z: np.ndarray  # (..., m) terms in [0, value_range]
    scores: np.ndarray  # (..., m) the score of each term's item
    value_range: float | np.ndarray  # R = loss_bound / pi_min, per calibration (shape of the batch)
    n_queried: np.ndarray  # (...) number of expert labels used


def _check_pi(pi, shape):
    p = np.broadcast_to(np.asarray(pi, dtype=float), shape)
    if not np.all(np.isfinite(p)) or p.min() <= 0 or p.max() > 1:
        raise ValueError(f"sampling weights pi must lie in (0, 1]; got min {p.min()}, max {p.max()}")
    return p


def draw(loss, scores, scheme: str, pi=0.5, rng=None, loss_bound: float = 1.0, shuffle: bool = True) -> Draw:
    """Draw the terms ``Z`` for one or many calibrations (batch dims lead, items last).

    ``shuffle=False`` keeps the input order for ``bernoulli`` / ``full`` (enough for bounds that
    depend on the terms only through sums; sequential bounds need the default).

    Parameters
    ----------
    loss : array_like, shape (..., n)
        Calibration losses, in ``[0, loss_bound]``.
    scores : array_like, shape (..., n)
        The scores of the same items.
    scheme : {"resample", "bernoulli", "full"}
        The sampling scheme (see the module description).
    pi : float or array_like, default 0.5
        Labelling probability of each item, in ``(0, 1]``, broadcast against ``loss``; ignored by
        ``"full"``. ``"resample"`` needs the same ``mean(pi)`` for every calibration of a batch.
    rng : None, int or numpy.random.Generator, optional
        Seed or generator (passed to :func:`numpy.random.default_rng`).
    loss_bound : float, default 1.0
        The loss bound ``B``.
    shuffle : bool, default True
        Return the ``bernoulli`` / ``full`` terms in uniformly random order (``resample`` draws are
        in random order anyway).

    Returns
    -------
    Draw
        The terms, their items' scores, their range and the number of labels used. ``resample``
        gives ``m = ceil(n / mean(pi))`` terms per calibration, the other schemes ``n``.

    Raises
    ------
    ValueError
        For an unknown scheme, empty or mismatched ``loss`` / ``scores``, a loss outside
        ``[0, loss_bound]``, a ``pi`` outside ``(0, 1]``, or unequal ``mean(pi)`` in a
        ``resample`` batch.

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils.sampling import draw
    >>> d = draw([0.0, 1.0, 0.0, 1.0], [0.1, 0.4, 0.2, 0.9], "full", shuffle=False)
    >>> d.z.tolist(), d.value_range, int(d.n_queried)
    ([0.0, 1.0, 0.0, 1.0], 1.0, 4)
    >>> d = draw([0.0, 1.0, 0.0, 1.0], [0.1, 0.4, 0.2, 0.9], "bernoulli", pi=0.5, rng=0)
    >>> d.value_range  # loss_bound / min(pi)
    2.0
    >>> set(d.z.tolist()) <= {0.0, 2.0}  # an unlabelled item gives 0, a labelled one loss / pi
    True
    >>> draw(np.zeros((3, 10)), np.zeros((3, 10)), "resample", pi=0.5, rng=1).z.shape  # 3 calibrations
    (3, 20)
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown sampling scheme {scheme!r}; choose one of {SCHEMES}")
    rng = np.random.default_rng(rng)
    loss = np.asarray(loss, dtype=float)
    scores = np.asarray(scores, dtype=float)
    if loss.shape != scores.shape or loss.ndim == 0 or loss.shape[-1] == 0:
        raise ValueError(f"loss and scores must share a non-empty shape, got {loss.shape}, {scores.shape}")
    if loss.min() < 0 or loss.max() > loss_bound:
        raise ValueError(f"losses must lie in [0, loss_bound={loss_bound}]")
    n = loss.shape[-1]
    p = np.ones_like(loss) if scheme == "full" else _check_pi(pi, loss.shape)
    # The range of the terms is per calibration (per batch row): one calibration's labelling
    # probabilities never widen another's bound.
    value_range = loss_bound / p.min(axis=-1)
    if value_range.ndim == 0:
        value_range = float(value_range)
    if scheme == "resample":
        means = p.mean(axis=-1)
        if np.ndim(means) and not np.all(means == means.flat[0]):
            raise ValueError(
                "pi: the resample scheme draws n / mean(pi) terms, so mean(pi) must be equal across a batch"
            )
        m = int(math.ceil(n / float(np.mean(means)) - 1e-9))
        idx = rng.integers(0, n, size=loss.shape[:-1] + (m,))
        l = np.take_along_axis(loss, idx, axis=-1)
        u = np.take_along_axis(scores, idx, axis=-1)
        pp = np.take_along_axis(p, idx, axis=-1)
        xi = rng.random(idx.shape) < pp
        return Draw(xi * l / pp, u, value_range, xi.sum(axis=-1))
    if shuffle:
        order = rng.permuted(np.broadcast_to(np.arange(n), loss.shape), axis=-1)
        l = np.take_along_axis(loss, order, axis=-1)
        u = np.take_along_axis(scores, order, axis=-1)
        pp = np.take_along_axis(p, order, axis=-1)
    else:
        l, u, pp = loss, scores, p
    if scheme == "full":
        return Draw(l, u, value_range, np.full(loss.shape[:-1], n))
    xi = rng.random(l.shape) < pp
    return Draw(xi * l / pp, u, value_range, xi.sum(axis=-1))
