"""A tiny synthetic population for the quickstart: three groups of different difficulty.

Each item has an uncertainty score ``U`` in [0, 1] (``score_logits``) and a binary loss: 1 when
the thinking model is right and the non-thinking model wrong. Within every group the loss
probability rises with ``U`` (the score is informative), but at the same score a *hard* item is
much more likely to be lost than an *easy* one -- the score is not calibrated across groups.
This is the situation where a single (marginal) PAC threshold keeps the average risk below
``eps`` while the hard group's risk exceeds it.

==========  =====  ===================  ===============================
group       share  score U ~            P(loss = 1 | U)
==========  =====  ===================  ===============================
``easy``    0.5    Beta(2, 5)           0.02 + 0.20 U
``medium``  0.3    Beta(3, 3)           0.05 + 0.35 U
``hard``    0.2    Beta(4, 3)           0.30 + 0.50 U
==========  =====  ===================  ===============================

:data:`TOY_GROUPS` holds these numbers; :func:`toy_group_risk` gives the exact population
risk ``E[loss * 1{U <= t} | group]`` of a threshold, for checking calibrated thresholds. The
quickstart (notebook 00) fits, routes and measures the three calibrators on it step by step.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import special

from ..checks import check_int
from ..data import GROUP, ID, LOSS, NOTHINK_CORRECT, NOTHINK_TOKENS, THINK_CORRECT, THINK_TOKENS, validate

TOY_SCORE = "score_logits"

#: group -> (share, beta a, beta b, loss intercept, loss slope, think-token median)
TOY_GROUPS: Mapping[str, tuple[float, float, float, float, float, float]] = {
    "easy": (0.5, 2.0, 5.0, 0.02, 0.20, 600.0),
    "medium": (0.3, 3.0, 3.0, 0.05, 0.35, 1500.0),
    "hard": (0.2, 4.0, 3.0, 0.30, 0.50, 4000.0),
}
NOTHINK_MEDIAN = 250.0


def toy_population(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` synthetic items in the data schema (see :mod:`gpac_utils.data`), seeded.

    Columns: ``item_id``, ``group`` (easy/medium/hard), ``loss``, ``think_correct``,
    ``nothink_correct``, ``think_tokens``, ``nothink_tokens``, ``score_logits``.
    """
    n = check_int("n", n, 1)
    rng = np.random.default_rng(seed)
    share, a, b, icpt, slope, think_med = np.array(list(TOY_GROUPS.values())).T
    g = rng.choice(len(TOY_GROUPS), size=n, p=share / share.sum())
    u = rng.beta(a[g], b[g])
    p_loss = icpt[g] + slope[g] * u
    loss = (rng.random(n) < p_loss).astype(float)
    # Correctness consistent with the loss: loss = 1 <=> thinking right and non-thinking wrong.
    # Otherwise both right (most often), both wrong, or only the non-thinking model right.
    pair = rng.choice(3, size=n, p=[0.8, 0.15, 0.05])
    think = np.where(loss == 1, 1, np.where(pair == 0, 1, 0))
    nothink = np.where(loss == 1, 0, np.where(pair == 1, 0, 1))
    df = pd.DataFrame(
        {
            ID: [f"toy-{i:05d}" for i in range(n)],
            GROUP: np.array(list(TOY_GROUPS))[g],
            LOSS: loss,
            THINK_CORRECT: think,
            NOTHINK_CORRECT: nothink,
            THINK_TOKENS: np.round(think_med[g] * rng.lognormal(0.0, 0.4, n)),
            NOTHINK_TOKENS: np.round(NOTHINK_MEDIAN * rng.lognormal(0.0, 0.3, n)),
            TOY_SCORE: u,
        }
    )
    return validate(df, require_group=True, require_tokens=True)


def toy_group_risk(threshold: float, group: str) -> float:
    """Exact population risk ``E[loss * 1{U <= threshold} | group]``.

    For U ~ Beta(a, b) and P(loss | U) = c + s U:
    ``E[(c + s U) 1{U <= t}] = c F_{a,b}(t) + s a/(a+b) F_{a+1,b}(t)``.
    """
    if group not in TOY_GROUPS:
        raise KeyError(f"unknown toy group {group!r}; groups are {list(TOY_GROUPS)}")
    _, a, b, c, s, _ = TOY_GROUPS[group]
    t = float(np.clip(threshold, 0.0, 1.0)) if np.isfinite(threshold) else (0.0 if threshold < 0 else 1.0)
    return float(c * special.betainc(a, b, t) + s * a / (a + b) * special.betainc(a + 1, b, t))
