"""Certified routing in LiteLLM (the optional ``gateway`` extra): its ``Router`` and its proxy server.

A model group (LiteLLM's ``model_name``) is *certified* when it has two deployments, one whose
``model_info.gpac_route`` is ``nothink`` (the cheap model) and one ``think``. For each request to it
the decision is the certificate's (:class:`gpac_utils.llm.serve.CertifiedRouter`, built with
:meth:`~gpac_utils.llm.serve.CertifiedRouter.for_decisions`):

1. the request's pre-call score (the certificate's score entry, :attr:`gpac_utils.scores.Score.serve`,
   on the text of the last user message, in every column the score reads; for ``score_router`` the
   certificate's hash-checked router model);
2. the request's group from its ``metadata`` (key ``group_key``; G-PAC certificates); for a certificate
   of several groupings (``Method.groups == "collection"``: Shift-G-PAC, Min-G-PAC, Path-G-PAC) its label
   of each grouping, ``metadata[<column>]`` for each of the certificate's group columns
   (:attr:`~gpac_utils.certificate.Certificate.group_columns`; ``group_key`` is refused), and its cell.
   The caller chooses them: the guarantee for a group holds only if the group is assigned by the rule
   used at calibration, set by the operator and not chosen by the caller;
3. the ``nothink`` deployment when the score is at most the group's threshold, else the ``think``
   one. A group whose status is *always think* (too few items, no feasible threshold) has threshold
   ``-inf`` and always thinks; a request without a group, or with a group the certificate does not
   know, thinks with status *unseen at calibration* (a collection's: ``unseen at calibration: no
   '<column>'``, ``unseen at calibration: group '<grouping>=<label>'``, or a cell not calibrated: the
   rules of :mod:`gpac_utils.llm.serve`); a request without a user message, or whose
   text is ``None``, empty, blank or only non-text parts (an image), thinks with status
   :data:`NO_TEXT` (score ``nan``: nothing was scored). A chat ending in an assistant turn is
   scored on the last user message before it.

The score is of the last user message's text, so the certificate's guarantee transfers only when
that text is distributed like the certificate's text column (``provenance.score_model.text``):
same template, single turn; a request with another template, a system prompt or earlier turns
gets another score, and the certificate says nothing about it.

**Each decision is a record** (:data:`~gpac_utils.llm.serve.DECISION_FIELDS`: request id, group (a
collection's: the cell, ``subject=algebra & language=en``), status, score, threshold, route, the
certificate's SHA-256, plus the ``deployment`` id) that leaves with the request's own response: in
the response's hidden parameters (``response._hidden_params["gpac_decision"]``) and as ``x-gpac-*``
headers (:data:`HEADERS`; in the proxy, HTTP response headers, numbers as Python writes them:
``nan``, ``-inf``), and goes to the logger :data:`~gpac_utils.llm.serve.DECISION_LOGGER` as strict
JSON (``null`` for them). Nothing is kept in memory. The request id is LiteLLM's call id, one rule
for the proxy and ``litellm.Router``: the proxy's ``x-litellm-call-id`` header; in the router
returned by :func:`build_router`, the ``litellm_call_id`` the call is given, else one drawn before
routing, which the response carries as ``response._hidden_params["litellm_call_id"]``. Only a
decision made outside LiteLLM (:meth:`CertifiedRoutingStrategy.decide` without a call id) takes
``metadata.request_id``, else a new UUID.

**A request the certificate sends to the thinking model is never answered by the cheap one.** A
retry calls the same deployment again (the decision is a function of the request); a configuration
with fallbacks from a certified model group (``router_settings`` or ``litellm_settings``:
``fallbacks``, ``context_window_fallbacks``, ``content_policy_fallbacks``, or any
``default_fallbacks``) is refused when the router or the proxy hook is built, and a proxy request
that names its own ``fallbacks`` for a certified group is refused (HTTP 400).

Two ways to run it, from one configuration (``docs/deploying.md``): LiteLLM's ``model_list`` plus
a ``gpac`` block (``certificate``, optional ``score_model``, ``group_key`` and ``drift``; a collection
certificate refuses ``group_key`` and ``drift``):

* :func:`build_router`: a ``litellm.Router`` with :class:`CertifiedRoutingStrategy` registered
  (``Router.register_plugin``);
* :class:`CertifiedProxyHook`: the LiteLLM proxy server's callback (``litellm --config
  config.yaml``, named in ``litellm_settings.callbacks``); its ``async_pre_call_hook`` sets the
  request's ``model`` to the chosen deployment's ``model_info.id`` (which the proxy calls as that
  one deployment) and its ``async_post_call_response_headers_hook`` returns the headers.

Only pre-call scores can be served here (a cascade score needs the cheap answer first:
:class:`gpac_utils.llm.serve.CertifiedRouter`). Concurrent requests are scored in batches: a request
that arrives while the embedder is busy joins the next batch (``batch=False``: one at a time). A
batch computes the same function, but a sentence-transformers embedder pads a batch, which can move
an embedding in its last bits; see ``docs/performance.md`` for the measured difference.

Importing LiteLLM: set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` first, or it fetches its model-cost
map from the network at import (this module sets it when unset).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from ..calibrate import ALL
from ..checks import DataError, ParameterError
from .drift import DriftStore
from .serve import DECISION_FIELDS, NO_GROUP, ROUTES, CertifiedRouter, ServeOptions

__all__ = [
    "ROUTES",
    "NO_GROUP",
    "NO_TEXT",
    "HEADERS",
    "CertifiedRoutingStrategy",
    "CertifiedProxyHook",
    "build_router",
    "headers",
    "localhost_guard",
    "read_gateway_config",
]

#: The status of a request without user text (no user message, or an empty or blank one): it thinks.
NO_TEXT = "always think: no user text"
#: The response header of each decision field (and of the deployment id).
HEADERS = {f: "x-gpac-" + f.replace("_", "-") for f in (*DECISION_FIELDS, "deployment")}
#: The fallback settings refused for a certified model group.
FALLBACK_SETTINGS = ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks")
_SAFE = " !#$&'()*+,-./:;<=>?@[]^_`{|}~"  # printable ASCII kept as is in a header; the rest percent-encoded

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any LiteLLM import: no network


def _base():
    from litellm.types.router import CustomRoutingStrategyBase

    return CustomRoutingStrategyBase


def _last_user_text(messages) -> str:
    for m in reversed(list(messages or [])):
        if isinstance(m, Mapping) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return " ".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
            return "" if content is None else str(content)
    return ""


def headers(record: Mapping) -> dict[str, str]:
    """The ``x-gpac-*`` response headers of a decision record (values percent-encoded UTF-8 where not
    printable ASCII; numbers as Python writes them: ``nan``, ``-inf``)."""
    return {HEADERS[k]: quote(str(record[k]), safe=_SAFE) for k in HEADERS if k in record}


def _fallback_sources(settings: Mapping | None) -> set[str]:
    out = set()
    for key in FALLBACK_SETTINGS:
        for entry in (settings or {}).get(key) or []:
            if isinstance(entry, Mapping):
                out |= {str(k) for k in entry}
    return out


class CertifiedRoutingStrategy(_base()):
    """Pick the cheap or the thinking deployment of a certified model group from a certificate (module description).

    Parameters
    ----------
    certificate : Certificate, dict, str or path
        The thresholds file (``gpac calibrate``) of a pre-call score.
    model_list : list of dict
        LiteLLM's deployments; those of a certified model group carry ``model_info.gpac_route``
        ``nothink`` or ``think`` (one of each) and a ``model_info.id``.
    score_model : path, optional
        The router model file (default: as the certificate records it).
    embedder : object, optional
        The embedder of the router model (default: its registry entry's).
    group_key : str, optional
        The request ``metadata`` field naming its group (default ``"group"``). Refused with a collection
        certificate: a request names its label of each grouping in ``metadata[<column>]``, one key per
        column of :attr:`CertifiedRouter.group_columns <gpac_utils.llm.serve.CertifiedRouter.group_columns>`
        (:attr:`group_keys`).
    settings : mapping, optional
        The configuration's ``router_settings`` and ``litellm_settings`` merged: fallbacks from a
        certified model group are refused.
    batch : bool, default True
        Score concurrent requests together (module description).

    Raises
    ------
    ParameterError, DataError
        At build, in one line: a deployment list without a certified group, a group without both
        routes or ids, fallbacks from a certified group, a certificate on a cascade score, a
        ``score_router`` certificate without its model, an embedder of another name, ``group_key`` or
        ``drift`` with a collection certificate.
    """

    def __init__(
        self,
        certificate,
        model_list,
        *,
        score_model=None,
        embedder=None,
        group_key: str | None = None,
        settings: Mapping | None = None,
        batch: bool = True,
        drift=None,
    ):
        options = ServeOptions(score_model=score_model, embedder=embedder)
        self.router = r = CertifiedRouter.for_decisions(certificate, options, drift=drift)
        if not r.score.pre_call:
            raise ParameterError(
                f"certificate: score {r.score.column!r} needs the cheap model's answer before the decision; a gateway "
                "decides before any call (a pre-call score, cost form 'router'): serve it with CertifiedRouter.serve"
            )
        if r._cells and group_key is not None:
            raise ParameterError(
                f"group_key: a {r.certificate.method} certificate reads a label per grouping, each from the request "
                f"metadata key of its column {list(r.group_columns)}: remove group_key"
            )
        group_key = "group" if group_key is None and not r._cells else group_key
        if not r._cells and (not isinstance(group_key, str) or not group_key):
            raise ParameterError(f"group_key: must be a non-empty string, got {group_key!r}")
        if NO_GROUP in r._thresholds:  # the label of a request without a group must not name a certified group
            raise ParameterError(
                f"certificate: has a group named {NO_GROUP!r}, the label the gateway gives a request without a group; "
                "rename that group and recalibrate"
            )
        self.group_key, self.batch = group_key, bool(batch)
        #: The request ``metadata`` keys its groups are read from: ``(group_key,)``, or a collection's group columns.
        self.group_keys = tuple(r.group_columns) if r._cells else (group_key,)
        self.deployments: dict[str, dict[str, dict]] = {}
        for k, d in enumerate(model_list or []):
            info = d.get("model_info") or {}
            route = info.get("gpac_route")
            if route is None:
                continue
            if route not in ROUTES:
                raise ParameterError(
                    f"model_list[{k}]: model_info.gpac_route must be one of {list(ROUTES)}, got {route!r}"
                )
            if not info.get("id"):
                raise ParameterError(
                    f"model_list[{k}]: a certified deployment needs a model_info.id (its name in records)"
                )
            pair = self.deployments.setdefault(str(d["model_name"]), {})
            if route in pair:
                raise ParameterError(f"model_list[{k}]: model group {d['model_name']!r} has two {route!r} deployments")
            pair[route] = d
        for name, pair in self.deployments.items():
            if set(pair) != set(ROUTES):
                raise ParameterError(f"model_list: model group {name!r} needs one 'nothink' and one 'think' deployment")
        if not self.deployments:
            raise ParameterError("model_list: no deployment has model_info.gpac_route ('nothink' or 'think')")
        self.ids = {n: {r: p[r]["model_info"]["id"] for r in ROUTES} for n, p in self.deployments.items()}
        certified = set(self.deployments) | {i for p in self.ids.values() for i in p.values()}
        settings = dict(settings or {})
        bad = sorted(_fallback_sources(settings) & certified)
        if bad:
            raise ParameterError(
                f"fallbacks: {bad[0]!r} is a certified model group (or one of its deployments); a fallback would let "
                "another model answer a request the certificate sends to the thinking one: remove it"
            )
        if settings.get("default_fallbacks"):
            raise ParameterError(
                "default_fallbacks: would apply to the certified model groups too (another model answering a request "
                "the certificate sends to the thinking one): remove it, or name fallbacks per group"
            )
        self._pending: list[tuple[str, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    # -- scoring ----------------------------------------------------------------------------------
    def score_texts(self, texts: list[str]) -> list[float]:
        """The certificate's score of each text (as :meth:`CertifiedRouter.decide` computes it)."""
        r = self.router
        if r.score_model is not None:
            return [float(u) for u in r.score_model.score_texts(texts, r.embedder)]
        frame = pd.DataFrame({"item_id": range(len(texts)), **{c: list(texts) for c in r.request_columns}})
        return [float(u) for u in r._scores(frame, None)]

    async def ascore(self, text: str) -> float:
        """The score of one text, batched with the requests that arrive while the embedder is busy."""
        if not self.batch:
            return (await asyncio.to_thread(self.score_texts, [text]))[0]
        future = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                scores = await asyncio.to_thread(self.score_texts, [t for t, _ in batch])
            except Exception as exc:  # noqa: BLE001  # each waiting request gets the error
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
                continue
            for (_, f), u in zip(batch, scores):
                if not f.done():
                    f.set_result(u)

    def feedback(self, records, losses):
        """Feed labelled decision records to the drift alarm (:meth:`gpac_utils.llm.serve.CertifiedRouter.feedback`)."""
        return self.router.feedback(records, losses)

    # -- deciding ---------------------------------------------------------------------------------
    def _request(self, model, messages, request_kwargs):
        if model not in self.deployments:
            raise ParameterError(f"model: {model!r} is not a certified model group; they are {list(self.deployments)}")
        kwargs = request_kwargs or {}
        metadata = kwargs.get("metadata") or {}
        if self.router._cells:  # a label per grouping (a key absent or None: none there; the router says so)
            group = {k: metadata.get(k) for k in self.group_keys} if isinstance(metadata, Mapping) else {}
        else:
            group = metadata.get(self.group_key) if isinstance(metadata, Mapping) else None
            group = NO_GROUP if group is None or (isinstance(group, float) and math.isnan(group)) else str(group)
        request_id = kwargs.get("litellm_call_id") or (
            metadata.get("request_id") if isinstance(metadata, Mapping) else None
        )
        return str(request_id or uuid.uuid4()), group, _last_user_text(messages)

    def _record(self, model, request_id, group, text, score) -> dict:
        if not text.strip():
            r = self.router
            named = group if r._known else (ALL if r.certificate.kind == "none" else NO_GROUP)
            if r._cells:  # its cell, as the certificate names it
                named = str(r._cell_groups(r.request_groups(group), "metadata key")[1][0])
            record = {
                "request_id": request_id,
                "group": named,
                "status": NO_TEXT,
                "score": math.nan,
                "threshold": r._thresholds.get(named, -math.inf),
                "route": ROUTES[1],
                "certificate_sha256": r.certificate_sha256,
            }
        else:
            record = self.router.decide_one(request_id, group, score)
        record["deployment"] = self.ids[model][record["route"]]
        self.router.log([record])
        return record

    def decide(self, model: str, messages=None, request_kwargs=None) -> dict:
        """The decision record of one request (module description), logged."""
        request_id, group, text = self._request(model, messages, request_kwargs)
        score = self.score_texts([text])[0] if text.strip() else math.nan
        return self._record(model, request_id, group, text, score)

    async def adecide(self, model: str, messages=None, request_kwargs=None) -> dict:
        """:meth:`decide` without blocking the event loop (scored in a thread, batched)."""
        request_id, group, text = self._request(model, messages, request_kwargs)
        score = await self.ascore(text) if text.strip() else math.nan
        return self._record(model, request_id, group, text, score)

    def _deployment(self, model, record):
        slot = _SLOT.get(None)
        if slot is not None:
            slot["decision"] = record
        return self.deployments[model][record["route"]]

    def get_available_deployment(
        self, model, messages=None, input=None, specific_deployment=False, request_kwargs=None
    ):
        return self._deployment(model, self.decide(model, messages, request_kwargs))

    async def async_get_available_deployment(
        self, model, messages=None, input=None, specific_deployment=False, request_kwargs=None
    ):
        return self._deployment(model, await self.adecide(model, messages, request_kwargs))


# ------------------------------------------------------------------------------------ litellm.Router
#: Where a call of the router returned by build_router collects its request's decision.
_SLOT: contextvars.ContextVar[dict] = contextvars.ContextVar("gpac_decision_slot")


def _attach(response, slot: dict):
    record = slot.get("decision")
    hidden = getattr(response, "_hidden_params", None)
    if record is not None and isinstance(hidden, dict):
        hidden["gpac_decision"] = dict(record)
        extra = hidden.get("additional_headers")
        hidden["additional_headers"] = {**(extra if isinstance(extra, dict) else {}), **headers(record)}
    return response


def _carry_decisions(router) -> None:
    """Make ``router.completion`` / ``router.acompletion`` responses carry their decision (LiteLLM's
    ``Router`` cannot be subclassed: the instance's two methods are wrapped). A call without a
    ``litellm_call_id`` gets one here, before routing, so that the decision's request id is the call id
    the response carries (``response._hidden_params["litellm_call_id"]``), as in the proxy."""
    sync, asynchronous = router.completion, router.acompletion

    def completion(*args, **kwargs):
        kwargs.setdefault("litellm_call_id", str(uuid.uuid4()))  # the request id: the call id, as in the proxy
        slot: dict = {}
        token = _SLOT.set(slot)
        try:
            response = sync(*args, **kwargs)
        finally:
            _SLOT.reset(token)
        return _attach(response, slot)

    async def acompletion(*args, **kwargs):
        kwargs.setdefault("litellm_call_id", str(uuid.uuid4()))
        slot: dict = {}
        token = _SLOT.set(slot)
        try:
            response = await asynchronous(*args, **kwargs)
        finally:
            _SLOT.reset(token)
        return _attach(response, slot)

    router.completion, router.acompletion = completion, acompletion


def read_gateway_config(config, base: Path | None = None) -> tuple[dict, Path]:
    """The configuration (a mapping, or a YAML file's path) and the folder its paths are relative to."""
    if isinstance(config, str | os.PathLike):
        import yaml

        path = Path(config)
        try:
            doc = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise DataError(f"{path}: cannot read the configuration ({exc.strerror or exc})") from None
        except yaml.YAMLError as exc:
            raise DataError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
        return (doc if isinstance(doc, dict) else {}), Path(base) if base is not None else path.parent
    if not isinstance(config, Mapping):
        raise ParameterError(f"config: must be a mapping or a YAML file's path, got {type(config).__name__}")
    return dict(config), Path(base) if base is not None else Path.cwd()


def _strategy(config: Mapping, where: Path, embedder, batch: bool) -> CertifiedRoutingStrategy:
    if not isinstance(config.get("gpac"), Mapping) or "certificate" not in config["gpac"]:
        raise ParameterError("config: needs a 'gpac' block with 'certificate' (the thresholds file)")
    if not isinstance(config.get("model_list"), list):
        raise ParameterError("config: needs a 'model_list' (LiteLLM's deployments)")
    g = dict(config["gpac"])
    certificate = where / g.pop("certificate")
    score_model = g.pop("score_model", None)
    drift = _drift_store(g.pop("drift", None), where)
    unknown = sorted(set(g) - {"group_key"})
    if unknown:
        raise ParameterError(f"config: gpac.{unknown[0]} is not a setting (certificate, score_model, group_key, drift)")
    settings = {**(config.get("litellm_settings") or {}), **(config.get("router_settings") or {})}
    return CertifiedRoutingStrategy(
        certificate,
        config["model_list"],
        score_model=None if score_model is None else where / score_model,
        embedder=embedder,
        settings=settings,
        batch=batch,
        drift=drift,
        **g,
    )


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


def build_router(config, *, base: Path | None = None, embedder=None, batch: bool = True, **router_kwargs):
    """A ``litellm.Router`` for a configuration (module description) with the certified strategy registered.

    Parameters
    ----------
    config : mapping or path
        ``model_list`` and ``gpac`` (``certificate``, optional ``score_model``, ``group_key`` and ``drift``:
        ``{store: path, level: 0.05, horizon: 10000}``, :class:`~gpac_utils.llm.drift.DriftStore`; a collection
        certificate takes neither ``group_key`` nor ``drift``: its requests name a label per grouping in their
        metadata, one key per group column),
        optionally ``router_settings`` (passed to the Router); relative paths are read from ``base``.
    base : path, optional
        The folder the configuration's paths are relative to (default: the configuration file's, else
        the working directory).
    embedder : object, optional
        Passed to :class:`CertifiedRoutingStrategy`.
    batch : bool, default True
        Passed to :class:`CertifiedRoutingStrategy`.
    **router_kwargs
        More ``litellm.Router`` arguments (``num_retries``...; ``fallbacks`` from a certified group refused).

    Returns
    -------
    (litellm.Router, CertifiedRoutingStrategy)
        The router's ``completion`` and ``acompletion`` responses carry their decision (module description).
    """
    config, where = read_gateway_config(config, base)
    settings = {**(config.get("router_settings") or {}), **router_kwargs}
    strategy = _strategy({**config, "router_settings": settings}, where, embedder, batch)
    from litellm import Router

    router = Router(model_list=[dict(d) for d in config["model_list"]], **settings)
    register = getattr(router, "register_plugin", None) or router.set_custom_routing_strategy
    register(strategy)
    _carry_decisions(router)
    return router, strategy


# ------------------------------------------------------------------------------------ the LiteLLM proxy
def _custom_logger():
    from litellm.integrations.custom_logger import CustomLogger

    return CustomLogger


class CertifiedProxyHook(_custom_logger()):
    """The LiteLLM proxy server's callback: certified routing of each request (module description).

    Named in the proxy's ``config.yaml`` (``litellm_settings.callbacks: gpac_hook.hook``), from a
    module beside it that builds it on the same file::

        from pathlib import Path
        from gpac_utils.llm.gateway import CertifiedProxyHook

        hook = CertifiedProxyHook(Path(__file__).with_name("config.yaml"))

    Parameters
    ----------
    config : path or mapping
        The proxy's configuration (its ``model_list``, ``gpac`` block and settings).
    base : path, optional
        The folder its paths are relative to (default: the configuration file's).
    embedder : object, optional
        Passed to :class:`CertifiedRoutingStrategy`.
    batch : bool, default True
        Passed to :class:`CertifiedRoutingStrategy`.
    """

    #: The call types a certified model group answers (chat completions).
    CALL_TYPES = ("completion", "acompletion")

    def __init__(self, config, *, base: Path | None = None, embedder=None, batch: bool = True):
        super().__init__()
        config, where = read_gateway_config(config, base)
        self.strategy = _strategy(config, where, embedder, batch)

    async def async_pre_call_hook(self, user_api_key_dict, cache, data: dict, call_type):
        """Decide, record the decision in the request's ``metadata`` (``gpac_decision``) and set its
        ``model`` to the chosen deployment's id; other model groups pass unchanged."""
        model = data.get("model")
        if model not in self.strategy.deployments:
            return data
        if call_type not in self.CALL_TYPES:
            raise _refusal(f"model {model!r}: a certified model group answers chat completions, not {call_type!r}")
        for key in (*FALLBACK_SETTINGS, "mock_testing_fallbacks"):
            if data.get(key):
                raise _refusal(
                    f"{key}: model {model!r} is certified; a fallback would let another model answer a request the "
                    "certificate sends to the thinking one"
                )
        try:
            record = await self.strategy.adecide(model, data.get("messages"), data)
        except DataError as exc:  # a request's own fault (a label that would read as another cell's): HTTP 400
            raise _refusal(str(exc)) from None
        metadata = data.get("metadata")
        data["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), "gpac_decision": record}
        data["model"] = record["deployment"]  # the proxy calls that one deployment
        return data

    async def async_post_call_response_headers_hook(
        self, data, user_api_key_dict, response, request_headers=None, litellm_call_info=None
    ):
        """The request's decision as ``x-gpac-*`` headers (:func:`headers`)."""
        for key in ("metadata", "litellm_metadata"):
            record = (data.get(key) or {}).get("gpac_decision") if isinstance(data.get(key), dict) else None
            if record is not None:
                return headers(record)
        return None


def _refusal(message: str):
    try:
        from fastapi import HTTPException
    except ImportError:  # the proxy's server is not installed: the caller is the Python API
        return ParameterError(message)
    return HTTPException(status_code=400, detail=message)


def localhost_guard(refused_by: str) -> str:
    """The source of a ``sitecustomize`` module that keeps a process (a LiteLLM proxy started offline, as
    tests/test_proxy.py and benchmarks/bench_gateway.py start it) on this machine: a socket connection or
    name lookup to anything but localhost raises, ``"network refused by <refused_by>"``, and is appended
    to the file named by the environment variable ``GPAC_NETWORK_LOG``, which the caller reads back."""
    return f"""
import os, socket
_log = os.environ["GPAC_NETWORK_LOG"]
_connect = socket.socket.connect
def _local(address):
    host = address[0] if isinstance(address, tuple) else address
    return isinstance(host, str) and (host in ("127.0.0.1", "::1", "localhost") or host.startswith("/"))
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address):
        with open(_log, "a") as f:
            f.write(repr(address) + "\\n")
        raise OSError("network refused by {refused_by}")
    return _connect(self, address)
socket.socket.connect = connect
_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if host not in (None, "127.0.0.1", "::1", "localhost", "0.0.0.0"):
        with open(_log, "a") as f:
            f.write(repr(host) + "\\n")
        raise socket.gaierror("network refused by {refused_by}")
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""
