"""Uncertainty scores and the generation roles that produce them: two registries.

:data:`ROLES`
    The generations per item (:mod:`gpac_utils.llm.generation`): ``think`` (the thinking model's
    answer), ``nothink`` (the non-thinking model's answer and its token logprobs) and
    ``verbalized`` (the non-thinking model's stated confidences).
:data:`SCORES`
    The score columns of the data schema (:mod:`gpac_utils.data`), each with the role whose
    generations it is computed from (``None``: no generation, e.g. a router that reads the
    question) and its cost form: how the STP metric counts the cost of routing with it
    (:func:`gpac_utils.metrics.stp`; ``"router"``: the score is known before any model runs,
    App. F; ``"cascade"``: the non-thinking model runs first). A column that is not registered
    is costed in the cascade form; a score that samples generations of its own may count them
    (:attr:`Score.counts_role`, :meth:`Score.stp`). An entry also owns how its score is computed:
    offline, from a finished generation run (:attr:`Score.offline`,
    :func:`gpac_utils.llm.scoring.score_run`, which loads the roles its scores read and no other),
    and when serving (:attr:`Score.serve`, :class:`gpac_utils.llm.serve.CertifiedRouter`, whose
    public :meth:`~gpac_utils.llm.serve.CertifiedRouter.generate` samples a role there), with the
    request columns it reads; :attr:`Score.pre_call` says whether it is known from the request
    alone, before any model answers.

A new score is one :meth:`~gpac_utils.registry.Registry.register` call, a new role another: a role
that samples ``k`` answers declares it (:attr:`Role.n_samples`) and the prompt it is sent
(:attr:`Role.messages` or :attr:`Role.conversation`) (``docs/extending.md``);
the notebook configs' score lists are checked against :data:`SCORES` by ``tests/test_registry.py``.

Examples
--------
>>> SCORES["score_router"].cost_form, SCORES["score_logits"].role
('router', 'nothink')
>>> SCORES.names(paper=True)
['score_logits', 'score_verbalized', 'score_router']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import metrics
from .checks import DataError, ParameterError, check_choice, check_int
from .registry import Registry

__all__ = ["Role", "ROLES", "Score", "SCORES", "score_stp"]


@dataclass(frozen=True)
class Role:
    """A generation per item.

    Parameters
    ----------
    name : str
        Its name in the generation records (``role`` column).
    model : {"think", "nothink"}
        Which model of the pair generates it.
    description : str
        What it is.
    walk_sampling : mapping, default {}
        Its sampling in the walk (:class:`gpac_utils.llm.engines.Sampling` fields but ``n``;
        :func:`gpac_utils.llm.generation.walk_samplings`). A model pair's is the model's recommended
        sampling (:func:`gpac_utils.llm.generation.pair_samplings`).
    n_samples : int, default 1
        The answers it samples per item (the sampling's ``n``), in the walk, for a model pair and
        when serving.
    messages : tuple of str, default ()
        The items' (or requests') columns of its conversation, the first one present
        (:meth:`prompt_column`); ``()``: ``messages_<name>``, its own column only. A role whose
        columns are all missing is refused (no other prompt is sent in its place).
    confidences : bool, default False
        It samples stated confidences: the generation options ``n_verbalized`` and
        ``verbalized_max_tokens`` replace its ``n_samples`` and ``max_tokens``.
    conversation : callable or None, default None
        ``conversation(items, folder, shard) -> list``: its conversations, built from the items and
        the roles generated before it (``verbalized``: from the first ``nothink`` answer), instead
        of read from :attr:`messages`.
    walk_messages : callable or None, default None
        ``walk_messages(problem) -> list``: its conversation for a walk problem (the walk's prompts,
        :func:`gpac_utils.llm.grading.walk_messages`). A walk benchmark's items get the first such
        role's as ``messages`` and each other's as ``messages_<role>``
        (:func:`gpac_utils.llm.benchmarks.load_benchmark`); ``None``: the role has no walk prompt of
        its own.
    """

    name: str
    model: str
    description: str
    walk_sampling: Mapping[str, Any] = field(default_factory=dict)
    n_samples: int = 1
    messages: tuple[str, ...] = ()
    confidences: bool = False
    conversation: Callable | None = None
    walk_messages: Callable[[str], list] | None = None

    def __post_init__(self) -> None:
        if "n" in self.walk_sampling:
            raise ValueError(f"walk_sampling: {self.name}'s answers per item are its n_samples, not n")
        check_int("n_samples", self.n_samples, 1)
        if not isinstance(self.messages, tuple) or not all(isinstance(c, str) for c in self.messages):
            raise ParameterError(
                f"messages: a tuple of column names, e.g. ('messages_{self.name}',); got {self.messages!r}"
            )

    def sampling(self, base, max_tokens=None, n_verbalized=None, verbalized_max_tokens=None):
        """``base`` (a :class:`~gpac_utils.llm.engines.Sampling`) with its ``n_samples`` and the generation
        options that apply to it."""
        base = base.with_(max_tokens=max_tokens, n=self.n_samples)
        return base.with_(n=n_verbalized, max_tokens=verbalized_max_tokens) if self.confidences else base

    def prompt_column(self, columns, where: str = "items") -> str:
        """The first of its :attr:`messages` columns among ``columns``; a one-line
        :class:`~gpac_utils.checks.DataError` naming the role and its column when there is none."""
        named = self.messages or (f"messages_{self.name}",)
        found = [c for c in named if c in columns]
        if not found:
            raise DataError(
                f"{where}: role {self.name!r} is sent its prompt from the {' or '.join(map(repr, named))} column, "
                f"which they lack (Role.messages or Role.conversation declare another); they have {list(columns)}"
            )
        return found[0]


def _lazy(module: str, name: str) -> Callable:
    """``module.name``, imported when first called (the scores' and roles' computations live in
    :mod:`gpac_utils.llm`, which imports this module)."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = name, f"{module}.{name}", f"{module}.{name} (imported when called)"
    return call


