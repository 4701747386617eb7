r"""The certificate: one value, :class:`Certificate`, for a thresholds file a reviewer can check.

A :class:`Certificate` is built from a fitted calibrator (:meth:`Certificate.from_calibrator`:
``gpac calibrate`` and :class:`~gpac_utils.llm.serve.CertifiedRouter`'s tests) or from a file
(:meth:`Certificate.read`: a path, its JSON text or its parsed dict). A file gets one parse, one
validation (:func:`gpac_utils.thresholds_schema.validate_file`, then the certificate's own fields,
here) and one migration to the current schema version (:data:`~gpac_utils.thresholds_schema.SCHEMA_VERSION`);
the value turns back into a calibrator (:meth:`Certificate.calibrator`), is printed for review
(:meth:`Certificate.render`, ``gpac inspect``) and written (:meth:`Certificate.to_json`).
``gpac route``, ``gpac inspect``, :func:`~gpac_utils.certificate.from_json` and the serving router
all read files through it.

Its fields beyond the calibrator's own JSON (:meth:`~gpac_utils.calibrate.PAC.to_json`):

``score``
    the score's **registry name** (:data:`gpac_utils.scores.SCORES`, e.g. ``score_logits``;
    ``null`` when the column holds no registered score), beside ``columns.score``, the table's
    column it was read from (any name). The serving router computes the registry's score.
``provenance``
    what the thresholds were calibrated on and with: the SHA-256 of the table file
    (``table.sha256``) and of every column used (``columns.<role>``: the column's name, dtype and
    the SHA-256 of its values, :func:`column_sha256`), the package and its version, the named
    recipe the settings started from and the recipe's fields the settings changed from it
    (``recipe_overrides``, from schema version 5: so the name can be checked against the settings),
    the seed and the creation time (UTC, ISO 8601; the ``SOURCE_DATE_EPOCH`` environment variable,
    the reproducible-builds convention, fixes it); with ``gpac calibrate --score-model``, the score's
    model (``score_model``: its path, SHA-256, embedder and text column); and, for each registry name
    it uses (:data:`NAMED`: the method, bound, correction, risk and score), the distribution and version
    that provided it (``providers``: ``gpac-utils`` for the built-in entries, a plugin's distribution,
    or ``null`` for code of no installed distribution; :meth:`gpac_utils.registry.Registry.provider`).
    A file that names a plugin's entry no installed distribution provides is refused on reading, in
    one line naming the name and the distribution it came from. Every field is declared in
    :mod:`gpac_utils.thresholds_schema`, with how ``gpac verify`` checks it (:mod:`gpac_utils.verify`).
    ``item_ids`` (when the table has an id column) records *which* items were calibrated on, so
    that ``gpac audit`` can refuse audit data that shares items with them in any order, subset or
    file format: ``{"digest": "sha256-48", "n": N, "values": "..."}``, the ``N`` distinct ids'
    digests (:func:`id_digests`: the first 12 hex characters, 48 bits, of the SHA-256 of each id's
    text), sorted and concatenated (byte-stable). The ids are not written in clear, but this is no
    secrecy: ids that can be enumerated are recovered from their digests (and ``router.json`` stores
    its fitting ids in clear). Treating SHA-256 as a random function, two distinct ids share a digest
    with probability ``2**-48`` per pair, so a false overlap between ``n`` calibration and ``m``
    audit ids has probability about ``n * m * 2**-48``; that is a heuristic, not a bound (ids crafted
    to collide take about ``2**24`` hashes), and a collision only causes a false refusal. The real
    failure is the other way: the same items under changed ids are not detected, so the audit items
    must be fresh draws. Ids are compared as text, integers (also an integral float, as a CSV column
    with a gap reads) written in decimal: ``7``, ``7.0`` and ``"7"`` are one id, but the text
    ``"7.0"`` is another; an integer id above ``2**53`` read as a float (a CSV column with a gap)
    changes value and so its digest.
``groups``
    per group: ``n`` (calibration items), ``labelled`` (expert labels used), ``status`` (one of
    :data:`~gpac_utils.calibrate.STATUSES`), ``threshold`` (``null``: always think) and ``ucb``,
    the upper confidence bound on the group's risk evaluated at its data-chosen threshold (``null``
    when the group always thinks, and for ``risk="routed"``, which certifies by tests); what is
    certified is that the risk is at most ``eps``, and ``ucb`` carries no ``1 - alpha`` guarantee
    of its own. A certificate of several groupings (Min-G-PAC, Path-G-PAC) holds every group of every
    grouping here, ``groupings`` and a threshold per cell (:attr:`Certificate.group_columns`).

The statuses: *certified*; *always think: too few items* (fewer than ``min_group_size``, or fewer
than the bound needs to certify anything: :func:`gpac_utils.feasibility.min_items` for the joint
risk; for ``risk="routed"`` ``ceil(log(alpha / 64) / log(1 - eps / R))``, ``R`` the terms' range,
as its fallback procedure tests each of its 64 grid points at ``alpha / 64`` until one is rejected); *always
think: no feasible threshold* (enough items, but the bound exceeds ``eps`` at every candidate);
*unseen at calibration* (a learned C-PAC group that got no calibration item; at routing, a G-PAC
group absent from the file).

Column hashes are canonical, independent of the file format: numbers as the bytes of a
little-endian float64 array (``<f8``), labels as the UTF-8 JSON array of their strings. So a CSV
and a Parquet copy of a table give the same column hashes (and different file hashes).

Migration of older files (:meth:`Certificate.read`): a file without ``schema_version`` is version
1; versions 1 and 2 have no provenance, and each group's status is derived from its size and the
settings; versions before 4 have no ``score``: it is the calibration column when that column is a
registered score's name, else ``null``; versions before 5 have no ``provenance.recipe_overrides``
(the recipe's name is then not checked against the settings); ``provenance.providers`` is optional
(files written before it have none).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from . import multigroup as _multigroup  # registers Min-G-PAC and Path-G-PAC (their files read here)
from .bounds import BOUNDS
from .calibrate import CALIBRATORS, CERTIFIED, NO_FEASIBLE, ROUTING, STATUSES, TOO_FEW, UNSEEN
from .checks import DataError, ParameterError
from .feasibility import min_items
from .recipe import as_recipe
from .registry import PACKAGE, package_version
from .risks import RISKS
from .scores import SCORES
from .settings import CORRECTIONS, Settings
from .thresholds_schema import (
    GROUP_ENTRY,
    RECIPE_FIELDS,
    SCHEMA_VERSION,
    ThresholdsFileError,
    check_record,
    grouping_role,
    validate_file,
)

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "Certificate",
    "from_json",
    "column_sha256",
    "file_sha256",
    "created_at",
    "id_digests",
    "ID_DIGEST",
    "recipe_overrides",
    "NAMED",
]

SCHEMA = "gpac-thresholds"
GROUP_FIELDS = tuple(GROUP_ENTRY)
#: How the review table shows each field (:meth:`Certificate.render`).
_CELLS = {"n": "{:d}", "labelled": "{:d}", "status": "{}", "threshold": "{:.4g}", "ucb": "{:.4g}"}
#: ``provenance.item_ids.digest``: each id's SHA-256, its first 12 hex characters (48 bits).
ID_DIGEST = "sha256-48"
#: The hex characters kept of each id's SHA-256.
ID_HEX = 12


def column_sha256(values) -> str:
    """SHA-256 of a column's values, canonically (numbers: ``<f8`` bytes; anything else: UTF-8 JSON of strings).

    Examples
    --------
    >>> column_sha256([0, 1]) == column_sha256(np.array([0.0, 1.0], dtype=np.float32))
    True
    >>> column_sha256(["a", "b"]) == column_sha256(np.array(["a", "b"], dtype=object))
    True
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "biuf":
        payload = np.ascontiguousarray(arr, dtype="<f8").tobytes()
    else:
        payload = json.dumps([str(v) for v in arr.tolist()], ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(payload).hexdigest()


def _id_text(v) -> str:
    """An id's canonical text: an integer (also an integral float) in decimal, anything else as ``str``."""
    integral = isinstance(v, int | np.integer) or isinstance(v, float | np.floating) and float(v).is_integer()
    return str(int(v)) if integral and not isinstance(v, bool) else str(v)


def id_digests(values) -> list[str]:
    """Each id's digest, in order: the first 12 hex characters of the SHA-256 of its canonical text.

    The canonical text writes an integer, or an integral float, in decimal, so that a CSV, a
    Parquet and a JSONL copy of an id column give the same digests.

    Examples
    --------
    >>> id_digests([7]) == id_digests(["7"]) == id_digests(np.array([7.0]))
    True
    >>> len(id_digests(["a"])[0])
    12
    """
    return [hashlib.sha256(_id_text(v).encode()).hexdigest()[:ID_HEX] for v in np.asarray(values, dtype=object)]


def _split(values: str) -> list[str]:
    """``provenance.item_ids.values`` split into its digests."""
    return [values[i : i + ID_HEX] for i in range(0, len(values), ID_HEX)]


def _check_item_ids(rec) -> None:
    """``provenance.item_ids``, when present: the digest's name, and ``n`` digests of 12 hex characters, sorted."""
    if not isinstance(rec, dict) or rec.get("digest") != ID_DIGEST:
        raise ThresholdsFileError(f"provenance.item_ids: must be an object with digest {ID_DIGEST!r}, n and values")
    n, values = rec.get("n"), rec.get("values")
    if not isinstance(n, int) or isinstance(n, bool) or not isinstance(values, str) or len(values) != ID_HEX * n:
        raise ThresholdsFileError(f"provenance.item_ids: values must hold n={n!r} digests of {ID_HEX} characters")
    chunks = _split(values)
    if any(c.strip("0123456789abcdef") for c in chunks) or chunks != sorted(set(chunks)):
        raise ThresholdsFileError("provenance.item_ids: values must be distinct lowercase hex digests, sorted")


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def created_at(created: str | datetime | None = None) -> str:
    """The creation time as UTC ISO 8601 (``...Z``): ``created``, else ``SOURCE_DATE_EPOCH``, else now.

    Examples
    --------
    >>> created_at(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    '2026-01-02T03:04:05Z'
    """
    if isinstance(created, str):
        return created
    if created is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        created = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return created.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def recipe_overrides(recipe_name: str | None, recipe) -> dict | None:
    """The fields of ``recipe`` that differ from the named recipe's (``provenance.recipe_overrides``);
    None without a name.

    Examples
    --------
    >>> from gpac_utils.recipe import PAPER
    >>> recipe_overrides("paper", PAPER.replace(bound="hoeffding_bentkus")), recipe_overrides(None, PAPER)
    ({'bound': 'hoeffding_bentkus'}, None)
    """
    if recipe_name is None:
        return None
    base = as_recipe(recipe_name)
    return {k: getattr(recipe, k) for k in RECIPE_FIELDS if getattr(recipe, k) != getattr(base, k)}


#: The registry names a certificate uses: role -> (registry, where the file holds the name).
NAMED = {
    "method": (CALIBRATORS, ("method",)),
    "bound": (BOUNDS, ("settings", "bound")),
    "correction": (CORRECTIONS, ("settings", "correction")),
    "risk": (RISKS, ("settings", "risk")),
    "score": (SCORES, ("score",)),
}


def _providers(doc: dict) -> dict:
    """``provenance.providers``: role -> the name used, and the distribution and version that provided it."""
    out = {}
    for role, (registry, path) in NAMED.items():
        name = functools.reduce(lambda d, k: d.get(k) if isinstance(d, dict) else None, path, doc)
        if name is not None:
            out[role] = dict(zip(("name", "distribution", "version"), (name, *registry.provider(name))))
    return out


def _check_providers(recorded) -> None:
    """A recorded name that nothing installed provides: one line naming it and the distribution it came from
    (the record's own checks: :func:`~gpac_utils.thresholds_schema.validate_file`)."""
    for role, rec in recorded.items() if isinstance(recorded, dict) else ():
        name = rec.get("name") if role in NAMED and isinstance(rec, dict) else None
        if isinstance(name, str) and name not in NAMED[role][0]:
            what, dist = f"provenance.providers[{role!r}]: {NAMED[role][0].what} {name!r}", rec.get("distribution")
            if not dist:
                raise ThresholdsFileError(f"{what} was registered by code of no distribution; register it to read this")
            raise ThresholdsFileError(
                f"{what} came from {dist} {rec.get('version')}, which is not installed here (or does not provide it "
                f"any more): install {dist} to read this certificate"
            )


def _group_entries(cal) -> dict:
    """Per group: n, labelled, status, threshold, ucb (C-PAC's learned groups without items: unseen; a collection's
    groups: :func:`gpac_utils.multigroup.certificate_groups`)."""
    if CALIBRATORS[cal.name].groups == "collection":
        return _multigroup.certificate_groups(cal)
    out = {}
    for g, t in cal.thresholds_.items():
        rec = cal.groups_.get(g)
        finite = math.isfinite(t)
        out[g] = {
            "n": int(cal.group_sizes_.get(g, 0)) if rec is None else rec.n,
            "labelled": None if rec is None else rec.labelled,
            "status": (CERTIFIED if finite else TOO_FEW) if rec is None else rec.status,
            "threshold": float(t) if finite else None,
            "ucb": None if rec is None else rec.ucb,
        }
    partition = getattr(cal, "partition_", None)
    if partition is not None:
        for j in range(len(partition.boundaries) + 1):
            out.setdefault(f"c{j}", {"n": 0, "labelled": 0, "status": UNSEEN, "threshold": None, "ucb": None})
    return dict(sorted(out.items()))


def _parse(source, where: str | None) -> tuple[dict, str]:
    """The parsed JSON of a path, a JSON text or a dict, and what to call it in messages (one parse)."""
    if isinstance(source, Mapping):
        return dict(source), where or "certificate"
    if not isinstance(source, str | bytes | bytearray | os.PathLike):
        kind = type(source).__name__
        raise DataError(f"{where or 'certificate'}: must be a path, the JSON text or its dict, got {kind}")
    text = source.decode() if isinstance(source, bytes | bytearray) else source
    if isinstance(source, os.PathLike) or not str(text).lstrip().startswith("{"):
        where = where or str(source)
        try:
            text = Path(source).read_text()
        except FileNotFoundError:
            raise DataError(f"{where}: no such file") from None
        except OSError as exc:
            raise DataError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    where = where or "certificate"
    try:
        return json.loads(text), where
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _check_fields(payload: dict) -> None:
    """The certificate's own fields in depth (the rest: :func:`~gpac_utils.thresholds_schema.validate_file`)."""
    if "groups" not in payload and "provenance" not in payload:
        return  # a calibrator's own JSON (to_json), or a file from before the certificate
    groups, thr = payload.get("groups"), payload.get("thresholds", {})
    if not isinstance(groups, dict):
        raise ThresholdsFileError(f"groups: must be an object of group -> entry (schema version {SCHEMA_VERSION})")
    collection = CALIBRATORS[payload["method"]].groups == "collection"  # groups of groupings; thresholds per cell
    for g, e in groups.items():
        missing = [k for k in GROUP_FIELDS if not isinstance(e, dict) or k not in e]
        if missing:
            raise ThresholdsFileError(f"groups[{g!r}] lacks {missing}")
        if e["status"] not in STATUSES:
            raise ThresholdsFileError(f"groups[{g!r}].status must be one of {list(STATUSES)}, got {e['status']!r}")
        check_record(e, GROUP_ENTRY, f"groups[{g!r}]", payload)
        has, routes = e["threshold"] is not None, e["status"] in ROUTING
        if has and not routes or routes and not has and not collection:  # a collection's group: own threshold or not
            raise ThresholdsFileError(f"groups[{g!r}]: status {e['status']!r} with threshold {e['threshold']!r}")
        if e["status"] != UNSEEN and (g in thr or not collection) and thr.get(g, "absent") != e["threshold"]:
            raise ThresholdsFileError(f"groups[{g!r}].threshold {e['threshold']!r} differs from thresholds[{g!r}]")
    if collection:
        _multigroup.check_cells(groups, thr, payload.get("groupings"))
    absent = sorted(set(thr) - set(groups))
    if absent and not collection:
        raise ThresholdsFileError(f"groups: thresholds of {absent} have no entry in 'groups'")
    prov = payload.get("provenance")
    if prov is None:  # present: an object with its required fields (validate_file)
        need = ["table", "columns", "package_version", "seed", "created"]
        raise ThresholdsFileError(f"provenance: must be an object with {need}")
    if "item_ids" in prov:
        _check_item_ids(prov["item_ids"])


def _legacy_groups(payload: dict, settings: Settings) -> dict:
    """A file without ``groups``: each group's status from its size and the settings (no labelled count, no bound)."""
    alpha = settings.alpha_per_group(len(payload["thresholds"]))
    need = max(min_items(settings.eps, alpha, settings.recipe, loss_bound=settings.loss_bound), settings.min_group_size)
    out = {}
    for g, t in payload["thresholds"].items():
        n = payload.get("group_sizes", {}).get(g)
        status = CERTIFIED if t is not None else (TOO_FEW if n is not None and n < need else NO_FEASIBLE)
        out[g] = {"n": n, "labelled": None, "status": status, "threshold": t, "ucb": None}
    return out


def _migrate(payload: dict, settings: Settings) -> dict:
    """A validated file of any version read as the current one (every setting spelled out, ``score`` and
    ``groups`` filled in)."""
    doc = dict(payload)
    doc["settings"] = settings.to_dict(CALIBRATORS[doc["method"]].cls.OPTIONS)
    if "score" not in doc:  # before version 4: the column, when it is a registered score's name
        column = (doc.get("columns") or {}).get("score")
        doc["score"] = column if column in SCORES else None
    if "groups" not in doc:
        doc["groups"] = _legacy_groups(doc, settings)
    doc["schema_version"] = SCHEMA_VERSION
    doc.setdefault("schema", SCHEMA)
    return doc


@dataclass(frozen=True, eq=False)
class Certificate:
    """A thresholds file, parsed, validated and migrated once (module description).

    Build one with :meth:`from_calibrator` or :meth:`read`, not directly.

    Attributes
    ----------
    document : dict
        The file's fields at the current schema version (what :meth:`to_json` writes).
    settings : Settings
        Every setting of the calibrator, whole.
    version : int
        The schema version the source was written in (1 for a file without one).
    has_provenance : bool
        Whether the source had provenance and per-group records (``gpac calibrate``'s files from
        version 3 on; not a calibrator's own ``to_json``).

    Examples
    --------
    >>> from gpac_utils import PAC
    >>> u = np.linspace(0, 1, 400)
    >>> cert = Certificate.from_calibrator(PAC(eps=0.1).fit(u, (u > 0.8).astype(float)), created="2026-01-01T00:00:00Z")
    >>> cert.method, cert.groups["__all__"]["status"], cert.document["provenance"]["created"]
    ('PAC', 'certified', '2026-01-01T00:00:00Z')
    >>> Certificate.read(cert.to_json()).calibrator().thresholds_ == cert.calibrator().thresholds_
    True
    """

    document: dict
    settings: Settings
    version: int = SCHEMA_VERSION
    _where: str = field(default="certificate", repr=False)
    #: The file as read (validated, before the migration): what ``gpac verify`` checks field by field.
    source: dict | None = field(default=None, repr=False)

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_calibrator(
        cls,
        cal,
        *,
        columns: Mapping | None = None,
        score: str | None = None,
        table_path=None,
        recipe_name: str | None = None,
        created: str | datetime | None = None,
        n_items: int | None = None,
        score_model: Mapping | None = None,
    ) -> Certificate:
        """The certificate of a fitted calibrator.

        Parameters
        ----------
        cal : PAC, GPAC or CPAC
            A fitted calibrator.
        columns : mapping, optional
            ``{role: (column name, values)}`` for every column used (``score``, ``loss``, ``group``,
            ``id``): hashed by :func:`column_sha256`; the names go to ``columns`` (what ``gpac route``
            and the serving router read). ``values`` None: the name only. The ``id`` values are
            also recorded as ``provenance.item_ids`` (module description).
        score : str, optional
            The score's registry name (:data:`gpac_utils.scores.SCORES`); default: the score column's
            name when it is one, else ``null``.
        table_path : path, optional
            The calibration table file (hashed by :func:`file_sha256`).
        recipe_name : str, optional
            The named recipe the settings started from (the settings hold every field).
        created : str or datetime, optional
            The creation time (default: :func:`created_at`).
        n_items : int, optional
            The table's rows (``gpac calibrate``).
        score_model : mapping, optional
            The score's model (``provenance.score_model``: path, sha256, embedder, text;
            :func:`gpac_utils.llm.router_model.score_model_record`).
        """
        reads = CALIBRATORS[cal.name].cls.OPTIONS  # what the certificate records of the settings
        for name in cal.config.ignored(reads)[:1]:
            raise ParameterError(
                f"settings: {name}={getattr(cal.config, name)!r} is not read by {cal.name} and a certificate "
                f"records only {list(reads)}; leave it at its default"
            )
        columns = dict(columns or {})
        names = {role: None if name is None else str(name) for role, (name, _) in columns.items()}
        if score is None:
            score = names.get("score") if names.get("score") in SCORES else None
        else:
            SCORES.check(score, "score")
        doc = json.loads(cal.to_json())
        provenance = {
            "table": None if table_path is None else {"path": str(table_path), "sha256": file_sha256(table_path)},
            "columns": {
                role: {"name": names[role], "dtype": str(np.asarray(v).dtype), "sha256": column_sha256(v)}
                for role, (_, v) in columns.items()
                if v is not None
            },
            "package": PACKAGE,
            "package_version": package_version(),
            "recipe": recipe_name,
            "recipe_overrides": recipe_overrides(recipe_name, cal.config.recipe),
            "seed": cal.config.seed,
            "created": created_at(created),
        }
        ids = columns.get("id", (None, None))[1]
        if ids is not None:  # the distinct ids' digests, sorted and concatenated (module description)
            digests = sorted(set(id_digests(ids)))
            provenance["item_ids"] = {"digest": ID_DIGEST, "n": len(digests), "values": "".join(digests)}
        if score_model is not None:
            provenance["score_model"] = dict(score_model)
        doc.update(
            schema=SCHEMA, schema_version=SCHEMA_VERSION, provenance=provenance, groups=_group_entries(cal), score=score
        )
        doc["columns"] = names
        provenance["providers"] = _providers(doc)
        if table_path is not None:
            doc["data"] = str(table_path)
        if n_items is not None:
            doc["n_items"] = int(n_items)
        return cls(doc, cal.config, source=json.loads(json.dumps(doc)))

    @classmethod
    def read(cls, source, *, where: str | None = None) -> Certificate:
        """A certificate from a path, its JSON text or its parsed dict: one parse, one validation
        (the schema, then the certificate's fields), one migration to the current version.

        Raises
        ------
        DataError
            One line naming the file (or ``certificate``, or ``where``) and the field.
        """
        payload, where = _parse(source, where)
        try:
            return cls.parse(payload, where=where)
        except ThresholdsFileError as exc:
            raise DataError(f"{where}: {exc}") from None

    @classmethod
    def parse(cls, payload, *, where: str = "certificate") -> Certificate:
        """The certificate of a parsed file (:meth:`read` without the file; :func:`~gpac_utils.certificate.from_json`).

        Raises
        ------
        ThresholdsFileError
            Naming the field.
        """
        if isinstance(payload, dict) and isinstance(payload.get("provenance"), dict):  # a missing plugin, named
            _check_providers(payload["provenance"].get("providers"))
        payload = validate_file(payload, CALIBRATORS)
        _check_fields(payload)
        try:  # the settings together (e.g. risk 'routed' with the clt bound), and as its calibrator takes them
            settings = Settings.from_dict(payload["settings"])
            CALIBRATORS[payload["method"]].cls.from_settings(settings)  # Min-G-PAC refuses risk 'routed'
        except ValueError as exc:
            raise ThresholdsFileError(f"settings: {exc}") from None
        return cls(_migrate(payload, settings), settings, payload["schema_version"], where, source=payload)

    # -- what it holds ----------------------------------------------------------------------------
    method = property(lambda self: self.document["method"], doc="The calibrator's registry name.")
    score = property(lambda self: self.document["score"], doc="The score's registry name (None: not registered).")
    columns = property(lambda self: dict(self.document.get("columns") or {}), doc="Role -> the table's column.")
    groups = property(lambda self: self.document["groups"], doc="Per group: n, labelled, status, threshold, ucb.")
    thresholds = property(lambda self: self.document["thresholds"], doc="Group -> threshold (None: always think).")
    provenance = property(lambda self: self.document.get("provenance"), doc="The provenance (None before version 3).")
    kind = property(
        lambda self: CALIBRATORS[self.method].groups, doc="Its method's groups: none, known, collection or learned."
    )
    has_provenance = property(lambda self: self.provenance is not None, doc="Whether the source had provenance.")

    @property
    def groupings(self) -> tuple[str, ...] | None:
        """A collection calibrator's groupings, in order (``groupings``: a cell joins one ``grouping=label`` of
        each); ``()``: one label array, or a file before they were recorded; None: a membership matrix."""
        recorded = self.document.get("groupings", [])
        return None if recorded is None else tuple(recorded)

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The table's columns its groups are read from, one per grouping, in order: ``()`` for a method without
        groups (PAC, C-PAC) or a file that names none (a calibrator's own JSON); one name for a partition (G-PAC,
        or one ``--group-col``); a collection's: ``columns['group:<grouping>']`` of each grouping (the grouping's
        name when not recorded). ``tests/test_multigroup_cli.py`` reads it as the serving side would.
        """
        cols = self.columns
        if self.groupings:
            return tuple(cols.get(grouping_role(g)) or g for g in self.groupings)
        return (cols["group"],) if CALIBRATORS[self.method].needs_groups and cols.get("group") else ()

    def groups_from(self, frame: pd.DataFrame, columns=None):
        """What its calibrator routes by, read from a table: None (no groups), one label array (a partition), or a
        DataFrame of label columns named by the groupings (a collection), each label as text.

        Parameters
        ----------
        frame : pandas.DataFrame
            The table.
        columns : sequence of str, optional
            The table's group columns, one per grouping, in order (default :attr:`group_columns`).

        Raises
        ------
        DataError
            A column the table lacks, named.
        """
        columns = tuple(self.group_columns if columns is None else columns)
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DataError(f"no group column {missing[0]!r} (of {list(columns)}); the table has {list(frame.columns)}")
        labels = [frame[c].astype(str).to_numpy() for c in columns]
        if self.groupings:
            return pd.DataFrame(dict(zip(self.groupings, labels)), index=frame.index)
        return labels[0] if labels else None

    @property
    def calibration_ids(self) -> frozenset[str] | None:
        """The calibration items' id digests (:func:`id_digests`), or None when the file records none."""
        rec = (self.provenance or {}).get("item_ids")
        return None if rec is None else frozenset(_split(rec["values"]))

    @property
    def sha256(self) -> str:
        """The certificate's identity: the SHA-256 of :meth:`to_json` (``sha256sum`` of a file ``gpac calibrate``
        wrote in the current schema version; the same whatever a file's whitespace or key order)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def calibrator(self):
        """The fitted calibrator it certifies (no second validation)."""
        cal = CALIBRATORS[self.method].cls.from_settings(self.settings)
        cal._restore(self.document)
        return cal

    def to_json(self) -> str:
        """The file's text (``json.dumps(..., indent=2, sort_keys=True)``)."""
        return json.dumps(self.document, indent=2, sort_keys=True) + "\n"

    def review(self) -> pd.DataFrame:
        """The review table: one row per group (``group``, ``n``, ``labelled``, ``status``, ``threshold``, ``ucb``)."""
        rows = [{"group": g, **{k: e.get(k) for k in GROUP_FIELDS}} for g, e in self.groups.items()]
        return pd.DataFrame(rows, columns=["group", *GROUP_FIELDS])

    def render(self) -> str:
        """What ``gpac inspect`` prints: every setting, the score, the provenance and the review table."""
        migrated = "" if self.version == SCHEMA_VERSION else f" (read as {SCHEMA_VERSION})"
        shown = ", ".join(f"{k}={v}" for k, v in self.document["settings"].items())
        lines = [f"{self.method} thresholds, schema version {self.version}{migrated}: {shown}"]
        lines.append(f"score     {self.score or '- (not a registered score)'}; columns {self.columns or '-'}")
        if self.groupings:
            shown_g = ", ".join(f"{g} (column {c!r})" for g, c in zip(self.groupings, self.group_columns))
            lines.append(f"grouping  {shown_g}: a group per label of each; a cell per combination, its own threshold")
        for name in sorted(CALIBRATORS[self.method].json_fields.keys() - {"groupings"}):  # its method's own fields
            value = json.dumps(self.document.get(name), sort_keys=True)
            shown_v = value if len(value) <= 200 else f"{value[:200]}... ({len(value)} characters)"
            lines.append(f"field     {name}: {shown_v}")
        prov = self.provenance
        if prov:
            table = prov.get("table") or {}
            lines.append(f"table     {table.get('path', '-')}  sha256 {table.get('sha256', '-')}")
            roles = sorted(prov.get("columns", {}).items())
            width = max([6, *(len(role) for role, _ in roles)])  # a grouping's role: group:<grouping>
            for role, c in roles:
                lines.append(f"column    {role:<{width}} {c['name']!r:<20} {c['dtype']:<8} sha256 {c['sha256']}")
            lines.append(
                f"package   {prov.get('package', PACKAGE)} {prov['package_version']}; "
                f"seed {prov['seed']}; created {prov['created']}"
            )
            lines.append(f"recipe    {self.recipe_text()}")
            if prov.get("providers"):
                lines.append(f"provided  {self.providers_text()}")
            model = prov.get("score_model")
            if model:
                lines.append(
                    f"model     {model['path']}  sha256 {model['sha256']}  embedder {model['embedder']}  "
                    f"text column {model['text']!r}"
                )
            ids = prov.get("item_ids")
            if isinstance(ids, dict):
                lines.append(f"item ids  {ids.get('n', '-')} recorded ({ids.get('digest', '-')} digests)")
        else:
            lines.append(
                f"provenance: none (a version-{self.version} file or a calibrator's own JSON); "
                "statuses derived from the group sizes and settings"
            )
        header = ["group", *GROUP_FIELDS]
        cells = [[str(g), *(_num(e.get(k), _CELLS[k]) for k in GROUP_FIELDS)] for g, e in self.groups.items()]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:{'>' if i in (1, 2, 4, 5) else '<'}{w}}}" for i, w in enumerate(widths))
        lines += ["", fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*c) for c in cells]
        counts = Counter(e.get("status") for e in self.groups.values())
        lines += ["", "; ".join(f"{counts[s]} {s}" for s in STATUSES)]
        if self.kind == "collection" and set(self.thresholds) != set(self.groups):  # the cells' thresholds
            width = max(len("cell"), *map(len, self.thresholds))
            lines += ["", f"{'cell':<{width}}  threshold", f"{'-' * width}  ---------"]
            lines += [f"{c:<{width}}  {_num(t, _CELLS['threshold']):>9}" for c, t in self.thresholds.items()]
        return "\n".join(lines)

    def providers_text(self) -> str:
        """The registry names it uses, by the distribution that provided them (``provenance.providers``)."""
        by, recorded = {}, (self.provenance or {}).get("providers") or {}
        for role, rec in ((r, recorded[r]) for r in NAMED if r in recorded):
            dist = f"{rec['distribution']} {rec['version']}" if rec["distribution"] else "no distribution"
            by.setdefault(dist, []).append(f"{role} {rec['name']}")
        return "; ".join(f"{dist}: {', '.join(names)}" for dist, names in by.items()) or "- (not recorded)"

    def recipe_text(self) -> str:
        """The recipe as the provenance names it, its overrides, and whether the settings' recipe is valid."""
        prov = self.provenance or {}
        name, over = prov.get("recipe"), prov.get("recipe_overrides")
        said = name or "- (none named)"
        if over:
            said += " with " + ", ".join(f"{k}={v}" for k, v in over.items())
        elif name is not None and "recipe_overrides" not in prov:
            said += " (its overrides not recorded before schema version 5)"
        r = self.settings.recipe
        valid = "valid" if r.is_valid else "NOT valid (no finite-sample guarantee)"
        return f"{said}; the settings' recipe ({r.bound}, {r.sampling}, {r.rule}) is {valid}"

    def score_model_path(self, given=None) -> Path | None:
        """The recorded score model's file: ``given``, else the recorded path, else the file of that name
        beside the certificate (as the serving router finds it); None when none is recorded."""
        model = (self.provenance or {}).get("score_model")
        if not model:
            return None
        if given is not None:
            return Path(given)
        path = Path(model["path"])
        beside = Path(self._where).parent / path.name
        return beside if not path.exists() and beside.exists() else path

    def verify(self, table_path, frame: pd.DataFrame, *, refuse: bool = False) -> tuple[list[str], bool]:
        """Compare a table with the provenance by the one rule for "the same table": every recorded column's
        values (canonical hashes, whatever the file format), and the file the provenance names keeps its
        bytes. One line per column (``matches``, ``DIFFERS`` or ``MISSING``) and one for the file's bytes,
        and whether all agree: a copy elsewhere (a Parquet copy of the CSV) has other bytes and passes by
        its columns; the very file the provenance names (``provenance.table.path``) with other bytes does
        not (the file changed, or the recorded SHA-256 was edited).

        Parameters
        ----------
        table_path : path
            The table file to check.
        frame : pandas.DataFrame
            Its contents (as read by :func:`gpac_utils.data.read_frame`).
        refuse : bool, default False
            Raise at the first line that does not agree (``gpac verify``), naming the field.

        Raises
        ------
        DataError
            For a certificate without provenance (nothing to check against); with ``refuse``, one that disagrees.
        """
        prov = self.provenance
        if not prov:
            raise DataError(f"--data: {self._where} has no provenance to check against (a version-{self.version} file)")
        out, refusals = [], []
        table = prov.get("table")
        if table:
            try:
                named = os.path.samefile(table_path, table["path"])
            except OSError:  # the named file is not there (another machine, another folder)
                named = False
            if file_sha256(table_path) == table["sha256"]:
                what = "matches the recorded bytes"
            elif named:
                what = "DIFFERS from the recorded bytes, and it is the file provenance.table.path names"
                refusals.append(
                    "the file provenance.table.path names, but its bytes differ from provenance.table.sha256 (the file "
                    "changed, or the hash was edited); a copy elsewhere is judged by its columns"
                )
            else:
                what = "DIFFERS from the recorded bytes (a copy: its columns' values decide)"
            out.append(f"table file {Path(table_path).name}: {what}")
        for role, c in sorted(prov.get("columns", {}).items()):
            if c["name"] not in frame.columns:
                state = "MISSING"
            else:
                state = "matches" if column_sha256(frame[c["name"]].to_numpy()) == c["sha256"] else "DIFFERS"
            out.append(f"column {role} {c['name']!r}: {state}")
            if state != "matches":
                refusals.append(f"{out[-1]} from the certificate's provenance (provenance.columns.{role}); refused")
        if refuse and refusals:
            raise DataError(f"--data {table_path}: {refusals[0]}")
        return out, not refusals


