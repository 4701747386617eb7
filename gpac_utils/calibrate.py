r"""Calibrators: PAC (one threshold), G-PAC (known groups), C-PAC (groups learned from U).

All three route an item to the non-thinking model when its score is at most its group's
threshold. Calibration of one group (paper Algorithms 1–2), as set by a
:class:`~gpac_utils.recipe.Recipe`:

1. draw expert-label terms with the recipe's sampling scheme (:mod:`gpac_utils.sampling`);
2. compute an upper confidence bound on the risk ``E[loss 1{U <= u}]`` at every candidate
   threshold (:mod:`gpac_utils.bounds`);
3. select the threshold with the recipe's rule (:mod:`gpac_utils.selection`), ``-inf``
   (always think) when no candidate is certified.

C-PAC is a composition, not a subclass: a :class:`~gpac_utils.partition.ScorePartitioner`
learns groups from the score, and a :class:`GPAC` calibrates one threshold per learned group.

Groups with fewer than ``min_group_size`` calibration items, groups with fewer items than the bound
needs to certify anything (:func:`gpac_utils.feasibility.min_items`), and groups unseen at
calibration route to the thinking model (threshold ``-inf``) with a :class:`GroupWarning`. Each
fitted group keeps a :class:`GroupRecord` in ``groups_``: its status (:data:`STATUSES`) says which
of these it is, or that it is certified, with the bound at its threshold.

Every calibrator follows one protocol, :class:`Calibrator`: ``fit(scores, losses, groups=None)``,
``route(scores, groups=None)`` (True: the non-thinking model answers) and the fitted
``thresholds_`` (group label to threshold). Inputs always come in the order scores, losses,
groups, then the rest. :func:`factorize_groups` and :func:`group_labels` are the group-label
helpers every calibrator (:class:`~gpac_utils.online.OnlineGPAC` included) shares.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from . import bounds as _bounds
from . import feasibility as _feasibility
from . import risks as _risks
from . import thresholds_schema as _schema
from .checks import (
    ParameterError,
    check_array,
    check_choice,
    check_fitted,
    check_xy,
)
from .group_threshold import (
    batch_threshold,
    factorize_groups,
    group_labels,
    risk_curve,
    routed_risk_curve,
    routed_threshold,
    threshold,
)
from .partition import PARTITION_ALGORITHMS, Partition, ScorePartitioner
from .risks import Problem
from .settings import (
    CALIBRATORS,
    COMMON,
    CORRECTION,
    GROUPINGS,
    Interval,
    Method,
    Options,
    Setting,
    Settings,
    settings_init,
)

__all__ = [
    "ALL",
    "GroupWarning",
    "GroupRecord",
    "STATUSES",
    "ROUTING",
    "Calibrator",
    "threshold",
    "batch_threshold",
    "routed_threshold",
    "routed_risk_curve",
    "risk_curve",
    "factorize_groups",
    "group_labels",
    "PAC",
    "GPAC",
    "CPAC",
    "PARTITIONER",
    "CPAC_MODE",
    "CLUSTER_FRACTION",
    "default_method",
    "method",
    "calibrator",
]

#: The label of the single group of marginal PAC (and of "all items" in result tables).
ALL = "__all__"


class GroupWarning(UserWarning):
    """A group is too small to calibrate, cannot be certified, or was not seen at calibration: it always thinks."""


#: A group's status after calibration (``groups_``, and the certificate of :mod:`gpac_utils.certificate`).
CERTIFIED = "certified"
#: Fewer items than ``min_group_size``, or than the bound can certify anything with
#: (:func:`gpac_utils.feasibility.min_items`): no losses could have certified a threshold.
TOO_FEW = "always think: too few items"
#: Enough items, but the bound exceeds ``eps`` at every candidate (first-crossing: at the lowest one).
NO_FEASIBLE = "always think: no feasible threshold"
#: A group met only when routing (a G-PAC label absent from calibration; a learned C-PAC group without items).
UNSEEN = "unseen at calibration"


class _Statuses(Sequence):
    """The group statuses: the four above, then each registered calibrator's own (:attr:`Method.statuses`),
    read when asked (``routes``: only those of groups with a threshold, or only those without)."""

    def __init__(self, routes: bool | None = None):
        self.routes = routes

    def _all(self) -> list[str]:
        out = {CERTIFIED: True, TOO_FEW: False, NO_FEASIBLE: False, UNSEEN: False}
        for entry in CALIBRATORS.values():
            out.update(entry.statuses)
        return [s for s, routes in out.items() if self.routes is None or routes == self.routes]

    def __getitem__(self, i):
        return self._all()[i]

    def __len__(self) -> int:
        return len(self._all())


#: Every group status (``groups_``, the certificate's ``groups``): the vocabulary, registered calibrators' included.
STATUSES = _Statuses()
#: The statuses of groups that have a threshold (:data:`CERTIFIED`, and a calibrator's own, such as "pooled").
ROUTING = _Statuses(routes=True)


class GroupRecord(NamedTuple):
    """What calibration found for one group: items ``n``, expert labels used (``labelled``), ``status``
    (one of :data:`STATUSES`) and the upper confidence bound at its threshold (``ucb``; None: always think)."""

    n: int
    labelled: int
    status: str
    ucb: float | None


def _group_record(n, labelled, t, bound, n_min) -> GroupRecord:
    """The record of a calibrated group: its labels drawn, its threshold ``t`` and the bound at it."""
    if math.isfinite(t):
        return GroupRecord(int(n), int(labelled), CERTIFIED, None if bound is None else float(bound))
    return GroupRecord(int(n), int(labelled), TOO_FEW if n < n_min else NO_FEASIBLE, None)


def _members(scores, losses, labels) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]]]:
    """The distinct labels, sorted, and each one's scores and losses in their input order (``labels``
    ``None``: one group, :data:`ALL`); the labels are factorised once, and the items gathered once."""
    if labels is None:
        return [ALL], [(scores, losses)]
    codes, names = factorize_groups(labels)
    if len(names) == 1:
        return names.tolist(), [(scores, losses)]
    # a stable sort of small integers (a radix sort): each group's items in their input order
    order = np.argsort(codes.astype(np.min_scalar_type(len(names))), kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(names)))
    s, loss = scores[order], losses[order]
    starts = np.concatenate(([0], ends[:-1]))
    return names.tolist(), [(s[a:b], loss[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]


def _warn_uncertified(groups: dict, eps: float) -> None:
    """One :class:`GroupWarning` for the groups with enough items whose bound exceeds ``eps`` at every
    candidate (``gpac calibrate`` warns on them too)."""
    failed = [g for g, rec in groups.items() if rec.status == NO_FEASIBLE]
    if failed:
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        warnings.warn(
            f"group(s) {failed[:5]}{more} could not be certified at eps={eps:g} (the bound exceeds it at every "
            "candidate threshold); they always route to the thinking model",
            GroupWarning,
            stacklevel=4,
        )


@runtime_checkable
class Calibrator(Protocol):
    """What every calibrator promises (:class:`PAC`, :class:`GPAC`, :class:`CPAC`, ``OnlineGPAC``).

    ``fit(scores, losses, groups=None)``
        Calibrate on per-item scores in ``[0, 1]`` and losses in ``[0, loss_bound]`` (``groups``:
        one label per item, for calibrators with known groups); returns the calibrator.
    ``route(scores, groups=None)``
        A boolean array: True where the item goes to the non-thinking model (its score is at most
        its group's threshold), False where the thinking model answers.
    ``thresholds_``
        The fitted threshold per group label (``-inf``: the group always thinks).

    Examples
    --------
    >>> from gpac_utils import PAC
    >>> isinstance(PAC(eps=0.1), Calibrator)
    True
    """

    thresholds_: dict[str, float]

    def fit(self, scores, losses, groups=None) -> Calibrator: ...

    def route(self, scores, groups=None) -> np.ndarray: ...


class _Declared:
    """What :class:`PAC` and :class:`CPAC` (and every subclass, a plugin's too) share: their parameters are
    the settings they declare (``SETTINGS``, generated by :func:`~gpac_utils.settings.settings_init` unless a
    class writes its own ``__init__``; ``OPTIONS``, their names), kept whole as ``config``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.OPTIONS = tuple(s.name for s in cls.SETTINGS)
        if "__init__" not in vars(cls):  # its parameters are its SETTINGS (a plugin declares its own)
            cls.__init__ = settings_init(cls)

    @classmethod
    def from_settings(cls, settings: Settings):
        """An unfitted calibrator that keeps ``settings`` whole (checked once, when they were built; the
        fields it does not read, :attr:`OPTIONS`, hold for other calibrators and are not used by this one)."""
        if not isinstance(settings, Settings):
            raise ParameterError(f"settings: must be a Settings, got {type(settings).__name__}")
        obj = cls.__new__(cls)
        obj._setup(settings.as_settings())
        return obj

    def __getattr__(self, name: str):
        """A setting it declares (:attr:`OPTIONS`: ``eps``, ``alpha``, ...), read from ``config``."""
        if name in type(self).OPTIONS and "config" in vars(self):
            return getattr(self.config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __dir__(self) -> list[str]:  # its settings too: shown by dir(), completed by IPython
        return sorted({*super().__dir__(), *type(self).OPTIONS})

    @property
    def settings(self) -> dict[str, Any]:
        """Every setting, flat (the recipe's fields included), as written to JSON."""
        return self.config.to_dict(type(self).OPTIONS)


class PAC(_Declared):
    """Marginal PAC reasoning: one threshold for all inputs.

    The parameters are the settings it reads, declared once (:attr:`SETTINGS`, checked by
    :class:`~gpac_utils.settings.Settings`); :meth:`from_settings` takes a ``Settings`` whole and
    keeps it (``config``).

    Parameters
    ----------
    eps : float
        Target risk, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        The guarantee holds with probability at least ``1 - alpha``.
    recipe : Recipe or str, default "valid"
        How the threshold is certified (:class:`~gpac_utils.recipe.Recipe` or its name).
    loss_bound : float, default 1.0
        Upper end of the loss range.
    min_group_size : int, default 10
        Groups with fewer calibration items always think.
    seed : int, default 0
        Seed of the label sampling.
    risk : str, default "joint"
        What is certified (:data:`~gpac_utils.risks.RISKS`).

    Attributes
    ----------
    thresholds_ : dict of str to float
        Fitted threshold per group (``-inf``: always think).
    group_sizes_ : dict of str to int
        Calibration items per group.
    groups_ : dict of str to GroupRecord
        Per group: items, labels used, status (:data:`STATUSES`) and the bound at the threshold.

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils import PAC
    >>> rng = np.random.default_rng(0)
    >>> u = rng.uniform(size=2000)
    >>> losses = (rng.uniform(size=2000) < u**4).astype(float)
    >>> pac = PAC(eps=0.1).fit(u, losses)
    >>> 0 < pac.thresholds_["__all__"] < 1
    True
    >>> pac.route([0.01, 0.99]).tolist()  # route_nothink: True where the non-thinking model answers
    [True, False]

    References
    ----------
    Zeng et al. (2025). PAC reasoning: controlling the performance loss of efficient
    reasoning.
    """

    name = "PAC"
    #: The settings this calibrator reads (and writes to JSON), in its parameters' order: their one declaration.
    SETTINGS: tuple[Setting, ...] = COMMON

    def _setup(self, settings: Settings) -> None:
        """Keep ``settings`` whole (``config``) and start unfitted."""
        self.config = settings
        self.thresholds_: dict[str, float] = {}
        self.group_sizes_: dict[str, int] = {}
        self.groups_: dict[str, GroupRecord] = {}

    # -- persistence ---------------------------------------------------------------------------
    def to_json(self) -> str:
        """The fitted thresholds and every setting as JSON (``-inf`` written as ``null``)."""
        check_fitted(self, bool(self.thresholds_))
        payload = {
            "schema_version": _schema.SCHEMA_VERSION,
            "method": self.name,
            "settings": self.settings,
            "thresholds": {g: (None if not math.isfinite(t) else float(t)) for g, t in self.thresholds_.items()},
            "group_sizes": self.group_sizes_,
        }
        return json.dumps(payload, indent=2, sort_keys=True)

    def _restore(self, payload) -> None:
        """Set the fitted state of a ``to_json`` payload (:func:`gpac_utils.certificate.from_json`)."""
        self.thresholds_ = {g: (-math.inf if t is None else float(t)) for g, t in payload["thresholds"].items()}
        self.group_sizes_ = {g: int(v) for g, v in payload.get("group_sizes", {}).items()}

    # -- calibration ---------------------------------------------------------------------------
    def calibrate(self, scores, losses, labels, rng, intervals=None) -> PAC:
        """One threshold per distinct label, drawing the label terms from ``rng`` (the step under :meth:`fit`).

        :class:`CPAC` calls it with its learned groups and the generator that drew its split.

        Parameters
        ----------
        scores, losses : numpy.ndarray, shape (n,)
            Checked calibration scores in ``[0, 1]`` and losses in ``[0, loss_bound]``.
        labels : array_like, shape (n,), or None
            The group label of each item (``None``: one group, :data:`ALL`, as marginal PAC).
        rng : numpy.random.Generator
            The generator of the label sampling.
        intervals : dict of str to (float, float), optional
            Per label, the score interval its evenly spaced grids span (split C-PAC's learned
            intervals, fixed before the calibration half); default ``[0, 1]``.

        Returns
        -------
        self
        """
        self.thresholds_, self.group_sizes_, self.groups_ = {}, {}, {}
        certify = _risks.get_risk(self.risk).certify  # the hook: what is certified
        names, members = _members(scores, losses, labels)
        alpha = self.config.alpha_per_group(len(names))
        n_min = _feasibility._min_items(self.eps, alpha, self.recipe, self.loss_bound, self.risk)  # checked once
        for g, (s, loss) in zip(names, members):
            self.group_sizes_[g] = int(s.size)
            if s.size < self.min_group_size:
                self.thresholds_[g] = -math.inf
                self.groups_[g] = self._small(g, s.size)
                continue
            if s.size < n_min:  # still calibrated: the label draws of the other groups stay as they were
                warnings.warn(
                    f"group {g!r} has {s.size} calibration items; {self.recipe.bound} certifies nothing with fewer "
                    f"than {n_min} at eps={self.eps}, alpha={alpha:.3g}, risk={self.risk}: it always routes to the "
                    "thinking model",
                    GroupWarning,
                    stacklevel=4,
                )
            interval = (intervals or {}).get(g, (0.0, 1.0))
            problem = Problem(self.eps, alpha, self.recipe, self.loss_bound, interval=interval)
            t, labelled, bound = certify(s, loss, problem, rng)
            self.thresholds_[g] = float(t)
            self.groups_[g] = _group_record(s.size, labelled, float(t), bound, n_min)
        _warn_uncertified(self.groups_, self.eps)
        return self

    def _small(self, g: str, size: int, what: str = "calibration items") -> GroupRecord:
        """The record of a group with fewer than ``min_group_size`` items (it always thinks), with its
        :class:`GroupWarning`."""
        warnings.warn(
            f"group {g!r} has {size} {what} (< min_group_size={self.min_group_size}); it always routes to the "
            "thinking model",
            GroupWarning,
            stacklevel=4,
        )
        return GroupRecord(int(size), 0, TOO_FEW, None)

    #: Why ``groups`` is refused (``None``: the calibrator needs them).
    no_groups = "PAC calibrates one threshold for all items; use GPAC for known groups"

    def _inputs(self, scores, losses=None, groups=None, min_items=0):
        """The validation layer's one call (:func:`~gpac_utils.checks.check_xy`): checked scores,
        losses and the label of each item (``None`` without groups)."""
        if (groups is None) == (self.no_groups is None):  # given to PAC, or missing for G-PAC
            raise ParameterError(f"groups: {self.no_groups or 'G-PAC needs one group label per item (groups=...)'}")
        return self._xy(scores, losses, groups, min_items)

    def _xy(self, scores, losses, groups=None, min_items=0):
        """:func:`~gpac_utils.checks.check_xy`, and losses the recipe's bound can take."""
        binary = _bounds.BOUNDS[self.recipe.bound].binary_terms
        return check_xy(scores, losses, groups, loss_bound=self.loss_bound, min_items=min_items, binary=binary)

    def fit(self, scores, losses, groups=None) -> PAC:
        """Calibrate on per-item ``scores`` (in [0, 1]) and ``losses``, one threshold per group.

        ``groups`` (one label per item) is needed by G-PAC and refused by PAC (it would be ignored).
        Inputs are checked by the validation layer (:mod:`gpac_utils.checks`): 1-D, equal lengths,
        pandas inputs with equal indexes (refused otherwise, never re-paired by position), scores in
        ``[0, 1]``, losses in ``[0, loss_bound]``, no NaN or infinity, labels of one type, none empty.

        Returns
        -------
        self

        Raises
        ------
        ParameterError
            Naming the argument and the first bad rows.
        """
        scores, losses, labels = self._inputs(scores, losses, groups, min_items=1)
        return self.calibrate(scores, losses, labels, np.random.default_rng(self.seed))

    # -- deployment ----------------------------------------------------------------------------
    def thresholds_for(self, scores, groups=None) -> np.ndarray:
        """Each item's threshold (``-inf`` for unseen groups, with a warning); inputs checked as in :meth:`fit`."""
        check_fitted(self, bool(self.thresholds_))
        return self._thresholds_for(*self._inputs(scores, None, groups)[::2])

    def _thresholds_for(self, scores, labels, what="group(s)", show=None, stacklevel=3) -> np.ndarray:
        """Each item's threshold by its label (a :class:`GroupWarning` names the first ``show`` unseen ones,
        ``stacklevel`` frames up: the caller of ``route``)."""
        # marginal PAC (no labels): every item is in its one group, ALL (code 0)
        codes, names = (np.zeros(scores.size, np.intp), np.array([ALL])) if labels is None else factorize_groups(labels)
        unseen = [g for g in names.tolist() if g not in self.thresholds_]
        if unseen:
            warnings.warn(
                f"{what} {unseen[:show]} were not seen at calibration; they always route to the thinking model",
                GroupWarning,
                stacklevel=stacklevel,
            )
        per_name = np.array([self.thresholds_.get(g, -math.inf) for g in names.tolist()], dtype=float)
        return per_name[codes]

    def route(self, scores, groups=None) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <= threshold``).

        ``scores`` (and ``groups`` for G-PAC) are checked as in :meth:`fit`: a 1-D array or Series
        (an ``(n, 1)`` array or a one-column DataFrame is refused: pass ``df["col"]``), scores in
        ``[0, 1]`` without NaN, labels of one type; the result has one flag per item.
        """
        check_fitted(self, bool(self.thresholds_))
        s, _, labels = self._inputs(scores, None, groups)
        return s <= self._thresholds_for(s, labels)


class GPAC(PAC):
    """G-PAC: one threshold per known group (paper Algorithm 2).

    Parameters
    ----------
    eps, alpha, recipe, loss_bound, min_group_size, seed, risk
        As for :class:`PAC` (``risk``: what is certified per group).
    correction : str, default "none"
        ``"bonferroni"`` calibrates each of the ``k`` groups at ``alpha / k`` so that the guarantee
        holds for all groups at once; ``"none"`` for each group separately
        (:data:`~gpac_utils.settings.CORRECTIONS`).

    Attributes
    ----------
    thresholds_, group_sizes_ : dict
        As for :class:`PAC`: the threshold (``-inf``: always think) and calibration items per group.

    Examples
    --------
    Two groups with the same scores, one of them five times as lossy at every score:

    >>> from gpac_utils import GPAC
    >>> import numpy as np
    >>> groups, u = np.repeat(["easy", "hard"], 1000), np.tile(np.linspace(0, 1, 1000), 2)
    >>> lossy = np.random.default_rng(0).uniform(size=2000) < np.where(groups == "hard", 0.5, 0.1) * u
    >>> g = GPAC(eps=0.05).fit(u, lossy.astype(float), groups)
    >>> g.thresholds_["easy"] > g.thresholds_["hard"]
    True

    References
    ----------
    The G-PAC paper, Section 3.1 and Algorithm 2.
    """

    name = "G-PAC"
    SETTINGS = (*PAC.SETTINGS, CORRECTION)

    no_groups = None  # G-PAC needs them


def _not_a_partitioner(p):
    raise ParameterError(f"partitioner: must be a ScorePartitioner, got {type(p).__name__}")


#: C-PAC's own settings, declared here once (:attr:`CPAC.SETTINGS`).
PARTITIONER = Setting(
    "partitioner",
    ScorePartitioner(),
    lambda p: p if isinstance(p, ScorePartitioner) else _not_a_partitioner(p),
    "C-PAC: how groups are learned from the score",
    parts=(
        Setting("k", ScorePartitioner().k, Interval(int, 1), "C-PAC: number of learned groups"),
        Setting("partition", ScorePartitioner().algorithm, Options(PARTITION_ALGORITHMS), "C-PAC: partition algorithm"),
    ),
    join=lambda k, partition: ScorePartitioner(k, partition),
    split=lambda p: {"k": p.k, "partition": p.algorithm},
)
CPAC_MODE = Setting("mode", "split", Options(("split", "joint")), "C-PAC: split or joint calibration")
CLUSTER_FRACTION = Setting(
    "cluster_fraction", 0.5, Interval(float, 0, 1), "C-PAC, split mode: share of the items that learn the partition"
)


class CPAC(_Declared):
    """C-PAC: groups learned by partitioning the score, then G-PAC on the learned groups.

    Parameters
    ----------
    eps, alpha, recipe, loss_bound, min_group_size, seed, risk, correction
        As for :class:`GPAC` (``correction`` over the learned groups).
    partitioner : ScorePartitioner, default ``ScorePartitioner(k=3, algorithm="kmeans")``
        How groups are learned from the score.
    mode : {"split", "joint"}, default "split"
        ``"split"`` learns the partition on a random ``cluster_fraction`` of the calibration set and
        calibrates on the rest: exact per-group validity, Theorem 4.6, part 1; ``"joint"`` uses the
        same items for both: no guarantee a certificate can state; the paper claims
        ``eps + c * delta``, Theorem 4.6, part 2, with ``c`` a constant and ``delta`` unknown.
    cluster_fraction : float, default 0.5
        ``"split"`` mode: the share of the items that learn the partition, in ``(0, 1)``.

    Attributes
    ----------
    partition_ : Partition
        The learned partition of the score axis.
    gpac_ : GPAC
        The G-PAC calibrated on the learned groups.
    thresholds_ : dict of str to float
        Fitted threshold per learned group ``"c0"`` … (ordered by score).

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils import CPAC, ScorePartitioner
    >>> rng = np.random.default_rng(0)
    >>> u = rng.uniform(size=3000)
    >>> losses = (rng.uniform(size=3000) < u**3).astype(float)
    >>> c = CPAC(eps=0.1, partitioner=ScorePartitioner(k=3)).fit(u, losses)
    >>> sorted(c.thresholds_)
    ['c0', 'c1', 'c2']

    References
    ----------
    The G-PAC paper, Section 3.2 ("Clustering in U space") and Theorem 4.6.
    """

    name = "C-PAC"
    SETTINGS = (*GPAC.SETTINGS, PARTITIONER, CPAC_MODE, CLUSTER_FRACTION)

    def _setup(self, settings: Settings) -> None:
        self.config = settings
        self.gpac_ = GPAC.from_settings(settings)
        self.partition_: Partition | None = None

    # The calibration itself is the inner G-PAC's.
    thresholds_ = property(lambda self: self.gpac_.thresholds_)
    group_sizes_ = property(lambda self: self.gpac_.group_sizes_)
    groups_ = property(lambda self: self.gpac_.groups_)

    def _restore(self, payload) -> None:
        part = payload["partition"]
        self.partition_ = Partition(np.asarray(part["boundaries"], dtype=float), part["algorithm"])
        self.gpac_._restore(payload)

    def to_json(self) -> str:
        """The fitted partition, thresholds and every setting as JSON."""
        check_fitted(self, self.partition_ is not None)
        payload = json.loads(self.gpac_.to_json())
        partition = {"algorithm": self.partition_.algorithm, "boundaries": self.partition_.boundaries.tolist()}
        payload.update(method=self.name, settings=self.settings, partition=partition)
        return json.dumps(payload, indent=2, sort_keys=True)

    def assign(self, scores) -> np.ndarray:
        """Learned group label (``"c0"`` … ``"c{k-1}"``, ordered by score) of each score."""
        check_fitted(self, self.partition_ is not None)
        return self.partition_.labels(check_array("scores", scores, 0.0, 1.0, allow_bool=False))

    def fit(self, scores, losses, groups=None) -> CPAC:
        """Learn the partition from ``scores`` and calibrate a threshold per learned group.

        ``groups`` is not accepted: C-PAC learns its groups (use :class:`GPAC` for known ones).

        Returns
        -------
        self
        """
        if groups is not None:
            raise ParameterError("groups: C-PAC learns its groups from the score; use GPAC for known groups")
        scores, losses, _ = self.gpac_._xy(scores, losses, min_items=1)
        rng = np.random.default_rng(self.seed)
        split = self.mode == "split"
        if split:
            perm = rng.permutation(scores.size)
            n_cluster = int(round(self.cluster_fraction * scores.size))
            if not 0 < n_cluster < scores.size:
                raise ValueError(f"cannot split {scores.size} items with cluster_fraction={self.cluster_fraction}")
            clus, cal = perm[:n_cluster], perm[n_cluster:]
            self.partition_ = self.partitioner.fit(scores[clus])
            scores, losses = scores[cal], losses[cal]
        else:
            self.partition_ = self.partitioner.fit(scores)
        # Learned groups that got no calibration items always think (route() warns on them).
        self.gpac_.calibrate(scores, losses, self.assign(scores), rng, self.intervals() if split else None)
        return self

    def intervals(self) -> dict[str, tuple[float, float]]:
        """Each learned group's score interval ``[lo, hi]`` (its grids span it in ``split`` mode only:
        there it is fixed before the calibration half; :mod:`gpac_utils.selection`)."""
        check_fitted(self, self.partition_ is not None)
        ends = [0.0, *np.clip(self.partition_.boundaries, 0.0, 1.0).tolist(), 1.0]
        return {f"c{j}": (ends[j], ends[j + 1]) for j in range(self.partition_.k)}

    def thresholds_for(self, scores, groups=None) -> np.ndarray:
        """Each item's threshold, by its learned group."""
        if groups is not None:
            raise ParameterError("groups: C-PAC routes by its learned groups; do not pass groups")
        return self.gpac_._thresholds_for(scores, self.assign(scores))  # the scores are checked by assign

    def route(self, scores, groups=None) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <=`` its learned group's threshold)."""
        s = check_array("scores", scores, 0.0, 1.0, allow_bool=False)
        return s <= self.thresholds_for(s, groups)


# The built-in calibrators (the registry, :data:`~gpac_utils.settings.CALIBRATORS`, lives with the declarations
# its entries make): one default per kind of grouping.
CALIBRATORS.register(Method("PAC", PAC, "none", default=True))
CALIBRATORS.register(Method("G-PAC", GPAC, "known", default=True))
CALIBRATORS.register(Method("C-PAC", CPAC, "learned", {"partition": _schema.PARTITION}, default=True))


def default_method(groups: str) -> Method:
    """The default calibrator of a kind of grouping: the first :data:`CALIBRATORS` entry of that kind
    marked ``default`` (registering another one never changes it).

    Examples
    --------
    >>> default_method("known").name, default_method("none").name
    ('G-PAC', 'PAC')
    """
    check_choice("groups", groups, GROUPINGS)
    for entry in CALIBRATORS.values():
        if entry.groups == groups and entry.default:
            return entry
    raise ParameterError(f"groups: no default calibrator of {groups!r} groups is registered (Method(default=True))")


def method(name: str) -> Method:
    """The :data:`CALIBRATORS` entry of a method name; ``"gpac"``, ``"G-PAC"`` and ``"g_pac"`` all work.

    Parameters
    ----------
    name : str
        A method name; case, hyphens, underscores and surrounding spaces are ignored.

    Returns
    -------
    Method

    Raises
    ------
    ValueError
        For an unknown name (one line listing the known ones).

    Examples
    --------
    >>> method("gpac").groups
    'known'
    """
    for entry in CALIBRATORS.values():
        if entry.cli_name == Method.key(name):
            return entry
    raise ParameterError(f"method: unknown {name!r}; choose one of {list(CALIBRATORS)}")


def calibrator(method_name: str, settings: Settings | float, **changes):
    """An unfitted calibrator of a method, from :class:`~gpac_utils.settings.Settings` (the
    settings the method does not read are ignored).

    Parameters
    ----------
    method_name : str
        A method name (:func:`method`).
    settings : Settings or float
        The settings, or ``eps`` (then ``changes`` are the other settings).
    **changes
        Settings to change.

    Returns
    -------
    PAC, GPAC or CPAC

    Examples
    --------
    >>> calibrator("g-pac", 0.1, correction="bonferroni", mode="joint").settings["correction"]
    'bonferroni'
    """
    settings = settings.as_settings(**changes) if isinstance(settings, Settings) else Settings(eps=settings, **changes)
    return method(method_name).cls.from_settings(settings)
