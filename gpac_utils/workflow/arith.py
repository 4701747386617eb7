"""The ``arith`` table: generated once by the tiny model on the real vLLM CPU engine, committed, checked.

``data/generated/arith__smollm2.parquet`` is ``02_scores``' table of the procedurally generated
``arith`` benchmark (:mod:`gpac_utils.llm.arithmetic`) answered by SmolLM2-135M-Instruct in both
walk roles (:data:`gpac_utils.llm.generation.WALK_SAMPLING`: one-shot ``\\boxed{}`` ``think``, answer-only ``nothink``,
3 verbalized confidences). Its data card is ``data/generated/README.md``.

Two steps, each the library calls of a notebook:

* :func:`generate_table` -- ``01_generate``'s walk branch (:func:`gpac_utils.llm.generation.generate`) with
  the real vLLM engine on CPU (:data:`VLLM_CPU`: fp32, ``gpu_memory_utilization=0.3``); needs
  ``vllm-cpu`` (see ``shared/vllm-cpu.md``); then ``02_scores`` scores the run folder.
* :func:`check` -- regenerates a few items per group with the same roles, samplings and per-item
  seeds and compares their records with the committed table (:func:`compare`). On the engine
  that wrote the table (vLLM, CPU, fp32) the records must agree exactly (correctness and token
  counts) and the logits and verbalized scores to :data:`SAME_ENGINE_ATOL`. Another engine
  (transformers, used by ``make walk`` when vLLM is not installed) samples with other random
  streams, so only the greedy ``think`` role is comparable: its correctness must agree on at least
  :data:`OTHER_ENGINE_THINK_AGREEMENT` of the items; the sampled roles are reported, not checked.

Command line (``generate`` needs the vLLM venv; run it as a script: vLLM spawns processes)::

    python -m gpac_utils.workflow.arith generate [--out build/arith] [--n-items N]
    python -m gpac_utils.workflow.arith check [--n-per-group 2] [--backend auto|vllm|transformers]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from .paths import BUILD, DATA

BENCHMARK = "arith"
PAIR = "smollm2"
#: The committed scored table.
TABLE = DATA / "generated" / f"{BENCHMARK}__{PAIR}.parquet"
#: Generation seed (base of the per-item seeds) and the seed of the check's item choice.
GENERATION_SEED = 0
#: The walk's model (both roles), by name (gpac_utils.llm.tiny).
WALK_MODEL = "smollm2-135m"
#: ``vllm.LLM`` settings of the committed run (real vLLM on CPU: fp32; see shared/vllm-cpu.md).
VLLM_CPU = {"dtype": "float32", "gpu_memory_utilization": 0.3, "max_model_len": 1024, "block_size": 32}
#: Requests in flight per role: vLLM's CPU build fails on seeded sampling when a prefill is split over
#: steps, so the sampled roles never hold more prompt tokens than one step takes (4096; nothink prompts
#: ~55 tokens, verbalized ~84 tokens x 3 samples). Records do not depend on it (per-item seeds).
WINDOWS = {"nothink": 48, "verbalized": 40}
#: Verbalized confidences per item: the walk's samplings (:data:`gpac_utils.llm.generation.WALK_SAMPLING`)
#: with one instead of three, as on 2 shared CPU cores the verbalized prompts' prefill dominated the run.
VERBALIZED_SAMPLES = 1
#: Same engine, same seeds: scores may differ only in the last float bits.
SAME_ENGINE_ATOL = 1e-4
#: Another engine: least share of items whose greedy ``think`` correctness agrees.
OTHER_ENGINE_THINK_AGREEMENT = 0.8
#: Columns compared exactly on the same engine.
EXACT = (data.THINK_CORRECT, data.NOTHINK_CORRECT, data.THINK_TOKENS, data.NOTHINK_TOKENS)
#: Scores compared with :data:`SAME_ENGINE_ATOL` (the router is cross-fitted on the whole table: not re-run).
CLOSE = ("score_logits", "score_verbalized")


def vllm_installed() -> bool:
    """Is the ``vllm`` module importable (the CPU build counts; no GPU needed)?"""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def walk_engine(backend: str, seed: int = GENERATION_SEED):
    """The walk model's engine: real vLLM on CPU (:data:`VLLM_CPU`) or transformers on CPU."""
    from ..llm import generation as gen

    if backend == "vllm":
        return gen.make_engine("vllm", WALK_MODEL, seed=seed, **VLLM_CPU)
    if backend == "transformers":
        return gen.make_engine("transformers", WALK_MODEL, device="cpu")
    raise ValueError(f"backend must be 'vllm' or 'transformers', got {backend!r}")


