"""Benchmark loaders from local fixture files; nothing downloads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from gpac_utils.llm import grading
from gpac_utils.llm.benchmarks import load_benchmark

FIX = Path(__file__).parent / "fixtures"


def test_math500():
    df = load_benchmark("math500", FIX / "math500_tiny.jsonl")
    assert len(df) == 12 and df["item_id"].is_unique
    assert set(df["group"]) == {"Algebra", "Geometry", "Number Theory", "Precalculus"}
    assert df["prompt"].iloc[0].endswith(grading.MATH_INSTRUCTION)
    assert df["messages"].iloc[0] == [{"role": "user", "content": df["prompt"].iloc[0]}]
    sub = load_benchmark("math500", FIX / "math500_tiny.jsonl", n_items=5, seed=1)
    assert len(sub) == 5 and set(sub["item_id"]) <= set(df["item_id"])
    assert (
        sub["item_id"].tolist()
        == load_benchmark("math500", FIX / "math500_tiny.jsonl", n_items=5, seed=1)["item_id"].tolist()
    )


def test_gpqa_shuffled_and_gold_letter_points_at_correct_answer():
    df = load_benchmark("gpqa", FIX / "gpqa_tiny.csv", seed=0)
    src = pd.read_csv(FIX / "gpqa_tiny.csv")
    assert list(df["group"]) == ["Physics", "Chemistry", "Biology"]
    for (_, row), (_, s) in zip(df.iterrows(), src.iterrows()):
        assert f"{row['gold']}) {s['Correct Answer']}" in row["prompt"]
        assert all(s[f"Incorrect Answer {k}"] in row["prompt"] for k in (1, 2, 3))


def test_zebralogic_groups_and_gold(tmp_path):
    df = load_benchmark("zebralogic", FIX / "zebralogic_tiny.jsonl")
    assert list(df["group"]) == ["Small", "Large"]
    sol = json.loads(df["gold"].iloc[1])
    assert sol["header"][0] == "House" and len(sol["rows"]) == 4
    assert '"House 4"' in df["prompt"].iloc[1]
    perfect = json.dumps({"solution": {f"House {r[0]}": dict(zip(sol["header"][1:], r[1:])) for r in sol["rows"]}})
    assert grading.grade("zebralogic", perfect, df["gold"].iloc[1])


def test_arena_hard_turns():
    df = load_benchmark("arena_hard", FIX / "arena_hard_tiny.jsonl")
    assert df["prompt"].iloc[1] == "Write a haiku about autumn rain." and (df["gold"] == "").all()


def test_local_folder_lookup(tmp_path, monkeypatch):
    shutil.copy(FIX / "math500_tiny.jsonl", tmp_path / "math500.jsonl")
    monkeypatch.setenv("GPAC_BENCHMARKS", str(tmp_path))
    assert len(load_benchmark("math500")) == 12


def test_missing_file_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GPAC_BENCHMARKS", str(tmp_path))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(
        FileNotFoundError,
        match=r"put gpqa\.jsonl, gpqa\.parquet or gpqa\.csv .* into " + str(tmp_path).replace("/", r"\/"),
    ):
        load_benchmark("gpqa")


def test_bad_columns_are_named(tmp_path):
    p = tmp_path / "m.csv"
    pd.DataFrame({"problem": ["1+1"], "answer": ["2"], "unique_id": ["a"]}).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['subject'\]"):
        load_benchmark("math500", p)
    with pytest.raises(ValueError, match="benchmark: unknown .mmlu."):
        load_benchmark("mmlu", p)


def test_walk_is_shipped_with_two_conversations():
    df = load_benchmark("walk")
    assert len(df) == 48 and df["item_id"].is_unique
    assert df["group"].value_counts().to_dict() == {
        g: 12 for g in ("Arithmetic", "Prealgebra", "Algebra", "Number Theory")
    }
    think, nothink = df["messages"].iloc[0], df["messages_nothink"].iloc[0]
    assert think[-1]["content"].startswith(df["question"].iloc[0]) and "\\boxed{" in think[1]["content"]
    assert nothink == grading.walk_messages(df["question"].iloc[0], "nothink")
    assert all(grading.grade("walk", f"\\boxed{{{g}}}", g) for g in df["gold"])
