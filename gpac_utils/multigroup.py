r"""Guarantees for every group of several overlapping groupings (subject *and* language *and* tier).

G-PAC (:class:`~gpac_utils.calibrate.GPAC`, paper Algorithm 2) certifies one partition: each item is in
exactly one group. Here the groups form a *collection* :math:`\mathcal C = \{G_1, \dots, G_m\}` that may
overlap (every subject and every language), given as several label columns (a grouping each) or as a
boolean membership matrix. The target is, for every :math:`G \in \mathcal C`,

.. math:: P\big(R(\hat u \mid G) \le \varepsilon\big) \ge 1 - \alpha,
   \qquad R(\hat u \mid G) = E\big[\ell\,\mathbf 1\{U \le \hat u(X)\} \mid X \in G\big],

the paper's joint risk (Section 4) with a per-item threshold :math:`\hat u(X)`; separately for each
group, or for all of them at once. Items with the same memberships form a *cell* (one subject and one
language); a threshold is set per cell. Three calibrators, registered in
:data:`gpac_utils.calibrate.CALIBRATORS` when this module is imported (``calibrate`` cannot import it: this
module builds on :class:`~gpac_utils.calibrate.PAC`, and the package has no import cycle):

:class:`MinGPAC` (``"Min-G-PAC"``): the simple valid baseline
    G-PAC's threshold :math:`\hat u_G` of every group on its own items (Theorem 4.2 per group), and each
    cell takes the smallest threshold among its groups. For a group :math:`G`, every item of :math:`G`
    then has :math:`\hat u(X) \le \hat u_G`, and as losses are non-negative
    :math:`R(\hat u \mid G) \le R(\hat u_G \mid G)`: the guarantee of each group carries over, for each
    group separately at ``alpha``, for all at once with ``correction="bonferroni"`` (each of the ``m``
    groups at ``alpha / m``). It does **not** carry over to the risk among routed items,
    :math:`E[\ell \mid U \le u, G]`, which a lower threshold can raise: ``risk="routed"`` is refused.
:class:`ShiftGPAC` (``"Shift-G-PAC"``, the default of a collection): Min-G-PAC on shifted scores
    Each group is calibrated on its score shifted per cell by a fit on the items *outside* it, so that its
    risk goes to its safer cells; the same guarantees as Min-G-PAC (``docs/overlapping-groups.md``).
:class:`PathGPAC` (``"Path-G-PAC"``): pooled along a path fixed in advance
    A random half of the items fixes per-cell thresholds along a one-parameter path; the other half tests the
    path in a fixed sequence, every group's bound at each step: all groups at once at ``alpha``, with no
    multiplicity correction (its class description; the proof is in ``docs/overlapping-groups.md``).

A group that the path half shows to be too small to be tested on the test half always thinks in
the path (it cannot certify anything, :func:`gpac_utils.feasibility.min_items`). A group tested with
fewer test items than the bound needs blocks every level (everything thinks): skipping it would not be
valid (``docs/overlapping-groups.md``). A cell not seen at calibration, an item in no group and a
label not seen at calibration route to the thinking model.

Examples
--------
>>> import numpy as np, pandas as pd
>>> from gpac_utils.multigroup import MinGPAC
>>> rng = np.random.default_rng(0)
>>> n = 4000
>>> groups = pd.DataFrame({"subject": rng.choice(["alg", "geo"], n), "lang": rng.choice(["en", "fr"], n)})
>>> u = rng.uniform(size=n)
>>> loss = (rng.uniform(size=n) < np.where(groups["subject"] == "geo", 0.4, 0.1) * u).astype(float)
>>> m = MinGPAC(eps=0.05).fit(u, loss, groups)
>>> sorted(m.group_thresholds_)
['lang=en', 'lang=fr', 'subject=alg', 'subject=geo']
>>> m.thresholds_["subject=alg & lang=en"] == min(m.group_thresholds_["subject=alg"], m.group_thresholds_["lang=en"])
True
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import bounds as _bounds
from . import feasibility as _feasibility
from . import selection as _selection
from .calibrate import (
    CALIBRATORS,
    CERTIFIED,
    GPAC,
    NO_FEASIBLE,
    PAC,
    ROUTING,
    TOO_FEW,
    GroupRecord,
    GroupWarning,
    Method,
    _group_record,
)
from .checks import ParameterError, check_same_index
from .group_collection import SEP, Collection, collection, split_cell
from .thresholds_schema import GROUPING_NAMES, ThresholdsFileError

__all__ = [
    "collection",
    "MinGPAC",
    "PathGPAC",
    "ShiftGPAC",
    "Path",
    "fit_path",
    "PATH_GRID",
    "SEP",
    "SHRINK",
    "certificate_groups",
    "check_cells",
]

#: The path's shrinkage: a cell's loss curve counts as many items as this of its groups' pooled curve.
SHRINK = 10.0


def _cell_groups(coll: Collection) -> dict[str, list[str]]:
    """Each cell's groups, the cells sorted (one label array: the cell is the group): its items' memberships (a label
    may hold :data:`SEP`: MATH's ``Counting & Probability``)."""
    cells, first = np.unique(coll.cells, return_index=True)
    return {c: [coll.names[j] for j in np.flatnonzero(coll.member[i])] for c, i in zip(cells.tolist(), first.tolist())}


def _terms(losses, recipe, loss_bound, rng):
    """Every item's expert-label term, drawn once (an item in several groups has one label):
    ``(z, labelled, term_range)`` with ``z = xi * loss / label_prob`` (``bernoulli``: ``xi`` a coin of
    probability ``label_prob``, as :func:`gpac_utils.sampling.draw` draws it) or ``z = loss`` (``full``)."""
    if recipe.sampling not in ("full", "bernoulli"):
        raise ParameterError(
            f"recipe: sampling {recipe.sampling!r} draws terms with replacement per group; overlapping groups need "
            "one label per item ('full' or 'bernoulli')"
        )
    if recipe.sampling == "full":
        return losses, np.ones(losses.size, bool), float(loss_bound)
    pi = float(recipe.label_prob)
    xi = rng.random(losses.size) < pi
    return xi * losses / pi, xi, float(loss_bound / pi)


class _Overlapping(PAC):
    """What both calibrators of overlapping groups share: inputs, routing, JSON."""

    def _setup(self, settings) -> None:
        if settings.risk != "joint":
            raise ParameterError(
                f"risk: {self.name} certifies the joint risk only; the risk among routed items E[loss | U <= u] can "
                "rise when a threshold is lowered, so a group's guarantee does not carry over to items with a lower "
                "threshold (use G-PAC on one grouping for risk='routed')"
            )
        super()._setup(settings)
        self.group_thresholds_: dict[str, float] = {}
        self.groupings_: tuple[str, ...] | None = None
        self.group_names_: list[str] = []

    def _inputs(self, scores, losses=None, groups=None, min_items=0):
        """Checked scores, losses and the :class:`Collection` (refusals in one line, naming the argument)."""
        if groups is None:
            raise ParameterError(f"groups: {self.name} needs the items' groups (label columns or a membership matrix)")
        if losses is None and self.groupings_:  # routing: the groupings of calibration, by name, in their order
            groups = self._grouping_columns(groups)
        check_same_index(scores=scores, losses=losses, groups=groups)
        s, loss, _ = self._xy(scores, losses, min_items=min_items)
        return s, loss, collection(groups, s.size, every_group_used=loss is not None)

    def _grouping_columns(self, groups):
        """The label columns of the groupings of calibration, in their order, from a dict or a DataFrame that holds
        them (a table of requests: its other columns are not read); a missing one is refused, naming it."""
        if not isinstance(groups, dict | pd.DataFrame) or (
            isinstance(groups, pd.DataFrame) and all(pd.api.types.is_bool_dtype(t) for t in groups.dtypes)
        ):
            return groups  # one label array or a membership matrix: refused by _thresholds_for, naming the groupings
        names = [str(c) for c in groups]
        missing = [g for g in self.groupings_ if g not in names]
        if missing:
            raise ParameterError(
                f"groups: calibrated on groupings {list(self.groupings_)}, got {names} (no column {missing[0]!r})"
            )
        if isinstance(groups, pd.DataFrame):
            return groups[list(self.groupings_)]
        return {g: groups[g] for g in self.groupings_}

    def to_json(self) -> str:
        """The fitted thresholds (per cell), every setting and the groupings (``null``: a membership matrix) as JSON."""
        payload = json.loads(super().to_json())
        payload["groupings"] = None if self.groupings_ is None else list(self.groupings_)
        return json.dumps(payload, indent=2, sort_keys=True)

    def _thresholds_for(self, scores, coll: Collection) -> np.ndarray:
        """Each item's threshold: its cell's (``-inf``, with a warning, for a cell not seen at calibration).
        Routing needs the groupings the calibrator was fitted on (the same columns)."""
        if self.groupings_ is None and coll.groupings is None:
            if sorted(coll.names) != sorted(self.group_names_):
                raise ParameterError(
                    f"groups: the membership matrix's groups {coll.names} are not those of calibration "
                    f"{self.group_names_}"
                )
        elif self.groupings_ != coll.groupings:
            raise ParameterError(
                f"groups: calibrated on groupings {list(self.groupings_ or [])}, got {list(coll.groupings or [])}"
            )
        return super()._thresholds_for(scores, coll.cells, "cell(s)", 5, stacklevel=4)  # one frame more

    def _restore(self, payload) -> None:
        super()._restore(payload)
        keys = [k for k in self.thresholds_ if k]
        self.group_names_ = list(self.group_sizes_)
        columns = {tuple(p.split("=", 1)[0] for p in k.split(SEP)) for k in keys}
        if "groupings" in payload:  # recorded (files before it: read from the cells' names below)
            self.groupings_ = None if payload["groupings"] is None else tuple(payload["groupings"])
        elif set(keys) <= set(self.group_sizes_):  # the cells are the groups: one label array
            self.groupings_ = ()
        elif len(columns) == 1 and all("=" in p for k in keys for p in k.split(SEP)):
            self.groupings_ = columns.pop()
        else:  # a membership matrix
            self.groupings_ = None

    def _start(self, coll: Collection) -> None:
        self.thresholds_, self.groups_, self.group_thresholds_ = {}, {}, {}
        self.groupings_, self.group_names_ = coll.groupings, list(coll.names)
        self.group_sizes_ = {g: int(k) for g, k in zip(coll.names, coll.member.sum(axis=0).tolist())}

    def _fit_groups(self, scores, losses, groups, shifts, interval) -> dict[str, float]:
        """Each group's level by G-PAC's step on its items' scores shifted per cell (``shifts(s, loss, coll, j,
        outside)`` returns group ``j``'s shift of a cell's groups, from the labelled items ``outside`` it; 0:
        Min-G-PAC), its record, and each cell's threshold: the smallest of its groups' level less its shift there,
        as a float ``t`` with ``t + shift <= level`` (:func:`_below`); ``-inf`` below 0, at most 1. Returns the
        levels; ``shifts_`` (where the calibrator has it) gets each group's shift per cell."""
        s, loss, coll = self._inputs(scores, losses, groups, min_items=1)
        rng = np.random.default_rng(self.seed)
        z, xi, term_range = _terms(loss, self.recipe, self.loss_bound, rng)
        order = rng.permutation(s.size)  # a random order of the terms, for a sequential bound
        self._start(coll)
        alpha = self.config.alpha_per_group(len(coll.names))
        n_min = _feasibility._min_items(self.eps, alpha, self.recipe, self.loss_bound, "joint")
        cg, levels = _cell_groups(coll), {}
        self.thresholds_ = {c: math.inf for c in cg}
        for j, g in enumerate(coll.names):
            idx = order[coll.member[order, j]]
            shift_of = shifts(s, loss, coll, j, ~coll.member[:, j] & xi)
            d = {c: shift_of(gs) for c, gs in cg.items() if g in gs}
            if hasattr(self, "shifts_"):
                self.shifts_[g] = d
            if idx.size < self.min_group_size:
                levels[g], self.groups_[g] = -math.inf, self._small(g, idx.size)
            else:
                r = s[idx] + np.array([d[c] for c in coll.cells[idx].tolist()])
                cand = _selection.candidate_grid(r, self.recipe.candidates, self.recipe.bound, interval=interval)
                ucb = _bounds.ucb(self.recipe.bound, z[idx], r, cand, alpha, term_range)
                t = levels[g] = float(_selection.select(cand, ucb, self.eps, self.recipe.rule))
                at = np.searchsorted(np.asarray(cand), t, side="right") - 1
                self.groups_[g] = _group_record(idx.size, xi[idx].sum(), t, ucb[at], n_min)
            for c in d:
                self.thresholds_[c] = min(self.thresholds_[c], _below(levels[g], d[c]))
        for c, t in self.thresholds_.items():  # below every score: thinks; above 1: routes every score
            self.thresholds_[c] = -math.inf if t < 0 or not cg[c] else min(t, 1.0)
        return levels


class MinGPAC(_Overlapping):
    """Min-G-PAC: each group's own G-PAC threshold; each cell takes the smallest among its groups.

    Parameters
    ----------
    eps, alpha, recipe
        As for :class:`~gpac_utils.calibrate.PAC` (the recipe's sampling ``full`` or ``bernoulli``: one
        label per item, shared by its groups).
    **options
        ``loss_bound``, ``min_group_size``, ``seed``, ``risk`` (``"joint"`` only) and ``correction``:
        ``"none"`` (default) each group's guarantee separately at ``alpha``; ``"bonferroni"`` all ``m``
        groups of the collection at once (each at ``alpha / m``).

    Attributes
    ----------
    thresholds_ : dict of str to float
        Per cell (the items with the same groups): the smallest threshold among its groups.
    group_thresholds_ : dict of str to float
        Per group: its own G-PAC threshold (Theorem 4.2 on its items).
    group_sizes_, groups_ : dict
        Per group: calibration items; :class:`~gpac_utils.calibrate.GroupRecord` (status, labels,
        the bound at its own threshold).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> member = rng.uniform(size=(3000, 3)) < 0.5  # three overlapping groups
    >>> member[:, 0] |= ~member.any(axis=1)  # every item in a group
    >>> u = rng.uniform(size=3000)
    >>> loss = (rng.uniform(size=3000) < 0.2 * u).astype(float)
    >>> m = MinGPAC(eps=0.05, correction="bonferroni").fit(u, loss, member)
    >>> m.route(u[:3], member[:3]).dtype
    dtype('bool')

    References
    ----------
    The G-PAC paper, Algorithm 2 and Theorem 4.2 (per group); ``docs/overlapping-groups.md``.
    """

    name = "Min-G-PAC"
    SETTINGS = GPAC.SETTINGS

    def fit(self, scores, losses, groups=None) -> MinGPAC:
        """Calibrate every group of ``groups`` on its own items, then take the smallest threshold per cell.

        Parameters
        ----------
        scores, losses : array_like, shape (n,)
            Scores in ``[0, 1]``, losses in ``[0, loss_bound]``.
        groups : array_like, dict, DataFrame or boolean array
            The collection (:func:`collection`).

        Returns
        -------
        self
        """
        self.group_thresholds_ = self._fit_groups(scores, losses, groups, lambda *_: lambda groups: 0.0, (0.0, 1.0))
        return self


#: Shift-G-PAC's ridge penalty on the groups' log-odds offsets (in units of a squared log-odds): it shrinks a
#: group seen on few items outside ``G`` toward no shift.
SHIFT_RIDGE = 1.0
#: The slope that converts offsets into shifts is read this many standard errors above its estimate
#: (:func:`_shift_fit`).
SHIFT_Z = 2.0


def _shift_fit(u, y, member) -> tuple[float, np.ndarray, float]:
    r"""The slope ``b`` and per-group offsets ``o`` of the logistic fit :math:`\operatorname{logit} E[y] = a + b u +
    \sum_H o_H 1\{X \in H\}` (``y`` the loss over ``loss_bound``, in ``[0, 1]``), ridge :data:`SHIFT_RIDGE` on the
    offsets, ``b >= 1e-3`` (a larger score means less trust), every coefficient within ``±50``, fitted on the
    columns that have an item (a group without one gets offset 0); and the standard error of ``b`` (the penalised
    fit's Hessian). No shift (``b = 1``, ``o = 0``, standard error 0) without a loss above 0 and one below
    ``loss_bound``."""
    from scipy.optimize import minimize
    from scipy.special import expit

    o = np.zeros(member.shape[1])
    if u.size < 2 or not (np.any(y > 0) and np.any(y < 1)):
        return 1.0, o, 0.0
    cols = member.any(axis=0)
    x, m = member[:, cols], int(cols.sum())

    def objective(p):
        z = p[0] + p[1] * u + x @ p[2:]
        g = expit(z) - y
        value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * SHIFT_RIDGE * p[2:] @ p[2:]
        return value, np.concatenate([[g.sum(), g @ u], x.T @ g + SHIFT_RIDGE * p[2:]])

    box = [(-50.0, 50.0), (1e-3, 50.0)] + [(-50.0, 50.0)] * m
    tight = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000}  # to the optimum, so that rounding the shifts is stable
    fit = minimize(objective, np.zeros(m + 2), jac=True, method="L-BFGS-B", bounds=box, options=tight).x
    design = np.column_stack([np.ones(u.size), u, x])
    w = expit(design @ fit)
    hessian = design.T @ (design * (w * (1 - w))[:, None]) + np.diag([0.0, 0.0, *[SHIFT_RIDGE] * m])
    se = np.sqrt(np.clip(np.diag(np.linalg.pinv(hessian)), 0.0, None))
    o[cols] = fit[2:]
    return float(fit[1]), o, float(se[1])


