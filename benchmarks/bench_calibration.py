"""Time calibration for every bound, n in {300, 1e4, 1e6} items, 1 and 100 groups.

Reference: the literal per-candidate loop of the paper's Algorithm 1 (CLT, resampling), at
n <= 1e4. Prints a table and, last, ``speedup_vs_literal_n1e4=<ratio>`` (vectorised clt vs the
literal loop, same data, one group, every distinct score a candidate).

Paper bounds run with the paper's ``resample`` scheme, valid bounds with ``bernoulli``;
label_prob = 0.5, alpha = 0.05, eps = 0.05, binary loss, candidates = "auto" (all distinct scores;
a 64-quantile grid for wsr). Usage: python benchmarks/bench_calibration.py [--quick]

The WSR bound runs through its fast path (:mod:`gpac_utils.wsr_fast`); the last lines time the plain
definition (:func:`gpac_utils.wsr.wsr_upper`, same bits) on one calibration of 1e4 items and on an
audit-like batch of 3,000 calibrations of 300 items, and print ``wsr_fast_vs_plain_...=<ratio>``.

Every time is the median of 5 runs (the literal loop and the n = 1e6 fits included; the WSR
plain-vs-fast lines: one run). Before the
table, the script checks that each fit gives the same bits as the plain composition of the public
steps (:func:`~gpac_utils.sampling.draw`, :func:`~gpac_utils.selection.candidate_grid`,
:func:`~gpac_utils.bounds.ucb`, :func:`~gpac_utils.selection.select`, group by group), and it prints
the cost of the one validation of a call (:func:`~gpac_utils.checks.check_xy`) in microseconds.
The last lines name the targets: ``fit_1e6x100_<valid default>_median_s=<seconds>`` and
``speedup_vs_literal_n1e4=<ratio>``.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
import warnings

import numpy as np
from scipy import stats

from gpac_utils import VALID, Recipe, bounds, checks, sampling, selection, wsr, wsr_fast
from gpac_utils.calibrate import GPAC, PAC, GroupWarning, factorize_groups

# The timed fits include groups too small to certify anything: their warnings are not what is measured.
warnings.simplefilter("ignore", GroupWarning)


def population(n, groups, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n).astype(str)
    u = rng.random(n)
    loss = (rng.random(n) < 0.2 * u).astype(float)
    return u, loss, g


def literal_algorithm_1(u, losses, eps, alpha, label_prob, seed=0):
    """Paper Algorithm 1 + max rule, written as in the paper: one pass over the m terms per candidate."""
    rng = np.random.default_rng(seed)
    n = len(u)
    m = int(math.ceil(n / label_prob))
    z_list, u_list = [], []
    for _ in range(m):
        i = rng.integers(n)
        xi = rng.random() < label_prob
        z_list.append(xi * losses[i] / label_prob)
        u_list.append(u[i])
    Z, Ut = np.array(z_list), np.array(u_list)
    zq = stats.norm.ppf(1 - alpha)
    best = -math.inf
    for c in np.unique(u):
        Zc = Z * (Ut <= c)
        mu = Zc.mean()
        sd = math.sqrt(((Zc - mu) ** 2).sum() / (m - 1))
        if mu + zq * sd / math.sqrt(m) <= eps:
            best = max(best, c)
    return best


def wsr_plain_vs_fast(n, calibrations, seed=0):
    """Seconds of the plain and the fast WSR curves on ``calibrations`` calibrations of ``n`` items (same bits)."""
    rng = np.random.default_rng(seed)
    u = rng.random((calibrations, n))
    loss = (rng.random((calibrations, n)) < 0.2 * u).astype(float)
    d = sampling.draw(u, loss, "bernoulli", 0.5, rng)
    z, s, cand, _ = bounds._as_batch(d.z, d.scores, selection.candidate_grid(u, "auto", "wsr"))
    term_range = np.asarray(d.term_range, float).reshape(-1, 1)
    out = {}
    x = z / term_range

    def plain_climb():  # one wsr_upper per calibration (tests/test_bounds_exact.py: the same bits)
        return term_range * np.stack(
            [wsr.wsr_upper(np.where(s[b] <= cand[b][:, None], x[b], 0.0), 0.05) for b in range(len(cand))]
        )

    plain = timed(lambda: out.setdefault("plain", plain_climb()), repeat=1)
    fast = timed(lambda: out.setdefault("fast", wsr_fast.wsr(z, s, cand, 0.05, term_range)), repeat=1)
    assert np.array_equal(out["plain"], out["fast"])
    return plain, fast


def timed(fn, repeat=5):
    """The median wall time of ``repeat`` runs of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def plain_fit(u, losses, groups, recipe, eps=0.05, alpha=0.05, seed=0):
    """The thresholds of a fit computed by the public steps one group at a time (the reference bits)."""
    rng = np.random.default_rng(seed)
    codes, names = factorize_groups(groups)
    sequential = bounds.BOUNDS[recipe.bound].sequential
    out = {}
    for j, name in enumerate(names.tolist()):
        s, loss = u[codes == j], losses[codes == j]
        d = sampling.draw(s, loss, recipe.sampling, recipe.label_prob, rng, shuffle=sequential)
        cand = selection.candidate_grid(s, recipe.candidates, recipe.bound)
        curve = bounds.ucb(recipe.bound, d.z, d.scores, cand, alpha, d.term_range)
        out[name] = float(selection.select(cand, curve, eps, recipe.rule))
    return out


