"""The certified hook inside the real LiteLLM proxy server (issue 51): ``litellm --config config.yaml``
on docs/deploying.md's ``config.yaml`` and ``gpac_hook.py`` exactly as written (extracted from the page),
started once for the module on localhost, every deployment answering through LiteLLM's
``mock_response``; requests sent with the ``openai`` client over HTTP. The proxy runs with a socket guard
(a ``sitecustomize`` on its path) that refuses any address but localhost and records each attempt: the
test requires none. It checks each route and its ``x-gpac-*`` response headers against
``CertifiedRouter.decide``, and that a request naming its own fallbacks is refused."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time

import pytest
from test_gateway import PAGE, mocked, page_config, requests_of
from test_precall import TOY, ToyEmbedder, fitted, toy_embedder  # noqa: F401  (fixtures)

from gpac_utils.llm.serve import DECISION_FIELDS, CertifiedRouter, ServeOptions

SERVER = ("fastapi", "uvicorn", "orjson", "apscheduler", "backoff", "jwt", "multipart", "websockets", "openai")
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in SERVER), reason="the LiteLLM proxy's server is not installed"
)

#: Installed in the proxy's process after :func:`gpac_utils.llm.gateway.localhost_guard` (imported when a test
#: runs: LiteLLM's import takes 6 s of every worker's collection otherwise): sockets to anything but localhost
#: refused and recorded; the toy embedder registered (the bundled MiniLM would take the test's time).
GUARD = """import sys
sys.path.insert(0, os.environ["GPAC_TESTS"])
from gpac_utils.llm.router_model import EMBEDDERS, Embedding
from test_precall import ToyEmbedder, TOY
EMBEDDERS.register(Embedding(TOY, ToyEmbedder, "word and digit counts (tests)"))
"""


def page_block(lang: str, marker: str) -> str:
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.S) if marker in b]
    assert len(blocks) == 1
    return blocks[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(fitted, tmp_path_factory):  # noqa: F811
    """The proxy on the page's config.yaml and gpac_hook.py, its files in place, answers mocked."""
    model_path, _, cert_path = fitted
    where = tmp_path_factory.mktemp("proxy")
    text = page_block("yaml", "model_list")
    config = mocked(page_config())
    assert config["litellm_settings"]["callbacks"] == "gpac_hook.hook"
    import yaml

    (where / "config.yaml").write_text(yaml.safe_dump(config))  # the page's, with mock_response added
    assert mocked(yaml.safe_load(text)) == config  # nothing but the mocked answers added
    (where / "gpac_hook.py").write_text(page_block("python", "CertifiedProxyHook"))  # exactly as written
    shutil.copy(cert_path, where / config["gpac"]["certificate"])
    shutil.copy(model_path, where / config["gpac"]["score_model"])
    guard = where / "guard"
    guard.mkdir()
    from gpac_utils.llm.gateway import localhost_guard

    (guard / "sitecustomize.py").write_text(localhost_guard("the test") + GUARD)
    key, port, net_log = "sk-" + secrets.token_hex(32), free_port(), where / "network.log"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MASTER_KEY": key,
        "GPAC_NETWORK_LOG": str(net_log),
        "GPAC_TESTS": str(PAGE.parents[1] / "tests"),
        "PYTHONPATH": os.pathsep.join([str(guard), str(PAGE.parents[1]), os.environ.get("PYTHONPATH", "")]),
        "NO_PROXY": "*",
    }
    cmd = [sys.executable, "-c", "from litellm_cli.main import proxy_server; proxy_server()"]
    cmd += ["--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)]
    log = (where / "proxy.log").open("w")
    server = subprocess.Popen(cmd, cwd=where, env=env, stdout=log, stderr=subprocess.STDOUT)
    import httpx

    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"the proxy exited ({server.returncode}): {(where / 'proxy.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("the proxy did not start in 240 s")
        from openai import OpenAI

        client = OpenAI(base_url=f"http://127.0.0.1:{port}", api_key=key, max_retries=0, timeout=60)
        yield client, config, json.loads(cert_path.read_text()), net_log
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_the_proxy_routes_each_request_and_its_headers_carry_the_decision(proxy):
    client, config, doc, net_log = proxy
    name = config["model_list"][0]["model_name"]
    ids = {d["model_info"]["gpac_route"]: d["model_info"]["id"] for d in config["model_list"]}
    items = requests_of(2)
    router = CertifiedRouter.for_decisions(doc, ServeOptions(embedder=ToyEmbedder()))
    got = []
    for q, g in zip(items["question"], items["group"]):
        raw = client.chat.completions.with_raw_response.create(
            model=name, messages=[{"role": "user", "content": q}], extra_body={"metadata": {"group": g}}
        )
        h = raw.headers
        assert raw.parse().choices[0].message.content == f"answer of {ids[h['x-gpac-route']]}"
        assert h["x-gpac-deployment"] == ids[h["x-gpac-route"]] == h["x-litellm-model-id"]
        assert h["x-gpac-request-id"] == h["x-litellm-call-id"]
        got.append({f: h[f"x-gpac-{f.replace('_', '-')}"] for f in DECISION_FIELDS})
    want = router.records(router.decide(items.assign(item_id=[r["request_id"] for r in got])))
    assert got == [{k: str(v) for k, v in w.items()} for w in want]
    assert {"nothink", "think"} <= {r["route"] for r in got}
    # no user text: thinks; a request naming its own fallbacks: refused
    raw = client.chat.completions.with_raw_response.create(
        model=name, messages=[{"role": "user", "content": " "}], extra_body={"metadata": {"group": "solve_x"}}
    )
    assert raw.headers["x-gpac-route"] == "think" and raw.headers["x-gpac-status"] == "always think: no user text"
    import openai

    with pytest.raises(openai.BadRequestError, match="fallbacks: model 'certified' is certified"):
        client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "1 + 1"}], extra_body={"fallbacks": ["other"]}
        )
    assert not net_log.exists(), f"the proxy tried the network: {net_log.read_text()}"