#: The shifted score's range: the score in ``[0, 1]`` plus a shift clipped to ``[-1, 1]`` (fixed in advance: the
#: evenly spaced candidates of ``candidates="auto"`` span it).
SHIFTED = (-1.0, 2.0)


def _below(level: float, shift: float) -> float:
    """A float ``t`` with ``t + shift <= level`` in floating point (``level - shift`` can round up), within two steps
    of the largest operand's spacing below ``level - shift``: an item routed by ``U <= t`` is one the bound counted
    (``U + shift <= level``; float addition is monotone)."""
    t = level - shift
    step = float(np.spacing(max(abs(t), abs(level), abs(shift)))) if math.isfinite(t) else 0.0
    while math.isfinite(t) and t + shift > level:
        t -= step
    return t


class ShiftGPAC(_Overlapping):
    r"""Shift-G-PAC: each group calibrated on a score shifted per cell by what the items outside it show.

    Parameters
    ----------
    eps, alpha, recipe
        As for :class:`~gpac_utils.calibrate.PAC` (sampling ``full`` or ``bernoulli``).
    **options
        ``loss_bound``, ``min_group_size``, ``seed``, ``risk`` (``"joint"`` only) and ``correction``, as for
        :class:`MinGPAC`: ``"none"`` each group separately at ``alpha``, ``"bonferroni"`` all at once.

    For each group ``G``: a logistic fit of the loss on the score and every group's membership, on the
    labelled items **outside** ``G`` (:func:`_shift_fit`), gives each cell ``c`` of ``G`` a shift
    :math:`d_c = \sum_{H \ni c} o_H / (b + 2\,\mathrm{se}(b))` (:data:`SHIFT_Z`; ``G``'s own offset is 0: no
    item outside ``G`` is in it), rounded to 6
    decimals and clipped to ``[-1, 1]``. ``G`` is then calibrated by G-PAC's step (Algorithm 2, first-crossing)
    on the shifted score :math:`r = U + d_c` of its own items (``candidates="auto"``: every distinct shifted score,
    or evenly spaced points of :data:`SHIFTED`), a level :math:`\hat\lambda_G`; cell ``c`` of ``G`` may route
    :math:`U \le \hat\lambda_G - d_c` (a float with :math:`t + d_c \le \hat\lambda_G`), and a cell
    takes the smallest threshold among its groups, as :class:`MinGPAC` does. A cell whose other groups lose more
    at the same score gets a lower threshold within ``G``, and the risk ``G`` may spend goes to its safer cells.

    Valid for each group as Min-G-PAC is (``docs/overlapping-groups.md``): given which items are in ``G``, its
    items are an i.i.d. sample of the population restricted to ``G``, independent of the items outside it, so
    the shifted score is a score fixed before ``G``'s losses are read; with no shift it is Min-G-PAC, and on
    one grouping it is G-PAC (a group's cells are the group: its shift is 0).

    Attributes
    ----------
    thresholds_ : dict of str to float
        Per cell: the smallest :math:`\hat\lambda_G - d_c` among its groups (``-inf``: thinks; at most 1).
    group_levels_ : dict of str to float
        Per group: :math:`\hat\lambda_G`, its threshold on the shifted score (not on ``U``: the certificate's
        ``groups`` give no threshold of a group's own, as for Path-G-PAC).
    shifts_ : dict of str to dict of str to float
        Per group, per cell of it: the shift :math:`d_c` fixed by the items outside the group.
    group_sizes_, groups_ : dict
        As for :class:`MinGPAC` (the bound at :math:`\hat\lambda_G` on the group's shifted scores).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n = 4000
    >>> groups = {"subject": rng.choice(["alg", "geo"], n), "lang": rng.choice(["en", "fr"], n)}
    >>> u = rng.uniform(size=n)
    >>> loss = (rng.uniform(size=n) < np.where(groups["subject"] == "geo", 0.4, 0.1) * u).astype(float)
    >>> m = ShiftGPAC(eps=0.05).fit(u, loss, groups)
    >>> m.shifts_["lang=en"]["subject=geo & lang=en"] > 0 > m.shifts_["lang=en"]["subject=alg & lang=en"]
    True

    References
    ----------
    The G-PAC paper, Algorithm 2 and Theorem 4.2 (per group); ``docs/overlapping-groups.md`` (the proof).
    """

    name = "Shift-G-PAC"
    SETTINGS = GPAC.SETTINGS

    def fit(self, scores, losses, groups=None) -> ShiftGPAC:
        """Calibrate every group on its own items' shifted scores, then take the smallest threshold per cell.

        Parameters
        ----------
        scores, losses : array_like, shape (n,)
            Scores in ``[0, 1]``, losses in ``[0, loss_bound]``.
        groups : array_like, dict, DataFrame or boolean array
            The collection (:func:`collection`).

        Returns
        -------
        self
        """
        self.shifts_: dict[str, dict[str, float]] = {}

        def shifts(s, loss, coll, j, outside):
            """Group ``j``'s shift per cell, fitted on the labelled items outside it."""
            b, o, b_se = _shift_fit(s[outside], loss[outside] / self.loss_bound, coll.member[outside].astype(float))
            b += SHIFT_Z * b_se  # the slope's upper value: a weakly identified slope gives small shifts
            return lambda groups: float(np.clip(round(sum(o[coll.names.index(h)] for h in groups) / b, 6), -1, 1))

        self.group_levels_ = self._fit_groups(scores, losses, groups, shifts, SHIFTED)
        return self


