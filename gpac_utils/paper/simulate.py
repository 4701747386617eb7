"""Simulated stand-ins for the paper's (unpublished) per-item model outputs.

The paper evaluates two model pairs (thinking vs non-thinking) on MATH-500, ZebraLogic, GPQA
and Arena-Hard, but its per-item outputs are not public. This module generates, for each
(benchmark x model pair), one table in the schema of :mod:`gpac_utils.data` from a small,
documented generative model. The tables are committed under ``data/simulated/`` and are the
default data of every notebook. **They are simulated**: counts and overall accuracies match
the paper exactly; per-item behaviour, scores, token counts and per-group rates do not come
from the paper (see ``data/simulated/README.md``).

Generative model (one item ``i`` in group ``g``; all noises independent standard normal)
---------------------------------------------------------------------------------------
1. *Latent difficulty* (benchmark level, shared by both model pairs so that an ``item_id``
   means the same item in both tables)::

       d_i = mu_g + z_i                       mu_g = GroupSpec.difficulty

2. *Correctness* (table level). Each model has a latent margin::

       m_think_i   = -a_think   * d_i + o_think_g   + e_think_i
       m_nothink_i = -a_nothink * d_i + o_nothink_g + e_nothink_i

   and exactly ``round(acc * n)`` items with the largest margins are correct (ranking, so
   the accuracies equal the paper's to the item). ``o_*_g`` are the pair's group offsets;
   a negative ``o_nothink_g`` (with a non-negative ``o_think_g``) makes group ``g``
   *heterogeneous*: the non-thinking model fails there more than its difficulty suggests.
3. *Loss*: binary ``loss = think_correct & not nothink_correct`` (paper Eq. binary_loss);
   for Arena-Hard a semantic loss in (0, 1): ``sigmoid(c - m_nothink_i)``
   with ``c`` solved so that the mean loss equals ``PairSpec.mean_loss``.
4. *Scores* (uncertainty of the non-thinking answer, in [0, 1]; higher = less reliable).
   The "perceived margin" of a score is ``-a_nothink * d_i + kappa * o_nothink_g +
   rho * e_nothink_i + tau * eta_i``: ``kappa`` is how much of the group offset the score
   sees (small: scores are partly blind to the heterogeneous group, which is why marginal
   PAC fails there), ``rho`` how much of the non-thinking answer's own luck it sees,
   ``tau`` its private noise.

   * ``score_logits``  = sigmoid(c_L - s_L * perceived), ``c_L`` solved so that its mean
     equals the non-thinking error rate (calibrated in the large; most informative).
   * ``score_verbalized`` = 1 - mean of 10 confidences on the 0.1 grid, each
     ``round(10 * sigmoid(c_V + s_V * perceived + tau_trial * zeta_ik)) / 10``; ``c_V`` solved
     so that the mean confidence is ``acc + overconfidence * (1 - acc)`` (overconfident,
     coarse: values on the 0.01 grid, many ties).
   * ``score_router`` = sigmoid(c_R + s_R * standardised(d_i) + tau_R * eta_i): input only,
     a deterministic function of the latent difficulty and independent noise, with **no**
     dependence on the non-thinking answer (least calibrated: centred at ``c_R``).
5. *Tokens* (lognormal, rounded to integers >= 1)::

       think_tokens   = exp(log(median_think)   + growth_think   * d_i + sigma_think   * xi_i)
       nothink_tokens = exp(log(median_nothink) + growth_nothink * d_i + sigma_nothink * xi'_i)

   The verbalized-score queries are not counted.

Seeding: every draw comes from ``numpy.random.SeedSequence([base_seed, crc32(name)])`` with
``name`` the benchmark (item level) or ``"<benchmark>__<pair>"`` (model level) — never
Python's salted ``hash()`` — so regeneration is byte-identical.

All parameters live in ``data/simulated/specs.yaml`` beside the data card, read at import into
:data:`SPECS` (one entry per benchmark with one :class:`PairSpec` per model pair) and
:data:`SCORE_MODELS` (the score-model constants shared by all tables).
"""

