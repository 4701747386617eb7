r"""Audit a certificate on fresh labelled data, and recompute it from its recipe (``gpac audit``, ``gpac verify``).

**Audit** (:func:`audit`). A certificate promises, per group :math:`G_j`, that the risk of the
kind it certifies (``settings.risk``: :data:`gpac_utils.risks.RISKS`) is at most ``eps`` at its
threshold, with probability ``1 - alpha`` over the calibration data (Theorem 4.2 for G-PAC's joint
risk; Theorem 4.6 part 1 for C-PAC in split mode; for the routed risk, the fallback Learn-then-Test
procedure of :mod:`gpac_utils.risks`, not Theorem 4.2). A *finite* test set sees that risk with
noise: for the joint risk, Theorem 4.3 (``thm:empirical-known-grouping``) bounds the empirical
test risk by ``eps + t`` with probability at least ``1 - alpha - exp(-2 N_j t^2 / B^2)``. So a
held-out risk above ``eps`` is not yet a violation: a group whose risk is near ``eps`` shows
held-out risk above ``eps`` in up to about half of the splits.

The audit turns Theorem 4.3 (for the routed risk, its analogue given the number of routed items)
into a test, per group, of :math:`H_j: R_j \le \varepsilon` given the certificate (the
calibration data are fixed; the fresh items are independent of them):

* the *risk*: the certificate's :data:`~gpac_utils.risks.RISKS` entry evaluates the group's routed
  items (:attr:`~gpac_utils.risks.Risk.evaluate`, what :func:`~gpac_utils.experiment.run_experiment`
  reports as ``pop_risk``), read as the mean of one term in ``[0, B]`` per trial;
* the *trials*: for the joint risk :math:`E[\ell\,1\{U \le \hat u\}]` every item of the group
  (term :math:`\ell\,1\{U \le \hat u\}`); for the routed risk :math:`E[\ell \mid U \le \hat u]`
  the items routed to the non-thinking model (term :math:`\ell`), **conditional on their number**
  ``m``: given ``m``, they are i.i.d. draws of the group's routed items, so a test valid for a
  fixed sample size is valid given ``m``, hence unconditionally. No routed item: nothing to test
  (``"no routed items"``; the routed risk of an empty route is no violation).
* the *p-value*: losses binary by design (declared: ``binary=True``, ``gpac audit --binary``, or a
  certificate whose recipe's bound needs binary terms; every fresh loss must then be ``0`` or
  ``B``), the exact binomial tail
  :math:`P(\mathrm{Bin}(m, \varepsilon/B) \ge k)` — a loss with mean at most ``eps`` has a count
  stochastically below it; otherwise (even where the fresh losses happen to be all ``0`` or ``B``,
  since a loss that can take other values may have more variance): Hoeffding's
  :math:`\exp(-2 m t^2/B^2)` with :math:`t = (\hat R - \varepsilon)_+`, Theorem 4.3's own term.
* the *interval*: one-sided bounds at confidence ``1 - level/K``: exact Clopper–Pearson for binary
  losses, Hoeffding's otherwise. ``lower > eps`` exactly when the group is declared violated.
* the *verdict*: ``violated`` where the p-value is at most ``level / K``, ``K`` the number of
  groups tested (Bonferroni over groups), else ``consistent``. If every group's risk is at most
  ``eps``, the chance that any group is declared violated is at most ``level``: a ``violated``
  verdict is evidence, at that level, that the risk on this traffic exceeds ``eps`` (under that
  null it still happens with probability up to ``level``): the
  certificate is in its ``alpha`` failure event, the traffic differs from the calibration table
  (drift), or the certificate is not what it claims. Unconditionally (Theorem 4.3's reading), a
  group of a valid certificate is flagged with probability at most ``alpha + level / K``.

**Verify** (:func:`verify_certificate`). Recompute the certificate from the recorded settings (recipe, seed,
risk, correction, ...) on the recorded columns of a table, after checking the table's hashes
against the provenance; every threshold and every group entry must be bit-identical.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from .bounds import BOUNDS
from .calibrate import ALL, UNSEEN, GroupWarning
from .certificate import Certificate
from .checks import DataError, check_range, warn_level
from .risks import RISKS
from .verify import described, verify_certificate  # noqa: F401 (gpac verify: gpac_utils.verify)

__all__ = ["CONSISTENT", "VIOLATED", "NOT_TESTED", "routing_groups", "audit", "verify_certificate", "verdict_line"]

CONSISTENT, VIOLATED, NOT_TESTED = "consistent", "violated", "no routed items"


def routing_groups(cert: Certificate, cal, scores: np.ndarray, groups=None):
    """The labels a certificate's calibrator routes by, and the group each item is reported under.

    Known groups (G-PAC): ``groups`` itself (needed); learned groups (C-PAC): the calibrator's
    assignment of the scores; one group (PAC): ``"__all__"``.
    """
    kind = cert.kind
    if kind == "known":
        if groups is None:
            raise DataError(f"{cert.method} routes by known groups: give the group column")
        g = np.asarray(groups).astype(str)
        return g, g
    if kind == "learned":
        return None, cal.assign(scores)
    return None, np.full(len(scores), ALL)


def _pvalue_and_bounds(mean: float, m: int, eps: float, level: float, binary: bool):
    """p-value of ``mean <= eps`` for the mean of ``m`` terms in ``[0, 1]``, and one-sided bounds at
    ``1 - level`` (``binary``: terms 0 or 1, their count ``mean * m``)."""
    if binary:
        k = int(round(mean * m))
        p = float(stats.binom.sf(k - 1, m, eps))
        lower = 0.0 if k == 0 else float(stats.beta.ppf(level, k, m - k + 1))
        upper = 1.0 if k == m else float(stats.beta.ppf(1 - level, k + 1, m - k))
        return p, lower, upper
    p = math.exp(-2 * m * max(mean - eps, 0.0) ** 2)
    half = math.sqrt(math.log(1 / level) / (2 * m))
    return p, max(mean - half, 0.0), min(mean + half, 1.0)


def audit(cert: Certificate, scores, losses, groups=None, *, level: float = 0.05, binary: bool = False) -> pd.DataFrame:
    """Audit a certificate on fresh labelled items (module description).

    Parameters
    ----------
    cert : Certificate
        The certificate (:meth:`gpac_utils.certificate.Certificate.read`).
    scores, losses : array-like
        The fresh items' scores (the certificate's score) and losses in ``[0, loss_bound]``.
    groups : array-like, optional
        Their group labels (certificates of known groups).
    level : float, default 0.05
        The audit's family-wise level over the groups tested (Bonferroni).
    binary : bool, default False
        The loss takes only the values ``0`` and ``loss_bound`` by design (a correctness loss): use
        the exact binomial test. Also implied by a certificate whose recipe's bound needs binary
        terms. Never inferred from the fresh losses.

    Returns
    -------
    pandas.DataFrame
        One row per group: ``group``, ``status`` (the certificate's), ``n``, ``routed`` (items
        routed to the non-thinking model), ``trials`` (items the risk is averaged over), ``risk``
        (realised: the certificate's risk evaluated on the group's routed items by its
        :attr:`gpac_utils.risks.Risk.evaluate`, what :func:`~gpac_utils.experiment.run_experiment`
        reports as ``pop_risk``; NaN with no trials), ``lower``, ``upper`` (one-sided bounds at
        ``1 - level/K``), ``p_value``, ``verdict``; ``attrs``: ``eps``, ``risk_kind``, ``level``, ``K``,
        ``per_group_level``, ``binary``.
    """
    level = check_range("level", level)
    warn_level("level", level)
    st = cert.settings
    eps, bound, risk = float(st.eps), float(st.loss_bound), st.risk
    entry = RISKS[risk]  # how the risk is evaluated on routed items (run_experiment's pop_risk too)
    cal = cert.calibrator()
    s = np.asarray(scores, dtype=float)
    loss = np.asarray(losses, dtype=float)
    if s.shape != loss.shape or s.ndim != 1:
        raise DataError(f"scores and losses: need one of each per item, got shapes {s.shape} and {loss.shape}")
    bad = ~np.isfinite(loss) | (loss < 0) | (loss > bound)
    if bad.any():
        raise DataError(
            f"losses: must lie in [0, {bound:g}] (the certificate's loss_bound); bad at row {np.argmax(bad)}"
        )
    labels, named = routing_groups(cert, cal, s, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # unseen groups: their status says it
        cheap = s <= cal.thresholds_for(s, labels)
    z = loss / bound
    binary = bool(binary) or BOUNDS[st.recipe.bound].binary_terms
    if binary and not np.all((z == 0) | (z == 1)):
        bad = np.argmax((z != 0) & (z != 1))
        raise DataError(f"losses: a binary loss must be 0 or {bound:g} (the loss_bound); row {bad} is {loss[bad]:g}")
    statuses = {g: e["status"] for g, e in cert.groups.items()}
    rows = []
    for g in sorted(set(named.tolist())):
        at = named == g
        routed = int((at & cheap).sum())
        trials = routed if entry.conditional else int(at.sum())
        rows.append(
            {
                "group": g,
                "status": statuses.get(g, UNSEEN),
                "n": int(at.sum()),
                "routed": routed,
                "trials": trials,
                "risk": float(entry.evaluate(loss[at], cheap[at])) if trials else math.nan,
            }
        )
    k = max(sum(r["trials"] > 0 for r in rows), 1)
    for r in rows:
        if r["trials"] == 0:
            r.update(lower=math.nan, upper=math.nan, p_value=math.nan, verdict=NOT_TESTED)
            continue
        p, lo, hi = _pvalue_and_bounds(r["risk"] / bound, r["trials"], eps / bound, level / k, binary)
        r.update(lower=lo * bound, upper=hi * bound, p_value=p)
        r["verdict"] = VIOLATED if p <= level / k else CONSISTENT
    out = pd.DataFrame(
        rows, columns=["group", "status", "n", "routed", "trials", "risk", "lower", "upper", "p_value", "verdict"]
    )
    out.attrs.update(eps=eps, risk_kind=risk, level=level, K=k, per_group_level=level / k, binary=binary)
    return out


def verdict_line(report: pd.DataFrame) -> str:
    """One line: the verdict, the level and its multiplicity."""
    a = report.attrs
    bad = report.loc[report["verdict"] == VIOLATED, "group"].tolist()
    how = "exact binomial / Clopper-Pearson" if a["binary"] else "Hoeffding (Theorem 4.3)"
    head = f"{a['risk_kind']} risk, eps={a['eps']:g}: "
    tail = (
        f"at family-wise level {a['level']:g} over {a['K']} group(s) tested (Bonferroni: {a['per_group_level']:.3g} "
        f"each; {how})"
    )
    if bad:
        return head + f"VIOLATED in {len(bad)} group(s) {bad} " + tail
    return head + "consistent in every group " + tail
