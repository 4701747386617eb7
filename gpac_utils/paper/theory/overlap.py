r"""Populations of several overlapping groupings whose per-group risk is known exactly (issue 54's audit).

Items carry one label per grouping, drawn independently (grouping ``g`` has level probabilities
``probs[g]``); the cell of an item is its tuple of labels. In cell ``c`` the score is
``U ~ Uniform(0, 1)`` and the binary loss has ``P(loss = 1 | U = u, c) = a_c u^k``. With one threshold
``t_c`` per cell, the joint risk of a group ``G`` (one label of one grouping) is exact:

.. math:: R(t \mid G) = \sum_{c \subseteq G} P(c \mid G)\, a_c\, t_c^{k+1} / (k+1),

and so is its routed share :math:`\sum_{c \subseteq G} P(c \mid G)\, t_c`: the violation event
:math:`R(t \mid G) > \varepsilon` of a calibration is computed without a test set
(:mod:`gpac_utils.multigroup`, ``benchmarks/multigroup_audit.py``, notebook 36).

:data:`POPULATIONS` holds the named populations of the audit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...multigroup import SEP

__all__ = ["OverlapPopulation", "POPULATIONS", "cell_risk"]


def cell_risk(a, k, t) -> np.ndarray:
    """The exact joint risk of a cell with ``U ~ Uniform(0, 1)`` and ``P(loss = 1 | U = u) = a u^k`` at
    threshold ``t``: :math:`a\\,t^{k+1}/(k+1)` (0 for ``t = -inf``), the audit populations' risk.

    Examples
    --------
    >>> float(cell_risk(0.5, 1, 1.0)), float(cell_risk(0.5, 1, -np.inf))
    (0.25, 0.0)
    """
    t = np.asarray(t, dtype=float)
    t = np.where(np.isneginf(t), 0.0, np.clip(t, 0.0, 1.0))
    return a * t ** (k + 1) / (k + 1)


# A collection of groups (several groupings); Shift-G-PAC the default of its kind (gpac calibrate with several
# --group-col and no --method). Their files hold their groupings (a declared field of theirs).


@dataclass(frozen=True)
class OverlapPopulation:
    """Independent groupings, a loss curve ``a_c u^k`` per cell.

    Parameters
    ----------
    name : str
        Its name in tables.
    probs : dict of str to tuple of float
        Per grouping, its levels' probabilities (levels named ``<grouping><index>``, e.g. ``s0``).
    a : numpy.ndarray
        The loss scale of every cell, one axis per grouping (in ``[0, 1]``).
    k : float
        The loss curve's exponent (``k > 0``: the score is informative).

    Examples
    --------
    >>> pop = POPULATIONS["two-by-two"]
    >>> sorted(pop.groups)
    ['lang=l0', 'lang=l1', 'subject=s0', 'subject=s1']
    >>> round(pop.risk({c: 1.0 for c in pop.cells})["subject=s1"], 4)  # all routed: (0.6 * 0.5 + 0.4 * 0.7) / 2
    0.29
    """

    name: str
    probs: dict
    a: np.ndarray
    k: float

    @property
    def groupings(self) -> list[str]:
        return list(self.probs)

    def _levels(self, g: str) -> list[str]:
        return [f"{g[0]}{i}" for i in range(len(self.probs[g]))]

    @property
    def cells(self) -> list[str]:
        """Every cell's label, as :func:`gpac_utils.multigroup.collection` names it."""
        return [
            SEP.join(f"{g}={lv}" for g, lv in zip(self.groupings, combo))
            for combo in itertools.product(*(self._levels(g) for g in self.groupings))
        ]

    @property
    def groups(self) -> list[str]:
        return [f"{g}={lv}" for g in self.groupings for lv in self._levels(g)]

    def _cell_mass(self) -> np.ndarray:
        mass = np.ones(())
        for g in self.groupings:
            mass = np.multiply.outer(mass, np.asarray(self.probs[g], float))
        return mass

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray, dict]:
        """``n`` items: scores, binary losses and the label columns (a dict, one entry per grouping)."""
        labels, index = {}, []
        for g in self.groupings:
            i = rng.choice(len(self.probs[g]), size=n, p=np.asarray(self.probs[g], float))
            index.append(i)
            labels[g] = np.asarray(self._levels(g))[i]
        u = rng.uniform(size=n)
        return u, (rng.uniform(size=n) < self.a[tuple(index)] * u**self.k).astype(float), labels

    def _per_cell(self, thresholds: dict) -> np.ndarray:
        return np.array([thresholds.get(c, -np.inf) for c in self.cells], dtype=float).reshape(self.a.shape)

    def _by_group(self, per_cell: np.ndarray) -> dict:
        mass = self._cell_mass()
        out = {}
        for axis, g in enumerate(self.groupings):
            other = tuple(i for i in range(mass.ndim) if i != axis)
            share = (mass * per_cell).sum(axis=other) / mass.sum(axis=other)
            out.update({f"{g}={lv}": float(v) for lv, v in zip(self._levels(g), share)})
        return out

    def risk(self, thresholds: dict) -> dict:
        """Each group's exact joint risk under per-cell ``thresholds`` (a cell not named always thinks)."""
        return self._by_group(cell_risk(self.a, self.k, self._per_cell(thresholds)))

    def share(self, thresholds: dict) -> dict:
        """Each group's routed share :math:`P(U \\le t_c \\mid G)`, and ``"all"``: the whole population's."""
        t = self._per_cell(thresholds)
        per = np.where(np.isneginf(t), 0.0, np.clip(t, 0.0, 1.0))
        out = self._by_group(per)
        out["all"] = float((self._cell_mass() * per).sum())
        return out


#: The audit's populations: a small one, and one with more groups and loss that varies across its cells.
POPULATIONS = {
    "two-by-two": OverlapPopulation(
        "two-by-two", {"subject": (0.7, 0.3), "lang": (0.6, 0.4)}, np.array([[0.2, 0.4], [0.5, 0.7]]), 1.0
    ),
    "four-by-three": OverlapPopulation(
        "four-by-three",
        {"subject": (0.4, 0.3, 0.2, 0.1), "lang": (0.5, 0.3, 0.2)},
        np.outer([0.2, 0.4, 0.8, 0.3], [1.0, 1.2, 0.4]),
        1.0,
    ),
}
