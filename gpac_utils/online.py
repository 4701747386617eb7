r"""Online G-PAC: per-group thresholds that stay valid at every moment of a deployment stream.

Items arrive one by one. The caller labels each item (runs the thinking model and grades the
cheap answer) independently with a fixed probability ``rho = label_rate``, and the router
certifies ever larger thresholds per group as labels arrive. Setting and notation as in the
paper: ``U`` in ``[0, 1]`` is the uncertainty score (larger = less certain), an item of group
``j`` goes to the non-thinking model when ``U <= u_j``, and the group's risk at threshold ``u``
is :math:`R_j(u) = E[\ell\,1\{U \le u\} \mid G_j]`, non-decreasing in ``u``.

**Terms.** For item ``i`` of group ``j`` and grid point ``u``,
:math:`X_i(u) = \xi_i\,\ell_i\,1\{U_i \le u\}/\rho \in [0, M]`, ``M = B / rho``, where
:math:`\xi_i \sim \mathrm{Bern}(\rho)` says whether the item was labelled (the ``bernoulli``
inverse-propensity terms of :mod:`gpac_utils.sampling`). Given everything seen before item
``i`` and that it belongs to group ``j``, :math:`E[X_i(u)] = R_j(u)`.

**Wealth.** For every group and grid point, a gambler bets against
:math:`H_0: R_j(u) > \varepsilon` with the wealth
:math:`K_n(u) = \prod_{i \le n} (1 + \lambda_i(u)\,(\varepsilon - X_i(u)))` over the group's
items, where the bet :math:`\lambda_i(u) \in [0, c/(M - \varepsilon)]`, ``c < 1``, uses only
items before ``i`` (predictable). Every factor is ``>= 1 - c > 0``, and under :math:`H_0`
:math:`E[1 + \lambda_i(\varepsilon - X_i) \mid \text{past}] = 1 + \lambda_i(\varepsilon - R_j(u))
\le 1`: ``K`` is a nonnegative supermartingale with ``K_0 = 1``. A grid point is **certified**
once its wealth reaches ``1 / alpha`` (and stays certified). The threshold in use is the largest
grid point whose whole prefix of the grid is certified (``-inf`` = always think when the
smallest is not).

**Validity (anytime, per group).** Let :math:`u^*` be the smallest grid point with
:math:`R_j(u^*) > \varepsilon`. Because :math:`R_j` is non-decreasing, a threshold in use with
risk above :math:`\varepsilon` is at least :math:`u^*`, so :math:`u^*` was certified: some
:math:`K_n(u^*) \ge 1/\alpha`. By Ville's inequality for the nonnegative supermartingale
:math:`K(u^*)`, :math:`P(\exists n: K_n(u^*) \ge 1/\alpha) \le \alpha`. Hence for every group,
:math:`P(\exists t: R_j(\hat u_{j,t}) > \varepsilon) \le \alpha`: at every moment, under any
stopping rule, with no union bound over the grid (only :math:`u^*` matters) nor over time. It
needs i.i.d. items (or at least :math:`E[X_i(u^*)\mid\text{past}] \ge \varepsilon` at every
step), labelling independent of everything else with the known ``rho``, and a grid fixed before
the stream (not chosen from its losses). It holds per group (add a Bonferroni ``alpha / k`` for
all groups at once). Certification is permanent: if a group's risk *rises* after its threshold
was certified, nothing here detects it (see notebook ``33_online_gpac``).

**Bets** (``bet=``). ``"grapa"``: B-PAC's (Yu et al. 2026) approximately growth-rate optimal
bet :math:`\lambda_i = \sum_{s<i} D_s / (\sum_{s<i} D_s^2 + \beta)` with
:math:`D_s = \varepsilon - X_s`, :math:`\beta = B^2`, clipped to ``[0, 0.9 / (M - eps)]`` (aGRAPA
of Waudby-Smith & Ramdas with a ridge). It bets fast early but too little later: for the skewed
terms here (mostly 0, sometimes ``M``) its quadratic approximation under-bets. ``"mixture"``
(default): the average of the ``grapa`` wealth and the wealth of the constant bet
``0.45 / (M - eps)`` (an average of test supermartingales is one, so validity is unchanged);
it costs a factor 2 of wealth early and certifies markedly more later. On a group with
``R(u) = 0.15 u^2``, ``eps = 0.1``, ``rho = 0.5`` (100 seeded streams, ``tests/test_online.py``) the
mean threshold after 100 items is 0.41 (grapa) vs 0.37 (mixture), equal near 400 items, and 0.64 vs
0.71 after 2,000; notebook 33 compares them on real data.

All running sums are ``np.cumsum`` along time continued from the carried state, so feeding a
stream in chunks of any size gives the same bits as feeding it at once.
"""

