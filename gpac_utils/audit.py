r"""Audit a certificate on fresh data as a gate; recompute it from its recipe (``gpac audit``, ``gpac verify``).

**Audit** (:func:`audit`). A certificate promises, per group :math:`G_j`, that the risk of the
kind it certifies (``settings.risk``: :data:`gpac_utils.risks.RISKS`) is at most ``eps`` at its
threshold, with probability ``1 - alpha`` over the calibration data (Theorem 4.2 for G-PAC's joint
risk, with the package's first-crossing rule, a fixed-sequence test, for the threshold chosen from
the data; Theorem 4.6 part 1 for C-PAC in split mode; for the routed risk, the fallback
Learn-then-Test procedure of :mod:`gpac_utils.risks`, not Theorem 4.2). A *finite* test set sees
that risk with noise: for G-PAC's joint risk with known groups, Theorem 4.3
(``thm:empirical-known-grouping``) bounds the empirical test risk of group ``j`` over its ``N_j``
test items by ``eps + t`` with probability at least ``1 - alpha - exp(-2 N_j t^2 / B^2)``. So a
held-out risk above ``eps`` is not yet a violation: a group whose risk is near ``eps`` shows
held-out risk above ``eps`` in up to about half of the splits.

The audit's test is the conditional step in the proof of Theorem 4.3 (Appendix C: given the
threshold, the group's test losses are i.i.d. and Hoeffding's inequality bounds their mean), not
the theorem itself; for the routed risk, the package's analogue given the number of routed items
(not the paper's). Per group the certificate **certifies** (a threshold) it tests
:math:`H_j: R_j \le \varepsilon` given the certificate (the calibration data are fixed; the fresh
items are independent of them, and the certificate was fixed before they were looked at: one
re-calibrated, or whose ``eps`` or score was chosen, until the audit passes depends on them). The
terms' mean is the group's risk only if the fresh items are a sample of the group's traffic drawn
without regard to their losses and, for the joint risk, without regard to their scores or routes
(a table of production labels that grades only the cheap answers estimates
:math:`E[\ell \mid U \le \hat u, G_j]`, not the joint risk):

* the *groups*: the certificate's. A label of the data that the certificate lacks is not tested
  and not counted (one :class:`AuditWarning` lists them, with a near match: the same label up to
  case and whitespace). A group that always thinks (threshold ``null``: too few items, no feasible
  threshold, unseen) routes nothing, so the router adds no loss **by construction** (for the joint
  risk the risk is 0; the routed risk is undefined): verdict :data:`BY_CONSTRUCTION`, not tested,
  not counted.
* the *groups of a collection* (several groupings: Min-G-PAC, Shift-G-PAC, Path-G-PAC,
  :mod:`gpac_utils.multigroup`): every group of every grouping (``subject=algebra``,
  ``language=fr``, named as the certificate names them), each a hypothesis :math:`H_G: R(\hat u \mid
  G) \le \varepsilon`, its trials the fresh items with that label in that column, each routed by
  its *cell's* threshold (:func:`collection_groups`, as ``gpac route`` routes it): an item is a trial
  of one group per grouping. Only the joint risk (a collection certificate with ``risk="routed"``
  does not read). A group is tested when some cell holding it has a threshold (:func:`routing`);
  one whose every cell always thinks is :data:`BY_CONSTRUCTION`, whatever its status (a group whose
  status always thinks has no such cell). ``K`` is the number of groups the certificate routes,
  over all groupings, tested or not (fixed by the certificate), not the number with trials:
  given only which fresh items are in ``G`` (the items being i.i.d. and independent of the
  calibration), ``G``'s items are i.i.d. from ``G``'s law, so each test holds at ``level / K``
  given its number of trials, hence unconditionally, and the union bound over the ``K`` groups
  keeps the family-wise level, though the tests share items (Bonferroni needs no independence).
  Given *all* items' labels they would not be (``G``'s items would come from their cells in the
  proportions drawn), and which groups of the other groupings have trials depends on those labels;
  a ``K`` counting only the groups with trials is therefore not used. Labels of the data the
  certificate lacks: one :class:`AuditWarning` per grouping; their items always think (their cells
  are not the certificate's) and are trials, with term 0, of their other groupings' groups.
* the *risk*: the certificate's :data:`~gpac_utils.risks.RISKS` entry evaluates the group's routed
  items (:attr:`~gpac_utils.risks.Risk.evaluate`, what :func:`~gpac_utils.experiment.run_experiment`
  reports as ``pop_risk``), read as the mean of one term in ``[0, B]`` per trial;
* the *trials*: for the joint risk :math:`E[\ell\,1\{U \le \hat u\}]` every item of the group
  (term :math:`\ell\,1\{U \le \hat u\}`); for the routed risk :math:`E[\ell \mid U \le \hat u]`
  the items routed to the non-thinking model (term :math:`\ell`), **conditional on their number**
  ``m``: given ``m``, they are i.i.d. draws of the group's routed items, so a test valid for a
  fixed sample size is valid given ``m``, hence unconditionally. A certified group without trials
  (no item, or for the routed risk no routed item) is *not tested* (:data:`NO_ITEMS`,
  :data:`NO_ROUTED`).
* the *p-value*: losses binary by design (declared: ``binary=True``, ``gpac audit --binary``, or a
  certificate whose recipe's bound needs binary terms; every fresh loss must then be ``0`` or
  ``B``), the exact binomial tail
  :math:`P(\mathrm{Bin}(m, \varepsilon/B) \ge k)` — a loss with mean at most ``eps`` has a count
  stochastically below it; otherwise (even where the fresh losses happen to be all ``0`` or ``B``:
  Clopper–Pearson then bounds :math:`P(\ell = B)`, which is the mean only if no other value can
  occur, and values missed by the sample still count in the mean): Hoeffding's
  :math:`\exp(-2 m t^2/B^2)` with :math:`t = (\hat R - \varepsilon)_+`, Theorem 4.3's own term.
* the *bounds*: one-sided, each at confidence ``1 - level/K``: exact Clopper–Pearson for binary
  losses, Hoeffding's otherwise; ``K`` the number of certified groups tested (Bonferroni; a
  collection's: every group it routes, above). ``K``
  depends only on the group labels (joint risk) or on the labels and the route indicators
  :math:`1\{U \le \hat u\}` (routed risk). Given those, each group's trials are i.i.d. from the
  group's law (joint) or its routed law (routed), so each test holds its level given ``K``, hence
  unconditionally.
* the *verdict*: :data:`VIOLATED` where the p-value is at most ``level / K`` (equivalently the lower
  bound exceeds ``eps``), :data:`CONFIRMED` where the upper bound is at most ``eps``, else
  :data:`INCONCLUSIVE`. A *wrong* verdict (here and in :mod:`gpac_utils.audit_sequential`) is a
  violated group whose risk is at most ``eps`` or a confirmed one whose risk exceeds it; a group
  can be wrong in one direction only (which depends on its risk), each with probability at most
  ``level / K``, so the chance of any wrong verdict is at most ``level`` — for **one look** at the
  data (a gate re-run on new rows as held-out data accumulate inflates it;
  ``gpac audit --sequential`` is valid at every look). A violated verdict is evidence, at
  family-wise level ``level``, that the certificate is in its ``alpha`` failure event, the traffic
  differs from the calibration table (drift), or the certificate is not what it claims. A
  confirmed one says that, at family-wise level ``level`` (one look, given the certificate), the
  risk of its threshold on the traffic the audit items were drawn from is at most ``eps``; it does
  not re-establish the calibration's ``1 - alpha`` statement, and says nothing about later traffic.
  If the audit items are drawn from the calibration population, then over the calibration and
  audit draws a given group is flagged with probability at most ``alpha + level / K``. This is per
  group: Theorem 4.2 is not simultaneous over groups, so the chance that some group is flagged is
  at most ``K alpha + level``.
* the *power*: per tested group, ``detectable`` is the risk it would flag with probability
  :data:`POWER` (four times in five) at its number of trials and the per-group level ``level / K``
  (:func:`detectable_risk`). For the exact test it is exact: the risk where
  :math:`P(\mathrm{Bin}(m, r/B) \ge k^*) = 0.8`, ``k*`` the smallest count the test flags, found by
  bisection. For Hoeffding's test it is the closed form
  :math:`\varepsilon + B\sqrt{\log(K/\mathrm{level})/(2m)} + B\sqrt{\log(1/(1-0.8))/(2m)}`: Hoeffding's
  inequality for the lower tail of the mean, so **every** loss distribution with that risk is
  flagged at least four times in five (a particular one may be flagged at a lower risk). For the
  routed risk, ``m`` is the **observed** number of routed items and the power is conditional on
  it: the test itself is conditional on ``m`` (above), ``m`` depends on the route indicators and
  not on the routed items' losses, and the audit actually run had ``m`` trials; the expected count would
  describe audits of another size, and it is unknown (estimated by ``m`` itself).

**The gate** (:func:`gate`): exit :data:`EXIT_PASS` (0) only when every certified group was tested
(or named in ``allow_untested``), none is violated, and every tested group was large enough: its
``detectable`` is at most the ``detectable`` setting (default ``2 eps``, capped at ``B``), or it is
confirmed (its upper bound already shows its risk at most ``eps``, at any size; the size
requirement is there so that an *inconclusive* verdict cannot pass on too few items). Otherwise,
in this order:
:data:`EXIT_VIOLATED` (3) for a violated group, :data:`EXIT_UNTESTED` (4) for a certified group not
tested and not allowed, :data:`EXIT_TOO_SMALL` (5) for a tested group too small to flag the
``detectable`` risk four times in five.

**Fresh data** (:func:`check_fresh`). Audit items must be items the certificate never saw: a
certificate that records its calibration items' ids (``provenance.item_ids``,
:func:`gpac_utils.certificate.id_digests`) refuses audit ids among them, in any order, subset or
file format. Any certificate with provenance refuses a copy of the calibration columns (the id
column's SHA-256, or the score's and the loss's both, equal to the provenance's: the calibration
table under other ids); one that records no ids (older files) refuses only that, with a warning
that overlap cannot be checked.

**Verify** (:func:`gpac_utils.verify.verify_certificate`). Recompute the certificate from the
recorded settings (recipe, seed, risk, correction, ...) on the recorded columns of a table, after
checking the table's hashes against the provenance; every threshold and every group entry must be
bit-identical.
"""

