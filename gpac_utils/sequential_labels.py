r"""Buying labels without a forecast: sequential labelling with an anytime-valid bound per group (issue 53, item 4).

The fixed-n route (:mod:`gpac_utils.prediction`, ``gpac plan``) forecasts from a pilot how many labels each group
needs, then calibrates once. The sequential mode needs no forecast: it labels in batches and stops each group as
soon as the evidence decides it.

**Fixed before the first label** (:func:`start`, seeded): each group's *labelling order* (a uniformly random
permutation of its rows: if the rows are i.i.d. draws from the group's population, so is every prefix of the
order) and its *threshold grid* (``grid_size`` quantiles of the group's unlabelled scores, which are free). Labels
already in the table and rows outside the order's prefix are never used: only the losses the mode asked for count.

**After each batch** (:func:`update`), per group and grid point ``u``, the terms ``loss_i 1{U_i <= u}`` (the joint
risk of the paper's Section 4, bounded by ``loss_bound``) feed a :class:`~gpac_utils.eprocess.EProcess` in
direction ``"below"`` (evidence that the risk at ``u`` is below ``eps``). As in
:class:`~gpac_utils.online.OnlineGPAC`, a grid point is certified once its wealth has reached ``1/alpha'``, and the
group's threshold is the largest grid point whose whole grid prefix is certified
(:func:`gpac_utils.online.threshold_of`): a fixed-sequence correction over the grid, valid because the risk is
non-decreasing in ``u`` (the smallest grid point with risk above ``eps`` must be certified for a threshold above it
to be used), so no union bound over the grid or over the looks is needed. ``alpha'`` is ``alpha`` per group
(``correction="none"``) or ``alpha / k`` (``"bonferroni"``: all ``k`` groups at once), the
:data:`~gpac_utils.settings.CORRECTIONS` entry's. By Ville's inequality the guarantee
``P(risk at the threshold > eps) <= alpha'`` holds whenever the mode stops, for every stopping rule.

**Stopping a group**: when it certifies (a threshold above ``-inf``); when even loss-free labels could not certify
it within the labels left (the remaining budget, at most its unlabelled rows: the e-process is fed zeros in a copy);
or when its rows run out. The whole run stops when every group has stopped or the budget is spent.

**Labels** come in batches of ``batch_size`` per active group (:data:`BATCH_SIZE` by default: small enough that the
stop is rarely more than a batch late, large enough to save round trips).

Cost, loss-free group at ``eps = alpha = 0.05`` (module :mod:`gpac_utils.eprocess`): 86 labels with the default
``mixture`` bet, 65 with the capped maximal bet ``max``, against 59 for the fixed-n Hoeffding–Bentkus route, which
must however choose its ``n`` in advance (``docs/planning.md``).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np

from . import eprocess
from .calibrate import CERTIFIED, GPAC
from .certificate import Certificate
from .checks import ParameterError, check_int
from .online import threshold_of
from .selection import candidate_grid
from .settings import ALPHA, CORRECTIONS, RNG_SEED, check_risk

__all__ = [
    "BATCH_SIZE",
    "MODE",
    "start",
    "update",
    "next_rows",
    "futile",
    "group_threshold",
    "spent",
    "write_state",
    "read_state",
    "certificate",
]

#: Labels per active group per batch (default).
BATCH_SIZE = 10
#: What the certificate's provenance records as the mode.
MODE = "sequential"
_FORMAT = "gpac_utils.sequential_labels"


def start(
    scores,
    groups,
    *,
    eps,
    alpha=ALPHA.default,
    budget,
    batch_size=BATCH_SIZE,
    grid_size=50,
    bet="mixture",
    correction="none",
    loss_bound=1.0,
    seed=0,
) -> dict:
    """A fresh sequential-labelling state: orders and grids fixed, nothing labelled (module description).

    Parameters
    ----------
    scores, groups : array_like
        Every row's score (free) and group.
    eps, alpha : float
        Target risk and miscoverage level.
    budget : int
        The most labels in all.
    batch_size : int, default :data:`BATCH_SIZE`
        Labels per active group per batch.
    grid_size : int, default 50
        Grid points per group (quantiles of its scores).
    bet : str, default "mixture"
        A :data:`gpac_utils.eprocess.BETTING` name.
    correction : str, default "none"
        A :data:`~gpac_utils.settings.CORRECTIONS` name: how ``alpha`` is shared across the groups.
    loss_bound : float, default 1.0
    seed : int, default 0
        Seed of the labelling order.

    Returns
    -------
    dict
        The state (JSON-serialisable: :func:`write_state`).
    """
    eps, alpha, loss_bound = check_risk(eps, alpha, loss_bound)
    budget = check_int("budget", budget, 1)
    batch_size, grid_size = check_int("batch_size", batch_size, 1), check_int("grid_size", grid_size, 1)
    seed = RNG_SEED.check(seed)
    CORRECTIONS.check(correction, "correction")
    s, g = np.asarray(scores, float), np.asarray(groups).astype(str)
    if s.shape != g.shape or s.ndim != 1 or not s.size:
        raise ParameterError(f"scores, groups: must be 1-D of one length, got {s.shape} and {g.shape}")
    if not np.all(np.isfinite(s)):
        raise ParameterError("scores: must be finite")
    names = sorted(set(g.tolist()))
    level = CORRECTIONS[correction].per_group(alpha, len(names))
    rng = np.random.default_rng([seed, 53])
    state = {
        "format": _FORMAT,
        "mode": MODE,
        "settings": {
            "eps": eps,
            "alpha": alpha,
            "alpha_per_group": level,
            "correction": correction,
            "loss_bound": loss_bound,
            "budget": budget,
            "batch_size": batch_size,
            "grid_size": grid_size,
            "bet": bet,
            "seed": seed,
            "n_rows": int(s.size),
        },
        "groups": {},
    }
    for x in names:
        rows = np.flatnonzero(g == x)
        grid = np.unique(candidate_grid(s[rows], grid_size))  # quantiles of its unlabelled scores
        ep = eprocess.EProcess(eps, "below", bound=loss_bound, bet=bet, shape=(grid.size,))
        state["groups"][x] = {
            "order": rng.permutation(rows).tolist(),
            "grid": grid.tolist(),
            "labelled": 0,
            "requested": 0,
            "status": "labelling",
            "threshold": None,
            "eprocess": ep.to_dict(),
        }
    return state


def group_threshold(entry: dict, level: float) -> float:
    """The group's certified threshold now: the largest grid point whose grid prefix crossed ``1/level``."""
    ep = eprocess.EProcess.from_dict(entry["eprocess"])
    return float(threshold_of({"certified": ep.rejects(level)}, np.asarray(entry["grid"])))


