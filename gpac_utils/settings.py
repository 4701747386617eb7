r"""The calibrator settings, declared once: :class:`Settings`.

PAC, G-PAC and C-PAC (:mod:`gpac_utils.calibrate`), :func:`~gpac_utils.calibrate.calibrator`, the
experiment runner (:class:`~gpac_utils.experiment.ExperimentConfig` extends :class:`Settings`), the
table builder and ``gpac calibrate`` all read their settings from one :class:`Settings`. The
settings a calibrator writes to JSON are :meth:`Settings.to_dict`; :meth:`Settings.from_dict`
reads them back.

How ``alpha`` is shared across the ``k`` groups is a named mode of the registry
:data:`CORRECTIONS` (``"none"``: each group at ``alpha``, the guarantee holds for each group
separately; ``"bonferroni"``: each at ``alpha / k``, for all groups at once); a third one is one
entry. It replaces the boolean ``simultaneous`` (``simultaneous=True`` is
``correction="bonferroni"``), which is refused with a one-line error naming the new setting.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .checks import ParameterError, check_choice, check_int, check_range, check_risk, warn_risk
from .partition import ScorePartitioner
from .recipe import VALID, Recipe, check_recipe
from .registry import Registry
from .risks import check_risk_recipe, get_risk

__all__ = ["Correction", "CORRECTIONS", "CPAC_MODES", "Settings", "RENAMED", "RENAMED_UNTIL"]


@dataclass(frozen=True)
class Correction:
    """How the miscoverage ``alpha`` is shared across the ``k`` calibrated groups.

    Parameters
    ----------
    name : str
        Its name (``Settings(correction=name)``, ``--correction name``).
    per_group : callable
        ``per_group(alpha, k)``: the level each group is calibrated at.
    guarantee : str
        What the guarantee then covers, in words.
    """

    name: str
    per_group: Callable[[float, int], float]
    guarantee: str


#: The ways of sharing ``alpha`` across groups.
CORRECTIONS: Registry[Correction] = Registry(
    "correction",
    [
        Correction("none", lambda alpha, k: alpha, "each group separately"),
        Correction("bonferroni", lambda alpha, k: alpha / k, "all groups at once (Bonferroni)"),
    ],
)

#: C-PAC's modes: learn the partition on a held-out share (``split``) or on the same items (``joint``).
CPAC_MODES = ("split", "joint")

#: The gpac_utils version whose release removes the renamed-argument messages (the old names then are
#: unknown keywords); every message of :data:`RENAMED` (and of the online side's) states it.
RENAMED_UNTIL = "0.4"

#: Settings that were renamed: old keyword to the one-line message that names the new one.
RENAMED = {
    "simultaneous": "simultaneous: replaced by correction='bonferroni' (simultaneous=True) or correction='none'"
    f" (this message goes in gpac_utils {RENAMED_UNTIL})",
}


def _refuse_renamed(cls):
    """Wrap the dataclass ``__init__`` of ``cls`` so that a renamed keyword is a one-line TypeError."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        for old, message in RENAMED.items():
            if old in kwargs:
                raise TypeError(message)
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