from __future__ import annotations

import importlib
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

from .bounds import BOUNDS
from .calibrate import ALL, GroupWarning
from .certificate import Certificate, column_sha256, id_digests
from .checks import DataError, ParameterError, check_range, warn_level
from .group_collection import SEP, collection, split_cell
from .risks import RISKS

__all__ = [
    "VIOLATED",
    "CONFIRMED",
    "INCONCLUSIVE",
    "BY_CONSTRUCTION",
    "NO_ITEMS",
    "NO_ROUTED",
    "POWER",
    "EXIT_PASS",
    "EXIT_VIOLATED",
    "EXIT_UNTESTED",
    "EXIT_TOO_SMALL",
    "AuditWarning",
    "collection_groups",
    "routing_groups",
    "routing",
    "detectable_risk",
    "check_fresh",
    "model_scores",
    "SCORE_MODEL",
    "audit",
    "gate",
    "verdict_line",
]

#: The verdicts of a tested group.
VIOLATED, CONFIRMED, INCONCLUSIVE = "violated", "confirmed", "inconclusive"
#: The verdict of a group that always thinks (routes nothing): not tested, not counted in ``K``.
BY_CONSTRUCTION = "risk 0 by construction"
#: The verdicts of a certified group without trials: no item of it, or (routed risk) none routed.
NO_ITEMS, NO_ROUTED = "not tested: no items", "not tested: no routed items"
#: The power at which ``detectable`` is stated: a risk flagged four times in five.
POWER = 0.8
#: ``gpac audit``'s exit statuses beyond 0 (pass), 1 (bad input) and 2 (usage): see :func:`gate`.
EXIT_PASS, EXIT_VIOLATED, EXIT_UNTESTED, EXIT_TOO_SMALL = 0, 3, 4, 5
#: The report's ``gate`` column: what each group contributes to the exit status.
PASS, UNTESTED, ALLOWED, TOO_SMALL, NOT_COUNTED = "pass", "untested", "untested (allowed)", "too small", "-"
COLUMNS = [
    "group",
    "status",
    "n",
    "routed",
    "trials",
    "risk",
    "lower",
    "upper",
    "p_value",
    "detectable",
    "verdict",
    "gate",
]


