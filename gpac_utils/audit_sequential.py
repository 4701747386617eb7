r"""Repeated audits on growing data, valid at every look: ``gpac audit CERT --data T --sequential``.

The one-look audit (:mod:`gpac_utils.audit`) holds its level for one look at the data. Re-run as
held-out labels accumulate (a CI gate run every night), each run is a new chance of a false alarm,
and the chance that *some* run flags a group whose risk is at most ``eps`` grows with the number
of runs. The sequential mode reads the rows in a declared order, once each, and keeps per
certified group two test supermartingales (:class:`gpac_utils.eprocess.EProcess`, the betting
e-processes of Waudby-Smith & Ramdas 2024) on the group's trials, in that order:

* the *trials and their terms* are the one-look audit's: for the joint risk every item of the
  group, term :math:`\ell\,1\{U \le \hat u\}`; for the routed risk (``conditional`` in
  :data:`gpac_utils.risks.RISKS`) the items routed to the non-thinking model, term :math:`\ell`
  (the route :math:`1\{U_i \le \hat u\}` is seen before the loss, so the routed items' terms
  are a test supermartingale's subsequence: :mod:`gpac_utils.eprocess`);
* *violated*: the wealth betting that the risk exceeds ``eps`` (direction ``"above"``, null
  :math:`R_j \le \varepsilon`) has reached ``K / level`` at some trial so far (its running
  maximum: Ville's inequality covers every trial), ``K`` the number of groups the certificate
  certifies (Bonferroni);
* *confirmed*: the wealth betting that it is below ``eps`` (direction ``"below"``, null
  :math:`R_j \ge \varepsilon`) has reached ``K / level`` at some trial so far, and the group is not
  violated;
* *inconclusive* otherwise; *no trials yet* with none.

A *wrong* verdict is the one-look audit's (:mod:`gpac_utils.audit`): violated while the group's
risk is at most ``eps``, or confirmed while it exceeds ``eps``. By Ville's inequality, whatever the
other groups' risks, the probability that some group whose risk is at most ``eps`` is *ever*
declared violated, at any look of any run, under any rule for when to look or stop, is at most
``level``; likewise for some group whose risk exceeds ``eps`` ever confirmed. A group can be wrong in
one direction only, so the chance of any wrong verdict is at most ``level``. The confirmation tests
:math:`R_j \ge \varepsilon`, so it also confirms a group at exactly ``eps`` with probability at most
``level / K``: read as "risk below eps", each kind of error is at most ``level`` and together they
are at most ``2 level`` (at most ``level`` when no group's risk is exactly ``eps``;
``tests/test_audit_sequential.py`` measures both). Exit 0 means only "no violation so far": unlike
the one-look gate there is no size requirement, so a pass with inconclusive groups is no evidence
that their risk is at most ``eps``.

Only groups the certificate certifies are monitored; a group that always thinks routes nothing to
the non-thinking model, so the router adds no loss (the joint risk is 0, the routed risk
undefined), and it is not counted in ``K``; labels the certificate does not know always think too. A
certificate of several groupings (:mod:`gpac_utils.multigroup`) is refused: it is audited in one look
(:func:`gpac_utils.audit.audit`, per group of every grouping).
The null tested: each trial's conditional mean given the earlier rows (and, for the routed risk,
given that it is routed) is at most ``eps``. I.i.d. traffic at risk at most ``eps`` is one case;
traffic that drifts but stays at or below ``eps`` is another. The declared order must not depend on
the losses (the request's arrival time, not the label's). The certificate must be fixed before the
audit data are looked at: audit items that are not calibration items are not enough, since
re-calibrating, or choosing ``eps`` or the score, until the audit passes makes the certificate
depend on the audit data. The guarantee holds per state file: deleting it (or losing it with a CI
cache) and re-running over rows already audited spends the level again.

**The state file** (``--state``, JSON) records the certificate's SHA-256, the settings (level,
bet, columns), the rows consumed (their ids in order and a SHA-256 per column of the consumed
prefix), each group's two e-processes (exact, :meth:`~gpac_utils.eprocess.EProcess.to_dict`) and
one line per look. The next run sorts ``--data`` by the order column (then the id), refuses a
table whose first rows are not the consumed ones, in the same order with the same values (a row
changed, removed or moved: one line naming it), refuses a state written for another certificate
or with other settings, and consumes only the new rows. One run on all rows and two runs on a
split give the same state (``tests/test_audit_sequential.py``).

Exit status: 0 no group violated (inconclusive groups are listed in one line), 3
(:data:`~gpac_utils.audit.EXIT_VIOLATED`) a group violated, 4 (:data:`~gpac_utils.audit.EXIT_UNTESTED`) a
certified group without any trial yet (the one-look gate's statuses), 1 bad input or a refused state.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import audit as _audit
from .audit import BY_CONSTRUCTION, CONFIRMED, EXIT_UNTESTED, EXIT_VIOLATED, INCONCLUSIVE, VIOLATED
from .calibrate import CERTIFIED
from .certificate import Certificate, column_sha256
from .checks import DataError, ParameterError, check_range, warn_level
from .eprocess import BETTING, EProcess
from .risks import RISKS

__all__ = [
    "VIOLATED",
    "CONFIRMED",
    "INCONCLUSIVE",
    "NO_TRIALS",
    "SequentialAudit",
    "add_sequential_options",
    "ordered",
    "verdict_lines",
    "exit_status",
    "wanted",
]

#: The verdict of a monitored group without trials (the others are the one-look audit's).
NO_TRIALS = "no trials yet"
#: What the state file's ``format`` and ``version`` say.
FORMAT, VERSION = "gpac-audit-sequential", 1
#: What :func:`verdict_lines` says of the confirmed and the inconclusive groups, before naming them.
_SAID = {CONFIRMED: "confirmed (risk at most eps)", INCONCLUSIVE: "inconclusive (no verdict yet; more rows will tell)"}
#: Each monitored group's two e-processes and their directions (:class:`~gpac_utils.eprocess.EProcess`).
_TESTS = {"violation": "above", "confirmation": "below"}
#: The columns whose consumed prefix the state hashes, in this order.
_ROLES = ("id", "order", "group", "score", "loss")


def _ids(values) -> list[str]:
    return [str(v) for v in np.asarray(values, dtype=object).tolist()]


def _record(status: str, monitored: bool) -> dict:
    """A group's record before any row: no items, no trials, the sum of its terms 0."""
    return {"status": status, "monitored": monitored, "n": 0, "routed": 0, "trials": 0, "sum": 0.0}


