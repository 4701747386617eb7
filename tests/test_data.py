"""The data schema: validation errors name the column and rows; reading foreign tables."""

import numpy as np
import pandas as pd
import pytest

from gpac_utils import data
from gpac_utils.paper import realdata


def good(n=6):
    return pd.DataFrame(
        {
            "item_id": [f"q{i}" for i in range(n)],
            "group": ["a", "b"] * (n // 2),
            "loss": [0.0, 1.0] * (n // 2),
            "think_correct": [1] * n,
            "nothink_correct": [1, 0] * (n // 2),
            "think_tokens": [100] * n,
            "nothink_tokens": [10] * n,
            "score_logits": np.linspace(0, 1, n),
        }
    )


def test_valid_table_passes():
    out = data.validate(good())
    assert out["group"].tolist() == ["a", "b"] * 3
    assert data.score_columns(out) == ["score_logits"]


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda d: d.iloc[:0], "empty"),
        (lambda d: d.drop(columns=["loss"]), "missing column"),
        (lambda d: d.drop(columns=["score_logits"]), "no score column"),
        (
            lambda d: d.assign(score_logits=[0.1, 0.2, 1.2, 0.3, -0.1, 0.5]),
            r"'score_logits'.*2 row\(s\): row 3 \(item_id='q2'\), row 5",
        ),
        (lambda d: d.assign(loss=[0.0, np.nan, 0, 0, 0, 0]), r"'loss'.*NaN.*row 2"),
        (lambda d: d.assign(loss=[0.0, 2.0, 0, 0, 0, 0]), r"'loss' must lie in \[0.0, 1.0\].*row 2"),
        (lambda d: d.assign(loss=[0.0, np.inf, 0, 0, 0, 0]), "infinite"),
        (lambda d: d.assign(think_tokens=[1, 1, -3, 1, 1, 1]), r"'think_tokens'.*row 3"),
        (lambda d: d.assign(item_id=["x", "y", "x", "z", "w", "v"]), r"duplicate.*row 1.*row 3"),
        (lambda d: d.assign(nothink_correct=[1, 0, 2, 0, 1, 0]), r"'nothink_correct' must be 0 or 1.*row 3"),
        (lambda d: d.assign(score_logits=["0.1", "x", "0.2", "0.3", "0.4", "0.5"]), r"not numeric.*row 2"),
        (lambda d: d.assign(group=["a", None, "a", "b", "a", "b"]), r"'group'.*row 2"),
    ],
)
def test_bad_tables_raise_with_column_and_rows(mutate, match):
    with pytest.raises(data.SchemaError, match=match):
        data.validate(mutate(good()))


def test_loss_bound_and_required_group():
    d = good().assign(loss=[0.0, 1.5, 0, 0, 0, 0])
    assert data.validate(d, loss_bound=2.0)["loss"].max() == 1.5
    with pytest.raises(data.SchemaError, match="missing"):
        data.validate(good().drop(columns=["group"]), require_group=True)


def test_round_trip_parquet_and_csv(tmp_path):
    d = data.validate(good())
    for ext in ("parquet", "csv"):
        p = data.write_table(d, tmp_path / f"t.{ext}")
        back = data.read_table(p)
        assert back["item_id"].tolist() == d["item_id"].tolist()
        np.testing.assert_allclose(back["score_logits"], d["score_logits"])
    a = (tmp_path / "t.parquet").read_bytes()
    data.write_table(d, tmp_path / "t.parquet")
    assert (tmp_path / "t.parquet").read_bytes() == a


def test_mapping_derives_binary_loss_and_rejects_unknown(tmp_path):
    raw = pd.DataFrame({"id": [1, 2, 3], "strong_correct": [1, 1, 0], "weak_correct": [1, 0, 0], "u": [0.1, 0.5, 0.9]})
    p = tmp_path / "raw.csv"
    raw.to_csv(p, index=False)
    t = data.read_table(
        p, {"id": "item_id", "strong_correct": "think_correct", "weak_correct": "nothink_correct", "u": "score_u"}
    )
    assert t["loss"].tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(data.SchemaError, match="lacks"):
        data.read_table(p, {"nope": "item_id"})


#: The data card's per-subject table (data/real/README.md): problems, o1-mini and gpt-4o-mini accuracy, loss rate.
CARD = {
    "Algebra": (185, 0.984, 0.676, 0.314),
    "Counting & Probability": (53, 0.811, 0.472, 0.340),
    "Geometry": (44, 0.818, 0.364, 0.455),
    "Intermediate Algebra": (145, 0.766, 0.214, 0.579),
    "Number Theory": (143, 0.958, 0.629, 0.336),
    "Prealgebra": (116, 0.931, 0.647, 0.293),
    "Precalculus": (35, 0.714, 0.314, 0.429),
}


def test_reads_real_math_table():
    t = realdata.read_real(
        None,
        {
            "strong_correct": "think_correct",
            "weak_correct": "nothink_correct",
            "weak_uncertainty_disagree": "score_disagree",
        },
        keep=["item_id", "group", "loss", "think_correct", "nothink_correct", "score_disagree"],
    )
    assert len(t) == 721 and t["group"].nunique() == 7
    np.testing.assert_array_equal(t["loss"], data.binary_loss(t["think_correct"], t["nothink_correct"]))
    by_group = t.groupby("group").agg(
        n=("loss", "size"), think=("think_correct", "mean"), nothink=("nothink_correct", "mean"), loss=("loss", "mean")
    )
    assert {g: (int(r.n), *(round(float(x), 3) for x in r[1:])) for g, r in by_group.iterrows()} == CARD


