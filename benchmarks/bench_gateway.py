"""What the certified LiteLLM hook adds per request (issue 51, item 4), side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_gateway.py [--calls 300] [--burst 16] [--out benchmarks/gateway.csv]

The LiteLLM proxy server (``litellm --config config.yaml``), started twice by this script on free
localhost ports, every deployment answering through ``mock_response`` (nothing reaches the network:
a ``sitecustomize`` in each proxy refuses any address but localhost, and the run fails if one was
tried): ``default`` on docs/deploying.md's ``config.yaml`` without the hook (LiteLLM's default
routing between the two deployments), ``certified`` on that ``config.yaml`` and ``gpac_hook.py``
exactly as written (``CertifiedProxyHook``, ``score_router`` with the bundled all-MiniLM-L6-v2
embedder; the router model's coefficients are drawn, seeded: the cost does not depend on them).
Requests are sent over HTTP (``httpx``, one keep-alive connection per proxy):

* ``proxy_default`` / ``proxy_certified``: ``calls`` sequential requests each, alternating between
  the two proxies call by call (which one goes first alternates too), the same question and group
  for both; ``proxy_added``: certified minus default, median and 99th percentile (the hook's cost,
  the embedding included);
* ``proxy_default_burst16`` / ``proxy_certified_burst16``: bursts of ``burst`` concurrent requests,
  alternating burst by burst, each request's latency (the hook scores concurrent requests in one
  batch); ``proxy_added_burst16`` their difference; ``..._burst16_wall``: a burst's wall time divided
  by its requests;

then in this process, both proxies stopped:

* ``router_default`` / ``router_certified``: the same on a Python ``litellm.Router`` (``build_router``
  on the same configuration), sequential ``acompletion`` calls alternating call by call;
* ``hook_without_embedding``: the proxy hook's ``async_pre_call_hook`` (request parsing, batching
  queue, the router model, the decision, its JSON log line) with the embeddings computed beforehand;
* ``decision``: the decision alone (``CertifiedRouter.decide_one``);
* ``embed_one``: one request's score alone (embedding + the router model);
* ``embed_batched16``: per request, ``burst`` requests scored in one batch;
* ``batch_vs_alone``: the largest difference between a score computed in a batch and alone.

Prints each row's median and 99th percentile (ms) and its ratios to the row named in ``vs``; writes
the CSV that ``docs/performance.md`` quotes (``tests/test_gateway.py`` checks the page against it),
with the machine's load average at the end of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from gpac_utils.llm.gateway import localhost_guard

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "deploying.md"
GROUPS = ("a", "b")

#: Installed in each proxy's process: sockets to anything but localhost refused and recorded.
GUARD = localhost_guard("the benchmark")


def page_block(lang: str, marker: str) -> str:
    """The one ``lang`` code block of docs/deploying.md that contains ``marker``."""
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.S) if marker in b]
    if len(blocks) != 1:
        raise SystemExit(f"{PAGE}: expected one {lang} block with {marker!r}, found {len(blocks)}")
    return blocks[0]


def certificate(where: Path, config: dict) -> None:
    """A G-PAC certificate on score_router with a MiniLM router model (coefficients drawn, seeded),
    written where the configuration's ``gpac`` block names them."""
    from gpac_utils import GPAC
    from gpac_utils.certificate import Certificate, file_sha256
    from gpac_utils.llm.router_model import RouterModel
    from gpac_utils.llm.scoring import DEFAULT_EMBEDDER

    rng = np.random.default_rng(0)
    model = RouterModel(DEFAULT_EMBEDDER, "question", np.zeros(384), np.full(384, 0.05), rng.normal(size=384), 0.0)
    model_path = where / config["gpac"]["score_model"]
    model.save(model_path)
    u = rng.uniform(size=2000)
    groups = np.where(np.arange(2000) % 2, *GROUPS)
    cal = GPAC(0.1).fit(u, (rng.uniform(size=2000) < 0.2 * u).astype(float), groups)
    doc = Certificate.from_calibrator(
        cal, columns={"score": ("score_router", u), "group": ("group", groups)}, created="2026-01-01T00:00:00Z"
    ).document
    doc["provenance"]["score_model"] = {
        "path": str(model_path),
        "sha256": file_sha256(model_path),
        "embedder": DEFAULT_EMBEDDER,
        "text": "question",
    }
    (where / config["gpac"]["certificate"]).write_text(json.dumps(doc))