from __future__ import annotations

import math

import numpy as np

from .calibrate import _factorize, _group_labels
from .checks import ParameterError, check_array, check_int, check_range, check_risk
from .selection import candidate_grid

__all__ = ["BETS", "OnlineGPAC", "draw_labels", "grid_points", "terms", "certify", "prefix_thresholds"]

BETS = ("grapa", "mixture")
#: Largest bet as a share of the bet that could zero the wealth, ``1 / (M - eps)`` (B-PAC's ``c_clip``).
CLIP = 0.9


def draw_labels(n: int, label_rate: float, seed) -> np.ndarray:
    """Which of ``n`` arriving items to label: independent ``Bernoulli(label_rate)`` draws.

    Parameters
    ----------
    n : int
        Number of items.
    label_rate : float
        Labelling probability, in ``(0, 1]``.
    seed : int, sequence of int or numpy.random.Generator
        Seed of the draws.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)

    Examples
    --------
    >>> draw_labels(6, 0.5, seed=0).tolist()
    [False, True, True, True, False, False]
    """
    n = check_int("n", n, 0)
    rate = check_range("label_rate", label_rate, closed_right=True)
    return np.random.default_rng(seed).random(n) < rate


def grid_points(grid) -> np.ndarray:
    """The candidate thresholds: ``grid`` evenly spaced points of ``[0, 1]``, or an ascending array.

    A grid read off *unlabelled* scores (free, and independent of the losses) is also valid, e.g.
    ``grid_points(candidate_grid(pilot_scores, 101))`` (:func:`gpac_utils.selection.candidate_grid`).
    """
    if isinstance(grid, bool) or isinstance(grid, int | np.integer | float):
        size = check_int("grid", grid, 1)
        return candidate_grid(np.linspace(0.0, 1.0, size), "all")
    g = np.asarray(grid, dtype=float)
    if g.ndim != 1 or g.size == 0:
        raise ParameterError(f"grid: must be an int >= 1 or a non-empty 1-D array, got shape {g.shape}")
    if not np.all(np.isfinite(g)) or g.min() < 0 or g.max() > 1 or np.any(np.diff(g) <= 0):
        raise ParameterError("grid: must be strictly ascending values in [0, 1]")
    return g


def terms(scores, losses, labelled, grid, label_rate: float) -> np.ndarray:
    """Inverse-propensity terms ``X_i(u) = xi_i * loss_i * 1{U_i <= u} / rho``, shape ``(..., n, K)``.

    ``losses`` is read only where ``labelled`` (it may be ``nan`` elsewhere).
    """
    lab = np.asarray(labelled, dtype=bool)
    z = np.where(lab, np.asarray(losses, dtype=float), 0.0) / label_rate
    return z[..., None] * (np.asarray(scores, dtype=float)[..., None] <= np.asarray(grid))


def _running(carry, steps):
    """Running sums continued from ``carry``: index 0 is ``carry``, index ``t`` adds ``steps[t - 1]``.

    One ``np.cumsum`` along time (axis ``-2``), so a stream fed in chunks gives the same bits as at once.
    """
    buf = np.concatenate([carry[..., None, :], steps], axis=-2)
    return np.cumsum(buf, axis=-2, out=buf)


def _new_state(shape, bet):
    keys = ("s1", "s2", "log_grapa") + (("log_constant",) if bet == "mixture" else ())
    return {**{k: np.zeros(shape) for k in keys}, "certified": np.zeros(shape, bool)}