# ---- the path -------------------------------------------------------------------------------------


def _isotonic(u, y):
    """An isotonic (non-decreasing) fit of ``y`` on ``u``: the distinct ``u`` (knots) and the fitted values."""
    from scipy.optimize import isotonic_regression

    knots, inv = np.unique(u, return_inverse=True)
    w = np.bincount(inv, minlength=knots.size).astype(float)
    mean = np.bincount(inv, weights=y, minlength=knots.size) / w
    return knots, isotonic_regression(mean, weights=w).x


def _step(knots, values, u):
    """The left-continuous step function of an isotonic fit at ``u``: the value of the first knot ``>= u``
    (the last value above the last knot): non-decreasing in ``u``."""
    i = np.minimum(np.searchsorted(knots, u, side="left"), knots.size - 1)
    return values[i]


#: The path's parameter ``s``: each group's own bound on the path half is held to ``s * eps`` (``s`` = 0.01 ... 3).
PATH_GRID = np.arange(1, 301) / 100
#: The multiplicative steps that set the weights of the groups on the path half (:class:`Path`).
PATH_ROUNDS = 200


@dataclass(frozen=True)
class Path:
    r"""A one-parameter family of per-cell thresholds, fixed by the path half (:func:`fit_path`).

    Two steps, both fixed before the test half is seen:

    1. *A score per cell.* :math:`\hat p_c(u)` estimates the loss (over ``loss_bound``) at score ``u``
       in cell ``c``: the cell's isotonic fit shrunk toward the mean of its groups' fits (weight
       :data:`SHRINK`), non-decreasing and left-continuous in ``u``. An item's path score is
       :math:`q = \hat p_{c}(U)`: among items of one cell, routing :math:`q \le \lambda` is routing
       :math:`U \le t_c(\lambda) = \sup\{u : \hat p_c(u) \le \lambda\}`.
    2. *A level per cell.* Each group ``G`` gets a weight :math:`\mu_G > 0`, and cell ``c`` the base level
       :math:`\lambda_c = 1 / \sum_{G \ni c} \mu_G`: an item routes when :math:`q \le s\,\lambda_c`,
       the Lagrangian form of "route the items of least expected loss subject to every group's
       constraint". The weights are set on the path half so that every group's *predicted* test
       bound is about ``eps`` (:func:`_lagrange_levels`); ``s`` scales every level:
       :math:`\Lambda_c(s) = s\,\lambda_c`.

    Cell ``c`` routes :math:`U \le t_c(\Lambda_c(s))` at ``s``: every threshold is non-decreasing in
    ``s``, so every group's joint risk is. A cell in a group that is off (too few items) never routes.

    Attributes
    ----------
    fits : dict of str to (knots, values)
        The isotonic fit of every cell and group with path items.
    counts : dict of str to int
        Path items per cell and group.
    cell_groups : dict of str to list of str
        Each cell's groups.
    off : frozenset of str
        The groups whose items never route (too few items to be tested).
    levels : dict of str to float
        Each cell's base level :math:`\lambda_c`.
    """

    fits: dict
    counts: dict
    cell_groups: dict
    off: frozenset
    levels: dict

    grid = PATH_GRID

    def curve(self, cell: str):
        """The cell's :math:`\\hat p_c` at the union of its knots: ``(knots, values)``, or ``None``: never routes."""
        gs = self.cell_groups.get(cell, [])
        parts = [g for g in gs if g in self.fits]
        if not parts or any(g in self.off for g in gs):
            return None
        own = self.fits.get(cell)
        knots = np.unique(np.concatenate([self.fits[g][0] for g in parts] + ([own[0]] if own else [])))
        prior = np.mean([_step(*self.fits[g], knots) for g in parts], axis=0)
        n = self.counts.get(cell, 0) if own else 0
        values = prior if not n else (n * _step(*own, knots) + SHRINK * prior) / (n + SHRINK)
        return knots, values

    def q(self, cells, u) -> np.ndarray:
        """Each item's score :math:`q = \\hat p_c(U)` (``inf``: its cell never routes)."""
        out = np.full(u.size, np.inf)
        for c in np.unique(cells).tolist():
            curve = self.curve(c)
            if curve is not None:
                at = cells == c
                out[at] = _step(*curve, u[at])
        return out

    def scores(self, cells, u) -> np.ndarray:
        """Each item's path score: the first ``s`` of :data:`PATH_GRID` at which it routes (``inf``: never);
        at ``s`` the items with path score at most ``s`` route."""
        q = self.q(cells, u)
        out = np.full(u.size, np.inf)
        for c in np.unique(cells).tolist():
            at = np.flatnonzero((cells == c) & np.isfinite(q))  # q is finite only where the cell has a curve
            levels = self.grid * self.levels.get(c, -np.inf)  # Lambda_c(s), non-decreasing in s
            first = np.searchsorted(levels, q[at], side="left")
            ok = first < self.grid.size
            out[at[ok]] = self.grid[first[ok]]
        return out

    def threshold(self, cell: str, s: float) -> float:
        """The cell's threshold on the score ``U`` at ``s``: the largest knot whose :math:`\\hat p_c` is at
        most :math:`\\Lambda_c(s)` (1.0 past the last knot; ``-inf``: the cell does not route)."""
        curve = self.curve(cell)
        k = int(np.searchsorted(self.grid, s, side="right")) - 1 if math.isfinite(s) else -1
        if curve is None or k < 0:
            return -math.inf
        level = float(self.grid[k] * self.levels.get(cell, -np.inf))  # Lambda_c(s)
        knots, values = curve
        j = int(np.searchsorted(values, level, side="right")) - 1
        if j < 0:
            return -math.inf
        return 1.0 if j == knots.size - 1 else float(knots[j])


