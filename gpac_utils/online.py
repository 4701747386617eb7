r"""Online G-PAC: per-group thresholds valid at every moment of a stream, free labels, a drift alarm.

Items arrive one by one. ``U`` in ``[0, 1]`` is the uncertainty score (larger = less certain); an
item of group ``j`` goes to the non-thinking model when ``U <= u_j`` (``u_j = -inf``: always
think), and the group's risk at ``u`` is :math:`R_j(u) = E[\ell\,1\{U \le u\} \mid G_j]`,
non-decreasing in ``u`` (as in the paper's Section 4).

**Decisions before the loss.** Per arriving item of group ``j`` the router decides, from the past
only, its route (threshold in use :math:`\hat u_{j,t}`) and whether its loss will be observed,
with a propensity :math:`p_i` known at that moment; the labelling mode (registry :data:`LABELLING`)
sets it. ``labelling="free"``: an item sent to the
thinking model is observed with :math:`p_i = 1` (run the cheap model beside it: no extra thinking
call; the label is free only for a loss computed from the two answers, such as the disagreement
loss, an upper bound on 1{thinking right, cheap wrong}, which needs a gold answer per observed item:
:meth:`OnlineGPAC.gold_labels`, ``docs/choosing-risk.md``); an item sent to the non-thinking model
with :math:`p_i = \pi_t` (``label_prob``: a *paid* label, one extra thinking call).
``labelling="fixed-rate"`` (for a caller without the cheap answer on
thinking-routed items): every item with :math:`p_i = \pi_t`. The schedule :math:`\pi_t` depends
on the past only: ``warmup_prob`` for a group's first ``warmup_items`` items, then
``label_prob``, and 0 once the group has used ``label_budget`` paid labels (it then stops
learning: thresholds and alarm freeze).

**Terms.** :math:`X_i(u) = \xi_i\,\ell_i\,1\{U_i \le u\}/p_i`, :math:`\xi_i` = observed. Given
the past :math:`\mathcal F_{i-1}`, :math:`p_i` is a function of :math:`U_i` and of
:math:`\mathcal F_{i-1}` (the threshold in use and :math:`\pi_t` are predictable) and
:math:`P(\xi_i = 1 \mid \mathcal F_{i-1}, U_i, \ell_i) = p_i > 0`, so for every ``u``
:math:`E[X_i(u) \mid \mathcal F_{i-1}] = E[\ell_i 1\{U_i\le u\}] = R_j(u)` for i.i.d. items. The
range of step ``i`` is ``term_range = loss_bound / p_min`` with :math:`p_\min = \pi_t` (``1``
while a free-label group always thinks: every item is then observed in full).

**Certification (betting).** Per group and grid point, the wealth
:math:`K_n(u) = \prod_{i \le n}(1 + \lambda_i(u)(\varepsilon - X_i(u)))` over the group's items,
with bets chosen from the past only and capped at ``0.9 / (term_range_i - eps)`` *of that step*:
each factor is ``>= 0.1``, and under :math:`H_0: R_j(u) > \varepsilon` has conditional mean
:math:`\le 1`, so :math:`K(u)` is a test supermartingale. A point is certified once its wealth
reaches ``1/alpha``; the threshold in use is the largest point whose grid prefix is certified.
``bet="grapa"``: B-PAC's bet :math:`\sum_{s<i} D_s/(\sum_{s<i} D_s^2 + B^2)`,
:math:`D_s = \varepsilon - X_s`; ``"mixture"`` (default): the average of that wealth and the
wealth of the constant bet half the cap (an average of test supermartingales is one).
The wealth and the drift detector below are those of :mod:`gpac_utils.eprocess` (direction
``"below"`` and :func:`~gpac_utils.eprocess.shiryaev_roberts`), which the sequential audit uses too.

**Validity (anytime, per group).** Let :math:`u^+` be the first unsafe grid point, the smallest with
:math:`R_j(u^+) > \varepsilon`. As :math:`R_j` is non-decreasing, a threshold in use with risk
above :math:`\varepsilon` is :math:`\ge u^+`, so :math:`u^+` was certified, and by Ville's
inequality :math:`P(\exists t: R_j(\hat u_{j,t}) > \varepsilon) \le \alpha` for every group: at
every moment, under any stopping rule, with no union bound over the grid or over time. It needs
i.i.d. items, propensities known when the item is decided (never 0 for an item whose term is
used), the loss of every observed item (a thinking-routed one included) in full, and a grid fixed
before the stream. It is per group (``alpha / k`` for all ``k`` groups at once).

**Drift alarm** (``drift_alpha``). Once a group has a threshold :math:`\hat u`, a Shiryaev–Roberts
e-detector (Shin, Ramdas & Rinaldo 2023, "E-detectors: a nonparametric framework for sequential change
detection", NEJSDS) tests whether :math:`R_j(\hat u) > \varepsilon`
on the same terms: :math:`M_n = \frac1{|\Lambda|}\sum_{\lambda\in\Lambda}\sum_{k\le n}\prod_{i=k}^n
(1 + \lambda (X_i(\hat u_i) - \varepsilon))`, ``Lambda`` = ``0.9 / eps`` times ``2**-b``,
``b = 0..9``; an alarm when :math:`M_n \ge 1/\alpha'`. While :math:`R_j(\hat u_i) \le \varepsilon`
at every monitored step (a stationary stream whose certification held), every inner product is
a test supermartingale, so :math:`E[M_\tau] \le E[\tau]` and the mean number of monitored items
before a false alarm is ``>= 1/drift_alpha``; and :math:`P(\text{alarm within } n
\text{ monitored items}) \le n \cdot` ``drift_alpha``. On an alarm the group forgets its
certification and always thinks; it certifies again from the items after the alarm only, so the
anytime guarantee above holds again within each stationary stretch that starts after an alarm.
*Across groups* (``drift_scope``). Each item moves one group's statistic, and every
:math:`M^j - (\text{its monitored items})` is a supermartingale in the time of the whole stream,
so their sum is one too; at the first false alarm of *any* group one :math:`M^j \ge 1/\alpha'`
and the others are :math:`\ge 0`. Optional stopping at that time or the horizon gives, with
:math:`\alpha'` the level of each group's detector and :math:`A_N` the monitored items of all
groups among the first ``N`` of the stream: :math:`P(\text{some group alarms falsely within } N
\text{ stream items}) \le \alpha' E[A_N] \le \alpha' N`. ``drift_scope="group"`` (default)
runs each detector at :math:`\alpha' =` ``drift_alpha``: the bound per group in that group's own
items, and the bound above, in items of the whole stream. A horizon counted *per group* (up to
``H`` monitored items in each of ``k`` groups) gives only :math:`k H \alpha'` for the union;
``drift_scope="any_group"`` with ``n_groups=k`` splits the level (Bonferroni,
:math:`\alpha' =` ``drift_alpha / k``, :func:`drift_level`), so that
:math:`P(\text{some group alarms falsely within } H \text{ of its monitored items}) \le H \cdot`
``drift_alpha`` (tests/test_online_drift.py measures both). The price is a longer detection delay
(``log(k)`` more log-wealth, in nats, to alarm).
The detection delay depends on the jump and on :math:`\pi` (about ``log(1/drift_alpha)``
divided by the per-item evidence). MAPIE's ``RiskMonitoring`` was not used: it tests the mean of
all unweighted losses since monitoring began against a reference bound, so it neither takes
inverse-propensity terms with a range that changes per step nor restarts its evidence, and a
change late in a long stream is seen late.

All running sums are ``np.cumsum`` along time continued from the carried state, so the same
decisions fed back in one call or in many give the same bits. Every core function takes leading
batch axes (independent streams).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import eprocess
from .calibrate import factorize_groups, group_labels
from .checks import (
    ParameterError,
    check_array,
    check_choice,
    check_decisions,
    check_int,
    check_observed_losses,
    check_range,
    check_rng,
    check_same_index,
    warn_risk,
)
from .registry import Registry
from .selection import candidate_grid
from .settings import ALPHA, LOSS_BOUND, RENAMED_UNTIL, check_risk, refusing

__all__ = [
    "BETS",
    "OnlineSettings",
    "LabellingMode",
    "LABELLING",
    "OnlineGPAC",
    "Decisions",
    "Block",
    "DriftScope",
    "DRIFT_SCOPES",
    "drift_level",
    "grid_points",
    "new_state",
    "decide",
    "learn",
    "threshold_of",
]

#: The online router's bets (:data:`gpac_utils.eprocess.BETTING`: ``"max"`` is the planner's, not offered here).
BETS = ("grapa", "mixture")


#: What ``drift_alpha`` bounds: each group's false alarms, or any group's (module description).
@dataclass(frozen=True)
class DriftScope:
    """What the drift alarm's false-alarm bound ``drift_alpha`` covers.

    Parameters
    ----------
    name : str
        Its name (``drift_scope=``).
    level : callable
        ``level(drift_alpha, k)``: the level of each of the ``k`` groups' detectors.
    needs_groups : bool
        Whether ``k`` (the number of groups, fixed before the stream) is needed.
    """

    name: str
    level: Callable[[float, int], float]
    needs_groups: bool


#: The scopes of the drift alarm's bound: each group's alarm (``group``), or any group's (``any_group``:
#: Bonferroni, each detector at ``drift_alpha / k``).
DRIFT_SCOPES: Registry[DriftScope] = Registry(
    "drift_scope",
    [DriftScope("group", lambda a, k: a, False), DriftScope("any_group", lambda a, k: a / k, True)],
)


def drift_level(drift_alpha: float, scope: str = "group", n_groups: int | None = None) -> float:
    """The level of each group's drift detector: ``drift_alpha``, or ``drift_alpha / n_groups`` for ``"any_group"``.

    Examples
    --------
    >>> drift_level(1e-3), drift_level(1e-3, "any_group", 4)
    (0.001, 0.00025)
    """
    entry = DRIFT_SCOPES[DRIFT_SCOPES.check(scope, "drift_scope")]
    if entry.needs_groups and n_groups is None:
        raise ParameterError(f"n_groups: drift_scope={scope!r} needs the number of groups, fixed before the stream")
    return float(entry.level(float(drift_alpha), check_int("n_groups", n_groups, 1) if entry.needs_groups else 1))


@dataclass(frozen=True)
class LabellingMode:
    """Which arriving items have their loss observed, and with what propensity.

    Parameters
    ----------
    name : str
        Its name (``OnlineGPAC(labelling=name)``).
    propensity : callable
        ``propensity(route_nothink, rate)``: the probability that an item's loss is observed, given
        whether it is routed to the non-thinking model (``route_nothink``, boolean array) and the
        schedule's labelling probability ``rate`` (array, in ``(0, 1]``); known before the loss.
        A propensity of 1 is a free label (no draw).
    description : str
        What it costs, in words.
    """

    name: str
    propensity: Callable[[np.ndarray, np.ndarray], np.ndarray]
    description: str

    def min_propensity(self, always, rate) -> np.ndarray:
        """The smallest propensity an item can get (the term range is ``loss_bound`` over it):
        that of a thinking-routed item where the group always thinks, else the smaller of both routes."""
        thinking = self.propensity(np.zeros(np.shape(rate), bool), rate)
        return np.where(always, thinking, np.minimum(self.propensity(np.ones(np.shape(rate), bool), rate), thinking))


#: The online router's labelling modes (module description).
LABELLING: Registry[LabellingMode] = Registry(
    "labelling",
    [
        LabellingMode(
            "free",
            lambda route_nothink, rate: np.where(route_nothink, rate, 1.0),
            "thinking-routed items observed for free (the cheap model run beside them); "
            "non-thinking-routed ones with probability label_prob (a paid label)",
        ),
        LabellingMode(
            "fixed-rate", lambda route_nothink, rate: rate, "every item observed with probability label_prob"
        ),
    ],
)


class Block:
    """The identity of a block's decisions: the router and block that :meth:`OnlineGPAC.decide` made
    them for, and the rows of that block they cover.

    Indexing it as the decision arrays are indexed (``d.block[5:10]``) keeps the identity of those
    rows, so ``Decisions(*(f[rows] for f in d))`` feeds part of a block (and the rest later).
    """

    __slots__ = ("router", "number", "rows")

    def __init__(self, router: str, number: int, rows: np.ndarray):
        self.router, self.number, self.rows = router, number, np.asarray(rows)

    def __getitem__(self, index) -> Block:
        return Block(self.router, self.number, self.rows[index])

    def __repr__(self) -> str:
        return f"Block(number={self.number}, rows={len(self.rows)})"


class Decisions(NamedTuple):
    """Per item of a block: ``route_nothink`` (True: the non-thinking model answers; the one name for it, as
    in :meth:`~gpac_utils.calibrate.PAC.route`, ``gpac route`` and the serving router), ``observe`` (the loss
    is to be computed), ``propensity`` (P(observe), known before the loss), ``rate`` (the schedule's
    labelling probability at that item, 0: not learned from) and ``threshold`` (the one in use);
    ``block``: the :class:`Block` they were made for (``None`` from the core :func:`decide`)."""

    route_nothink: np.ndarray
    observe: np.ndarray
    propensity: np.ndarray
    rate: np.ndarray
    threshold: np.ndarray
    block: Block | None = None


def grid_points(grid) -> np.ndarray:
    """The candidate thresholds: ``grid`` evenly spaced points of ``[0, 1]``, or an ascending array
    fixed before the stream (e.g. read off *unlabelled* scores: ``candidate_grid(pilot_scores, 101)``)."""
    if isinstance(grid, bool) or isinstance(grid, int | np.integer | float):
        return candidate_grid(np.linspace(0.0, 1.0, check_int("grid", grid, 1)), "all")
    g = np.asarray(grid, dtype=float)
    if g.ndim != 1 or not g.size or not np.all(np.isfinite(g) & (g >= 0) & (g <= 1)) or np.any(np.diff(g) <= 0):
        raise ParameterError(f"grid: must be an int >= 1 or strictly ascending values in [0, 1], got shape {g.shape}")
    return g


#: Settings of the online side that were renamed: old keyword to the one-line message naming the new one.
ONLINE_RENAMED = {
    "free_labels": "free_labels: replaced by labelling='free' (True) or labelling='fixed-rate' (False) "
    f"(this message goes in gpac_utils {RENAMED_UNTIL})",
}


@dataclass(frozen=True, kw_only=True)
class OnlineSettings:
    """Every setting of the online side, declared once and checked once: :class:`OnlineGPAC`,
    :func:`learn`, :func:`~gpac_utils.online_streams.run_online` and B-PAC's runner
    (:func:`~gpac_utils.online_streams.run_bpac`) take it whole.

    Parameters
    ----------
    eps, alpha, label_prob, labelling, warmup_items, warmup_prob, label_budget
        As for :class:`OnlineGPAC`. ``warmup_prob`` needs ``warmup_items > 0`` (else it would be ignored).
    drift_alpha, drift_scope, n_groups, grid, loss_bound, bet, seed
        As for :class:`OnlineGPAC`.

    Attributes
    ----------
    points : numpy.ndarray
        The candidate thresholds (:func:`grid_points` of ``grid``).

    Examples
    --------
    >>> s = OnlineSettings(eps=0.05, label_prob=0.3, grid=11)
    >>> s.points.size, s.label_prob, s.drift_level
    (11, 0.3, None)
    >>> OnlineSettings(eps=0.05, label_prob=0.3, warmup_prob=1.0)
    Traceback (most recent call last):
    ...
    gpac_utils.checks.ParameterError: warmup_prob: applies to a group's first warmup_items; give warmup_items > 0
    """

    eps: float
    alpha: float = ALPHA.default
    label_prob: float
    labelling: str = "free"
    warmup_items: int = 0
    warmup_prob: float | None = None
    label_budget: int | None = None
    drift_alpha: float | None = None
    drift_scope: str = "group"
    n_groups: int | None = None
    grid: int | tuple = 101
    loss_bound: float = LOSS_BOUND.default
    bet: str = "mixture"
    seed: int | tuple | np.random.Generator = 0

    def __post_init__(self) -> None:
        fixed = dict(zip(("eps", "alpha", "loss_bound"), check_risk(self.eps, self.alpha, self.loss_bound)))
        warn_risk(**fixed)
        fixed |= {
            "label_prob": check_range("label_prob", self.label_prob, closed_right=True),
            "warmup_items": check_int("warmup_items", self.warmup_items, 0),
            "labelling": LABELLING.check(self.labelling, "labelling"),
            "bet": check_choice("bet", self.bet, BETS),
        }
        if self.warmup_prob is not None:
            fixed["warmup_prob"] = check_range("warmup_prob", self.warmup_prob, closed_right=True)
            if not fixed["warmup_items"]:
                raise ParameterError("warmup_prob: applies to a group's first warmup_items; give warmup_items > 0")
        if self.label_budget is not None:
            fixed["label_budget"] = check_int("label_budget", self.label_budget, 0)
        if self.drift_alpha is not None:
            fixed["drift_alpha"] = check_range("drift_alpha", self.drift_alpha)
        drift_level(fixed.get("drift_alpha", 0.5), self.drift_scope, self.n_groups)  # checks scope and n_groups
        points = grid_points(self.grid)
        fixed["grid"] = self.grid if isinstance(self.grid, int) else tuple(points.tolist())
        seed = check_rng("seed", self.seed)
        fixed["seed"] = tuple(seed) if isinstance(seed, list | np.ndarray) else seed
        for key, value in fixed.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "points", points)  # frozen like the fields

    @property
    def drift_level(self) -> float | None:
        """The level of each group's drift detector (:func:`drift_level`; ``None``: no alarm)."""
        return None if self.drift_alpha is None else drift_level(self.drift_alpha, self.drift_scope, self.n_groups)

    def replace(self, **changes) -> OnlineSettings:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def refuse(self, reader: str, reads) -> OnlineSettings:
        """Refuse, naming it, a setting away from its default that ``reader`` does not read (it would be ignored)."""
        for f in dataclasses.fields(self):
            if f.name not in reads and f.default is not dataclasses.MISSING and getattr(self, f.name) != f.default:
                raise ParameterError(
                    f"{f.name}: {reader} does not read it (got {getattr(self, f.name)!r}); it reads {sorted(reads)}"
                )
        return self


