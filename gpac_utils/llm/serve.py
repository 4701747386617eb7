"""Serving from a certificate: the cheap answer, its score, the route, the thinking answer where routed.

:class:`CertifiedRouter` takes a certificate (the thresholds file of ``gpac calibrate``,
:mod:`gpac_utils.certificate`) and two engines (:mod:`gpac_utils.llm.engines`: vLLM or
transformers, or any object with their interface: ``model``, ``backend``, ``tokenizer`` and
``stream(requests, window)``). For a batch of requests, :meth:`CertifiedRouter.serve`

1. generates the non-thinking (cheap) answer of every request;
2. computes the score the certificate was calibrated on, as its :data:`~gpac_utils.scores.SCORES`
   entry serves it (:attr:`~gpac_utils.scores.Score.serve`: ``score_logits`` from the cheap
   answer's token logprobs, ``score_verbalized`` from the cheap model's confidences in its
   answer); a certificate calibrated on a score without one is refused when the router is built;
3. routes: the cheap answer is served when the score is at most the request's group threshold
   (``-inf``: the group always thinks; a group absent from the certificate is *unseen at
   calibration* and thinks); for a certificate of several overlapping groupings
   (:mod:`gpac_utils.multigroup`, ``Method.groups == "collection"``) a request names its label of each
   grouping, one column each (:attr:`CertifiedRouter.group_columns`), and its threshold is its *cell's*
   (below);
4. calls the thinking model on the requests routed to it;
5. returns one row per request with its score, threshold, group status, route and answer;
6. optionally feeds an online router (:class:`gpac_utils.online.OnlineGPAC`): it decides on the
   same scores and groups which items it observes, the router obtains both answers for those
   (a thinking call where the certificate routed cheap: a paid label) and feeds the losses that
   ``loss_fn`` computes back with :meth:`~gpac_utils.online.OnlineGPAC.update`. The online router
   runs beside the certificate and never changes a route.

Every request is sampled with :func:`~gpac_utils.llm.engines.item_seed` ``(seed, item_id)``, as
:mod:`gpac_utils.llm.generation` does, so a served answer is the answer the engine returns for that
seed, whatever the batch; a table generated with the same seed and samplings has the same answers.

**Several groupings** (issue 54). A collection certificate (Min-G-PAC, Shift-G-PAC, Path-G-PAC) routes by
the cell of a request's groups: its labels, read from the columns :attr:`Certificate.group_columns
<gpac_utils.certificate.Certificate.group_columns>` names (:meth:`~gpac_utils.certificate.Certificate.groups_from`),
joined as the certificate's cells are (:func:`gpac_utils.group_collection.collection`), and the
threshold is the calibrator's own (``thresholds_for``). The record's ``group`` is that cell
(``subject=algebra & language=en``) and its ``status`` the cell's: the first of its groups' statuses that
does not route, else ``certified``; ``unseen at calibration`` for a cell not calibrated. A request without a
label of a grouping (``None``, NaN, ``''``) gets :data:`NO_GROUP` there and thinks, with status
``unseen at calibration: no '<column>'``; one whose label the certificate lacks thinks, with status
``unseen at calibration: group '<grouping>=<label>'``. A table without one of the columns, and a label
that would read as another cell's, are refused. The online router and the drift alarm watch one group
per request: with a collection certificate they are refused when the router is built (``online``,
``drift``); a certificate calibrated on a membership matrix (no request attribute names its groups)
is refused too.

**Each decision is recorded** (:meth:`CertifiedRouter.decide`, :meth:`CertifiedRouter.serve`): its
request id (``item_id``), group (a collection's: the cell), status, score, threshold, route and the
certificate's SHA-256 (:attr:`CertifiedRouter.certificate_sha256`) go into the returned row and, one
strict JSON line per request (:func:`json_line`: ``null`` for a score or threshold that is not finite),
to the Python logger :data:`DECISION_LOGGER` (level INFO); nothing is kept in memory.

The guarantee is the certificate's (a valid recipe's): per group, the expected extra loss
``E[loss * 1{U <= u_j} | G_j]`` is at most ``eps`` with probability at least
``1 - alpha`` over the calibration data (Theorem 4.2; for all groups at once only with the
Bonferroni correction), for requests drawn like the calibration table (same models, prompts,
samplings and score, the score computed from text distributed like the calibration text). The
certificate's provenance names that table; the router cannot check that live traffic resembles it
(``OnlineGPAC``'s drift alarm can).
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..audit import routing_groups
from ..calibrate import NO_FEASIBLE, ROUTING, UNSEEN, GroupWarning
from ..certificate import Certificate
from ..checks import DataError, ParameterError
from ..group_collection import ambiguous, collection
from ..registry import removed
from ..scores import ROLES, SCORES
from .drift import DriftAlarm, DriftStore
from .engines import Sampling, item_seed
from .generation import model_defaults, split_thinking, walk_samplings
from .router_model import embedder as embedder_named
from .router_model import load_router_model

__all__ = [
    "CertifiedRouter",
    "ServeOptions",
    "DECISION_LOGGER",
    "DECISION_FIELDS",
    "ROUTES",
    "NO_GROUP",
    "json_line",
]

#: The Python logger each decision goes to, one JSON object per line (level INFO).
DECISION_LOGGER = "gpac_utils.decisions"


def json_line(record) -> str:
    """A decision record as one strict JSON line: ``null`` for a number that is not finite.

    Examples
    --------
    >>> json_line({"score": float("nan"), "threshold": float("-inf"), "route": "think"})
    '{"score": null, "threshold": null, "route": "think"}'
    """

    def finite(v):
        if isinstance(v, float | np.floating) and not math.isfinite(v):
            return None
        return v

    return json.dumps({k: finite(v) for k, v in dict(record).items()}, default=str, allow_nan=False)


#: The fields of a decision record, in order: ``request_id`` is the request's ``item_id``; ``group`` its group (a
#: collection certificate's: its cell, ``subject=algebra & language=en``, module description).
DECISION_FIELDS = ("request_id", "group", "status", "score", "threshold", "route", "certificate_sha256")
#: The label of a request that names no group (of a grouping): unknown to every certificate, it thinks.
NO_GROUP = "(no group)"
#: The two routes: the non-thinking (cheap) model answers, or the thinking model does.
ROUTES = ("nothink", "think")
_log = logging.getLogger(DECISION_LOGGER)
_RECORDED = ("item_id", "group", "status", "score", "threshold", "route_nothink")  # the table's columns of a record

__getattr__ = removed(__name__, {"SCORERS": "gpac_utils.scores.SCORES[name].serve (each score entry serves itself)"})


@dataclass(frozen=True)
class ServeOptions:
    """How a :class:`CertifiedRouter` serves, beside what its certificate fixes (declared once, passed whole).

    Parameters
    ----------
    samplings : mapping, optional
        Sampling per role of :data:`~gpac_utils.scores.ROLES` (their seeds are replaced per request);
        default :func:`~gpac_utils.llm.generation.walk_samplings`, the settings of the committed
        ``arith`` table.
    seed : int, default 0
        Base seed; request ``i`` samples with ``item_seed(seed, item_id)``.
    score : str, optional
        The score's registry name (:data:`gpac_utils.scores.SCORES`), for a certificate that does not
        name one (its ``score``; the table's column, ``columns.score``, may be named anything); another
        score than the one it names is refused.
    window : int, optional
        Requests in flight per engine call (vLLM on CPU: see :class:`~gpac_utils.llm.generation.GenerationRequest`).
    score_model : path, optional
        The score's fitted model file (default: the one the certificate records, else beside the
        certificate file); hash-checked against the certificate.
    embedder : object, optional
        The score model's embedder (default: a new one of its
        :data:`~gpac_utils.llm.router_model.EMBEDDERS` entry).
    """

    samplings: Mapping[str, Sampling] | None = None
    seed: int = 0
    score: str | None = None
    window: int | None = None
    score_model: str | Path | None = None
    embedder: object | None = None


class CertifiedRouter:
    """Serve requests from a certificate and two engines (module description).

    Parameters
    ----------
    certificate : Certificate, dict, str or path
        The :class:`~gpac_utils.certificate.Certificate` (used as it is), or a thresholds file written by
        ``gpac calibrate`` (read by :meth:`~gpac_utils.certificate.Certificate.read`).
    nothink, think : engine
        The non-thinking and the thinking engine (they may be the same object, as in the walk).
    options : ServeOptions, optional
        Samplings, seed, the score's registry name, window, score model and embedder (:class:`ServeOptions`).
    online : OnlineGPAC, optional
        An online router to feed (module description); needs ``loss_fn``; refused with a collection certificate.
    loss_fn : callable, optional
        ``loss_fn(request, nothink_answer, think_answer) -> float`` in ``[0, loss_bound]``.
    drift : DriftStore or path, optional
        The drift alarms' store (:mod:`gpac_utils.llm.drift`): a group under an alarm thinks, with
        status ``"drift alarm: always think"``; labels come back through :meth:`feedback`. Refused with a
        collection certificate (the alarm watches one group per request).

    Raises
    ------
    DataError
        For a certificate that is not a valid thresholds file.
    ParameterError
        For a missing engine (:meth:`for_decisions` decides without engines), a certificate whose score
        the router cannot compute (a ``score_router`` certificate without a recorded score model
        included), ``online`` without ``loss_fn``, or a collection certificate calibrated on a membership
        matrix, with ``online`` or with ``drift``: all when the router is built.

    Examples
    --------
    >>> router = CertifiedRouter("thresholds.json", engine, engine)  # doctest: +SKIP
    >>> served = router.serve(requests)  # item_id, group, messages / messages_nothink  # doctest: +SKIP
    >>> served[["item_id", "route_nothink", "answer"]]  # doctest: +SKIP
    """

    def __init__(
        self,
        certificate,
        nothink,
        think,
        options: ServeOptions | None = None,
        *,
        online=None,
        loss_fn: Callable | None = None,
        drift=None,
    ):
        for role, engine in (("nothink", nothink), ("think", think)):
            missing = [a for a in ("model", "tokenizer", "stream") if not hasattr(engine, a)]
            if engine is None or missing or not callable(engine.stream):
                what = "None" if engine is None else f"a {type(engine).__name__} without {missing or ['stream()']}"
                raise ParameterError(
                    f"{role}: needs an engine (model, tokenizer, stream()), got {what}; "
                    "CertifiedRouter.for_decisions(certificate) decides without engines"
                )
        self._build(certificate, nothink, think, options, online, loss_fn, drift)

    @classmethod
    def for_decisions(cls, certificate, options: ServeOptions | None = None, *, drift=None) -> CertifiedRouter:
        """A router without engines, for :meth:`decide` only (a gateway's pre-call decision).

        Everything else is checked as when a router with engines is built; :meth:`serve` is refused.
        """
        self = cls.__new__(cls)
        self._build(certificate, None, None, options, None, None, drift)
        return self

    def _build(self, certificate, nothink, think, options, online, loss_fn, drift) -> None:
        options = ServeOptions() if options is None else options
        if not isinstance(options, ServeOptions):
            raise ParameterError(f"options: must be a ServeOptions, got {type(options).__name__}")
        cert = certificate if isinstance(certificate, Certificate) else Certificate.read(certificate)
        self._cells = cert.kind == "collection"  # a group of each grouping per request; a threshold per cell
        if self._cells:
            self._check_collection(cert, online, drift)
        self.certificate, self.calibrator, self.options = cert, cert.calibrator(), options
        columns = cert.columns
        if options.score and cert.score and options.score != cert.score:
            raise ParameterError(
                f"score: the certificate was calibrated on score {cert.score!r}, not {options.score!r}"
            )
        name = options.score or cert.score  # the score's registry name (its column may be named anything)
        served = [key for key, score in SCORES.items() if score.serve is not None]
        if name not in served:
            raise ParameterError(
                f"certificate: calibrated on score {name!r} (column {columns.get('score')!r}), which the "
                f"router cannot compute; it computes {served} (ServeOptions(score=) names the score of a certificate "
                "without one)"
            )
        self.score = SCORES[name]  # its registry entry (self.score.column: its name)
        self.group_col = columns.get("group") or "group"
        #: The request columns that name its groups: one per grouping of a collection certificate, in its order
        #: (:attr:`~gpac_utils.certificate.Certificate.group_columns`); G-PAC's group column; else none.
        self.group_columns = cert.group_columns if self._cells else (self.group_col,) if cert.kind == "known" else ()
        if online is not None and loss_fn is None:
            raise ParameterError("loss_fn: feeding an online router needs loss_fn(request, nothink, think)")
        self.nothink, self.think, self.online, self.loss_fn = nothink, think, online, loss_fn
        self.window = options.window
        self.samplings = {**walk_samplings(), **dict(options.samplings or {})}
        self.seed = int(options.seed)
        self.think_is_thinking = model_defaults(think.model)[1] if think is not None else False
        self.statuses = {g: e["status"] for g, e in cert.groups.items()}
        self.score_model = self._load_score_model(certificate, options.score_model, options.embedder)
        self._embedder = options.embedder
        #: The request columns the score reads: its entry's, and its fitted model's text column.
        self.request_columns = tuple(
            dict.fromkeys([*self.score.request_columns, *([self.score_model.text] if self.score_model else [])])
        )
        #: The certificate's SHA-256: of its JSON as ``gpac calibrate`` writes it (:meth:`Certificate.to_json`),
        #: so ``sha256sum thresholds.json`` for a file it wrote in the current schema version; the same for
        #: the file, its text, its dict or its object, whatever the whitespace and key order.
        self.certificate_sha256 = cert.sha256
        store = drift if drift is None or isinstance(drift, DriftStore) else DriftStore(drift)
        self.drift = None if store is None else DriftAlarm(store, cert, self.certificate_sha256)
        self._known = cert.kind == "known"
        self._thresholds = {g: (-math.inf if t is None else float(t)) for g, t in cert.thresholds.items()}
        if self.score.pre_call:  # its computation runs once on no request: what it needs is checked now
            self._scores(pd.DataFrame({"item_id": [], **{c: [] for c in self.request_columns}}), None)

    @staticmethod
    def _check_collection(cert: Certificate, online, drift) -> None:
        """What a collection certificate cannot be served with, refused in one line naming the argument."""
        cols = list(cert.group_columns)
        if cert.groupings is None:
            raise ParameterError(
                f"certificate: this {cert.method} certificate was calibrated on a membership matrix; no request "
                "attribute names its groups (route it from Python: Certificate.calibrator().route)"
            )
        for name, given in (("online", online), ("drift", drift)):
            if given is not None:
                raise ParameterError(
                    f"{name}: watches one group per request; a {cert.method} certificate puts each request in a "
                    f"group of each grouping {cols}: serve it without {name}"
                )
        taken = [g for g in cert.groups if g in (NO_GROUP, *(f"{k}={NO_GROUP}" for k in cert.groupings))]
        if taken:
            raise ParameterError(
                f"certificate: has a group {taken[0]!r}, the label of a request without one; rename that label and "
                "recalibrate"
            )

    def _load_score_model(self, source, path, embedder):
        """The score's fitted model the certificate records (``provenance.score_model``), hash-checked."""
        record = (self.certificate.provenance or {}).get("score_model")
        if record is None:
            if path is not None:
                raise ParameterError(
                    "score_model: the certificate records no score model (gpac calibrate --score-model)"
                )
            return None
        if path is None:  # as recorded, else beside the certificate file
            path = Path(record["path"])
            beside = (
                Path(source).parent / path.name
                if isinstance(source, (str, Path)) and not str(source).lstrip().startswith("{")
                else path
            )
            path = path if path.exists() or not beside.exists() else beside
        model = load_router_model(path, record["sha256"])
        if model.embedder != record["embedder"]:
            raise DataError(
                f"{path}: reads {model.embedder!r} embeddings; the certificate records {record['embedder']!r}"
            )
        name = getattr(embedder, "model_name", None) if embedder is not None else None
        if embedder is not None and name != model.embedder:
            raise ParameterError(
                f"embedder: the certificate's score model reads {model.embedder!r} embeddings, not {name!r}"
            )
        return model

    @property
    def embedder(self):
        """The score model's embedder: the one given, else a new one of its
        :data:`~gpac_utils.llm.router_model.EMBEDDERS` entry."""
        if self._embedder is None:
            self._embedder = embedder_named(self.score_model.embedder)
        return self._embedder

    # -- the steps --------------------------------------------------------------------------------
    def conversations(self, role: str, requests: pd.DataFrame) -> list:
        """Each request's conversation for ``role``: the requests' column its :data:`~gpac_utils.scores.ROLES`
        entry names (:meth:`~gpac_utils.scores.Role.prompt_column`; ``nothink``: ``messages_nothink``, else
        ``messages``); a role without its column is a one-line :class:`~gpac_utils.checks.DataError`."""
        return list(requests[ROLES[role].prompt_column(requests.columns, "requests")])

    def generate(self, role: str, requests: pd.DataFrame, conversations=None) -> dict:
        """``role``'s answers to ``requests`` on its model's engine: ``{item_id: [(answer, completion), ...]}``.

        What a score's serving computation calls (:attr:`gpac_utils.scores.Score.serve`) to sample a role
        of its own. Each request is sampled at its item seed with the role's sampling (``n_samples``
        answers; :class:`ServeOptions`), as :mod:`gpac_utils.llm.generation` generates it; ``conversations``:
        one per request (default: :meth:`conversations`). A thinking model's answer is cut at ``</think>``.
        """
        if not len(requests):
            return {}
        thinking = ROLES[role].model == "think" and self.think_is_thinking
        engine = self.think if ROLES[role].model == "think" else self.nothink
        ids, base = requests["item_id"].tolist(), self.samplings[role]
        convs = self.conversations(role, requests) if conversations is None else conversations
        calls = [(i, c, base.with_(seed=item_seed(self.seed, i))) for i, c in zip(ids, convs)]
        end_id = engine.tokenizer.get_vocab().get("</think>") if thinking else None
        out = {}
        for key, comps in engine.stream(calls, self.window):
            out[key] = [(split_thinking(c, thinking=thinking, end_id=end_id)[1], c) for c in comps]
        return out

    def _scores(self, requests: pd.DataFrame, cheap: dict) -> np.ndarray:
        return np.asarray(self.score.serve(self, requests, cheap), dtype=float)

    def _groups(self, requests: pd.DataFrame, scores: np.ndarray):
        """The labels passed to the calibrator, and the group whose status each request gets."""
        known = self.certificate.kind == "known"
        if known and self.group_col not in requests.columns:
            raise DataError(f"requests: {self.certificate.method} needs the group column {self.group_col!r}")
        groups = requests[self.group_col].to_numpy() if known else None
        return routing_groups(self.certificate, self.calibrator, scores, groups)

    def _cell_groups(self, requests: pd.DataFrame, where: str = "requests: column"):
        """A collection certificate's labels of the requests (:meth:`Certificate.groups_from`), each request's cell
        (as :func:`~gpac_utils.group_collection.collection` names it) and status (module description); ``where``
        names a column in a refusal."""
        cert, cols = self.certificate, list(self.group_columns)
        absent = [c for c in cols if c not in requests.columns]
        if absent:
            raise DataError(f"requests: {cert.method} needs the group column {absent[0]!r} (one per grouping: {cols})")
        raw = requests[cols]
        blank = raw.isna() | (raw.astype(str) == "")
        labels = cert.groups_from(raw.mask(blank, NO_GROUP))
        for g, c in zip(cert.groupings, cols):
            bad = ambiguous(labels[g], cert.groupings)
            if bad.any():
                raise DataError(
                    f"{where} {c!r} has the label {labels[g].iloc[int(np.argmax(bad))]!r}, which holds "
                    "' & ' and a grouping's 'name=' (what joins a cell's groups)"
                )
        coll = collection(labels, len(requests), "requests", every_group_used=False)
        keys = [
            (c, cols[int(np.argmax(b))] if b.any() else None) for c, b in zip(coll.cells.tolist(), blank.to_numpy())
        ]
        first: dict = {}
        for i, key in enumerate(keys):  # a status per cell and missing column, from its first request's groups
            first.setdefault(key, i)
        status = {
            k: self._cell_status(*k, [coll.names[j] for j in np.flatnonzero(coll.member[i])]) for k, i in first.items()
        }
        return labels, coll.cells, np.array([status[k] for k in keys], dtype=object)

    def _cell_status(self, cell: str, blank: str | None, groups: list[str]) -> str:
        """A request's status by its cell, ``blank`` the first column it has no label in, and its groups (module
        description)."""
        cert = self.certificate
        unknown = [g for g in groups if g not in cert.groups]
        if blank is not None:
            return f"{UNSEEN}: no {blank!r}"
        if unknown:
            return f"{UNSEEN}: group {unknown[0]!r}"
        if cell not in cert.thresholds:
            return UNSEEN
        st = [cert.groups[g]["status"] for g in groups]
        if cert.thresholds[cell] is None and all(s in ROUTING for s in st):  # its groups route, the cell never does
            return NO_FEASIBLE  # (Shift-G-PAC: a level below its shift; a plugin's closed cell), not "certified"
        return next((s for s in st if s not in ROUTING), st[0])

    def _route(self, requests: pd.DataFrame, scores: np.ndarray, where: str = "requests: column"):
        """The group each request is reported under, its threshold, whether it goes to the cheap model, and its status
        (None: its group's, :meth:`_drift_route`; a collection's: its cell's, :meth:`_cell_groups`)."""
        if self._cells:
            labels, named, statuses = self._cell_groups(requests, where)
        else:
            (labels, named), statuses = self._groups(requests, scores), None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GroupWarning)  # unseen groups: their status says it
            thr = self.calibrator.thresholds_for(scores, labels)
        return named, thr, scores <= thr, statuses

    def request_groups(self, group) -> pd.DataFrame:
        """One request's group columns as a one-row table (a collection certificate's :attr:`group_columns`, from
        a mapping of column to label; an absent column or ``None``: no label there)."""
        if not isinstance(group, Mapping):
            raise ParameterError(
                f"group: a {self.certificate.method} certificate takes a label per grouping, a mapping of its columns "
                f"{list(self.group_columns)} to labels; got {type(group).__name__}"
            )
        return pd.DataFrame({c: [group.get(c)] for c in self.group_columns}, dtype=object)

    def _check_requests(self, requests: pd.DataFrame) -> None:
        if not isinstance(requests, pd.DataFrame):
            raise DataError(f"requests: must be a pandas DataFrame, got {type(requests).__name__}")
        if "item_id" not in requests.columns:
            raise DataError("requests: need a unique 'item_id' per request (the request id)")
        dup = requests["item_id"].duplicated()
        if dup.any():
            raise DataError(f"requests: item_id {requests['item_id'][dup].iloc[0]!r} appears more than once")
        missing = [c for c in self.request_columns if c not in requests.columns]
        if missing:
            raise DataError(
                f"requests: {self.score.column} needs the {missing[0]!r} column; they have {list(requests)}"
            )

    def records(self, decided: pd.DataFrame) -> list[dict]:
        """The decision records (:data:`DECISION_FIELDS`) of :meth:`decide`'s or :meth:`serve`'s rows."""
        return [
            {
                "request_id": i,
                "group": str(g),
                "status": st,
                "score": float(u),
                "threshold": float(t),
                "route": ROUTES[0] if r else ROUTES[1],
                "certificate_sha256": self.certificate_sha256,
            }
            for i, g, st, u, t, r in zip(*(decided[c] for c in _RECORDED))
        ]

    def log(self, records) -> None:
        """Each decision record to :data:`DECISION_LOGGER`, one strict JSON line (RFC 8259) at level INFO
        (when enabled): a score or threshold that is not finite (no score: ``nan``; an always-think
        threshold: ``-inf``) is written ``null``, as the certificate writes an always-think threshold."""
        if _log.isEnabledFor(logging.INFO):
            for r in records:
                _log.info(json_line(r), extra={"gpac_decision": r})

    def decide_one(self, request_id, group, score: float) -> dict:
        """One pre-scored request's decision record (:data:`DECISION_FIELDS`), as :meth:`decide` gives it,
        without a table (a gateway's per-request path); not logged. ``group``: its label; for a collection
        certificate a mapping of each of :attr:`group_columns` to its label (:meth:`request_groups`)."""
        statuses = None
        if (self._known or self._cells) and not 0.0 <= score <= 1.0:
            raise DataError(f"score: must be in [0, 1], got {score!r}")
        if self._cells:
            names, thrs, _, statuses = self._route(self.request_groups(group), np.array([score]), "metadata key")
            name, thr = str(names[0]), float(thrs[0])
        elif self._known:
            name = str(group)
            thr = self._thresholds.get(name, -math.inf)
        else:
            names, thrs, _, _ = self._route(pd.DataFrame(), np.array([score], dtype=float))
            name, thr = str(names[0]), float(thrs[0])
        [cheap], [status] = self._drift_route([name], [score <= thr], statuses)
        return {
            "request_id": request_id,
            "group": name,
            "status": status,
            "score": float(score),
            "threshold": float(thr),
            "route": ROUTES[0] if cheap else ROUTES[1],
            "certificate_sha256": self.certificate_sha256,
        }

    def decide(self, requests: pd.DataFrame) -> pd.DataFrame:
        """The routes of a pre-call score, before any model runs (what a gateway hook needs).

        Parameters
        ----------
        requests : pandas.DataFrame
            ``item_id`` (unique: the request id), the certificate's group column for G-PAC (one column per
            grouping for a collection certificate: :attr:`group_columns`), and the columns the score reads
            (:attr:`request_columns`).

        Returns
        -------
        pandas.DataFrame
            One row per request: ``item_id``, ``group``, ``status``, ``score``, ``threshold``,
            ``route_nothink`` (True: the cheap model answers it), ``route`` (``nothink`` or ``think``)
            and ``certificate_sha256``; each row is also logged (:data:`DECISION_LOGGER`).

        Raises
        ------
        ParameterError
            For a certificate whose score needs the cheap model's answer (not pre-call).
        DataError
            For requests without unique ``item_id`` or without a column the score reads.
        """
        if not self.score.pre_call:
            raise ParameterError(
                f"certificate: score {self.score.column!r} needs the cheap model's answer; deciding before any call "
                "needs a pre-call score (cost form 'router'), or serve the cascade with CertifiedRouter.serve"
            )
        self._check_requests(requests)
        scores = self._scores(requests, None)
        named, thr, cheap, statuses = self._route(requests, scores)
        cheap, statuses = self._drift_route(named, cheap, statuses)
        out = self._decided(requests["item_id"].tolist(), named, statuses, scores, thr, cheap)
        self.log(self.records(out))
        return out

    def _decided(self, *columns, **more) -> pd.DataFrame:
        """The rows of :meth:`decide`, and the first columns of :meth:`serve`'s: ``columns`` in the order of
        ``_RECORDED``, then the route, the certificate's SHA-256 and ``more``."""
        route = np.where(columns[-1], *ROUTES)
        return pd.DataFrame(
            {**dict(zip(_RECORDED, columns)), "route": route, "certificate_sha256": self.certificate_sha256, **more}
        )

    def serve(self, requests: pd.DataFrame) -> pd.DataFrame:
        """Serve a batch (module description).

        Parameters
        ----------
        requests : pandas.DataFrame
            ``item_id`` (unique), ``messages`` (the conversation; ``messages_nothink`` /
            ``messages_think`` per role where they differ: :meth:`conversations`), the certificate's group column for
            G-PAC (one per grouping for a collection certificate: :attr:`group_columns`), the columns the score
            reads (:attr:`~gpac_utils.scores.Score.request_columns`: ``question`` for ``score_verbalized``) and
            whatever ``loss_fn`` reads.

        Returns
        -------
        pandas.DataFrame
            One row per request, in order: ``item_id``, ``group`` (a collection's: the cell), ``status`` (the
            group's status in the certificate), ``score``, ``threshold``, ``route_nothink`` (True: the non-thinking
            answer is served), ``route`` (``nothink`` or ``think``), ``certificate_sha256``,
            ``answer`` (the one served), ``nothink_answer``, ``think_answer`` (missing where the
            thinking model was not called); with an online router also ``observed`` and ``loss``.
        """
        if self.nothink is None:
            raise ParameterError("serve: this router decides only (CertifiedRouter.for_decisions); give it engines")
        self._check_requests(requests)
        for role in ROUTES:  # both prompts, before any call
            ROLES[role].prompt_column(requests.columns, "requests")
        ids = requests["item_id"].tolist()
        if self.score.pre_call:  # decided from the request: the cheap model answers the items routed to it
            cheap, scores = None, self._scores(requests, None)
        else:
            cheap = self.generate("nothink", requests)
            scores = self._scores(requests, cheap)
        named, thr, route_nothink, statuses = self._route(requests, scores)
        route_nothink, statuses = self._drift_route(named, route_nothink, statuses)
        decisions = None
        need_think = ~route_nothink
        if self.online is not None:
            decisions = self.online.decide(scores, named)
            need_think = need_think | decisions.observe
        if cheap is None:
            pick = np.flatnonzero(route_nothink | (decisions.observe if decisions is not None else False))
            cheap = self.generate("nothink", requests.iloc[pick])
        thought = self.generate("think", requests.iloc[np.flatnonzero(need_think)])
        nothink_answers = [cheap[i][0][0] if i in cheap else None for i in ids]
        think_answers = [thought[i][0][0] if i in thought else None for i in ids]
        out = self._decided(
            ids,
            named,
            statuses,
            scores,
            thr,
            route_nothink,
            answer=[n if r else t for n, t, r in zip(nothink_answers, think_answers, route_nothink)],
            nothink_answer=nothink_answers,
            think_answer=think_answers,
        )
        if decisions is not None:
            losses = np.full(len(ids), math.nan)
            rows = requests.reset_index(drop=True)
            for k in np.flatnonzero(decisions.observe):
                losses[k] = float(self.loss_fn(rows.iloc[k], nothink_answers[k], think_answers[k]))
            self.online.update(scores, losses, named, decisions)
            out["observed"], out["loss"] = decisions.observe, losses
        self.log(self.records(out))
        return out

    # -- drift in production (gpac_utils.llm.drift) -----------------------------------------------
    def _drift_route(self, named, route_nothink, statuses=None):
        """The routes and statuses (default: each group's in the certificate) after the drift alarms: an alarmed
        group's requests think, with status :data:`~gpac_utils.llm.drift.DRIFT_STATUS`."""
        if statuses is None:
            statuses = np.array([self.statuses.get(g, UNSEEN) for g in named], dtype=object)
        if self.drift is None:
            return np.asarray(route_nothink, bool), statuses
        return self.drift.apply(named, route_nothink, statuses)

    def feedback(self, records, losses) -> pd.DataFrame:
        """Feed labelled decision records to the drift alarm (:meth:`gpac_utils.llm.drift.DriftAlarm.feed`).

        Parameters
        ----------
        records : pandas.DataFrame or iterable of dict
            Rows of :meth:`decide` or :meth:`serve`, or the gateway's decision records (their request id,
            ``item_id`` or ``request_id``, and ``certificate_sha256`` included).
        losses : array_like
            One loss per record, in ``[0, loss_bound]``; the records in an order that does not depend on
            their losses (the requests' order, or a grader whose latency does not depend on the verdict).

        Returns
        -------
        pandas.DataFrame
            What each group did (:meth:`~gpac_utils.llm.drift.DriftAlarm.feed`).

        Raises
        ------
        ParameterError
            For a router built without ``drift=``.
        """
        if self.drift is None:
            raise ParameterError("drift: feedback needs a drift store (CertifiedRouter(..., drift=DriftStore(path)))")
        return self.drift.feed(records, losses)
