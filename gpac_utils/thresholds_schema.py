"""The thresholds file: its declared, versioned schema, checked on every read.

``to_json`` (:class:`~gpac_utils.calibrate.PAC` and the others) and ``gpac calibrate`` write it;
:func:`~gpac_utils.certificate.from_json` and ``gpac route`` read it through :func:`validate_file`, which
refuses a corrupt, hand-edited or foreign file with one line naming the field, e.g.
``thresholds['hard']: must be a number in [0, 1] or null (always think), got 7``.

Versions
--------
``1``
    Files without a ``schema_version`` field (gpac_utils 0.2 and before). Read as version 2.
``2``
    The same fields, plus ``schema_version``.
``3``
    The same, plus the certificate's fields that ``gpac calibrate`` writes (:mod:`gpac_utils.certificate`):
    ``schema``, ``provenance`` and ``groups`` (per group: n, labelled, status, threshold, bound),
    declared here and checked in depth by :meth:`gpac_utils.certificate.Certificate.parse`.
``4`` (:data:`SCHEMA_VERSION`)
    The same, plus ``score``: the score's registry name (:data:`gpac_utils.scores.SCORES`) beside
    ``columns.score``, the table's column. Written by this version; older versions are read and
    migrated by :meth:`gpac_utils.certificate.Certificate.read` (one path for every version).

A file of a newer version than :data:`SCHEMA_VERSION` is refused (it may carry fields this
version would ignore). ``settings['pi']`` is read as ``settings['label_prob']`` (its name before
the rename), in every version.

The fields
----------
Every field a file may hold is declared once, below, in :data:`FIELDS` (top level) and
:data:`SETTINGS` (inside ``settings``): its check, whether it is required, and which kinds of
method carry it (a method's kind is its registry entry's ``groups``: ``"none"``, ``"known"`` or
``"learned"``; the methods themselves come from :data:`gpac_utils.calibrate.CALIBRATORS`, passed in
by :func:`~gpac_utils.certificate.from_json` and ``gpac route``, never compared by name here).
A field that is not declared is refused. To extend the file (a new field), add a
:class:`Field` to the right table, write it in ``to_json``, and raise :data:`SCHEMA_VERSION` when
files of the new version could not be read by the previous one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import bounds, partition, sampling, selection
from .checks import ParameterError
from .recipe import Recipe
from .risks import RISKS
from .scores import SCORES
from .settings import CORRECTIONS

__all__ = ["SCHEMA_VERSION", "READS", "ThresholdsFileError", "Field", "FIELDS", "SETTINGS", "validate_file"]

#: The version this gpac_utils writes.
SCHEMA_VERSION = 4
#: The versions it reads (1: files without ``schema_version``).
READS = (1, 2, 3, 4)
#: The kinds of method (their registry entry's ``groups``) that carry a field.
_ALL = ("none", "known", "learned")
_GROUPED = ("known", "learned")
_LEARNED = ("learned",)


class ThresholdsFileError(ParameterError):
    """A thresholds file that does not follow the schema; the message names the field."""


@dataclass(frozen=True)
class Field:
    """One declared field of the thresholds file.

    Attributes
    ----------
    check : callable
        ``check(value, payload)``: returns an error text (without the field's name) or ``None``.
    required : bool
        Whether a file of one of ``kinds`` must have it.
    kinds : tuple of str
        The kinds of method (``groups`` of their registry entry) whose files carry the field (a file
        of another kind must not have it).
    doc : str
        What it holds (for the documentation).
    """

    check: Callable[[object, dict], str | None]
    required: bool = True
    kinds: tuple = _ALL
    doc: str = ""


# ----------------------------------------------------------------------------- value checks
def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int_at_least(lo: int):
    return lambda v, _: None if _is_int(v) and v >= lo else f"must be an integer >= {lo}, got {v!r}"


def _one_of(*choices):
    return lambda v, _: None if v in choices and isinstance(v, str) else f"must be one of {list(choices)}, got {v!r}"


def _fraction(v, _):
    return None if _is_number(v) and 0 < v < 1 else f"must be a number in (0, 1), got {v!r}"


def _boolean(v, _):
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


def _text(v, _):
    return None if isinstance(v, str) and v else f"must be a non-empty string, got {v!r}"


def _version(v, _):
    if not _is_int(v):
        return f"must be an integer, got {v!r}"
    if v > SCHEMA_VERSION:
        return f"{v} is newer than this gpac_utils reads ({SCHEMA_VERSION}); upgrade gpac_utils"
    return None if v in READS else f"must be one of {list(READS)}, got {v}"


def _risk(name):
    """``eps`` in ``(0, loss_bound)``, ``alpha`` in ``(0, 1)``, ``loss_bound > 0`` (as the calibrators check them)."""

    def check(v, root):
        if not _is_number(v):
            return f"must be a finite number, got {v!r}"
        if name == "loss_bound":
            return None if v > 0 else f"must be > 0, got {v!r}"
        lb = root.get("settings", {}).get("loss_bound", 1.0) if name == "eps" else 1.0
        hi = lb if _is_number(lb) and lb > 0 else 1.0
        return None if 0 < v < hi else f"must lie in (0, {hi}), got {v!r}"

    return check


def _label_prob(v, _):
    return None if v is None or (_is_number(v) and 0 < v <= 1) else f"must be a number in (0, 1] or null, got {v!r}"


def _candidates(v, _):
    ok = v in ("auto", "all") if isinstance(v, str) else _is_int(v) and v >= 1
    return None if ok else f"must be 'auto', 'all' or a grid size >= 1, got {v!r}"


def _registry(registry):
    """A name of one of the package's registries."""

    def check(v, _):
        known = list(registry)
        return None if isinstance(v, str) and v in known else f"must be one of {known}, got {v!r}"

    return check


def _thresholds(v, payload):
    if not isinstance(v, dict) or not v:
        return "must be a non-empty object of group -> number or null"
    kind = payload["_kind"]
    if kind == "none" and list(v) != ["__all__"]:
        return f"a {payload['method']} file has the one group '__all__', got {list(v)}"
    if kind == "learned":
        part = payload.get("partition")
        k = len(part["boundaries"]) + 1 if isinstance(part, dict) and isinstance(part.get("boundaries"), list) else 0
        learned = [f"c{j}" for j in range(k)]
        extra = [g for g in v if g not in learned]
        if k and extra:
            return f"a {payload['method']} file's groups are the learned {learned}, got {extra}"
    return None


def _each_threshold(g, t):
    if not isinstance(g, str) or not g.strip():
        return f"[{g!r}]", "group names must be non-empty strings"
    if t is not None and not (_is_number(t) and 0 <= t <= 1):
        return f"[{g!r}]", f"must be a number in [0, 1] or null (always think), got {t!r}"
    return None


def _group_sizes(v, _):
    if not isinstance(v, dict):
        return "must be an object of group -> number of calibration items"
    bad = [g for g, n in v.items() if not (_is_int(n) and n >= 0)]
    return f"[{bad[0]!r}]: must be an integer >= 0, got {v[bad[0]]!r}" if bad else None


def _partition(v, payload):
    if not isinstance(v, dict) or set(v) != {"algorithm", "boundaries"}:
        return f"a {payload['method']} file needs 'partition': {{'algorithm', 'boundaries'}} (and nothing else)"
    algo = _registry(partition.PARTITION_ALGORITHMS)(v["algorithm"], payload)
    if algo:
        return f"['algorithm']: {algo}"
    b = v["boundaries"]
    if not isinstance(b, list) or not all(_is_number(x) and 0 <= x <= 1 for x in b):
        return f"['boundaries']: must be a list of numbers in [0, 1], got {b!r}"
    for i in range(1, len(b)):
        if not b[i] > b[i - 1]:
            return f"['boundaries']: must be strictly ascending; {b[i - 1]!r} then {b[i]!r} at positions {i - 1}, {i}"
    k = payload.get("settings", {}).get("k")
    if _is_int(k) and len(b) > k - 1:
        return f"['boundaries']: has {len(b)} boundaries: more than k - 1 = {k - 1} (settings['k'])"
    return None


def _columns(v, _):
    ok = isinstance(v, dict) and set(v) <= {"score", "loss", "group", "id"}
    if not ok or not all(c is None or isinstance(c, str) for c in v.values()):
        return "must be an object of 'score', 'loss', 'group', 'id' -> column name or null"
    return None


# ----------------------------------------------------------------------------- declarations
#: The top-level fields.
FIELDS: dict[str, Field] = {
    "schema_version": Field(_version, required=False, doc="the schema version (missing: 1)"),
    "method": Field(lambda v, _: None, doc="a name of the calibrator registry (PAC, G-PAC, C-PAC)"),
    "settings": Field(
        lambda v, _: None if isinstance(v, dict) else "must be an object", doc="every setting ('SETTINGS')"
    ),
    "thresholds": Field(_thresholds, doc="group -> threshold in [0, 1], null: always think"),
    "group_sizes": Field(_group_sizes, required=False, doc="group -> calibration items"),
    "partition": Field(_partition, kinds=_LEARNED, doc="C-PAC's learned partition: algorithm, boundaries"),
    "columns": Field(_columns, required=False, doc="gpac calibrate: the table's columns"),
    "score": Field(
        lambda v, p: None if v is None else _registry(SCORES)(v, p),
        required=False,
        doc="the score's registry name (null: the column holds no registered score)",
    ),
    "data": Field(_text, required=False, doc="gpac calibrate: the table it read"),
    "n_items": Field(_int_at_least(1), required=False, doc="gpac calibrate: the table's rows"),
    "schema": Field(_one_of("gpac-thresholds"), required=False, doc="the certificate's schema name"),
    "provenance": Field(
        lambda v, _: None if isinstance(v, dict) else "must be an object",
        required=False,
        doc="the certificate's provenance",
    ),
    "groups": Field(
        lambda v, _: None if isinstance(v, dict) else "must be an object of group -> entry",
        required=False,
        doc="the certificate's per-group review: n, labelled, status, threshold, ucb",
    ),
}

#: The fields of ``settings``.
SETTINGS: dict[str, Field] = {
    "eps": Field(_risk("eps"), doc="target risk, in (0, loss_bound)"),
    "alpha": Field(_risk("alpha"), doc="miscoverage level, in (0, 1)"),
    "loss_bound": Field(_risk("loss_bound"), doc="upper end of the loss range, > 0"),
    "bound": Field(_registry(bounds.BOUNDS), doc="the recipe's bound"),
    "bound_kind": Field(_one_of("valid", "paper"), required=False, doc="whether the bound is valid"),
    "sampling": Field(_registry(sampling.SCHEMES), doc="the recipe's label sampling"),
    "label_prob": Field(_label_prob, doc="labelling probability (legacy name: 'pi')"),
    "rule": Field(_registry(selection.RULES), doc="the recipe's selection rule"),
    "candidates": Field(_candidates, doc="'auto', 'all' or a grid size"),
    "min_group_size": Field(_int_at_least(1), doc="smaller groups always think"),
    "seed": Field(_int_at_least(0), doc="seed of the label sampling (and C-PAC's split)"),
    "correction": Field(_registry(CORRECTIONS), required=False, kinds=_GROUPED, doc="alpha across groups"),
    "simultaneous": Field(_boolean, required=False, kinds=_GROUPED, doc="Bonferroni across groups (files before 0.3)"),
    "risk": Field(_registry(RISKS), required=False, doc="what is certified: joint (missing) or routed"),
    "k": Field(_int_at_least(1), kinds=_LEARNED, doc="number of learned groups asked for"),
    "partition": Field(_registry(partition.PARTITION_ALGORITHMS), kinds=_LEARNED, doc="partition algorithm"),
    "mode": Field(_one_of("split", "joint"), kinds=_LEARNED, doc="split or joint calibration"),
    "cluster_fraction": Field(_fraction, kinds=_LEARNED, doc="share of items that learn the partition"),
}


def _path(prefix: str, name: str) -> str:
    return f"{prefix}[{name!r}]" if prefix else name


def _check_table(fields: dict, table: dict[str, Field], prefix: str, method: str, root: dict) -> None:
    """Check ``fields`` (the file, or its settings) against the declarations ``table``."""
    kind = root["_kind"]
    for name in fields:
        if name == "_kind" and fields is root:  # set by validate_file (a file holding it is refused there)
            continue
        f = table.get(name)
        if f is None or kind not in f.kinds:
            whose = f"a {method} file" if f is not None else "the schema"
            raise ThresholdsFileError(
                f"{_path(prefix, name)}: not a field of {whose} (schema version {SCHEMA_VERSION})"
            )
    for name, f in table.items():
        if name not in fields:
            if f.required and kind in f.kinds:
                raise ThresholdsFileError(f"{_path(prefix, name)}: missing (a {method} file needs it)")
            continue
        problem = f.check(fields[name], root)
        if problem:
            raise ThresholdsFileError(f"{_path(prefix, name)}{'' if problem.startswith('[') else ': '}{problem}")


def validate_file(payload, methods: Mapping) -> dict:
    """Check a parsed thresholds file against the schema; return it with ``schema_version`` filled in.

    Parameters
    ----------
    payload : object
        The parsed JSON.
    methods : mapping
        The calibrator registry (:data:`gpac_utils.calibrate.CALIBRATORS`): method name -> entry
        whose ``groups`` is the method's kind.

    Returns
    -------
    dict
        A shallow copy: ``schema_version`` set (1 when missing), ``settings['pi']`` renamed
        ``settings['label_prob']``.

    Raises
    ------
    ThresholdsFileError
        At the first problem, naming the field (``thresholds['x']``, ``settings['eps']``,
        ``partition['boundaries']``, ...).

    Examples
    --------
    >>> from gpac_utils.calibrate import CALIBRATORS
    >>> validate_file({"method": "PAC", "settings": {}, "thresholds": {"__all__": 7}}, CALIBRATORS)
    Traceback (most recent call last):
    ...
    gpac_utils.thresholds_schema.ThresholdsFileError: settings['eps']: missing (a PAC file needs it)
    """
    if not isinstance(payload, dict):
        raise ThresholdsFileError(f"not a thresholds file: expected a JSON object, got {type(payload).__name__}")
    if "method" not in payload:
        raise ThresholdsFileError(f"'method': missing; not a thresholds file? (it has {sorted(payload)})")
    if "_kind" in payload:
        raise ThresholdsFileError("_kind: not a field of the schema")
    payload = dict(payload)
    method = payload["method"]
    if not isinstance(method, str) or method not in methods:
        raise ThresholdsFileError(f"method: must be one of {list(methods)}, got {method!r}")
    payload["_kind"] = methods[method].groups
    if not isinstance(payload.get("settings", {}), dict):
        raise ThresholdsFileError("settings: must be an object")
    st = payload.get("settings")
    if isinstance(st, dict) and "pi" in st:
        st = {("label_prob" if k == "pi" else k): v for k, v in st.items()}
        payload["settings"] = st
    for name in ("schema_version", "settings"):  # the version first, then what the other checks read
        problem = FIELDS[name].check(payload[name], payload) if name in payload else None
        if problem:
            raise ThresholdsFileError(f"{name}: {problem}")
    _check_table(payload, FIELDS, "", method, payload)
    _check_table(payload["settings"], SETTINGS, "settings", method, payload)
    for g, t in payload["thresholds"].items():
        problem = _each_threshold(g, t)
        if problem:
            raise ThresholdsFileError(f"thresholds{problem[0]}: {problem[1]}")
    st = payload["settings"]
    try:  # the fields of the recipe together (e.g. sampling 'full' with a label_prob of 0.5)
        Recipe(st["bound"], st["sampling"], st["label_prob"], st["rule"], st["candidates"])
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise ThresholdsFileError(f"settings[{field!r}]: {message}") from None
    payload.setdefault("schema_version", 1)
    del payload["_kind"]
    return payload