class AuditWarning(UserWarning):
    """Something the audit could not test or check: labels the certificate lacks, overlap not checkable."""


def collection_groups(cert: Certificate, groups, n: int):
    """A collection certificate's groups of ``n`` items, as its calibrator routes by them, and their
    :class:`~gpac_utils.group_collection.Collection` (every group of every grouping, each item's memberships and cell).

    ``groups``: the label columns of its groupings (a dict or a DataFrame that holds them, named by the groupings;
    its other columns are not read), one label array (a certificate of one label column) or a boolean membership
    matrix (one calibrated on a matrix). One line naming ``groups`` for a grouping it lacks, or for bad labels.
    """
    if groups is None:
        raise ParameterError(
            f"groups: a {cert.method} certificate routes by the cells of its groupings {list(cert.group_columns)}; "
            "give their label columns"
        )
    if cert.groupings and isinstance(groups, dict | pd.DataFrame):
        names = [str(c) for c in groups]
        missing = [g for g in cert.groupings if g not in names]
        if missing:
            raise ParameterError(
                f"groups: no column {missing[0]!r} of the certificate's groupings {list(cert.groupings)}; got {names}"
            )
        groups = {g: np.asarray(groups[g]) for g in cert.groupings}
    return groups, collection(groups, n, every_group_used=False)


