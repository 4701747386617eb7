"""One configuration source per notebook: ``notebooks/config/<notebook>.yaml``.

Each file holds the notebook's settings under ``common`` and, per profile (``fast`` for tests
and CI, ``paper`` for the paper's settings), the values that differ::

    # notebooks/config/21_table_known_groups.yaml
    common:
      pairs: [qwen, llama]
      alpha: 0.05
    profiles:
      fast: {n_trials: 5}
      paper: {n_trials: 100}

The notebook's ``parameters`` cell holds the profile, a few literal overrides and an
``overrides`` dict for any other key; the notebook then builds one :class:`Config`::

    cfg = config.load("21_table_known_groups", profile, n_trials=n_trials, **overrides)

Overrides that are ``None`` are ignored, so a parameter left at ``None`` keeps the profile's
value; a key that the file does not define is refused with the list of known keys. Loading a
configuration also records its profile for :func:`gpac_utils.workflow.paths.figures_dir`, so a
notebook run on any profile but ``paper`` writes under ``build/<profile>/`` whatever command ran it.

A class chooses the profile of every notebook in one place: the environment variable
``GPAC_PROFILE`` (:data:`PROFILE_ENV`), when set, is the profile :func:`load` uses whatever the
parameters cell says (``GPAC_PROFILE=fast .venv/bin/jupyter lab``). The runner sets it to the
profile it runs, so ``make reproduce`` and the tests are never changed by a value left in a shell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .paths import NOTEBOOKS, set_profile

PROFILES = ("fast", "paper")
CONFIG_DIR = NOTEBOOKS / "config"
#: The environment variable that, when set, decides the profile of every :func:`load`.
PROFILE_ENV = "GPAC_PROFILE"
#: Set (non-empty) by whatever executes notebooks in a batch (the runner, the lesson tier): see :func:`in_batch`.
BATCH_ENV = "GPAC_BATCH"


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key."""


class Config(dict):
    """A notebook's settings: a dict with attribute access (``cfg.n_trials`` or ``cfg["n_trials"]``).

    Attributes
    ----------
    name : str
        The notebook (config file stem).
    profile : str
        The profile the values came from.
    """

    name: str = ""
    profile: str = ""

    def __init__(self, values: Mapping[str, Any], name: str = "", profile: str = ""):
        super().__init__(values)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "profile", profile)

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"config {self.name!r} has no setting {key!r}; it has {sorted(self)}") from None

    def __setattr__(self, key, value):
        raise AttributeError("set a Config's values through config.load's overrides")

    def pick(self, *keys: str) -> dict[str, Any]:
        """The named settings as keyword arguments (``f(**cfg.pick("alpha", "seed"))``); an unknown key is refused.

        Examples
        --------
        >>> Config({"alpha": 0.05, "seed": 0, "n_trials": 5}, "demo").pick("alpha", "seed")
        {'alpha': 0.05, 'seed': 0}
        """
        _check_keys(self.name, self, dict.fromkeys(keys))
        return {key: self[key] for key in keys}

    def __repr__(self) -> str:
        body = yaml.safe_dump(dict(self), sort_keys=False, default_flow_style=None, width=100).rstrip()
        return f"# {self.name} — profile {self.profile!r}\n{body}"


def _check_keys(name: str, known: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    unknown = [k for k in given if k not in known]
    if unknown:
        raise ConfigError(f"{name}: unknown setting(s) {unknown}; known settings are {sorted(known)}")


def read_config(notebook: str, folder: Path | None = None) -> dict[str, Any]:
    """The raw ``{"common": ..., "profiles": {...}}`` content of a notebook's config file."""
    path = (folder or CONFIG_DIR) / f"{Path(notebook).stem}.yaml"
    if not path.exists():
        raise ConfigError(f"{notebook}: no configuration file at {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict) or set(raw) - {"common", "profiles"}:
        raise ConfigError(f"{path}: top-level keys must be 'common' and 'profiles', got {sorted(raw)}")
    common = raw.get("common") or {}
    profiles = raw.get("profiles") or {}
    missing = [p for p in PROFILES if p not in profiles]
    if missing:
        raise ConfigError(f"{path}: profile(s) {missing} missing (every notebook has {list(PROFILES)})")
    for prof, values in profiles.items():
        _check_keys(f"{path} profile {prof!r}", common, values or {})
    return {"common": common, "profiles": profiles}


def load(notebook: str, profile: str = "paper", folder: Path | None = None, **overrides: Any) -> Config:
    """The configuration of ``notebook`` on ``profile``, with the non-``None`` overrides applied.

    Parameters
    ----------
    notebook : str
        Notebook stem, e.g. ``"21_table_known_groups"``.
    profile : str, default "paper"
        A profile of the file (``fast`` or ``paper``); the environment variable ``GPAC_PROFILE``,
        when set and not empty, takes its place.
    folder : Path, optional
        Where the config files live (default ``notebooks/config``).
    **overrides
        New values for existing keys; ``None`` keeps the profile's value.

    Returns
    -------
    Config
    """
    raw = read_config(notebook, folder)
    chosen = os.environ.get(PROFILE_ENV, "").strip()
    if chosen:
        if chosen not in raw["profiles"]:
            raise ConfigError(f"{PROFILE_ENV}: unknown profile {chosen!r}; choose one of {sorted(raw['profiles'])}")
        profile = chosen
    if profile not in raw["profiles"]:
        raise ConfigError(f"profile: unknown {profile!r} for {notebook}; choose one of {sorted(raw['profiles'])}")
    values = {**raw["common"], **(raw["profiles"][profile] or {})}
    given = {k: v for k, v in overrides.items() if v is not None}
    _check_keys(notebook, values, given)
    values.update(given)
    set_profile(profile)  # outputs of any profile but paper go under build/<profile>/
    return Config(values, Path(notebook).stem, profile)


def in_batch() -> bool:
    """Whether this kernel runs in a batch (papermill, nbclient: ``$GPAC_BATCH`` set), not in a front-end.

    Notebooks build their ipywidgets controls only outside a batch. A batch has no front-end to draw
    them, and creating them there can stall the executor until its cell timeout (jupyter/nbclient#312,
    jupyter/nbconvert#1921); the notebook's static view of the same function stands in for them.
    """
    return bool(os.environ.get(BATCH_ENV, "").strip())