def _lagrange_levels(q, y, coll: Collection, path: Path, eps: float, alpha: float, test_items: dict) -> dict:
    """Each cell's base level :math:`\\lambda_c = 1 / \\sum_{G \\ni c} \\mu_G` (module description of
    :class:`Path`): the weights :math:`\\mu_G` make every group's predicted bound about ``eps`` at once.

    The prediction of a group's bound is Bernstein's, :math:`r + \\sqrt{2 r (1 - r) \\log(1/\\alpha) / m}
    + \\log(1/\\alpha) / m`, with the path half's risk ``r`` and the test half's expected items ``m``.
    The weights take :data:`PATH_ROUNDS` multiplicative steps, each by the square root of the
    group's predicted bound over ``eps`` (clipped to ``[1/4, 4]``): a group under ``eps`` lets its
    cells route more."""
    log_a = math.log(1 / alpha)
    on = [j for j, g in enumerate(coll.names) if g not in path.off and coll.member[:, j].any()]
    every = sorted(path.cell_groups)
    c_member = np.array([[g in path.cell_groups[c] for g in coll.names] for c in every], dtype=float)
    where = np.searchsorted(every, coll.cells)  # each item's cell (every cell is one of them)
    mu = np.ones(len(coll.names))
    expected = np.array([max(float(test_items[g]), 1.0) for g in coll.names])
    n_g = np.maximum(coll.member.sum(axis=0), 1)
    for _ in range(PATH_ROUNDS):
        lam = 1.0 / np.maximum(c_member @ mu, 1e-12)
        routed = q <= lam[where]  # a finite level: never where q is inf (the cell never routes)
        risk = (coll.member * (y * routed)[:, None]).sum(axis=0) / n_g
        pred = risk + np.sqrt(2 * risk * (1 - risk) * log_a / expected) + log_a / expected
        mu[on] *= np.clip(pred[on] / eps, 0.25, 4.0) ** 0.5
        mu = np.clip(mu, 1e-6, 1e6)
    lam = 1.0 / np.maximum(c_member @ mu, 1e-12)
    return {c: float(v) for c, v in zip(every, lam.tolist())}