from __future__ import annotations

import argparse
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import data
from ..workflow.paths import SIMULATED
from .reference import accuracy

# --------------------------------------------------------------------------------------
# The parameter table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSpec:
    """A known group: label, exact item count (as in the real benchmark), mean difficulty."""

    name: str
    n: int
    difficulty: float = 0.0


@dataclass(frozen=True)
class PairSpec:
    """One model pair on one benchmark (its overall accuracies are the paper's ``table:llm_accuracy``,
    :func:`gpac_utils.paper.reference.accuracy`, matched exactly as the count ``round(acc * n)``).

    ``a_*``: loadings of the margins on difficulty.
    ``think_offset`` / ``nothink_offset``: per-group margin offsets (missing groups: 0).
    ``mean_loss``: target mean semantic loss (Arena-Hard only; not from the paper).
    ``tokens``: (median_think, median_nothink, sigma_think, sigma_nothink, growth_think,
    growth_nothink) of the lognormal token counts.
    """

    a_think: float = 1.0
    a_nothink: float = 1.0
    think_offset: dict[str, float] = field(default_factory=dict)
    nothink_offset: dict[str, float] = field(default_factory=dict)
    mean_loss: float | None = None
    tokens: tuple[float, float, float, float, float, float] = (4000, 700, 0.5, 0.45, 0.35, 0.15)


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark: display name, type (paper table:splitting_settings), loss kind,
    size, groups (``()`` when it has none) and the pairs."""

    title: str
    kind: str
    loss: str  # "binary" or "semantic"
    n: int
    groups: tuple[GroupSpec, ...]
    pairs: dict[str, PairSpec]
    #: the group where the paper reports marginal PAC failing (None: no known groups)
    heterogeneous: str | None = None


@dataclass(frozen=True)
class ScoreModel:
    """Constants of one score's perceived margin ``-a*d + kappa*o + rho*e + tau*eta``."""

    kappa: float  # share of the group offset the score sees
    rho: float  # share of the non-thinking answer's own noise it sees
    tau: float  # private noise
    scale: float  # sigmoid slope


#: The parameter file, beside the data card (``data/simulated/README.md``).
SPECS_FILE = SIMULATED / "specs.yaml"


_RAW = yaml.safe_load(SPECS_FILE.read_text())
BASE_SEED: int = int(_RAW["base_seed"])
#: The benchmarks' parameters (one :class:`PairSpec` per model pair), from :data:`SPECS_FILE`.
SPECS: dict[str, BenchmarkSpec] = {
    b: BenchmarkSpec(
        **{key: value for key, value in s.items() if key not in ("groups", "pairs")},
        groups=tuple(GroupSpec(**g) for g in s.get("groups", ())),
        pairs={p: PairSpec(**{**v, "tokens": tuple(v["tokens"])}) for p, v in s["pairs"].items()},
    )
    for b, s in _RAW["benchmarks"].items()
}
#: Score-model constants shared by all tables (the router sees only the difficulty).
SCORE_MODELS: dict[str, ScoreModel] = {k: ScoreModel(**m) for k, m in _RAW["score_models"].items()}
#: verbalized score: number of trials, per-trial noise, share of the gap to 1 closed by
#: overconfidence (mean confidence = acc + OVERCONFIDENCE * (1 - acc))
VERBAL_TRIALS = int(_RAW["verbalized"]["trials"])
VERBAL_TRIAL_NOISE = float(_RAW["verbalized"]["trial_noise"])
OVERCONFIDENCE = float(_RAW["verbalized"]["overconfidence"])
#: router: intercept on the logit scale (fixed, not fitted: the router was trained elsewhere)
ROUTER_INTERCEPT: float = float(_RAW["router_intercept"])

# --------------------------------------------------------------------------------------
# Public names
# --------------------------------------------------------------------------------------

