"""The serving side of the command line: ``gpac fit-router``, ``gpac audit`` and ``gpac verify``.

fit-router
    fit the router-based score (:mod:`gpac_utils.router_model`: sentence embeddings of the prompt,
    logistic regression) on a share of a labelled table, write it as a JSON artefact, and write the
    *other* rows, scored by it, as the table to calibrate on (disjoint from the fitting rows).
    ``gpac calibrate --score-model router.json`` records its SHA-256 and embedder in the certificate.
audit
    test a certificate on fresh labelled data (:func:`gpac_utils.audit.audit`): per group the
    realised risk of the certified kind, its exact interval and a verdict at a family-wise level.
    Exit 0: consistent; 3 (:data:`EXIT_VIOLATED`): violated in some group.
verify
    recompute a certificate from its recorded settings and the table (:func:`gpac_utils.audit.verify`);
    exit 0 only when every threshold is bit-identical, 1 naming what differs.

The parsers are added to ``gpac``'s by :func:`add_parsers`; :data:`COMMANDS` maps each to its handler.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from . import audit as _audit
from . import certificate, data
from . import router_model as _rm
from .checks import DataError, ParameterError, check_range

EXIT_VIOLATED = 3
#: The certificate's provenance field that records a score model (the router-based score's artefact).
SCORE_MODEL = "score_model"


def add_parsers(sub) -> None:
    """Add ``fit-router``, ``audit`` and ``verify`` to ``gpac``'s subparsers."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    f = sub.add_parser("fit-router", help="fit the router-based score on a share of a table", formatter_class=fmt)
    f.add_argument("--data", required=True, type=Path, help="labelled table, one row per item")
    f.add_argument("--text-col", default="question", help="the prompt's text (what the router reads)")
    f.add_argument("--benchmark", default=None, help="take --text-col from this shipped benchmark, by item id")
    f.add_argument("--id-col", default="item_id", help="unique item identifier")
    f.add_argument("--loss-col", default="loss", help="loss of the non-thinking answer")
    f.add_argument("--suffices-at", type=float, default=0.0, help="the non-thinking answer suffices: loss <= this")
    f.add_argument("--group-col", default=None, help="fit on the same share of each group (stratified)")
    f.add_argument("--fit-fraction", type=float, default=0.5, help="share of the rows the router is fitted on")
    f.add_argument("--seed", type=int, default=0, help="seed of the split and the classifier")
    f.add_argument("--embedder", choices=list(_rm.EMBEDDERS), default=next(iter(_rm.EMBEDDERS)))
    f.add_argument("--score-col", default="score_router", help="column the scored table gets")
    f.add_argument("--scored", required=True, type=Path, help="the other rows with the router's score (calibrate)")
    f.add_argument("-o", "--output", required=True, type=Path, help="router model JSON to write")
    a = sub.add_parser("audit", help="test a certificate on fresh labelled data", formatter_class=fmt)
    a.add_argument("certificate", type=Path, help="JSON written by calibrate")
    a.add_argument("--data", required=True, type=Path, help="fresh labelled table (not the calibration table)")
    for key in ("score", "loss", "group"):
        a.add_argument(f"--{key}-col", default=None, help=f"default: the certificate's {key} column")
    a.add_argument("--level", type=float, default=0.05, help="family-wise level over the groups (Bonferroni)")
    a.add_argument("-o", "--output", type=Path, default=None, help="write the per-group report (CSV)")
    v = sub.add_parser("verify", help="recompute a certificate from its recipe, seed and table", formatter_class=fmt)
    v.add_argument("certificate", type=Path, help="JSON written by calibrate")
    v.add_argument("--data", required=True, type=Path, help="the calibration table")


def _cli():
    from . import cli  # the shared helpers (cli imports this module)

    return cli