@dataclass
class SequentialAudit:
    """The state of a sequential audit of one certificate (module description).

    Build one with :meth:`start`, read one with :meth:`read`; :meth:`look` consumes the new rows
    of a growing table and returns the per-group report.

    Attributes
    ----------
    certificate_sha256 : str
        The SHA-256 of the certificate file it audits.
    settings : dict
        ``level``, ``bet``, ``eps``, ``loss_bound``, ``risk``, ``K`` and the column names.
    consumed : dict
        ``n``, ``ids`` (in order) and ``sha256`` (per column of the consumed prefix).
    groups : dict
        Per group: ``status``, ``monitored``, ``n``, ``routed``, ``trials``, ``sum`` (of the terms,
        exact hex) and, where monitored, the ``violation`` and ``confirmation`` e-processes.
    looks : list of dict
        One entry per look: rows in all, new rows, the violated and confirmed groups.
    """

    certificate_sha256: str
    settings: dict
    consumed: dict
    groups: dict
    looks: list = field(default_factory=list)

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def start(
        cls, cert: Certificate, certificate_sha256: str, *, level: float = 0.05, bet: str = "mixture", columns=None
    ) -> SequentialAudit:
        """A fresh audit of ``cert``: nothing consumed, every certified group at wealth 1.

        ``columns``: the column names (``id``, ``order``, ``group``, ``score``, ``loss``) it will be
        fed, recorded so that a later run with other columns is refused.
        """
        if cert.kind == "collection":  # its items are trials of a group per grouping: not monitored here yet
            raise ParameterError(
                f"certificate: a {cert.method} certificate (a group per label of each grouping) is audited in one "
                "look for now (gpac_utils.audit.audit)"
            )
        level = check_range("level", level)
        warn_level("level", level)
        bet = BETTING.check(bet, "bet")
        st = cert.settings
        eps, bound = float(st.eps), float(st.loss_bound)
        certified = sorted(g for g, e in cert.groups.items() if e["status"] == CERTIFIED)
        groups = {g: _record(entry["status"], g in certified) for g, entry in sorted(cert.groups.items())}
        for g in certified:  # the violation bets that the risk is above eps, the confirmation below
            groups[g] |= {k: EProcess(eps, d, bound=bound, bet=bet) for k, d in _TESTS.items()}
        settings = {
            "level": level,
            "bet": bet,
            "eps": eps,
            "loss_bound": bound,
            "risk": st.risk,
            "K": max(len(certified), 1),
            "columns": dict(columns or {}),
        }
        return cls(certificate_sha256, settings, {"n": 0, "ids": [], "sha256": {}}, groups)

    # -- reading and writing ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The state as JSON-ready values (floats exact)."""
        groups = {}
        for g, rec in self.groups.items():
            groups[g] = {k: v.to_dict() if isinstance(v, EProcess) else v for k, v in rec.items()}
            groups[g]["sum"] = float(rec["sum"]).hex()
        return {
            "format": FORMAT,
            "version": VERSION,
            "certificate_sha256": self.certificate_sha256,
            "settings": self.settings | {"level": float(self.settings["level"]).hex()},
            "consumed": self.consumed,
            "groups": groups,
            "looks": self.looks,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (sorted keys: the same state gives the same bytes)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"

    def write(self, path) -> None:
        """Write the state to ``path`` (a temporary file, then renamed: never half-written)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)

    @classmethod
    def read(cls, source, where: str = "--state") -> SequentialAudit:
        """A state from a path or its JSON text (one line naming ``where`` if it is not one)."""
        try:
            text = Path(source).read_text() if isinstance(source, str | Path) and Path(source).exists() else source
            doc = json.loads(text)
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
            raise DataError(f"{where} {source}: not a sequential audit's state ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise DataError(f"{where} {source}: not a sequential audit's state (no format {FORMAT!r})")
        if doc.get("version") != VERSION:
            raise DataError(f"{where} {source}: state version {doc.get('version')!r}; this package reads {VERSION}")
        try:
            groups = {}
            for g, rec in doc["groups"].items():
                groups[g] = dict(rec, sum=float.fromhex(rec["sum"]))
                for k in _TESTS:
                    if k in rec:
                        groups[g][k] = EProcess.from_dict(rec[k], f"{where} groups[{g!r}].{k}")
            settings = dict(doc["settings"]) | {"level": float.fromhex(doc["settings"]["level"])}
            return cls(doc["certificate_sha256"], settings, doc["consumed"], groups, doc.get("looks", []))
        except (KeyError, TypeError, ValueError, AttributeError, ParameterError) as exc:
            raise DataError(f"{where} {source}: malformed state ({exc})") from None

    # -- checks -----------------------------------------------------------------------------------
    def check_same(self, certificate_sha256: str, level: float, bet: str, columns: dict, where: str) -> None:
        """Refuse, in one line, a state of another certificate or of other settings."""
        if certificate_sha256 != self.certificate_sha256:
            raise DataError(
                f"{where}: written for another certificate (SHA-256 {self.certificate_sha256[:12]}..., this one "
                f"{certificate_sha256[:12]}...); a new certificate needs a new state file"
            )
        mine = {"level": self.settings["level"], "bet": self.settings["bet"], **self.settings["columns"]}
        theirs = {"level": float(level), "bet": bet, **columns}
        for key in mine.keys() | theirs.keys():
            if mine.get(key) != theirs.get(key):
                name = key if key in ("level", "bet") else f"{key}-col"
                raise DataError(
                    f"{where}: was written with --{name} {mine.get(key)!r}, this run gives {theirs.get(key)!r}; "
                    "a sequential audit keeps its settings (start a new state file to change them)"
                )

    def _check_prefix(self, frame: pd.DataFrame, where: str) -> None:
        n, ids = self.consumed["n"], self.consumed["ids"]
        if len(frame) < n:
            raise DataError(f"{where}: has {len(frame)} rows, fewer than the {n} the state consumed; rows were removed")
        now = _ids(frame["id"].to_numpy()[:n])
        if now != ids:
            i = next(i for i, (a, b) in enumerate(zip(now, ids)) if a != b)
            moved = "moved or removed" if ids[i] in set(_ids(frame["id"])) else "removed"
            raise DataError(
                f"{where}: row {i} in the declared order is id {now[i]!r}, but the state consumed id {ids[i]!r} there "
                f"(a consumed row was {moved}, or a new row sorts before it); a sequential audit reads each row once, "
                "in order: give the consumed rows unchanged, new rows after them"
            )
        for role, digest in self.consumed["sha256"].items():
            if column_sha256(frame[role].to_numpy()[:n]) != digest:
                col = self.settings["columns"].get(role, role)
                raise DataError(
                    f"{where}: column {col!r} differs in the {n} rows already consumed (same ids, same order); "
                    "a consumed row's values cannot change"
                )

    # -- a look -----------------------------------------------------------------------------------
    def look(self, cert: Certificate, frame: pd.DataFrame, where: str = "data") -> pd.DataFrame:
        """Consume the rows of ``frame`` after those already consumed; return the per-group report.

        Parameters
        ----------
        cert : Certificate
            The certificate (the one whose SHA-256 the state records).
        frame : pandas.DataFrame
            Columns ``id``, ``order``, ``score``, ``loss`` and, for known groups, ``group``, sorted in
            the declared order (:func:`ordered`); the first rows must be the consumed ones.
        where : str
            How messages name the data.

        Returns
        -------
        pandas.DataFrame
            One row per group of the certificate (and one per label it does not know):
            ``group``, ``status``, ``n``, ``routed``, ``trials``, ``risk`` (realised so far),
            ``e_violated`` and ``e_confirmed`` (the largest wealth so far of each e-process; the
            verdict reads them against ``bar`` = ``K / level``) and ``verdict``; ``attrs``:
            ``eps``, ``risk_kind``, ``level``, ``K``, ``bar``, ``rows``, ``new_rows``.
        """
        self._check_prefix(frame, where)
        n0 = self.consumed["n"]
        new = frame.iloc[n0:]
        st = self.settings
        bound, entry = st["loss_bound"], RISKS[st["risk"]]
        if len(new):
            loss = new["loss"].to_numpy(float)
            bad = ~np.isfinite(loss) | (loss < 0) | (loss > bound)
            if bad.any():
                i = int(np.argmax(bad))
                raise DataError(
                    f"{where}: losses must lie in [0, {bound:g}] (the certificate's loss_bound); "
                    f"id {new['id'].iloc[i]!r} has {loss[i]!r}"
                )
            s = new["score"].to_numpy(float)
            groups = new["group"].to_numpy().astype(str) if "group" in new else None
            named, cheap = _audit._routed(cert, s, groups)  # labels it never saw: they think
            named = np.asarray(named).astype(str)
            for g in dict.fromkeys(named.tolist()):
                at = named == g
                rec = self.groups.setdefault(g, _record("not in the certificate", False))
                on = cheap[at]
                trial = on if entry.conditional else np.ones(on.size, bool)
                terms = np.where(on, loss[at], 0.0)[trial]  # in the declared order
                rec["n"] += int(at.sum())
                rec["routed"] += int(on.sum())
                rec["trials"] += int(trial.sum())
                rec["sum"] = float(np.cumsum(np.r_[rec["sum"], terms])[-1])  # the same bits in any split
                if rec["monitored"]:
                    rec["violation"].update(terms)
                    rec["confirmation"].update(terms)
            self.consumed["n"] = len(frame)
            self.consumed["ids"] = self.consumed["ids"] + _ids(new["id"])
        self.consumed["sha256"] = {r: column_sha256(frame[r].to_numpy()) for r in _ROLES if r in frame}
        report = self.report()
        report.attrs.update(rows=len(frame), new_rows=len(frame) - n0)
        named = {v: report.loc[report["verdict"] == v, "group"].tolist() for v in (VIOLATED, CONFIRMED)}
        self.looks.append({"rows": len(frame), "new_rows": len(frame) - n0} | named)
        return report

    def report(self) -> pd.DataFrame:
        """The per-group report of the rows consumed so far (:meth:`look`'s)."""
        st = self.settings
        bar = st["K"] / st["level"]
        rows = []
        for g, rec in self.groups.items():
            risk = rec["sum"] / rec["trials"] if rec["trials"] else math.nan
            row = {k: rec[k] for k in ("status", "n", "routed", "trials")} | {"group": g, "risk": risk}
            if not rec["monitored"]:
                e_v = e_c = math.nan
                verdict = BY_CONSTRUCTION if rec["routed"] == 0 else "not monitored"
            else:
                e_v, e_c = (float(rec[k].max_e_value) for k in _TESTS)
                hit = [v for v, k in ((VIOLATED, "violation"), (CONFIRMED, "confirmation")) if rec[k].rejects(1 / bar)]
                verdict = NO_TRIALS if rec["trials"] == 0 else (hit or [INCONCLUSIVE])[0]  # violated first
            rows.append(row | {"e_violated": e_v, "e_confirmed": e_c, "verdict": verdict})
        cols = ["group", "status", "n", "routed", "trials", "risk", "e_violated", "e_confirmed", "verdict"]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs.update(eps=st["eps"], risk_kind=st["risk"], level=st["level"], K=st["K"], bar=bar)
        return out


def verdict_lines(report: pd.DataFrame, allowed=()) -> list[str]:
    """The verdict in a few lines: violated, confirmed, inconclusive, untested; the level and its multiplicity."""
    a = report.attrs
    verdicts = (VIOLATED, CONFIRMED, INCONCLUSIVE, NO_TRIALS)
    named = {v: report.loc[report["verdict"] == v, "group"].tolist() for v in verdicts}
    head = f"{a['risk_kind']} risk, eps={a['eps']:g}, after {a['rows']} row(s) ({a['new_rows']} new): "
    tail = (
        f"anytime-valid at family-wise level {a['level']:g} over {a['K']} certified group(s) (e-value bar "
        f"K/level = {a['bar']:g}; Ville's inequality, every look)"
    )
    lines = [head + (f"VIOLATED in {named[VIOLATED]}; " if named[VIOLATED] else "no group violated; ") + tail]
    lines += [f"{_SAID[v]}: {named[v]}" for v in _SAID if named[v]]
    if named[NO_TRIALS]:
        ok = [g for g in named[NO_TRIALS] if g in allowed]
        lines.append(f"no trials yet: {named[NO_TRIALS]}" + (f" (accepted by --allow-untested: {ok})" if ok else ""))
    return lines


def exit_status(report: pd.DataFrame, allowed=()) -> int:
    """The exit status: 3 a group violated, 4 a certified group without trials (not allowed), else 0."""
    if (report["verdict"] == VIOLATED).any():
        return EXIT_VIOLATED
    untested = set(report.loc[report["verdict"] == NO_TRIALS, "group"]) - set(allowed)
    return EXIT_UNTESTED if untested else 0


# --------------------------------------------------------------------------- the command line
def add_sequential_options(parser) -> None:
    """Add ``--sequential``, ``--order-col``, ``--state`` and ``--bet`` to ``gpac audit`` (which has ``--id-col``)."""
    g = parser.add_argument_group("sequential mode (repeated audits on growing data, valid at every look)")
    g.add_argument(
        "--sequential",
        action="store_true",
        help="read the rows in --order-col order, continue the e-processes of --state, consume only new rows",
    )
    g.add_argument("--order-col", default=None, help="the declared order of the rows (e.g. arrival time)")
    g.add_argument("--state", type=Path, default=None, help="the state file (JSON): read if it exists, then written")
    g.add_argument(
        "--bet",
        default="mixture",
        choices=["grapa", "mixture"],
        help="the e-processes' bets (gpac_utils.eprocess.BETTING; 'max' is for certifying loss-free groups only)",
    )


def ordered(df: pd.DataFrame, cols: dict, where: str) -> pd.DataFrame:
    """The table in the declared order (the order column, then the id), one column per role; one line
    naming a missing order value or a duplicate id."""
    missing = df[cols["order"]].isna().to_numpy()
    if missing.any():
        raise DataError(f"{where}: column {cols['order']!r} (the order) is missing at row {int(np.argmax(missing))}")
    dup = df[cols["id"]].duplicated(keep=False).to_numpy()
    if dup.any():
        shown = sorted(set(_ids(df.loc[dup, cols["id"]])))[:5]
        raise DataError(f"{where}: column {cols['id']!r} (the id) repeats {shown}; each row needs its own id")
    out = pd.DataFrame({role: df[c].to_numpy() for role, c in cols.items()})
    try:
        return out.sort_values(["order", "id"], kind="mergesort").reset_index(drop=True)
    except TypeError as exc:
        raise DataError(f"{where}: column {cols['order']!r} (the order) cannot be sorted ({exc})") from None


def wanted(a) -> bool:
    """Whether ``gpac audit`` runs in the sequential mode; its options without ``--sequential`` are refused, and
    with it its missing ones and the one-look ones."""
    for name in ("order_col", "state"):
        if (getattr(a, name) is None) == a.sequential:
            why = "--sequential needs it" if a.sequential else "only the sequential mode reads it; add --sequential"
            raise ParameterError(f"--{name.replace('_', '-')}: {why}")
    if not a.sequential and a.bet != "mixture":
        raise ParameterError("--bet: only the sequential mode reads it; add --sequential")
    if a.sequential and a.binary:
        raise ParameterError("--binary: the sequential mode's betting tests are valid for any loss in [0, B]; drop it")
    if a.sequential and a.detectable is not None:
        raise ParameterError("--detectable: a one-look notion; the sequential mode does not read it")
    return a.sequential
