r"""Verify a certificate against its data, its settings and what the operator states (``gpac verify``).

A certificate (:mod:`gpac_utils.certificate`) is a list of fields, each declared once in
:mod:`gpac_utils.thresholds_schema` with how it is verified (``Field.verify``):

checked (:data:`~gpac_utils.thresholds_schema.CHECKED`)
    recomputed from the table and the settings — every threshold, every group entry (``n``,
    ``labelled``, ``status``, ``threshold``, ``ucb``), ``group_sizes``, C-PAC's partition,
    ``n_items``, every column's canonical hash and name, the recipe's overrides, the
    calibration ids' record (``provenance.item_ids``, from the id column), the score model's
    hash, embedder and text column (and, with a score model, the score column itself:
    recomputed from the model and the text column and compared within
    :data:`gpac_utils.llm.router_model.SCORE_TOLERANCE`; a ``score_router`` certificate without a
    score model, of schema version 4 or later, is refused, and so is ``score_model`` given for a
    certificate that records none) — or checked against the fields it must agree with: the
    provenance's seed with ``settings.seed`` (G-PAC with ``sampling=full`` never uses it); the
    recipe's name with the settings' bound, sampling,
    label probability, rule and candidates (through ``provenance.recipe_overrides``, schema
    version 5); the bound's kind with its :data:`~gpac_utils.bounds.BOUNDS` entry; ``data`` with
    ``provenance.table.path``; each column's dtype class (number or text: how it was hashed) with
    the data's; the schema version with the fields the file holds (none newer than it).
stated (:data:`~gpac_utils.thresholds_schema.STATED`)
    what no data can tell: the keys of :data:`EXPECT` (``method``, ``score``, ``recipe``,
    ``eps``, ``alpha``, ``loss_bound``, ``bound``, ``sampling``, ``label_prob``, ``rule``,
    ``candidates``, ``min_group_size``, ``seed``, ``correction``, ``risk`` and C-PAC's ``k``,
    ``partition``, ``mode``, ``cluster_fraction``). Each is checked against what the operator
    states, ``gpac verify --expect eps=0.1 alpha=0.05 method=G-PAC score=score_logits``
    (``recipe=X`` requires the settings to be exactly recipe X, no field overridden); a field not
    stated is **taken on trust**, and the output says so, naming
    each one with its value. (Without ``--expect`` verify still passes when everything checked
    agrees: an edited ``eps`` that recomputes to the same thresholds, 0.1 to 0.100011, is then
    self-consistent and only a statement can refuse it.)
descriptive (:data:`~gpac_utils.thresholds_schema.DESCRIPTIVE`)
    shown, not checked: the creation time, the package version, the score model's path, the version
    of the distribution that provided each registry name (``provenance.providers``: the names and
    their distributions are checked, against what provides them here).

The table file's SHA-256 is checked only against the file the provenance names: ``--data`` that is
that file (same path) must have its bytes; a copy elsewhere (a Parquet copy of the CSV: other bytes,
the same columns) is judged by its columns.

"The same table" has one rule, shared with ``gpac inspect --data``
(:meth:`~gpac_utils.certificate.Certificate.verify`): every recorded column's values, hashed
canonically, whatever the file format.

A refusal is one line naming the field (:class:`~gpac_utils.checks.DataError`): the first field
that does not agree. A pass: every recomputed and cross-checked field agrees and every statement
matches; the fields not stated are listed as taken on trust. What a pass does not show: that the
certificate is the only one that was computed (a certificate chosen as the best of k seeds,
settings, router fits, groupings or recalibrations verifies, and holds only at
:math:`\min(1, k\alpha)`), that the table is the whole calibration sample (a filtered table
verifies), that it is a fair sample of the traffic, that the router's fitting items and the
calibration items are independent (only shared ids are refused), or that a score column without
a recorded model is the score served.
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .bounds import BOUNDS
from .calibrate import CALIBRATORS, GroupWarning
from .calibrate import method as method_entry
from .certificate import Certificate, recipe_overrides
from .checks import DataError, ParameterError
from .thresholds_schema import CHECKED, DESCRIPTIVE, SETTINGS, STATED, Derived, declared, grouping_role

__all__ = ["EXPECT", "described", "parse_expect", "verify_certificate"]


def _stated() -> dict[str, tuple]:
    """What ``--expect`` states, by path: the method, the score, the recipe's name and every registered
    calibrator's stated settings (an installed plugin's own too: plugins load after the package's import)."""
    stated = {name: ("settings", name) for name, f in SETTINGS.items() if f.verify == STATED}
    return {"method": ("method",), "score": ("score",), "recipe": ("provenance", "recipe"), **stated}