def certify(x, eps, alpha, value_range, bet="mixture", state=None, member=None, beta=1.0):
    """Run the wealth processes of one group over its terms, in time order (axis ``-2``).

    Parameters
    ----------
    x : numpy.ndarray, shape (..., n, K)
        The group's terms (:func:`terms`), in arrival order; leading axes are independent streams.
    eps, alpha : float
        Target risk and level.
    value_range : float
        ``M = loss_bound / label_rate``, the largest term.
    bet : {"grapa", "mixture"}
        How the bets are chosen (module description).
    state : dict, optional
        The carried state of an earlier call (``None``: a fresh start, wealth 1).
    member : numpy.ndarray of bool, shape (..., n), optional
        Which items belong to the group (others leave every process unchanged). Default: all.
    beta : float, default 1.0
        Ridge of the ``grapa`` bet (``loss_bound ** 2`` in :class:`OnlineGPAC`).

    Returns
    -------
    certified : numpy.ndarray of bool, shape (..., n, K)
        Whether each grid point is certified after each item.
    state : dict
        The state after the last item (pass it to the next call).
    """
    state = state if state is not None else _new_state(x.shape[:-2] + x.shape[-1:], bet)
    if x.shape[-2] == 0:
        return np.zeros(x.shape, bool), state
    d = eps - x
    if member is not None:
        d *= np.asarray(member, bool)[..., None]  # non-members: D = 0, every sum and factor unchanged
    cap = CLIP / (value_range - eps)
    s1 = _running(state["s1"], d)
    s2 = _running(state["s2"], d * d)
    # predictable bet: sums over the earlier items only (index t - 1 of the running sums)
    lam = s1[..., :-1, :] / (s2[..., :-1, :] + beta)
    np.clip(lam, 0.0, cap, out=lam)
    lam *= d
    log_w = _running(state["log_grapa"], np.log1p(lam, out=lam))[..., 1:, :]
    new = {"s1": s1[..., -1, :], "s2": s2[..., -1, :], "log_grapa": log_w[..., -1, :]}
    if bet == "mixture":  # the average of the grapa wealth and that of the constant bet cap / 2
        log_c = _running(state["log_constant"], np.log1p(0.5 * cap * d))[..., 1:, :]
        new["log_constant"] = log_c[..., -1, :]
        log_w = np.logaddexp(log_w, log_c) - math.log(2)
    certified = log_w >= math.log(1 / alpha)
    certified |= state["certified"][..., None, :]
    np.logical_or.accumulate(certified, axis=-2, out=certified)
    new["certified"] = certified[..., -1, :]
    return certified, {k: v.copy() for k, v in new.items()}  # copies: the state holds no whole path


def prefix_thresholds(certified, grid) -> np.ndarray:
    """The largest grid point whose whole grid prefix is certified (last axis), ``-inf`` if none.

    Examples
    --------
    >>> prefix_thresholds(np.array([True, True, False, True]), [0.1, 0.2, 0.3, 0.4])
    array(0.2)
    """
    count = np.logical_and.accumulate(np.asarray(certified, bool), axis=-1).sum(axis=-1)
    grid = np.asarray(grid, dtype=float)
    return np.where(count > 0, grid[np.maximum(count - 1, 0)], -np.inf)


