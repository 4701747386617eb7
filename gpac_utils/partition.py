"""Learned partitions of the score axis for C-PAC (paper Section 3.2, "Clustering in U space").

:class:`ScorePartitioner` is the estimator (``k`` and the algorithm); its ``fit`` returns a
:class:`Partition` (the boundaries).


``kmeans``  exact 1-D k-means (Wang & Song's dynamic programme, via the ``ckmeans`` package);
``quantile`` equal-mass bins at the score quantiles ``j/k``.

A partition is stored as ascending boundaries; a score ``U`` belongs to group ``j`` when
``b_{j-1} < U <= b_j``. For k-means the boundary between two clusters is the midpoint of the
gap between them, so a test point is assigned to the nearer cluster edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import ckmeans
import numpy as np

from .checks import ParameterError, check_array, check_choice

#: Partition algorithms: exact 1-D k-means or equal-mass quantile bins.
PARTITION_ALGORITHMS = ("kmeans", "quantile")


@dataclass(frozen=True)
class Partition:
    """A fitted partition of ``[0, 1]`` into ``k`` score intervals.

    Attributes
    ----------
    boundaries : numpy.ndarray, shape (k - 1,)
        Ascending interior boundaries; score ``U`` is in group ``j`` when ``b_{j-1} < U <= b_j``.
    algorithm : str
        The partition algorithm that produced it.
    """

    boundaries: np.ndarray
    algorithm: str = "kmeans"

    def __post_init__(self) -> None:
        b = check_array("boundaries", self.boundaries, 0.0, 1.0, allow_bool=False)
        if np.any(np.diff(b) < 0):
            raise ParameterError(f"boundaries: must be ascending, got {b.tolist()}")
        check_choice("algorithm", self.algorithm, PARTITION_ALGORITHMS)
        object.__setattr__(self, "boundaries", b)

    @property
    def k(self) -> int:
        return len(self.boundaries) + 1

    def assign(self, scores) -> np.ndarray:
        """Group index in ``[0, k)`` of each score."""
        return np.searchsorted(self.boundaries, np.asarray(scores, dtype=float), side="left")

    def labels(self, scores) -> np.ndarray:
        """Group labels ``"c0" .. "c{k-1}"``, ordered by score."""
        return np.array([f"c{j}" for j in range(self.k)])[self.assign(scores)]


@dataclass(frozen=True)
class ScorePartitioner:
    """Learns a ``k``-group partition of the score axis (C-PAC's first step).

    Parameters
    ----------
    k : int, default 3
        Number of groups (fewer when there are fewer distinct scores).
    algorithm : {"kmeans", "quantile"}, default "kmeans"
        Exact 1-D k-means (Wang & Song's dynamic programme) or equal-mass quantile bins.

    Examples
    --------
    >>> from gpac_utils import ScorePartitioner
    >>> p = ScorePartitioner(k=2).fit([0.1, 0.12, 0.15, 0.8, 0.85])
    >>> p.labels([0.11, 0.9]).tolist()
    ['c0', 'c1']
    """

    k: int = 3
    algorithm: str = "kmeans"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 1:
            raise ParameterError(f"k: must be an integer >= 1, got {self.k!r}")
        if self.algorithm not in PARTITION_ALGORITHMS:
            raise ParameterError(
                f"partition: unknown algorithm {self.algorithm!r}; choose one of {PARTITION_ALGORITHMS}"
            )

    def fit(self, scores) -> Partition:
        """Learn the partition from ``scores`` (fewer groups than ``k`` if fewer distinct scores).

        Parameters
        ----------
        scores : array_like
            Calibration scores (flattened); finite, at least one.

        Returns
        -------
        Partition
            Ascending boundaries of at most ``min(k, distinct scores)`` groups (``quantile`` may give
            fewer, when quantiles coincide). For ``kmeans`` the boundaries are the midpoints of the gaps
            between clusters; for ``quantile`` the score quantiles ``j/k``.

        Raises
        ------
        ValueError
            For no scores, or NaN or infinite scores.

        Examples
        --------
        >>> p = ScorePartitioner(k=2).fit([0.1, 0.12, 0.15, 0.8, 0.85])
        >>> p.k, p.labels([0.11, 0.5, 0.9]).tolist()
        (2, ['c0', 'c1', 'c1'])
        >>> ScorePartitioner(k=2, algorithm="quantile").fit([0.1, 0.2, 0.3, 0.4]).boundaries.tolist()
        [0.2]
        >>> ScorePartitioner(k=3).fit([0.5, 0.5, 0.5]).k  # one distinct score: one group
        1
        """
        s = np.asarray(scores, dtype=float).ravel()
        if s.size == 0:
            raise ValueError("cannot cluster an empty set of scores")
        if not np.all(np.isfinite(s)):
            raise ValueError("scores to cluster contain NaN or infinite values")
        k = min(int(self.k), np.unique(s).size)
        if self.algorithm == "kmeans":
            clusters = ckmeans.ckmeans(s, k) if k > 1 else [np.sort(s)]
            bounds = np.array([(a[-1] + b[0]) / 2 for a, b in zip(clusters[:-1], clusters[1:])])
        else:
            bounds = np.unique(np.quantile(s, np.arange(1, k) / k, method="inverted_cdf"))
            bounds = bounds[bounds < s.max()]  # a boundary at the maximum would leave an empty top bin
        return Partition(np.asarray(bounds, dtype=float), self.algorithm)
