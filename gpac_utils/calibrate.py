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
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from . import bounds as _bounds
from . import feasibility as _feasibility
from . import sampling as _sampling
from . import selection as _selection
from .checks import check_array, check_int, check_labels, check_range, check_risk
from .partition import Partition, ScorePartitioner
from .recipe import VALID, Recipe, as_recipe

__all__ = [
    "ALL",
    "GroupWarning",
    "GroupRecord",
    "STATUSES",
    "Calibrator",
    "threshold",
    "risk_curve",
    "factorize_groups",
    "group_labels",
    "PAC",
    "GPAC",
    "CPAC",
    "METHODS",
    "method_class",
    "calibrator",
    "from_json",
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
STATUSES = (CERTIFIED, TOO_FEW, NO_FEASIBLE, UNSEEN)


class GroupRecord(NamedTuple):
    """What calibration found for one group: items ``n``, expert labels used (``labelled``), ``status``
    (one of :data:`STATUSES`) and the upper confidence bound at its threshold (``ucb``; None: always think)."""

    n: int
    labelled: int
    status: str
    ucb: float | None


def _group_record(n, d, cand, ucb, t, n_min) -> GroupRecord:
    """The record of a calibrated group from its draw ``d``, its bound curve and its threshold ``t``."""
    labelled = int(np.asarray(d.n_queried))
    if math.isfinite(t):
        at = np.searchsorted(cand, t, side="right") - 1  # the chosen candidate (ties share their bound)
        return GroupRecord(int(n), labelled, CERTIFIED, float(ucb[at]))
    return GroupRecord(int(n), labelled, TOO_FEW if n < n_min else NO_FEASIBLE, None)


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


def threshold(
    scores,
    losses,
    *,
    eps: float,
    alpha: float,
    recipe: Recipe | str = VALID,
    loss_bound: float = 1.0,
    rng=None,
    label_prob=None,
) -> np.ndarray:
    """Calibrate one group, or many independent calibrations at once (batch dims lead).

    Parameters
    ----------
    scores, losses : array_like, shape (..., n)
        Per-item scores in ``[0, 1]`` and losses in ``[0, loss_bound]``.
    eps : float
        Target risk.
    alpha : float
        Miscoverage level of the upper confidence bound.
    recipe : Recipe or str, default :data:`~gpac_utils.recipe.VALID`
        Bound, sampling, labelling probability, rule and candidates (or a recipe name).
    loss_bound : float, default 1.0
        Upper end of the loss range (the paper's ``B``).
    rng : numpy.random.Generator or int, optional
        Randomness of the label sampling.
    label_prob : array_like, optional
        Labelling probabilities broadcastable to ``losses`` (overrides ``recipe.label_prob``;
        e.g. a different probability per calibration in a batch).

    Returns
    -------
    numpy.ndarray, shape (...)
        Thresholds; ``-inf`` where no candidate is certified (always think).

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils.calibrate import threshold
    >>> u = np.linspace(0, 1, 500)
    >>> losses = (u > 0.8).astype(float)  # only the most uncertain fifth is lossy
    >>> float(threshold(u, losses, eps=0.05, alpha=0.05)) > 0.8
    True
    """
    recipe = as_recipe(recipe)
    _, cand, ucb = _bound_curve(scores, losses, alpha, recipe, loss_bound, rng, label_prob)
    return _selection.select(cand, ucb, eps, recipe.rule)


def _bound_curve(scores, losses, alpha, recipe, loss_bound, rng, label_prob=None):
    """The label terms as the recipe draws them, the candidate thresholds and the bound at each of them."""
    probs = recipe.label_prob if label_prob is None else label_prob
    # Only the sequential wsr bound depends on the order of the terms.
    d = _sampling.draw(scores, losses, recipe.sampling, probs, rng, loss_bound, shuffle=recipe.bound == "wsr")
    cand = _selection.candidate_grid(scores, recipe.candidates, recipe.bound)
    return d, cand, _bounds.ucb(recipe.bound, d.z, d.scores, cand, alpha, d.term_range)


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
    recipe = as_recipe(recipe)
    scores, losses = _as_arrays(scores, losses, loss_bound)
    d, cand, ucb = _bound_curve(scores, losses, alpha, recipe, loss_bound, rng)
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
    codes, names = pd.factorize(np.asarray(labels), sort=True)
    return codes, np.asarray(names).astype(str)


def _as_arrays(scores, losses, loss_bound):
    scores, losses = check_array("scores", scores, 0.0, 1.0), check_array("losses", losses, 0.0, loss_bound)
    if losses.shape != scores.shape:
        raise ValueError(f"losses: scores and losses must be of equal length, got {scores.shape} and {losses.shape}")
    if scores.size == 0:
        raise ValueError("scores: empty calibration set")
    return scores, losses


def group_labels(groups, n: int) -> np.ndarray:
    """The checked group labels of ``n`` items (one-line ``ValueError`` naming ``groups`` otherwise).

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
        raise ValueError("groups: G-PAC needs one group label per item (groups=...)")
    return check_labels("groups", groups, n)


class PAC:
    """Marginal PAC reasoning: one threshold for all inputs.

    Parameters
    ----------
    eps : float
        Target risk: the extra error of routing to the non-thinking model, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        The guarantee holds with probability at least ``1 - alpha``.
    recipe : Recipe or str, default ``"valid"``
        How the threshold is certified (:class:`~gpac_utils.recipe.Recipe`); ``"paper"`` for
        the paper's literal setting.
    loss_bound : float, default 1.0
        Upper end of the loss range (2 for the semantic loss ``1 - cos``).
    min_group_size : int, default 10
        Groups with fewer calibration items always think.
    seed : int, default 0
        Seed of the label sampling (and of C-PAC's split).

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
    >>> pac.route([0.01, 0.99]).tolist()
    [True, False]

    References
    ----------
    Zeng et al. (2025). PAC reasoning: controlling the performance loss of efficient
    reasoning.
    """

    name = "PAC"

    def __init__(
        self,
        eps: float,
        alpha: float = 0.05,
        recipe: Recipe | str = VALID,
        *,
        loss_bound: float = 1.0,
        min_group_size: int = 10,
        seed: int = 0,
    ):
        self.eps, self.alpha, self.loss_bound = check_risk(eps, alpha, loss_bound)
        self.recipe = as_recipe(recipe)
        self.min_group_size = check_int("min_group_size", min_group_size, 1)
        self.seed = check_int("seed", seed, 0)
        self.thresholds_: dict[str, float] = {}
        self.group_sizes_: dict[str, int] = {}
        self.groups_: dict[str, GroupRecord] = {}

    # -- settings and persistence -------------------------------------------------------------
    @property
    def settings(self) -> dict[str, Any]:
        """Every setting, flat (the recipe's fields included), as written to JSON."""
        return {
            "eps": self.eps,
            "alpha": self.alpha,
            **self.recipe.to_dict(),
            "loss_bound": self.loss_bound,
            "min_group_size": self.min_group_size,
            "seed": self.seed,
        }

    def to_json(self) -> str:
        """The fitted thresholds and every setting as JSON (``-inf`` written as ``null``)."""
        if not self.thresholds_:
            raise RuntimeError("calibrator is not fitted")
        payload = {
            "method": self.name,
            "settings": self.settings,
            "thresholds": {g: (None if not math.isfinite(t) else float(t)) for g, t in self.thresholds_.items()},
            "group_sizes": self.group_sizes_,
        }
        return json.dumps(payload, indent=2, sort_keys=True)

    # -- calibration ---------------------------------------------------------------------------
    simultaneous = False  # G-PAC's Bonferroni option; PAC has one group

    def calibrate(self, scores, losses, labels, rng) -> PAC:
        """One threshold per distinct label, drawing the label terms from ``rng`` (the step under :meth:`fit`).

        :class:`CPAC` calls it with its learned groups and the generator that drew its split.

        Parameters
        ----------
        scores, losses : numpy.ndarray, shape (n,)
            Checked calibration scores in ``[0, 1]`` and losses in ``[0, loss_bound]``.
        labels : array_like, shape (n,)
            The group label of each item (all :data:`ALL` for marginal PAC).
        rng : numpy.random.Generator
            The generator of the label sampling.

        Returns
        -------
        self
        """
        self.thresholds_, self.group_sizes_, self.groups_ = {}, {}, {}
        codes, names = factorize_groups(labels)
        alpha = self.alpha / len(names) if self.simultaneous else self.alpha
        order = np.argsort(codes, kind="stable") if len(names) > 1 else np.arange(len(codes))
        members = np.split(order, np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
        n_min = _feasibility.min_items(self.eps, alpha, self.recipe, loss_bound=self.loss_bound)
        for g, idx in zip(names.tolist(), members):
            self.group_sizes_[g] = int(idx.size)
            if idx.size < self.min_group_size:
                warnings.warn(
                    f"group {g!r} has {idx.size} calibration items (< min_group_size="
                    f"{self.min_group_size}); it always routes to the thinking model",
                    GroupWarning,
                    stacklevel=4,
                )
                self.thresholds_[g] = -math.inf
                self.groups_[g] = GroupRecord(int(idx.size), 0, TOO_FEW, None)
                continue
            if idx.size < n_min:  # still calibrated: the label draws of the other groups stay as they were
                warnings.warn(
                    f"group {g!r} has {idx.size} calibration items; {self.recipe.bound} certifies nothing with fewer "
                    f"than {n_min} at eps={self.eps}, alpha={alpha:.3g}: it always routes to the thinking model",
                    GroupWarning,
                    stacklevel=4,
                )
            d, cand, ucb = _bound_curve(scores[idx], losses[idx], alpha, self.recipe, self.loss_bound, rng)
            t = float(_selection.select(cand, ucb, self.eps, self.recipe.rule))
            self.thresholds_[g] = t
            self.groups_[g] = _group_record(idx.size, d, cand, ucb, t, n_min)
        return self

    def _labels(self, scores, groups) -> np.ndarray:
        return np.full(len(scores), ALL)

    def fit(self, scores, losses, groups=None) -> PAC:
        """Calibrate on per-item ``scores`` (in [0, 1]) and ``losses``, one threshold per group.

        ``groups`` (one label per item) is needed by G-PAC and ignored by PAC.

        Returns
        -------
        self
        """
        scores, losses = _as_arrays(scores, losses, self.loss_bound)
        return self.calibrate(scores, losses, self._labels(scores, groups), np.random.default_rng(self.seed))

    # -- deployment ----------------------------------------------------------------------------
    def thresholds_for(self, scores, groups=None) -> np.ndarray:
        """Each item's threshold (``-inf`` for unseen groups, with a warning)."""
        if not self.thresholds_:
            raise RuntimeError("calibrator is not fitted")
        labels = self._labels(np.asarray(scores, dtype=float), groups)
        codes, names = factorize_groups(labels)
        unseen = [g for g in names.tolist() if g not in self.thresholds_]
        if unseen:
            warnings.warn(
                f"group(s) {unseen} were not seen at calibration; they always route to the thinking model",
                GroupWarning,
                stacklevel=3,
            )
        per_name = np.array([self.thresholds_.get(g, -math.inf) for g in names.tolist()], dtype=float)
        return per_name[codes]

    def route(self, scores, groups=None) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <= threshold``)."""
        s = np.asarray(scores, dtype=float)
        return s <= self.thresholds_for(s, groups)


class GPAC(PAC):
    """G-PAC: one threshold per known group (paper Algorithm 2).

    Parameters
    ----------
    eps, alpha, recipe, loss_bound, min_group_size, seed
        As for :class:`PAC`.
    simultaneous : bool, default False
        Bonferroni: calibrate each of the ``k`` groups at ``alpha / k`` so that the guarantee
        holds for all groups at once (otherwise it holds for each group separately).

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

    def __init__(
        self,
        eps: float,
        alpha: float = 0.05,
        recipe: Recipe | str = VALID,
        *,
        simultaneous: bool = False,
        loss_bound: float = 1.0,
        min_group_size: int = 10,
        seed: int = 0,
    ):
        super().__init__(eps, alpha, recipe, loss_bound=loss_bound, min_group_size=min_group_size, seed=seed)
        self.simultaneous = bool(simultaneous)

    @property
    def settings(self):
        return {**super().settings, "simultaneous": self.simultaneous}

    def _labels(self, scores, groups):
        return group_labels(groups, len(scores))


class CPAC:
    """C-PAC: groups learned by partitioning the score, then G-PAC on the learned groups.

    Parameters
    ----------
    eps, alpha, recipe, loss_bound, min_group_size, seed
        As for :class:`PAC`.
    partitioner : ScorePartitioner, optional
        How groups are learned from the score; default ``ScorePartitioner(k=3, algorithm="kmeans")``.
    mode : {"split", "joint"}, default "split"
        ``"split"`` learns the partition on a random ``cluster_fraction`` of the calibration set
        and calibrates on the rest (exact per-group validity, Theorem 4.6, part 1); ``"joint"`` uses the
        same items for both (Theorem 4.6, part 2: an extra ``c * delta`` term).
    cluster_fraction : float, default 0.5
        Share of the calibration set used to learn the partition in ``"split"`` mode.
    simultaneous : bool, default False
        Bonferroni over the learned groups (see :class:`GPAC`).

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

    def __init__(
        self,
        eps: float,
        alpha: float = 0.05,
        recipe: Recipe | str = VALID,
        *,
        partitioner: ScorePartitioner | None = None,
        mode: str = "split",
        cluster_fraction: float = 0.5,
        simultaneous: bool = False,
        loss_bound: float = 1.0,
        min_group_size: int = 10,
        seed: int = 0,
    ):
        if mode not in ("split", "joint"):
            raise ValueError(f"mode: must be 'split' or 'joint', got {mode!r}")
        self.partitioner = partitioner if partitioner is not None else ScorePartitioner()
        self.mode, self.cluster_fraction = mode, check_range("cluster_fraction", cluster_fraction)
        self.gpac_ = GPAC(
            eps,
            alpha,
            recipe,
            simultaneous=simultaneous,
            loss_bound=loss_bound,
            min_group_size=min_group_size,
            seed=seed,
        )
        self.partition_: Partition | None = None

    # The calibration settings live on the inner G-PAC; C-PAC reads them from there.
    eps = property(lambda self: self.gpac_.eps)
    alpha = property(lambda self: self.gpac_.alpha)
    recipe = property(lambda self: self.gpac_.recipe)
    seed = property(lambda self: self.gpac_.seed)
    thresholds_ = property(lambda self: self.gpac_.thresholds_)
    group_sizes_ = property(lambda self: self.gpac_.group_sizes_)
    groups_ = property(lambda self: self.gpac_.groups_)

    @property
    def settings(self) -> dict[str, Any]:
        return {
            **self.gpac_.settings,
            "k": self.partitioner.k,
            "partition": self.partitioner.algorithm,
            "mode": self.mode,
            "cluster_fraction": self.cluster_fraction,
        }

    def to_json(self) -> str:
        """The fitted partition, thresholds and every setting as JSON."""
        if self.partition_ is None:
            raise RuntimeError("calibrator is not fitted")
        payload = json.loads(self.gpac_.to_json())
        payload.update(
            method=self.name,
            settings=self.settings,
            partition={"algorithm": self.partition_.algorithm, "boundaries": self.partition_.boundaries.tolist()},
        )
        return json.dumps(payload, indent=2, sort_keys=True)

    def assign(self, scores) -> np.ndarray:
        """Learned group label (``"c0"`` … ``"c{k-1}"``, ordered by score) of each score."""
        if self.partition_ is None:
            raise RuntimeError("calibrator is not fitted")
        return self.partition_.labels(np.asarray(scores, dtype=float))

    def fit(self, scores, losses, groups=None) -> CPAC:
        """Learn the partition from ``scores`` and calibrate a threshold per learned group.

        ``groups`` is not accepted: C-PAC learns its groups (use :class:`GPAC` for known ones).

        Returns
        -------
        self
        """
        if groups is not None:
            raise ValueError("groups: C-PAC learns its groups from the score; use GPAC for known groups")
        scores, losses = _as_arrays(scores, losses, self.gpac_.loss_bound)
        rng = np.random.default_rng(self.seed)
        if self.mode == "split":
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
        self.gpac_.calibrate(scores, losses, self.assign(scores), rng)
        return self

    def thresholds_for(self, scores, groups=None) -> np.ndarray:
        """Each item's threshold, by its learned group."""
        if groups is not None:
            raise ValueError("groups: C-PAC routes by its learned groups; do not pass groups")
        s = np.asarray(scores, dtype=float)
        return self.gpac_.thresholds_for(s, self.assign(s))

    route = PAC.route  # the same rule: U <= the item's threshold


#: The calibrators by their one name (as in tables and JSON).
METHODS: dict[str, type] = {"PAC": PAC, "G-PAC": GPAC, "C-PAC": CPAC}


def method_class(name: str) -> type:
    """The calibrator class for a method name; ``"gpac"``, ``"G-PAC"`` and ``"g-pac"`` all work.

    Parameters
    ----------
    name : str
        A method name of :data:`METHODS`; case, hyphens, underscores and surrounding spaces are
        ignored.

    Returns
    -------
    type
        :class:`PAC`, :class:`GPAC` or :class:`CPAC`.

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> method_class("g_pac").__name__, method_class("C-PAC").__name__
    ('GPAC', 'CPAC')
    """
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    for canonical, cls in METHODS.items():
        if canonical.lower().replace("-", "") == key:
            return cls
    raise ValueError(f"method: unknown {name!r}; choose one of {list(METHODS)}")


def calibrator(
    method: str,
    eps: float,
    alpha: float = 0.05,
    recipe: Recipe | str = VALID,
    *,
    simultaneous: bool = False,
    partitioner: ScorePartitioner | None = None,
    mode: str = "split",
    cluster_fraction: float = 0.5,
    loss_bound: float = 1.0,
    min_group_size: int = 10,
    seed: int = 0,
) -> PAC | GPAC | CPAC:
    """An unfitted calibrator of a method, given every setting (those the method lacks are ignored).

    Parameters
    ----------
    method : str
        A method name (:func:`method_class`).
    eps, alpha, recipe, loss_bound, min_group_size, seed
        As for :class:`PAC`.
    simultaneous : bool, default False
        G-PAC and C-PAC (:class:`GPAC`).
    partitioner, mode, cluster_fraction
        C-PAC only (:class:`CPAC`).

    Returns
    -------
    PAC, GPAC or CPAC

    Examples
    --------
    >>> calibrator("g-pac", 0.1, simultaneous=True, mode="joint").settings["simultaneous"]
    True
    """
    cls = method_class(method)
    common = dict(loss_bound=loss_bound, min_group_size=min_group_size, seed=seed)
    if cls is CPAC:
        return CPAC(
            eps,
            alpha,
            recipe,
            partitioner=partitioner,
            mode=mode,
            cluster_fraction=cluster_fraction,
            simultaneous=simultaneous,
            **common,
        )
    if cls is GPAC:
        return GPAC(eps, alpha, recipe, simultaneous=simultaneous, **common)
    return PAC(eps, alpha, recipe, **common)


def from_json(text: str) -> PAC | GPAC | CPAC:
    """Rebuild a fitted calibrator from its ``to_json()`` output.

    Parameters
    ----------
    text : str
        JSON as written by :meth:`PAC.to_json` (or that of :class:`GPAC` / :class:`CPAC`).

    Returns
    -------
    PAC, GPAC or CPAC
        A fitted calibrator with the settings, thresholds, group sizes (and, for C-PAC, the
        partition) of ``text``; ``null`` thresholds become ``-inf`` (always think).

    Raises
    ------
    ValueError
        For text that is not JSON, an unknown ``method``, or settings a calibrator refuses.
    KeyError
        For a missing field (``settings``, ``thresholds`` or one of the settings).
    """
    payload = json.loads(text)
    method = payload.get("method")
    if method not in METHODS:
        raise ValueError(f"unknown calibrator method {method!r} in JSON")
    st = dict(payload["settings"])
    recipe = Recipe(st["bound"], st["sampling"], st.get("label_prob", st.get("pi")), st["rule"], st["candidates"])
    cpac = method == "C-PAC"
    obj = calibrator(
        method,
        st["eps"],
        st["alpha"],
        recipe,
        simultaneous=st.get("simultaneous", False),
        partitioner=ScorePartitioner(st["k"], st["partition"]) if cpac else None,
        mode=st["mode"] if cpac else "split",
        cluster_fraction=st["cluster_fraction"] if cpac else 0.5,
        loss_bound=st["loss_bound"],
        min_group_size=st["min_group_size"],
        seed=st["seed"],
    )
    inner = obj.gpac_ if cpac else obj
    if cpac:
        part = payload["partition"]
        obj.partition_ = Partition(np.asarray(part["boundaries"], dtype=float), part["algorithm"])
    inner.thresholds_ = {g: (-math.inf if t is None else float(t)) for g, t in payload["thresholds"].items()}
    inner.group_sizes_ = {g: int(v) for g, v in payload.get("group_sizes", {}).items()}
    return obj
