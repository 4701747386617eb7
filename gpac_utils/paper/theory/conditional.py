r"""Populations with a known *routed* risk :math:`R_c(u) = E[\ell \mid U \le u]` (:mod:`gpac_utils.risks`).

For a group with ``U ~ Uniform(0, 1)`` the routed risk is the joint risk divided by the routed
share, :math:`R_c(u) = R(u) / F(u)` with :math:`F(u) = u`. :class:`StepGroup` has a loss
probability that is constant on bins of the score axis, so :math:`R_c` is in closed form and may
be non-monotone (a group whose most confident items are often wrong); a
:class:`~gpac_utils.paper.theory.populations.RiskGroup` gives a monotone one
(:math:`R_c(u) = a u^b / (b + 1)` on ``[0, 1]``). :func:`routed_risk` and
:func:`routed_oracle` work for both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepGroup:
    """``U ~ Uniform(0, 1)``; ``P(loss = 1 | U = u) = probs[b]`` for ``edges[b] <= u < edges[b + 1]``.

    Examples
    --------
    >>> g = StepGroup("dip", (0.0, 0.1, 0.6, 1.0), (0.3, 0.02, 0.4))
    >>> round(float(routed_risk(g, 0.6)), 4)  # (0.1 * 0.3 + 0.5 * 0.02) / 0.6
    0.0667
    """

    name: str
    edges: tuple
    probs: tuple

    def __post_init__(self):
        e = np.asarray(self.edges, dtype=float)
        if e[0] != 0 or e[-1] != 1 or np.any(np.diff(e) <= 0) or len(self.probs) != len(e) - 1:
            raise ValueError(f"group {self.name!r}: edges must rise from 0 to 1, one prob per bin")
        if not all(0 <= p <= 1 for p in self.probs):
            raise ValueError(f"group {self.name!r}: probabilities must lie in [0, 1]")

    def loss_prob(self, u):
        e = np.asarray(self.edges, dtype=float)
        b = np.clip(np.searchsorted(e, np.asarray(u, dtype=float), side="right") - 1, 0, len(self.probs) - 1)
        return np.asarray(self.probs, dtype=float)[b]

    def risk(self, u):
        r""":math:`R(u) = E[\ell\,\mathbf 1\{U \le u\}]` (``-inf`` gives 0)."""
        e = np.asarray(self.edges, dtype=float)
        c = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)[..., None]
        overlap = np.clip(np.minimum(c, e[1:]) - e[:-1], 0.0, None)
        return (overlap * np.asarray(self.probs, dtype=float)).sum(axis=-1)

    def share(self, u):
        """``F(u) = P(U <= u)``."""
        return np.clip(np.asarray(u, dtype=float), 0.0, 1.0)

    def sample(self, size, rng):
        """Losses and scores of shape ``size`` (last axis: items), seeded by ``rng``."""
        rng = np.random.default_rng(rng)
        u = rng.random(size)
        return (rng.random(size) < self.loss_prob(u)).astype(float), u


def routed_risk(group, u):
    r""":math:`R_c(u) = R(u) / F(u)`; 0 where nothing is routed (``F(u) = 0``, e.g. ``u = -inf``)."""
    share = np.asarray(group.share(u), dtype=float)
    return np.divide(group.risk(u), share, out=np.zeros_like(share), where=share > 0)


def routed_oracle(group, eps: float, resolution: int = 100_001) -> float:
    r"""The largest ``u`` with :math:`R_c(u) \le \varepsilon` (on a fine grid; ``-inf`` if none).

    :math:`R_c` need not be monotone, so the set of feasible thresholds need not be an interval
    from 0; the oracle routes the most, ``F(u)``, so it takes the largest feasible ``u``.
    """
    u = np.linspace(0.0, 1.0, resolution)[1:]
    ok = routed_risk(group, u) <= eps
    return float(u[ok].max()) if ok.any() else -np.inf