class OnlineGPAC:
    """Online G-PAC: per-group thresholds certified by betting, valid at every moment of a stream.

    Parameters
    ----------
    eps : float
        Target risk, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        For every group, the probability that its threshold *ever* has risk above ``eps``.
    label_rate : float
        The probability ``rho`` with which the caller labels each item, in ``(0, 1]``
        (:func:`draw_labels` draws these decisions from a seed).
    grid : int or array_like, default 101
        Candidate thresholds: that many evenly spaced points of ``[0, 1]``, or an ascending
        array in ``[0, 1]`` fixed before the stream.
    loss_bound : float, default 1.0
        Upper end ``B`` of the loss range.
    bet : {"grapa", "mixture"}, default "mixture"
        How the bets are chosen (module description).

    Attributes
    ----------
    thresholds_ : dict of str to float
        The threshold in use per group seen so far (``-inf``: always think). Unseen groups
        always think.
    n_seen_, n_labelled_ : dict of str to int
        Items and labelled items per group so far.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n = 4000
    >>> groups = rng.choice(["easy", "hard"], size=n)
    >>> u = rng.uniform(size=n)
    >>> loss = (rng.uniform(size=n) < np.where(groups == "hard", 0.6, 0.05) * u).astype(float)
    >>> router = OnlineGPAC(eps=0.05, label_rate=0.5, grid=21)
    >>> router.route([0.1], ["easy"]).tolist()  # nothing certified yet: think
    [False]
    >>> router = router.partial_fit(u, groups, loss, draw_labels(n, 0.5, seed=1))
    >>> router.thresholds_["easy"] > router.thresholds_["hard"]
    True
    >>> router.route([0.1, 0.1], ["easy", "unseen"]).tolist()
    [True, False]
    """

    def __init__(self, eps, alpha=0.05, *, label_rate, grid=101, loss_bound=1.0, bet="mixture"):
        self.eps, self.alpha, self.loss_bound = check_risk(eps, alpha, loss_bound)
        self.label_rate = check_range("label_rate", label_rate, closed_right=True)
        self.grid = grid_points(grid)
        if bet not in BETS:
            raise ParameterError(f"bet: must be one of {list(BETS)}, got {bet!r}")
        self.bet = bet
        self.value_range = self.loss_bound / self.label_rate
        self.thresholds_: dict[str, float] = {}
        self.n_seen_: dict[str, int] = {}
        self.n_labelled_: dict[str, int] = {}
        self._states: dict[str, dict] = {}

    def route(self, scores, groups) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <= its group's threshold``)."""
        s = check_array("scores", scores, 0.0, 1.0)
        codes, names = _factorize(_group_labels(groups, s.size))
        per_name = np.array([self.thresholds_.get(g, -math.inf) for g in names.tolist()], dtype=float)
        return s <= per_name[codes] if s.size else np.zeros(0, bool)

    def partial_fit(self, scores, groups, losses, labelled) -> OnlineGPAC:
        """Update every group's wealth with items in arrival order; return ``self``.

        Parameters
        ----------
        scores : array_like, shape (n,)
            Scores in ``[0, 1]``.
        groups : array_like, shape (n,)
            Group labels.
        losses : array_like, shape (n,)
            Losses in ``[0, loss_bound]``; ignored where not ``labelled`` (may be ``nan`` there).
        labelled : array_like of bool, shape (n,)
            Whether each item's loss is known (drawn with probability ``label_rate``).
        """
        s = check_array("scores", scores, 0.0, 1.0)
        g = _group_labels(groups, s.size)
        lab = np.asarray(labelled)
        if lab.shape != s.shape or not (lab.dtype == bool or np.isin(lab, (0, 1)).all()):
            raise ValueError(
                f"labelled: need one boolean per item ({s.size}), got shape {lab.shape}, dtype {lab.dtype}"
            )
        lab = lab.astype(bool)
        loss = np.asarray(losses, dtype=float)
        if loss.shape != s.shape:
            raise ValueError(f"losses: need one loss per item ({s.size}), got shape {loss.shape}")
        check_array("losses", np.where(lab, loss, 0.0), 0.0, self.loss_bound)  # read only where labelled
        codes, names = _factorize(g)
        for c, name in enumerate(names.tolist()):
            idx = np.flatnonzero(codes == c)  # the group's items, in arrival order
            x = terms(s[idx], loss[idx], lab[idx], self.grid, self.label_rate)
            _, self._states[name] = certify(
                x, self.eps, self.alpha, self.value_range, self.bet, self._states.get(name), beta=self.loss_bound**2
            )
            self.thresholds_[name] = float(prefix_thresholds(self._states[name]["certified"], self.grid))
            self.n_seen_[name] = self.n_seen_.get(name, 0) + int(idx.size)
            self.n_labelled_[name] = self.n_labelled_.get(name, 0) + int(lab[idx].sum())
        return self
