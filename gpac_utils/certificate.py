r"""The certificate: a thresholds file a reviewer can check (schema version 3).

``gpac calibrate`` writes a calibrator's JSON (:meth:`~gpac_utils.calibrate.PAC.to_json`: method,
settings, thresholds, group sizes, C-PAC's partition) plus the columns it read. Version 3
(:data:`gpac_utils.thresholds_schema.SCHEMA_VERSION`) adds two fields, and
:func:`~gpac_utils.calibrate.from_json` ignores both:

``provenance``
    what the thresholds were calibrated on and with: the SHA-256 of the table file
    (``table.sha256``) and of every column used (``columns.<role>``: the column's name, dtype and
    the SHA-256 of its values, :func:`column_sha256`), the package and its version, the named
    recipe the settings started from, the seed and the creation time (UTC, ISO 8601; the
    ``SOURCE_DATE_EPOCH`` environment variable, the reproducible-builds convention, fixes it).
``groups``
    per group: ``n`` (calibration items), ``labelled`` (expert labels used), ``status`` (one of
    :data:`~gpac_utils.calibrate.STATUSES`), ``threshold`` (``null``: always think) and ``ucb``,
    the certified upper confidence bound on the group's risk at its threshold (``null`` when the
    group always thinks).

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

A file without ``schema_version`` is version 1 (no provenance; :func:`review` derives each
group's status from its size and the settings).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from .calibrate import CALIBRATORS, CERTIFIED, NO_FEASIBLE, STATUSES, TOO_FEW, UNSEEN
from .checks import DataError
from .feasibility import min_items
from .recipe import Recipe
from .settings import CORRECTIONS
from .thresholds_schema import READS, SCHEMA_VERSION, ThresholdsFileError, validate_file

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "column_sha256",
    "file_sha256",
    "created_at",
    "make_certificate",
    "check_certificate",
    "load_certificate",
    "review",
    "render",
    "verify_columns",
]

SCHEMA = "gpac-thresholds"
PACKAGE = "gpac-utils"
GROUP_FIELDS = ("n", "labelled", "status", "threshold", "ucb")


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


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
        return importlib.import_module(__package__).__version__


def _group_entries(cal) -> dict:
    """Per group: n, labelled, status, threshold, ucb (C-PAC's learned groups without items: unseen)."""
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


def make_certificate(
    cal,
    *,
    columns: dict | None = None,
    table_path=None,
    recipe_name: str | None = None,
    created: str | datetime | None = None,
) -> dict:
    """The certificate of a fitted calibrator: its JSON with ``schema_version``, ``provenance`` and ``groups``.

    Parameters
    ----------
    cal : PAC, GPAC or CPAC
        A fitted calibrator.
    columns : dict, optional
        ``{role: (column name, values)}`` for every column used (``score``, ``loss``, ``group``,
        ``id``): hashed by :func:`column_sha256`; the names also go to ``columns`` (what
        ``gpac route`` and :class:`~gpac_utils.llm.serve.CertifiedRouter` read).
    table_path : path, optional
        The calibration table file (hashed by :func:`file_sha256`).
    recipe_name : str, optional
        The named recipe the settings started from (the settings hold every field).
    created : str or datetime, optional
        The creation time (default: :func:`created_at`).

    Returns
    -------
    dict
        The JSON document (``json.dumps(..., sort_keys=True)`` writes it).

    Examples
    --------
    >>> from gpac_utils import PAC
    >>> u = np.linspace(0, 1, 400)
    >>> doc = make_certificate(PAC(eps=0.1).fit(u, (u > 0.8).astype(float)), created="2026-01-01T00:00:00Z")
    >>> doc["schema_version"], doc["groups"]["__all__"]["status"], doc["provenance"]["created"]
    (3, 'certified', '2026-01-01T00:00:00Z')
    """
    doc = json.loads(cal.to_json())
    cols = {
        role: {
            "name": None if name is None else str(name),
            "dtype": str(np.asarray(v).dtype),
            "sha256": column_sha256(v),
        }
        for role, (name, v) in (columns or {}).items()
        if v is not None
    }
    provenance = {
        "table": None if table_path is None else {"path": str(table_path), "sha256": file_sha256(table_path)},
        "columns": cols,
        "package": PACKAGE,
        "package_version": _version(),
        "recipe": recipe_name,
        "seed": cal.settings["seed"],
        "created": created_at(created),
    }
    doc.update(schema=SCHEMA, schema_version=SCHEMA_VERSION, provenance=provenance, groups=_group_entries(cal))
    doc["columns"] = {role: None if name is None else str(name) for role, (name, _) in (columns or {}).items()}
    return doc


def check_certificate(payload: dict, where: str) -> int:
    """Check the certificate fields of a thresholds file in depth.

    The rest of the file is checked by :func:`gpac_utils.thresholds_schema.validate_file`.

    Returns
    -------
    int
        The schema version (1 for a file without one).

    Raises
    ------
    DataError
        Naming the field: an unknown version, a group entry without a field of
        :data:`GROUP_FIELDS`, an unknown status, a status that contradicts the threshold, a
        threshold that differs from ``thresholds``, or provenance without its fields.
    """
    version = payload.get("schema_version", 1)
    if isinstance(version, bool) or version not in READS:
        raise DataError(f"{where}: schema_version must be one of {list(READS)}, got {version!r}")
    if "groups" not in payload and "provenance" not in payload:
        return version  # a calibrator's own JSON (to_json), or a file from before the certificate
    groups, thr = payload.get("groups"), payload.get("thresholds", {})
    if not isinstance(groups, dict):
        raise DataError(f"{where}: 'groups' must be an object of group -> entry (schema version {SCHEMA_VERSION})")
    for g, e in groups.items():
        missing = [k for k in GROUP_FIELDS if not isinstance(e, dict) or k not in e]
        if missing:
            raise DataError(f"{where}: groups[{g!r}] lacks {missing}")
        if e["status"] not in STATUSES:
            raise DataError(f"{where}: groups[{g!r}].status must be one of {list(STATUSES)}, got {e['status']!r}")
        if (e["status"] == CERTIFIED) != (e["threshold"] is not None):
            raise DataError(f"{where}: groups[{g!r}]: status {e['status']!r} with threshold {e['threshold']!r}")
        if e["status"] != UNSEEN and thr.get(g, "absent") != e["threshold"]:
            raise DataError(f"{where}: groups[{g!r}].threshold {e['threshold']!r} differs from thresholds[{g!r}]")
    absent = sorted(set(thr) - set(groups))
    if absent:
        raise DataError(f"{where}: thresholds of {absent} have no entry in 'groups'")
    prov = payload.get("provenance")
    need = ("table", "columns", "package_version", "seed", "created")
    if not isinstance(prov, dict) or any(k not in prov for k in need):
        raise DataError(f"{where}: 'provenance' must be an object with {list(need)}")
    return version


def load_certificate(source) -> dict:
    """A checked thresholds file from a path, its JSON text or its parsed dict: the schema
    (:func:`gpac_utils.thresholds_schema.validate_file`), then :func:`check_certificate`.

    Raises
    ------
    DataError
        One line naming the file (or ``certificate``) and the field.
    """
    if isinstance(source, Mapping):
        payload, where = dict(source), "certificate"
    else:
        text, where = str(source), "certificate"
        if isinstance(source, Path) or not text.lstrip().startswith("{"):
            where = text
            try:
                text = Path(text).read_text()
            except FileNotFoundError:
                raise DataError(f"{where}: no such file") from None
            except OSError as exc:
                raise DataError(f"{where}: cannot read it ({exc.strerror or exc})") from None
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        payload = validate_file(payload, CALIBRATORS)
    except ThresholdsFileError as exc:
        raise DataError(f"{where}: {exc}") from None
    check_certificate(payload, where)
    return payload


def _legacy_groups(payload: dict) -> dict:
    """Version 1: each group's status from its size and the settings (no labelled count, no bound)."""
    st = payload["settings"]
    recipe = Recipe(st["bound"], st["sampling"], st.get("label_prob"), st["rule"], st["candidates"])
    k = len(payload["thresholds"])
    correction = st.get("correction", "bonferroni" if st.get("simultaneous") else "none")
    alpha = CORRECTIONS[correction].per_group(st["alpha"], k)
    need = max(min_items(st["eps"], alpha, recipe, loss_bound=st["loss_bound"]), st["min_group_size"])
    out = {}
    for g, t in payload["thresholds"].items():
        n = payload.get("group_sizes", {}).get(g)
        status = CERTIFIED if t is not None else (TOO_FEW if n is not None and n < need else NO_FEASIBLE)
        out[g] = {"n": n, "labelled": None, "status": status, "threshold": t, "ucb": None}
    return out


def review(payload: dict) -> pd.DataFrame:
    """The review table: one row per group with ``group``, ``n``, ``labelled``, ``status``, ``threshold``, ``ucb``."""
    groups = payload["groups"] if "groups" in payload else _legacy_groups(payload)
    rows = [{"group": g, **{k: e.get(k) for k in GROUP_FIELDS}} for g, e in groups.items()]
    return pd.DataFrame(rows, columns=["group", *GROUP_FIELDS])


def _num(x, fmt="{:.4g}") -> str:
    """A cell of the review table: ``-`` for a missing value (None or NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return fmt.format(int(x)) if fmt == "{:d}" else fmt.format(x)


def render(payload: dict) -> str:
    """What ``gpac inspect`` prints: the settings line, the provenance lines and the review table."""
    st, version = payload["settings"], payload.get("schema_version", 1)
    lines = [
        f"{payload['method']} thresholds, schema version {version}: eps={st['eps']}, alpha={st['alpha']}, "
        f"bound={st['bound']}, sampling={st['sampling']}, label_prob={st.get('label_prob')}, rule={st['rule']}, "
        f"candidates={st['candidates']}, min_group_size={st['min_group_size']}, seed={st['seed']}"
        + (", simultaneous" if st.get("simultaneous") else "")
    ]
    prov = payload.get("provenance")
    if prov:
        table = prov.get("table") or {}
        lines.append(f"table     {table.get('path', '-')}  sha256 {table.get('sha256', '-')}")
        for role, c in sorted(prov.get("columns", {}).items()):
            lines.append(f"column    {role:<6} {c['name']!r:<20} {c['dtype']:<8} sha256 {c['sha256']}")
        lines.append(
            f"package   {prov.get('package', PACKAGE)} {prov['package_version']}; recipe {prov.get('recipe') or '-'}; "
            f"seed {prov['seed']}; created {prov['created']}"
        )
    else:
        lines.append("provenance: none (a version-1 file); statuses derived from the group sizes and settings")
    df = review(payload)
    header = ["group", "n", "labelled", "status", "threshold", "ucb"]
    cells = [
        [
            str(r.group),
            _num(r.n, "{:d}"),
            _num(r.labelled, "{:d}"),
            r.status,
            _num(r.threshold),
            _num(r.ucb),
        ]
        for r in df.itertuples()
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'>' if i in (1, 2, 4, 5) else '<'}{w}}}" for i, w in enumerate(widths))
    lines += ["", fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*c) for c in cells]
    counts = df["status"].value_counts()
    lines.append("")
    lines.append("; ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES))
    return "\n".join(lines)


def verify_columns(payload: dict, table_path, frame: pd.DataFrame) -> list[str]:
    """Compare a table with the certificate's provenance: one line per hash, ``matches`` or ``DIFFERS``.

    Parameters
    ----------
    payload : dict
        A version-2 certificate.
    table_path : path
        The table file to check.
    frame : pandas.DataFrame
        Its contents (as read by :func:`gpac_utils.data.read_frame`).
    """
    prov = payload.get("provenance") or {}
    out = []
    if prov.get("table"):
        ok = file_sha256(table_path) == prov["table"]["sha256"]
        out.append(f"table file {Path(table_path).name}: {'matches' if ok else 'DIFFERS'}")
    for role, c in sorted(prov.get("columns", {}).items()):
        if c["name"] not in frame.columns:
            out.append(f"column {role} {c['name']!r}: MISSING")
            continue
        v = frame[c["name"]].to_numpy()
        ok = column_sha256(v) == c["sha256"]
        out.append(f"column {role} {c['name']!r}: {'matches' if ok else 'DIFFERS'}")
    return out