def futile(entry: dict, level: float, labels_left: int) -> bool:
    """Whether even ``labels_left`` loss-free labels could not certify any grid point (a copy is fed zeros)."""
    if labels_left <= 0:
        return True
    ep = eprocess.EProcess.from_dict(entry["eprocess"])  # a new process: the state is not changed
    ep.update(np.zeros((len(entry["grid"]), int(labels_left))))
    return not bool(ep.rejects(level).any())


def spent(state: dict) -> int:
    """Labels requested so far, in all groups."""
    return int(sum(e["requested"] for e in state["groups"].values()))


def update(state: dict, scores, losses) -> dict:
    """Feed the losses of every requested row not yet fed; decide each group; return the state (changed in place).

    ``losses`` covers every row (``nan``: unlabelled); a requested row without a loss is refused in one line."""
    st = state["settings"]
    s, loss = np.asarray(scores, float), np.asarray(losses, float)
    if s.size != st["n_rows"] or loss.size != st["n_rows"]:
        raise ParameterError(f"scores, losses: the state was started on {st['n_rows']} rows, got {s.size}")
    level = st["alpha_per_group"]
    for x, e in state["groups"].items():
        rows = np.asarray(e["order"][e["labelled"] : e["requested"]], int)
        if rows.size:
            missing = rows[~np.isfinite(loss[rows])]
            if missing.size:
                raise ParameterError(
                    f"losses: group {x!r} has {missing.size} requested row(s) without a loss (rows "
                    f"{missing[:5].tolist()}{'...' if missing.size > 5 else ''}); label them first"
                )
            bad = rows[(loss[rows] < 0) | (loss[rows] > st["loss_bound"])]
            if bad.size:
                raise ParameterError(f"losses: must lie in [0, {st['loss_bound']}]; bad at rows {bad[:5].tolist()}")
            terms = loss[rows] * (s[rows] <= np.asarray(e["grid"])[:, None])  # (K, n): loss 1{U <= u}
            ep = eprocess.EProcess.from_dict(e["eprocess"]).update(terms)
            e["eprocess"], e["labelled"] = ep.to_dict(), int(e["requested"])
        t = group_threshold(e, level)
        e["threshold"] = t if math.isfinite(t) else None
    left = st["budget"] - spent(state)
    for e in state["groups"].values():
        if e["status"] != "labelling":
            continue
        rows_left = len(e["order"]) - e["requested"]
        if e["threshold"] is not None:
            e["status"] = "certified"
        elif futile(e, level, min(left, rows_left)):
            e["status"] = "no rows left" if rows_left <= 0 else "budget spent" if left <= 0 else "futile"
    return state