def configs() -> tuple[dict, dict]:
    """docs/deploying.md's ``config.yaml`` with every deployment answering through ``mock_response``
    (certified), and the same without the hook and its ``gpac`` block (LiteLLM's default routing)."""
    import yaml

    certified = yaml.safe_load(page_block("yaml", "model_list"))
    for d in certified["model_list"]:
        d["litellm_params"]["mock_response"] = f"answer of {d['model_info']['id']}"
    default = json.loads(json.dumps(certified))
    del default["gpac"]
    del default["litellm_settings"]["callbacks"]
    return certified, default


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """``litellm --config config.yaml`` in ``where`` on a free localhost port (stopped by :meth:`stop`)."""

    def __init__(self, where: Path, key: str, guard: Path):
        self.where, self.port = where, free_port()
        self.net_log = where / "network.log"
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_MASTER_KEY": key,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "GPAC_NETWORK_LOG": str(self.net_log),
            "PYTHONPATH": os.pathsep.join([str(guard), str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "NO_PROXY": "*",
        }
        cmd = [sys.executable, "-c", "from litellm_cli.main import proxy_server; proxy_server()"]
        cmd += ["--config", "config.yaml", "--host", "127.0.0.1", "--port", str(self.port)]
        self.log = (where / "proxy.log").open("w")
        self.process = subprocess.Popen(cmd, cwd=where, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        import httpx

        if self.process.poll() is not None:
            tail = (self.where / "proxy.log").read_text()[-2000:]
            raise SystemExit(f"{self.where.name} proxy: exited ({self.process.returncode}): {tail}")
        try:
            return httpx.get(f"{self.url}/health/liveliness", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def stats(name: str, ms, vs: str = "", n_per: int = 1) -> dict:
    a = np.asarray(ms, dtype=float) / n_per
    return {
        "case": name,
        "n": len(a),
        "median_ms": float(np.median(a)),
        "p99_ms": float(np.percentile(a, 99)),
        "vs": vs,
    }


def added(name: str, base: dict, other: dict) -> dict:
    """``other`` minus ``base``: the difference of their medians and of their 99th percentiles."""
    return {
        "case": name,
        "n": other["n"],
        "median_ms": other["median_ms"] - base["median_ms"],
        "p99_ms": other["p99_ms"] - base["p99_ms"],
        "vs": "",
    }


def measure_proxies(where: Path, texts, groups, burst: int) -> tuple[list[dict], dict]:
    """The two proxies side by side: sequential calls alternating call by call, then bursts."""
    import httpx

    certified_cfg, default_cfg = configs()
    ids = {d["model_info"]["gpac_route"]: d["model_info"]["id"] for d in certified_cfg["model_list"]}
    answers = {f"answer of {i}" for i in ids.values()}
    import yaml

    folders = {"default": where / "default", "certified": where / "certified"}
    for name, cfg in (("default", default_cfg), ("certified", certified_cfg)):
        folders[name].mkdir()
        (folders[name] / "config.yaml").write_text(yaml.safe_dump(cfg))
    (folders["certified"] / "gpac_hook.py").write_text(page_block("python", "CertifiedProxyHook"))
    certificate(folders["certified"], certified_cfg)
    guard = where / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    key = "sk-" + secrets.token_hex(32)
    auth = {"Authorization": f"Bearer {key}"}
    model = certified_cfg["model_list"][0]["model_name"]

    def body(k: int) -> dict:
        return {
            "model": model,
            "messages": [{"role": "user", "content": texts[k % len(texts)]}],
            "metadata": {"group": groups[k % len(groups)]},
        }

    routes = []

    def check(arm: str, r) -> None:
        if r.status_code != 200:
            raise SystemExit(f"{arm} proxy: HTTP {r.status_code}: {r.text[:500]}")
        content = r.json()["choices"][0]["message"]["content"]
        if arm == "certified":
            route = r.headers.get("x-gpac-route")
            if route not in ids or content != f"answer of {ids[route]}":
                raise SystemExit(f"certified proxy: route {route!r} answered {content!r}")
            routes.append(route)
        elif content not in answers or "x-gpac-route" in r.headers:
            raise SystemExit(f"default proxy: answered {content!r} with headers {dict(r.headers)}")

    proxies: dict[str, Proxy] = {}
    try:
        for name, folder in folders.items():
            proxies[name] = Proxy(folder, key, guard)
        deadline = time.monotonic() + 600
        waiting = set(proxies)
        while waiting:
            if time.monotonic() > deadline:
                raise SystemExit(f"proxies {sorted(waiting)}: not started in 600 s")
            waiting = {n for n in waiting if not proxies[n].ready()}
            time.sleep(0.5)
        arms = ("default", "certified")
        seq = {n: [] for n in arms}
        with httpx.Client(headers=auth, timeout=120, trust_env=False) as client:
            for k in range(20):  # warm-up: lazy imports, the embedder's first load
                for n in arms:
                    check(n, client.post(f"{proxies[n].url}/chat/completions", json=body(k)))
            routes.clear()
            for k in range(len(texts)):
                for n in arms if k % 2 == 0 else arms[::-1]:
                    t = time.perf_counter()
                    r = client.post(f"{proxies[n].url}/chat/completions", json=body(k))
                    seq[n].append((time.perf_counter() - t) * 1e3)
                    check(n, r)
        sequential_routes = list(routes)

        async def bursts():
            lat = {n: [] for n in arms}
            wall = {n: [] for n in arms}
            limits = httpx.Limits(max_connections=2 * burst, max_keepalive_connections=2 * burst)
            async with httpx.AsyncClient(headers=auth, timeout=120, limits=limits, trust_env=False) as client:

                async def one(n, k):
                    t = time.perf_counter()
                    r = await client.post(f"{proxies[n].url}/chat/completions", json=body(k))
                    return (time.perf_counter() - t) * 1e3, r

                async def fire(n, start):
                    t = time.perf_counter()
                    done = await asyncio.gather(*(one(n, start + j) for j in range(burst)))
                    return (time.perf_counter() - t) * 1e3, done

                for n in arms:  # warm-up: the burst's connections opened
                    for _, r in (await fire(n, 0))[1]:
                        check(n, r)
                for b in range(len(texts) // burst):
                    for n in arms if b % 2 == 0 else arms[::-1]:
                        w, done = await fire(n, b * burst)
                        wall[n].append(w)
                        for ms, r in done:
                            lat[n].append(ms)
                            check(n, r)
            return lat, wall

        lat, wall = asyncio.run(bursts())
    finally:
        for p in proxies.values():
            p.stop()
    tried = [p.net_log.read_text() for p in proxies.values() if p.net_log.exists()]
    if tried:
        raise SystemExit(f"a proxy tried the network: {tried}")
    d, c = stats("proxy_default", seq["default"]), stats("proxy_certified", seq["certified"], "proxy_default")
    bd = stats(f"proxy_default_burst{burst}", lat["default"])
    bc = stats(f"proxy_certified_burst{burst}", lat["certified"], bd["case"])
    wd = stats(f"proxy_default_burst{burst}_wall", wall["default"], n_per=burst)
    wc = stats(f"proxy_certified_burst{burst}_wall", wall["certified"], wd["case"], n_per=burst)
    rows = [d, c, added("proxy_added", d, c), bd, bc, added(f"proxy_added_burst{burst}", bd, bc), wd, wc]
    rows.append(added(f"proxy_added_burst{burst}_wall", wd, wc))
    cheap = float(np.mean(np.asarray(sequential_routes) == "nothink"))
    return rows, {"nothink_share": cheap}


class Precomputed:
    """The bundled embedder's vectors, computed beforehand: the hook's path without the embedding."""

    def __init__(self, texts, vectors, model_name: str):
        self.model_name = model_name
        self._vectors = dict(zip(texts, vectors, strict=True))

    def encode(self, texts) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts])


def measure_in_process(where: Path, texts, groups, burst: int) -> list[dict]:
    """The Router arms, the hook without the embedding, the decision alone, the embedding alone."""
    from litellm import Router

    from gpac_utils.llm.gateway import CertifiedProxyHook, build_router
    from gpac_utils.llm.scoring import DEFAULT_EMBEDDER, Embedder
    from gpac_utils.llm.serve import DECISION_LOGGER

    config, _ = configs()
    certificate(where, config)
    embedder = Embedder()
    embedder.encode(["warm up"])
    certified, strategy = build_router(config, base=where, embedder=embedder)
    plain = Router(model_list=[dict(d) for d in config["model_list"]], **config.get("router_settings", {}))
    model = config["model_list"][0]["model_name"]
    calls = len(texts)

    async def timed(router, k):
        t = time.perf_counter()
        await router.acompletion(
            model=model, messages=[{"role": "user", "content": texts[k]}], metadata={"group": groups[k]}
        )
        return (time.perf_counter() - t) * 1e3

    async def interleaved():  # the two routers side by side, alternating call by call
        ms = {"default": [], "certified": []}
        for k in range(10):  # warm-up
            await timed(plain, k)
            await timed(certified, k)
        for k in range(calls):
            for n in ("default", "certified") if k % 2 == 0 else ("certified", "default"):
                ms[n].append(await timed(plain if n == "default" else certified, k))
        return ms

    ms = asyncio.run(interleaved())

    # the proxy hook's path, its embeddings computed beforehand; its decision records logged to a file
    unique = sorted(set(texts))
    hook = CertifiedProxyHook(
        config, base=where, embedder=Precomputed(unique, embedder.encode(unique), DEFAULT_EMBEDDER)
    )
    log = logging.getLogger(DECISION_LOGGER)
    handler = logging.FileHandler(where / "decisions.log")
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    deployments = {d["model_info"]["id"] for d in config["model_list"]}

    async def pre_call():
        out = []
        for k in range(-10, calls):  # 10 warm-up calls
            data = {
                "model": model,
                "messages": [{"role": "user", "content": texts[k]}],
                "metadata": {"group": groups[k]},
                "litellm_call_id": f"req-{k}",
            }
            t = time.perf_counter()
            await hook.async_pre_call_hook(None, None, data, "acompletion")
            dt = (time.perf_counter() - t) * 1e3
            if data["model"] not in deployments:
                raise SystemExit(f"hook: sent request {k} to {data['model']!r}")
            if k >= 0:
                out.append(dt)
        return out

    try:
        hook_ms = asyncio.run(pre_call())
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        handler.close()
    logged = (where / "decisions.log").read_text().splitlines()
    if len(logged) != calls + 10:
        raise SystemExit(f"hook: {len(logged)} decision records logged for {calls + 10} requests")

    router = strategy.router
    scores = strategy.score_texts(texts[:50])
    decision_ms = []
    for k in range(calls):
        t = time.perf_counter()
        router.decide_one(str(k), groups[k], scores[k % 50])
        decision_ms.append((time.perf_counter() - t) * 1e3)
    one_ms = []
    for k in range(calls):
        t = time.perf_counter()
        strategy.score_texts([texts[k]])
        one_ms.append((time.perf_counter() - t) * 1e3)
    batched_ms, worst = [], 0.0
    for k in range(0, calls - burst + 1, burst):
        t = time.perf_counter()
        batch = strategy.score_texts(texts[k : k + burst])
        batched_ms.append((time.perf_counter() - t) * 1e3)
        alone = [strategy.score_texts([x])[0] for x in texts[k : k + burst]]
        worst = max(worst, float(np.max(np.abs(np.asarray(batch) - np.asarray(alone)))))
    rd, rc = stats("router_default", ms["default"]), stats("router_certified", ms["certified"], "router_default")
    return [
        rd,
        rc,
        added("router_added", rd, rc),
        stats("hook_without_embedding", hook_ms),
        stats("decision", decision_ms),
        stats("embed_one", one_ms),
        stats(f"embed_batched{burst}", batched_ms, "embed_one", n_per=burst),
        {"case": "batch_vs_alone", "n": len(batched_ms) * burst, "median_ms": worst, "p99_ms": worst, "vs": ""},
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="sequential requests per arm (default 300)")
    ap.add_argument("--burst", type=int, default=16, help="concurrent requests per burst (default 16)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gateway.csv"))
    a = ap.parse_args(argv)
    if a.calls < 50 or not 2 <= a.burst <= a.calls:
        raise SystemExit(f"--calls {a.calls} --burst {a.burst}: need calls >= 50 and 2 <= burst <= calls")
    from gpac_utils.llm.benchmarks import load_benchmark

    items = load_benchmark("arith")
    rng = np.random.default_rng(1)
    pick = rng.choice(len(items), a.calls, replace=True)
    texts = items["question"].to_numpy()[pick].tolist()
    groups = rng.choice(GROUPS, a.calls).tolist()
    with tempfile.TemporaryDirectory() as tmp:
        rows, extra = measure_proxies(Path(tmp), texts, groups, a.burst)  # both proxies stopped on return
        rows += measure_in_process(Path(tmp), texts, groups, a.burst)
    load = os.getloadavg()[0]
    import torch

    out = pd.DataFrame(rows)
    med = out.set_index("case")["median_ms"]
    p99 = out.set_index("case")["p99_ms"]
    has = out["vs"] != ""
    out["median_ratio"] = np.where(has, out["median_ms"] / med.reindex(out["vs"]).to_numpy(), np.nan)
    out["p99_ratio"] = np.where(has, out["p99_ms"] / p99.reindex(out["vs"]).to_numpy(), np.nan)
    out["date"] = date.today().isoformat()
    out["machine"] = (
        f"{platform.machine()} {os.cpu_count()} cores, torch {torch.get_num_threads()} threads, load {load:.1f}"
    )
    out.round(4).to_csv(a.out, index=False)
    with pd.option_context("display.width", 200):
        print(out.round(4).to_string(index=False))
    print(f"certified proxy, sequential: {extra['nothink_share']:.0%} of requests routed to the cheap model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