SIMULATED_BENCHMARKS: tuple[str, ...] = tuple(SPECS)
PAIRS: tuple[str, ...] = ("qwen", "llama")
#: model names per pair: (thinking, non-thinking)
MODELS: dict[str, tuple[str, str]] = {pair: tuple(m) for pair, m in _RAW["models"].items()}


def _check(benchmark: str, pair: str | None = None) -> BenchmarkSpec:
    if benchmark not in SPECS:
        raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {list(SIMULATED_BENCHMARKS)}")
    if pair is not None and pair not in PAIRS:
        raise ValueError(f"unknown model pair {pair!r}; choose one of {list(PAIRS)}")
    return SPECS[benchmark]


def table_path(benchmark: str, pair: str, folder: Path | None = None) -> Path:
    """``data/simulated/<benchmark>__<pair>.parquet`` (or under ``folder``)."""
    _check(benchmark, pair)
    return Path(folder or SIMULATED) / f"{benchmark}__{pair}.parquet"


def rng_for(name: str, seed: int = BASE_SEED) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable hash (CRC-32) of ``name``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(name.encode())]))


# --------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------


# The simulator's exp uses IEEE-754 basic operations only (+, -, *, rint, ldexp), which round the same
# way on every machine. numpy's own ``np.exp`` dispatches to CPU-specific SIMD code (AVX-512 vs libm
# on AVX2) whose last bit differs, and the committed tables must not depend on the CPU.
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of log(2): the low 32 bits of _LN2_HI are zero,
_LN2_LO = 1.90821492927058770002e-10  # so k * _LN2_HI is exact for |k| < 2**20
_INV_LN2 = 1.44269504088896338700e00
_EXP_TAYLOR = [1.0 / math.factorial(j) for j in range(13, -1, -1)]  # 1/13!, ..., 1/1!, 1/0!


def portable_exp(x) -> np.ndarray:
    """``exp(x)`` within 2 ulp of the exact value, bit-identical on every IEEE-754 machine.

    Range reduction ``x = k log 2 + r`` with ``|r| <= log(2) / 2`` (Cody-Waite), the Taylor
    polynomial of degree 13 in ``r`` by Horner's rule (truncation error below 1e-17 relative),
    then ``2**k`` by ``ldexp``. Inputs are the simulator's: finite, ``|x| < 700``.
    """
    x = np.asarray(x, dtype=float)
    k = np.rint(x * _INV_LN2)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = np.full_like(r, _EXP_TAYLOR[0])
    for c in _EXP_TAYLOR[1:]:
        p = p * r + c
    return np.ldexp(p, k.astype(np.int32))


def _sigmoid(x):
    return 1.0 / (1.0 + portable_exp(-np.asarray(x, dtype=float)))


def _at_mean(f, target: float, lo: float = -30.0, hi: float = 30.0) -> np.ndarray:
    """``f(c)`` at the intercept ``c`` with ``mean(f(c)) == target``, found by bisection (``f`` increasing in ``c``).

    The mean is an exactly rounded sum (``math.fsum``), so no comparison depends on the CPU.
    """
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        values = f(mid)
        if math.fsum(values.ravel()) / values.size < target:
            lo = mid
        else:
            hi = mid
    return f(0.5 * (lo + hi))


def _correct(margin: np.ndarray, acc: float) -> np.ndarray:
    """0/1 flags: exactly the ``round(acc * n)`` (half up) largest of the ``n`` margins are 1 (ties broken by
    position)."""
    order = np.argsort(-margin, kind="stable")
    out = np.zeros(margin.size, dtype=np.int8)
    out[order[: int(np.floor(acc * margin.size + 0.5))]] = 1
    return out


