"""Registries: a name maps to an entry that knows what it is (like scikit-learn's ``get_scorer``).

Every extension point of the compendium is a :class:`Registry` of frozen dataclass entries (the
list, generated from the package, is in ``docs/extending.md``: bounds, scores, generation roles,
calibrators, corrections, risks, the online router's labelling modes and drift scopes, benchmarks
and graders). An entry owns everything keyed by its name: code asks it for its properties
(``BOUNDS["wsr"].sequential``); it never compares names to decide behaviour, and no side table is
keyed by them.

A registry reads like a dict of name to entry (in registration order). :meth:`Registry.register`
adds an entry, :meth:`Registry.unregister` removes it, and :meth:`Registry.registered` does both
around a ``with`` block (what tests and the worked examples of ``docs/extending.md`` use, so that
nothing leaks). An unknown name is a one-line :class:`UnknownName` (a ``ValueError`` and a
``KeyError``) that lists the known names.

**Plugins.** An installed distribution extends every registry through the entry-point group
:data:`PLUGINS` (``gpac_utils.plugins``): each entry point names a module (or a callable, which is
called) that registers its entries when loaded. :func:`load_plugins` loads them all, once per
process, the first time a registry is listed or misses a name, so that a plain ``gpac`` process,
``CertifiedRouter`` and ``gpac verify`` know the installed extensions. A plugin that fails to load is
one warning line (logger ``gpac_utils.registry``) naming its entry point and distribution, and is
skipped. :meth:`Registry.provider` says which distribution registered a name (what a certificate
records, ``provenance.providers``), by the top-level package of the module that registered it:
:data:`PACKAGE` for the built-in entries, a plugin's distribution for its package's, and none for
an entry registered by code of no installed plugin (a notebook, a test).

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Colour:
...     name: str
...     warm: bool
>>> COLOURS = Registry("colour", [Colour("red", True), Colour("blue", False)])
>>> COLOURS["red"].warm
True
>>> COLOURS["green"]
Traceback (most recent call last):
...
gpac_utils.registry.UnknownName: colour: unknown 'green'; choose one of ['red', 'blue']
>>> with COLOURS.registered(Colour("amber", True)):
...     list(COLOURS)
['red', 'blue', 'amber']
>>> list(COLOURS)
['red', 'blue']
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from importlib import metadata
from typing import Generic, TypeVar

from .checks import ParameterError

__all__ = ["PACKAGE", "PLUGINS", "Registry", "UnknownName", "load_plugins", "package_version", "removed"]

E = TypeVar("E")
#: The entry-point group of plugins: each entry point names a module (or callable) that registers entries.
PLUGINS = "gpac_utils.plugins"
#: The distribution of the package itself: the provider of the built-in entries.
PACKAGE = "gpac-utils"
logger = logging.getLogger(__name__)
_plugins: dict[str, tuple[str, str]] | None = None  # a plugin's top-level module -> (distribution, version)


@functools.cache
def package_version() -> str:
    """The version of :data:`PACKAGE` (installed, else the source's ``__version__``; read once per process)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
        return importlib.import_module(__package__).__version__


def load_plugins() -> dict[str, tuple[str, str]]:
    """Load every installed plugin (entry-point group :data:`PLUGINS`) once per process.

    Not while the package's own modules are being imported (a registry listed by a module's code, at
    import, lists the built-in entries): a plugin imports them.

    Returns
    -------
    dict
        Each plugin's top-level module -> its distribution and version (a plugin that failed to
        load is one warning line, naming it, and is skipped).
    """
    global _plugins
    frame = sys._getframe(1)
    while _plugins is None and frame is not None:  # the package's import on the stack: later
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__", "").partition(".")[0] == __package__:
            return {}
        frame = frame.f_back
    if _plugins is None:
        _plugins = {}
        for ep in metadata.entry_points(group=PLUGINS):
            dist = _plugins[ep.module.partition(".")[0]] = (ep.dist.name, ep.dist.version)
            try:
                loaded = ep.load()
                if callable(loaded):
                    loaded()
            except Exception as exc:  # noqa: BLE001 (a broken plugin is skipped, not the package broken)
                why = f"{type(exc).__name__}: {str(exc).partition(chr(10))[0]}"
                where = f"{ep.name} = {ep.value} ({' '.join(dist)}, entry-point group {PLUGINS})"
                logger.warning(f"warning: plugin {where} not loaded: {why}")
    return _plugins


class UnknownName(ParameterError, KeyError):
    """A name that is not in a registry (one line: what was asked and what is known)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Mapping[str, E], Generic[E]):
    """Named entries, in registration order; each entry has a ``name`` attribute.

    Parameters
    ----------
    what : str
        What the entries are (the start of an error message: ``"bound"``, ``"score"``, ...).
    entries : iterable of entries, optional
        The built-in entries.
    key : str, default "name"
        The entry attribute that names it.

    Attributes
    ----------
    module : str
        The module that created it (where the docs' generated list of registries names it).
    """

    def __init__(self, what: str, entries: Iterable[E] = (), key: str = "name"):
        self.what, self._key, self._entries, self._providers = what, key, {}, {}
        self.module = sys._getframe(1).f_globals.get("__name__", "")
        for entry in entries:
            self.register(entry)

    def _loaded(self) -> dict:
        """The entries, the installed plugins' included (the first call loads them)."""
        load_plugins()
        return self._entries

    # -- Mapping -------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> E:
        return self._entries[self.check(name)]

    def __contains__(self, name) -> bool:
        try:
            return name in self._entries or name in self._loaded()
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._loaded()))

    def __len__(self) -> int:
        return len(self._loaded())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._entries)})"

    def names(self, **properties) -> list[str]:
        """The names whose entries have every given property value, e.g. ``BOUNDS.names(valid=True)``."""
        return [n for n, e in self._loaded().items() if all(getattr(e, k) == v for k, v in properties.items())]

    def check(self, name, argument: str | None = None) -> str:
        """``name`` if it is registered; otherwise an :class:`UnknownName` naming ``argument``."""
        if name not in self:
            what = argument or self.what
            raise UnknownName(f"{what}: unknown {name!r}; choose one of {list(self._entries)}")
        return name

    # -- changing it ---------------------------------------------------------------------------
    def register(self, entry: E, *, replace: bool = False) -> E:
        """Add ``entry`` under its name; a name already taken is refused unless ``replace``."""
        name = getattr(entry, self._key)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.what}: an entry needs a non-empty str {self._key}, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(f"{self.what}: {name!r} is already registered (pass replace=True to replace it)")
        self._entries[name] = entry
        caller = sys._getframe(1)
        while caller.f_globals.get("__name__") in (__name__, "contextlib"):
            caller = caller.f_back
        self._providers[name] = caller.f_globals.get("__name__", "")  # the module that registered it
        return entry

    def unregister(self, name: str) -> E:
        """Remove and return the entry called ``name``."""
        return self._entries.pop(self.check(name))

    def provider(self, name: str) -> tuple[str | None, str | None]:
        """The distribution and version that registered ``name`` (module description); ``(None, None)``
        for an entry registered by code of no installed distribution.

        Examples
        --------
        >>> from gpac_utils.bounds import BOUNDS
        >>> BOUNDS.provider("wsr") == (PACKAGE, package_version())
        True
        """
        top = self._providers[self.check(name)].partition(".")[0]
        return (PACKAGE, package_version()) if top == __package__ else load_plugins().get(top, (None, None))

    @contextlib.contextmanager
    def registered(self, *entries: E) -> Iterator[tuple[E, ...]]:
        """Register ``entries`` for the ``with`` block only (the registry is restored afterwards)."""
        before = dict(self._loaded())
        try:
            yield tuple(self.register(e) for e in entries)
        finally:
            self._entries.clear()
            self._entries.update(before)


def removed(module: str, moved: Mapping[str, str]):
    """A module ``__getattr__`` for removed names: a one-line ``AttributeError`` saying what replaces each.

    Parameters
    ----------
    module : str
        The module's ``__name__``.
    moved : mapping of str to str
        Removed name to what to use instead.

    Examples
    --------
    >>> getattr_ = removed("m", {"OLD": "m.NEW"})
    >>> getattr_("OLD")
    Traceback (most recent call last):
    ...
    AttributeError: m.OLD was removed; use m.NEW
    """

    def __getattr__(name: str):
        if name in moved:
            raise AttributeError(f"{module}.{name} was removed; use {moved[name]}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