def fit_path(scores, y, coll: Collection, cell_groups: dict, eps: float, alpha: float, off, test_items: dict) -> Path:
    """The path of :class:`PathGPAC`, from the path half's labelled items (:class:`Path`).

    Parameters
    ----------
    scores, y : numpy.ndarray, shape (n1,)
        The path half's labelled items: their scores, and their losses over ``loss_bound`` (in ``[0, 1]``, as
        :math:`\\hat p_c`).
    coll : Collection
        Their groups (the full collection's names, restricted to these rows).
    cell_groups : dict of str to list of str
        Every cell's groups (the cells of all calibration items, seen in the path half or not).
    eps, alpha : float
        The target over ``loss_bound`` and the level of the path half's bounds (they shape the path, not
        the guarantee).
    off : iterable of str
        Groups whose items never route.
    test_items : dict of str to float
        Per group, the items the test half is expected to hold (the bound a level is held to is the
        Bernstein-type prediction of :func:`_lagrange_levels` with that many terms at the path half's mean).

    Returns
    -------
    Path
    """
    groups = {g: coll.member[:, j] for j, g in enumerate(coll.names)}
    fits, counts = {}, {}
    for key, at in [*groups.items(), *((c, coll.cells == c) for c in np.unique(coll.cells).tolist())]:  # groups, cells
        counts[key] = int(at.sum())
        if at.any():
            fits[key] = _isotonic(scores[at], y[at])
    draft = Path(fits, counts, dict(cell_groups), frozenset(off), {})
    levels = _lagrange_levels(draft.q(coll.cells, scores), y, coll, draft, eps, alpha, test_items)
    return dataclasses.replace(draft, levels=levels)


