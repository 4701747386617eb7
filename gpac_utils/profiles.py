"""Run profiles: named presets (``fast`` for tests and CI, ``paper`` for the paper's settings).

Each notebook has a ``profile`` parameter and explicit parameters defaulting to ``None``;
:func:`resolve` fills every ``None`` from the module-level presets of the code the notebook
serves, so explicit papermill parameters always win::

    cfg = profiles.resolve(profile, theory.AUDIT_PRESETS, calibrations=calibrations)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROFILES = ("fast", "paper")


def resolve(profile: str, presets: Mapping[str, Mapping[str, Any]], **explicit: Any) -> dict[str, Any]:
    """Merge ``presets[profile]`` with the explicit (non-``None``) values."""
    if profile not in presets:
        raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(presets)}")
    out = dict(presets[profile])
    unknown = [k for k in explicit if k not in out]
    if unknown:
        raise ValueError(f"parameter(s) {unknown} have no preset in profile {profile!r}")
    out.update({k: v for k, v in explicit.items() if v is not None})
    return out
