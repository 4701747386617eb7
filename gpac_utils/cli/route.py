"""``gpac route``: route a table with a certificate's thresholds (:mod:`gpac_utils.cli`)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

from .. import data
from ..calibrate import UNSEEN, GroupWarning
from ..certificate import Certificate
from ..checks import ParameterError
from .common import EXIT_OK, _groups, _need_columns, _output, _read, _scores, _warn


def _add_parser(sub, fmt) -> None:
    """Add ``gpac route`` and its options to the subcommands ``sub``."""
    r = sub.add_parser("route", help="route a table with saved thresholds", formatter_class=fmt)
    r.add_argument("--thresholds", required=True, type=Path, help="JSON written by calibrate")
    r.add_argument("--data", required=True, type=Path, help="table to route (.csv, .tsv, .parquet, .jsonl)")
    r.add_argument("--score-col", help="default: the score column used at calibration")
    r.add_argument("--group-col", help="default: the group column used at calibration")
    r.add_argument("--id-col", help="default: the id column used at calibration (if present)")
    r.add_argument("-o", "--output", required=True, type=Path, help="routed table; its suffix sets the format")


def _run(a) -> int:
    cert = Certificate.read(a.thresholds)
    if a.group_col and cert.kind != "known":
        raise ParameterError(f"--group-col: a {cert.method} thresholds file routes without group labels")
    _output(a.output, table=True, data_path=a.data)
    cols = cert.columns
    # an option given on the command line wins over the column used at calibration
    score_col, group_col, id_col = (getattr(a, f"{key}_col") or cols.get(key) for key in ("score", "group", "id"))
    differ = [
        f"{key} {col!r} (calibrated on {cols[key]!r})"
        for key, col in (("score", score_col), ("group", group_col))
        if cols.get(key) and col and col != cols[key] and (key == "score" or cert.kind == "known")
    ]
    if differ:
        print(f"warning: the data's columns differ from the certificate's: {'; '.join(differ)}", file=sys.stderr)
    if not score_col:
        raise ParameterError("--score-col: the certificate names no score column; give it")
    cal = cert.calibrator()
    df = _read(a.data)
    _need_columns(df, a.data, {"--score-col": score_col})
    named = df.rename(columns={id_col: data.ID}) if id_col in df.columns else df
    if id_col in df.columns and df[id_col].duplicated().any():  # each row is still routed on its own
        twice = df[id_col].duplicated(keep=False).to_numpy()
        print(f"warning: column {id_col!r} has duplicate ids in {data.describe_rows(named, twice)}", file=sys.stderr)
    s = _scores(df, score_col, named)
    groups = None
    if cert.kind == "known":
        if not group_col:
            raise ParameterError(f"--group-col: {cert.method} thresholds need the column of group labels")
        _need_columns(df, a.data, {"--group-col": group_col})
        groups = _groups(df, group_col, named)
        known, present = set(cal.thresholds_), set(np.unique(groups).tolist())
        unseen = sorted(present - known)
        n = int(np.isin(groups, unseen).sum())
        _warn(unseen, f"in the data are not in the thresholds file ({UNSEEN}); their {n} item(s) always think")
        _warn(sorted(known - present), "of the thresholds file do not occur in the data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupWarning)  # reported above
        thr = cal.thresholds_for(s, groups)
    out = df.assign(threshold=thr, route_nothink=s <= thr)
    data.write_table(out, a.output)
    print(f"routed {int(out['route_nothink'].sum())}/{len(out)} items to the non-thinking model -> {a.output}")
    return EXIT_OK