def _computed(offline: str, serve: str, *request_columns: str) -> dict:
    """A score's computations in :mod:`gpac_utils.llm.scoring` (imported when called)."""
    module = "gpac_utils.llm.scoring"
    return {"offline": _lazy(module, offline), "serve": _lazy(module, serve), "request_columns": request_columns}


#: The generation roles, in the order they are generated.
ROLES: Registry[Role] = Registry(
    "role",
    [
        Role(
            "think",
            "think",
            "the thinking model's answer",
            {"temperature": 0.0, "max_tokens": 64},
            messages=("messages_think", "messages"),  # a benchmark's prompt, sent to both models
            walk_messages=_lazy("gpac_utils.llm.grading", "walk_think_messages"),
        ),
        Role(
            "nothink",
            "nothink",
            "the non-thinking model's answer and its token logprobs",
            {"temperature": 1.0, "max_tokens": 16},
            messages=("messages_nothink", "messages"),
            walk_messages=_lazy("gpac_utils.llm.grading", "walk_nothink_messages"),
        ),
        Role(
            "verbalized",
            "nothink",
            "the non-thinking model's stated confidences",
            {"temperature": 0.7, "top_p": 0.95, "max_tokens": 12},
            n_samples=3,
            confidences=True,
            conversation=_lazy("gpac_utils.llm.generation", "verbalized_conversations"),
        ),
    ],
)


