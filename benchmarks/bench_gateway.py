"""What the certified LiteLLM hook adds per request (issue 51, item 4), side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_gateway.py [--calls 300] [--out benchmarks/gateway.csv]

On a ``litellm.Router`` whose deployments answer through ``mock_response`` (no network), with the
bundled all-MiniLM-L6-v2 embedder (``score_router``; the router model's coefficients are drawn, seeded:
the cost does not depend on them):

* ``default``: the Router's default routing (no hook), ``calls`` sequential ``acompletion`` calls;
* ``certified``: the same calls with the certified strategy (embedding included);
* ``decision``: the decision alone, without the embedding (``CertifiedRouter.decide_one``);
* ``embed_one``: the score of one request alone (embedding + the router model);
* ``embed_batched16``: per request, 16 concurrent requests scored in one batch (what the strategy does
  under concurrency);
* ``batch_vs_alone``: the largest difference between a score computed in a batch and alone.

Prints each row's median and 99th percentile (ms) and the ratios to ``default``; writes the CSV that
``docs/performance.md`` quotes (``tests/test_gateway.py`` checks the page against it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]


def certificate(where: Path) -> tuple[Path, Path]:
    """A G-PAC certificate on score_router with a MiniLM router model (coefficients drawn, seeded)."""
    from gpac_utils import GPAC
    from gpac_utils.certificate import Certificate, file_sha256
    from gpac_utils.llm.router_model import RouterModel
    from gpac_utils.llm.scoring import DEFAULT_EMBEDDER

    rng = np.random.default_rng(0)
    model = RouterModel(DEFAULT_EMBEDDER, "question", np.zeros(384), np.full(384, 0.05), rng.normal(size=384), 0.0)
    model_path = where / "router.json"
    model.save(model_path)
    u = rng.uniform(size=2000)
    groups = np.where(np.arange(2000) % 2, "a", "b")
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
    cert_path = where / "thresholds.json"
    cert_path.write_text(json.dumps(doc))
    return cert_path, model_path


def stats(name: str, ms: list[float], n_per: int = 1) -> dict:
    a = np.asarray(ms) / n_per
    return {"case": name, "n": len(a), "median_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gateway.csv"))
    a = ap.parse_args(argv)
    import tempfile

    from litellm import Router

    from gpac_utils.llm.benchmarks import load_benchmark
    from gpac_utils.llm.gateway import build_router
    from gpac_utils.llm.scoring import Embedder

    items = load_benchmark("arith")
    rng = np.random.default_rng(1)
    pick = rng.choice(len(items), a.calls, replace=True)
    texts = items["question"].to_numpy()[pick].tolist()
    groups = rng.choice(["a", "b"], a.calls).tolist()
    model_list = [
        {
            "model_name": "certified",
            "litellm_params": {"model": f"openai/{r}", "api_key": "x", "mock_response": f"answer of {r}"},
            "model_info": {"id": r, "gpac_route": r},
        }
        for r in ("nothink", "think")
    ]
    embedder = Embedder()
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, model_path = certificate(Path(tmp))
        config = {"model_list": model_list, "gpac": {"certificate": str(cert_path), "score_model": str(model_path)}}
        certified, strategy = build_router(config, embedder=embedder)
        plain = Router(model_list=[dict(d) for d in model_list])
        embedder.encode(["warm up"])

        async def timed(router, k):
            t = time.perf_counter()
            await router.acompletion(
                model="certified", messages=[{"role": "user", "content": texts[k]}], metadata={"group": groups[k]}
            )
            return (time.perf_counter() - t) * 1e3

        async def interleaved():  # the two routers side by side, alternating call by call
            d, c = [], []
            for k in range(a.calls):
                d.append(await timed(plain, k))
                c.append(await timed(certified, k))
            return d, c

        default_ms, certified_ms = asyncio.run(interleaved())
        router = strategy.router
        scores = strategy.score_texts(texts[:50])
        decision_ms = []
        for k in range(a.calls):
            t = time.perf_counter()
            router.decide_one(str(k), groups[k], scores[k % 50])
            decision_ms.append((time.perf_counter() - t) * 1e3)
        one_ms = []
        for k in range(a.calls):
            t = time.perf_counter()
            strategy.score_texts([texts[k]])
            one_ms.append((time.perf_counter() - t) * 1e3)
        batched_ms, worst = [], 0.0
        for k in range(0, a.calls - 16 + 1, 16):
            t = time.perf_counter()
            batch = strategy.score_texts(texts[k : k + 16])
            batched_ms.append((time.perf_counter() - t) * 1e3)
            alone = [strategy.score_texts([x])[0] for x in texts[k : k + 16]]
            worst = max(worst, float(np.max(np.abs(np.asarray(batch) - np.asarray(alone)))))
    rows = [
        stats("default", default_ms),
        stats("certified", certified_ms),
        stats("decision", decision_ms),
        stats("embed_one", one_ms),
        stats("embed_batched16", batched_ms, 16),
    ]
    out = pd.DataFrame(rows)
    base = out.set_index("case").loc["default"]
    out["median_ratio"] = out["median_ms"] / base["median_ms"]
    out["p99_ratio"] = out["p99_ms"] / base["p99_ms"]
    out = pd.concat(
        [out, pd.DataFrame([{"case": "batch_vs_alone", "n": a.calls, "median_ms": worst, "p99_ms": worst}])],
        ignore_index=True,
    )
    out["date"] = date.today().isoformat()
    out["machine"] = f"{platform.machine()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    out.round(4).to_csv(a.out, index=False)
    with pd.option_context("display.width", 160):
        print(out.round(4).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