def items(benchmark: str, seed: int = BASE_SEED) -> pd.DataFrame:
    """Item level (shared by both pairs): ``item_id``, ``group`` (if any), latent ``difficulty``."""
    spec = _check(benchmark)
    rng = rng_for(benchmark, seed)
    out = pd.DataFrame({data.ID: [f"{benchmark}-{i:04d}" for i in range(spec.n)]})
    base = np.zeros(spec.n)
    if spec.groups:
        counts = [g.n for g in spec.groups]
        if sum(counts) != spec.n:
            raise ValueError(f"{benchmark}: group counts sum to {sum(counts)}, not {spec.n}")
        order = rng.permutation(spec.n)  # one shuffle places each item's label and mean difficulty
        out[data.GROUP] = np.repeat([g.name for g in spec.groups], counts)[order]
        base = np.repeat([g.difficulty for g in spec.groups], counts)[order]
    out["difficulty"] = base + rng.standard_normal(spec.n)
    return out


def components(benchmark: str, pair: str, seed: int = BASE_SEED) -> dict[str, np.ndarray]:
    """Every latent draw of one table (for tests and diagnostics).

    Keys: ``difficulty``, ``think_margin``, ``nothink_margin``, ``nothink_noise``,
    ``group_offset_nothink``, ``noise_<score>`` for the three scores, ``verbal_trials``
    (n x 10), ``token_noise_think``, ``token_noise_nothink``.
    """
    spec = _check(benchmark, pair)
    p = spec.pairs[pair]
    it = items(benchmark, seed)
    n = spec.n
    rng = rng_for(f"{benchmark}__{pair}", seed)
    d = it["difficulty"].to_numpy()
    grp = it[data.GROUP].to_numpy() if data.GROUP in it else np.full(n, "")
    o_t = np.array([p.think_offset.get(g, 0.0) for g in grp])
    o_n = np.array([p.nothink_offset.get(g, 0.0) for g in grp])
    # Fixed draw order: changing it changes every table.
    e_t, e_n = rng.standard_normal(n), rng.standard_normal(n)
    comp = {
        "difficulty": d,
        "group_offset_think": o_t,
        "group_offset_nothink": o_n,
        "think_margin": -p.a_think * d + o_t + e_t,
        "nothink_margin": -p.a_nothink * d + o_n + e_n,
        "nothink_noise": e_n,
    }
    comp |= {f"noise_{name}": rng.standard_normal(n) for name in SCORE_MODELS}
    comp["verbal_trials"] = rng.standard_normal((n, VERBAL_TRIALS))
    comp["token_noise_think"] = rng.standard_normal(n)
    comp["token_noise_nothink"] = rng.standard_normal(n)
    return comp


def perceived_margin(comp: dict[str, np.ndarray], a_nothink: float, score: str) -> np.ndarray:
    """The score's view of the non-thinking margin (see the module docstring)."""
    s = SCORE_MODELS[score]
    return (
        -a_nothink * comp["difficulty"]
        + s.kappa * comp["group_offset_nothink"]
        + s.rho * comp["nothink_noise"]
        + s.tau * comp[f"noise_{score}"]
    )


