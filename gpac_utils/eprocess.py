r"""Betting e-processes for "a group's risk is at most eps", at a fixed threshold, in either direction.

A stream of terms :math:`X_1, X_2, \dots` in ``[0, R]`` (a loss, or a loss times the route
indicator, or an inverse-propensity-weighted one; ``R`` may change per step as long as it is known
before the term) with conditional mean :math:`\mu` given the past. For a threshold ``eps`` the
*wealth* of a gambler who bets a predictable fraction :math:`\lambda_i \ge 0` on each step is

.. math:: K_n = \prod_{i \le n} (1 + \lambda_i D_i), \qquad
   D_i = \varepsilon - X_i \ (\text{direction } \texttt{"below"}), \quad
   D_i = X_i - \varepsilon \ (\text{direction } \texttt{"above"}).

* ``"below"`` gathers evidence that :math:`\mu < \varepsilon` (certify, confirm): under
  :math:`H_0: \mu \ge \varepsilon` every factor has conditional mean
  :math:`1 + \lambda_i(\varepsilon - \mu) \le 1`.
* ``"above"`` gathers evidence that :math:`\mu > \varepsilon` (alarm, violation): under
  :math:`H_0: \mu \le \varepsilon` likewise.

With every bet capped at ``clip`` (default 0.9) times the bet that could zero the wealth
(:func:`bet_cap`: ``clip / (R - eps)`` below, ``clip / eps`` above), each factor is at least
``1 - clip`` > 0, so :math:`K` is a nonnegative supermartingale with :math:`K_0 = 1` under
:math:`H_0` (a *test supermartingale*), and **Ville's inequality** (Ville 1939, *Étude critique
de la notion de collectif*) gives
:math:`P(\exists n: K_n \ge 1/a) \le a`: rejecting :math:`H_0` the first time the wealth reaches
``1/a`` is a level-``a`` test at every look, under any stopping rule (anytime-valid). An average of
test supermartingales is one, and so is one run on a subsequence selected by a rule known before
each term: for the routed items, the route :math:`1\{U_i \le \hat u\}` is seen before the loss
(the filtration reveals :math:`U_i` before :math:`\ell_i`). Their terms have conditional mean
:math:`E[\ell \mid \text{past}, U \le \hat u]`, which the routed-risk null bounds by
:math:`\varepsilon` (for i.i.d. items, :math:`E[\ell \mid U \le \hat u, G]`).
This is the testing-by-betting construction of Waudby-Smith & Ramdas (2024), "Estimating means
of bounded random variables by betting" (J. R. Stat. Soc. B 86(1)), at one candidate mean.

**Bets** (registry :data:`BETTING`):

* ``"grapa"``: :math:`\lambda_i = \min(\max(S_{i-1} / (V_{i-1} + \beta), 0), c_i)`, the
  running sums :math:`S = \sum D_s`, :math:`V = \sum D_s^2` of the earlier steps,
  :math:`\beta = B^2` (``B`` the loss bound) and :math:`c_i` the step's cap: the plug-in growth
  bet of B-PAC, aGRAPA-type (Waudby-Smith & Ramdas's approximate GRAPA plug-in);
* ``"mixture"`` (default): the average of the ``grapa`` wealth and the wealth of the constant bet
  :math:`c_i / 2`; robust when the first terms mislead the plug-in;
* ``"max"``: the constant bet :math:`c_i` (capped maximal bet): fastest on loss-free terms (at
  ``eps = alpha = 0.05``, ``R = 1``: 65 terms, against 86 for ``mixture``), slow otherwise, and
  no use in direction ``"above"``, where its bet ``clip / eps`` keeps a tenth of the wealth on
  each term 0.

The drift alarm of :class:`gpac_utils.online.OnlineGPAC` uses :func:`shiryaev_roberts`, an
e-detector (Shin, Ramdas & Rinaldo, "E-detectors: a nonparametric framework for sequential change
detection", New England Journal of Statistics in Data Science, pp. 229–260,
doi:10.51387/23-nejsds51) over the constant bets ``clip / eps * 2**-b``, ``b = 0..9``: a sum of such
wealths started at every step, whose mean number of steps before a false alarm at ``1/a`` is at
least ``1/a`` while :math:`\mu \le \varepsilon` (their average-run-length bound;
:class:`EDetector`).

The core functions take leading batch axes (independent streams) and a last axis of candidate
thresholds (``(..., n, K)`` terms, time on axis ``-2``); their running sums are ``np.cumsum``
continued from a carried state, so one batch or many give the same bits. :class:`EProcess` and
:class:`EDetector` wrap them for one threshold per process (any batch shape: a grid of thresholds,
as the planner's sequential labelling needs, is a batch axis): updated in batches, written to
JSON and read back exactly (:meth:`EProcess.to_dict`, :meth:`EProcess.from_dict`), which is what
``gpac audit --sequential`` keeps between looks (:mod:`gpac_utils.audit_sequential`).

Examples
--------
A loss-free group at ``eps = 0.05``: after how many terms does each bet certify at ``alpha = 0.05``?

>>> import numpy as np
>>> [int(EProcess(0.05, "below", bet=b).update(np.zeros(200)).first_crossing(0.05)) for b in BETTING]
[75, 86, 65]

(``grapa``'s first bet, from no past, is 0, and it reaches the cap only gradually; the fixed-n
binomial test needs 59 loss-free terms, without the option to stop early.)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from .checks import ParameterError, check_choice, check_range
from .registry import Registry
from .settings import EPS

__all__ = [
    "CLIP",
    "DETECTOR_BETS",
    "DIRECTIONS",
    "Bet",
    "BETTING",
    "bet_cap",
    "signed_terms",
    "running",
    "new_wealth",
    "wealth",
    "shiryaev_roberts",
    "EProcess",
    "EDetector",
]

#: Largest bet as a share of the bet that could zero the wealth.
CLIP = 0.9
#: The e-detector's constant bets, in units of its cap ``clip / eps``.
DETECTOR_BETS = 2.0 ** -np.arange(10)
#: ``"below"``: evidence that the mean is below eps (null: at least eps); ``"above"``: above (null: at most eps).
DIRECTIONS = ("below", "above")
_FORMAT = "gpac_utils.eprocess"


@dataclass(frozen=True)
class Bet:
    """How the bets are chosen from the past (module description).

    Parameters
    ----------
    name : str
        Its name (``bet=``).
    plug_in : bool
        Whether it runs the plug-in (``grapa``) wealth.
    constant : float or None
        The constant bet as a share of each step's cap, whose wealth it runs (``None``: none).
        With both, the wealth is their average.
    description : str
        The bet, in words.
    """

    name: str
    plug_in: bool
    constant: float | None
    description: str

    @property
    def keys(self) -> tuple[str, ...]:
        """The running quantities it carries between batches (the state's fields)."""
        plug = ("s1", "s2", "log_grapa") if self.plug_in else ()
        return plug + (("log_constant",) if self.constant is not None else ())


#: The betting strategies (module description): ``grapa``, ``mixture`` (default of the online router), ``max``.
BETTING: Registry[Bet] = Registry(
    "bet",
    [
        Bet("grapa", True, None, "plug-in growth bet S/(V + B^2), capped (B-PAC's)"),
        Bet("mixture", True, 0.5, "average of the grapa wealth and the constant bet half the cap"),
        Bet("max", False, 1.0, "the constant bet at the cap"),
    ],
)


def bet_cap(eps, term_range, direction: str = "below", clip: float = CLIP):
    """The largest bet of a step: ``clip`` times the bet that could zero the wealth.

    ``clip / (term_range - eps)`` for ``"below"`` (a term can reach ``term_range``), ``clip / eps``
    for ``"above"`` (a term can be 0).

    Examples
    --------
    >>> round(bet_cap(0.05, 1.0), 4), round(bet_cap(0.05, 1.0, "above"), 1)
    (0.9474, 18.0)
    """
    return clip / (term_range - eps) if direction == "below" else clip / eps


def signed_terms(x, eps, direction: str = "below"):
    """The bet's payoff per unit, ``D = eps - x`` (``"below"``) or ``x - eps`` (``"above"``)."""
    return eps - x if direction == "below" else x - eps


def running(carry, steps):
    """Running sums along time (axis ``-2``) continued from ``carry`` (shape ``(..., K)``): ``(..., n + 1, K)``."""
    buf = np.concatenate([carry[..., None, :], steps], axis=-2)
    return np.cumsum(buf, axis=-2, out=buf)


def new_wealth(shape=(), bet: str = "mixture") -> dict:
    """Wealth 1 (log 0) and empty running sums for ``bet``, arrays of ``shape`` (batch axes, then ``K``)."""
    return {k: np.zeros(shape) for k in BETTING[bet].keys}


def wealth(state: dict, d, cap, bet: str = "mixture", beta: float = 1.0) -> tuple[dict, np.ndarray]:
    """Run the wealth over the payoffs ``d`` (``(..., n, K)``, time on axis ``-2``) from ``state``.

    Parameters
    ----------
    state : dict
        The carried running quantities (:func:`new_wealth`), arrays ``(..., K)``.
    d : numpy.ndarray
        Payoffs per unit bet (:func:`signed_terms`); a step with ``d = 0`` changes nothing.
    cap : float or numpy.ndarray
        Each step's largest bet (:func:`bet_cap`), broadcast against ``d``.
    bet : str
        A :data:`BETTING` name.
    beta : float
        The ``grapa`` bet's regulariser (the loss bound squared).

    Returns
    -------
    new : dict
        The carried quantities after the last step (a new dict).
    log_wealth : numpy.ndarray
        The log wealth after each step, ``(..., n, K)``.
    """
    entry = BETTING[bet]
    new, paths = {}, []
    if entry.plug_in:
        s1, s2 = running(state["s1"], d), running(state["s2"], d * d)
        lam = np.clip(s1[..., :-1, :] / (s2[..., :-1, :] + beta), 0.0, cap)  # predictable: earlier steps only
        log_g = running(state["log_grapa"], np.log1p(lam * d))  # the carry first: no step (n = 0) keeps it
        new |= {"s1": s1[..., -1, :], "s2": s2[..., -1, :], "log_grapa": log_g[..., -1, :]}
        paths.append(log_g[..., 1:, :])
    if entry.constant is not None:
        log_c = running(state["log_constant"], np.log1p(entry.constant * cap * d))
        new["log_constant"] = log_c[..., -1, :]
        paths.append(log_c[..., 1:, :])
    log_w = paths[0] if len(paths) == 1 else np.logaddexp(*paths) - math.log(2)
    return new, log_w


def shiryaev_roberts(log_sr, d, monitored, cap):
    """The Shiryaev–Roberts e-detector of every constant bet after each step, ``(..., n, bets)``.

    ``log_sr`` (``(..., bets)``) is carried from the previous batch (``-inf``: nothing yet); ``d``
    (``(..., n)``) the payoffs ``x - eps``; ``monitored`` (``(..., n)``, bool) the steps that count
    (a new product starts at each); ``cap`` the bets' unit (``clip / eps``), the bets being
    ``cap * DETECTOR_BETS``. The detector alarms at level ``a`` when the mean over the bets reaches
    ``1/a``: ``logaddexp.reduce(sr, -1) >= log(len(DETECTOR_BETS) / a)``.
    """
    log_f = np.where(monitored[..., None], np.log1p((cap * DETECTOR_BETS) * d[..., None]), 0.0)
    log_p = np.cumsum(log_f, axis=-2)
    prev = np.concatenate([np.zeros_like(log_p[..., :1, :]), log_p[..., :-1, :]], axis=-2)
    start = np.where(monitored[..., None], -prev, -np.inf)  # a new product starts at every monitored item
    acc = np.logaddexp.accumulate(np.concatenate([log_sr[..., None, :], start], axis=-2), axis=-2)[..., 1:, :]
    return acc + log_p


# --------------------------------------------------------------------------- JSON of arrays, exactly
def _encode(a) -> dict:
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return {"shape": list(a.shape), "dtype": a.dtype.kind, "values": a.ravel().astype(int).tolist()}
    return {"shape": list(a.shape), "dtype": "f", "values": [float(v).hex() for v in a.ravel().tolist()]}


def _decode(doc: dict, name: str) -> np.ndarray:
    try:
        shape, kind, values = tuple(doc["shape"]), doc["dtype"], doc["values"]
        if kind == "f":
            return np.array([float.fromhex(v) for v in values], dtype=float).reshape(shape)
        return np.array(values, dtype={"i": np.int64, "u": np.int64, "b": bool}[kind]).reshape(shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise ParameterError(f"{name}: not an array written by gpac_utils.eprocess ({exc})") from None


class _Sequential:
    """What :class:`EProcess` and :class:`EDetector` share: settings, batch shape, JSON."""

    kind = ""
    #: The settings its constructor takes by keyword besides ``shape``, in the order :meth:`from_dict` reads them.
    _keywords = ("bound", "clip")

    def __init__(self, eps, direction, bound, clip, shape):
        self.bound = check_range("bound", bound, 0.0, math.inf)
        self.eps = EPS.check(eps, {"loss_bound": self.bound})
        self.direction = check_choice("direction", direction, DIRECTIONS)
        self.clip = check_range("clip", clip)
        self.shape = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)

    def _terms(self, terms, term_range, used):
        x = np.asarray(terms, dtype=float)
        if x.shape[:-1] != self.shape or x.ndim != len(self.shape) + 1:
            raise ParameterError(f"terms: need shape {(*self.shape, 'n')} (batch, then time), got {x.shape}")
        r = self.bound if term_range is None else np.broadcast_to(np.asarray(term_range, dtype=float), x.shape)
        if np.any(np.asarray(r) <= self.eps):
            raise ParameterError(f"term_range: must exceed eps={self.eps:g} (the largest term of each step)")
        bad = ~np.isfinite(x) | (x < 0) | (x > r)
        if np.any(bad):
            where = np.argwhere(bad)[0].tolist()
            raise ParameterError(f"terms: must lie in [0, term_range] (default: bound={self.bound:g}); bad at {where}")
        return x, r, np.ones(x.shape, bool) if used is None else np.asarray(used, bool)

    def to_dict(self) -> dict:
        """Everything needed to continue it, as JSON-ready values (floats as exact hex strings)."""
        settings = {"eps": self.eps, "direction": self.direction} | {k: getattr(self, k) for k in self._keywords}
        head = {"format": _FORMAT, "kind": self.kind, "version": 1, "shape": list(self.shape)}
        settings = {k: float(v).hex() if isinstance(v, float) else v for k, v in settings.items()}
        return head | settings | {"state": {k: _encode(v) for k, v in self.state.items()}}

    def to_json(self) -> str:
        """:meth:`to_dict` as one JSON text (sorted keys: the same process gives the same bytes)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, name: str = "state"):
        """Read back :meth:`to_json` exactly."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"{name}: not JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.from_dict(doc, name)

    @classmethod
    def from_dict(cls, doc: dict, name: str = "state"):
        """Read back :meth:`to_dict` exactly (one line naming ``name`` if it is not one)."""
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("kind") != cls.kind:
            raise ParameterError(f"{name}: not a {cls.kind} written by gpac_utils.eprocess")
        try:
            d = doc | {k: float.fromhex(doc[k]) for k in ("eps", "bound", "clip") if isinstance(doc.get(k), str)}
            state = {k: _decode(v, f"{name}.state.{k}") for k, v in doc["state"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParameterError(f"{name}: malformed ({exc})") from None
        try:
            new = cls(d["eps"], **{k: d[k] for k in cls._keywords}, shape=tuple(d["shape"]))
        except KeyError as exc:
            raise ParameterError(f"{name}: malformed (no {exc})") from None
        missing = sorted(set(new.state) - set(state))
        if missing:
            raise ParameterError(f"{name}: state lacks {missing}")
        if state["n"].shape != new.shape:
            raise ParameterError(f"{name}: state.n has shape {state['n'].shape}, not {new.shape}")
        new.state = state
        return new

    @property
    def n(self):
        """Terms consumed (used steps); for :class:`EDetector`, steps monitored since the start or the last reset."""
        return self.state["n"]


class EProcess(_Sequential):
    """A test supermartingale for "the mean of the terms is at most (``above``) / at least (``below``) eps".

    Parameters
    ----------
    eps : float
        The threshold, in ``(0, bound)``.
    direction : {"below", "above"}
        ``"below"``: evidence that the mean is below ``eps`` (certify); ``"above"``: above (alarm).
    bound : float, default 1.0
        The loss bound ``B``: terms lie in ``[0, B]`` unless a step's ``term_range`` says more; the
        ``grapa`` bet's regulariser is ``B**2``.
    bet : str, default "mixture"
        A :data:`BETTING` name.
    clip : float, default 0.9
        Largest bet as a share of the one that could zero the wealth.
    shape : tuple of int, default ()
        Batch shape (independent processes, e.g. Monte Carlo repetitions).

    Attributes
    ----------
    state : dict of numpy.ndarray
        The bet's running quantities (one ``K = 1`` axis last), ``n`` (terms consumed),
        ``log_e`` (log wealth now) and ``log_max`` (the largest log wealth so far: the test's
        reading under Ville's inequality).

    Examples
    --------
    >>> ep = EProcess(0.1, "above", bet="mixture")
    >>> ep = ep.update(np.r_[np.zeros(20), np.ones(10)])  # 20 clean terms, then 10 losses
    >>> int(ep.n), round(float(ep.e_value), 1), bool(ep.rejects(0.05))
    (30, 41.5, True)
    >>> EProcess.from_json(ep.to_json()).to_json() == ep.to_json()
    True
    """

    kind = "EProcess"
    _keywords = ("direction", "bound", "bet", "clip")

    def __init__(self, eps, direction="below", *, bound=1.0, bet="mixture", clip=CLIP, shape=()):
        super().__init__(eps, direction, bound, clip, shape)
        self.bet = BETTING.check(bet, "bet")
        self.state = new_wealth((*self.shape, 1), self.bet) | {
            "n": np.zeros(self.shape, np.int64),
            "log_e": np.zeros(self.shape),
            "log_max": np.zeros(self.shape),
        }
        self._last = None

    def update(self, terms, term_range=None, used=None) -> EProcess:
        """Feed a batch of terms (shape ``(*shape, n)``, time last); return ``self``.

        ``term_range`` (broadcast to the terms): each step's largest possible term, known before it
        (default ``bound``); ``used`` (bool, same shape): the steps that count (others change nothing).
        """
        x, r, use = self._terms(terms, term_range, used)
        d = np.where(use, signed_terms(x, self.eps, self.direction), 0.0)[..., None]
        cap = np.expand_dims(bet_cap(self.eps, r, self.direction, self.clip), -1)
        carried, log_w = wealth(self.state, d, cap, self.bet, self.bound**2)
        log_w = log_w[..., 0]
        st = self.state
        n_before = st["n"]
        if x.shape[-1]:
            st["log_e"] = log_w[..., -1]
            st["log_max"] = np.maximum(st["log_max"], log_w.max(-1))
        st.update(carried)
        st["n"] = n_before + use.sum(-1)
        self._last = (n_before, log_w, use)
        return self

    @property
    def e_value(self):
        """The wealth now."""
        return np.exp(self.state["log_e"])

    @property
    def max_e_value(self):
        """The largest wealth so far (reject at level ``a`` once it reaches ``1/a``: Ville)."""
        return np.exp(self.state["log_max"])

    def rejects(self, level) -> np.ndarray:
        """Whether the wealth has ever reached ``1 / level`` (anytime-valid at ``level``)."""
        return self.state["log_max"] >= math.log(1 / check_range("level", level))

    def first_crossing(self, level):
        """In the last batch fed, the number of used terms (counted from the start) after which the
        wealth first reached ``1 / level``; ``-1`` where it did not in that batch."""
        if self._last is None:
            raise ParameterError("first_crossing: no batch fed since this process was built or read")
        n_before, log_w, use = self._last
        over = (log_w >= math.log(1 / check_range("level", level))) & use
        count = n_before[..., None] + np.cumsum(use, axis=-1)  # never falls: its least over the crossings is the first
        first = np.min(count, axis=-1, where=over, initial=np.iinfo(count.dtype).max)  # an empty batch included
        return np.where(over.any(-1), first, -1)


class EDetector(_Sequential):
    """A Shiryaev–Roberts e-detector of "the mean rose above eps" (direction ``"above"`` only).

    The mean, over the constant bets ``clip / eps * DETECTOR_BETS``, of the sum of the wealths
    started at every step (:func:`shiryaev_roberts`); :meth:`alarms` at ``a`` when it reaches
    ``1/a``. While the mean stays at most ``eps``, the expected number of steps before a false alarm
    is at least ``1/a`` (Shin, Ramdas & Rinaldo's average-run-length bound, module description), and
    ``P(alarm within n steps) <= n a``: with ``R_k`` the detector after ``k`` steps,
    ``k -> R_k + (n - k)``, ``k <= n``, is a nonnegative supermartingale starting at ``n`` (for each
    bet a step maps its sum ``R`` to ``(R + 1)`` times a factor of conditional mean at most 1, and
    their average inherits it), so Ville's inequality
    bounds the chance that it reaches ``1/a`` by ``n a``. :meth:`reset` starts afresh after an alarm.

    Examples
    --------
    >>> det = EDetector(0.1).update(np.r_[np.zeros(300), np.ones(20)])
    >>> bool(det.alarms(1e-3)), int(det.n)
    (True, 320)
    """

    kind = "EDetector"

    def __init__(self, eps, *, bound=1.0, clip=CLIP, shape=()):
        super().__init__(eps, "above", bound, clip, shape)
        self.state = {
            "log_sr": np.full((*self.shape, DETECTOR_BETS.size), -np.inf),
            "n": np.zeros(self.shape, np.int64),
            "log_max": np.full(self.shape, -np.inf),
        }

    def update(self, terms, used=None) -> EDetector:
        """Feed a batch of terms in ``[0, bound]`` (shape ``(*shape, n)``); return ``self``."""
        x, _, use = self._terms(terms, None, used)
        if x.shape[-1]:
            sr = shiryaev_roberts(self.state["log_sr"], x - self.eps, use, self.clip / self.eps)
            stat = np.logaddexp.reduce(sr, axis=-1) - math.log(DETECTOR_BETS.size)
            self.state["log_sr"] = sr[..., -1, :]
            self.state["log_max"] = np.maximum(self.state["log_max"], stat.max(-1))
        self.state["n"] = self.state["n"] + use.sum(-1)
        return self

    def statistic(self):
        """The detector now: the mean over the bets of the Shiryaev–Roberts sums."""
        return np.exp(np.logaddexp.reduce(self.state["log_sr"], axis=-1) - math.log(DETECTOR_BETS.size))

    def alarms(self, level) -> np.ndarray:
        """Whether it has reached ``1 / level`` since the start or the last :meth:`reset`."""
        return self.state["log_max"] >= math.log(1 / check_range("level", level))

    def reset(self, where=True) -> EDetector:
        """Start afresh (where ``where``): after an alarm, once the cause is dealt with."""
        w = np.asarray(where, bool)
        self.state["log_sr"] = np.where(w[..., None], -np.inf, self.state["log_sr"])
        self.state["log_max"] = np.where(w, -np.inf, self.state["log_max"])
        self.state["n"] = np.where(w, 0, self.state["n"])
        return self