def check_same_bits(n=20_000, groups=7):
    """Every bound, both schemes: a fit's thresholds are those of :func:`plain_fit`, bit for bit."""
    u, loss, g = population(n, groups, seed=1)
    for bound in bounds.BOUNDS:
        for scheme in ("resample", "bernoulli"):
            recipe = Recipe(bound, scheme, 0.5)
            fitted = GPAC(eps=0.05, alpha=0.05, recipe=recipe).fit(u, loss, g).thresholds_
            assert fitted == plain_fit(u, loss, g, recipe), f"{bound}/{scheme}: not the plain path's bits"
    print(f"same bits: every bound x (resample, bernoulli), {groups} groups of {n // groups} items")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip n = 1e6")
    a = ap.parse_args()
    sizes = [300, 10_000] + ([] if a.quick else [1_000_000])
    check_same_bits()
    for n in (10_000, 1_000_000):
        u, loss, g = population(n, 100)
        sec = timed(functools.partial(checks.check_xy, u, loss, g, min_items=1))
        print(f"validation of one call (check_xy: scores, losses, groups), n = {n}: {sec * 1e6:.0f} us")
    rows = []
    for n in sizes:
        for groups in (1, 100):
            if groups > 1 and n < 100 * 30:
                continue
            u, loss, g = population(n, groups)
            for bound, entry in bounds.BOUNDS.items():
                kind = entry.kind
                if entry.sequential and n == 1_000_000 and groups == 100:
                    rows.append((n, groups, bound, kind, float("nan")))
                    continue
                sampling = "resample" if not entry.valid else "bernoulli"
                kw = dict(eps=0.05, alpha=0.05, recipe=Recipe(bound, sampling, 0.5))
                fn = (
                    functools.partial(PAC(**kw).fit, u, loss)
                    if groups == 1
                    else functools.partial(GPAC(**kw).fit, u, loss, g)
                )
                rows.append((n, groups, bound, kind, timed(fn)))
            if groups == 1 and n <= 10_000:
                rows.append(
                    (
                        n,
                        1,
                        "literal Alg. 1 (clt)",
                        "reference",
                        timed(functools.partial(literal_algorithm_1, u, loss, 0.05, 0.05, 0.5)),
                    )
                )
    print(f"{'n':>9} {'groups':>6}  {'bound':<22} {'kind':<9} {'seconds':>9}")
    for n, groups, bound, kind, sec in rows:
        shown = "   (skip)" if math.isnan(sec) else f"{sec:9.4f}"
        print(f"{n:>9} {groups:>6}  {bound:<22} {kind:<9} {shown}")
    lit = next(s for n, g, b, k, s in rows if n == 10_000 and b.startswith("literal"))
    vec = next(s for n, g, b, k, s in rows if n == 10_000 and g == 1 and b == "clt")
    default = next((s for n, g, b, k, s in rows if n == 1_000_000 and g == 100 and b == VALID.bound), None)
    if default is not None:
        print(f"fit_1e6x100_{VALID.bound}_median_s={default:.3f}")
    print(f"speedup_vs_literal_n1e4={lit / vec:.1f}")
    for name, n, cals in (("n1e4", 10_000, 1), ("audit_3000x300", 300, 3000)):
        plain, fast = wsr_plain_vs_fast(n, cals)
        print(f"wsr plain {plain:.3f} s, fast {fast:.3f} s (same bits): wsr_fast_vs_plain_{name}={plain / fast:.1f}")


if __name__ == "__main__":
    main()
