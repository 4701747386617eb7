r"""Calibrators: PAC (one threshold), G-PAC (known groups), C-PAC (groups learned from U).

All three route an item to the non-thinking model when its score is at most its group's
threshold. Calibration of one group (paper Algorithms 1–2):

1. draw expert-label terms with a sampling scheme (:mod:`gpac_utils.sampling`);
2. compute an upper confidence bound on ``R(u) = E[loss 1{U <= u}]`` at every candidate
   threshold (:mod:`gpac_utils.bounds`);
3. select the threshold (:mod:`gpac_utils.selection`), ``-inf`` when none is feasible.

Groups with fewer than ``min_group_size`` calibration items, and groups unseen at calibration,
route to the thinking model (threshold ``-inf``) with a :class:`GroupWarning`.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from . import bounds as _bounds
from . import sampling as _sampling
from . import selection as _selection
from .cluster import Partition, fit_partition

ALL = "__all__"  # the single group of marginal PAC
#: Candidate grid used by ``candidates="auto"``: every distinct score, except for the
#: sequential ``wsr`` bound, which uses this many score quantiles when there are more scores.
WSR_AUTO_GRID = 64


class GroupWarning(UserWarning):
    """A group is too small to calibrate, or was not seen at calibration: it always thinks."""


def resolve_candidates(candidates, bound: str, n: int):
    """The candidate setting actually used (``"auto"`` → ``"all"`` or the WSR grid size)."""
    if candidates == "auto":
        return WSR_AUTO_GRID if (bound == "wsr" and n > WSR_AUTO_GRID) else "all"
    return candidates


def threshold(loss, scores, *, eps: float, alpha: float, bound: str = "clt", sampling: str = "resample",
              pi=0.5, rule: str = "first-crossing", candidates="auto", loss_bound: float = 1.0,
              rng=None) -> np.ndarray:
    """Calibrate one group, or many independent calibrations at once (batch dims lead).

    ``loss`` and ``scores`` have shape ``(..., n)``; returns thresholds of shape ``(...)``.
    """
    loss = np.asarray(loss, dtype=float)
    scores = np.asarray(scores, dtype=float)
    rng = np.random.default_rng(rng)
    n = scores.shape[-1]
    # Only the sequential wsr bound depends on the order of the terms.
    d = _sampling.draw(loss, scores, sampling, pi, rng, loss_bound, shuffle=bound == "wsr")
    cand_setting = resolve_candidates(candidates, bound, n)
    if cand_setting == "all":
        cand = np.sort(scores, axis=-1)  # duplicates share a UCB, so selection is unaffected
    else:
        q = np.linspace(0, 1, int(cand_setting))
        cand = np.moveaxis(np.quantile(scores, q, axis=-1, method="inverted_cdf"), 0, -1)
    ucb = _bounds.ucb(bound, d.z, d.scores, cand, alpha, d.value_range)
    return _selection.select(cand, ucb, eps, rule)


def _factorize(labels):
    """Integer codes and the sorted distinct labels (hash-based: fast for millions of rows)."""
    codes, names = pd.factorize(np.asarray(labels), sort=True)
    return codes, np.asarray(names).astype(str)


def _as_arrays(scores, loss, loss_bound):
    s = np.asarray(scores, dtype=float)
    l = np.asarray(loss, dtype=float)
    if s.ndim != 1 or l.shape != s.shape:
        raise ValueError(f"scores and loss must be 1-D of equal length, got {s.shape} and {l.shape}")
    if s.size == 0:
        raise ValueError("empty calibration set")
    for name, v, lo, hi in (("score", s, 0.0, 1.0), ("loss", l, 0.0, loss_bound)):
        bad = ~np.isfinite(v) | (v < lo) | (v > hi)
        if bad.any():
            rows = np.flatnonzero(bad)[:5].tolist()
            raise ValueError(f"{name} values must lie in [{lo}, {hi}]; bad at rows {rows}")
    return s, l


class PAC:
    """Marginal PAC reasoning: one threshold for all inputs (Zeng et al. 2025)."""

    name = "PAC"

    def __init__(self, eps: float, alpha: float = 0.05, bound: str = "clt", sampling: str = "resample",
                 pi=0.5, rule: str = "first-crossing", candidates="auto", loss_bound: float = 1.0,
                 min_group_size: int = 10, seed: int = 0):
        if bound not in _bounds.BOUNDS:
            raise ValueError(f"unknown bound {bound!r}; choose one of {list(_bounds.BOUNDS)}")
        if sampling not in _sampling.SCHEMES:
            raise ValueError(f"unknown sampling {sampling!r}; choose one of {_sampling.SCHEMES}")
        if rule not in _selection.RULES:
            raise ValueError(f"unknown rule {rule!r}; choose one of {_selection.RULES}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        self.eps, self.alpha, self.bound, self.sampling = float(eps), float(alpha), bound, sampling
        self.pi, self.rule, self.candidates = pi, rule, candidates
        self.loss_bound, self.min_group_size, self.seed = float(loss_bound), int(min_group_size), int(seed)
        self.thresholds_: dict[str, float] = {}
        self.group_sizes_: dict[str, int] = {}

    # -- settings and persistence -------------------------------------------------------------
    @property
    def settings(self) -> dict[str, Any]:
        pi = self.pi if np.ndim(self.pi) == 0 else "per-item"
        return {"eps": self.eps, "alpha": self.alpha, "bound": self.bound,
                "bound_kind": _bounds.BOUNDS[self.bound], "sampling": self.sampling,
                "pi": float(pi) if not isinstance(pi, str) else pi, "rule": self.rule,
                "candidates": self.candidates, "loss_bound": self.loss_bound,
                "min_group_size": self.min_group_size, "seed": self.seed}

    def to_json(self) -> str:
        if not self.thresholds_:
            raise RuntimeError("calibrator is not fitted")
        payload = {"method": self.name, "settings": self.settings,
                   "thresholds": {g: (None if not math.isfinite(t) else float(t))
                                  for g, t in self.thresholds_.items()},
                   "group_sizes": self.group_sizes_}
        payload.update(self._extra_json())
        return json.dumps(payload, indent=2, sort_keys=True)

    def _extra_json(self) -> dict:
        return {}

    # -- calibration ---------------------------------------------------------------------------
    def _calibrate(self, scores, loss, labels, alpha, rng, pi) -> None:
        self.thresholds_, self.group_sizes_ = {}, {}
        codes, names = _factorize(labels)
        order = np.argsort(codes, kind="stable") if len(names) > 1 else np.arange(len(codes))
        members = np.split(order, np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
        for g, idx in zip(names.tolist(), members):
            self.group_sizes_[g] = int(idx.size)
            if idx.size < self.min_group_size:
                warnings.warn(f"group {g!r} has {idx.size} calibration items (< min_group_size="
                              f"{self.min_group_size}); it always routes to the thinking model",
                              GroupWarning, stacklevel=3)
                self.thresholds_[g] = -math.inf
                continue
            p = pi if np.ndim(pi) == 0 else np.asarray(pi, dtype=float)[idx]
            t = threshold(loss[idx], scores[idx], eps=self.eps, alpha=alpha, bound=self.bound,
                          sampling=self.sampling, pi=p, rule=self.rule, candidates=self.candidates,
                          loss_bound=self.loss_bound, rng=rng)
            self.thresholds_[g] = float(t)

    def _labels(self, scores, groups) -> np.ndarray:
        return np.full(len(scores), ALL)

    def fit(self, scores, loss, groups=None) -> "PAC":
        s, l = _as_arrays(scores, loss, self.loss_bound)
        rng = np.random.default_rng(self.seed)
        self._calibrate(s, l, self._labels(s, groups), self.alpha, rng, self.pi)
        return self

    # -- deployment ----------------------------------------------------------------------------
    def thresholds_for(self, scores, groups=None) -> np.ndarray:
        """Each item's threshold (``-inf`` for unseen groups, with a warning)."""
        if not self.thresholds_:
            raise RuntimeError("calibrator is not fitted")
        labels = self._labels(np.asarray(scores, dtype=float), groups)
        codes, names = _factorize(labels)
        unseen = [g for g in names.tolist() if g not in self.thresholds_]
        if unseen:
            warnings.warn(f"group(s) {unseen} were not seen at calibration; they always route to "
                          "the thinking model", GroupWarning, stacklevel=3)
        per_name = np.array([self.thresholds_.get(g, -math.inf) for g in names.tolist()], dtype=float)
        return per_name[codes]

    def route(self, scores, groups=None) -> np.ndarray:
        """True where the item goes to the non-thinking model (``U <= threshold``)."""
        s = np.asarray(scores, dtype=float)
        return s <= self.thresholds_for(s, groups)


