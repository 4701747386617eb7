r"""Populations with known risk functions (paper Section 4, Appendices B–E).

A :class:`Population` is a mixture of groups. Group ``j`` (a :class:`RiskGroup`) has mass ``w_j``,
its score is ``U ~ Uniform(lo_j, hi_j)`` and its binary loss has
``P(loss = 1 | U = u, j) = a_j u^{b_j}`` (increasing for ``b_j > 0``: the score is informative
within the group). Everything the theory needs is then in closed form:

* :math:`R(u \mid G_j) = E[\ell\,\mathbf 1\{U \le u\} \mid G_j]
  = a_j\,(c^{b_j+1} - lo_j^{b_j+1}) / ((b_j+1)(hi_j-lo_j))`, ``c = clip(u, lo_j, hi_j)``;
* the share routed to the non-thinking model, :math:`F_j(u) = P(U \le u \mid G_j)`;
* the same quantities for any interval of the ``U`` axis (learned partitions of Section 3.2).

For a *fixed* threshold ``u`` the risk :math:`R(u \mid G_j)` is a number, so the event
:math:`R(u \mid G_j) \le \varepsilon` has probability 0 or 1 and ``alpha`` drops out: the
PAC-optimal threshold (Eq. pac-optimal-threshold) is
:math:`u^*_j = \sup\{u : R(u \mid G_j) \le \varepsilon\}` (:func:`oracle_threshold`; ``+inf``
when the group's risk never exceeds ``eps``); for a group with ``lo = 0`` it is the root
:math:`(\varepsilon (b_j+1)\,hi_j / a_j)^{1/(b_j+1)}` (notebook 10's exercise).
:func:`oracle_summary` compares, at the population level, marginal PAC, the best single
threshold valid in every group and G-PAC (Proposition 4.5).

The named populations shared by notebooks and benchmarks: :data:`PARTITION_POPULATION` (11, with the
partition that generated it, :data:`PARTITION_GENERATING`) and :data:`AUDIT_POPULATION` (12, 13);
notebook 10 defines its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RiskGroup:
    """One group of a :class:`Population`, called ``name``.

    Its mass is ``weight`` (normalised by the population), its score ``U ~ Uniform(lo, hi)`` with
    ``0 <= lo < hi <= 1``, and its loss curve ``P(loss = 1 | U = u) = a u^b`` with ``a, b >= 0``
    and ``a hi^b <= 1``.
    """

    name: str
    weight: float
    a: float
    b: float
    lo: float = 0.0
    hi: float = 1.0

    def __post_init__(self):
        if not self.weight > 0:
            raise ValueError(f"group {self.name!r}: weight must be > 0, got {self.weight}")
        if not 0 <= self.lo < self.hi <= 1:
            raise ValueError(f"group {self.name!r}: need 0 <= lo < hi <= 1, got [{self.lo}, {self.hi}]")
        if self.a < 0 or self.b < 0:
            raise ValueError(f"group {self.name!r}: need a >= 0 and b >= 0, got a={self.a}, b={self.b}")
        if self.a * self.hi**self.b > 1 + 1e-12:
            raise ValueError(f"group {self.name!r}: loss probability a*hi^b = {self.a * self.hi**self.b} > 1")

    def loss_prob(self, u):
        """``P(loss = 1 | U = u)`` on the group's support."""
        return self.a * np.asarray(u, dtype=float) ** self.b

    def risk(self, u):
        r""":math:`R(u \mid G) = E[\ell \mathbf 1\{U \le u\} \mid G]` (``u = -inf`` gives 0)."""
        c = np.clip(np.asarray(u, dtype=float), self.lo, self.hi)  # ∫_lo^c a s^b ds / (hi - lo):
        return self.a * (c ** (self.b + 1) - self.lo ** (self.b + 1)) / ((self.b + 1) * (self.hi - self.lo))

    def share(self, u):
        """``F(u) = P(U <= u | G)``: the share routed to the non-thinking model."""
        c = np.clip(np.asarray(u, dtype=float), self.lo, self.hi)
        return (c - self.lo) / (self.hi - self.lo)

    def sample(self, size, rng):
        """Losses and scores of shape ``size`` (last axis: items), seeded by ``rng``."""
        rng = np.random.default_rng(rng)
        u = self.lo + (self.hi - self.lo) * rng.random(size)
        return (rng.random(size) < self.loss_prob(u)).astype(float), u


