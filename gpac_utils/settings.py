r"""The calibrator settings, each declared once by the entry that reads it: :class:`Setting`, :class:`Settings`.

A :class:`Setting` is a setting's one declaration (scikit-learn's ``validate_params`` is the model):
its name, default, constraint (an :class:`Interval`, :class:`Options` or a checking function) and
what it means. The settings every calibrator reads are declared here (:data:`COMMON`); a
calibrator class declares the ones it reads in its own module (``SETTINGS``: C-PAC's ``mode``,
``partitioner`` and ``cluster_fraction`` in :mod:`gpac_utils.calibrate`; a plugin's in its own). From
the registered calibrators (:func:`declarations`) come :class:`Settings`' checks, the options of
``gpac calibrate`` and ``gpac plan`` (with their "only --method X reads it" refusals), the
certificate schema's ``settings`` (:mod:`gpac_utils.thresholds_schema`) and the JSON form
(:meth:`Settings.to_dict`, :meth:`Settings.from_dict`).

PAC, G-PAC and C-PAC (:mod:`gpac_utils.calibrate`), :func:`~gpac_utils.calibrate.calibrator`, the
experiment runner (:class:`~gpac_utils.experiment.ExperimentConfig` extends :class:`Settings`), the
table builder and ``gpac calibrate`` all read their settings from one :class:`Settings`; a
setting a calibrator declares beyond :data:`COMMON` is a keyword of :class:`Settings` too (held in
``Settings.options``, read as an attribute).

How ``alpha`` is shared across the ``k`` groups is a named mode of the registry
:data:`CORRECTIONS` (``"none"``: each group at ``alpha``, the guarantee holds for each group
separately; ``"bonferroni"``: each at ``alpha / k``, for all groups at once); a third one is one
entry. It replaces the boolean ``simultaneous`` (``simultaneous=True`` is
``correction="bonferroni"``), which is refused with a one-line error naming the new setting.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from inspect import Parameter, signature
from typing import Any

from .checks import ParameterError, check_choice, check_int, check_range, warn_risk
from .recipe import VALID, Recipe, check_recipe
from .registry import Registry
from .risks import RISKS, check_risk_recipe

__all__ = [
    "Interval",
    "Options",
    "Setting",
    "REQUIRED",
    "COMMON",
    "EPS",
    "ALPHA",
    "RECIPE",
    "LOSS_BOUND",
    "MIN_GROUP_SIZE",
    "RNG_SEED",
    "RISK",
    "CORRECTION",
    "refusing",
    "declarations",
    "check_risk",
    "settings_init",
    "takes_settings",
    "GROUPINGS",
    "Method",
    "CALIBRATORS",
    "Correction",
    "CORRECTIONS",
    "Settings",
    "RENAMED",
    "RENAMED_UNTIL",
]

#: The default of a setting that has none (it must be given).
REQUIRED = dataclasses.MISSING


@dataclass(frozen=True)
class Interval:
    """A number in an interval: ``type`` ``int`` (``[left, inf)``) or ``float`` (``(left, right)``); ``right``
    may name another setting (``eps``: ``"loss_bound"``) or be ``None`` (unbounded)."""

    type: type
    left: float
    right: float | str | None = None

    def check(self, name: str, value, values: Mapping | None = None, strict: bool = False):
        """``value`` checked (a one-line :class:`ParameterError` naming ``name``); ``strict``: a JSON value (an
        int must be one, not ``3.0``)."""
        if self.type is int:
            if strict and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise ParameterError(f"{name}: must be an integer >= {self.left}, got {value!r}")
            return check_int(name, value, self.left)
        hi = (values or {}).get(self.right, 1.0) if isinstance(self.right, str) else self.right
        hi = float("inf") if hi is None or isinstance(hi, bool) or not isinstance(hi, numbers.Real) else hi
        return check_range(name, value, float(self.left), float(hi))

    @property
    def kind(self) -> str:
        """What a value looks like (the schema's ``type``): ``int``, ``fraction`` or ``positive``."""
        return "int" if self.type is int else ("fraction" if self.right is not None else "positive")


@dataclass(frozen=True)
class Options:
    """One of a set of options: a tuple, or a :class:`~gpac_utils.registry.Registry` (its names when checked)."""

    options: tuple | Registry

    def check(self, name: str, value, values=None, strict: bool = False):
        """``value`` if it is one of the options (a one-line :class:`ParameterError` naming ``name``)."""
        if isinstance(self.options, Registry):
            return self.options.check(value, name)
        return check_choice(name, value, self.options)

    kind = property(lambda self: "name" if isinstance(self.options, Registry) else "choice")


@dataclass(frozen=True)
class Setting:
    """One setting, declared once, by the entry that reads it.

    Parameters
    ----------
    name : str
        Its keyword (``Settings(name=...)``, the calibrator's parameter, ``--name`` on the command line).
    default : object
        Its default (:data:`REQUIRED`: none, it must be given).
    constraint : Interval, Options or callable
        What a value may be (a callable: ``constraint(value)`` returns it checked, e.g. a recipe).
    doc : str or callable
        What it means (the option's help, the schema's description); a callable: read when needed (a
        registry's entries listed as they are then).
    parts : tuple of Setting, default ()
        A compound setting's JSON (and command-line) form, one declaration each: C-PAC's
        ``partitioner`` is ``k`` and ``partition``; ``join(**parts)`` builds the value and ``split(value)``
        gives the parts.
    join, split : callable, optional
        For ``parts`` (``split`` alone: the recipe, whose fields the schema declares).
    required : bool, default True
        Whether every file of a calibrator that reads it holds it (False: older files lack it).
    option : bool, default True
        Whether ``gpac calibrate`` has an option for it (the recipe's are its own: ``--recipe``, ``--bound``, ...).
    """

    name: str
    default: Any
    constraint: Interval | Options | Callable
    doc: str | Callable[[], str]
    parts: tuple = ()
    join: Callable | None = None
    split: Callable | None = None
    required: bool = True
    option: bool = True

    def check(self, value, values: Mapping | None = None, strict: bool = False):
        """The checked value (``values``: the other settings, for an interval that ends at one of them)."""
        c = self.constraint
        return c.check(self.name, value, values, strict) if isinstance(c, Interval | Options) else c(value)

    @property
    def help(self) -> str:
        """:attr:`doc`, as text."""
        return self.doc() if callable(self.doc) else self.doc

    def to_json(self, value) -> dict:
        """Its JSON form: ``{name: value}``, or its parts'."""
        return self.split(value) if self.split else {self.name: value}

    def flat(self) -> tuple:
        """The declarations of its JSON fields: its parts, or itself."""
        return self.parts or (self,)


def _listing(intro: str, registry: Registry, what: str) -> Callable[[], str]:
    """A setting's doc read when needed: ``intro``, then each entry of ``registry`` with its ``what``."""
    return lambda: intro + "; ".join(f"{e.name}: {getattr(e, what)}" for e in registry.values())


#: The settings every calibrator reads, declared once (a calibrator's ``SETTINGS`` starts with them).
EPS = Setting("eps", REQUIRED, Interval(float, 0, "loss_bound"), "target risk, in (0, loss-bound)")
ALPHA = Setting(
    "alpha",
    0.05,
    Interval(float, 0, 1),
    "for a valid recipe, the guarantee holds with probability at least 1 - alpha over the calibration data, per "
    "group (for all groups jointly only with --correction bonferroni)",
)
RECIPE = Setting(
    "recipe", VALID, check_recipe, "how a group's threshold is certified", split=Recipe.to_dict, option=False
)
LOSS_BOUND = Setting("loss_bound", 1.0, Interval(float, 0, None), "upper end of the loss range (2 for 1 - cos)")
MIN_GROUP_SIZE = Setting("min_group_size", 10, Interval(int, 1), "smaller groups always think")
RNG_SEED = Setting(
    "seed",
    0,
    Interval(int, 0),
    "seed of the label sampling (and C-PAC's split, the pilot); no effect with sampling=full G-PAC",
)
RISK = Setting(
    "risk",
    "joint",
    Options(RISKS),
    _listing("what is certified per group, each expectation given the group: ", RISKS, "summary"),
    required=False,
)


@dataclass(frozen=True)
class Correction:
    """How the miscoverage ``alpha`` is shared across the ``k`` calibrated groups.

    Parameters
    ----------
    name : str
        Its name (``Settings(correction=name)``, ``--correction name``).
    per_group : callable
        ``per_group(alpha, k)``: the level each group is calibrated at.
    guarantee : str
        What the guarantee then covers, in words.
    """

    name: str
    per_group: Callable[[float, int], float]
    guarantee: str


#: The ways of sharing ``alpha`` across groups.
CORRECTIONS: Registry[Correction] = Registry(
    "correction",
    [
        Correction("none", lambda alpha, k: alpha, "each group separately"),
        Correction("bonferroni", lambda alpha, k: alpha / k, "all groups at once (Bonferroni)"),
    ],
)

#: How ``alpha`` is shared across groups: read by the calibrators of several groups (G-PAC, C-PAC).
CORRECTION = Setting(
    "correction",
    "none",
    Options(CORRECTIONS),
    _listing("how alpha is shared across the k groups: ", CORRECTIONS, "guarantee"),
    required=False,
)


def check_risk(eps, alpha, loss_bound=LOSS_BOUND.default) -> tuple[float, float, float]:
    """The settings of every guarantee, by their declarations: ``loss_bound > 0``, ``0 < eps < loss_bound``,
    ``0 < alpha < 1`` (at ``eps >= loss_bound`` every item could be routed unchecked).

    Returns
    -------
    tuple of float
        ``(eps, alpha, loss_bound)`` as floats.

    Raises
    ------
    ParameterError
        Naming the first of ``loss_bound``, ``eps``, ``alpha`` that is out of its range.
    """
    loss_bound = LOSS_BOUND.check(loss_bound)
    return EPS.check(eps, {"loss_bound": loss_bound}), ALPHA.check(alpha), loss_bound


#: What every calibrator reads, in its parameters' order.
COMMON = (EPS, ALPHA, RECIPE, LOSS_BOUND, MIN_GROUP_SIZE, RNG_SEED, RISK)
#: :class:`Settings`' fields: the common settings and the correction (read by the core of every calibrator).
_FIELDS = {s.name: s for s in (*COMMON, CORRECTION)}


#: What a calibrator routes by (:attr:`Method.groups`): one group, the caller's known groups (one grouping: a
#: partition), a collection of the caller's groups that may overlap (several groupings), or groups it learns.
GROUPINGS = ("none", "known", "collection", "learned")


@dataclass(frozen=True)
class Method:
    """A calibrator: its class and how the rest of the package treats it.

    Parameters
    ----------
    name : str
        Its one name, in result tables and in the JSON ``method`` field (``"G-PAC"``): the class's
        ``name`` (a mismatch is refused).
    cls : type
        The class; ``cls.SETTINGS`` declares the settings it reads (:class:`~gpac_utils.settings.Setting`,
        the common ones first; its ``__init__`` takes them, the first three positional or keyword, the
        rest keyword-only, with their declared defaults: a drift is refused), ``cls.from_settings(settings)``
        builds an unfitted one, and ``_restore(payload)`` sets the fitted state of its JSON.
    groups : {"none", "known", "collection", "learned"}
        What it routes by: one group, the caller's known groups (``fit`` and ``route`` take
        ``groups``, one label per item: a partition), a collection of the caller's groups that may
        overlap (``fit`` and ``route`` take several label columns, a grouping each, or one label
        array: ``gpac calibrate --group-col a --group-col b``), or groups it learns (it has
        ``assign(scores)``).
    json_fields : mapping of str to thresholds_schema.Field, default {}
        Fields its JSON has beyond the schema's common ones (C-PAC: ``partition``), declared here: a
        thresholds file of this method without one is refused, and one of another method with it. A
        ``collection`` calibrator's include ``groupings`` (:data:`gpac_utils.multigroup.GROUPING_NAMES`;
        refused without).
    default : bool, default False
        The default calibrator of its kind of grouping (:func:`~gpac_utils.calibrate.default_method`: ``gpac calibrate``
        without ``--method``); registering another calibrator does not change a default.
    statuses : mapping of str to bool, default {}
        Group statuses of its own (:data:`~gpac_utils.calibrate.STATUSES`), each to whether a group with it
        has a threshold.
    """

    name: str
    cls: type
    groups: str
    json_fields: Mapping = field(default_factory=dict)
    default: bool = False
    statuses: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("groups", self.groups, GROUPINGS)
        if self.groups == "collection" and "groupings" not in self.json_fields:  # its calibrator's file records them
            raise ValueError(
                f"method {self.name!r}: a calibrator of a collection records its groupings; declare "
                "json_fields={'groupings': gpac_utils.multigroup.GROUPING_NAMES, ...}"
            )
        _same_parameters(self.name, self.cls)
        if getattr(self.cls, "name", self.name) != self.name:
            raise ValueError(
                f"method {self.name!r}: {self.cls.__name__}.name is {self.cls.name!r}; the entry's name must be the "
                "class's (its certificates read back as the class the name names)"
            )

    @property
    def needs_groups(self) -> bool:
        """Whether ``fit`` and ``route`` take the caller's group labels (``known`` or ``collection``)."""
        return self.groups in ("known", "collection")

    @property
    def cli_name(self) -> str:
        """Its ``gpac calibrate --method`` name: lower case without hyphens (``"gpac"``)."""
        return self.key(self.name)

    @staticmethod
    def key(name) -> str:
        """A method name as compared: ``"gpac"``, ``"G-PAC"`` and ``"g_pac"`` are one."""
        return str(name).strip().lower().replace("-", "").replace("_", "")


def _same_parameters(name: str, cls: type) -> None:
    """Refuse a calibrator whose ``__init__`` differs from the one its declared ``SETTINGS`` generate (names,
    order, defaults, keyword-only after the first three, no ``**options``): ``gpac calibrate``, ``run_experiment``
    and a certificate build it with ``from_settings``, from the declarations, so a default of its own would hold
    in Python only (a G-PAC-wsr that calibrates with Hoeffding-Bentkus), and a hidden setting would show nowhere."""
    shown = [inspect.signature(f).parameters.values() for f in (cls.__init__, settings_init(cls))]
    for got, want in itertools.zip_longest(*shown):
        if (got and (got.name, got.kind, got.default)) != (want and (want.name, want.kind, want.default)):
            raise ValueError(
                f"method {name!r}: {cls.__name__}.__init__ has {_shown(got)} where its declarations give "
                f"{_shown(want)}; gpac calibrate, run_experiment and certificates build it from them: give a setting "
                "where it is used (a named recipe: --recipe), not as a class default"
            )


def _shown(p) -> str:
    return "nothing" if p is None else f"{p} ({p.kind.description})"


def settings_init(cls):
    """``cls.__init__``, generated from its declarations (``cls.SETTINGS``), as dataclasses generate theirs: each
    setting an explicit parameter (``inspect.signature``, ``help()`` and tab completion show them), the first three
    positional or keyword, the rest keyword-only, with the declared defaults; it builds the
    :class:`~gpac_utils.settings.Settings` (checked once) and keeps it (``config``)."""
    names = [s.name for s in cls.SETTINGS]
    params = [n if s.default is REQUIRED else f"{n}=_default[{n!r}]" for n, s in zip(names, cls.SETTINGS)]
    params[3:3] = ["*"] if len(params) > 3 else []
    body = f"    self._setup(Settings({', '.join(f'{n}={n}' for n in names)}))"
    namespace = {"_default": {s.name: s.default for s in cls.SETTINGS}, "Settings": Settings}
    exec(f"def __init__(self, {', '.join(params)}):\n{body}\n", namespace)  # noqa: S102
    init = refusing(RENAMED)(namespace["__init__"])
    init.__qualname__, init.__doc__ = f"{cls.__qualname__}.__init__", "Its settings, as declared (SETTINGS)."
    return init


def takes_settings(declared):
    """A decorator: ``function(..., *, settings, ...)`` also takes each setting of ``declared`` as an explicit
    keyword-only parameter before ``settings`` (``inspect.signature``, ``help()`` and tab completion show them),
    with its declared default (``None`` for ``eps``); they build the :class:`Settings` when ``settings`` is not
    given, and beside it one away from its default is refused, naming it (``settings: given with [...]``)."""

    def wrap(function):
        params = [
            p.replace(default=None) if p.name == "settings" else p for p in signature(function).parameters.values()
        ]
        own = [Parameter(s.name, Parameter.KEYWORD_ONLY, default=None if s.default is REQUIRED else s.default)
               for s in declared]  # fmt: skip
        at = next((i for i, p in enumerate(params) if p.kind == p.KEYWORD_ONLY), len(params))
        params[at:at] = own
        text = [f"{p.name}=_d[{p.name!r}]" if p.default is not p.empty else p.name for p in params]
        text.insert(at, "*")
        code = f"def {function.__name__}({', '.join(text)}):\n    return _call(_f, _own, locals())\n"
        namespace = {"_d": {p.name: p.default for p in params}, "_own": {p.name: p.default for p in own}}
        namespace.update(_call=_call_with_settings, _f=function, __name__=function.__module__)
        exec(code, namespace)  # noqa: S102
        made = namespace[function.__name__]  # not functools.wraps: its __wrapped__ would show the old signature
        made.__qualname__, made.__doc__ = function.__qualname__, function.__doc__
        return made

    return wrap


def _call_with_settings(function, own: Mapping, arguments: dict):
    given = {k: arguments.pop(k) for k in own}
    if arguments["settings"] is None:
        arguments["settings"] = Settings(**given)
    elif changed := [k for k, v in given.items() if not (v is own[k] or (type(v) is type(own[k]) and v == own[k]))]:
        raise ParameterError(f"settings: given with {changed}; give them in settings (settings.replace(...))")
    return function(**arguments)


#: The calibrators by their one name (as in tables and JSON): the readers of the declared settings
#: (:func:`declarations`). :mod:`gpac_utils.calibrate` registers PAC, G-PAC and C-PAC.
CALIBRATORS: Registry[Method] = Registry("method")


def declarations() -> dict[str, Setting]:
    """Every setting a registered calibrator reads, by name: :data:`COMMON`, the correction, then each
    :data:`CALIBRATORS` entry's own (``cls.SETTINGS``), in registration order.

    Raises
    ------
    ValueError
        When two calibrators declare one name differently (one name, one declaration).
    """
    out = dict(_FIELDS)
    for entry in CALIBRATORS.values():
        for s in entry.cls.SETTINGS:
            if out.setdefault(s.name, s) != s:
                raise ValueError(
                    f"method {entry.name!r}: declares {s.name!r} again, differently; reuse its declaration"
                )
    return out


#: The gpac_utils version whose release removes the renamed-argument messages (the old names then are
#: unknown keywords); every message of :data:`RENAMED` (and of the online side's) states it.
RENAMED_UNTIL = "0.4"

#: Settings that were renamed: old keyword to the one-line message that names the new one.
RENAMED = {
    "simultaneous": "simultaneous: replaced by correction='bonferroni' (simultaneous=True) or correction='none'"
    f" (this message goes in gpac_utils {RENAMED_UNTIL})",
}


def refusing(renamed: Mapping[str, str]):
    """A decorator: the function (a calibrator's ``__init__``) refuses a keyword of ``renamed`` with its one-line
    TypeError (:data:`RENAMED`)."""

    def wrap(function):
        @functools.wraps(function)
        def refuse(*args, **kwargs):
            for old in kwargs.keys() & renamed.keys():
                raise TypeError(renamed[old])
            return function(*args, **kwargs)

        return refuse

    return wrap


def _refuse_renamed(cls):
    """Wrap the dataclass ``__init__`` of ``cls``: a renamed keyword is a one-line TypeError, and a setting a
    registered calibrator declares beyond :class:`Settings`' fields (:func:`declarations`) goes to ``options``."""
    init = cls.__init__
    fields = {f.name for f in dataclasses.fields(cls)}

    @functools.wraps(init)
    @refusing(RENAMED)
    def __init__(self, *args, **kwargs):
        own = [k for k in kwargs if k not in fields and k in declarations()]
        options = dict(kwargs.pop("options", ())) | {k: kwargs.pop(k) for k in own}
        init(self, *args, options=tuple(options.items()), **kwargs)

    cls.__init__ = __init__
    return cls


@_refuse_renamed
@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every setting of a calibrator (those a method does not use are ignored by it).

    Its fields are the settings every calibrator reads (:data:`COMMON`) and the correction; a
    calibrator declares the rest (C-PAC's ``partitioner``, ``mode``, ``cluster_fraction``; a plugin's
    own), which are keywords and attributes here too, checked by their declaration
    (:func:`declarations`).

    Parameters
    ----------
    eps : float
        Target risk: the extra error of routing to the non-thinking model, in ``(0, loss_bound)``.
    alpha : float, default 0.05
        The guarantee holds with probability at least ``1 - alpha``.
    recipe : Recipe or str, default ``"valid"``
        How a group's threshold is certified (:class:`~gpac_utils.recipe.Recipe`); ``"paper"``
        for the paper's literal setting.
    loss_bound : float, default 1.0
        Upper end of the loss range (2 for the semantic loss ``1 - cos``).
    min_group_size : int, default 10
        Groups with fewer calibration items always think.
    seed : int, default 0
        Seed of the label sampling (and of C-PAC's split).
    risk : str, default "joint"
        What is certified per group, a name in :data:`gpac_utils.risks.RISKS`: ``"joint"`` (the
        paper's ``E[loss 1{U <= u}]``) or ``"routed"`` (``E[loss | U <= u]``, among routed items).
    correction : str, default "none"
        How ``alpha`` is shared across groups, a name in :data:`CORRECTIONS`: ``"none"`` (each
        group at ``alpha``) or ``"bonferroni"`` (each of the ``k`` groups at ``alpha / k``).
    options : tuple of (str, object) pairs, default ()
        The settings declared by a calibrator, away from their defaults (given as keywords:
        ``Settings(eps=0.1, mode="joint")``; read as attributes: ``settings.mode``).

    Examples
    --------
    >>> s = Settings(eps=0.1, correction="bonferroni", mode="joint")
    >>> s.recipe.bound, s.alpha_per_group(4), s.mode, s.cluster_fraction
    ('hoeffding_bentkus', 0.0125, 'joint', 0.5)
    >>> Settings(eps=0.1, simultaneous=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: simultaneous: replaced by correction='bonferroni' (simultaneous=True) or ... (this message goes in ...)
    """

    eps: float
    alpha: float = ALPHA.default
    recipe: Recipe | str = RECIPE.default
    loss_bound: float = LOSS_BOUND.default
    min_group_size: int = MIN_GROUP_SIZE.default
    seed: int = RNG_SEED.default
    risk: str = RISK.default
    correction: str = CORRECTION.default
    options: tuple = ()

    def __post_init__(self) -> None:
        values = dict(zip(("eps", "alpha", "loss_bound"), check_risk(self.eps, self.alpha, self.loss_bound)))
        for s in _FIELDS.values():
            if s.name not in values:
                values[s.name] = s.check(getattr(self, s.name), values)
        warn_risk(values["eps"], values["alpha"], values["loss_bound"])
        check_risk_recipe(values["risk"], values["recipe"])
        every = declarations()
        for name, value in self.options:
            if name in _FIELDS or name not in every:
                raise TypeError(f"Settings: unknown setting {name!r}; the registered calibrators read {list(every)}")
            values[name] = every[name].check(value, values)
        own = tuple((k, values[k]) for k in every if k in dict(self.options) and values[k] != every[k].default)
        for name in _FIELDS:
            object.__setattr__(self, name, values[name])
        object.__setattr__(self, "options", own)

    def __getattr__(self, name: str):
        """A setting a calibrator declares (:func:`declarations`): its value, or its default."""
        setting = declarations().get(name) if not name.startswith("_") else None
        if setting is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return dict(self.__dict__.get("options", ())).get(name, setting.default)

    def alpha_per_group(self, k: int) -> float:
        """The level each of ``k`` groups is calibrated at (the :data:`CORRECTIONS` entry's)."""
        return CORRECTIONS[self.correction].per_group(self.alpha, k)

    def ignored(self, reads) -> list[str]:
        """The settings away from their defaults that a consumer reading only ``reads`` would ignore
        (it refuses them, naming the first)."""
        away = [n for n, s in _FIELDS.items() if s.default is not REQUIRED and getattr(self, n) != s.default]
        return [n for n in (*away, *dict(self.options)) if n not in reads]

    def replace(self, **changes) -> Settings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_settings(self, **changes) -> Settings:
        """The calibrator :class:`Settings` alone (of a subclass such as ``ExperimentConfig`` too); the same
        object when it is one and nothing changes (settings are checked once, when built)."""
        if type(self) is Settings and not changes:
            return self
        values = {name: getattr(self, name) for name in _FIELDS} | dict(self.options)
        return Settings(**(values | changes))

    def to_dict(self, keys) -> dict[str, Any]:
        """The JSON form of the settings ``keys`` (each declaration's: the recipe flattened into its fields,
        C-PAC's partitioner into ``k`` and ``partition``)."""
        every = declarations()
        return {k: v for key in keys for k, v in every[key].to_json(getattr(self, key)).items()}

    @classmethod
    def from_dict(cls, st) -> Settings:
        """The settings of :meth:`to_dict`'s JSON form (``pi`` and ``simultaneous`` of older files read too)."""
        st = dict(st)
        recipe = Recipe(st["bound"], st["sampling"], st.get("label_prob", st.get("pi")), st["rule"], st["candidates"])
        st.setdefault("correction", "bonferroni" if st.get("simultaneous") else "none")
        values = {"recipe": recipe}
        for s in declarations().values():
            if s.parts and all(p.name in st for p in s.parts):
                values[s.name] = s.join(**{p.name: st[p.name] for p in s.parts})
            elif not s.parts and s.name in st and s is not RECIPE:
                values[s.name] = st[s.name]
        return cls(**values)
