"""``gpac route``: route a table with a certificate's thresholds (:mod:`gpac_utils.cli`)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import data
from ..calibrate import CALIBRATORS, UNSEEN, GroupWarning
from ..certificate import Certificate
from ..checks import ParameterError
from ..group_collection import collection
from .common import EXIT_OK, _grouping_labels, _groups, _need_columns, _once, _output, _read, _scores, _warn


def _add_parser(sub, fmt) -> None:
    """Add ``gpac route`` and its options to the subcommands ``sub``."""
    r = sub.add_parser("route", help="route a table with saved thresholds", formatter_class=fmt)
    r.add_argument("--thresholds", required=True, type=Path, help="JSON written by calibrate")
    r.add_argument("--data", required=True, type=Path, help="table to route (.csv, .tsv, .parquet, .jsonl)")
    r.add_argument("--score-col", help="default: the score column used at calibration")
    r.add_argument(
        "--group-col",
        action="append",
        help="default: the group column(s) used at calibration; for a certificate of several groupings, one per "
        "grouping, in its order (repeated)",
    )
    r.add_argument("--id-col", help="default: the id column used at calibration (if present)")
    r.add_argument("-o", "--output", required=True, type=Path, help="routed table; its suffix sets the format")


def _group_cols(a, cert: Certificate) -> tuple[str, ...]:
    """The data's group columns: ``--group-col`` (one per grouping, in the certificate's order), else the
    certificate's; refused in one line when the certificate routes without groups or by another number of them."""
    given, needs = a.group_col or [], CALIBRATORS[cert.method].needs_groups
    if given and not needs:
        raise ParameterError(f"--group-col: a {cert.method} thresholds file routes without group labels")
    count = len(cert.groupings) if cert.groupings else 1
    if given and len(given) != count:
        raise ParameterError(
            f"--group-col: a {cert.method} thresholds file routes by {count} column(s) {list(cert.group_columns)}, "
            f"got {len(given)} {given}; give one per grouping, in its order"
        )
    _once(given)
    if needs and cert.groupings is None:
        raise ParameterError(
            f"--group-col: a {cert.method} thresholds file calibrated on a membership matrix routes from Python "
            "(its groups are no table's columns)"
        )
    return tuple(given) or cert.group_columns if needs else ()


def _collection(df, cols, named, cert: Certificate) -> pd.DataFrame:
    """The label columns of a certificate of several groupings, named by its groupings; a ``warning:`` line for the
    groups and the cells of the data it does not know (their items always think) and for its groups absent here."""
    frame = _grouping_labels(df, cols, named)
    groups = pd.DataFrame({g: frame[c] for g, c in zip(cert.groupings, cols)}, index=df.index)
    coll = collection(groups, len(df), every_group_used=False)
    unseen = [j for j, g in enumerate(coll.names) if g not in cert.groups]
    n = int(coll.member[:, unseen].any(axis=1).sum())
    _warn(
        [coll.names[j] for j in unseen],
        f"in the data are not in the thresholds file ({UNSEEN}); their {n} item(s) always think",
    )
    known = ~coll.member[:, unseen].any(axis=1)
    cells = sorted(set(coll.cells[known].tolist()) - set(cert.thresholds))
    n = int(np.isin(coll.cells, cells).sum())
    _warn(
        cells,
        f"of known groups were not calibrated (no item at calibration); their {n} item(s) always think",
        "cell(s)",
    )
    _warn(sorted(set(cert.groups) - set(coll.names)), "of the thresholds file do not occur in the data")
    return groups


def _run(a) -> int:
    cert = Certificate.read(a.thresholds)
    group_cols = _group_cols(a, cert)
    _output(a.output, table=True, data_path=a.data)
    cols = cert.columns
    # an option given on the command line wins over the column used at calibration
    score_col, id_col = (getattr(a, f"{key}_col") or cols.get(key) for key in ("score", "id"))
    differ = (
        [f"score {score_col!r} (calibrated on {cols['score']!r})"] if cols.get("score") not in (None, score_col) else []
    )
    differ += [f"group {c!r} (calibrated on {o!r})" for c, o in zip(group_cols, cert.group_columns) if c != o]
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
    if CALIBRATORS[cert.method].needs_groups:
        if not group_cols:
            raise ParameterError(f"--group-col: {cert.method} thresholds need the column of group labels")
        _need_columns(df, a.data, [("--group-col", c) for c in group_cols])
    if cert.groupings:  # several groupings (or one, by its column)
        groups = _collection(df, group_cols, named, cert)
    elif group_cols:
        groups = _groups(df, group_cols[0], named)
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