def generate_table(
    folder: str | Path,
    items: pd.DataFrame,
    *,
    backend: str = "vllm",
    seed: int = GENERATION_SEED,
    chunks: int = 1,
    only: Sequence[int] | None = None,
) -> list[dict]:
    """``01_generate``'s walk branch on ``items`` into the run folder ``folder`` (resumable).

    Parameters
    ----------
    folder : str or Path
        Run folder (``<generations_root>/arith__smollm2``).
    items : DataFrame
        From ``load_benchmark("arith", ...)``.
    backend : {"vllm", "transformers"}
        Engine (the committed table: ``vllm``).
    seed : int
        Base of the per-item seeds.
    chunks : int
        Run the items as ``chunks`` shards one after the other with one engine (all roles of
        shard ``i/chunks`` before shard ``i+1``), so that a long run has finished items early.
        Records do not depend on it (per-item seeds).
    only : sequence of int, optional
        Run only these chunks (another process, e.g. bound to another core with
        ``VLLM_CPU_OMP_THREADS_BIND``, runs the others; never two processes on one chunk).

    Returns
    -------
    list of dict
        The walk's report per role, per chunk.
    """
    from ..llm import generation as gen

    engine = walk_engine(backend, seed)
    samplings = gen.walk_samplings(n_verbalized=VERBALIZED_SAMPLES)
    reports = []
    for i in range(int(chunks)) if only is None else only:
        start = time.perf_counter()
        reports.append(
            gen.generate(
                items,
                gen.pair_models("smollm2"),
                folder,
                backend=backend,
                engine=engine,
                samplings=samplings,
                seed=seed,
                shard=f"{i}/{chunks}",
                progress=False,
                windows=WINDOWS,
            )
        )
        print(f"chunk {i}/{chunks}: {time.perf_counter() - start:.0f} s", flush=True)
    return reports


def check_items(table: pd.DataFrame, n_per_group: int, seed: int = GENERATION_SEED) -> pd.DataFrame:
    """A seeded choice of ``n_per_group`` committed items per group, as ``load_benchmark`` items."""
    from ..llm.benchmarks import load_benchmark

    if int(n_per_group) < 1:
        raise ValueError(f"n_per_group must be >= 1, got {n_per_group}")
    rng = np.random.default_rng(seed)
    ids = []
    for _, g in table.groupby(data.GROUP, sort=True):
        ids += sorted(rng.choice(g[data.ID].to_numpy(str), size=min(int(n_per_group), len(g)), replace=False))
    items = load_benchmark(BENCHMARK)
    missing = sorted(set(ids) - set(items["item_id"]))
    if missing:
        raise ValueError(f"table: item ids {missing[:3]} are not items of the arith benchmark (other seed or size?)")
    return items.set_index("item_id").loc[ids].reset_index()


def records(folder: str | Path) -> pd.DataFrame:
    """Per item of a finished run folder: the committed table's columns except the router score."""
    from ..llm import generation as gen
    from ..llm import grading
    from ..llm import scoring as sc

    items = gen.load_items(Path(folder))
    ids = items["item_id"]
    t0, n0 = (gen.load_generations(folder, r, ids).query("sample == 0").set_index("item_id") for r in gen.ROLES[:2])
    out = pd.DataFrame({data.ID: ids, data.GROUP: items["group"].to_numpy()}).set_index(data.ID)
    gold = items.set_index("item_id")["gold"]
    out[data.THINK_CORRECT] = [int(grading.grade(BENCHMARK, t0.at[i, "answer"], gold[i])) for i in ids]
    out[data.NOTHINK_CORRECT] = [int(grading.grade(BENCHMARK, n0.at[i, "answer"], gold[i])) for i in ids]
    out[data.THINK_TOKENS] = t0.loc[ids, "n_tokens"].to_numpy(float)
    out[data.NOTHINK_TOKENS] = n0.loc[ids, "n_tokens"].to_numpy(float)
    out["score_logits"] = sc.logits_scores(gen.load_generations(folder, "nothink", ids)).reindex(ids).to_numpy()
    out["score_verbalized"] = sc.verbalized_scores(gen.load_generations(folder, "verbalized", ids)).scores
    return out.reset_index()


