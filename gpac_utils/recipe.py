r"""The calibration recipe: how one group's threshold is certified.

A :class:`Recipe` bundles the four choices of paper Algorithms 1–2 that together decide
whether the guarantee holds:

* ``bound``: the upper confidence bound on :math:`R(u)=E[\ell\,1\{U\le u\}]`
  (:mod:`gpac_utils.bounds`);
* ``sampling`` and ``label_prob`` (the paper's :math:`\pi`): which calibration items get an expert label
  (:mod:`gpac_utils.sampling`);
* ``rule``: how the threshold is read off the bound curve (:mod:`gpac_utils.selection`);
* ``candidates``: the thresholds the bound is evaluated at.

Two named recipes cover the two uses of this compendium:

``"valid"`` (:data:`VALID`, the library's default)
    Hoeffding–Bentkus on every labelled item, first-crossing selection: a finite-sample
    guarantee for i.i.d. calibration data.
``"paper"`` (:data:`PAPER`)
    the paper's literal setting: CLT bound, :math:`n/\pi` labels drawn with replacement,
    :math:`\max\{u:\mathrm{UCB}(u)\le\varepsilon\}`. It reproduces the paper's tables but
    undercovers (see notebook ``13_validity_audit``); ask for it by name.

``"valid-bernoulli"`` (:data:`VALID_BERNOULLI`) is the valid recipe when only a random share
``label_prob`` of the calibration items is labelled, as in the paper's tables.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import bounds as _bounds
from . import sampling as _sampling
from . import selection as _selection
from .checks import ParameterError, check_range

__all__ = ["Recipe", "VALID", "VALID_BERNOULLI", "PAPER", "RECIPES", "as_recipe", "check_recipe"]


@dataclass(frozen=True)
class Recipe:
    """How a group's threshold is certified: bound, label sampling, selection rule, candidates.

    Parameters
    ----------
    bound : str
        Upper confidence bound, a name in the registry :data:`gpac_utils.bounds.BOUNDS`.
    sampling : str
        Label sampling scheme: ``"full"`` (every item labelled), ``"bernoulli"`` (each item
        labelled once with probability ``label_prob``) or ``"resample"`` (the paper's draws with
        replacement).
    label_prob : float or None
        Labelling probability (the paper's pi), in ``(0, 1]``; needed by
        ``"bernoulli"`` and ``"resample"``. ``"full"`` labels every item: ``None`` or 1, stored
        as 1.0.
    rule : str
        Threshold selection rule: ``"first-crossing"`` (valid) or ``"max"`` (the paper's).
    candidates : str or int
        ``"auto"`` (every distinct score; 64 evenly spaced points of ``[0, 1]`` for ``wsr``),
        ``"all"``, or the size of a score-quantile grid.

    Attributes
    ----------
    is_valid : bool
        Whether the recipe carries a finite-sample guarantee (a valid bound, a non-resampling
        scheme, the first-crossing rule, and a quantile grid only with a ``monotone`` bound);
        ``gpac inspect`` says it.

    Examples
    --------
    >>> from gpac_utils import Recipe, PAPER
    >>> Recipe().bound, Recipe().sampling
    ('hoeffding_bentkus', 'full')
    >>> PAPER.replace(rule="first-crossing").rule
    'first-crossing'
    >>> as_recipe("paper") == PAPER
    True

    References
    ----------
    Bates, Angelopoulos, Lei, Malik, Jordan (2021). Distribution-free, risk-controlling
    prediction sets. JACM.
    """

    bound: str = "hoeffding_bentkus"
    sampling: str = "full"
    label_prob: float | None = None
    rule: str = "first-crossing"
    candidates: str | int = "auto"

    def __post_init__(self) -> None:
        _bounds.BOUNDS.check(self.bound, "bound")
        if self.sampling not in _sampling.SCHEMES:
            raise ParameterError(f"sampling: unknown {self.sampling!r}; choose one of {list(_sampling.SCHEMES)}")
        if self.rule not in _selection.RULES:
            raise ParameterError(f"rule: unknown {self.rule!r}; choose one of {list(_selection.RULES)}")
        full = self.sampling == "full"
        if full and self.label_prob not in (None, 1, 1.0):
            got = self.label_prob
            raise ParameterError(
                f"label_prob: sampling='full' labels every item, so label_prob must be None or 1; got {got}"
            )
        if not full and self.label_prob is None:
            raise ParameterError(f"label_prob: sampling={self.sampling!r} needs a labelling probability in (0, 1]")
        prob = 1.0 if full else check_range("label_prob", self.label_prob, closed_right=True)
        object.__setattr__(self, "label_prob", prob)
        c = self.candidates
        if c not in ("auto", "all") and (isinstance(c, bool | str) or not isinstance(c, int) or c < 1):
            raise ParameterError(f"candidates: must be 'auto', 'all' or a grid size >= 1, got {c!r}")

    @property
    def is_valid(self) -> bool:
        """True for a finite-sample valid recipe: a valid bound, no resampling, first-crossing, and a grid the
        validity argument covers (a quantile grid of the scores, an int ``candidates``, only with a bound
        ``monotone`` in every term: :mod:`gpac_utils.selection`)."""
        bound = _bounds.BOUNDS[self.bound]
        grid = bound.monotone or not isinstance(self.candidates, int)
        return bound.valid and self.sampling != "resample" and self.rule == "first-crossing" and grid

    def replace(self, **changes) -> Recipe:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The recipe's fields, plus ``bound_kind`` (``valid`` / ``paper``)."""
        return {**dataclasses.asdict(self), "bound_kind": _bounds.BOUNDS[self.bound].kind}


#: The library's default: finite-sample valid, every calibration item labelled.
VALID = Recipe()
#: Valid with a random share ``label_prob`` of the items labelled (the valid rows of the paper tables).
VALID_BERNOULLI = Recipe(sampling="bernoulli", label_prob=0.5)
#: The paper's literal setting (reproduction only: it undercovers).
PAPER = Recipe(bound="clt", sampling="resample", label_prob=0.5, rule="max")
RECIPES: dict[str, Recipe] = {"valid": VALID, "valid-bernoulli": VALID_BERNOULLI, "paper": PAPER}


def as_recipe(recipe: Recipe | str | None) -> Recipe:
    """A :class:`Recipe` from a recipe, a recipe name, or ``None`` (the valid default).

    Parameters
    ----------
    recipe : Recipe, str or None
        A recipe (returned as it is), a name in :data:`RECIPES`, or ``None`` for :data:`VALID`.

    Returns
    -------
    Recipe

    Raises
    ------
    ValueError
        For an unknown name, or an argument of another type.

    Examples
    --------
    >>> as_recipe(None) is VALID, as_recipe("paper") is PAPER
    (True, True)
    """
    if recipe is None:
        return VALID
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe in RECIPES:
        return RECIPES[recipe]
    raise ParameterError(f"recipe: expected a Recipe or one of {list(RECIPES)}, got {recipe!r}")


def check_recipe(recipe) -> Recipe:
    """:func:`as_recipe` for the validation layer: a refusal is a :class:`~gpac_utils.checks.ParameterError`.

    Parameters
    ----------
    recipe : Recipe, str or None
        As for :func:`as_recipe`.

    Returns
    -------
    Recipe

    Raises
    ------
    ParameterError
        For an unknown name or an argument of another type (the message of :func:`as_recipe`).
    """
    return as_recipe(recipe)  # its refusals are ParameterErrors