@dataclass(frozen=True)
class Score:
    """An uncertainty score column (larger = less certain non-thinking answer).

    Parameters
    ----------
    column : str
        Its column in the data schema (``score_*``).
    role : str or None
        The :data:`ROLES` entry whose generations it is computed from; ``None``: no generation.
    cost_form : {"cascade", "router"}
        How STP counts its cost (:func:`gpac_utils.metrics.stp`).
    description : str
        What it is.
    paper : bool, default False
        One of the paper's three scores (the simulated stand-ins and the generated tables have them).
    offline : callable or None, default None
        ``offline(generations) -> pandas.Series``: the score per ``item_id`` from its role's
        generation table (:func:`gpac_utils.llm.records.load_generations`), or a report with that
        Series as ``scores`` and a ``summary()`` line (:func:`gpac_utils.llm.scoring.verbalized_scores`);
        ``None``: not computed from generations alone (a learned router needs the run's losses:
        :func:`gpac_utils.llm.scoring.score_run` fits it).
    serve : callable or None, default None
        ``serve(router, requests, cheap_answers) -> numpy.ndarray``: the score of each request when
        serving (:class:`gpac_utils.llm.serve.CertifiedRouter`; ``cheap_answers`` maps ``item_id``
        to the non-thinking model's ``[(answer, completion), ...]``, ``None`` for a pre-call score;
        ``router.generate(role, requests)`` samples a role); ``None``: a router cannot compute it,
        and a certificate calibrated on it is refused.
    request_columns : tuple of str, default ()
        The request columns ``serve`` reads beyond ``item_id`` and the conversation.
    counts_role : bool, default False
        Its cost counts its role's generations (:meth:`stp`); False: the paper's STP (App. F.3),
        which counts the candidate and the reference answer only.
    """

    column: str
    role: str | None
    cost_form: str
    description: str
    paper: bool = False
    offline: Callable | None = None
    serve: Callable | None = None
    request_columns: tuple[str, ...] = ()
    counts_role: bool = False

    def __post_init__(self) -> None:
        if not self.column.startswith("score_"):
            raise ValueError(f"column: a score column starts with 'score_', got {self.column!r}")
        if self.role is not None or self.counts_role:
            ROLES.check(self.role, "role")
        check_choice("cost_form", self.cost_form, metrics.STP_FORMS)

    @property
    def name(self) -> str:
        """Its column (the registry key)."""
        return self.column

    @property
    def pre_call(self) -> bool:
        """Known from the request alone, before any model answers (its cost form is ``"router"``)."""
        return self.cost_form == "router"

    def stp(self, route, think_tokens, nothink_tokens) -> float:
        """The saved token percentage of routing with it (:func:`gpac_utils.metrics.stp` in its cost form),
        less, when it :attr:`counts_role`, its role's ``n_samples`` generations per item, each costed as
        an answer of the role's model (``think_tokens`` or ``nothink_tokens``).

        Examples
        --------
        >>> SCORES["score_logits"].stp([True, False], [100, 100], [25, 25])
        0.25
        """
        saved = metrics.stp(route, think_tokens, nothink_tokens, self.cost_form)
        if not self.counts_role:
            return saved
        role = ROLES[self.role]
        own = think_tokens if role.model == "think" else nothink_tokens
        return saved - role.n_samples * float(np.mean(np.divide(own, think_tokens, dtype=float)))


#: The score columns, the paper's three first.
SCORES: Registry[Score] = Registry(
    "score",
    [
        Score(
            "score_logits",
            "nothink",
            "cascade",
            "mean token log-probability of the non-thinking answer",
            True,
            **_computed("logits_scores", "serve_logits"),
        ),
        Score(
            "score_verbalized",
            "verbalized",
            "cascade",
            "the non-thinking model's stated confidence",
            True,
            **_computed("verbalized_scores", "serve_verbalized", "question"),
        ),
        Score(
            "score_router",
            None,
            "router",
            "a router trained on the question (cross-fitted in the tables; served by its fitted model)",
            True,
            serve=_lazy("gpac_utils.llm.router_model", "serve_router"),
            request_columns=("question",),  # the prompt's text (a fitted model's ``text`` column, by default)
        ),
        Score("score_router_crossfit", None, "router", "router, cross-fitted on all items (notebook 02)"),
        Score("score_router_disjoint", None, "router", "router trained on the other half only (notebook 02)"),
        Score("score_disagree", None, "cascade", "share of a panel of other models that disagree (notebook 31)"),
    ],
    key="column",
)


def score_stp(route, think_tokens, nothink_tokens, column: str) -> float:
    """The saved token percentage of routing with score ``column``: its :data:`SCORES` entry's
    (:meth:`Score.stp`), a cascade's (:func:`gpac_utils.metrics.stp`) if unregistered."""
    if column in SCORES:
        return SCORES[column].stp(route, think_tokens, nothink_tokens)
    return metrics.stp(route, think_tokens, nothink_tokens, "cascade")
