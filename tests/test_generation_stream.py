"""Continuous batching with per-item resumability, the CLI's report file, run facts, the launcher.

Everything runs on :mod:`gpac_utils.llm.generation.fake` (no GPU, no vLLM)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from gpac_utils.llm.generation import Sampling, item_seed, load_generations, run_generation
from gpac_utils.llm.generation.fake import FakeLLM, FakeSamplingParams
from gpac_utils.llm.generation.runner import JOURNAL, _read_journal, load_run_facts
from gpac_utils.llm.generation.vllm_backend import VLLMEngine

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"
MODEL = "Qwen/Qwen3-4B-Thinking-2507"
S = Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=64)


def engine(**kw) -> VLLMEngine:
    return VLLMEngine(MODEL, llm=FakeLLM(MODEL, **kw), sampling_params_cls=FakeSamplingParams)


def items(n=40) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item_id": [f"q{k:03d}" for k in range(n)],
            "messages": [[{"role": "user", "content": f"question {k}"}] for k in range(n)],
        }
    )


def run(eng, out, its, **kw):
    kw = {"role": "think", "sampling": S, "seed": 5, "progress": False, **kw}
    return run_generation(its, eng, out, **kw)


def test_fake_engine_models_continuous_batching():
    e = FakeLLM("m", slots=4, step_time=1.0, count_host_time=False).llm_engine
    for k, m in enumerate([10, 1, 1, 1, 1, 1, 1, 1]):
        e.add_request(str(k), "p", FakeSamplingParams(temperature=1, top_p=1, top_k=-1, max_tokens=m, ignore_eos=True))
    done = []
    while e.has_unfinished_requests():
        done += [ro.request_id for ro in e.step()]
    assert e.max_running == 4 and e.clock == 10.0  # the long one never blocks the seven short ones
    assert done.index("0") == 7 and e.tokens == 17
    with pytest.raises(ValueError, match="slots"):
        FakeLLM("m", slots=0)


def test_stream_equals_chunked_and_keeps_the_engine_full(tmp_path):
    its = items()
    a, b = engine(slots=8), engine(slots=8)
    ra = run(a, tmp_path / "stream", its)
    rb = run(b, tmp_path / "chunks", its, stream=False, batch_size=8)
    assert ra["stream"] and not rb["stream"] and ra["generated"] == rb["generated"] == 40
    assert a.llm.chat_calls == 0 and b.llm.chat_calls == 5
    assert a.llm.llm_engine.clock < b.llm.llm_engine.clock  # no barrier between chunks
    x, y = (
        load_generations(tmp_path / "stream", "think", its["item_id"]),
        load_generations(tmp_path / "chunks", "think", its["item_id"]),
    )
    pd.testing.assert_frame_equal(x, y)  # records do not depend on scheduling
    assert list(x["seed"]) == [item_seed(5, i) for i in its["item_id"]]
    assert (x["reasoning_tokens"] > 0).mean() > 0.5 and x["answer"].str.startswith("the").all()
    # a window smaller than the shard is kept full and gives the same records
    c = engine(slots=4)
    run(c, tmp_path / "window", its, window=6)
    assert c.llm.llm_engine.max_running == 4
    pd.testing.assert_frame_equal(x, load_generations(tmp_path / "window", "think", its["item_id"]))
    with pytest.raises(ValueError, match="window"):
        run(engine(), tmp_path / "bad", its, window=0)


def test_injected_failure_keeps_every_finished_item(tmp_path):
    its = items()
    ref = tmp_path / "ref"
    run(engine(slots=8), ref, its)
    out = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="injected"):
        run(engine(slots=8, fail_after=13), out, its, flush_every=5)
    kept = pd.concat(pd.read_parquet(p) for p in (out / "think").glob("shard-*/part-*.parquet"))
    assert len(kept) == 13 and kept["item_id"].is_unique  # nothing finished was lost
    facts = load_run_facts(out, "think")
    assert facts[-1]["status"].startswith("failed: RuntimeError") and facts[-1]["generated"] == 13
    e2 = engine(slots=8)
    rep = run(e2, out, its)
    assert rep["done_before"] == 13 and rep["generated"] == 27 and len(e2.llm.seen) == 27
    pd.testing.assert_frame_equal(
        load_generations(ref, "think", its["item_id"]), load_generations(out, "think", its["item_id"])
    )


KILLED_RUN = textwrap.dedent(
    """
    import sys
    import pandas as pd
    from gpac_utils.llm.generation import Sampling, run_generation
    from gpac_utils.llm.generation.fake import FakeLLM, FakeSamplingParams
    from gpac_utils.llm.generation.vllm_backend import VLLMEngine

    out, kill_after = sys.argv[1], int(sys.argv[2])
    its = pd.DataFrame({"item_id": [f"q{k:03d}" for k in range(40)],
                        "messages": [[{"role": "user", "content": f"question {k}"}] for k in range(40)]})
    model = "Qwen/Qwen3-4B-Thinking-2507"
    eng = VLLMEngine(model, llm=FakeLLM(model, slots=8, kill_after=kill_after), sampling_params_cls=FakeSamplingParams)
    s = Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=64)
    run_generation(its, eng, out, role="think", sampling=s, seed=5, progress=False, shard="0/1",
                   flush_every=1000, flush_seconds=1e9)
    """
)


def test_sigkill_mid_shard_then_resume_has_no_gaps_or_duplicates(tmp_path):
    its = items()
    ref = tmp_path / "ref"
    run(engine(slots=8), ref, its)
    out = tmp_path / "killed"
    proc = subprocess.run([sys.executable, "-c", KILLED_RUN, str(out), "17"], cwd=ROOT, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    shard = out / "think" / "shard-00-of-01"
    assert not list(shard.glob("part-*.parquet"))  # no part yet: everything sits in the journal
    assert len(_read_journal(shard / JOURNAL)) == 17  # every finished item survived the kill
    # a torn last entry (killed mid-write) is ignored
    with open(shard / JOURNAL, "ab") as fh:
        fh.write((10_000).to_bytes(8, "little") + b"partial")
    e2 = engine(slots=8)
    rep = run(e2, out, its)
    assert (rep["recovered"], rep["done_before"], rep["generated"]) == (17, 17, 23)
    assert len(e2.llm.seen) == 23 and not (shard / JOURNAL).exists()
    got = load_generations(out, "think", its["item_id"])  # raises on duplicates or gaps
    pd.testing.assert_frame_equal(load_generations(ref, "think", its["item_id"]), got)
    assert run(engine(), out, its)["generated"] == 0


def test_journal_duplicate_of_a_part_is_dropped(tmp_path):
    """Killed between writing a part and truncating the journal: the items are in both."""
    its = items(6)
    out = tmp_path / "r"
    run(engine(), out, its)
    shard = out / "think" / "shard-00-of-01"
    [part] = shard.glob("part-*.parquet")
    rows = pd.read_parquet(part).to_dict("records")
    import pickle

    with open(shard / JOURNAL, "wb") as fh:
        for r in rows[:3]:
            data = pickle.dumps([r])
            fh.write(len(data).to_bytes(8, "little") + data)
    assert run(engine(), out, its)["recovered"] == 0
    assert len(load_generations(out, "think", its["item_id"])) == 6


def test_manifest_holds_settings_and_runs_hold_facts(tmp_path):
    its = items(8)
    out = tmp_path / "r"
    run(engine(), out, its.iloc[:4])
    manifest = json.loads((out / "think" / "manifest.json").read_text())
    assert set(manifest) == {"model", "backend", "logprobs_mode", "thinking", "sampling", "seed"}
    assert manifest["sampling"]["max_tokens"] == 64 and "wall_s" not in json.dumps(manifest)
    # another machine / other wall time: resume allowed; run facts appended
    run(engine(), out, its)
    facts = load_run_facts(out, "think")
    assert len(facts) == 2 and [f["generated"] for f in facts] == [4, 4]
    f = facts[-1]
    assert f["status"] == "done" and f["tokens"] > 0 and f["tokens_per_s"] > 0 and f["wall_s"] > 0
    assert f["model"] == MODEL and f["sampling"]["top_k"] == 20 and f["seed"] == 5
    assert {"python", "pandas"} <= set(f["versions"]) and f["gpu"]["count"] >= 0
    with pytest.raises(ValueError, match="other settings"):
        run(engine(), out, its, sampling=S.with_(top_p=0.5))


def test_per_item_sampling_overrides(tmp_path):
    its = items(4)
    long = {"q001": {"max_tokens": 9}}
    run(engine(), tmp_path, its, sampling=S.with_(ignore_eos=True), sampling_overrides=long)
    df = load_generations(tmp_path, "think", its["item_id"]).set_index("item_id")
    assert df.loc["q001", "n_tokens"] == 9 and (df.drop(index="q001")["n_tokens"] == 64).all()
    assert json.loads((tmp_path / "think" / "manifest.json").read_text())["sampling_overrides"] == long


def _cli(args, cwd):
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), **_env()}
    )


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_cli_writes_report_file_and_one_stderr_line(tmp_path):
    out = tmp_path / "run"
    args = ["gpac_utils.llm.generation", "--benchmark", "math500", "--data", str(FIX / "math500_tiny.jsonl")]
    p = _cli([*args, "--backend", "fake", "--out", str(out), "--engine-arg", "slots=4"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""  # nothing for engine logs to mix with
    assert p.stderr.count("\n") == 1 and "report" in p.stderr and str(out / "report.json") in p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["backend"] == "fake" and set(rep["roles"]) == {"think", "nothink", "verbalized"}
    think = rep["roles"]["think"]
    assert think["settings"]["model"] == "Qwen/Qwen3-4B-Thinking-2507" and think["settings"]["backend"] == "fake"
    assert think["run"]["status"] == "done" and think["run"]["tokens_per_s"] > 0 and think["stream"]
    assert "gpu" in rep and "versions" in rep and rep["gpu"]["count"] == 0


def test_cli_rejects_bad_options_in_one_line(capsys):
    from gpac_utils.llm.generation.__main__ import main

    for bad, name in ((["--engine-arg", "slots"], "--engine-arg"), (["--shard", "2/2"], "--shard")):
        with pytest.raises(SystemExit) as exc:
            main(["--benchmark", "math500", "--backend", "fake", *bad])
        assert exc.value.code == 2 and name in capsys.readouterr().err


def test_launcher_runs_one_shard_per_gpu_and_merges(tmp_path, capsys, monkeypatch):
    from gpac_utils.llm.generation.launcher import main

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    out = tmp_path / "run"
    gen = ["--benchmark", "math500", "--data", str(FIX / "math500_tiny.jsonl"), "--backend", "fake"]
    assert main(["--gpus", "0,1", "--", *gen, "--out", str(out)]) == 0
    assert "2 shards" in capsys.readouterr().err
    items = pd.read_parquet(out / "items.parquet")
    for role, per in (("think", 1), ("nothink", 1), ("verbalized", 10)):
        m = pd.read_parquet(out / "merged" / f"{role}.parquet")
        assert len(m) == per * len(items) and list(m["item_id"].unique()) == list(items["item_id"])
        assert {f["shard"] for f in load_run_facts(out, role)} == {"0/2", "1/2"}
    rep = json.loads((out / "report.json").read_text())
    assert rep["launcher"]["groups"] == [["0"], ["1"]] and len(rep["shards"]) == 2
    assert {s["gpu"]["cuda_visible_devices"] for s in rep["shards"]} == {"0", "1"}
    assert rep["roles"]["think"]["generated"] == len(items)
    # tensor parallelism groups GPUs; a count that does not divide is refused in one line
    bad = _cli(
        ["gpac_utils.llm.generation.launcher", "--gpus", "3", "--tensor-parallel-size", "2", "--", *gen], tmp_path
    )
    assert bad.returncode == 2 and "--tensor-parallel-size 2 does not divide" in bad.stderr


def test_launcher_visible_gpus(monkeypatch):
    from gpac_utils.llm.generation.launcher import visible_gpus

    assert visible_gpus("2") == ["0", "1"] and visible_gpus("4,") == ["4"] and visible_gpus("1,3") == ["1", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus() == ["2", "5"]
    with pytest.raises(ValueError, match="gpus"):
        visible_gpus("x")