@dataclass(frozen=True)
class Population:
    """A mixture of :class:`RiskGroup` s (weights are normalised).

    Parameters
    ----------
    groups : tuple of RiskGroup
        The groups (unique names).
    """

    groups: tuple[RiskGroup, ...]

    def __post_init__(self):
        if len(self.groups) == 0:
            raise ValueError("a population needs at least one group")
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"group names must be unique, got {names}")

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.groups]

    @property
    def weights(self) -> np.ndarray:
        w = np.array([g.weight for g in self.groups], dtype=float)
        return w / w.sum()

    def group(self, name: str) -> RiskGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"unknown group {name!r}; groups are {self.names}")

    # -- marginal (no grouping) ---------------------------------------------------------------
    def risk(self, u, group: str | None = None):
        """``R(u | G_group)``; ``group=None``: the marginal risk ``sum_j w_j R(u | G_j)``."""
        if group is not None:
            return self.group(group).risk(u)
        return sum(w * g.risk(u) for w, g in zip(self.weights, self.groups))

    def share(self, u, group: str | None = None):
        """``P(U <= u | G_group)``; ``group=None``: marginal ``P(U <= u)``."""
        if group is not None:
            return self.group(group).share(u)
        return sum(w * g.share(u) for w, g in zip(self.weights, self.groups))

    # -- quantities on intervals of the U axis (learned partitions) ------------------------------
    def mass(self, lo, hi):
        """``P(lo < U <= hi)`` (marginal over groups); vectorised."""
        return self.share(hi) - self.share(lo)

    def interval_risk(self, u, lo, hi):
        r""":math:`R(u \mid lo < U \le hi) = E[\ell \mathbf 1\{U \le u\} \mid lo < U \le hi]`."""
        u, lo, hi = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (u, lo, hi)))
        m = self.mass(lo, hi)
        joint = self.risk(np.minimum(np.maximum(u, lo), hi)) - self.risk(lo)  # E[loss 1{lo < U <= min(u, hi)}]
        return np.divide(joint, m, out=np.zeros_like(m), where=m > 0)

    def sample(self, n: int, rng, size: int | None = None):
        """A mixture sample: ``(loss, scores, group index)`` of shape ``(n,)``, or ``(size, n)``."""
        rng = np.random.default_rng(rng)
        shape = (int(n),) if size is None else (int(size), int(n))
        gi = rng.choice(len(self.groups), size=shape, p=self.weights)
        lo, hi, a, b = (np.array([getattr(g, key) for g in self.groups])[gi] for key in ("lo", "hi", "a", "b"))
        u = lo + (hi - lo) * rng.random(shape)
        return (rng.random(shape) < a * u**b).astype(float), u, gi


def sup_feasible(risk_fn, eps, lo=0.0, hi=1.0, iters=60):
    r"""``sup{u in [lo, hi] : risk_fn(u) <= eps}`` for a continuous non-decreasing ``risk_fn``, by bisection.

    Vectorised: ``eps``, ``lo`` and ``hi`` broadcast together, and every entry is its own search.

    Parameters
    ----------
    risk_fn : callable
        ``u -> R(u)``, elementwise on an array of the broadcast shape.
    eps : float or array_like
        Target risk(s).
    lo, hi : float or array_like
        The search intervals.
    iters : int, default 60
        Bisection steps (precision ``(hi - lo) 2^-iters``).

    Returns
    -------
    float or numpy.ndarray
        ``-inf`` when even ``risk_fn(lo) > eps``; ``+inf`` when ``risk_fn(hi) <= eps`` (the risk
        never exceeds ``eps``: route everything).
    """
    eps, lo, hi = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (eps, lo, hi)))
    never = np.asarray(risk_fn(hi) <= eps)
    none = np.asarray(risk_fn(lo) > eps)
    a, b = lo.copy(), hi.copy()
    for _ in range(iters):
        mid = 0.5 * (a + b)
        ok = np.asarray(risk_fn(mid) <= eps)
        a = np.where(ok, mid, a)
        b = np.where(ok, b, mid)
    out = np.where(never, np.inf, np.where(none, -np.inf, a))
    return out if out.ndim else float(out)