def online_settings(settings: OnlineSettings | None, arguments: Mapping) -> OnlineSettings:
    """``settings``, or the :class:`OnlineSettings` of :class:`OnlineGPAC`'s ``arguments`` (its ``locals()``;
    not both: an argument away from its default beside ``settings`` is refused, naming it)."""
    fields = dataclasses.fields(OnlineSettings)
    if settings is None:
        if arguments["label_prob"] is None:
            raise ParameterError(
                "label_prob: missing; the probability of labelling an item routed to the non-thinking model, in (0, 1]"
            )
        return OnlineSettings(**{f.name: arguments[f.name] for f in fields})
    if not isinstance(settings, OnlineSettings):
        raise ParameterError(f"settings: must be an OnlineSettings, got {type(settings).__name__}")
    default = {f.name: None if f.default is dataclasses.MISSING else f.default for f in fields}  # eps, label_prob
    given = [
        k
        for k, d in default.items()
        if not (arguments[k] is d or (type(arguments[k]) is type(d) and arguments[k] == d))
    ]
    if given:
        raise ParameterError(f"settings: given with {given}; change them with settings.replace(...)")
    return settings


def new_state(batch=(), size=101, bet="mixture") -> dict:
    """A fresh group state (wealth 1, nothing certified) for ``size`` grid points, batch axes first."""
    state = eprocess.new_wealth((*batch, size), bet) | {"certified": np.zeros((*batch, size), bool)}
    state["log_sr"] = np.full((*batch, eprocess.DETECTOR_BETS.size), -np.inf)
    return state | {k: np.zeros(batch, int) for k in ("seen", "paid", "observed", "alarms")}