class PathGPAC(_Overlapping):
    """Path-G-PAC: per-cell thresholds along a path fixed on a held-out share, tested for every group at once.

    Parameters
    ----------
    eps, alpha, recipe
        As for :class:`~gpac_utils.calibrate.PAC` (sampling ``full`` or ``bernoulli``; rule
        ``first-crossing``: the fixed-sequence test).
    **options
        ``loss_bound``, ``min_group_size``, ``seed`` (the split and the labels) and ``risk``
        (``"joint"`` only). A random half of the calibration items (:attr:`path_share`) fixes the
        path; the rest tests it. The guarantee holds for all groups at once at ``alpha`` (no
        ``correction`` is read: none is needed).

    Attributes
    ----------
    thresholds_ : dict of str to float
        Per cell seen at calibration: :math:`t_c(\\hat\\lambda)`.
    level_ : float
        The selected level :math:`\\hat\\lambda` (``-inf``: every item thinks).
    path_ : Path
        The path fixed by the path half.
    groups_, group_sizes_ : dict
        Per group: its record (items, labels, status, its bound at :math:`\\hat\\lambda` on the test
        half) and its calibration items.
    curve_ : pandas.DataFrame
        Per level tested: each group's bound and their maximum (what the scan reads).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(2)
    >>> n = 6000
    >>> groups = {"subject": rng.choice(list("abc"), n), "lang": rng.choice(["en", "fr"], n)}
    >>> u = rng.uniform(size=n)
    >>> loss = (rng.uniform(size=n) < np.where(groups["subject"] == "c", 0.5, 0.1) * u).astype(float)
    >>> p = PathGPAC(eps=0.05).fit(u, loss, groups)
    >>> 0 < p.level_ < 1, p.thresholds_["subject=a & lang=en"] > p.thresholds_["subject=c & lang=en"]
    (True, True)

    References
    ----------
    The G-PAC paper, Assumption 4.1 and Theorem 4.2 (the per-group bound it rests on);
    ``docs/overlapping-groups.md`` (the proof of the simultaneous guarantee).
    """

    name = "Path-G-PAC"
    #: The share of the calibration items that fixes the path (the rest tests it); a class attribute, not a
    #: setting: the thresholds file's schema (version 4) has no field for it.
    path_share = 0.5

    def _setup(self, settings) -> None:
        if settings.recipe.rule != "first-crossing":
            raise ParameterError(
                f"recipe: rule {settings.recipe.rule!r}; Path-G-PAC tests the path in a fixed sequence "
                "(rule 'first-crossing')"
            )
        super()._setup(settings)
        self.level_ = -math.inf
        self.path_: Path | None = None
        self.curve_: pd.DataFrame | None = None

    def fit(self, scores, losses, groups=None) -> PathGPAC:
        """Fix the path on a random half of the items (:attr:`path_share`), then test it on the rest.

        Parameters
        ----------
        scores, losses : array_like, shape (n,)
            Scores in ``[0, 1]``, losses in ``[0, loss_bound]``.
        groups : array_like, dict, DataFrame or boolean array
            The collection (:func:`collection`).

        Returns
        -------
        self
        """
        s, loss, coll = self._inputs(scores, losses, groups, min_items=2)
        rng = np.random.default_rng(self.seed)
        z, xi, term_range = _terms(loss, self.recipe, self.loss_bound, rng)
        perm = rng.permutation(s.size)
        n1 = int(round(self.path_share * s.size))
        if not 0 < n1 < s.size:
            raise ParameterError(f"scores: cannot split {s.size} items into a path share and a test share")
        first, test = np.sort(perm[:n1]), perm[n1:]  # test: a random order (a sequential bound reads it)
        self._start(coll)
        n_min = _feasibility._min_items(self.eps, self.alpha, self.recipe, self.loss_bound, "joint")
        need = max(n_min, self.min_group_size)
        # the path: the path half's labelled items; a group expected to have too few test items is off
        names, cg = coll.names, _cell_groups(coll)
        n1_g = coll.member[first].sum(axis=0)
        expected = dict(zip(names, (n1_g * (s.size - n1) / n1).tolist()))  # each group's expected test items
        off = [g for g, e in expected.items() if e - 2 * math.sqrt(e) < need]  # less two standard deviations
        lab = first[xi[first]]
        sub = Collection(names, coll.member[lab], coll.cells[lab], coll.groupings)
        lb = self.loss_bound
        self.path_ = path = fit_path(s[lab], loss[lab] / lb, sub, cg, self.eps / lb, self.alpha, off, expected)
        # the test half: every group that can route is tested at every s of the fixed grid
        r = path.scores(coll.cells, s)
        r = np.where(np.isfinite(r), r, 2 * PATH_GRID[-1])  # past the grid: never routes
        tested = {g: test[coll.member[test, j]] for j, g in enumerate(names) if g not in path.off}
        blocked = [(g, at.size) for g, at in tested.items() if at.size < need]
        curves = {
            g: _bounds.ucb(self.recipe.bound, z[at], r[at], PATH_GRID, self.alpha, term_range)
            for g, at in tested.items()
            if at.size >= need
        }
        level = -math.inf
        if blocked:
            g, k = blocked[0]
            warnings.warn(
                f"group {g!r} has {k} test items (< {need}, the fewest that certify anything): no step of the path "
                "can pass, every item thinks; use more items",
                GroupWarning,
                stacklevel=2,
            )
        elif curves:
            top = np.max(np.vstack(list(curves.values())), axis=0)
            level = float(_selection.select(PATH_GRID, top, self.eps, "first-crossing"))
        self.level_ = level
        self.curve_ = pd.DataFrame({"s": PATH_GRID, **curves})
        at_level = int(np.searchsorted(PATH_GRID, level, side="right")) - 1
        for j, g in enumerate(names):
            if g in path.off:
                self._small(g, int(n1_g[j]), "items in the path share (too few to be tested)")
            status = TOO_FEW if g in path.off else (CERTIFIED if math.isfinite(level) else NO_FEASIBLE)
            bound = float(curves[g][at_level]) if status == CERTIFIED else None
            self.groups_[g] = GroupRecord(self.group_sizes_[g], int(xi[coll.member[:, j]].sum()), status, bound)
        for c in cg:
            self.thresholds_[c] = path.threshold(c, level)
        return self


