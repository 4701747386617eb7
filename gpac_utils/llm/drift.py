r"""Drift in production: labels fed back with their decision records raise a per-group alarm.

A certificate holds for traffic drawn like its calibration table; production traffic drifts. An
evaluation pipeline that labels served requests (a loss per request, such as a grader's verdict
on the cheap answer against the thinking one) feeds those losses back with the requests' decision
records (:meth:`DriftAlarm.feed`, :meth:`gpac_utils.llm.serve.CertifiedRouter.feedback`). Per group
the certificate certifies, a drift detector watches the risk *of the kind the certificate
certifies* at the group's certified threshold :math:`\hat u_j`, on the terms of the audits
(:mod:`gpac_utils.audit_sequential`):

* joint risk: every labelled item of the group, term :math:`\ell\,1\{U \le \hat u_j\}`;
* routed risk (``conditional`` in :data:`gpac_utils.risks.RISKS`): the labelled items with
  :math:`U \le \hat u_j`, term :math:`\ell`.

The certified route is recomputed from the record's ``score`` and ``threshold`` (a record served
under an alarm went to the thinking model, but its term is still the one at :math:`\hat u_j`).

**The detector: a change detector, not a one-shot test.** Two anytime-valid constructions of
:mod:`gpac_utils.eprocess` fit "alarm when the risk exceeds eps":

* a test of :math:`H_0: R_j \le \varepsilon` by Ville's inequality (:class:`~gpac_utils.eprocess.EProcess`,
  direction ``"above"``): :math:`P(\text{ever alarm}) \le a` while the risk stays at most
  :math:`\varepsilon`, over an unbounded stream. Its bets learn from every label since the
  certificate was loaded: after a long stretch below :math:`\varepsilon` the plug-in bet is 0 (the
  wealth is not driven down: the default mixture's stays at most 1/2, its constant-bet half spent).
  It stays 0 until the running sum :math:`\sum (X - \varepsilon)` turns positive again, which
  after ``n`` labels at risk :math:`r_0 < \varepsilon` takes about
  :math:`n(\varepsilon - r_0)/(r_1 - \varepsilon)` labels at the new risk :math:`r_1`, so the delay
  grows with the time the certificate has been serving;
* the Shiryaev–Roberts e-detector (:class:`~gpac_utils.eprocess.EDetector`; Shin, Ramdas &
  Rinaldo, "E-detectors: a nonparametric framework for sequential change detection", New England
  Journal of Statistics in Data Science, pp. 229–260, doi:10.51387/23-nejsds51), the one
  :class:`gpac_utils.online.OnlineGPAC` uses: the sum of the wealths started at every label, so the
  evidence after a change counts from the change, whatever came before.

Production drift is a change after a long good stretch, so the alarm is the e-detector. Its
guarantee is not "never", but in labels: each group's detector runs at ``a = level / horizon``.
The labelled requests must be a sample of the group's requests drawn without regard to their
losses and, for the joint risk, without regard to their scores or routes: requests served by the
thinking model must be fed too (their term is 0 whatever loss is given). A pipeline that grades
only the cheap answers feeds terms with mean :math:`E[\ell \mid U \le \hat u_j, G_j]`, which can
exceed :math:`\varepsilon` while the joint risk is below it. For the routed risk, sample the
cheap-routed requests without regard to their scores. The labels must be fed in an order that does
not depend on their losses (the requests' order, or a grading pipeline whose latency does not
depend on the verdict). Then, while the group's risk at its certified threshold is at most
:math:`\varepsilon` at every label (terms with conditional mean at most :math:`\varepsilon`),

.. math:: P(\text{the group alarms within its first } n \text{ labels}) \le n\,a, \qquad
   \text{so } \le \texttt{level} \text{ for } n \le \texttt{horizon},

(Ville's inequality, :class:`~gpac_utils.eprocess.EDetector`) and the mean number of labels before
a false alarm is at least ``horizon / level`` (Shin, Ramdas & Rinaldo's average-run-length bound).
Beyond ``horizon`` labels the bound ``n level / horizon`` grows linearly: a group whose risk sits
at :math:`\varepsilon` will eventually alarm, so choose ``horizon`` at least the labels a group
receives over a certificate's life. For the routed risk the detector counts trials (routed
labels), so the bound in labels is valid but loose. ``tests/test_drift.py`` measures the
false-alarm rate by seeded Monte Carlo at the boundary of the null (mean :math:`\varepsilon`) with
the most spread-out terms, Bernoulli(eps), and finds the bound conservative. The bound is per
group: to bound by ``level`` the chance that any of ``k`` groups alarms falsely within ``horizon``
labels each, open the store with ``level / k`` (a union bound); the mean-time bound is per group
only. The price of the horizon is ``log(horizon)`` more log-wealth (nats) to alarm than a one-shot
test at ``level``; the gain, a delay that does not grow with the time served
(``tests/test_drift.py`` compares both after a long good stretch). An alarm *latches*: the group
sends every request to the thinking model until a new certificate (another SHA-256) is loaded,
which starts fresh state.

**The store** (:class:`DriftStore`): one SQLite file (standard-library :mod:`sqlite3`, WAL
journal, so readers do not block the writer) that every worker of a proxy opens: one row per
(certificate SHA-256, group) with the detector's exact state (:meth:`~gpac_utils.eprocess.EDetector.to_json`),
its settings, the labels fed and the alarm; and one row per (certificate SHA-256, request id)
fed, so a label fed twice (two workers, a retried pipeline) counts once. A feed is one
``BEGIN IMMEDIATE`` transaction (read, update, write): two processes feeding at once serialise
instead of losing updates, and a restart reads back the same state. Deciding reads the alarmed
groups of the certificate (one indexed query).

**The decision records** fed back are what :meth:`~gpac_utils.llm.serve.CertifiedRouter.decide`
and :meth:`~gpac_utils.llm.serve.CertifiedRouter.serve` return (:data:`RECORD_FIELDS`): the request
id (``request_id`` or ``item_id``), ``group``, ``score``, ``threshold``, ``route_nothink`` and
``certificate_sha256``. Records of another certificate are not fed (they are counted and logged):
their thresholds are not this certificate's. An alarm is logged (Python :mod:`logging`, logger
``gpac_utils.llm.drift``, level WARNING) by the process that raised it and once by each other
process that finds it in the store; the decision records of an alarmed group carry the status
:data:`DRIFT_STATUS` and ``route_nothink`` False.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from ..calibrate import CERTIFIED
from ..certificate import Certificate
from ..checks import DataError, ParameterError, check_array, check_int, check_range, warn_level
from ..eprocess import DETECTOR_BETS, EDetector, shiryaev_roberts
from ..risks import get_risk

__all__ = ["DRIFT_STATUS", "RECORD_FIELDS", "certificate_sha256", "DriftStore", "DriftAlarm"]

logger = logging.getLogger(__name__)

#: The status of a decision for a group under a drift alarm (it always thinks).
DRIFT_STATUS = "drift alarm: always think"
#: The fields of a decision record that a label is fed back with (and the request id: ``request_id`` or ``item_id``).
RECORD_FIELDS = ("group", "score", "threshold", "route_nothink", "certificate_sha256")
_ID_FIELDS = ("request_id", "item_id")
_ROW = "WHERE certificate_sha256 = ? AND grp = ?"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS drift_groups (
    certificate_sha256 TEXT NOT NULL,
    grp TEXT NOT NULL,
    level REAL NOT NULL,
    horizon INTEGER NOT NULL,
    labels INTEGER NOT NULL,
    trials INTEGER NOT NULL,
    detector TEXT NOT NULL,
    alarmed INTEGER NOT NULL,
    alarm_labels INTEGER,
    alarm_request TEXT,
    PRIMARY KEY (certificate_sha256, grp)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS drift_labels (
    certificate_sha256 TEXT NOT NULL,
    request_id TEXT NOT NULL,
    PRIMARY KEY (certificate_sha256, request_id)
) WITHOUT ROWID;
"""