#: ``--expect`` key -> the field it states (the stated fields: what no data can tell).
EXPECT: Mapping[str, tuple] = Derived(_stated)


def described(cert: Certificate) -> str:
    """What a certificate certifies, named by its registry entries: method, bound, sampling, rule, risk and score."""
    s, score = cert.settings, cert.score or cert.columns.get("score")
    return f"{cert.method} ({s.recipe.bound}, {s.recipe.sampling}, {s.recipe.rule}, risk {s.risk}) on {score}"


def _fmt(x) -> str:
    return "null" if x is None else repr(x)


def _dotted(path) -> str:
    return ".".join(str(p) for p in path)


# --------------------------------------------------------------------------- --expect
def _value(text: str):
    """A stated value: ``null`` -> None, a JSON number or boolean, else the text (``none`` is a correction's name)."""
    try:
        v = json.loads(text)
    except json.JSONDecodeError:
        return text
    return v if isinstance(v, bool | int | float) or text == "null" else text


def parse_expect(pairs) -> dict:
    """The ``--expect KEY=VALUE`` statements, each key once and known (:data:`EXPECT`).

    Raises
    ------
    ParameterError
        One line naming the statement: not ``KEY=VALUE``, an unknown or repeated key, a value the
        field cannot take.

    Examples
    --------
    >>> parse_expect(["eps=0.1", "method=gpac", "score=null"])
    {'eps': 0.1, 'method': 'G-PAC', 'score': None}
    """
    out: dict = {}
    for pair in pairs or ():
        key, eq, text = str(pair).partition("=")
        key = key.strip()
        if not (key and eq):
            raise ParameterError(f"--expect: expects KEY=VALUE, got {pair!r}")
        if key not in EXPECT:
            raise ParameterError(f"--expect {key}: not a field to state; one of {list(EXPECT)}")
        if key in out:
            raise ParameterError(f"--expect {key}: stated twice")
        value = _value(text)
        if key == "method":
            try:
                value = method_entry(str(text)).name
            except ValueError as exc:
                raise ParameterError(f"--expect method: {str(exc).partition(': ')[2] or exc}") from None
        else:  # the field's own check (eps against no particular loss bound)
            problem = declared(EXPECT[key]).check(value, {"settings": {"loss_bound": 1e300}})
            if problem:
                raise ParameterError(f"--expect {key}: {problem}")
        out[key] = value
    return out


def _same(a, b) -> bool:
    """Equal as the file states them: numbers by value (1 == 1.0), the rest exactly."""
    if all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b)):
        return float(a) == float(b)
    return a == b and type(a) is type(b)


def _get(doc, path, default="absent"):
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return default
        doc = doc[key]
    return doc


def _check_expect(cert: Certificate, expect: dict) -> tuple[list[str], list[str]]:
    """The stated fields against the statements: (checked, taken on trust), each ``key=value``."""
    where, doc = cert._where, cert.document
    checked, trusted = [], []
    for key, path in EXPECT.items():
        value = _get(doc, path)
        if key in expect:
            if value == "absent":
                raise DataError(f"{where}: a {cert.method} certificate has no {_dotted(path)}; --expect {key}=...")
            if not _same(value, expect[key]):
                raise DataError(f"{where}: {_dotted(path)} is {_fmt(value)}; --expect {key}={_fmt(expect[key])}")
            if key == "recipe":  # the recipe as named: no field of the settings' recipe overridden
                overrides = recipe_overrides(value, cert.settings.recipe)
                if overrides:
                    raise DataError(
                        f"{where}: the settings override recipe {value!r} with {overrides}; --expect recipe={value} "
                        "states that recipe exactly (state the overridden fields instead, e.g. bound=...)"
                    )
            checked.append(f"{key}={_fmt(value)}")
        elif value != "absent":
            trusted.append(f"{key}={_fmt(value)}")
    return checked, trusted