def certificate_groups(cal) -> dict:
    """The certificate's ``groups`` of a fitted calibrator of this module (:mod:`gpac_utils.certificate`): per group
    of every grouping (``subject=algebra``), its record (``groups_``) and its own threshold: the group's where the
    calibrator sets one (Min-G-PAC's ``group_thresholds_``: ``ucb`` is the bound at it), else the cell's when the
    group is a cell (one grouping), else null (Path-G-PAC: its items route by their cells' thresholds, and ``ucb``
    is its bound at the selected level)."""
    own = getattr(cal, "group_thresholds_", {})
    out = {}
    for g, rec in cal.groups_.items():
        t = own.get(g, cal.thresholds_.get(g, -math.inf))
        threshold = float(t) if math.isfinite(t) else None
        out[g] = {"n": rec.n, "labelled": rec.labelled, "status": rec.status, "threshold": threshold, "ucb": rec.ucb}
    return dict(sorted(out.items()))


def check_cells(groups: dict, thr: dict, groupings=None) -> None:
    """A certificate's cells (``thresholds``) against its ``groups``: each of a cell's groups has an entry, and only
    a cell of groups that all route has a threshold (a group's guarantee covers its items only then)."""
    for c, t in thr.items():
        parts = [c] if c in groups else split_cell(c, groupings) or c.split(SEP)
        absent = [p for p in parts if p not in groups]
        if absent:
            raise ThresholdsFileError(f"thresholds[{c!r}]: the cell's group {absent[0]!r} has no entry in 'groups'")
        off = [p for p in parts if groups[p]["status"] not in ROUTING]
        if t is not None and off:
            raise ThresholdsFileError(
                f"thresholds[{c!r}]: {t!r} for a cell of group {off[0]!r}, whose status is {groups[off[0]]['status']!r}"
            )


CALIBRATORS.register(Method(MinGPAC.name, MinGPAC, "collection", {"groupings": GROUPING_NAMES}))
CALIBRATORS.register(Method(ShiftGPAC.name, ShiftGPAC, "collection", {"groupings": GROUPING_NAMES}, default=True))
CALIBRATORS.register(Method(PathGPAC.name, PathGPAC, "collection", {"groupings": GROUPING_NAMES}))