def certificate_sha256(certificate) -> str:
    """The certificate's SHA-256, :attr:`gpac_utils.certificate.Certificate.sha256` (of its canonical text), for a
    :class:`~gpac_utils.certificate.Certificate`, a path, JSON text or a parsed dict.

    Examples
    --------
    >>> from gpac_utils import PAC
    >>> u = np.linspace(0, 1, 400)
    >>> cert = Certificate.from_calibrator(PAC(eps=0.1).fit(u, u > 0.8), created="2026-01-01T00:00:00Z")
    >>> certificate_sha256(cert) == certificate_sha256(cert.to_json()) == cert.sha256
    True
    """
    return (certificate if isinstance(certificate, Certificate) else Certificate.read(certificate)).sha256


class DriftStore:
    """The drift alarms' shared state: one SQLite file (module description).

    Parameters
    ----------
    path : str or path
        The SQLite file (created with its tables if absent; its folder must exist). Every worker
        of a proxy opens the same file.
    level : float, default 0.05
        Per group, an upper bound on the probability of a false alarm within ``horizon`` labels,
        while the group's risk stays at most ``eps`` (module description). To bound by ``level``
        the chance that any of ``k`` groups alarms falsely within ``horizon`` labels each, open the
        store with ``level / k`` (union bound); the mean-time bound is per group only.
    horizon : int, default 10000
        The labels per group over which ``level`` holds; each detector runs at ``level / horizon``.
        Beyond it the bound ``n level / horizon`` grows linearly, and a group whose risk sits at
        ``eps`` eventually alarms: choose at least the labels a group receives over a certificate's
        life.
    timeout : float, default 30.0
        Seconds a feed waits for another process's transaction before failing.

    Raises
    ------
    DataError
        For a file that is not an SQLite database, or a folder that does not exist.

    Examples
    --------
    >>> store = DriftStore("drift.sqlite", level=0.05, horizon=10_000)  # doctest: +SKIP
    >>> router = CertifiedRouter("thresholds.json", cheap, thinker, drift=store)  # doctest: +SKIP
    >>> router.feedback(router.decide(requests), losses)  # doctest: +SKIP
    """

    def __init__(self, path, *, level: float = 0.05, horizon: int = 10_000, timeout: float = 30.0):
        self.path = Path(path)
        self.level = check_range("level", level)
        warn_level("level", self.level)
        self.horizon = check_int("horizon", horizon, 1)
        self.timeout = check_range("timeout", timeout, 0.0, math.inf)
        if not self.path.parent.is_dir():
            raise DataError(f"{self.path}: its folder does not exist (the drift store is created there)")
        self._local = threading.local()
        try:
            self._db().executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a drift store ({exc})") from None

    @property
    def detector_level(self) -> float:
        """The level of each group's detector: ``level / horizon``."""
        return self.level / self.horizon

    def _db(self) -> sqlite3.Connection:
        """This thread's connection (a forked process opens its own)."""
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            self._local.db, self._local.pid = db, os.getpid()
        return db

    @contextmanager
    def transaction(self):
        """One write transaction (``BEGIN IMMEDIATE``: taken before reading, so no update is lost)."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (the file keeps the state)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def watch(self, certificate, sha256: str | None = None) -> DriftAlarm:
        """The alarm of ``certificate`` in this store (:class:`DriftAlarm`)."""
        return DriftAlarm(self, certificate, sha256)


class DriftAlarm:
    """The drift alarms of one certificate's groups, in a :class:`DriftStore` (module description).

    Parameters
    ----------
    store : DriftStore or path
        The store (a path opens one with the default level and horizon).
    certificate : Certificate, dict, str or path
        The certificate served.
    sha256 : str, optional
        Its SHA-256 (default: :func:`certificate_sha256` of ``certificate``).

    Raises
    ------
    ParameterError
        When the store already watches this certificate with another level or horizon.
    """

    def __init__(self, store, certificate, sha256: str | None = None):
        self.store = store if isinstance(store, DriftStore) else DriftStore(store)
        self.sha256 = certificate_sha256(certificate) if sha256 is None else str(sha256)
        cert = certificate if isinstance(certificate, Certificate) else Certificate.read(certificate)
        self.certificate = cert
        self.eps, self.bound = float(cert.settings.eps), float(cert.settings.loss_bound)
        self.conditional = get_risk(cert.settings.risk).conditional
        self.monitored = sorted(g for g, e in cert.groups.items() if e["status"] == CERTIFIED)
        self._logged: set[str] = set()
        fresh = EDetector(self.eps, bound=self.bound).to_json()
        st = self.store
        with st.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO drift_groups VALUES (?, ?, ?, ?, 0, 0, ?, 0, NULL, NULL)",
                [(self.sha256, g, st.level, st.horizon, fresh) for g in self.monitored],
            )
            rows = db.execute(
                "SELECT grp, level, horizon FROM drift_groups WHERE certificate_sha256 = ?", (self.sha256,)
            ).fetchall()
        for g, level, horizon in rows:
            if (level, horizon) != (st.level, st.horizon):
                raise ParameterError(
                    f"drift: {st.path} watches certificate {self.sha256[:12]}... (group {g!r}) at level={level:g}, "
                    f"horizon={horizon}; open it with those (or serve a new certificate)"
                )

    # -- deciding ---------------------------------------------------------------------------------
    def alarmed(self) -> dict[str, dict]:
        """The groups under an alarm now: ``{group: {"labels": at the alarm, "request_id": its label}}``."""
        rows = self.store._db().execute(
            "SELECT grp, alarm_labels, alarm_request FROM drift_groups WHERE certificate_sha256 = ? AND alarmed = 1",
            (self.sha256,),
        )
        out = {g: {"labels": n, "request_id": r} for g, n, r in rows}
        for g in sorted(set(out) - self._logged):
            self._logged.add(g)
            logger.warning(
                "drift alarm: group %r of certificate %s... alarmed after %d labels (label %r); it always thinks "
                "until a new certificate is loaded",
                g,
                self.sha256[:12],
                out[g]["labels"],
                out[g]["request_id"],
            )
        return out

    def apply(self, groups, route_nothink, statuses):
        """Routes and statuses after the alarms: an alarmed group's requests think, with status :data:`DRIFT_STATUS`.

        Returns new arrays (``route_nothink`` bool, ``statuses`` object).
        """
        route = np.asarray(route_nothink, bool).copy()
        status = np.asarray(statuses, dtype=object).copy()
        alarmed = self.alarmed()
        if alarmed:
            hit = np.isin(np.asarray(groups, dtype=object).astype(str), list(alarmed))
            route[hit], status[hit] = False, DRIFT_STATUS
            if hit.any():
                logger.info("drift alarm: %d request(s) sent to the thinking model", int(hit.sum()))
        return route, status

    # -- feeding ----------------------------------------------------------------------------------
    def _records(self, records, losses):
        """The checked columns of ``records`` and ``losses`` (one line naming the field otherwise)."""
        if not isinstance(records, pd.DataFrame):
            records = pd.DataFrame(list(records) if not isinstance(records, Mapping) else records)
        id_col = next((c for c in _ID_FIELDS if c in records.columns), None)
        missing = [c for c in RECORD_FIELDS if c not in records.columns] + ([] if id_col else ["request_id"])
        if missing:
            raise DataError(f"records: a decision record needs {missing[0]!r}; they have {list(records.columns)}")
        n = len(records)
        loss = check_array("losses", losses, 0.0, self.bound)
        if loss.size != n:
            raise ParameterError(f"losses: one per record, got {loss.size} for {n} records")
        ids = records[id_col].astype(str).to_numpy()
        dup = pd.Series(ids).duplicated().to_numpy()
        if dup.any():
            raise DataError(f"records: {id_col} {ids[np.argmax(dup)]!r} appears twice in one feed")
        route = records["route_nothink"].to_numpy()
        # A decision log line writes an always-think threshold and a request without text's score as null
        # (strict JSON): such a request thought, so its term is 0 whatever its score.
        raw = pd.to_numeric(records["score"], errors="coerce").to_numpy(float)
        score = check_array("records.score", np.where(np.isnan(raw) & ~route.astype(bool), 1.0, raw))
        thr = pd.to_numeric(records["threshold"], errors="coerce").to_numpy(float)
        missing = np.isnan(thr) & route.astype(bool)
        if missing.any():
            raise DataError(f"records.threshold: not a number at row {int(np.argmax(missing))} (a cheap route)")
        thr = np.where(np.isnan(thr), -np.inf, thr)
        bad = route.astype(bool) & (score > thr)
        if bad.any():
            k = int(np.argmax(bad))
            raise DataError(
                f"records: {id_col} {ids[k]!r} went to the cheap model with score {float(score[k])!r} > threshold"
            )
        return ids, records["group"].astype(str).to_numpy(), score, thr, loss, records["certificate_sha256"].to_numpy()

    def feed(self, records, losses) -> pd.DataFrame:
        """Feed labelled decision records, in an order that does not depend on their losses; return what each
        group did.

        Parameters
        ----------
        records : pandas.DataFrame or iterable of dict
            Decision records (:data:`RECORD_FIELDS` and ``request_id`` or ``item_id``).
        losses : array_like
            One loss per record, in ``[0, loss_bound]`` (the certificate's).

        Returns
        -------
        pandas.DataFrame
            One row per group of the fed records: ``group``, ``fed`` (new labels), ``duplicates``
            (labels fed before: skipped), ``monitored``, ``labels`` and ``trials`` (so far),
            ``statistic`` (the detector's value; alarm at ``1 / detector_level``), ``alarmed`` and
            ``new_alarm``. ``attrs["other_certificate"]``: records of another certificate (not fed).

        Raises
        ------
        DataError
            For a record without a field, an id twice in one feed, or a cheap route above its threshold.
        ParameterError
            For losses outside ``[0, loss_bound]`` or not one per record.
        """
        ids, groups, score, thr, loss, shas = self._records(records, losses)
        mine = shas.astype(str) == self.sha256
        if (~mine).any():
            logger.warning(
                "drift: %d labelled record(s) of another certificate not fed (this store watches %s...)",
                int((~mine).sum()),
                self.sha256[:12],
            )
        a = self.store.detector_level
        bar = math.log(DETECTOR_BETS.size / a)
        out, alarms = [], []
        with self.store.transaction() as db:
            new = np.zeros(ids.size, bool)
            for k in np.flatnonzero(mine):
                cur = db.execute("INSERT OR IGNORE INTO drift_labels VALUES (?, ?)", (self.sha256, ids[k]))
                new[k] = cur.rowcount == 1
            for g in dict.fromkeys(groups[mine].tolist()):
                at = np.flatnonzero(mine & (groups == g))
                take = at[new[at]]
                row = db.execute(f"SELECT labels, trials, detector, alarmed FROM drift_groups {_ROW}", (self.sha256, g))
                row = row.fetchone()
                rec = {"group": g, "fed": take.size, "duplicates": at.size - take.size, "monitored": row is not None}
                if row is None:  # always thinks, or unknown to the certificate: adds no loss by construction
                    out.append(rec | {"labels": 0, "trials": 0, "statistic": math.nan, "alarmed": False})
                    out[-1]["new_alarm"] = False
                    continue
                labels, trials, state, alarmed = row
                det = EDetector.from_json(state, f"{self.store.path}: {g}")
                alarm_at = None
                if not alarmed and take.size:
                    on = score[take] <= thr[take]
                    trial = on if self.conditional else np.ones(take.size, bool)
                    terms = np.where(on, loss[take], 0.0)[trial]
                    stop = terms.size
                    if terms.size:
                        sr = shiryaev_roberts(
                            det.state["log_sr"], terms - self.eps, np.ones(terms.size, bool), det.clip / self.eps
                        )
                        over = np.logaddexp.reduce(sr, axis=-1) >= bar
                        if over.any():
                            stop = int(np.argmax(over)) + 1
                            alarm_at = int(np.flatnonzero(trial)[stop - 1])  # the label that raised it
                    det.update(terms[:stop])
                    used = take.size if alarm_at is None else alarm_at + 1
                    labels, trials = labels + used, trials + stop
                    labels_after = labels + (take.size - used)
                else:
                    labels_after = labels + take.size
                if alarm_at is not None:
                    alarms.append((g, labels, ids[take[alarm_at]]))
                    db.execute(
                        "UPDATE drift_groups SET labels = ?, trials = ?, detector = ?, alarmed = 1, alarm_labels = ?, "
                        "alarm_request = ? WHERE certificate_sha256 = ? AND grp = ?",
                        (labels_after, trials, det.to_json(), labels, ids[take[alarm_at]], self.sha256, g),
                    )
                else:
                    db.execute(
                        f"UPDATE drift_groups SET labels = ?, trials = ?, detector = ? {_ROW}",
                        (labels_after, trials, det.to_json(), self.sha256, g),
                    )
                rec |= {"labels": labels_after, "trials": trials, "statistic": float(det.statistic())}
                out.append(rec | {"alarmed": bool(alarmed) or alarm_at is not None, "new_alarm": alarm_at is not None})
        for g, n, rid in alarms:
            self._logged.add(g)
            logger.warning(
                "drift alarm: group %r of certificate %s... alarmed after %d labels (label %r; detector level %.3g): "
                "it always thinks until a new certificate is loaded",
                g,
                self.sha256[:12],
                n,
                rid,
                a,
            )
        report = pd.DataFrame(
            out,
            columns=[
                "group",
                "fed",
                "duplicates",
                "monitored",
                "labels",
                "trials",
                "statistic",
                "alarmed",
                "new_alarm",
            ],
        )
        report.attrs["other_certificate"] = int((~mine).sum())
        return report

    def report(self) -> pd.DataFrame:
        """Per monitored group: ``group``, ``labels``, ``trials``, ``statistic``, ``bar`` (``1 / detector_level``),
        ``alarmed``, ``alarm_labels`` and ``alarm_request``."""
        rows = self.store._db().execute(
            "SELECT grp, labels, trials, detector, alarmed, alarm_labels, alarm_request FROM drift_groups "
            "WHERE certificate_sha256 = ? ORDER BY grp",
            (self.sha256,),
        )
        out = [
            {
                "group": g,
                "labels": n,
                "trials": t,
                "statistic": float(EDetector.from_json(d).statistic()),
                "bar": 1 / self.store.detector_level,
                "alarmed": bool(al),
                "alarm_labels": an,
                "alarm_request": ar,
            }
            for g, n, t, d, al, an, ar in rows
        ]
        return pd.DataFrame(
            out, columns=["group", "labels", "trials", "statistic", "bar", "alarmed", "alarm_labels", "alarm_request"]
        )

    def state(self) -> dict:
        """Every row of this certificate, as stored (the detectors' exact JSON): what a restart reads back."""
        rows = self.store._db().execute(
            "SELECT grp, labels, trials, detector, alarmed, alarm_labels, alarm_request FROM drift_groups "
            "WHERE certificate_sha256 = ? ORDER BY grp",
            (self.sha256,),
        )
        keys = ("labels", "trials", "detector", "alarmed", "alarm_labels", "alarm_request")
        return {r[0]: dict(zip(keys, r[1:])) for r in rows}
