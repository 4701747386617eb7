"""``python -m gpac_utils.llm.generation.launcher``: one shard process per GPU, then merge.

Usage::

    python -m gpac_utils.llm.generation.launcher [--gpus 0,1,2,3] [--tensor-parallel-size k] \\
        -- --benchmark math500 --pair qwen [other generation options, no --shard]

GPUs come from ``--gpus``, else ``CUDA_VISIBLE_DEVICES``, else ``nvidia-smi -L``, else
``torch.cuda.device_count()``. They are cut into groups of ``--tensor-parallel-size``; group ``i``
of ``n`` runs ``python -m gpac_utils.llm.generation ... --shard i/n`` with
``CUDA_VISIBLE_DEVICES`` set to its GPUs (and the same ``--tensor-parallel-size``), logging to
``<out>/logs/shard-ii-of-nn.log``. When every shard has finished, the launcher checks that each
role has every item exactly once, writes ``<out>/merged/<role>.parquet`` (items in benchmark
order) and ``<out>/report.json`` (the shard reports side by side), and prints one line on stderr.
A failed shard leaves the others' records on disk: run the launcher again and every shard
resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .__main__ import build_parser, out_dir, report_path
from .pipeline import load_items
from .runner import load_generations


def visible_gpus(spec: str | None = None) -> list[str]:
    """GPU ids to use: ``spec`` ("0,1" or a count "4"), else the environment, else what is detected."""
    if spec is not None:
        spec = spec.strip()
        if spec.isdigit() and int(spec) > 0:  # a count; a single id is written "4,"
            return [str(k) for k in range(int(spec))]
        ids = [g.strip() for g in spec.split(",") if g.strip()]
        if "," not in spec or not ids:
            raise ValueError(f"gpus must be ids like '0,1' ('4,' for id 4 alone) or a count like '2', got {spec!r}")
        return ids
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env:
        return [g.strip() for g in env.split(",") if g.strip()]
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
            ids = [str(k) for k, line in enumerate(out.splitlines()) if line.startswith("GPU ")]
            if ids:
                return ids
        except (subprocess.SubprocessError, OSError):
            pass
    try:
        import torch

        return [str(k) for k in range(torch.cuda.device_count())]
    except ImportError:
        return []


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        k = argv.index("--")
        own, rest = argv[:k], argv[k + 1 :]
    else:
        own, rest = argv, []
    ap = argparse.ArgumentParser(prog="python -m gpac_utils.llm.generation.launcher", description=__doc__)
    ap.add_argument("--gpus", help="GPU ids '0,1,2,3' or a count '4' (default: all visible)")
    ap.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per shard process")
    a = ap.parse_args(own)
    if a.tensor_parallel_size < 1:
        ap.error("--tensor-parallel-size must be >= 1")
    gen = build_parser().parse_args(rest)
    if "--shard" in rest or any(r.startswith("--shard=") for r in rest):
        ap.error("--shard is set by the launcher: leave it out of the generation options")
    try:
        gpus = visible_gpus(a.gpus)
    except ValueError as exc:
        ap.error(f"--gpus: {exc}")
    if not gpus:
        ap.error("--gpus: no GPU visible (no CUDA_VISIBLE_DEVICES, nvidia-smi or CUDA torch); name them")
    tp = a.tensor_parallel_size
    if len(gpus) % tp:
        ap.error(f"--tensor-parallel-size {tp} does not divide the {len(gpus)} GPUs {gpus}")
    groups = [gpus[k : k + tp] for k in range(0, len(gpus), tp)]
    n = len(groups)
    out = out_dir(gen)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    procs = []
    try:
        for i, group in enumerate(groups):
            cmd = [sys.executable, "-m", "gpac_utils.llm.generation", *rest, "--shard", f"{i}/{n}", "--out", str(out)]
            cmd += ["--tensor-parallel-size", str(tp)]
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(group)}
            log = out / "logs" / f"shard-{i:02d}-of-{n:02d}.log"
            with open(log, "ab") as fh:
                procs.append((i, log, subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)))
        codes = {i: p.wait() for i, _, p in procs}
    finally:
        for _, _, p in procs:  # interrupted launcher: stop its own children
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
    failed = [(i, log) for i, log, p in procs if codes[i] != 0]
    if failed:
        for i, log in failed:
            print(f"shard {i}/{n} failed (exit {codes[i]}); last lines of {log}:\n{_tail(log)}", file=sys.stderr)
        print(f"launcher: {len(failed)} of {n} shards failed; run the launcher again to resume", file=sys.stderr)
        return 1
    items = load_items(out)
    roles = gen.roles.split(",")
    merged = {}
    (out / "merged").mkdir(exist_ok=True)
    for role in roles:
        df = load_generations(out, role, items["item_id"])  # every item once, or an error naming the missing
        path = out / "merged" / f"{role}.parquet"
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
        merged[role] = {"path": str(path), "rows": len(df), "items": int(df["item_id"].nunique())}
    shards = [json.loads(report_path(out, (i, n)).read_text()) for i in range(n)]
    wall = time.perf_counter() - t0
    report = {
        "launcher": {"gpus": gpus, "groups": groups, "tensor_parallel_size": tp, "wall_s": round(wall, 3)},
        "merged": merged,
        "roles": {
            role: {
                "generated": sum(s["roles"][role]["generated"] for s in shards),
                "tokens": sum(s["roles"][role]["tokens"] for s in shards),
                "tokens_per_s": round(sum(s["roles"][role]["tokens"] for s in shards) / wall, 2) if wall else None,
                "settings": shards[0]["roles"][role]["settings"],
            }
            for role in roles
        },
        "shards": shards,
    }
    path = out / "report.json"
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    summary = ", ".join(f"{r} {m['items']} items" for r, m in merged.items())
    print(f"launcher: {n} shards on GPUs {groups}: {summary}; {wall:.1f} s; report {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