def threshold_of(state, grid) -> np.ndarray:
    """The largest grid point whose whole grid prefix is certified (``-inf`` if none)."""
    count = np.logical_and.accumulate(state["certified"], axis=-1).sum(axis=-1)
    return np.where(count > 0, np.asarray(grid)[np.maximum(count - 1, 0)], -np.inf)


def _before(state_count, flags):
    """How many ``flags`` come before each item, continued from ``state_count``."""
    return state_count[..., None] + np.cumsum(flags, axis=-1) - flags


def decide(state, scores, member, uniforms, settings: OnlineSettings) -> Decisions:
    """Route, observe-or-not and propensity for one group's items (``member``) of a block.

    ``settings``: its grid, labelling mode and schedule (``label_prob``, ``warmup_items`` at ``warmup_prob``,
    ``label_budget``); ``uniforms`` in ``[0, 1)``."""
    thr = np.broadcast_to(threshold_of(state, settings.points)[..., None], scores.shape)
    route_nothink = member & (scores <= thr)
    warm = _before(state["seen"], member) < settings.warmup_items
    rate = np.where(warm, settings.warmup_prob or settings.label_prob, settings.label_prob) * member
    drawn = uniforms < rate
    if settings.label_budget is not None:  # the k-th paid label is taken only while k <= budget
        rate = np.where(_before(state["paid"], drawn & route_nothink) < settings.label_budget, rate, 0.0)
    propensity = np.where(member & (rate > 0), LABELLING[settings.labelling].propensity(route_nothink, rate), rate)
    observe = (rate > 0) & (uniforms < propensity)  # a propensity of 1 is always observed: a free label
    return Decisions(route_nothink, observe, propensity, rate, thr)


