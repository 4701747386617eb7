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
``4``
    The same, plus ``score``: the score's registry name (:data:`gpac_utils.scores.SCORES`) beside
    ``columns.score``, the table's column (and, from gpac_utils 0.2, ``provenance.score_model``).
``5`` (:data:`SCHEMA_VERSION`)
    The same, plus ``provenance.recipe_overrides`` (the recipe's fields the settings changed from
    the named recipe's: what lets ``gpac verify`` check the name) and ``provenance.item_ids``
    (digests of the calibration items' ids: what lets ``gpac audit`` refuse data that overlaps
    them); later, optionally, ``provenance.providers`` (the distribution that provided each registry
    name the file uses); later, optionally, for the calibrators of a collection of groups that may overlap
    (:attr:`~gpac_utils.settings.Method.groups` ``"collection"``: Min-G-PAC, Path-G-PAC), ``groupings``
    (the grouping columns, in order: :data:`GROUPING_NAMES`) and a column role per grouping
    (:func:`grouping_role`: ``columns['group:subject']``, ``provenance.columns['group:subject']``); their
    ``groups`` then hold every group of every grouping (``subject=algebra``) and ``thresholds`` every cell
    (``subject=algebra & language=en``). A G-PAC, PAC or C-PAC file is unchanged, and a file of these
    two calibrators without ``groupings`` (one label column, before it) still reads. Every field of the
    certificate, down to the provenance's records, is declared here.
    Written by this version; older versions are read and migrated by
    :meth:`gpac_utils.certificate.Certificate.read` (one path for every version).

A file of a newer version than :data:`SCHEMA_VERSION` is refused (it may carry fields this
version would ignore). ``settings['pi']`` is read as ``settings['label_prob']`` (its name before
the rename), in every version.

The fields
----------
Every field a file may hold is declared once: the common ones below, in :data:`FIELDS` (top level,
with the fields a calibrator's entry adds: :attr:`~gpac_utils.settings.Method.json_fields`, C-PAC's
:data:`PARTITION`), and :data:`SETTINGS` (inside ``settings``: the recipe's fields,
:data:`RECIPE_SETTINGS`, and each setting a calibrator declares, :class:`~gpac_utils.settings.Setting`,
whose one constraint is its check here). Which fields a file holds is keyed by its method
(:func:`method_fields`; the methods come from :data:`gpac_utils.settings.CALIBRATORS`, passed in by
:func:`~gpac_utils.certificate.from_json` and ``gpac route``, never compared by name here). A field
that is not declared is refused, and one of another calibrator's files. The certificate's records are
declared the same way: :data:`GROUP_ENTRY` (each ``groups`` entry), :data:`PROVENANCE` and its records
(:data:`TABLE_RECORD`, :data:`COLUMN_RECORD`, :data:`SCORE_MODEL_RECORD`, :data:`ITEM_IDS_RECORD`);
:func:`declared` finds the declaration of any field of a file by its path.

Each declaration also says what a value of it looks like (``type``: what ``tests/test_verify_mutations.py``
generates another value from), since which version it exists (``since``) and how ``gpac verify``
(:mod:`gpac_utils.verify`) checks it (``verify``): :data:`CHECKED` (recomputed from the data and the
settings, or checked against the fields it must agree with), :data:`STATED` (no data can tell it:
checked against what the operator states, ``--expect``) or :data:`DESCRIPTIVE` (a timestamp, a
path, a file's bytes: shown, not checked).

To extend the file (a new field), add a :class:`Field` to the right table (with its ``type``,
``since`` and ``verify``), write it, and raise :data:`SCHEMA_VERSION` when files of the new version
could not be read by the previous one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from . import bounds, partition, sampling, selection
from .checks import ParameterError
from .group_collection import SEP, split_cell
from .recipe import RECIPES, Recipe
from .scores import SCORES
from .settings import CALIBRATORS, RNG_SEED

__all__ = [
    "SCHEMA_VERSION",
    "READS",
    "CHECKED",
    "STATED",
    "DESCRIPTIVE",
    "ThresholdsFileError",
    "Field",
    "FIELDS",
    "SETTINGS",
    "RECIPE_SETTINGS",
    "PARTITION",
    "GROUPING_NAMES",
    "grouping_role",
    "method_fields",
    "GROUP_ENTRY",
    "PROVENANCE",
    "TABLE_RECORD",
    "COLUMN_RECORD",
    "SCORE_MODEL_RECORD",
    "ITEM_IDS_RECORD",
    "PROVIDER_RECORD",
    "declared",
    "validate_file",
    "check_record",
]

#: The version this gpac_utils writes.
SCHEMA_VERSION = 5
#: The versions it reads (1: files without ``schema_version``).
READS = (1, 2, 3, 4, 5)
#: How ``gpac verify`` checks a field: recomputed or checked against other fields; against ``--expect``;
#: not at all (shown).
CHECKED, STATED, DESCRIPTIVE = "checked", "stated", "descriptive"


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
        Whether a file (of a calibrator that has the field) must have it.
    doc : str
        What it holds, for a reader of an extension's declaration (``docs/extending.md``); no code reads it,
        and the package's own declarations say it in a comment beside them.
    type : str
        What a value looks like (``"fraction"``, ``"int"``, ``"name"``, ``"sha256"``, ...): the mutation
        test generates another value of the type.
    choices : callable, tuple or registry, optional
        The values a ``"name"`` or ``"choice"`` field may take (a callable or a registry: read when needed).
    since : int
        The first schema version that has the field.
    verify : str
        How ``gpac verify`` checks it: :data:`CHECKED`, :data:`STATED` or :data:`DESCRIPTIVE`.
    fields : mapping, optional
        A record's declared fields (``settings``, the provenance's records).
    each : Field, optional
        The declaration of each value of a map with free keys (groups, column roles).
    """

    check: Callable[[object, dict], str | None]
    required: bool = True
    doc: str = ""
    type: str = "record"
    choices: Callable[[], object] | Mapping | tuple | None = None
    since: int = 1
    verify: str = CHECKED
    fields: Mapping | None = None
    each: Field | None = None

    def options(self) -> list:
        """The values a ``"name"`` or ``"choice"`` field may take."""
        return list(self.choices() if callable(self.choices) else self.choices or ())


# ----------------------------------------------------------------------------- value checks
def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int_at_least(lo: int):
    return lambda v, _: None if _is_int(v) and v >= lo else f"must be an integer >= {lo}, got {v!r}"


def _one_of(choices):
    """A check for one of the strings ``choices`` (a tuple, or the names of one of the package's registries)."""
    return lambda v, _: None if isinstance(v, str) and v in choices else f"must be one of {list(choices)}, got {v!r}"


def _choice(*choices: str, **more) -> Field:
    """A field holding one of the strings ``choices``."""
    return Field(_one_of(choices), type="choice", choices=choices, **more)


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


def _number_or_null(ok, what: str):
    return lambda v, _: None if v is None or _is_number(v) and ok(v) else f"must be a number {what} or null, got {v!r}"


_label_prob = _number_or_null(lambda v: 0 < v <= 1, "in (0, 1]")
_nonneg = _number_or_null(lambda v: v >= 0, ">= 0")
_threshold = _number_or_null(lambda v: 0 <= v <= 1, "in [0, 1]")


def _candidates(v, _):
    ok = v in ("auto", "all") if isinstance(v, str) else _is_int(v) and v >= 1
    return None if ok else f"must be 'auto', 'all' or a grid size >= 1, got {v!r}"


def _named(registry, **more) -> Field:
    """A field holding a name of ``registry``."""
    return Field(_one_of(registry), type="name", choices=lambda: registry, **more)


def _thresholds(v, payload):
    if not isinstance(v, dict) or not v:
        return "must be a non-empty object of group -> number or null"
    kind = payload["_kind"]
    if kind == "none" and list(v) != ["__all__"]:
        return f"a {payload['method']} file has the one group '__all__', got {list(v)}"
    groupings = payload.get("groupings")
    if kind == "collection" and isinstance(groupings, list) and groupings:  # each cell: 'g=label' per grouping
        bad = [c for c in v if split_cell(c, groupings) is None]
        if bad:
            return (
                f"[{bad[0]!r}]: not a cell of the groupings {groupings} (one 'grouping=label' each, joined by {SEP!r})"
            )
    if kind == "learned":
        part = payload.get("partition")
        k = len(part["boundaries"]) + 1 if isinstance(part, dict) and isinstance(part.get("boundaries"), list) else 0
        learned = [f"c{j}" for j in range(k)]
        extra = [g for g in v if g not in learned]
        if k and extra:
            return f"a {payload['method']} file's groups are the learned {learned}, got {extra}"
    return None


def _group_sizes(v, _):
    if not isinstance(v, dict):
        return "must be an object of group -> number of calibration items"
    bad = [g for g, n in v.items() if not (_is_int(n) and n >= 0)]
    return f"[{bad[0]!r}]: must be an integer >= 0, got {v[bad[0]]!r}" if bad else None


def _partition(v, payload):
    if not isinstance(v, dict) or set(v) != {"algorithm", "boundaries"}:
        return f"a {payload['method']} file needs 'partition': {{'algorithm', 'boundaries'}} (and nothing else)"
    algo = _one_of(partition.PARTITION_ALGORITHMS)(v["algorithm"], payload)
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


#: The columns' roles (``columns``; ``gpac calibrate --score-col``, ``--loss-col``, ``--group-col``, ``--id-col``).
_ROLES = ("score", "loss", "group", "id")


def grouping_role(grouping: str) -> str:
    """The column role of a grouping of a collection (``columns`` and ``provenance.columns``): ``group:<grouping>``.

    Examples
    --------
    >>> grouping_role("language")
    'group:language'
    """
    return f"group:{grouping}"


def _columns(v, payload):
    groupings = payload.get("groupings")
    roles = (*_ROLES, *map(grouping_role, groupings)) if isinstance(groupings, list) else _ROLES
    ok = isinstance(v, dict) and set(v) <= set(roles) and all(c is None or isinstance(c, str) for c in v.values())
    return None if ok else f"must be an object of {', '.join(map(repr, roles))} -> column name or null"


def _groupings(v, _):
    ok = v is None or (
        isinstance(v, list)
        and len(set(v)) == len(v)
        and all(isinstance(g, str) and g and "=" not in g and SEP not in g for g in v)
    )
    return None if ok else f"must be a list of distinct grouping names without '=' or {SEP!r}, or null, got {v!r}"


# ----------------------------------------------------------------------------- more value checks
def _nullable(check):
    return lambda v, root: None if v is None else check(v, root)


def _sha256(v, _):
    ok = isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)
    return None if ok else f"must be 64 lowercase hexadecimal digits, got {v!r}"


def _dtype(v, _):
    try:
        np.dtype(v)
    except (TypeError, ValueError):
        return f"must be a numpy dtype's name (float64, int64, object, ...), got {v!r}"
    return None if isinstance(v, str) else f"must be a numpy dtype's name, got {v!r}"


def _timestamp(v, _):
    try:
        datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return f"must be a UTC time in ISO 8601 (2026-01-01T00:00:00Z), got {v!r}"
    return None if isinstance(v, str) else f"must be a string, got {v!r}"


def _checked_with_the_record(v, _):
    return None


def _record(v, _):
    return None if isinstance(v, dict) else "must be an object"


def _recipe_name(v, _):
    return None if isinstance(v, str) and v in RECIPES else f"must be one of {list(RECIPES)} or null, got {v!r}"


#: The recipe's fields (what ``provenance.recipe_overrides`` may name).
RECIPE_FIELDS = ("bound", "sampling", "label_prob", "rule", "candidates")


def _overrides(v, root):
    if not isinstance(v, dict):
        return "must be an object of recipe field -> value, or null"
    bad = [k for k in v if k not in RECIPE_FIELDS]
    if bad:
        return f"[{bad[0]!r}]: not a field of the recipe {list(RECIPE_FIELDS)}"
    for k, x in v.items():
        problem = RECIPE_SETTINGS[k].check(x, root)
        if problem:
            return f"[{k!r}]: {problem}"
    return None


# ----------------------------------------------------------------------------- declarations

#: The recipe's fields in ``settings`` (its JSON form; :mod:`gpac_utils.recipe` checks them together).
RECIPE_SETTINGS: dict[str, Field] = {
    "bound": _named(bounds.BOUNDS, verify=STATED),
    # whether the bound is valid (checked against the bound's registry entry)
    "bound_kind": _choice("valid", "paper", required=False),
    "sampling": _named(sampling.SCHEMES, verify=STATED),
    # labelling probability (legacy name: 'pi')
    "label_prob": Field(_label_prob, type="label_prob", verify=STATED),
    "rule": _named(selection.RULES, verify=STATED),
    "candidates": Field(_candidates, type="candidates", verify=STATED),
}
#: ``settings['simultaneous']``: files before 0.3 (read as the correction), where the correction is read.
SIMULTANEOUS = Field(_boolean, required=False, type="bool", verify=STATED)


def _from_declaration(s) -> Field:
    """The schema's field of a declared setting (:class:`gpac_utils.settings.Setting`): its one constraint,
    checked strictly (a JSON integer is one)."""

    def check(v, root):
        try:
            s.check(v, root.get("settings", {}), strict=True)
        except ParameterError as exc:
            return str(exc).partition(": ")[2]
        return None

    kind, options = getattr(s.constraint, "kind", "record"), getattr(s.constraint, "options", None)
    return Field(check, required=s.required, type=kind, choices=options, verify=STATED)


def method_fields(entry) -> tuple[dict[str, Field], dict[str, Field]]:
    """The top-level fields and the ``settings`` of a file of the calibrator ``entry`` (a
    :data:`~gpac_utils.settings.CALIBRATORS` entry): the common fields and its ``json_fields``; the recipe's
    fields and each setting its class declares (``SETTINGS``), by their declarations."""
    settings: dict[str, Field] = {}
    for declared_ in entry.cls.SETTINGS:
        if declared_.name == "recipe":
            settings.update(RECIPE_SETTINGS)
        else:
            settings.update({p.name: _from_declaration(p) for p in declared_.flat()})
    if "correction" in settings:
        settings["simultaneous"] = SIMULTANEOUS
    return {**_FIELDS, **entry.json_fields}, settings


class Derived(Mapping):
    """A mapping computed each time it is read, by ``build()``: from the registries, whose entries (an installed
    plugin's included) are registered after this module is imported."""

    def __init__(self, build):
        self.build = build

    def __getitem__(self, key):
        return self.build()[key]

    def __iter__(self):
        return iter(self.build())

    def __len__(self) -> int:
        return len(self.build())


def _every(part: int) -> dict[str, Field]:
    """Every declared field of a table (``part`` 0) or of its settings (1), whichever registered calibrator's."""
    return {k: f for entry in CALIBRATORS.values() for k, f in method_fields(entry)[part].items()}


#: The fields of ``settings``, every registered calibrator's (:func:`method_fields`: one file's).
SETTINGS: Mapping[str, Field] = Derived(lambda: _every(1))

#: The fields of each ``groups`` entry (:mod:`gpac_utils.certificate`), all recomputed by ``gpac verify``.
GROUP_ENTRY: dict[str, Field] = {
    # calibration items
    "n": Field(_int_at_least(0), type="int", since=3),
    # expert labels used (null: not recorded)
    "labelled": Field(_nullable(_int_at_least(0)), type="count", since=3),
    # its values: gpac_utils.calibrate.STATUSES (checked by gpac_utils.certificate, which reads them)
    # certified or why it always thinks
    "status": Field(_text, type="status", since=3),
    # the threshold (null: always think)
    "threshold": Field(_threshold, type="threshold", since=3),
    # the certified bound at the threshold (null: none)
    "ucb": Field(_nonneg, type="bound", since=3),
}

#: ``provenance.table``: the calibration table's file.
TABLE_RECORD: dict[str, Field] = {
    # the file, as given (must agree with 'data')
    "path": Field(_text, type="path", since=3),
    # its bytes' SHA-256 (checked when --data is the file 'path' names; a copy elsewhere, in another format, is
    # judged by its columns)
    "sha256": Field(_sha256, type="sha256", since=3),
}

#: ``provenance.columns[role]``: a column used, hashed canonically (:func:`gpac_utils.certificate.column_sha256`).
COLUMN_RECORD: dict[str, Field] = {
    # the table's column (must agree with 'columns')
    "name": Field(_text, type="column", since=3),
    # its dtype as read; its class (number or text) decides how it is hashed and is checked, the rest is
    # descriptive (a CSV and a Parquet copy may read differently)
    "dtype": Field(_dtype, type="dtype", since=3),
    # the SHA-256 of its values, canonically
    "sha256": Field(_sha256, type="sha256", since=3),
}

#: ``provenance.score_model``: the score's fitted model (``gpac calibrate --score-model``).
SCORE_MODEL_RECORD: dict[str, Field] = {
    # the model file, as given
    "path": Field(_text, type="path", since=4, verify=DESCRIPTIVE),
    "sha256": Field(_sha256, type="sha256", since=4),
    # the embedder it reads (the model's)
    "embedder": Field(_text, type="text", since=4),
    # the request column it reads (the model's)
    "text": Field(_text, type="column", since=4),
}

#: ``provenance.item_ids``: the calibration items' ids, as digests (what ``gpac audit`` checks overlap with).
#: The record's values are checked together where it is written (:mod:`gpac_utils.certificate`: the digest's
#: name, ``n`` digests, sorted); here, its fields and how ``gpac verify`` checks them (recomputed from the ids).
ITEM_IDS_RECORD: dict[str, Field] = {
    "digest": Field(_checked_with_the_record, type="choice", choices=("sha256-48",), since=5),
    # how many distinct ids
    "n": Field(_checked_with_the_record, type="int", since=5),
    # the sorted digests, concatenated
    "values": Field(_checked_with_the_record, type="hexstring", since=5),
}

#: ``provenance.providers[role]``: a registry name the file uses (:data:`gpac_utils.certificate.NAMED`) and
#: the distribution that provided it (:meth:`gpac_utils.registry.Registry.provider`).
PROVIDER_RECORD: dict[str, Field] = {
    # the name (as the field that uses it holds it)
    "name": Field(_text, type="text", since=5),
    # gpac-utils (built in), a plugin's, or null (code of none)
    "distribution": Field(_nullable(_text), type="text", since=5),
    "version": Field(_nullable(_text), type="text", since=5, verify=DESCRIPTIVE),
}

#: The fields of ``provenance``.
PROVENANCE: dict[str, Field] = {
    # the table file: path, sha256 (null: none)
    "table": Field(_nullable(_record), since=3, fields=TABLE_RECORD),
    # role -> the column used: name, dtype, sha256
    "columns": Field(_record, since=3, each=Field(_record, since=3, fields=COLUMN_RECORD)),
    "package": _choice("gpac-utils", required=False),
    "package_version": Field(_text, type="text", since=3, verify=DESCRIPTIVE),
    # the named recipe the settings started from
    "recipe": Field(_nullable(_recipe_name), type="recipe", since=3),
    # the recipe's fields the settings changed from the named recipe's (null: no named recipe)
    "recipe_overrides": Field(_nullable(_overrides), required=False, type="overrides", since=5),
    "seed": replace(_from_declaration(RNG_SEED), since=3, verify=CHECKED),
    # creation time, UTC
    "created": Field(_timestamp, type="timestamp", since=3, verify=DESCRIPTIVE),
    "score_model": Field(_record, required=False, since=4, fields=SCORE_MODEL_RECORD),
    "item_ids": Field(_record, required=False, since=5, fields=ITEM_IDS_RECORD),
    # role -> a registry name used
    "providers": Field(_record, required=False, since=5, each=Field(_record, fields=PROVIDER_RECORD)),
    # absent: an offline calibration; 'sequential': gpac plan --sequential's e-processes (not recomputed)
    "mode": _choice("sequential", required=False, since=5),
    # the sequential run's settings: bet, batch_size, grid_size, alpha_per_group, budget, seed, stopped
    "sequential": Field(_record, required=False, since=5),
}

#: C-PAC's ``partition`` (the C-PAC entry's ``json_fields``: a C-PAC file holds it, no other).
PARTITION = Field(
    _partition,
    fields={
        "algorithm": _named(partition.PARTITION_ALGORITHMS),
        # the learned boundaries, ascending
        "boundaries": Field(lambda v, _: None, type="boundaries"),
    },
)

#: ``groupings``, a field of the calibrators of a collection of groups (their entries' ``json_fields``): the
#: grouping columns, in order (a cell joins one ``grouping=label`` of each); ``[]``: one label array (the groups
#: are its labels); ``null``: a membership matrix. Optional: their files before it record none (one label array).
GROUPING_NAMES = Field(_groupings, required=False, type="groupings", since=5)

#: The top-level fields every file may hold (a calibrator's own: its entry's ``json_fields``).
_FIELDS: dict[str, Field] = {
    # the schema version (missing: 1)
    "schema_version": Field(_version, required=False, type="version", choices=lambda: READS),
    # a name of the calibrator registry (PAC, G-PAC, C-PAC)
    "method": Field(lambda v, _: None, type="method", verify=STATED),
    "settings": Field(_record, fields=SETTINGS),
    # group -> threshold in [0, 1], null: always think
    "thresholds": Field(_thresholds, each=Field(_threshold, type="threshold")),
    # group -> calibration items
    "group_sizes": Field(_group_sizes, required=False, each=Field(_int_at_least(0), type="int")),
    # gpac calibrate: the table's columns
    "columns": Field(_columns, required=False, each=Field(_nullable(_text), type="column")),
    # the score's registry name (null: the column holds no registered score)
    "score": Field(
        _nullable(_one_of(SCORES)), required=False, type="score", choices=lambda: SCORES, since=4, verify=STATED
    ),
    # gpac calibrate: the table it read
    "data": Field(_text, required=False, type="path"),
    # gpac calibrate: the table's rows
    "n_items": Field(_int_at_least(1), required=False, type="int"),
    "schema": _choice("gpac-thresholds", required=False, since=3),
    "provenance": Field(_record, required=False, since=3, fields=PROVENANCE),
    # the certificate's per-group review: n, labelled, status, threshold, ucb
    "groups": Field(
        lambda v, _: None if isinstance(v, dict) else "must be an object of group -> entry",
        required=False,
        since=3,
        each=Field(_record, since=3, fields=GROUP_ENTRY),
    ),
}


#: The top-level fields, every registered calibrator's (:func:`method_fields`: one file's).
FIELDS: Mapping[str, Field] = Derived(lambda: _every(0))


def declared(path) -> Field | None:
    """The declaration of the field at ``path`` (a sequence of keys: ``("settings", "eps")``,
    ``("groups", "algebra", "n")``, ``("provenance", "columns", "score", "sha256")``); None: undeclared.

    Examples
    --------
    >>> import gpac_utils.calibrate  # registers the calibrators, whose declarations hold the settings' fields
    >>> declared(("provenance", "columns", "score", "sha256")).type
    'sha256'
    >>> declared(("settings", "eps")).verify, declared(("provenance", "created")).verify
    ('stated', 'descriptive')
    >>> declared(("settings", "nope")) is None
    True
    """
    keys = list(path)
    f = FIELDS.get(keys[0]) if keys else None
    for key in keys[1:]:
        if f is None:
            return None
        f = f.fields.get(key) if f.fields is not None else f.each
    return f


def _path(prefix: str, name: str) -> str:
    return f"{prefix}[{name!r}]" if prefix else name


def check_record(record, table: Mapping[str, Field], prefix: str, root: dict, method: str | None = None) -> None:
    """Check a record of the certificate (the provenance and its records, a group's entry) against its
    declarations ``table``: no undeclared field, every required one, each value's check; records within
    it in depth.

    With ``method``, ``record`` is the file (``root``) or its settings, checked against the declarations of a
    ``method`` file, not in depth: a field of another calibrator's file is named as such.

    Raises
    ------
    ThresholdsFileError
        Naming the field by its path (``provenance['columns']['score']['sha256']: ...``).
    """
    if not isinstance(record, dict):
        raise ThresholdsFileError(f"{prefix}: must be an object")
    every = (FIELDS if record is root else SETTINGS) if method else {}
    for name in record:
        if name not in table and not (name == "_kind" and record is root):  # _kind: set by validate_file
            whose = f"a {method} file" if name in every else "the schema"
            version = f"schema version {SCHEMA_VERSION}" if method else f"version {SCHEMA_VERSION}"
            raise ThresholdsFileError(f"{_path(prefix, name)}: not a field of {whose} ({version})")
    for name, f in table.items():
        if name not in record:
            if f.required:
                needs = f" (a {method} file needs it)" if method else ""
                raise ThresholdsFileError(f"{_path(prefix, name)}: missing{needs}")
            continue
        value = record[name]
        problem = f.check(value, root)
        if problem:
            raise ThresholdsFileError(f"{_path(prefix, name)}{'' if problem.startswith('[') else ': '}{problem}")
        if value is None or method:
            continue
        if f.fields is not None:
            check_record(value, f.fields, _path(prefix, name), root)
        elif f.each is not None:
            for key, item in value.items():
                if f.each.fields is not None:
                    check_record(item, f.each.fields, f"{_path(prefix, name)}[{key!r}]", root)


def validate_file(payload, methods: Mapping) -> dict:
    """Check a parsed thresholds file against the schema; return it with ``schema_version`` filled in.

    Parameters
    ----------
    payload : object
        The parsed JSON.
    methods : mapping
        The calibrator registry (:data:`gpac_utils.settings.CALIBRATORS`): method name -> entry
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
    st = payload.get("settings", {})
    if not isinstance(st, dict):
        raise ThresholdsFileError("settings: must be an object")
    if "pi" in st:
        payload["settings"] = {("label_prob" if k == "pi" else k): v for k, v in st.items()}
    problem = _version(payload["schema_version"], payload) if "schema_version" in payload else None
    if problem:  # the version first, then what the other checks read
        raise ThresholdsFileError(f"schema_version: {problem}")
    top, settings = method_fields(methods[method])
    check_record(payload, top, "", payload, method)
    check_record(payload["settings"], settings, "settings", payload, method)
    for g, t in payload["thresholds"].items():
        if not isinstance(g, str) or not g.strip():
            raise ThresholdsFileError(f"thresholds[{g!r}]: group names must be non-empty strings")
        if _threshold(t, payload):
            raise ThresholdsFileError(
                f"thresholds[{g!r}]: must be a number in [0, 1] or null (always think), got {t!r}"
            )
    st = payload["settings"]
    try:  # the fields of the recipe together (e.g. sampling 'full' with a label_prob of 0.5)
        Recipe(st["bound"], st["sampling"], st["label_prob"], st["rule"], st["candidates"])
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise ThresholdsFileError(f"settings[{field!r}]: {message}") from None
    if isinstance(payload.get("provenance"), dict):  # the certificate's records, in depth
        check_record(payload["provenance"], PROVENANCE, "provenance", payload)
    payload.setdefault("schema_version", 1)
    del payload["_kind"]
    return payload