# --------------------------------------------------------------------------- the fields together
def _fields(doc, path=()):
    """Every field of a document, by path, records and their fields (depth first), with its declaration."""
    for key, value in doc.items():
        here = (*path, key)
        f = declared(here)
        yield here, value, f
        if isinstance(value, dict) and f is not None and (f.fields is not None or f.each is not None):
            yield from _fields(value, here)


#: The checked fields checked on their own (:func:`_checked`).
_ON_THEIR_OWN = {("data",), ("provenance", "table", "path"), ("provenance", "table", "sha256"), ("schema_version",)}


def _checked(doc):
    """The checked fields of a document that hold values (not records), less those checked on their own: ``data``
    and ``provenance.table.path`` with each other (:func:`_check_agreement`), ``provenance.table.sha256`` with the
    file it names and a column's dtype by its class (:func:`_check_columns`), the version with the fields the file
    holds (:func:`_check_versions`)."""
    for path, value, f in _fields(doc):
        leaf = f is not None and f.verify == CHECKED and f.fields is None and f.each is None
        if leaf and path not in _ON_THEIR_OWN and not (path[:2] == ("provenance", "columns") and path[-1] == "dtype"):
            yield path, value, f


def _check_versions(cert: Certificate) -> None:
    """No field newer than the file's schema version (a file relabelled older than it is)."""
    for path, _, f in _fields(cert.source or {}):
        if f is not None and f.since > cert.version:
            raise DataError(
                f"{cert._where}: schema_version is {cert.version}, but it has {_dotted(path)} "
                f"(a field from version {f.since})"
            )


def _check_agreement(cert: Certificate) -> None:
    """The fields that must agree with each other (no data needed)."""
    where, doc, prov = cert._where, cert.document, cert.provenance
    st = doc["settings"]
    kind = BOUNDS[st["bound"]].kind
    if st.get("bound_kind", kind) != kind:
        raise DataError(
            f"{where}: settings.bound_kind is {st['bound_kind']!r}, but bound {st['bound']!r} is {kind!r} "
            "in the bounds registry"
        )
    if "recipe_overrides" in prov or cert.version >= 5:
        name, recorded = prov.get("recipe"), prov.get("recipe_overrides", "absent")
        actual = recipe_overrides(name, cert.settings.recipe)
        if recorded != actual:
            raise DataError(
                f"{where}: provenance.recipe {_fmt(name)} with provenance.recipe_overrides {_fmt(recorded)} "
                f"does not give the settings' recipe (from {_fmt(name)} it overrides {_fmt(actual)})"
            )
    table = (prov.get("table") or {}).get("path")
    if "data" in doc and table is not None and doc["data"] != table:
        raise DataError(f"{where}: data is {doc['data']!r}, but provenance.table.path is {table!r}")
    for role, c in prov.get("columns", {}).items():
        named = cert.columns.get(role, "absent")
        if named != c["name"]:
            raise DataError(
                f"{where}: columns.{role} is {_fmt(named)}, but provenance.columns.{role}.name is {c['name']!r}"
            )
    if not CALIBRATORS[cert.method].needs_groups and cert.columns.get("group") is not None:
        raise DataError(
            f"{where}: columns.group is {cert.columns['group']!r}, but a {cert.method} certificate routes without "
            "group labels (gpac calibrate refuses --group-col for it)"
        )


def _held(dtype) -> str:
    """What a column of ``dtype`` holds, as its hash sees it (:func:`~gpac_utils.certificate.column_sha256`)."""
    return "numbers" if np.dtype(dtype).kind in "biuf" else "text"


def _check_columns(cert: Certificate, table_path, frame: pd.DataFrame) -> list[str]:
    """The recorded columns against the data (canonical hashes); the dtypes' class."""
    lines, _ = cert.verify(table_path, frame, refuse=True)
    hashed = cert.provenance.get("columns", {})
    for role, name in cert.columns.items():  # a role named without a hash: its column was not in the table
        if role not in hashed and name is not None and name in frame.columns:
            raise DataError(
                f"{cert._where}: columns.{role} is {name!r}, a column of the table, but provenance.columns "
                f"records no hash of it (gpac calibrate hashes every column it names that the table has)"
            )
    for role, c in hashed.items():
        got = frame[c["name"]].to_numpy().dtype
        if _held(c["dtype"]) != _held(got):
            raise DataError(
                f"{cert._where}: provenance.columns.{role}.dtype is {c['dtype']!r} ({_held(c['dtype'])}), "
                f"but the column {c['name']!r} holds {_held(got)} ({got}) and its hash is of {_held(got)}"
            )
    return lines