class GPAC(PAC):
    """G-PAC: one threshold per known group (Algorithm 2); ``simultaneous`` uses alpha / k."""

    name = "G-PAC"

    def __init__(self, *args, simultaneous: bool = False, **kw):
        super().__init__(*args, **kw)
        self.simultaneous = bool(simultaneous)

    @property
    def settings(self):
        return {**super().settings, "simultaneous": self.simultaneous}

    def _labels(self, scores, groups):
        if groups is None:
            raise ValueError("G-PAC needs group labels (groups=...)")
        g = np.asarray(groups)
        if g.shape != (len(scores),):
            raise ValueError(f"groups must have one label per item ({len(scores)}), got shape {g.shape}")
        missing = pd.isna(g)
        if missing.any():
            raise ValueError(f"groups contain missing labels at rows {np.flatnonzero(missing)[:5].tolist()}")
        return g if g.dtype.kind == "U" else g.astype(str)

    def fit(self, scores, loss, groups=None) -> "GPAC":
        s, l = _as_arrays(scores, loss, self.loss_bound)
        labels = self._labels(s, groups)
        k = len(_factorize(labels)[1])
        alpha = self.alpha / k if self.simultaneous else self.alpha
        self._calibrate(s, l, labels, alpha, np.random.default_rng(self.seed), self.pi)
        return self


