r"""Evaluation metrics of paper App. F (all as fractions; tables show percentages).

* ``error``: :math:`\frac1N\sum_i \ell_i \mathbf 1\{\text{routed to non-thinking}\}` on a test set;
* ``group_errors``: the same within each group, :math:`E_j`;
* ``error_gap``: :math:`\sum_j (\bar E_j - \varepsilon)_+` with :math:`\bar E_j` averaged over trials;
* ``stp``: saved token percentage, cascade form (the non-thinking answer is always generated,
  logits/verbalized scores) or router form (it is generated only when routed there);
* ``routed_share``: share of items routed to the non-thinking model;
* ``violation_rate``: share of trials whose group risk exceeds ``eps``, and its Monte Carlo
  standard error ``mcse``;
* ``reliability_curve`` / ``expected_calibration_error``: how calibrated a confidence is
  (equal-width bins).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .checks import ParameterError, check_array, check_consistent_length

STP_FORMS = ("cascade", "router")


def error(route, losses) -> float:
    """Empirical risk of the routed test set.

    Parameters
    ----------
    route : array_like of bool
        True where an item is routed to the non-thinking model.
    losses : array_like of float
        The loss of each item (same length).

    Returns
    -------
    float
        ``mean(losses * route)`` over *all* items (not only the routed ones); NaN for no items.

    Examples
    --------
    >>> error([True, True, False, False], [1.0, 0.0, 1.0, 1.0])
    0.25
    """
    r = np.asarray(route, dtype=bool)
    losses = np.asarray(losses, dtype=float)
    return float(np.mean(losses * r)) if r.size else float("nan")


def group_errors(route, losses, groups) -> dict[str, float]:
    """Per-group empirical risk ``E_j``.

    Parameters
    ----------
    route : array_like of bool
        True where an item is routed to the non-thinking model.
    losses : array_like of float
        The loss of each item.
    groups : array_like
        The group label of each item (compared as strings).

    Returns
    -------
    dict of str to float
        :func:`error` within each group, keys sorted.

    Examples
    --------
    >>> group_errors([True, True, True, False], [1, 0, 1, 1], ["a", "a", "b", "b"])
    {'a': 0.5, 'b': 0.5}
    """
    r = np.asarray(route, dtype=bool)
    losses = np.asarray(losses, dtype=float)
    g = np.asarray(groups).astype(str)
    return {k: error(r[g == k], losses[g == k]) for k in sorted(set(g.tolist()))}


def routed_share(route) -> float:
    """Share of items routed to the non-thinking model.

    Parameters
    ----------
    route : array_like of bool
        True where an item is routed to the non-thinking model.

    Returns
    -------
    float
        The mean of ``route``; NaN for no items.
    """
    r = np.asarray(route, dtype=bool)
    return float(r.mean()) if r.size else float("nan")


def stp(route, think_tokens, nothink_tokens, form: str = "cascade") -> float:
    """Saved token percentage (App. F) as a fraction; negative when routing costs more.

    Parameters
    ----------
    route : array_like of bool
        True where an item is routed to the non-thinking model.
    think_tokens : array_like of float
        Tokens the thinking model generates for each item; every one must be > 0.
    nothink_tokens : array_like of float
        Tokens the non-thinking model generates for each item.
    form : {"cascade", "router"}, default "cascade"
        ``"cascade"``: the non-thinking answer is always generated (cost ``nothink + (1 - r) think`` in tokens);
        ``"router"``: only when routed there (cost ``r nothink + (1 - r) think``). See
        :func:`gpac_utils.experiment.default_stp_form`.

    Returns
    -------
    float
        ``mean(1 - cost / think_tokens)`` over the items.

    Raises
    ------
    ValueError
        For an unknown ``form``, or a ``think_tokens`` entry that is not > 0.

    Examples
    --------
    >>> from gpac_utils.metrics import stp
    >>> route = [True, False]
    >>> stp(route, [100, 100], [25, 25], form="router")  # (1 - 25/100 + 1 - 100/100) / 2
    0.375
    >>> stp(route, [100, 100], [25, 25])  # cascade: the second item pays for both answers
    0.25
    """
    if form not in STP_FORMS:
        raise ValueError(f"unknown STP form {form!r}; choose one of {STP_FORMS}")
    r = check_array("route", route, 0, 1)  # one flag per item: booleans, or 0/1
    if not np.isin(r, (0, 1)).all():
        raise ParameterError(f"route: must be True or False (or 0/1) per item; {r[~np.isin(r, (0, 1))][0]!r} given")
    r = r.astype(bool)
    think = check_array("think_tokens", think_tokens)
    nothink = check_array("nothink_tokens", nothink_tokens, 0)
    check_consistent_length(route=r, think_tokens=think, nothink_tokens=nothink)
    bad = ~(think > 0)
    if bad.any():
        raise ValueError(f"think_tokens must be > 0 for STP; bad at rows {np.flatnonzero(bad)[:5].tolist()}")
    # the non-thinking answer (always in a cascade, for routed items in a router), then the thinking one
    cost = (nothink if form == "cascade" else r * nothink) + ~r * think
    return float(np.mean(1.0 - cost / think))


def error_gap(mean_group_errors: Mapping[str, float], eps: float) -> float:
    """``sum_j (Ebar_j - eps)_+`` over groups (the paper's Error_Gap).

    Parameters
    ----------
    mean_group_errors : mapping of str to float
        ``Ebar_j``: each group's test error averaged over trials.
    eps : float
        The target risk.

    Returns
    -------
    float
        The summed excess of the group errors over ``eps``; 0 when every group is within it.

    Examples
    --------
    >>> from gpac_utils.metrics import error_gap
    >>> error_gap({"a": 0.125, "b": 0.375, "c": 0.5}, eps=0.25)
    0.375
    >>> error_gap({"a": 0.125}, eps=0.25)
    0.0
    """
    v = np.asarray(list(mean_group_errors.values()), dtype=float)
    return float(np.sum(np.clip(v - eps, 0.0, None)))


def violation_rate(group_risks, eps: float) -> np.ndarray:
    """Share of trials whose risk exceeds ``eps`` (per column for a (T, k) array).

    Parameters
    ----------
    group_risks : array_like, shape (T,) or (T, k)
        The risk of each trial (and group).
    eps : float
        The target risk; a trial violates it when its risk is strictly greater.

    Returns
    -------
    float or numpy.ndarray, shape (k,)
        The share of the ``T`` trials above ``eps`` (per column); see :func:`mcse` for its error.
    """
    r = np.asarray(group_risks, dtype=float)
    return np.mean(r > eps, axis=0)


def mcse(rate, n_trials):
    """Monte Carlo standard error of a proportion estimated from ``n_trials`` repetitions.

    Parameters
    ----------
    rate : float or array_like
        Estimated proportion(s).
    n_trials : int or array_like
        Number of repetitions behind each rate (broadcast against ``rate``).

    Returns
    -------
    numpy.ndarray or float
        ``sqrt(rate (1 - rate) / n_trials)``.
    """
    rate = np.asarray(rate, dtype=float)
    return np.sqrt(rate * (1 - rate) / np.asarray(n_trials, dtype=float))


def _check_confidence(confidence, correct) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(confidence, float).ravel()
    y = np.asarray(correct, float).ravel()
    if c.shape != y.shape:
        raise ValueError(f"confidence and correct have different lengths ({c.size} vs {y.size})")
    if c.size == 0:
        raise ValueError("confidence: empty input")
    bad = ~np.isfinite(c) | (c < 0) | (c > 1)
    if bad.any():
        raise ValueError(f"confidence must lie in [0, 1]; bad at index {np.flatnonzero(bad)[:5].tolist()}")
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"correct must be 0/1; bad at index {np.flatnonzero(bad)[:5].tolist()}")
    return c, y


def reliability_curve(confidence, correct, n_bins: int = 10) -> pd.DataFrame:
    """Accuracy against mean confidence in equal-width bins.

    Parameters
    ----------
    confidence : array_like
        Confidences in ``[0, 1]``.
    correct : array_like
        0/1 outcomes, one per confidence.
    n_bins : int, default 10
        Number of bins ``[0, 1/B), ..., [(B-1)/B, 1]`` (the last bin is closed).

    Returns
    -------
    pandas.DataFrame
        Per bin: ``bin_lo, bin_hi, n, mean_confidence, accuracy, gap`` (empty bins: n = 0, NaN means).
    """
    if int(n_bins) < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    c, y = _check_confidence(confidence, correct)
    b = np.minimum((c * n_bins).astype(int), n_bins - 1)
    n = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(b, weights=c, minlength=n_bins) / n
        acc = np.bincount(b, weights=y, minlength=n_bins) / n
    edges = np.linspace(0, 1, n_bins + 1)
    return pd.DataFrame(
        {"bin_lo": edges[:-1], "bin_hi": edges[1:], "n": n, "mean_confidence": conf, "accuracy": acc, "gap": acc - conf}
    )


def expected_calibration_error(confidence, correct, n_bins: int = 10) -> float:
    """ECE ``= sum_b (n_b / n) |accuracy_b - mean confidence_b|`` over equal-width bins.

    Parameters
    ----------
    confidence, correct, n_bins
        As for :func:`reliability_curve`.

    Returns
    -------
    float
    """
    curve = reliability_curve(confidence, correct, n_bins)
    filled = curve[curve["n"] > 0]
    return float((filled["n"] / curve["n"].sum() * filled["gap"].abs()).sum())