def routing_groups(cert: Certificate, cal, scores: np.ndarray, groups=None):
    """The labels a certificate's calibrator routes by, and the group each item is reported under.

    Known groups (G-PAC): ``groups`` itself (needed); learned groups (C-PAC): the calibrator's
    assignment of the scores; one group (PAC): ``"__all__"``; a collection of groups (several
    groupings): the label columns of its groupings (:func:`collection_groups`) and each item's cell
    (an item is in one group of each grouping: :func:`audit` reports each group of every grouping).
    """
    kind = cert.kind
    if kind == "collection":
        labels, coll = collection_groups(cert, groups, len(scores))
        return labels, coll.cells
    if kind == "known":
        if groups is None:
            raise DataError(f"{cert.method} routes by known groups: give the group column")
        g = np.asarray(groups).astype(str)
        return g, g
    if kind == "learned":
        return None, cal.assign(scores)
    return None, np.full(len(scores), ALL)


def _routed(cert: Certificate, scores: np.ndarray, groups=None):
    """The group each item is reported under (:func:`routing_groups`) and whether the certificate routes it to
    the non-thinking model (labels the certificate lacks think, without a ``GroupWarning``: the callers warn)."""
    cal = cert.calibrator()
    labels, named = routing_groups(cert, cal, scores, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        return named, scores <= cal.thresholds_for(scores, labels)


def _members(cert: Certificate, scores: np.ndarray, groups=None):
    """Each item's groups and route: the groups seen (the certificate's names: ``column=label`` for a collection's
    label columns), a boolean ``(n, m)`` membership matrix, and whether the certificate routes each item to the
    non-thinking model (by its cell's threshold for a collection, as ``gpac route`` routes it; labels and cells the
    certificate lacks think, without a ``GroupWarning``: :func:`audit` warns)."""
    if cert.kind != "collection":  # a partition: each item in the one group it is reported under
        named, cheap = _routed(cert, scores, groups)
        names = np.unique(np.asarray(named).astype(str))
        return names.tolist(), np.asarray(named).astype(str)[:, None] == names[None, :], cheap, None
    labels, coll = collection_groups(cert, groups, len(scores))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        return coll.names, coll.member, scores <= cert.calibrator().thresholds_for(scores, labels), coll


def _cell_parts(cert: Certificate, cell: str) -> list[str]:
    """A collection certificate's cell's groups (a label may hold :data:`~gpac_utils.group_collection.SEP`)."""
    return [cell] if cell in cert.groups else split_cell(cell, cert.groupings) or cell.split(SEP)


def routing(cert: Certificate) -> set[str]:
    """The certificate's groups whose items it can route to the non-thinking model (the audit tests these).

    A partition's: those with a threshold. A collection's: those in a cell with a threshold. A cell has one only
    if each of its groups routes (its status certified or otherwise routing:
    :func:`gpac_utils.multigroup.check_cells`), so a group whose status always thinks has no such cell; a
    certified group whose every cell thinks (another grouping's group of each always thinks) routes nothing either;
    a certified group with some cells that think and some that route is tested (a cell not in the certificate,
    seen first in the data, thinks).
    """
    if cert.kind != "collection":
        return {g for g, e in cert.groups.items() if e["threshold"] is not None}
    return {g for c, t in cert.thresholds.items() if t is not None for g in _cell_parts(cert, c)}


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


def _critical_count(m: int, eps: float, level: float) -> int | None:
    """The smallest count ``k`` of ``m`` binary terms the exact test flags (``P(Bin(m, eps) >= k) <= level``)."""
    k = np.arange(m + 1)
    hit = np.flatnonzero(stats.binom.sf(k - 1, m, eps) <= level)
    return int(hit[0]) if hit.size else None


def detectable_risk(
    m: int, eps: float, level: float, *, binary: bool, power: float = POWER, loss_bound: float = 1.0
) -> float:
    """The risk a group of ``m`` trials is flagged at with probability ``power``, by the audit's test at ``level``.

    Parameters
    ----------
    m : int
        The trials (the group's items; for the routed risk, its routed items, observed).
    eps : float
        The certified risk level.
    level : float
        The group's own level (``level / K`` in :func:`audit`).
    binary : bool
        The exact binomial test (terms ``0`` or ``loss_bound``): the exact risk where the test's
        rejection probability equals ``power``, by bisection on :func:`scipy.stats.binom`.
        Otherwise Hoeffding's test: the closed form
        ``eps + B sqrt(log(1/level)/(2m)) + B sqrt(log(1/(1-power))/(2m))``, at which every loss
        distribution in ``[0, B]`` is flagged with probability at least ``power``.
    power : float, default :data:`POWER`
        The probability of a flag.
    loss_bound : float, default 1
        ``B``, the terms' range.

    Returns
    -------
    float
        The risk, in the loss's units; ``inf`` when no risk up to ``B`` is flagged that often.

    Examples
    --------
    >>> r = detectable_risk(93, 0.15, 0.05 / 6, binary=True)
    >>> round(r, 3), round(float(stats.binom.sf(_critical_count(93, 0.15, 0.05 / 6) - 1, 93, r)), 6)
    (0.293, 0.8)
    """
    e, b = eps / loss_bound, loss_bound
    if m <= 0:
        return math.inf
    if not binary:
        r = e + math.sqrt(math.log(1 / level) / (2 * m)) + math.sqrt(math.log(1 / (1 - power)) / (2 * m))
        return r * b if r <= 1 else math.inf
    k = _critical_count(m, e, level)
    if k is None:
        return math.inf
    # P(Bin(m, r) >= k) rises from 0 (r = 0; k >= 1 as level < 1) to 1 (r = 1): one root
    return b * optimize.bisect(lambda r: stats.binom.sf(k - 1, m, r) - power, 0.0, 1.0, xtol=1e-12)


def _near(label: str, known) -> str | None:
    """A label of ``known`` equal to ``label`` up to case and whitespace (``'algebra '`` -> ``'Algebra'``)."""
    fold = {" ".join(str(g).split()).casefold(): g for g in known}
    return fold.get(" ".join(label.split()).casefold())


def _listed(labels, known, counts) -> str:
    """The first five labels, each with its items and a near match."""
    shown = []
    for g in labels[:5]:
        hint = _near(g, known)
        shown.append(f"{g!r} ({counts[g]} items{'' if hint is None else f'; did you mean {hint!r}?'})")
    more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
    return ", ".join(shown) + more


#: The certificate's provenance field that records a score model (the router-based score's artefact).
SCORE_MODEL = "score_model"


def model_scores(cert: Certificate, frame: pd.DataFrame, *, score_col=None, path=None, source: str = "data"):
    """With a recorded score model (``provenance.score_model``): the scores recomputed from the frame's text
    column by the hash-checked model; ``None`` for a certificate without one.

    Parameters
    ----------
    cert : Certificate
        The certificate.
    frame : pandas.DataFrame
        The audit items.
    score_col : str, optional
        The frame's score column: where it differs from the model's scores, an :class:`AuditWarning`
        (the audit routes on the model's).
    path : path, optional
        Where the model file is (default: the path the certificate records); its SHA-256 must be the
        recorded one.
    source : str, default "data"
        What the messages call the frame.

    Raises
    ------
    ParameterError
        ``path`` given for a certificate that records no score model.
    DataError
        A model file whose SHA-256 differs, or a frame without the model's text column.
    """
    record = (cert.provenance or {}).get(SCORE_MODEL) if cert.has_provenance else None
    if not record:
        if path is not None:
            raise ParameterError("score_model: the certificate records no score model to recompute scores with")
        return None
    path = Path(path or record["path"])
    router_model = importlib.import_module("gpac_utils.llm.router_model")
    model = router_model.load_router_model(path, record["sha256"])
    if model.text not in frame.columns:
        raise DataError(
            f"{source}: the score model {path} reads the {model.text!r} column; it has {list(frame.columns)}"
        )
    scores = model.score_texts(frame[model.text].astype(str).tolist())
    if score_col is not None and score_col in frame.columns:
        given = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(float)
        differ = router_model.scores_differ(given, scores)  # one tolerance with calibrate and verify
        if differ.any():
            warnings.warn(
                f"column {score_col!r} differs from the score model's scores by more than "
                f"{router_model.SCORE_TOLERANCE:g} in {int(differ.sum())} row(s) "
                f"(first: row {int(np.argmax(differ))}); the audit routes on the model's",
                AuditWarning,
                stacklevel=2,
            )
    return scores


def check_fresh(cert: Certificate, *, ids=None, columns=None, source: str = "data") -> None:
    """Refuse audit data that shares items with the certificate's calibration table (module description).

    Parameters
    ----------
    cert : Certificate
        The certificate.
    ids : array-like, optional
        The audit items' ids. Needed for a certificate that records its calibration ids
        (``provenance.item_ids``).
    columns : mapping, optional
        ``{role: values}`` for ``score``, ``loss`` and ``id``: compared with the provenance's column
        hashes (a copy of the calibration columns, in their order).
    source : str, default "data"
        What the messages call the data.

    Raises
    ------
    DataError
        One line naming how many items are calibration items and the first one.
    ParameterError
        Ids missing for a certificate that records its calibration ids.

    Warns
    -----
    AuditWarning
        A certificate that records no calibration ids: overlap cannot be checked.
    """
    recorded = cert.calibration_ids
    if recorded is not None:
        if ids is None:
            raise ParameterError(
                "ids: the certificate records its calibration items' ids; give the audit items' ids to check "
                "that none of them was calibrated on"
            )
        ids = np.asarray(ids, dtype=object)
        shared = np.fromiter((d in recorded for d in id_digests(ids)), bool, len(ids))
        if shared.any():
            raise DataError(
                f"{source}: {int(shared.sum())} of {len(ids)} item(s) are calibration items of the certificate "
                f"(first id {ids[np.argmax(shared)]!r}); audit on items it never saw"
            )
    prov = cert.provenance if cert.has_provenance else None
    hashes = {role: c["sha256"] for role, c in ((prov or {}).get("columns") or {}).items()}
    same = {
        role
        for role, values in (columns or {}).items()
        if values is not None and role in hashes and column_sha256(np.asarray(values)) == hashes[role]
    }
    if "id" in same or {"score", "loss"} <= same:
        which = "id column is" if "id" in same else "score and loss columns are"
        raise DataError(
            f"{source}: its {which} the calibration table's (the SHA-256 in the certificate's provenance); "
            "audit on items the certificate never saw"
        )
    if recorded is None:
        warnings.warn(
            "the certificate records no calibration item ids (an older file, or calibrated without an id column): "
            "overlap of the audit items with the calibration items cannot be checked, only a copy of its columns is "
            "refused",
            AuditWarning,
            stacklevel=3,
        )


def audit(
    cert: Certificate,
    scores,
    losses,
    groups=None,
    *,
    ids=None,
    level: float = 0.05,
    binary: bool = False,
    detectable: float | None = None,
    power: float = POWER,
    allow_untested=(),
    source: str = "data",
) -> pd.DataFrame:
    """Audit a certificate on fresh labelled items, per certified group (module description).

    Parameters
    ----------
    cert : Certificate
        The certificate (:meth:`gpac_utils.certificate.Certificate.read`).
    scores, losses : array-like
        The fresh items' scores (the certificate's score) and losses in ``[0, loss_bound]``.
    groups : array-like, optional
        Their group labels (certificates of known groups).
    ids : array-like, optional
        Their ids: checked against the calibration items' (:func:`check_fresh`; needed when the
        certificate records them).
    level : float, default 0.05
        The audit's family-wise level over the certified groups tested (Bonferroni), for one look.
    binary : bool, default False
        The loss takes only the values ``0`` and ``loss_bound`` by design (a correctness loss): use
        the exact binomial test. Also implied by a certificate whose recipe's bound needs binary
        terms. Never inferred from the fresh losses.
    detectable : float, optional
        The risk each inconclusive group must be able to flag with probability ``power`` for the
        gate to pass; in ``(eps, loss_bound]``; default ``min(2 eps, loss_bound)``.
    power : float, default :data:`POWER`
        The probability of a flag at which ``detectable`` is stated.
    allow_untested : iterable of str, default ()
        Certified groups whose absence (no trials) is accepted by the gate.
    source : str, default "data"
        What messages call the data.

    Returns
    -------
    pandas.DataFrame
        One row per group of the certificate: ``group``, ``status`` (the certificate's), ``n``,
        ``routed`` (items routed to the non-thinking model), ``trials`` (items the risk is
        averaged over), ``risk`` (realised: the certificate's risk evaluated on the group's routed
        items by its :attr:`gpac_utils.risks.Risk.evaluate`, what
        :func:`~gpac_utils.experiment.run_experiment` reports as ``pop_risk``; 0 for a group that
        always thinks; NaN without trials), ``lower``, ``upper`` (one-sided bounds at
        ``1 - level/K``), ``p_value``, ``detectable`` (:func:`detectable_risk` at ``level/K``),
        ``verdict`` and ``gate`` (``pass``, ``violated``, ``untested``, ``untested (allowed)``,
        ``too small``, or ``-`` for a group not counted). ``attrs``: ``eps``, ``risk_kind``,
        ``level``, ``K``, ``per_group_level``, ``binary``, ``power``, ``detectable``,
        ``loss_bound``, ``unknown`` (label -> items of the data's labels the certificate lacks),
        ``allowed``.

    Raises
    ------
    DataError
        Scores and losses of different lengths, a loss out of range (or not binary when declared
        binary), audit items that are calibration items.
    ParameterError
        A setting out of range, or ``allow_untested`` naming a group the certificate does not certify.

    Warns
    -----
    AuditWarning
        Labels of the data the certificate lacks (one warning, with near matches); a certificate
        without recorded calibration ids (:func:`check_fresh`).
    """
    level = check_range("level", level)
    warn_level("level", level)
    power = check_range("power", power)
    st = cert.settings
    eps, bound, risk = float(st.eps), float(st.loss_bound), st.risk
    default = min(2 * eps, bound)
    detectable = default if detectable is None else check_range("detectable", detectable, eps, bound, closed_right=True)
    certified = routing(cert)
    allowed = sorted({str(g) for g in allow_untested})
    for g in allowed:
        if g not in certified:
            hint = _near(g, certified)
            near = f" (did you mean {hint!r}?)" if hint is not None else f"; it certifies {sorted(certified)}"
            raise ParameterError(f"allow_untested: {g!r} is not a group the certificate certifies{near}")
    entry = RISKS[risk]  # how the risk is evaluated on routed items (run_experiment's pop_risk too)
    s = np.asarray(scores, dtype=float)
    loss = np.asarray(losses, dtype=float)
    if s.shape != loss.shape or s.ndim != 1:
        raise DataError(f"scores and losses: need one of each per item, got shapes {s.shape} and {loss.shape}")
    if ids is not None and len(ids) != len(s):
        raise DataError(f"ids: need one per item, got {len(ids)} for {len(s)} items")
    bad = ~np.isfinite(loss) | (loss < 0) | (loss > bound)
    if bad.any():
        raise DataError(
            f"losses: must lie in [0, {bound:g}] (the certificate's loss_bound); bad at row {np.argmax(bad)}"
        )
    check_fresh(cert, ids=ids, columns={"score": s, "loss": loss, "id": ids}, source=source)
    names, member, cheap, coll = _members(cert, s, groups)
    at_group = dict(zip(names, member.T))
    counts = {g: int(at_group[g].sum()) for g in sorted(set(names) - set(cert.groups))}
    _warn_unknown(cert, counts, coll, source)
    z = loss / bound
    binary = bool(binary) or BOUNDS[st.recipe.bound].binary_terms
    if binary and not np.all((z == 0) | (z == 1)):
        bad = np.argmax((z != 0) & (z != 1))
        raise DataError(f"losses: a binary loss must be 0 or {bound:g} (the loss_bound); row {bad} is {loss[bad]:g}")
    rows = []
    for g, e in cert.groups.items():
        at = at_group.get(g, np.zeros(s.size, bool))
        n, routed = int(at.sum()), int((at & cheap).sum())
        trials = routed if entry.conditional else n
        row = {"group": g, "status": e["status"], "n": n, "routed": routed, "trials": trials}
        if g not in certified:  # always thinks: routes nothing
            row.update(risk=0.0, lower=0.0, upper=0.0, verdict=BY_CONSTRUCTION, gate=NOT_COUNTED)
        elif trials == 0:
            untested = ALLOWED if g in allowed else UNTESTED
            row.update(risk=math.nan, verdict=NO_ITEMS if n == 0 else NO_ROUTED, gate=untested)
        else:
            row.update(risk=float(entry.evaluate(loss[at], cheap[at])))
        rows.append(row)
    tested = [r for r in rows if "verdict" not in r]
    k = max(len(certified) if coll is not None else len(tested), 1)  # a collection: every group it routes
    a = level / k
    for r in tested:
        p, lo, hi = _pvalue_and_bounds(r["risk"] / bound, r["trials"], eps / bound, a, binary)
        r.update(lower=lo * bound, upper=hi * bound, p_value=p)
        r["verdict"] = VIOLATED if p <= a else CONFIRMED if hi * bound <= eps else INCONCLUSIVE
        r["detectable"] = detectable_risk(r["trials"], eps, a, binary=binary, power=power, loss_bound=bound)
        # confirmed passes: its upper bound already shows the risk at most eps, whatever its size
        small = r["verdict"] == INCONCLUSIVE and r["detectable"] > detectable
        r["gate"] = VIOLATED if p <= a else TOO_SMALL if small else PASS
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs.update(
        eps=eps,
        risk_kind=risk,
        level=level,
        K=len(certified) if coll is not None else len(tested),
        per_group_level=a,
        binary=binary,
        power=power,
        detectable=detectable,
        loss_bound=bound,
        unknown=counts,
        allowed=allowed,
    )
    if coll is not None:
        out.attrs["groupings"] = cert.groupings
    return out


def _warn_unknown(cert: Certificate, counts: dict, coll, source: str) -> None:
    """One :class:`AuditWarning` for the labels of the data the certificate lacks (a collection's: one per grouping,
    and one for the cells of its groups it has no threshold for)."""
    if coll is None or not cert.groupings:
        by = {None: sorted(counts)}
    else:
        by = {g: [c for c in sorted(counts) if c.startswith(f"{g}=")] for g in cert.groupings}
    for grouping, unknown in by.items():
        if not unknown:
            continue
        what = "label(s)" if grouping is None else f"label(s) of grouping {grouping!r}"
        thinks = "" if coll is None else "; their items always think (in their other groups, as items routing nothing)"
        warnings.warn(
            f"{len(unknown)} {what} of the {source} are not groups of the certificate, so not tested and not "
            f"counted{thinks}: {_listed(unknown, cert.groups, counts)}",
            AuditWarning,
            stacklevel=3,
        )
    if coll is not None:
        known = ~coll.member[:, [j for j, g in enumerate(coll.names) if g in counts]].any(axis=1)
        cells = sorted(set(coll.cells[known].tolist()) - set(cert.thresholds))
        if cells:
            n = int(np.isin(coll.cells, cells).sum())
            more = f" and {len(cells) - 5} more" if len(cells) > 5 else ""
            warnings.warn(
                f"{len(cells)} cell(s) of the {source}'s groups were not calibrated (no item at calibration); their "
                f"{n} item(s) always think and are tested in their groups as routing nothing: "
                f"{', '.join(map(repr, cells[:5]))}{more}",
                AuditWarning,
                stacklevel=3,
            )


def gate(report: pd.DataFrame) -> int:
    """The exit status of an audit report (:func:`audit`): :data:`EXIT_VIOLATED` (3) for a violated group,
    else :data:`EXIT_UNTESTED` (4) for a certified group not tested (and not allowed), else
    :data:`EXIT_TOO_SMALL` (5) for an inconclusive group that cannot flag the ``detectable`` risk with
    probability ``power``, else :data:`EXIT_PASS` (0)."""
    marks = set(report["gate"])
    order = ((VIOLATED, EXIT_VIOLATED), (UNTESTED, EXIT_UNTESTED), (TOO_SMALL, EXIT_TOO_SMALL))  # the first that holds
    return next((status for mark, status in order if mark in marks), EXIT_PASS)


def _names(report: pd.DataFrame, mark: str) -> list[str]:
    return report.loc[report["gate"] == mark, "group"].tolist()


def verdict_line(report: pd.DataFrame) -> str:
    """One line: the gate's verdict, the verdicts' counts, the level and its multiplicity."""
    a = report.attrs
    how = "exact binomial / Clopper-Pearson" if a["binary"] else "Hoeffding (Theorem 4.3)"
    head = f"{a['risk_kind']} risk, eps={a['eps']:g}: "
    counts = report["verdict"].value_counts()
    seen = "; ".join(
        f"{counts[v]} {v}"
        for v in (VIOLATED, CONFIRMED, INCONCLUSIVE, NO_ITEMS, NO_ROUTED, BY_CONSTRUCTION)
        if counts.get(v, 0)
    )
    flag = f"a risk of {a['detectable']:g} flagged with probability {a['power']:g}"
    said = {
        VIOLATED: "VIOLATED in {n} group(s) {names}",
        UNTESTED: "NOT TESTED: {n} certified group(s) {names} have no trials",
        TOO_SMALL: "TOO SMALL: {n} inconclusive group(s) {names} cannot show " + flag,
        ALLOWED: "untested as allowed (--allow-untested): {names}",
    }
    problems = [t.format(n=len(names), names=names) for mark, t in said.items() if (names := _names(report, mark))]
    status = gate(report)
    tested = "tested or allowed untested" if _names(report, ALLOWED) else "tested"
    over = f"{a['K']} certified group(s) tested"
    if "groupings" in a:  # a collection: K counts every group it routes
        of = f" in groupings {', '.join(a['groupings'])}" if a["groupings"] else ""
        over = f"the {a['K']} group(s) the certificate routes{of}, tested or not"
    verdict = f"PASS: every certified group {tested}, none violated, each confirmed or large enough to show {flag}"
    if status != EXIT_PASS:
        verdict = "FAIL (exit " + str(status) + ")"
    what = "; ".join([verdict, *problems])
    tail = (
        f" [{seen}] at family-wise level {a['level']:g} for one look over {over} "
        f"(Bonferroni: {a['per_group_level']:.3g} each; {how})"
    )
    return head + what + tail