def certify(state, x, used, term_range, settings: OnlineSettings):
    """Run the wealth of every grid point over the terms ``x`` (..., n, K) of the ``used`` items;
    return the state's updated certification fields (a new dict). ``settings``: its ``eps``, ``alpha``,
    ``bet`` and ``loss_bound`` (the bets' ``beta = loss_bound**2``). The wealth is
    :func:`gpac_utils.eprocess.wealth` in direction ``"below"``."""
    eps, alpha, bet, beta = settings.eps, settings.alpha, settings.bet, settings.loss_bound**2
    d = np.where(used[..., None], eprocess.signed_terms(x, eps), 0.0)  # unused items: D = 0, nothing changes
    cap = eprocess.bet_cap(eps, term_range, clip=eprocess.CLIP)[..., None]
    new, log_w = eprocess.wealth(state, d, cap, bet, beta)
    hit = (log_w >= math.log(1 / alpha)).any(axis=-2)
    return new | {"certified": state["certified"] | hit}


def _detector(log_sr, x_thr, monitored, eps):
    """Shiryaev–Roberts statistic of every bet after each item (..., n, bets), carried from ``log_sr``
    (:func:`gpac_utils.eprocess.shiryaev_roberts`)."""
    return eprocess.shiryaev_roberts(log_sr, x_thr - eps, monitored, 0.9 / eps)