#: The registry's scores served by a fitted model (:func:`gpac_utils.llm.router_model.serve_router`): a
#: certificate on one of them without ``provenance.score_model`` is refused (nothing serves its column).
FITTED_SCORES = ("score_router",)


def _check_score_model(cert: Certificate, frame: pd.DataFrame, given) -> tuple[dict | None, list[str]]:
    """A recorded score model: its file's hash, its embedder and text column, and the score column
    recomputed from it; the record recomputed, and the lines of a pass."""
    recorded = cert.provenance.get("score_model")
    where = cert._where
    if not recorded:
        if given is not None:
            raise ParameterError(
                f"--score-model {given}: the certificate records no score model (provenance.score_model) to "
                "recompute the scores with; refused"
            )
        if cert.score not in FITTED_SCORES:
            return None, []
        if cert.version < declared(("provenance", "score_model")).since:
            return None, [
                f"score {cert.score!r} without a score model: a version-{cert.version} file, before certificates "
                "recorded one; that its column is a served score is taken on trust"
            ]
        raise DataError(
            f"{where}: score is {cert.score!r}, served by a fitted model, but provenance.score_model records "
            "none: the column is not a score a router serves (a cross-fitted column is not); fit one with gpac "
            "fit-router and calibrate with --score-model"
        )
    path = cert.score_model_path(given)
    if not path.exists():
        raise DataError(
            f"{where}: provenance.score_model.path {recorded['path']!r}: no such file (nor beside the "
            "certificate); give it: gpac verify --score-model PATH"
        )
    cols = cert.columns
    router_model = importlib.import_module("gpac_utils.llm.router_model")  # by name: the core imports no outer layer
    record, line = router_model.score_model_record(
        path, frame, id_col=cols.get("id"), score_col=cols["score"], sha256=recorded["sha256"]
    )
    for key in ("embedder", "text"):
        if record[key] != recorded[key]:
            raise DataError(
                f"{where}: provenance.score_model.{key} is {recorded[key]!r}; the model's is {record[key]!r}"
            )
    return record, [line]


def _compare(cert: Certificate, again: dict) -> None:
    """Every checked field of the file against the recomputed certificate (both ways)."""
    where = cert._where
    source = cert.source or cert.document
    for g in sorted(set(cert.thresholds) | set(again["thresholds"])):
        a, b = cert.thresholds.get(g, "absent"), again["thresholds"].get(g, "absent")
        if not _same(a, b):
            what = "group" if g in cert.groups else "cell"  # a collection's thresholds are its cells'
            raise DataError(f"{where}: threshold of {what} {g!r} is {_fmt(a)}; recomputed {_fmt(b)}")
    seen = set()
    for path, value, _ in _checked(source):
        seen.add(path)
        b = _get(again, path)
        if path[0] == "groups" and b == "absent":
            raise DataError(f"{where}: groups[{path[1]!r}] is not a group of the recomputed certificate")
        if not _same(value, b):
            raise DataError(f"{where}: {_dotted(path)} is {_fmt(value)}; recomputed {_fmt(b)}")
    for path, value, f in _checked(again):  # what the recomputation writes and the file lacks
        if path not in seen and f.since <= cert.version and _get(source, path) == "absent":
            raise DataError(f"{where}: {_dotted(path)} is absent; recomputed {_fmt(value)}")


def _per_cell(cert: Certificate) -> str:
    """How a collection's thresholds are kept (one per cell of its groupings); nothing for the others."""
    return f" (one per cell of {', '.join(cert.groupings)})" if cert.groupings else ""


