"""Command line: ``python -m gpac_utils calibrate ...`` and ``python -m gpac_utils route ...``.

calibrate
    fit PAC / G-PAC / C-PAC on a table and write the thresholds (and every setting) as JSON;
    ``-inf`` thresholds (always think) are written as ``null``.
route
    read such a JSON and a table, and write the table with ``threshold`` and ``route_nothink``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import bounds, data, planning, sampling, selection
from .calibrate import CPAC, GPAC, PAC, from_json
from .partition import ScorePartitioner
from .recipe import Recipe


def _mapping(pairs):
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise SystemExit(f"--map expects SOURCE=TARGET, got {p!r}")
        src, dst = p.split("=", 1)
        out[src] = dst
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gpac_utils", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("calibrate", help="fit thresholds and write them as JSON")
    c.add_argument("--data", required=True, type=Path)
    c.add_argument("--score-col", required=True)
    c.add_argument("--loss-col", default="loss")
    c.add_argument("--group-col", default=None)
    c.add_argument("--id-col", default="item_id")
    c.add_argument("--map", nargs="*", metavar="SOURCE=TARGET", help="extra column renames")
    c.add_argument("--method", choices=["pac", "gpac", "cpac"], default="pac")
    c.add_argument("--k", type=int, default=3)
    c.add_argument("--clustering", choices=["kmeans", "quantile"], default="kmeans")
    c.add_argument("--mode", choices=["split", "joint"], default="split")
    c.add_argument("--eps", type=float, required=True)
    c.add_argument("--alpha", type=float, default=0.05)
    c.add_argument("--bound", choices=list(bounds.BOUNDS), default="wsr")
    c.add_argument("--sampling", choices=list(sampling.SCHEMES), default="bernoulli")
    c.add_argument("--pi", type=float, default=0.5)
    c.add_argument("--rule", choices=list(selection.RULES), default="first-crossing")
    c.add_argument("--candidates", default="auto", help="'auto', 'all' or a quantile grid size")
    c.add_argument("--loss-bound", type=float, default=1.0)
    c.add_argument("--min-group-size", type=int, default=10)
    c.add_argument("--simultaneous", action="store_true", help="Bonferroni alpha/k across groups")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("-o", "--output", required=True, type=Path)
    r = sub.add_parser("route", help="route a table with saved thresholds")
    r.add_argument("--thresholds", required=True, type=Path)
    r.add_argument("--data", required=True, type=Path)
    r.add_argument("--score-col", default=None, help="default: the score column used at calibration")
    r.add_argument("--group-col", default=None, help="default: the group column used at calibration")
    r.add_argument("-o", "--output", required=True, type=Path)
    planning.add_cli(sub)
    return ap


def _load(path, score_col, loss_col, group_col, id_col, extra, need_loss=True):
    import pandas as pd

    df = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    for col in [score_col, id_col] + ([loss_col] if need_loss else []) + ([group_col] if group_col else []):
        if col not in df.columns:
            raise SystemExit(f"error: column {col!r} not in {path} (columns: {list(df.columns)})")
    return df


def _calibrate(a) -> int:

    df = _load(a.data, a.score_col, a.loss_col, a.group_col, a.id_col, None)
    mapping = {a.score_col: "score_cli", a.loss_col: "loss", a.id_col: "item_id", **_mapping(a.map)}
    if a.group_col:
        mapping[a.group_col] = "group"
    keep = list(mapping)
    table = data.apply_mapping(df[keep], mapping)
    try:
        table = data.validate(
            table, loss_bound=a.loss_bound, score_cols=["score_cli"], require_group=a.method == "gpac"
        )
    except data.SchemaError as exc:
        raise SystemExit(f"error: {exc}".replace("score_cli", a.score_col)) from None
    cand = a.candidates if a.candidates in ("auto", "all") else int(a.candidates)
    pi = None if a.sampling == "full" else a.pi
    recipe = Recipe(bound=a.bound, sampling=a.sampling, pi=pi, rule=a.rule, candidates=cand)
    kw = dict(loss_bound=a.loss_bound, min_group_size=a.min_group_size, seed=a.seed)
    if a.method == "pac":
        cal = PAC(a.eps, a.alpha, recipe, **kw).fit(table["score_cli"], table["loss"])
    elif a.method == "gpac":
        cal = GPAC(a.eps, a.alpha, recipe, simultaneous=a.simultaneous, **kw)
        cal.fit(table["score_cli"], table["loss"], table["group"])
    else:
        part = ScorePartitioner(a.k, a.clustering)
        cal = CPAC(a.eps, a.alpha, recipe, partitioner=part, mode=a.mode, simultaneous=a.simultaneous, **kw)
        cal.fit(table["score_cli"], table["loss"])
    import json

    payload = json.loads(cal.to_json())
    payload["columns"] = {"score": a.score_col, "loss": a.loss_col, "group": a.group_col, "id": a.id_col}
    payload["data"] = str(a.data)
    payload["n_items"] = int(len(table))
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    shown = {g: t for g, t in payload["thresholds"].items()}
    print(f"{cal.name} ({a.bound}, {a.sampling}, {a.rule}) thresholds: {shown} -> {a.output}")
    return 0


def _route(a) -> int:
    import json

    import pandas as pd

    text = a.thresholds.read_text()
    payload = json.loads(text)
    cols = payload.get("columns", {})
    score_col = a.score_col or cols.get("score")
    group_col = a.group_col or cols.get("group")
    cal = from_json(text)
    df = pd.read_csv(a.data) if a.data.suffix.lower() == ".csv" else pd.read_parquet(a.data)
    if score_col not in df.columns:
        raise SystemExit(f"error: score column {score_col!r} not in {a.data}")
    s = pd.to_numeric(df[score_col], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(s) | (s < 0) | (s > 1)
    if bad.any():
        raise SystemExit(f"error: column {score_col!r} must lie in [0, 1]; bad rows {np.flatnonzero(bad)[:5].tolist()}")
    groups = None
    if payload["method"] == "G-PAC":
        if not group_col or group_col not in df.columns:
            raise SystemExit(f"error: G-PAC thresholds need the group column {group_col!r} in {a.data}")
        groups = df[group_col].astype(str).to_numpy()
    out = df.copy()
    out["threshold"] = cal.thresholds_for(s, groups)
    out["route_nothink"] = s <= out["threshold"].to_numpy()
    a.output.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(a.output, index=False)
    print(f"routed {int(out['route_nothink'].sum())}/{len(out)} items to the non-thinking model -> {a.output}")
    return 0


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    if a.command == "plan":
        return planning.cli_main(a)
    return _calibrate(a) if a.command == "calibrate" else _route(a)


if __name__ == "__main__":
    sys.exit(main())