def learn(state, scores, losses, member, decisions: Decisions, settings: OnlineSettings) -> tuple[dict, np.ndarray]:
    """Feed one group's items of a block (decided by :func:`decide`) to its state.

    ``losses`` is read where ``decisions.observe`` only (it may be ``nan`` elsewhere). ``settings``:
    it reads ``eps``, ``alpha``, ``loss_bound``, ``bet``, ``labelling``, the grid and the drift
    alarm's level (:attr:`OnlineSettings.drift_level`). Returns the new state and, per batch entry,
    the position of the drift alarm in the block (``-1``: none).
    """
    eps, loss_bound, grid, drift_alpha = settings.eps, settings.loss_bound, settings.points, settings.drift_level
    used = member & (decisions.rate > 0)
    observed = decisions.observe & used
    z = np.where(observed, np.where(observed, losses, 0.0) / np.where(observed, decisions.propensity, 1.0), 0.0)
    x = z[..., None] * (scores[..., None] <= np.asarray(grid))
    always = ~np.isfinite(decisions.threshold)
    p_min = np.where(used, LABELLING[settings.labelling].min_propensity(always, decisions.rate), 1.0)
    alarm, first = np.zeros(scores.shape[:-1], bool), np.full(scores.shape[:-1], scores.shape[-1])
    log_sr = state["log_sr"]
    if drift_alpha is not None and scores.shape[-1]:
        sr = _detector(state["log_sr"], np.where(always, 0.0, z * (scores <= decisions.threshold)), used & ~always, eps)
        over = np.logaddexp.reduce(sr, axis=-1) >= math.log(eprocess.DETECTOR_BETS.size / drift_alpha)
        alarm, first = over.any(axis=-1), np.where(over.any(axis=-1), np.argmax(over, axis=-1), first)
        log_sr = np.where(alarm[..., None], -np.inf, sr[..., -1, :])
    new = certify(state, x, used & ~alarm[..., None], loss_bound / p_min, settings)
    if alarm.any():  # forget the certification; learn again from the items after the alarm only
        after = used & (np.arange(scores.shape[-1]) > first[..., None])
        empty = new_state(alarm.shape, grid.size, settings.bet)
        fresh = certify(empty, x, after & alarm[..., None], loss_bound / p_min, settings)
        new = {k: np.where(alarm[..., None], fresh[k], v) for k, v in new.items()}
    counts = {
        "seen": member.sum(-1),
        "paid": (observed & decisions.route_nothink).sum(-1),
        "observed": observed.sum(-1),
        "alarms": alarm,
    }
    new |= {k: state[k] + v for k, v in counts.items()} | {"log_sr": log_sr}
    return new, np.where(alarm, first, -1)