@_refuse_renamed
@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every setting of a calibrator (those a method does not use are ignored by it).

    Parameters
    ----------
    eps : float
        Target risk: the extra error of routing to the non-thinking model, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        The guarantee holds with probability at least ``1 - alpha``.
    recipe : Recipe or str, default ``"valid"``
        How a group's threshold is certified (:class:`~gpac_utils.recipe.Recipe`); ``"paper"``
        for the paper's literal setting.
    loss_bound : float, default 1.0
        Upper end of the loss range (2 for the semantic loss ``1 - cos``).
    min_group_size : int, default 10
        Groups with fewer calibration items always think.
    seed : int, default 0
        Seed of the label sampling (and of C-PAC's split).
    correction : str, default "none"
        How ``alpha`` is shared across groups, a name in :data:`CORRECTIONS`: ``"none"`` (each
        group at ``alpha``) or ``"bonferroni"`` (each of the ``k`` groups at ``alpha / k``).
    partitioner : ScorePartitioner, default ``ScorePartitioner()``
        C-PAC: how groups are learned from the score.
    mode : {"split", "joint"}, default "split"
        C-PAC: ``"split"`` learns the partition on a random ``cluster_fraction`` of the
        calibration set and calibrates on the rest (exact per-group validity, Theorem 4.6,
        part 1); ``"joint"`` uses the same items for both (Theorem 4.6, part 2).
    cluster_fraction : float, default 0.5
        C-PAC: share of the calibration set used to learn the partition in ``"split"`` mode.
    risk : str, default "joint"
        What is certified per group, a name in :data:`gpac_utils.risks.RISKS`: ``"joint"`` (the
        paper's ``E[loss 1{U <= u}]``) or ``"routed"`` (``E[loss | U <= u]``, among routed items).

    Examples
    --------
    >>> s = Settings(eps=0.1, correction="bonferroni")
    >>> s.recipe.bound, s.alpha_per_group(4)
    ('hoeffding_bentkus', 0.0125)
    >>> Settings(eps=0.1, simultaneous=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: simultaneous: replaced by correction='bonferroni' (simultaneous=True) or ... (this message goes in ...)
    """

    eps: float
    alpha: float = 0.05
    recipe: Recipe | str = VALID
    loss_bound: float = 1.0
    min_group_size: int = 10
    seed: int = 0
    correction: str = "none"
    partitioner: ScorePartitioner = field(default_factory=ScorePartitioner)
    mode: str = "split"
    cluster_fraction: float = 0.5
    risk: str = "joint"

    def __post_init__(self) -> None:
        eps, alpha, loss_bound = check_risk(self.eps, self.alpha, self.loss_bound)
        warn_risk(eps, alpha, loss_bound)
        object.__setattr__(self, "eps", eps)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "loss_bound", loss_bound)
        object.__setattr__(self, "recipe", check_recipe(self.recipe))
        object.__setattr__(self, "min_group_size", check_int("min_group_size", self.min_group_size, 1))
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0))
        CORRECTIONS.check(self.correction, "correction")
        if not isinstance(self.partitioner, ScorePartitioner):
            raise ParameterError(f"partitioner: must be a ScorePartitioner, got {type(self.partitioner).__name__}")
        check_choice("mode", self.mode, CPAC_MODES)
        object.__setattr__(self, "cluster_fraction", check_range("cluster_fraction", self.cluster_fraction))
        check_risk_recipe(get_risk(self.risk).name, self.recipe)

    def alpha_per_group(self, k: int) -> float:
        """The level each of ``k`` groups is calibrated at (the :data:`CORRECTIONS` entry's)."""
        return CORRECTIONS[self.correction].per_group(self.alpha, k)

    def ignored(self, reads) -> list[str]:
        """The calibrator fields away from their defaults that a consumer reading only ``reads`` would ignore
        (it refuses them, naming the first)."""
        out = []
        for f in dataclasses.fields(Settings):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if f.name not in reads and default is not dataclasses.MISSING and getattr(self, f.name) != default:
                out.append(f.name)
        return out

    def replace(self, **changes) -> Settings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_settings(self, **changes) -> Settings:
        """The calibrator :class:`Settings` alone (of a subclass such as ``ExperimentConfig`` too); the same
        object when it is one and nothing changes (settings are checked once, when built)."""
        if type(self) is Settings and not changes:
            return self
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(Settings)}
        return Settings(**(values | changes))

    def to_dict(self, keys) -> dict[str, Any]:
        """The JSON form of the settings ``keys`` (the recipe flattened into its fields, C-PAC's
        partitioner into ``k`` and ``partition``)."""
        out = {}
        for key in keys:
            if key == "recipe":
                out.update(self.recipe.to_dict())
            elif key == "partitioner":
                out.update(k=self.partitioner.k, partition=self.partitioner.algorithm)
            else:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls, st) -> Settings:
        """The settings of :meth:`to_dict`'s JSON form (``pi`` and ``simultaneous`` of older files read too)."""
        st = dict(st)
        recipe = Recipe(st["bound"], st["sampling"], st.get("label_prob", st.get("pi")), st["rule"], st["candidates"])
        correction = st.get("correction", "bonferroni" if st.get("simultaneous") else "none")
        partitioner = ScorePartitioner(st["k"], st["partition"]) if "k" in st else ScorePartitioner()
        optional = {k: st[k] for k in ("mode", "cluster_fraction", "risk") if k in st}
        return cls(
            eps=st["eps"],
            alpha=st["alpha"],
            recipe=recipe,
            loss_bound=st["loss_bound"],
            min_group_size=st["min_group_size"],
            seed=st["seed"],
            correction=correction,
            partitioner=partitioner,
            **optional,
        )
