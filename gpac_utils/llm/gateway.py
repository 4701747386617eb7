"""A certified routing strategy for LiteLLM's ``Router`` (the optional ``gateway`` extra).

LiteLLM routes a request for a *model group* to one of the group's deployments; a custom routing
strategy (a subclass of ``litellm.types.router.CustomRoutingStrategyBase``, registered with
``Router.register_plugin`` — ``set_custom_routing_strategy`` in older releases) picks that
deployment. :class:`CertifiedRoutingStrategy` picks it from a certificate:

1. the request's pre-call score (the certificate's score entry, :attr:`gpac_utils.scores.Score.serve`,
   on the last user message; for ``score_router`` the certificate's hash-checked router model);
2. the request's group from its ``metadata`` (key ``group_key``; G-PAC certificates);
3. the deployment whose ``model_info.gpac_route`` is ``nothink`` when the score is at most the
   group's threshold, else the ``think`` one. A group whose status is *always think* (too few
   items, no feasible threshold) has threshold ``-inf`` and always thinks; a request without a
   group, or with a group the certificate does not know, thinks with status *unseen at calibration*.

Each decision is appended to :attr:`CertifiedRoutingStrategy.decisions` (group, status, score,
threshold, route, deployment id, the certificate's SHA-256). With a drift store (``drift=``, the
configuration's ``gpac.drift`` block: :mod:`gpac_utils.llm.drift`), a group under a drift alarm
gets the ``think`` deployment with status ``drift alarm: always think``; labels come back through
:meth:`CertifiedRoutingStrategy.feedback`. Only pre-call scores can be served here (a cascade score needs
the cheap answer first: :class:`gpac_utils.llm.serve.CertifiedRouter`).

Importing LiteLLM: set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` first, or it fetches its model-cost
map from the network at import (:func:`build_router` sets it when unset).

The configuration (``docs/deploying.md``) is LiteLLM's ``model_list`` plus a ``gpac`` block:
``certificate`` (path), optional ``score_model`` (path; default: as recorded in the certificate),
``group_key`` (default ``group``). The score reads the last user message, in each request column it
names (:attr:`~gpac_utils.scores.Score.request_columns`, and the router model's text column).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..checks import ParameterError
from .drift import DriftStore
from .serve import CertifiedRouter, ServeOptions

__all__ = ["ROUTES", "NO_GROUP", "CertifiedRoutingStrategy", "build_router"]

#: The ``model_info.gpac_route`` values a model group's deployments carry.
ROUTES = ("nothink", "think")
#: The group of a request whose metadata names none (unknown to every certificate: it thinks).
NO_GROUP = "(no group)"


def _base():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    from litellm.types.router import CustomRoutingStrategyBase

    return CustomRoutingStrategyBase


def _last_user_text(messages) -> str:
    for m in reversed(list(messages or [])):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, Mapping))
            return "" if content is None else str(content)
    return ""


class CertifiedRoutingStrategy(_base()):
    """Pick the cheap or the thinking deployment of a model group from a certificate (module description).

    Parameters
    ----------
    certificate : dict, str or path
        The thresholds file (``gpac calibrate``) of a pre-call score.
    model_list : list of dict
        LiteLLM's deployments; those of a model group carry ``model_info.gpac_route`` ``nothink``
        or ``think`` (one of each).
    score_model : path, optional
        The router model file (default: as the certificate records it).
    embedder : object, optional
        The embedder of the router model (default: its registry entry's).
    group_key : str, default "group"
        The request ``metadata`` field naming its group.
    drift : DriftStore or path, optional
        The drift alarms' store that every worker shares (:mod:`gpac_utils.llm.drift`); labels
        come back through :meth:`feedback`.
    """

    def __init__(self, certificate, model_list, *, score_model=None, embedder=None, group_key="group", drift=None):
        options = ServeOptions(score_model=score_model, embedder=embedder)
        self.router = r = CertifiedRouter(certificate, None, None, options, drift=drift)
        self.text_columns = sorted({*r.score.request_columns, *([r.score_model.text] if r.score_model else [])})
        self.group_key = group_key
        r.decide(pd.DataFrame(columns=["item_id", r.group_col, *self.text_columns]))  # refuses a cascade score now
        self.deployments: dict[str, dict[str, dict]] = {}
        for d in model_list:
            route = (d.get("model_info") or {}).get("gpac_route")
            if route is None:
                continue
            if route not in ROUTES:
                raise ParameterError(f"model_list: model_info.gpac_route must be one of {list(ROUTES)}, got {route!r}")
            self.deployments.setdefault(d["model_name"], {})[route] = d
        for name, pair in self.deployments.items():
            if set(pair) != set(ROUTES):
                raise ParameterError(f"model_list: model group {name!r} needs one 'nothink' and one 'think' deployment")
        if not self.deployments:
            raise ParameterError("model_list: no deployment has model_info.gpac_route ('nothink' or 'think')")
        self.decisions: list[dict] = []

    def decide(self, model: str, messages=None, request_kwargs=None) -> dict:
        """The decision for one request: group, status, score, threshold, route_nothink and the deployment."""
        if model not in self.deployments:
            raise ParameterError(f"model: {model!r} is not a certified model group; they are {list(self.deployments)}")
        metadata = (request_kwargs or {}).get("metadata") or {}
        group = metadata.get(self.group_key)
        group = NO_GROUP if group is None or (isinstance(group, float) and math.isnan(group)) else str(group)
        text = _last_user_text(messages)
        request = pd.DataFrame(
            {"item_id": [len(self.decisions)], self.router.group_col: [group], **{c: [text] for c in self.text_columns}}
        )
        row = self.router.decide(request).iloc[0]
        route_nothink = bool(row["route_nothink"])
        deployment = self.deployments[model]["nothink" if route_nothink else "think"]
        decision = {
            "group": row["group"],
            "status": row["status"],
            "score": float(row["score"]),
            "threshold": float(row["threshold"]),
            "route_nothink": route_nothink,
            "deployment": (deployment.get("model_info") or {}).get("id"),
            "certificate_sha256": self.router.certificate_sha256,
        }
        self.decisions.append(decision)
        return deployment

    def feedback(self, records, losses):
        """Feed labelled decision records to the drift alarm (:meth:`gpac_utils.llm.serve.CertifiedRouter.feedback`)."""
        return self.router.feedback(records, losses)

    def get_available_deployment(
        self, model, messages=None, input=None, specific_deployment=False, request_kwargs=None
    ):
        return self.decide(model, messages, request_kwargs)

    async def async_get_available_deployment(
        self, model, messages=None, input=None, specific_deployment=False, request_kwargs=None
    ):
        return self.decide(model, messages, request_kwargs)


def build_router(config: Mapping, *, base: Path | None = None, embedder=None):
    """A ``litellm.Router`` for a configuration (module description) with the certified strategy registered.

    Parameters
    ----------
    config : mapping
        ``model_list`` and ``gpac`` (``certificate``, optional ``score_model``, ``group_key`` and
        ``drift``: ``{store: path, level: 0.05, horizon: 10000}``, :class:`~gpac_utils.llm.drift.DriftStore`);
        relative paths are read from ``base``.
    base : path, optional
        The folder the configuration's paths are relative to (default: the working directory).
    embedder : object, optional
        Passed to :class:`CertifiedRoutingStrategy`.

    Returns
    -------
    (litellm.Router, CertifiedRoutingStrategy)
    """
    _base()
    from litellm import Router

    if "gpac" not in config or "certificate" not in config["gpac"]:
        raise ParameterError("config: needs a 'gpac' block with 'certificate' (the thresholds file)")
    g = dict(config["gpac"])
    where = Path(base) if base is not None else Path.cwd()
    certificate = where / g.pop("certificate")
    score_model = g.pop("score_model", None)
    drift = _drift_store(g.pop("drift", None), where)
    unknown = sorted(set(g) - {"group_key"})
    if unknown:
        raise ParameterError(f"config: gpac.{unknown[0]} is not a setting (certificate, score_model, group_key, drift)")
    strategy = CertifiedRoutingStrategy(
        certificate,
        config["model_list"],
        score_model=None if score_model is None else where / score_model,
        embedder=embedder,
        drift=drift,
        **g,
    )
    router = Router(model_list=[dict(d) for d in config["model_list"]])
    register = getattr(router, "register_plugin", None) or router.set_custom_routing_strategy
    register(strategy)
    return router, strategy


def _drift_store(block, where: Path):
    """The configuration's ``gpac.drift`` block as a :class:`~gpac_utils.llm.drift.DriftStore` (None: no alarm)."""
    if block is None:
        return None
    if not isinstance(block, Mapping) or "store" not in block:
        raise ParameterError("config: gpac.drift needs 'store' (the SQLite file), and optionally 'level' and 'horizon'")
    unknown = sorted(set(block) - {"store", "level", "horizon"})
    if unknown:
        raise ParameterError(f"config: gpac.drift.{unknown[0]} is not a setting (store, level, horizon)")
    return DriftStore(where / block["store"], **{k: block[k] for k in ("level", "horizon") if k in block})