def oracle_threshold(pop: Population, eps, group: str | None = None):
    r"""PAC-optimal threshold :math:`u^* = \sup\{u : R(u \mid G) \le \varepsilon\}`.

    Parameters
    ----------
    pop : Population
        The population.
    eps : float or array_like
        Target risk(s).
    group : str, optional
        A group; ``None``: the marginal threshold of PAC.

    Returns
    -------
    float or numpy.ndarray
    """
    return sup_feasible(lambda u: pop.risk(u, group), eps)  # an unknown group: pop.risk's KeyError, naming the groups


def oracle_summary(pop: Population, eps: float) -> dict:
    """Routed share of marginal PAC, of G-PAC, and of the best *common* threshold valid in every group.

    All at the population level (PAC-optimal thresholds, infinite calibration data):

    * ``marginal``: one threshold, marginal constraint ``R(u) <= eps`` (PAC reasoning);
    * ``common``: one threshold, every group's constraint (``min_j u_j*``) — the best a single
      threshold can do when the *group-conditional* guarantee is required;
    * ``grouped``: one threshold per group (G-PAC), every group's constraint.
    """
    u_marg = oracle_threshold(pop, eps)
    u_j = np.array([oracle_threshold(pop, eps, g) for g in pop.names])
    u_common = float(np.min(u_j))
    return {
        "eps": eps,
        "u_marginal": u_marg,
        "u_common": u_common,
        **{f"u_{g}": float(u) for g, u in zip(pop.names, u_j)},
        "routed_share_marginal": float(pop.share(u_marg)),
        "routed_share_common": float(pop.share(u_common)),
        "routed_share_grouped": float(sum(wj * pop.share(u, g) for wj, u, g in zip(pop.weights, u_j, pop.names))),
        **{f"risk_marginal_{g}": float(pop.risk(u_marg, g)) for g in pop.names},
        "max_group_risk_marginal": float(max(pop.risk(u_marg, g) for g in pop.names)),
    }


#: The audit population: two groups, one with an informative score (convex risk), one flat.
AUDIT_POPULATION = Population(
    (
        RiskGroup("informative", 0.5, a=0.8, b=3.0),  # R(u) = 0.2 u^4
        RiskGroup("flat", 0.5, a=0.5, b=0.0),  # R(u) = 0.5 u
    )
)


#: Three groups that *are* intervals of the U axis (equal masses, so U ~ Uniform(0, 1) overall),
#: with loss curves that jump at the boundaries: 1-D clustering of U can recover the partition.
PARTITION_POPULATION = Population(
    (
        RiskGroup("low-U, risky", 1.0, a=0.3, b=0.0, lo=0.0, hi=1 / 3),  # flat 30 % loss
        RiskGroup("mid-U, safe", 1.0, a=0.15, b=1.0, lo=1 / 3, hi=2 / 3),  # 5-10 % loss
        RiskGroup("high-U, steep", 1.0, a=0.6, b=2.0, lo=2 / 3, hi=1.0),  # 27-60 % loss
    )
)
#: The boundaries of the partition that *generated* :data:`PARTITION_POPULATION` (its three groups).
#: Not the oracle partition of Definition 4.4 (``def:oracle-optimal``), which maximises the routed
#: share over all partitions: it is one only at tolerances ``eps`` at or above every generating
#: group's risk of routing all its items, where it routes everything; at every smaller ``eps`` a
#: 3-interval partition routes more (derived and checked in notebook 11).
PARTITION_GENERATING = (1 / 3, 2 / 3)