class OnlineGPAC:
    """Online G-PAC: per-group thresholds certified by betting, valid at every moment of a stream.

    Parameters
    ----------
    eps : float
        Target risk, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        For every group, the probability that its threshold ever has risk above ``eps`` within one
        certification: on a stationary stream without ``drift_alpha``, the whole stream. With
        ``drift_alpha`` each re-certification after an alarm (a false one included) spends a fresh
        ``alpha``, so the bound holds per stretch between alarms, not over the whole stream.
    label_prob : float
        Labelling probability ``pi`` of an item routed to the non-thinking model (a paid label),
        in ``(0, 1]``; with ``labelling="fixed-rate"``, of every item.
    labelling : str, default "free"
        A labelling mode of :data:`LABELLING`: ``"free"`` observes every thinking-routed item
        (propensity 1); ``"fixed-rate"`` every item with probability ``label_prob``.
    warmup_items, warmup_prob : int and float, optional
        A group's first ``warmup_items`` items are labelled with ``warmup_prob`` instead.
    label_budget : int, optional
        Paid labels per group; after them the group stops learning (thresholds and alarm freeze).
    drift_alpha : float, optional
        Enables the drift alarm: the mean number of a group's monitored items before a false alarm
        is at least ``1 / drift_alpha`` (module description). ``None``: certification is permanent.
    drift_scope : {"group", "any_group"}, default "group"
        ``"any_group"``: each group's detector runs at ``drift_alpha / n_groups``, so that the
        probability that *any* group alarms falsely within ``H`` of its monitored items is at most
        ``H * drift_alpha`` (module description, "Across groups").
    n_groups : int, optional
        The number of groups, fixed before the stream; needed by ``drift_scope="any_group"`` (a
        further group is refused).
    grid : int or array_like, default 101
        Candidate thresholds: that many evenly spaced points of ``[0, 1]``, or an ascending array.
    loss_bound : float, default 1.0
        Upper end ``B`` of the loss range.
    bet : {"grapa", "mixture"}, default "mixture"
        How the certification bets are chosen (module description).
    seed : int, sequence of int or numpy.random.Generator, default 0
        Seed of the observe-or-not draws of :meth:`decide`.
    settings : OnlineSettings, optional
        All of the above at once (then give none of them): :class:`OnlineSettings`, kept whole as
        ``settings``; the keywords build one.

    Notes
    -----
    **The router protects its evidence.** The :class:`Decisions` of :meth:`decide` carry the
    identity of their block (:class:`Block`); :meth:`update` refuses, naming the argument and the
    rows within the block: decisions not made by this router's :meth:`decide`, rows already fed
    (re-running a notebook cell that calls ``update`` would count the block's evidence twice),
    scores or groups other than those the decisions were made for (decisions of another block),
    decision fields that were changed or have another dtype (``route``/``observe`` must be bool:
    0/1 integers would index rows by position), and a NaN or out-of-range loss of an observed item.
    A block may be fed in parts (``Decisions(*(f[rows] for f in d))``), each row once. Calling
    :meth:`decide` again on the same items makes a *new* block: its evidence is new evidence.

    Attributes
    ----------
    thresholds_ : dict of str to float
        The threshold in use per group seen so far (``-inf``: always think; unseen groups think).
    n_seen_, n_paid_ : dict of str to int
        Items and paid labels (observed items routed to the non-thinking model) per group.
    n_observed_ : dict of str to int
        Observed items per group, free and paid: the gold labels spent when the loss needs one
        (:attr:`gpac_utils.llm.grading.Grader.needs_gold`; :meth:`gold_labels`).
    alarms_ : dict of str to list of int
        Per group, the group-item counts at which the drift alarm fired.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n = 4000
    >>> groups = rng.choice(["easy", "hard"], size=n)
    >>> u = rng.uniform(size=n)
    >>> losses = (rng.uniform(size=n) < np.where(groups == "hard", 0.6, 0.05) * u).astype(float)
    >>> router = OnlineGPAC(eps=0.05, label_prob=0.3, grid=21)
    >>> for block in np.array_split(np.arange(n), 40):  # decide a block, run the models, feed back
    ...     d = router.decide(u[block], groups[block])
    ...     router = router.update(u[block], np.where(d.observe, losses[block], np.nan), groups[block], d)
    >>> router.thresholds_["easy"] > router.thresholds_["hard"]
    True
    >>> router.route([0.1, 0.1], ["easy", "unseen"]).tolist()
    [True, False]
    """

    @refusing(ONLINE_RENAMED)
    def __init__(
        self,
        eps: float | None = None,
        alpha: float = ALPHA.default,
        *,
        label_prob: float | None = None,
        labelling: str = "free",
        warmup_items: int = 0,
        warmup_prob: float | None = None,
        label_budget: int | None = None,
        drift_alpha: float | None = None,
        drift_scope: str = "group",
        n_groups: int | None = None,
        grid: int | tuple = 101,
        loss_bound: float = LOSS_BOUND.default,
        bet: str = "mixture",
        seed: int | tuple | np.random.Generator = 0,
        settings: OnlineSettings | None = None,
    ):
        self.settings = online_settings(settings, locals())
        self.thresholds_, self.n_seen_, self.n_paid_, self.alarms_, self._states = {}, {}, {}, {}, {}
        self.n_observed_ = {}
        self._id, self._blocks, self._pending, self._fed = uuid.uuid4().hex, itertools.count(), {}, set()
        self._rng = np.random.default_rng(self.settings.seed)

    eps = property(lambda self: self.settings.eps)
    alpha = property(lambda self: self.settings.alpha)
    loss_bound = property(lambda self: self.settings.loss_bound)
    grid = property(lambda self: self.settings.points)
    labelling = property(lambda self: self.settings.labelling)
    bet = property(lambda self: self.settings.bet)
    drift_alpha = property(lambda self: self.settings.drift_alpha)
    drift_scope = property(lambda self: self.settings.drift_scope)
    n_groups = property(lambda self: self.settings.n_groups)
    drift_level_ = property(lambda self: self.settings.drift_level)

    def _split(self, scores, groups, labels=False, losses=None):
        check_same_index(scores=scores, groups=groups, losses=losses)  # never re-paired by position
        s = check_array("scores", scores, 0.0, 1.0, allow_bool=False)
        g = group_labels(groups, s.size)
        codes, names = factorize_groups(g)
        parts = [(name, codes == c) for c, name in enumerate(names.tolist())]
        return (s, parts, g) if labels else (s, parts)

    def _state(self, name):
        return self._states.get(name) or new_state((), self.grid.size, self.bet)

    def route(self, scores, groups=None) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <=`` its group's threshold)."""
        s, parts = self._split(scores, groups)
        nothink = [member & (s <= self.thresholds_.get(name, -math.inf)) for name, member in parts]
        return np.logical_or.reduce([np.zeros(s.size, bool), *nothink])

    def decide(self, scores, groups=None) -> Decisions:
        """Route, observe-or-not and propensity of a block of arriving items (before any loss)."""
        s, parts, g = self._split(scores, groups, labels=True)
        uniforms = self._rng.random(s.size)
        fields = [np.zeros(s.size, bool), np.zeros(s.size, bool), *np.zeros((3, s.size))]
        for name, member in parts:
            d = decide(self._state(name), s, member, uniforms, self.settings)
            fields = [np.where(member, new, old) for new, old in zip(d[:5], fields)]
        number = next(self._blocks)
        self._pending[number] = {"scores": s, "groups": g, "fields": fields, "fed": np.zeros(s.size, bool)}
        return Decisions(*fields, block=Block(self._id, number, np.arange(s.size)))

    def _check_block(self, s, g, dec: Decisions) -> None:
        """Refuse decisions whose block identity does not match these items (class Notes)."""
        b = dec.block
        if not isinstance(b, Block) or b.router != self._id:
            whose = "another router's" if isinstance(b, Block) else "no"
            raise ParameterError(
                f"decisions: carry {whose} block identity; pass the Decisions that this router's decide() "
                "returned for these items"
            )
        if b.number in self._fed or b.number not in self._pending:
            raise ParameterError(
                f"decisions: block {b.number} was already fed to update (its evidence would count twice)"
            )
        block, rows = self._pending[b.number], b.rows
        if rows.size != s.size:
            raise ParameterError(
                f"decisions: cover {rows.size} rows of block {b.number}, but scores, losses and groups have {s.size}; "
                "slice all of them with the same rows (Decisions(*(f[rows] for f in d)))"
            )
        twice = block["fed"][rows]
        if twice.any():
            raise ParameterError(
                f"decisions: rows {rows[twice][:5].tolist()} of block {b.number} were already fed to update "
                "(their evidence would count twice)"
            )
        for name, mine, theirs in (("scores", block["scores"][rows], s), ("groups", block["groups"][rows], g)):
            other = mine != theirs
            if other.any():
                raise ParameterError(
                    f"{name}: differ from those block {b.number}'s decisions were made for, at rows "
                    f"{np.flatnonzero(other)[:5].tolist()} (decisions of another block?)"
                )
        for field, mine, theirs in zip(Decisions._fields, block["fields"], dec[:5]):
            other = mine[rows] != theirs
            if other.any():
                raise ParameterError(
                    f"decisions: field {field!r} differs from what decide() returned, at rows "
                    f"{np.flatnonzero(other)[:5].tolist()}"
                )

    def _mark_fed(self, dec: Decisions) -> None:
        block = self._pending[dec.block.number]
        block["fed"][dec.block.rows] = True
        if block["fed"].all():  # the whole block is in: forget its copy, remember its number
            del self._pending[dec.block.number]
            self._fed.add(dec.block.number)

    def update(self, scores, losses, groups, decisions: Decisions) -> OnlineGPAC:
        """Feed back the losses of a block decided by :meth:`decide` (read where it observes; may be
        ``nan`` elsewhere); return ``self``."""
        s, parts, g = self._split(scores, groups, labels=True, losses=losses)
        dec = check_decisions(decisions, s.size)
        self._check_block(s, g, dec)
        loss = check_observed_losses(losses, dec.observe, self.loss_bound)  # read only where observed
        known = set(self._states) | {name for name, _ in parts}
        st = self.settings
        if DRIFT_SCOPES[st.drift_scope].needs_groups and len(known) > st.n_groups:
            raise ParameterError(
                f"groups: drift_scope={st.drift_scope!r} was set for n_groups={st.n_groups}; saw {len(known)}"
            )
        for name, member in parts:
            state = self._state(name)
            self._states[name], alarm = learn(state, s, loss, member, dec, st)
            if alarm >= 0:
                self.alarms_.setdefault(name, []).append(int(state["seen"] + member[: alarm + 1].sum()))
            new = self._states[name]
            self.thresholds_[name] = float(threshold_of(new, self.grid))
            self.n_seen_[name], self.n_paid_[name] = int(new["seen"]), int(new["paid"])
            self.n_observed_[name] = int(new["observed"])
        self._mark_fed(dec)
        return self

    def gold_labels(self, needs_gold: bool) -> dict:
        """Gold labels spent per group: every observed item when the loss needs a gold answer (a
        ``binary`` loss: thinking right and non-thinking wrong), none when it is computed from the two
        answers alone (the semantic loss); the paid labels (:attr:`n_paid_`) are the extra thinking calls.
        An upper bound for a gold loss: an observed item whose two answers agree has loss 0 without its
        gold answer, and is counted all the same.
        """
        return {g: (n if needs_gold else 0) for g, n in self.n_observed_.items()}

    def fit(self, scores, losses, groups=None) -> OnlineGPAC:
        """One block of a deployment in a single call: :meth:`decide`, then :meth:`update` with the
        losses it observes (``losses`` holds every item's loss; the rest are not read)."""
        s = check_array("scores", scores, 0.0, 1.0, allow_bool=False)
        loss = check_observed_losses(losses, np.zeros(s.size, bool), self.loss_bound)  # its shape, before deciding
        d = self.decide(s, groups)
        return self.update(s, np.where(d.observe, loss, np.nan), groups, d)