def auroc(score, positive) -> float:
    """Area under the ROC curve of ``score`` for the binary ``positive`` (ties count one half).

    The Mann-Whitney form: the chance that a random positive item scores above a random negative
    one. ``nan`` when one class is empty.
    """
    from scipy.stats import rankdata

    score, positive = np.asarray(score, float), np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def accuracy_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per group (and ``all``): items, accuracy of each role, the binary loss rate, in fractions."""
    cols = [data.THINK_CORRECT, data.NOTHINK_CORRECT, data.LOSS]
    per = table.groupby(data.GROUP, sort=True)[cols].mean()
    per.loc["all"] = table[cols].mean()
    per.insert(0, "n", table.groupby(data.GROUP, sort=True).size().reindex(per.index).fillna(len(table)).astype(int))
    return per.rename(columns={data.THINK_CORRECT: "think_acc", data.NOTHINK_CORRECT: "nothink_acc"})


def score_quality(table: pd.DataFrame) -> pd.DataFrame:
    """Per score: AUROC for a non-thinking error (``nothink_correct == 0``) and for the loss, overall."""
    rows = []
    for col in data.score_columns(table):
        rows.append(
            {
                "score": col,
                "auroc_nothink_error": auroc(table[col], table[data.NOTHINK_CORRECT] == 0),
                "auroc_loss": auroc(table[col], table[data.LOSS] > 0),
            }
        )
    return pd.DataFrame(rows)


@dataclass
class CheckResult:
    """What :func:`compare` found: per column the share of items that agree, and whether it passes."""

    same_engine: bool
    agreement: dict
    passed: bool
    n_items: int

    def summary(self) -> str:
        kind = "same engine: exact" if self.same_engine else "another engine: think agreement only"
        rows = ", ".join(f"{k} {v:.0%}" for k, v in self.agreement.items())
        return f"{'PASS' if self.passed else 'FAIL'} ({kind}) on {self.n_items} items: {rows}"


def compare(new: pd.DataFrame, committed: pd.DataFrame, *, same_engine: bool) -> CheckResult:
    """Agreement of regenerated records ``new`` (from :func:`records`) with the committed table.

    Same engine: every :data:`EXACT` column equal and every :data:`CLOSE` score within
    :data:`SAME_ENGINE_ATOL` on every item. Another engine: ``think_correct`` agrees on at least
    :data:`OTHER_ENGINE_THINK_AGREEMENT` of the items (the other columns are reported).
    """
    ref = committed.set_index(data.ID)
    unknown = sorted(set(new[data.ID]) - set(ref.index))
    if unknown:
        raise ValueError(f"new: item ids {unknown[:3]} are not in the committed table")
    ref = ref.loc[new[data.ID]]
    agree = {}
    for col in EXACT:
        agree[col] = float(np.mean(new[col].to_numpy(float) == ref[col].to_numpy(float)))
    for col in CLOSE:
        agree[col] = float(np.mean(np.abs(new[col].to_numpy(float) - ref[col].to_numpy(float)) <= SAME_ENGINE_ATOL))
    if same_engine:
        passed = all(v == 1.0 for v in agree.values())
    else:
        passed = agree[data.THINK_CORRECT] >= OTHER_ENGINE_THINK_AGREEMENT
    return CheckResult(same_engine, agree, passed, len(new))


def check(
    out: str | Path = BUILD / "arith-check",
    *,
    table: str | Path = TABLE,
    n_per_group: int = 2,
    backend: str = "auto",
    seed: int = GENERATION_SEED,
) -> CheckResult:
    """Regenerate ``n_per_group`` committed items per group and compare them (:func:`compare`).

    ``backend="auto"``: vLLM when it is installed (the committed table's engine), else transformers.
    ``out`` is emptied first: the check always generates afresh.
    """
    import shutil

    if backend == "auto":
        backend = "vllm" if vllm_installed() else "transformers"
    committed = data.read_table(table)
    items = check_items(committed, n_per_group, seed)
    folder = Path(out) / f"{BENCHMARK}__{PAIR}"
    shutil.rmtree(folder, ignore_errors=True)
    generate_table(folder, items, backend=backend, seed=GENERATION_SEED)
    return compare(records(folder), committed, same_engine=backend == "vllm")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpac_utils.workflow.arith generate|check``."""
    ap = argparse.ArgumentParser(prog="python -m gpac_utils.workflow.arith", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="01_generate on the arith items with vLLM on CPU (resumable)")
    g.add_argument("--out", type=Path, default=BUILD / "arith" / "generations", help="generations root")
    g.add_argument("--n-items", type=int, default=None, help="a seeded subset (default: all)")
    g.add_argument("--chunks", type=int, default=8, help="shards run one after the other (finished items early)")
    g.add_argument("--only", type=int, nargs="*", default=None, help="run only these chunks")
    c = sub.add_parser("check", help="regenerate a few committed items and compare")
    c.add_argument("--n-per-group", type=int, default=2)
    c.add_argument("--backend", choices=("auto", "vllm", "transformers"), default="auto")
    c.add_argument("--table", type=Path, default=TABLE)
    a = ap.parse_args(argv)
    start = time.perf_counter()
    if a.cmd == "generate":
        from ..llm.benchmarks import load_benchmark

        items = load_benchmark(BENCHMARK, n_items=a.n_items, seed=GENERATION_SEED)
        folder = Path(a.out) / f"{BENCHMARK}__{PAIR}"
        report = generate_table(folder, items, backend="vllm", chunks=a.chunks, only=a.only)
        print(report)
        print(f"generate: {len(items)} items in {time.perf_counter() - start:.0f} s")
        return 0
    result = check(table=a.table, n_per_group=a.n_per_group, backend=a.backend)
    print(f"arith check: {result.summary()} ({time.perf_counter() - start:.0f} s)")
    return 0 if result.passed else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