def next_rows(state: dict) -> dict:
    """Request the next batch: per active group, its next ``batch_size`` rows in the order (within the budget).

    Returns ``{group: [row, ...]}`` (empty when the run is over) and records the requests in ``state``."""
    st = state["settings"]
    out = {}
    for x, e in state["groups"].items():
        if e["status"] != "labelling" or e["requested"] > e["labelled"]:
            continue
        left = st["budget"] - spent(state)
        take = min(st["batch_size"], left, len(e["order"]) - e["requested"])
        if take <= 0:
            continue
        out[x] = e["order"][e["requested"] : e["requested"] + take]
        e["requested"] += take
    return out


def write_state(state: dict) -> str:
    """The state as JSON (read back by :func:`read_state`)."""
    return json.dumps(state, sort_keys=True, indent=1)


def read_state(text: str, name: str = "state") -> dict:
    """A state written by :func:`write_state` (one line naming ``name`` if it is not one)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"{name}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ParameterError(f"{name}: not a sequential-labelling state (format {_FORMAT!r})")
    return doc


def certificate(state: dict, scores, losses, groups, settings, *, columns=None, table_path=None, created=None):
    """The certificate of a finished run: a G-PAC certificate (:class:`~gpac_utils.certificate.Certificate`) whose
    thresholds and group records are the sequential mode's, its ``provenance.mode`` ``"sequential"`` and
    ``provenance.sequential`` the run's settings (bet, batch size, grid size, per-group level, labels used).

    The certificate's ``settings`` are those of the calibrator it reads back into (``gpac route`` routes with its
    thresholds); its ``ucb`` is ``null``: an e-process certifies by a test, not by a bound's value. ``n`` and
    ``labelled`` count the labels the mode used per group."""
    st = state["settings"]
    used = np.concatenate([np.asarray(e["order"][: e["labelled"]], int) for e in state["groups"].values()])
    s, loss, g = np.asarray(scores, float), np.asarray(losses, float), np.asarray(groups).astype(str)
    cal = GPAC.from_settings(settings)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the calibrator's group warnings: only its structure is kept
        if used.size:
            cal.fit(s[used], np.nan_to_num(loss[used]), g[used])
    cert = Certificate.from_calibrator(
        cal, columns=columns, table_path=table_path, created=created, n_items=int(st["n_rows"])
    )
    doc = cert.document
    doc["groups"] = {
        x: {
            "n": int(e["labelled"]),
            "labelled": int(e["labelled"]),
            "status": CERTIFIED if e["threshold"] is not None else "always think: no feasible threshold",
            "threshold": e["threshold"],
            "ucb": None,
        }
        for x, e in state["groups"].items()
    }
    doc["thresholds"] = {x: r["threshold"] for x, r in doc["groups"].items()}
    doc["group_sizes"] = {x: r["n"] for x, r in doc["groups"].items()}
    doc["provenance"]["mode"] = MODE
    doc["provenance"]["sequential"] = {
        k: st[k] for k in ("bet", "batch_size", "grid_size", "alpha_per_group", "budget", "seed")
    } | {"stopped": {x: e["status"] for x, e in state["groups"].items()}}
    return Certificate.parse(json.loads(json.dumps(doc)), where="sequential certificate")
