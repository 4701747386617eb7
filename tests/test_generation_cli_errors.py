"""Bad input to the generation command line (``python -m gpac_utils.llm.generation``) ends in one
``error:`` line naming the option, file or column, before any model loads: exit 2 for an option,
1 for a file. No traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpac_utils.llm import generation

ROOT = Path(__file__).parents[1]
WALK = ["--benchmark", "walk", "--pair", "smollm2", "--backend", "transformers"]


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """Any model load fails the test: every error must come before one."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("gpac_utils.llm.engines.TransformersEngine._batch", refuse)
    monkeypatch.setattr("gpac_utils.llm.engines.tiny.model_dir", refuse)


def run(argv, capsys) -> tuple[int, str]:
    try:
        code = generation.main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return code, err[0]


@pytest.mark.parametrize(
    "argv,needle",
    [
        ([], "--benchmark"),
        (["--benchmark", "nope"], "--benchmark"),
        ([*WALK, "--pair", "nope"], "--pair"),
        ([*WALK, "--backend", "gpu"], "--backend"),
        ([*WALK, "--n-items", "abc"], "--n-items"),
        ([*WALK, "--n-items", "0"], "n_items"),
        ([*WALK, "--n-items", "-3"], "n_items"),
        ([*WALK, "--max-tokens", "1.5"], "--max-tokens"),
        ([*WALK, "--max-tokens", "0"], "max_tokens"),
        ([*WALK, "--n-verbalized", "0"], "n and max_tokens"),
        ([*WALK, "--seed", "x"], "--seed"),
        ([*WALK, "--shard", "3/2"], "shard"),
        ([*WALK, "--shard", "abc"], "shard"),
        ([*WALK, "--shard", "1/0"], "shard"),
        ([*WALK, "--shard", "-1/2"], "shard"),
        ([*WALK, "--shard", "1/2/3"], "shard"),
        ([*WALK, "--roles", "think,bogus"], "roles"),
        ([*WALK, "--roles", ""], "roles"),
        ([*WALK, "--engine-arg", "batch_size"], "--engine-arg"),
        ([*WALK, "--engine-arg", "=3"], "--engine-arg"),
        ([*WALK, "--engine-arg", "bogus=1"], "bogus"),
        ([*WALK, "--windows", "{bad"], "--windows"),
        ([*WALK, "--windows", "[1, 2]"], "windows"),
        ([*WALK, "--windows", '{"nothink": 0}'], "windows"),
        ([*WALK, "--windows", '{"nope": 3}'], "windows"),
        ([*WALK, "--windows", '{"nothink": "many"}'], "windows"),
        (["--benchmark", "math500", "--pair", "qwen", "--backend", "transformers", "--shard", "3/2"], "shard"),
    ],
)
def test_bad_option_is_a_usage_error(argv, needle, capsys, tmp_path):
    code, line = run([*argv, "--out", str(tmp_path / "run")] if argv else argv, capsys)
    assert code == 2 and needle in line, line


@pytest.fixture
def files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "header.csv").write_text("problem,answer,subject,unique_id\n")
    (tmp_path / "columns.csv").write_text("problem,answer,unique_id\nWhat is 1 + 1?,2,walk/x/0\n")
    (tmp_path / "items.txt").write_text("What is 1 + 1?\n")
    (tmp_path / "broken.jsonl").write_text('{"problem": "What is 1 + 1?"\n')
    (tmp_path / "a_file").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--data", "missing.jsonl"], "missing.jsonl"),
        (["--data", "empty.jsonl"], "empty.jsonl"),
        (["--data", "header.csv"], "header.csv"),
        (["--data", "columns.csv"], "subject"),
        (["--data", "items.txt"], "items.txt"),
        (["--data", "broken.jsonl"], "broken.jsonl"),
        (["--out", "a_file"], "a_file"),
    ],
)
def test_bad_file_is_a_data_error(extra, needle, files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    out = [] if "--out" in extra else ["--out", str(files / "run")]
    code, line = run([*WALK, *out, *extra], capsys)
    assert code == 1 and needle in line, line


def test_benchmark_without_a_local_file_is_a_data_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GPAC_BENCHMARKS", str(tmp_path))
    argv = ["--benchmark", "gpqa", "--pair", "qwen", "--backend", "transformers", "--out", str(tmp_path / "run")]
    code, line = run(argv, capsys)
    assert code == 1 and "gpqa" in line and str(tmp_path) in line, line


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path):
    argv = [*WALK, "--shard", "abc", "--out", str(tmp_path / "run")]
    proc = subprocess.run(
        [sys.executable, "-m", "gpac_utils.llm.generation", *argv], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