class CPAC(GPAC):
    """C-PAC: groups learned by clustering the score, then G-PAC on the learned groups.

    ``mode="split"`` clusters on a random ``cluster_fraction`` of the calibration set and
    calibrates on the rest (exact per-group validity, Thm 3.4.1); ``mode="joint"`` uses the
    same items for both (Thm 3.4.2: an extra ``c * delta`` term).
    """

    name = "C-PAC"

    def __init__(self, *args, k: int = 3, clustering: str = "kmeans", mode: str = "split",
                 cluster_fraction: float = 0.5, **kw):
        super().__init__(*args, **kw)
        if mode not in ("split", "joint"):
            raise ValueError(f"mode must be 'split' or 'joint', got {mode!r}")
        if not 0 < cluster_fraction < 1:
            raise ValueError(f"cluster_fraction must lie in (0, 1), got {cluster_fraction}")
        self.k, self.clustering, self.mode = int(k), clustering, mode
        self.cluster_fraction = float(cluster_fraction)
        self.partition_: Partition | None = None

    @property
    def settings(self):
        return {**super().settings, "k": self.k, "clustering": self.clustering, "mode": self.mode,
                "cluster_fraction": self.cluster_fraction}

    def _extra_json(self):
        return {"partition": {"method": self.partition_.method,
                              "boundaries": self.partition_.boundaries.tolist()}}

    def _labels(self, scores, groups=None):
        if self.partition_ is None:
            raise RuntimeError("calibrator is not fitted")
        return self.partition_.labels(scores)

    def assign(self, scores) -> np.ndarray:
        """Learned group label (``"c0"`` … ``"c{k-1}"``, ordered by score) of each score."""
        return self._labels(np.asarray(scores, dtype=float))

    def fit(self, scores, loss, groups=None) -> "CPAC":
        s, l = _as_arrays(scores, loss, self.loss_bound)
        rng = np.random.default_rng(self.seed)
        pi = self.pi
        if self.mode == "split":
            perm = rng.permutation(s.size)
            n_cluster = int(round(self.cluster_fraction * s.size))
            if not 0 < n_cluster < s.size:
                raise ValueError(f"cannot split {s.size} items with cluster_fraction={self.cluster_fraction}")
            clus, cal = perm[:n_cluster], perm[n_cluster:]
            self.partition_ = fit_partition(s[clus], self.k, self.clustering)
            s, l = s[cal], l[cal]
            if np.ndim(pi):
                pi = np.asarray(pi, dtype=float)[cal]
        else:
            self.partition_ = fit_partition(s, self.k, self.clustering)
        labels = self._labels(s)
        k = self.partition_.k
        alpha = self.alpha / k if self.simultaneous else self.alpha
        self._calibrate(s, l, labels, alpha, rng, pi)
        # Learned groups that got no calibration items always think (route() warns on them).
        return self


METHODS = {"pac": PAC, "gpac": GPAC, "cpac": CPAC}
_BY_NAME = {cls.name: cls for cls in METHODS.values()}


def from_json(text: str) -> PAC:
    """Rebuild a fitted calibrator from :meth:`PAC.to_json` output."""
    payload = json.loads(text)
    cls = _BY_NAME.get(payload.get("method"))
    if cls is None:
        raise ValueError(f"unknown calibrator method {payload.get('method')!r} in JSON")
    settings = dict(payload["settings"])
    settings.pop("bound_kind", None)
    if settings.get("pi") == "per-item":
        settings["pi"] = 0.5  # per-item weights matter only for fitting; routing does not use them
    obj = cls(**settings)
    obj.thresholds_ = {g: (-math.inf if t is None else float(t)) for g, t in payload["thresholds"].items()}
    obj.group_sizes_ = {g: int(v) for g, v in payload.get("group_sizes", {}).items()}
    if cls is CPAC:
        part = payload["partition"]
        obj.partition_ = Partition(np.asarray(part["boundaries"], dtype=float), part["method"])
    return obj