# --------------------------------------------------------------------------- fit-router
def _fit_router(a) -> int:
    cli = _cli()
    try:
        frac = check_range("fit_fraction", a.fit_fraction)
        seed = int(a.seed)
        if seed < 0:
            raise ParameterError(f"seed: must be >= 0, got {a.seed}")
    except ParameterError as exc:
        raise cli.UsageError(f"--{str(exc).replace('_', '-')}") from None
    cli._output(a.output)
    cli._output(a.scored, table=True, data_path=a.data)
    df = cli._read(a.data)
    cli._need_columns(df, a.data, {"--id-col": a.id_col, "--loss-col": a.loss_col, "--group-col": a.group_col})
    if a.benchmark is not None:
        from .llm.benchmarks import load_benchmark

        text = load_benchmark(a.benchmark).set_index("item_id")[a.text_col]
        missing = ~df[a.id_col].isin(text.index)
        if missing.any():
            raise DataError(f"--benchmark {a.benchmark}: no item {df.loc[missing, a.id_col].iloc[0]!r} of --data")
        texts = text.loc[df[a.id_col]].to_numpy()
    else:
        cli._need_columns(df, a.data, {"--text-col": a.text_col})
        texts = df[a.text_col].to_numpy()
    loss = df[a.loss_col].to_numpy(float)
    if not np.isfinite(loss).all():
        raise DataError(
            f"--loss-col {a.loss_col!r}: every row needs a loss; bad in {data.describe_rows(df, ~np.isfinite(loss))}"
        )
    rng = np.random.default_rng(seed)
    fit = np.zeros(len(df), bool)
    strata = df[a.group_col].astype(str) if a.group_col else np.zeros(len(df), int)
    for idx in df.groupby(np.asarray(strata)).indices.values():
        pick = rng.permutation(idx)
        fit[pick[: int(round(frac * pick.size))]] = True
    embed = _rm.embedder(a.embedder)
    X = embed.encode(list(texts))
    ids = df[a.id_col].astype(str).tolist()
    info = {
        "table_sha256": certificate.file_sha256(a.data),
        "suffices_at": a.suffices_at,
        "item_ids": [i for i, f in zip(ids, fit) if f],
    }
    model = _rm.fit_router_model(
        X[fit], loss[fit] <= a.suffices_at, embedder=a.embedder, text=a.text_col, seed=seed, fitted_on=info
    )
    sha = model.save(a.output)
    scored = df[~fit].assign(**{a.score_col: model.scores(X[~fit]), a.text_col: texts[~fit]})
    data.write_table(scored, a.scored)
    print(
        f"router ({a.embedder}, logistic regression) fitted on {int(fit.sum())} rows -> {a.output} "
        f"(sha256 {sha[:16]}...); the other {int((~fit).sum())} rows scored in {a.score_col!r} -> {a.scored}"
    )
    return 0


def score_model_record(path: Path, table_ids) -> dict:
    """What ``gpac calibrate --score-model`` records: the artefact's path, SHA-256, embedder, text column.

    A calibration table that shares an item with the router's fitting items is refused (the scores
    of calibration items must be draws like the served ones).
    """
    model = _rm.load_router_model(path)
    shared = sorted(set(map(str, table_ids)) & set(model.fitted_on.get("item_ids", [])))
    if shared:
        raise DataError(
            f"--score-model {path}: {len(shared)} calibration item(s) were fitting items of the router "
            f"(first {shared[0]!r}); calibrate on the rows it did not see (gpac fit-router --scored)"
        )
    sha = certificate.file_sha256(path)
    return {"path": str(path), "sha256": sha, "embedder": model.embedder, "text": model.text}


# --------------------------------------------------------------------------- audit
def _columns(payload: dict, a, df, path) -> dict:
    """The audit's columns: the options, else the certificate's; one line naming a missing one."""
    cols = payload.get("columns") or {}
    out = {}
    for key in ("score", "loss", "group"):
        col = getattr(a, f"{key}_col") or cols.get(key)
        if col is None:
            continue
        if col not in df.columns:
            where = "" if getattr(a, f"{key}_col") else " (the certificate's)"
            raise DataError(f"--data {path}: no {key} column {col!r}{where}; it has {list(df.columns)}")
        out[key] = col
    for key in ("score", "loss"):
        if key not in out:
            raise DataError(f"--{key}-col: the certificate names no {key} column; give it")
    return out


def _audit_cmd(a) -> int:
    cli = _cli()
    try:
        level = check_range("level", a.level)
    except ParameterError as exc:
        raise cli.UsageError(f"--{exc}") from None
    if a.output is not None:
        cli._output(a.output)
    payload = certificate.load_certificate(a.certificate)
    df = cli._read(a.data)
    cols = _columns(payload, a, df, a.data)
    s = cli._scores(df, cols["score"], df)
    loss = df[cols["loss"]].to_numpy(float)
    groups = cli._groups(df, cols["group"], df) if "group" in cols else None
    report = _audit.audit(payload, s, loss, groups, level=level)
    shown = report.assign(**{c: report[c].round(4) for c in ("risk", "lower", "upper")})
    shown["p_value"] = report["p_value"].map(lambda p: f"{p:.3g}")
    print(shown.to_string(index=False))
    print(_audit.verdict_line(report))
    if a.output is not None:
        report.to_csv(a.output, index=False, lineterminator="\n")
    return EXIT_VIOLATED if (report["verdict"] == _audit.VIOLATED).any() else 0


# --------------------------------------------------------------------------- verify
def _verify_cmd(a) -> int:
    cli = _cli()
    payload = certificate.load_certificate(a.certificate)
    df = cli._read(a.data)
    for line in _audit.verify(payload, a.data, df, where=str(a.certificate)):
        print(line)
    return 0


#: command -> handler.
COMMANDS = {"fit-router": _fit_router, "audit": _audit_cmd, "verify": _verify_cmd}