def _num(x, fmt: str) -> str:
    """A cell of the review table: ``-`` for a missing value (None or NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return fmt.format(int(x)) if fmt == "{:d}" else fmt.format(x)


def from_json(text: str):
    """Rebuild a fitted calibrator from its ``to_json()`` output, checked against the schema.

    Parameters
    ----------
    text : str
        JSON as written by :meth:`PAC.to_json` (or that of :class:`GPAC` / :class:`CPAC`, or
        ``gpac calibrate``); files of schema version 1 (no ``schema_version``) are read too.

    Returns
    -------
    PAC, GPAC or CPAC
        A fitted calibrator with the settings, thresholds, group sizes (and, for C-PAC, the
        partition) of ``text``; ``null`` thresholds become ``-inf`` (always think).

    Raises
    ------
    ThresholdsFileError
        (a :class:`~gpac_utils.checks.ParameterError`) For text that is not JSON, or a file that
        does not follow :mod:`gpac_utils.thresholds_schema`: the message names the field (a
        threshold outside ``[0, 1]``, C-PAC boundaries out of order, a missing or unknown field,
        a setting out of range, a group name that is empty or not one of C-PAC's learned ones).
    """
    if not isinstance(text, str | bytes | bytearray):
        raise ThresholdsFileError(
            f"text: must be the JSON text (str), got {type(text).__name__}; for a file: from_json(path.read_text())"
        )
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThresholdsFileError(f"text: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return Certificate.parse(payload).calibrator()