def test_the_data_cards_other_numbers_are_the_tables():
    """data/real/README.md: ids, level, parsable replies, mean visible characters, each score's AUROC."""
    from sklearn.metrics import roc_auc_score

    raw = realdata.read_raw()
    assert raw["item_id"].tolist() == list(range(721)) and set(raw["level"]) == {"Level 5"}
    assert int(raw["weak_parsed"].sum()) == 703
    assert (round(raw["strong_chars"].mean()), round(raw["weak_chars"].mean())) == (777, 1616)
    auroc = {
        s: (round(roc_auc_score(1 - raw["weak_correct"], raw[s]), 3), round(roc_auc_score(raw["loss"], raw[s]), 3))
        for s in ("weak_uncertainty_disagree", "weak_uncertainty_len")
    }
    assert auroc == {"weak_uncertainty_disagree": (0.880, 0.827), "weak_uncertainty_len": (0.586, 0.547)}
    assert set(raw["weak_uncertainty_disagree"] * 8) <= set(range(9))  # multiples of 1/8
    assert 0 < raw["weak_uncertainty_len"].min() and raw["weak_uncertainty_len"].max() == 1


def test_the_gpqa_cards_decile_zero_numbers_are_the_tables():
    """data/real/gpqa_gemma4_decile.md: the decile-0 confidence is near 1 for all but a few questions."""
    from gpac_utils.workflow.paths import DATA

    u = pd.read_csv(DATA / "real" / "gpqa_gemma4_decile.csv")["weak_uncertainty"]
    card = (DATA / "real" / "gpqa_gemma4_decile.md").read_text()
    assert f"near 1 for all but {int((u > 0.05).sum())} of the {len(u)} questions" in card
    assert f"above 0.05; at most {u.max():.3f})" in card


def test_the_committed_real_table_matches_its_stored_checksum():
    assert realdata.resolve_data_path(None) == realdata.paths.REPO_ROOT / "data" / "real" / "mathl5_zeroeval.csv"
    stored = realdata.stored_checksums()
    committed = sorted(p.name for p in realdata.paths.REALDATA.iterdir() if p.suffix in (".csv", ".parquet"))
    assert sorted(stored) == committed  # every table there has a checksum, and nothing else is listed
    for name, digest in stored.items():
        assert realdata.sha256(realdata.paths.REALDATA / name) == digest, name


def test_a_changed_real_table_stops_with_one_line_naming_it(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (real / "SHA256SUMS").write_text(realdata.CHECKSUMS.read_text())
    copy = real / realdata.DEFAULT_TABLE.name
    copy.write_bytes(realdata.DEFAULT_TABLE.read_bytes())
    monkeypatch.setattr(realdata.paths, "REALDATA", real)
    monkeypatch.setattr(realdata, "CHECKSUMS", real / "SHA256SUMS")
    assert len(realdata.read_raw(copy)) == 721  # the same bytes: read
    copy.write_bytes(copy.read_bytes().replace(b"\n0,Algebra,Level 5,1,1,", b"\n0,Algebra,Level 5,1,0,", 1))
    with pytest.raises(realdata.ChecksumError, match=r"^\S*mathl5_zeroeval\.csv: SHA-256 .* differs") as err:
        realdata.read_raw(copy)
    assert "\n" not in str(err.value) and "git checkout" in str(err.value)
    (real / "other.csv").write_text("item_id,loss\n1,0\n")
    with pytest.raises(realdata.ChecksumError, match="other.csv: no checksum recorded"):
        realdata.read_real(real / "other.csv")
    mine = tmp_path / "mine.csv"  # a user's own table elsewhere is read unchecked
    mine.write_text("item_id,loss,score_u\n1,0,0.2\n2,1,0.9\n")
    assert realdata.read_real(mine)["loss"].tolist() == [0.0, 1.0]


def test_a_column_named_score_counts_as_a_score():
    df = pd.DataFrame({"item_id": [1, 2], "loss": [0, 1], "score": [0.2, 0.9]})
    assert data.score_columns(df) == ["score"]
    out = data.validate(df)
    assert list(out["score"]) == [0.2, 0.9]
    with pytest.raises(data.SchemaError, match="'score'"):
        data.validate(df.assign(score=[0.2, 1.5]))


def test_the_suite_cannot_read_the_shared_folder_beside_the_repository():
    """tests/conftest.py's audit hook: a read of ../shared fails even where that folder exists (here it
    may not: the hook refuses before the file system is asked), except the paper's LaTeX."""
    beside = realdata.paths.REPO_ROOT.resolve().parent / "shared"
    with pytest.raises(PermissionError, match="a clone elsewhere does not have"):
        open(beside / "realdata" / "mathl5_zeroeval" / "mathl5_zeroeval.csv")
    with pytest.raises(FileNotFoundError):  # the paper's folder is let through (the numbering check)
        open(beside / "paper" / "no-such-file.tex")
