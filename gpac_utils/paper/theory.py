r"""Theory on populations with known risk functions (paper Section 4, Appendices B–D).

Shared by ``notebooks/10_oracle_partition``, ``11_partition_gap``, ``12_finite_sample`` and
``13_validity_audit``.

Populations
-----------
A :class:`Population` is a mixture of groups. Group ``j`` has mass ``w_j``, its score is
``U ~ Uniform(lo_j, hi_j)`` and its binary loss has ``P(loss = 1 | U = u, j) = a_j u^{b_j}``
(increasing for ``b_j > 0``: the score is informative within the group). Everything the theory
needs is then in closed form:

* :math:`R(u \mid G_j) = E[\ell\,\mathbf 1\{U \le u\} \mid G_j]
  = a_j\,(c^{b_j+1} - lo_j^{b_j+1}) / ((b_j+1)(hi_j-lo_j))`, ``c = clip(u, lo_j, hi_j)``;
* the share routed to the non-thinking model, :math:`F_j(u) = P(U \le u \mid G_j)`;
* the same quantities for any interval of the ``U`` axis (learned partitions of Section 3.2).

PAC-optimal thresholds (Eq. pac-optimal-threshold)
--------------------------------------------------
For a *fixed* threshold ``u`` the risk :math:`R(u \mid G_j)` is a number, so the event
:math:`R(u \mid G_j) \le \varepsilon` has probability 0 or 1 and ``alpha`` drops out:
:math:`u^*_j(\varepsilon, \alpha) = \sup\{u : R(u \mid G_j) \le \varepsilon\}` for every ``alpha``
(``+inf`` when the group's risk never exceeds ``eps``). :func:`oracle_threshold` computes it by
bisection on the closed form; :func:`closed_form_threshold` gives the explicit root for a group
with ``lo = 0``.

Partition gap (Eq. partition-gap)
---------------------------------
:func:`partition_gap` takes a confusion matrix ``C[i, j] = P(g_hat = i, g_star = j)`` and returns
:math:`\delta = \min_\sigma P(\hat g \ne \sigma(g^*))` (an assignment problem);
:func:`interval_confusion` builds ``C`` for two partitions of the ``U`` axis given by boundaries.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize


# ============================================================================ populations
@dataclass(frozen=True)
class Group:
    """One group: mass ``weight``, ``U ~ Uniform(lo, hi)``, ``P(loss=1 | U=u) = a * u**b``."""

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

    def _primitive(self, c):
        """``∫_lo^c a s^b ds / (hi - lo)`` for ``c`` in ``[lo, hi]``."""
        return self.a * (c ** (self.b + 1) - self.lo ** (self.b + 1)) / ((self.b + 1) * (self.hi - self.lo))

    def risk(self, u):
        r""":math:`R(u \mid G) = E[\ell \mathbf 1\{U \le u\} \mid G]` (``u = -inf`` gives 0)."""
        c = np.clip(np.asarray(u, dtype=float), self.lo, self.hi)
        return self._primitive(c)

    def share(self, u):
        """``F(u) = P(U <= u | G)``: the share routed to the non-thinking model."""
        c = np.clip(np.asarray(u, dtype=float), self.lo, self.hi)
        return (c - self.lo) / (self.hi - self.lo)

    def sample(self, size, rng):
        """Losses and scores of shape ``size`` (last axis: items), seeded by ``rng``."""
        rng = np.random.default_rng(rng)
        u = self.lo + (self.hi - self.lo) * rng.random(size)
        loss = (rng.random(size) < self.loss_prob(u)).astype(float)
        return loss, u


@dataclass(frozen=True)
class Population:
    """A mixture of :class:`Group` s (weights are normalised)."""

    groups: tuple[Group, ...]

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

    def group(self, name: str) -> Group:
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

    def joint_risk(self, lo, hi):
        """``E[loss 1{lo < U <= hi}]`` (marginal over groups); vectorised."""
        return self.risk(hi) - self.risk(lo)

    def interval_risk(self, u, lo, hi):
        r""":math:`R(u \mid lo < U \le hi) = E[\ell \mathbf 1\{U \le u\} \mid lo < U \le hi]`."""
        u, lo, hi = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (u, lo, hi)))
        m = self.mass(lo, hi)
        top = np.minimum(np.maximum(u, lo), hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(m > 0, self.joint_risk(lo, top) / np.where(m > 0, m, 1.0), 0.0)

    def sample(self, n: int, rng, size=()):
        """A mixture sample: ``(loss, scores, group index)`` of shape ``size + (n,)``."""
        rng = np.random.default_rng(rng)
        shape = tuple(np.atleast_1d(size).astype(int)) if np.ndim(size) else ((int(size),) if size else ())
        shape = shape + (int(n),)
        gi = rng.choice(len(self.groups), size=shape, p=self.weights)
        lo = np.array([g.lo for g in self.groups])[gi]
        hi = np.array([g.hi for g in self.groups])[gi]
        u = lo + (hi - lo) * rng.random(shape)
        a = np.array([g.a for g in self.groups])[gi]
        b = np.array([g.b for g in self.groups])[gi]
        loss = (rng.random(shape) < a * u**b).astype(float)
        return loss, u, gi


# ============================================================================ oracle thresholds
def sup_feasible(risk_fn, eps, lo=0.0, hi=1.0, iters=60):
    r"""``sup{u : risk_fn(u) <= eps}`` for a continuous non-decreasing ``risk_fn`` (vectorised in eps).

    ``-inf`` when even ``risk_fn(lo) > eps``; ``+inf`` when ``risk_fn(hi) <= eps`` (the risk never
    exceeds ``eps``: route everything). Otherwise bisection to ``(hi - lo) 2^-iters``.
    """
    eps = np.asarray(eps, dtype=float)
    lo_arr = np.full(eps.shape, float(lo))
    hi_arr = np.full(eps.shape, float(hi))
    never = np.asarray(risk_fn(hi_arr) <= eps)
    none = np.asarray(risk_fn(lo_arr) > eps)
    a, b = lo_arr.copy(), hi_arr.copy()
    for _ in range(iters):
        mid = 0.5 * (a + b)
        ok = np.asarray(risk_fn(mid) <= eps)
        a = np.where(ok, mid, a)
        b = np.where(ok, b, mid)
    out = np.where(never, np.inf, np.where(none, -np.inf, a))
    return out if out.ndim else float(out)


def oracle_threshold(pop: Population, eps, group: str | None = None):
    r"""PAC-optimal threshold :math:`u^* = \sup\{u : R(u \mid G) \le \varepsilon\}`; ``group=None``: marginal PAC."""
    return sup_feasible(lambda u: pop.risk(u, group), eps)


def closed_form_threshold(g: Group, eps):
    r"""Explicit :math:`u^*` for a group with ``lo = 0``: :math:`(\varepsilon(b+1)\,hi/a)^{1/(b+1)}`."""
    if g.lo != 0:
        raise ValueError("closed_form_threshold needs lo = 0")
    eps = np.asarray(eps, dtype=float)
    if g.a == 0:
        return np.full(eps.shape, np.inf)
    u = (eps * (g.b + 1) * g.hi / g.a) ** (1.0 / (g.b + 1))
    return np.where(u >= g.hi, np.inf, u)


def oracle_summary(pop: Population, eps: float) -> dict:
    """Efficiency of marginal PAC, of G-PAC, and of the best *common* threshold valid in every group.

    All at the population level (PAC-optimal thresholds, infinite calibration data):

    * ``marginal``: one threshold, marginal constraint ``R(u) <= eps`` (PAC reasoning);
    * ``common``: one threshold, every group's constraint (``min_j u_j*``) — the best a single
      threshold can do when the *group-conditional* guarantee is required;
    * ``grouped``: one threshold per group (G-PAC), every group's constraint.
    """
    w = pop.weights
    u_marg = oracle_threshold(pop, eps)
    u_j = np.array([oracle_threshold(pop, eps, g) for g in pop.names])
    u_common = float(np.min(u_j))
    eff_grouped = float(sum(wj * pop.share(u, g) for wj, u, g in zip(w, u_j, pop.names)))
    return {
        "eps": eps,
        "u_marginal": u_marg,
        "u_common": u_common,
        **{f"u_{g}": float(u) for g, u in zip(pop.names, u_j)},
        "eff_marginal": float(pop.share(u_marg)),
        "eff_common": float(pop.share(u_common)),
        "eff_grouped": eff_grouped,
        **{f"risk_marginal_{g}": float(pop.risk(u_marg, g)) for g in pop.names},
        "max_group_risk_marginal": float(max(pop.risk(u_marg, g) for g in pop.names)),
    }


def efficiency_ratio(pop: Population, group: str, u_hat, u_star):
    """``P(U <= u_hat | G) / P(U <= u_star | G)``: calibrated vs oracle routing share (``-inf`` → 0)."""
    den = pop.share(u_star, group)
    if np.any(np.asarray(den) <= 0):
        raise ValueError(f"oracle threshold of group {group!r} routes nothing; the ratio is undefined")
    return pop.share(u_hat, group) / den


# ============================================================================ U-axis partitions
def interval_edges(boundaries) -> np.ndarray:
    """``[-inf, b_1, ..., b_{k-1}, +inf]`` for a partition ``b_{j-1} < U <= b_j`` of the U axis."""
    b = np.asarray(boundaries, dtype=float).ravel()
    if np.any(np.diff(b) < 0):
        raise ValueError(f"partition boundaries must be ascending, got {b}")
    return np.concatenate([[-np.inf], b, [np.inf]])


def interval_confusion(pop: Population, learned_boundaries, oracle_boundaries) -> np.ndarray:
    """``C[i, j] = P(learned group i, oracle group j)`` for two interval partitions (square, zero-padded)."""
    e1, e2 = interval_edges(learned_boundaries), interval_edges(oracle_boundaries)
    k = max(len(e1), len(e2)) - 1
    C = np.zeros((k, k))
    for i in range(len(e1) - 1):
        for j in range(len(e2) - 1):
            lo, hi = max(e1[i], e2[j]), min(e1[i + 1], e2[j + 1])
            if hi > lo:
                C[i, j] = float(pop.mass(lo, hi))
    return C


def partition_gap(confusion) -> float:
    r""":math:`\delta = \min_{\sigma \in S_k} P(\hat g \ne \sigma(g^*)) = 1 - \max_\sigma \sum_i C[i, \sigma(i)]`."""
    C = np.asarray(confusion, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"confusion must be a square matrix, got shape {C.shape}")
    rows, cols = optimize.linear_sum_assignment(C, maximize=True)
    return float(C.sum() - C[rows, cols].sum())


def partition_gap_bruteforce(confusion) -> float:
    """:func:`partition_gap` by enumerating all ``k!`` permutations (small ``k``; for tests)."""
    C = np.asarray(confusion, dtype=float)
    k = C.shape[0]
    best = max(sum(C[i, s[i]] for i in range(k)) for s in itertools.permutations(range(k)))
    return float(C.sum() - best)


def partition_gap_from_labels(learned, oracle, k: int | None = None) -> float:
    """δ estimated from per-item labels (integers in ``[0, k)``), each item weighted equally."""
    learned = np.asarray(learned, dtype=int)
    oracle = np.asarray(oracle, dtype=int)
    if learned.shape != oracle.shape:
        raise ValueError(f"label arrays differ in shape: {learned.shape} vs {oracle.shape}")
    k = int(max(learned.max(), oracle.max()) + 1) if k is None else int(k)
    C = np.zeros((k, k))
    np.add.at(C, (learned, oracle), 1.0 / learned.size)
    return partition_gap(C)


def interval_thresholds(pop: Population, boundaries, eps) -> np.ndarray:
    """PAC-optimal threshold of every interval group ``b_{j-1} < U <= b_j`` (``+inf``: route all)."""
    e = interval_edges(boundaries)
    out = []
    for lo, hi in zip(e[:-1], e[1:]):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        if hi_c <= lo_c or pop.mass(lo_c, hi_c) <= 0:
            out.append(np.inf)  # an empty group routes nothing and risks nothing
            continue
        out.append(
            sup_feasible(lambda u, lo_c=lo_c, hi_c=hi_c: pop.interval_risk(u, lo_c, hi_c), eps, lo=lo_c, hi=hi_c)
        )
    return np.array(out, dtype=float)


def interval_partition_efficiency(pop: Population, boundaries, eps, thresholds=None) -> float:
    """``sum_j P(b_{j-1} < U <= min(u_j, b_j))`` with ``u_j`` PAC-optimal unless ``thresholds`` given."""
    e = interval_edges(boundaries)
    u = interval_thresholds(pop, boundaries, eps) if thresholds is None else np.asarray(thresholds, float)
    total = 0.0
    for lo, hi, t in zip(e[:-1], e[1:], u):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        top = min(max(t, lo_c), hi_c)
        total += float(pop.mass(lo_c, top)) if top > lo_c else 0.0
    return total


def interval_group_risks(pop: Population, boundaries, thresholds) -> np.ndarray:
    r""":math:`R(u_j \mid \hat G_j)` of every interval group at the given thresholds."""
    e = interval_edges(boundaries)
    out = []
    for lo, hi, t in zip(e[:-1], e[1:], np.asarray(thresholds, dtype=float)):
        lo_c, hi_c = max(lo, 0.0), min(hi, 1.0)
        out.append(float(pop.interval_risk(t, lo_c, hi_c)) if hi_c > lo_c else 0.0)
    return np.array(out)


def fit_power_law(n, delta):
    """Least-squares fit of ``delta = C n^{-beta}`` on the log scale: returns ``(C, beta)``."""
    n = np.asarray(n, dtype=float)
    d = np.asarray(delta, dtype=float)
    ok = d > 0
    if ok.sum() < 2:
        raise ValueError("need at least two positive gaps to fit a rate")
    slope, icpt = np.polyfit(np.log(n[ok]), np.log(d[ok]), 1)
    return float(math.exp(icpt)), float(-slope)


def mcse(rate, trials):
    """Monte Carlo standard error of a proportion from ``trials`` repetitions."""
    rate = np.asarray(rate, dtype=float)
    return np.sqrt(rate * (1 - rate) / np.asarray(trials, dtype=float))


def names_or(pop: Population, groups: Sequence[str] | None) -> list[str]:
    """The requested groups (validated) or all of them."""
    if groups is None:
        return pop.names
    bad = [g for g in groups if g not in pop.names]
    if bad:
        raise KeyError(f"unknown group(s) {bad}; groups are {pop.names}")
    return list(groups)


# ============================================================================ validity audit
#: The audit population: two groups, one with an informative score (convex risk), one flat.
AUDIT_POPULATION = Population(
    (
        Group("informative", 0.5, a=0.8, b=3.0),  # R(u) = 0.2 u^4
        Group("flat", 0.5, a=0.5, b=0.0),  # R(u) = 0.5 u
    )
)


#: (scheme, pi) cells of the audit. ``full`` ignores pi (it is pi = 1), and ``bernoulli`` with
#: pi = 1 queries every item — the same experiment as ``full`` — so both appear once, as (full, 1).
def audit_schemes(pis: Sequence[float]) -> list[tuple[str, float]]:
    """The distinct (scheme, pi) combinations for the sampling weights ``pis``."""
    cells = [("resample", float(p)) for p in pis]
    cells += [("bernoulli", float(p)) for p in pis if p < 1]
    cells.append(("full", 1.0))
    return cells


AUDIT_PRESETS = {
    "fast": {
        "bounds": ["clt", "hoeffding", "hoeffding_bentkus", "empirical_bernstein", "wsr", "clopper_pearson"],
        "pis": [1.0, 0.5, 0.1],
        "n_groups": [25, 100, 300],
        "eps_list": [0.05, 0.15],
        "rules": ["first-crossing", "max"],
        "alpha": 0.05,
        "calibrations": 100,
        "seed": 0,
        "jobs": 1,
    },
    "paper": {
        "bounds": ["clt", "hoeffding", "hoeffding_bentkus", "empirical_bernstein", "wsr", "clopper_pearson"],
        "pis": [1.0, 0.5, 0.1],
        "n_groups": [25, 50, 100, 300, 1000],
        "eps_list": [0.05, 0.15],
        "rules": ["first-crossing", "max"],
        "alpha": 0.05,
        "calibrations": 1000,
        "seed": 0,
        "jobs": 2,
    },
}


def audit_candidates(scores, bound: str) -> np.ndarray:
    """The candidate thresholds :func:`gpac_utils.calibrate.threshold` uses with ``candidates="auto"``."""
    from ..calibrate import resolve_candidates

    n = scores.shape[-1]
    setting = resolve_candidates("auto", bound, n)
    if setting == "all":
        return np.sort(scores, axis=-1)
    q = np.linspace(0, 1, int(setting))
    return np.moveaxis(np.quantile(scores, q, axis=-1, method="inverted_cdf"), 0, -1)


def _audit_unit(
    pop: Population,
    names: Sequence[str],
    ni: int,
    n: int,
    si: int,
    scheme: str,
    pi: float,
    bounds: Sequence[str],
    rules: Sequence[str],
    eps_list: Sequence[float],
    alpha: float,
    calibrations: int,
    seed: int,
) -> list[dict]:
    """All bounds, rules and eps of one (n, scheme, pi) cell; see :func:`validity_audit`."""
    import time

    from .. import bounds as _bounds
    from .. import sampling as _sampling
    from .. import selection as _selection

    G, B = len(names), int(calibrations)
    rng = np.random.default_rng([seed, ni, int(n)])  # same calibration sets for every scheme
    data = [pop.group(g).sample((B, int(n)), rng) for g in names]
    loss = np.concatenate([d[0] for d in data])  # (G*B, n)
    scores = np.concatenate([d[1] for d in data])
    d = _sampling.draw(loss, scores, scheme, pi, np.random.default_rng([seed, ni, si, 1]))
    u_star = {eps: {g: oracle_threshold(pop, eps, g) for g in names} for eps in eps_list}
    rows = []
    for bound in bounds:
        t0 = time.perf_counter()
        cand = audit_candidates(scores, bound)
        ucb = _bounds.ucb(bound, d.z, d.scores, cand, alpha, d.value_range)
        secs = time.perf_counter() - t0
        for rule in rules:
            for eps in eps_list:
                thr = _selection.select(cand, ucb, eps, rule).reshape(G, B)
                for gi, g in enumerate(names):
                    risk = pop.risk(thr[gi], g)
                    eff = efficiency_ratio(pop, g, thr[gi], u_star[eps][g])
                    rate = float(np.mean(risk > eps))
                    rows.append(
                        {
                            "bound": bound,
                            "kind": _bounds.BOUNDS[bound],
                            "scheme": scheme,
                            "pi": pi,
                            "rule": rule,
                            "n_group": int(n),
                            "eps": eps,
                            "group": g,
                            "calibrations": B,
                            "violation_rate": rate,
                            "mcse": float(math.sqrt(rate * (1 - rate) / B)),
                            "efficiency": float(np.mean(eff)),
                            "efficiency_se": float(np.std(eff, ddof=1) / math.sqrt(B)),
                            "always_think": float(np.mean(~np.isfinite(thr[gi]))),
                            "mean_labels": float(np.mean(d.n_queried.reshape(G, B)[gi])),
                            "ucb_seconds": secs,
                        }
                    )
    return rows


def _audit_unit_star(args):
    return _audit_unit(*args)


def validity_audit(
    pop: Population,
    *,
    bounds: Sequence[str],
    pis: Sequence[float],
    n_groups: Sequence[int],
    eps_list: Sequence[float],
    rules: Sequence[str],
    alpha: float,
    calibrations: int,
    seed: int = 0,
    groups: Sequence[str] | None = None,
    jobs: int = 1,
):
    """Per-group violation rate and efficiency of every (bound, scheme, pi, rule, n, eps) cell.

    For each ``n`` one set of ``calibrations`` calibration samples per group is drawn and shared
    by all schemes and bounds (common random numbers); for each (scheme, pi) one draw of the
    sampling terms is shared by all bounds; each bound's UCB curves are computed once (all groups
    and calibrations in one batched call) and reused for both selection rules and every ``eps``.
    The violation event is ``R(u_hat | G_j) > eps`` with the exact risk; efficiency is
    ``P(U <= u_hat | G_j) / P(U <= u*_j | G_j)`` (``u_hat = -inf`` counts as 0).

    Thresholds are exactly those of :func:`gpac_utils.calibrate.threshold` with
    ``candidates="auto"`` and the same random draws. ``jobs > 1`` spreads the (n, scheme, pi) cells over
    processes; results do not depend on ``jobs`` (every cell has its own seeds).

    Returns a tidy DataFrame, one row per cell and group; ``ucb_seconds`` is the time spent on
    that bound's UCB curves for the cell (shared by the rows of the cell). The pass criterion for
    a nominal level ``alpha`` is ``violation_rate <= alpha + 3 sqrt(alpha (1 - alpha) / calibrations)``.
    """
    import pandas as pd

    names = names_or(pop, groups)
    units = [
        (
            pop,
            names,
            ni,
            int(n),
            si,
            scheme,
            float(pi),
            list(bounds),
            list(rules),
            list(eps_list),
            float(alpha),
            int(calibrations),
            int(seed),
        )
        for ni, n in enumerate(n_groups)
        for si, (scheme, pi) in enumerate(audit_schemes(pis))
    ]
    # the most expensive cells first (cost ~ n / pi for resample), for load balance
    order = sorted(range(len(units)), key=lambda i: -units[i][3] / (units[i][6] if units[i][5] == "resample" else 1))
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=int(jobs)) as pool:
            results = dict(zip(order, pool.map(_audit_unit_star, [units[i] for i in order])))
    else:
        results = {i: _audit_unit_star(units[i]) for i in order}
    out = pd.DataFrame([r for i in range(len(units)) for r in results[i]])
    out["pass_threshold"] = alpha + 3 * np.sqrt(alpha * (1 - alpha) / out["calibrations"])
    out["pass"] = out["violation_rate"] <= out["pass_threshold"]
    return out


# ============================================================================ audit summaries
VALID_SCHEMES = ("bernoulli", "full")


def audit_summary(audit):
    """One row per (bound, scheme): cells, failing cells, worst violation rate, mean efficiency."""
    import pandas as pd

    rows = []
    for (bound, scheme), d in audit.groupby(["bound", "scheme"], sort=False):
        worst = d.loc[d["violation_rate"].idxmax()]
        rows.append(
            {
                "bound": bound,
                "kind": d["kind"].iloc[0],
                "scheme": scheme,
                "cells": len(d),
                "failing_cells": int((~d["pass"]).sum()),
                "max_violation": float(d["violation_rate"].max()),
                "worst_cell": f"n={worst.n_group}, pi={worst.pi:g}, eps={worst.eps:g}, {worst.rule}, {worst.group}",
                "mean_efficiency": float(d["efficiency"].mean()),
            }
        )
    return pd.DataFrame(rows)


def efficiency_vs_clt(audit, n_group: int = 300, rule: str = "first-crossing"):
    """Efficiency of every valid bound (valid schemes) relative to ``clt`` (paper's ``resample``) at ``n_group``.

    For each (pi, eps, group): ``clt`` uses ``resample`` at that pi; a valid bound uses
    ``bernoulli`` at the same pi (``full`` for pi = 1). Returns the per-cell ratios.
    """
    import pandas as pd

    d = audit[(audit["n_group"] == n_group) & (audit["rule"] == rule)]
    clt = d[(d["bound"] == "clt") & (d["scheme"] == "resample")].set_index(["pi", "eps", "group"])["efficiency"]
    rows = []
    for bound in [b for b in d["bound"].unique() if d[d["bound"] == b]["kind"].iloc[0] == "valid"]:
        for (pi, eps, group), e_clt in clt.items():
            scheme = "full" if pi == 1 else "bernoulli"
            sel = d[
                (d["bound"] == bound)
                & (d["scheme"] == scheme)
                & (d["pi"] == pi)
                & (d["eps"] == eps)
                & (d["group"] == group)
            ]
            if len(sel):
                e = float(sel["efficiency"].iloc[0])
                rows.append(
                    {
                        "bound": bound,
                        "scheme": scheme,
                        "pi": pi,
                        "eps": eps,
                        "group": group,
                        "efficiency": e,
                        "efficiency_clt": float(e_clt),
                        "ratio_to_clt": e / float(e_clt) if e_clt > 0 else np.nan,
                    }
                )
    return pd.DataFrame(rows)


def audit_paragraph(audit, n_group: int = 300, alpha: float = 0.05) -> str:
    """The README paragraph: which bounds were valid in every cell, and the efficiency cost at ``n_group``."""
    B = int(audit["calibrations"].min())
    thr = alpha + 3 * math.sqrt(alpha * (1 - alpha) / B)
    valid_cells = audit[audit["scheme"].isin(VALID_SCHEMES)]
    fc = valid_cells[valid_cells["rule"] == "first-crossing"]
    parts = []
    always, never = [], []
    for bound, d in fc.groupby("bound", sort=False):
        (always if d["pass"].all() else never).append(
            (bound, float(d["violation_rate"].max()), int((~d["pass"]).sum()), len(d))
        )
    res = audit[audit["scheme"] == "resample"]
    res_worst = res.groupby("bound")["violation_rate"].max()
    clt = res[res["bound"] == "clt"]
    eff = efficiency_vs_clt(audit, n_group)
    passing = [b for b, *_ in always]
    mean_eff = eff[eff["bound"].isin(passing)].groupby("bound")["efficiency"].mean()
    tight = mean_eff.idxmax() if len(mean_eff) else None
    n_cells = audit.groupby(["bound", "scheme", "pi", "rule", "n_group", "eps", "group"]).ngroups
    parts.append(
        f"Validity audit ({B} calibrations per cell, nominal alpha = {alpha:g}, pass if the violation rate "
        f"P(R(u_hat | G_j) > eps) <= {thr:.3f} = alpha + 3 MCSE; {n_cells} cells in all). "
        f"Under the i.i.d. schemes (bernoulli, full) with first-crossing selection, "
        + ", ".join(f"{b} (worst {100 * v:.1f}%)" for b, v, *_ in always)
        + " passed in every cell"
        + (
            "; " + ", ".join(f"{b} failed {k}/{m} cells (worst {100 * v:.1f}%)" for b, v, k, m in never)
            if never
            else ""
        )
        + ". "
    )
    parts.append(
        "The paper's CLT bound with its resampling scheme (Alg. 1) violated in up to "
        f"{100 * clt['violation_rate'].max():.1f}% "
        f"of calibrations (median over cells {100 * clt['violation_rate'].median():.1f}%, "
        f"{int((~clt['pass']).sum())}/{len(clt)} cells failing); under resampling every bound targets the empirical "
        f"calibration risk, and the worst violation rates were "
        + ", ".join(f"{b} {100 * v:.1f}%" for b, v in res_worst.items())
        + ". "
    )
    mx = audit[(audit["rule"] == "max") & audit["scheme"].isin(VALID_SCHEMES)]
    if len(mx):
        bad = mx[~mx["pass"] & (mx["kind"] == "valid")]
        parts.append(
            f"With the paper's max rule instead of first-crossing, the valid bounds under the i.i.d. schemes failed "
            f"{len(bad)} cells" + (f" ({', '.join(sorted(bad['bound'].unique()))})" if len(bad) else "") + ". "
        )
    if tight is not None:
        t = eff[eff["bound"] == tight]
        per_pi = "; ".join(
            f"pi = {pi:g} ({'full' if pi == 1 else 'bernoulli'}): {100 * g['efficiency'].mean():.1f}% vs "
            f"{100 * g['efficiency_clt'].mean():.1f}%, ratio {g['efficiency'].mean() / g['efficiency_clt'].mean():.2f}"
            for pi, g in t.groupby("pi", sort=False)
        )
        parts.append(
            f"At n_group = {n_group} the tightest bound that passed everywhere is {tight}; its mean efficiency "
            f"(share routed relative to the oracle threshold, averaged over eps and groups) against clt with "
            f"resampling at the same pi: {per_pi}. Bernoulli labelling at pi queries about pi*n items, "
            f"resampling about n, so the pi = 1 comparison is the like-for-like one."
        )
    return "".join(parts)


# ============================================================================ oracle partition (notebook 10)
#: Three groups sharing U ~ Uniform(0, 1) whose loss curves differ (heterogeneous risk profiles).
ORACLE_POPULATION = Population(
    (
        Group("easy", 0.5, a=0.4, b=2.0),  # R(u) = 0.133 u^3
        Group("medium", 0.3, a=0.6, b=1.0),  # R(u) = 0.3 u^2
        Group("hard", 0.2, a=0.9, b=0.5),  # R(u) = 0.6 u^1.5
    )
)

ORACLE_PRESETS = {
    "fast": {
        "eps_grid": [0.02, 0.05, 0.08, 0.1, 0.12, 0.15],
        "eps": 0.1,
        "n_random": 300,
        "n_cal": 300,
        "calibrations": 200,
        "alpha": 0.05,
        "bound": "clopper_pearson",
        "sampling": "full",
        "seed": 0,
    },
    "paper": {
        "eps_grid": [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2],
        "eps": 0.1,
        "n_random": 3000,
        "n_cal": 300,
        "calibrations": 2000,
        "alpha": 0.05,
        "bound": "clopper_pearson",
        "sampling": "full",
        "seed": 0,
    },
}


def efficiency_table(pop: Population, eps_grid):
    """:func:`oracle_summary` for every ``eps`` in the grid (one row each)."""
    import pandas as pd

    return pd.DataFrame([oracle_summary(pop, float(e)) for e in eps_grid])


def random_population(rng, k: int = 3, identical: bool = False) -> Population:
    """A random population of ``k`` groups on U ~ Uniform(0, 1) (``identical``: same loss curve)."""
    rng = np.random.default_rng(rng)
    a, b = rng.uniform(0.1, 1.0), rng.choice([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    groups = []
    for j in range(k):
        if not identical:
            a, b = rng.uniform(0.1, 1.0), rng.choice([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
        groups.append(Group(f"g{j}", float(rng.uniform(0.1, 1.0)), a=float(a), b=float(b)))
    return Population(tuple(groups))


def proposition_scan(n: int, eps_list, seed: int = 0, k: int = 3):
    """Oracle efficiencies on ``n`` random heterogeneous and ``n`` identical-group populations."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(int(n)):
        for identical in (False, True):
            pop = random_population(rng, k=k, identical=identical)
            for eps in eps_list:
                s = oracle_summary(pop, float(eps))
                us = np.array([s[f"u_{g}"] for g in pop.names])
                rows.append(
                    {
                        "population": i,
                        "identical_groups": identical,
                        "eps": float(eps),
                        "eff_marginal": s["eff_marginal"],
                        "eff_common": s["eff_common"],
                        "eff_grouped": s["eff_grouped"],
                        "thresholds_equal": bool(np.all(us == us[0]) or np.ptp(np.minimum(us, 1.0)) < 1e-9),
                        "marginal_violates_a_group": s["max_group_risk_marginal"] > eps + 1e-12,
                        "groups": "; ".join(f"w={g.weight:.2f} a={g.a:.2f} b={g.b:g}" for g in pop.groups),
                    }
                )
    return pd.DataFrame(rows)


def calibrated_efficiency(
    pop: Population,
    *,
    n_cal: int,
    eps: float,
    alpha: float,
    bound: str,
    sampling: str,
    calibrations: int,
    seed: int = 0,
    pi: float = 1.0,
):
    """Calibrated marginal PAC vs G-PAC against the oracle, over ``calibrations`` repetitions.

    G-PAC calibrates each group on its ``round(w_j n_cal)`` items (Algorithm 2); marginal PAC
    calibrates one threshold on ``n_cal`` mixture items. Rows: method x group (and ``__all__``)
    with the mean routed share, the oracle share, and the group violation rate ``P(R(u_hat|G_j) > eps)``.
    """
    import pandas as pd

    from ..calibrate import threshold

    rng = np.random.default_rng(seed)
    T = int(calibrations)
    names, w = pop.names, pop.weights
    loss, u, _ = pop.sample(n_cal, rng, size=T)
    thr_marg = threshold(loss, u, eps=eps, alpha=alpha, bound=bound, sampling=sampling, pi=pi, rng=rng)
    thr_group = {}
    for g, wj in zip(names, w):
        nj = max(2, int(round(wj * n_cal)))
        lj, uj = pop.group(g).sample((T, nj), rng)
        thr_group[g] = threshold(lj, uj, eps=eps, alpha=alpha, bound=bound, sampling=sampling, pi=pi, rng=rng)
    rows = []
    u_marg, u_grp = oracle_threshold(pop, eps), {g: oracle_threshold(pop, eps, g) for g in names}
    for method, get, oracle in (
        ("PAC", lambda g: thr_marg, lambda g: u_marg),
        ("G-PAC", lambda g: thr_group[g], lambda g: u_grp[g]),
    ):
        total, total_oracle = 0.0, 0.0
        for g, wj in zip(names, w):
            t = get(g)
            share = pop.share(t, g)
            risk = pop.risk(t, g)
            rows.append(
                {
                    "method": method,
                    "group": g,
                    "share": float(np.mean(share)),
                    "share_oracle": float(pop.share(oracle(g), g)),
                    "violation_rate": float(np.mean(risk > eps)),
                    "mean_risk": float(np.mean(risk)),
                }
            )
            total += wj * float(np.mean(share))
            total_oracle += wj * float(pop.share(oracle(g), g))
        rows.append(
            {
                "method": method,
                "group": "__all__",
                "share": total,
                "share_oracle": total_oracle,
                "violation_rate": np.nan,
                "mean_risk": np.nan,
            }
        )
    out = pd.DataFrame(rows)
    out["calibrations"] = T
    return out


# ============================================================================ partition gap (notebook 11)
#: Three groups that *are* intervals of the U axis (equal masses, so U ~ Uniform(0, 1) overall),
#: with loss curves that jump at the boundaries: 1-D clustering of U can recover the partition.
PARTITION_POPULATION = Population(
    (
        Group("low-U, risky", 1.0, a=0.3, b=0.0, lo=0.0, hi=1 / 3),  # flat 30 % loss
        Group("mid-U, safe", 1.0, a=0.15, b=1.0, lo=1 / 3, hi=2 / 3),  # 5-10 % loss
        Group("high-U, steep", 1.0, a=0.6, b=2.0, lo=2 / 3, hi=1.0),  # 27-60 % loss
    )
)
PARTITION_ORACLE = (1 / 3, 2 / 3)

PARTITION_PRESETS = {
    "fast": {
        "n_grid": [100, 300, 1000, 3000],
        "reps": 40,
        "cover_n": [300, 3000],
        "cover_reps": 60,
        "eps": 0.1,
        "alpha": 0.05,
        "bound": "hoeffding_bentkus",
        "sampling": "full",
        "k": 3,
        "search_grid": 12,
        "seed": 0,
    },
    "paper": {
        "n_grid": [100, 200, 500, 1000, 2000, 5000, 10000],
        "reps": 300,
        "cover_n": [200, 500, 1000, 3000],
        "cover_reps": 500,
        "eps": 0.1,
        "alpha": 0.05,
        "bound": "hoeffding_bentkus",
        "sampling": "full",
        "k": 3,
        "search_grid": 40,
        "seed": 0,
    },
}


def partition_gap_experiment(
    pop: Population,
    oracle_boundaries,
    *,
    n_grid,
    reps: int,
    eps: float,
    k: int = 3,
    methods=("kmeans", "quantile"),
    seed: int = 0,
):
    """δ and the efficiency loss of learned interval partitions, ``reps`` samples per ``n``.

    Each row: the learned boundaries' partition gap δ (Eq. partition-gap, exact from the
    population), the population efficiency of the learned partition with its own PAC-optimal
    thresholds, that of the oracle partition, and the loss ``Eff(G*) - Eff(G_hat)`` to compare
    with Theorem 3.4's ``2 δ``.
    """
    import pandas as pd

    from ..partition import fit_partition

    eff_star = interval_partition_efficiency(pop, oracle_boundaries, eps)
    rows = []
    for ni, n in enumerate(n_grid):
        rng = np.random.default_rng([seed, ni, int(n)])
        for r in range(int(reps)):
            _, u, _ = pop.sample(int(n), rng)
            for method in methods:
                b = fit_partition(u, k, method).boundaries
                delta = partition_gap(interval_confusion(pop, b, oracle_boundaries))
                eff = interval_partition_efficiency(pop, b, eps)
                rows.append(
                    {
                        "n": int(n),
                        "rep": r,
                        "method": method,
                        "delta": delta,
                        "eff_oracle": eff_star,
                        "eff_learned": eff,
                        "eff_loss": eff_star - eff,
                        "bound_2delta": 2 * delta,
                        "boundaries": ",".join(f"{x:.4f}" for x in b),
                    }
                )
    return pd.DataFrame(rows)


def cpac_coverage(
    pop: Population,
    *,
    n_grid,
    reps: int,
    eps: float,
    alpha: float,
    bound: str,
    sampling: str,
    k: int = 3,
    clustering: str = "kmeans",
    modes=("split", "joint"),
    oracle_boundaries=None,
    seed: int = 0,
):
    """Per-learned-group violation rate of C-PAC, split vs joint (Theorem 3.4).

    Each repetition draws ``n`` calibration items, fits :class:`gpac_utils.calibrate.CPAC` and
    computes the exact risk ``R(u_hat_j | G_hat_j)`` of every learned interval group.
    """
    import warnings

    import pandas as pd

    from ..calibrate import CPAC, GroupWarning

    rows = []
    for ni, n in enumerate(n_grid):
        rng = np.random.default_rng([seed, ni, int(n), 7])
        for r in range(int(reps)):
            loss, u, _ = pop.sample(int(n), rng)
            for mode in modes:
                model = CPAC(
                    eps,
                    alpha=alpha,
                    bound=bound,
                    sampling=sampling,
                    k=k,
                    clustering=clustering,
                    mode=mode,
                    seed=int(rng.integers(2**31)),
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GroupWarning)
                    model.fit(u, loss)
                b = model.partition_.boundaries
                thr = np.array([model.thresholds_.get(f"c{j}", -np.inf) for j in range(len(b) + 1)])
                risks = interval_group_risks(pop, b, thr)
                delta = (
                    partition_gap(interval_confusion(pop, b, oracle_boundaries))
                    if oracle_boundaries is not None
                    else np.nan
                )
                for j, (t, risk) in enumerate(zip(thr, risks)):
                    rows.append(
                        {
                            "n": int(n),
                            "rep": r,
                            "mode": mode,
                            "group": f"c{j}",
                            "threshold": float(t),
                            "risk": float(risk),
                            "violated": bool(risk > eps),
                            "delta": delta,
                        }
                    )
    return pd.DataFrame(rows)


def best_interval_partition(pop: Population, eps: float, grid: int = 40, k: int = 3):
    """Best ``k``-interval partition of [0, 1] on a grid of boundaries (k = 2 or 3), by efficiency."""
    pts = np.linspace(0, 1, int(grid) + 1)[1:-1]
    best = (-1.0, None)
    combos = itertools.combinations(pts, k - 1)
    for b in combos:
        e = interval_partition_efficiency(pop, list(b), eps)
        if e > best[0]:
            best = (e, b)
    return best[1], best[0]


# ============================================================================ finite-sample guarantee (notebook 12)
FINITE_PRESETS = {
    "fast": {
        "group": "flat",
        "n_cal": 100,
        "N_grid": [25, 100, 400, 1600],
        "t_grid": [0.0, 0.02, 0.05, 0.1, 0.2],
        "eps": 0.15,
        "alpha": 0.05,
        "calibrations": 1000,
        "settings": [["clt", "resample"], ["hoeffding_bentkus", "full"], ["clopper_pearson", "full"]],
        "pi": 0.5,
        "seed": 0,
    },
    "paper": {
        "group": "flat",
        "n_cal": 100,
        "N_grid": [25, 50, 100, 200, 400, 800, 1600, 3200],
        "t_grid": [0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3],
        "eps": 0.15,
        "alpha": 0.05,
        "calibrations": 20000,
        "settings": [["clt", "resample"], ["hoeffding_bentkus", "full"], ["clopper_pearson", "full"]],
        "pi": 0.5,
        "seed": 0,
    },
}


def finite_sample_experiment(
    pop: Population,
    group: str,
    *,
    n_cal: int,
    N_grid,
    t_grid,
    eps: float,
    alpha: float,
    calibrations: int,
    settings,
    pi: float = 0.5,
    seed: int = 0,
):
    r"""Theorem 3.2: ``P(R_hat > eps + t)`` against ``alpha + exp(-2 N t^2 / B^2)`` (B = 1).

    For each (bound, scheme) setting, ``calibrations`` thresholds are calibrated on ``n_cal`` items of
    ``group``; given a threshold, the test losses ``loss * 1{U <= u_hat}`` of ``N`` test items are
    i.i.d. Bernoulli(``R(u_hat | G)``), so the empirical test risk is drawn exactly as
    ``Binomial(N, R(u_hat)) / N``. Returns ``(rows, thresholds)``: the exceedance table and, per
    setting, the calibrated thresholds and their exact risks.
    """
    import pandas as pd

    from ..calibrate import threshold

    g = pop.group(group)
    T = int(calibrations)
    rows, draws = [], {}
    for si, (bound, scheme) in enumerate(settings):
        rng = np.random.default_rng([seed, si])
        loss, u = g.sample((T, int(n_cal)), rng)
        thr = threshold(loss, u, eps=eps, alpha=alpha, bound=bound, sampling=scheme, pi=pi, rng=rng)
        risk = g.risk(thr)
        alpha_hat = float(np.mean(risk > eps))
        draws[(bound, scheme)] = {"threshold": thr, "risk": risk}
        for N in N_grid:
            r_hat = rng.binomial(int(N), risk) / int(N)
            draws[(bound, scheme)][int(N)] = r_hat
            for t in t_grid:
                p = float(np.mean(r_hat > eps + t + 1e-12))
                b = alpha + math.exp(-2 * int(N) * t * t)
                rows.append(
                    {
                        "bound": bound,
                        "scheme": scheme,
                        "N_test": int(N),
                        "t": float(t),
                        "exceed_rate": p,
                        "mcse": float(math.sqrt(max(p * (1 - p), 1e-12) / T)),
                        "thm32_bound": min(b, 1.0),
                        "holds": p <= b + 3 * math.sqrt(max(p * (1 - p), 1e-12) / T),
                        "violation_rate": alpha_hat,
                        "calibrations": T,
                    }
                )
    return pd.DataFrame(rows), draws