def simulated_router_score(difficulty: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Input-only router score of the simulator: a fixed function of the latent difficulty and its own noise.

    It takes no argument about the non-thinking answer, so it cannot depend on whether that
    answer is correct (beyond what the difficulty implies).

    Parameters
    ----------
    difficulty, noise : numpy.ndarray
        Latent difficulty and the router's standard-normal noise, per item.

    Returns
    -------
    numpy.ndarray
        Scores in (0, 1).
    """
    s = SCORE_MODELS["score_router"]
    # mean and standard deviation from exactly rounded sums (CPU-independent)
    mean = math.fsum(difficulty) / difficulty.size
    sd = math.sqrt(math.fsum((difficulty - mean) ** 2) / difficulty.size)
    z = (difficulty - mean) / sd
    return _sigmoid(ROUTER_INTERCEPT + s.scale * z + s.tau * noise)


def simulate_table(benchmark: str, pair: str, seed: int = BASE_SEED) -> pd.DataFrame:
    """Simulate one (benchmark x pair) table in the schema of :mod:`gpac_utils.data`."""
    spec = _check(benchmark, pair)
    p = spec.pairs[pair]
    comp = components(benchmark, pair, seed)
    out = items(benchmark, seed).drop(columns="difficulty")  # item_id and group: comp holds the difficulty

    if spec.loss == "binary":
        t = _correct(comp["think_margin"], accuracy(benchmark, pair, "think"))
        nt = _correct(comp["nothink_margin"], accuracy(benchmark, pair, "nothink"))
        out[data.LOSS] = data.binary_loss(t, nt)
        out[data.THINK_CORRECT] = t
        out[data.NOTHINK_CORRECT] = nt
        err_rate, acc_n = 1.0 - nt.mean(), nt.mean()
    else:  # semantic loss in (0, 1): larger when the non-thinking margin is low
        m = comp["nothink_margin"]
        out[data.LOSS] = _at_mean(lambda c: _sigmoid(c - m), p.mean_loss)
        err_rate, acc_n = p.mean_loss, 1.0 - p.mean_loss

    # tokens: lognormal, rounded to integers >= 1
    med_t, med_n, sig_t, sig_n, gr_t, gr_n = p.tokens
    d = comp["difficulty"]
    for col, median, growth, sigma, noise in (
        (data.THINK_TOKENS, med_t, gr_t, sig_t, comp["token_noise_think"]),
        (data.NOTHINK_TOKENS, med_n, gr_n, sig_n, comp["token_noise_nothink"]),
    ):
        out[col] = np.maximum(1, np.rint(portable_exp(math.log(median) + growth * d + sigma * noise))).astype(np.int64)

    # logits-based: calibrated in the large (mean score = non-thinking error rate)
    pl = SCORE_MODELS["score_logits"].scale * perceived_margin(comp, p.a_nothink, "score_logits")
    out["score_logits"] = _at_mean(lambda c: _sigmoid(c - pl), err_rate)

    # verbalized: 10 overconfident confidences on the 0.1 grid
    pv = SCORE_MODELS["score_verbalized"].scale * perceived_margin(comp, p.a_nothink, "score_verbalized")[:, None]
    trials = VERBAL_TRIAL_NOISE * comp["verbal_trials"]
    conf = _at_mean(lambda c: _sigmoid(c + pv + trials), acc_n + OVERCONFIDENCE * (1.0 - acc_n))
    tenths = np.rint(10.0 * conf).astype(np.int64)  # 0..10
    # mean confidence = sum(tenths) / 100, so the score lies on the 0.01 grid
    out["score_verbalized"] = (100 - tenths.sum(axis=1)).astype(float) / 100.0

    # router: input only
    out["score_router"] = simulated_router_score(d, comp["noise_score_router"])
    return out


def write_all(folder: Path | None = None, seed: int = BASE_SEED) -> list[Path]:
    """Regenerate all 8 tables (4 benchmarks x 2 pairs) as zstd parquet files."""
    tables = [(b, p) for b in SIMULATED_BENCHMARKS for p in PAIRS]
    return [data.write_table(simulate_table(b, p, seed=seed), table_path(b, p, folder)) for b, p in tables]


def load_simulated(benchmark: str, pair: str, folder: Path | None = None) -> pd.DataFrame:
    """Read one committed simulated table, validated by :func:`gpac_utils.data.read_table`.

    Parameters
    ----------
    benchmark, pair : str
        A key of :data:`SPECS` and a model pair.
    folder : Path, optional
        Where the tables live (default ``data/simulated/``).

    Returns
    -------
    pandas.DataFrame
    """
    spec = _check(benchmark, pair)
    return data.read_table(table_path(benchmark, pair, folder), require_group=bool(spec.groups), require_tokens=True)


def main(argv=None) -> int:
    """``python -m gpac_utils.paper.simulate [--folder DIR] [--seed N]``: regenerate the stand-ins."""
    ap = argparse.ArgumentParser(
        prog="python -m gpac_utils.paper.simulate",
        description="Regenerate the simulated stand-in tables (byte for byte at the default seed).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--folder", type=Path, help="output folder (default: data/simulated)")
    ap.add_argument("--seed", type=int, default=BASE_SEED, help="base seed of every table")
    a = ap.parse_args(argv)
    for path in write_all(a.folder, a.seed):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