def _descriptive(cert: Certificate, frame: pd.DataFrame) -> str:
    """The descriptive fields, shown: what verify does not check."""
    shown = [f"{_dotted(p)}={v}" for p, v, f in _fields(cert.source or {}) if f is not None and f.verify == DESCRIPTIVE]
    for role, c in sorted(cert.provenance.get("columns", {}).items()):
        got = frame[c["name"]].to_numpy().dtype
        shown.append(f"provenance.columns.{role}.dtype={c['dtype']} (read now: {got})")
    return "descriptive, not checked: " + "; ".join(shown)


def verify_certificate(
    cert: Certificate, table_path, frame: pd.DataFrame, *, expect: dict | None = None, score_model=None
) -> list[str]:
    """Verify every field of a certificate (module description); the lines of a pass.

    Parameters
    ----------
    cert : Certificate
        The certificate (:meth:`~gpac_utils.certificate.Certificate.read`), with provenance
        (schema version 3 or later).
    table_path : path
        The calibration table (any format: the columns' values decide).
    frame : pandas.DataFrame
        Its contents.
    expect : dict, optional
        The operator's statements (:func:`parse_expect`): key -> value.
    score_model : path, optional
        The score model's file (default: the recorded path, else beside the certificate).

    Returns
    -------
    list of str
        What was checked against what, what was taken on trust, and the descriptive fields.

    Raises
    ------
    DataError
        One line naming the first field that does not agree.
    """
    where = cert._where
    prov = cert.provenance
    if prov and prov.get("mode") == "sequential":
        raise DataError(
            f"{where}: provenance.mode 'sequential' (gpac plan --sequential): its thresholds come from e-processes "
            "over the labelling order, which gpac verify does not recompute; test it with gpac audit"
        )
    if not prov or not prov.get("columns"):
        raise DataError(f"{where}: no provenance to recompute from (a version-{cert.version} file)")
    cols = {role: c["name"] for role, c in prov["columns"].items()}
    if "score" not in cols or "loss" not in cols:
        raise DataError(f"{where}: provenance.columns needs 'score' and 'loss' to recompute")
    unhashed = [role for role in map(grouping_role, cert.groupings or ()) if role not in cols]
    if unhashed:  # each grouping's column is read by its hashed record, as the others
        raise DataError(f"{where}: provenance.columns records no {unhashed[0]!r} (a grouping's column) to recompute")
    _check_versions(cert)
    checked, trusted = _check_expect(cert, dict(expect or {}))
    _check_agreement(cert)
    table_lines = _check_columns(cert, table_path, frame)
    model_record, model_lines = _check_score_model(cert, frame, score_model)
    fresh = CALIBRATORS[cert.method].cls.from_settings(cert.settings)
    u = frame[cols["score"]].to_numpy(float)
    loss = frame[cols["loss"]].to_numpy(float)
    columns = [cols[grouping_role(x)] for x in cert.groupings or ()]  # its groups' columns, as hashed
    columns = columns or ([cols["group"]] if CALIBRATORS[cert.method].needs_groups and "group" in cols else [])
    g = cert.groups_from(frame, columns) if columns else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)
        fresh.fit(u, loss, g)
    used = {role: (name, frame[name].to_numpy() if role in cols else None) for role, name in cert.columns.items()}
    again = Certificate.from_calibrator(  # as gpac calibrate writes it, with what the file records
        fresh,
        columns=used,
        score=cert.score,
        table_path=table_path if prov.get("table") else None,
        recipe_name=prov.get("recipe"),
        created=prov.get("created"),
        n_items=len(frame) if "n_items" in (cert.source or cert.document) else None,
        score_model=model_record,
    ).source  # the document as its JSON reads back
    if "providers" not in prov:  # optional: a file written before it records none
        del again["provenance"]["providers"]
    if "groupings" not in (cert.source or cert.document):  # optional: a collection's file before it (one label array)
        again.pop("groupings", None)
    _compare(cert, again)
    return [
        f"recomputed {len(again['thresholds'])} threshold(s){_per_cell(cert)}, every group entry and the provenance of "
        f"{described(cert)} from the table and the recorded settings: bit-identical",
        *table_lines,
        *model_lines,
        *(["names provided by: " + cert.providers_text()] if "providers" in prov else []),
        "checked against --expect: " + (", ".join(checked) if checked else "nothing (no --expect)"),
        *(["taken on trust (state them with --expect KEY=VALUE): " + ", ".join(trusted)] if trusted else []),
        _descriptive(cert, frame),
    ]
