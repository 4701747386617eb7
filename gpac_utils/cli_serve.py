"""The serving side of the command line: ``gpac fit-router``, ``gpac audit`` and ``gpac verify``.

fit-router
    fit the router-based score (:mod:`gpac_utils.llm.router_model`: sentence embeddings of the prompt,
    logistic regression) on a share of a labelled table, write it as a JSON artefact, and write the
    *other* rows, scored by it, as the table to calibrate on (disjoint from the fitting rows).
    ``gpac calibrate --score-model router.json`` records its SHA-256 and embedder in the certificate.
audit
    test a certificate on fresh labelled data (:func:`gpac_utils.audit.audit`): per group the
    realised risk of the certified kind, its exact interval and a verdict at a family-wise level.
    Exit 0: consistent; 3 (:data:`EXIT_VIOLATED`): violated in some group.
verify
    recompute a certificate from its recorded settings and the table (:func:`gpac_utils.audit.verify_certificate`);
    exit 0 only when every threshold is bit-identical, 1 naming what differs.

The parsers are added to ``gpac``'s by :func:`add_parsers`; :data:`COMMANDS` maps each to its handler.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from . import audit as _audit
from . import audit_sequential
from .certificate import Certificate
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
    f.add_argument(
        "--embedder", default=None, help="sentence embedder, a registered name (default: the bundled MiniLM)"
    )
    f.add_argument("--score-col", default="score_router", help="column the scored table gets")
    f.add_argument("--scored", required=True, type=Path, help="the other rows with the router's score (calibrate)")
    f.add_argument("-o", "--output", required=True, type=Path, help="router model JSON to write")
    a = sub.add_parser("audit", help="test a certificate on fresh labelled data", formatter_class=fmt)
    a.add_argument("certificate", type=Path, help="JSON written by calibrate")
    a.add_argument("--data", required=True, type=Path, help="fresh labelled table (not the calibration table)")
    for key in ("score", "loss", "group"):
        a.add_argument(f"--{key}-col", default=None, help=f"default: the certificate's {key} column")
    a.add_argument("--level", type=float, default=0.05, help="family-wise level over the groups (Bonferroni)")
    a.add_argument("--binary", action="store_true", help="the loss is 0 or loss_bound by design: exact binomial test")
    a.add_argument("-o", "--output", type=Path, default=None, help="write the per-group report (CSV)")
    audit_sequential.add_sequential_options(a)
    v = sub.add_parser("verify", help="recompute a certificate from its recipe, seed and table", formatter_class=fmt)
    v.add_argument("certificate", type=Path, help="JSON written by calibrate")
    v.add_argument("--data", required=True, type=Path, help="the calibration table")


# --------------------------------------------------------------------------- fit-router
def _llm():
    """The LLM layer's router model (imported by name: the core imports no outer layer)."""
    return importlib.import_module("gpac_utils.llm.router_model")


def _fit_router(a, cli) -> int:
    return _llm().fit_router_command(a, cli)


def record_score_model(path: Path, table_ids) -> dict:
    """What ``gpac calibrate --score-model`` records (:func:`gpac_utils.llm.router_model.score_model_record`)."""
    return _llm().score_model_record(path, table_ids)


# --------------------------------------------------------------------------- audit
def _columns(cert: Certificate, a, df, path) -> dict:
    """The audit's columns: the options, else the certificate's; one line naming a missing one."""
    cols = cert.columns
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


def _audit_cmd(a, cli) -> int:
    if audit_sequential.wanted(a):
        return audit_sequential.command(a, cli)
    try:
        level = check_range("level", a.level)
    except ParameterError as exc:
        raise ParameterError(f"--{exc}") from None
    if a.output is not None:
        cli._output(a.output)
    cert = Certificate.read(a.certificate)
    df = cli._read(a.data)
    cols = _columns(cert, a, df, a.data)
    s = cli._scores(df, cols["score"], df)
    loss = df[cols["loss"]].to_numpy(float)
    groups = cli._groups(df, cols["group"], df) if "group" in cols else None
    report = _audit.audit(cert, s, loss, groups, level=level, binary=a.binary)
    print(f"{_audit.described(cert)}, tested on {a.data}:")
    shown = report.assign(**{c: report[c].round(4) for c in ("risk", "lower", "upper")})
    shown["p_value"] = report["p_value"].map(lambda p: f"{p:.3g}")
    print(shown.to_string(index=False))
    print(_audit.verdict_line(report))
    if a.output is not None:
        report.to_csv(a.output, index=False, lineterminator="\n")
    return EXIT_VIOLATED if (report["verdict"] == _audit.VIOLATED).any() else 0


# --------------------------------------------------------------------------- verify
def _verify_cmd(a, cli) -> int:
    cert = Certificate.read(a.certificate)
    df = cli._read(a.data)
    for line in _audit.verify_certificate(cert, a.data, df):
        print(line)
    return 0


#: command -> handler ``handler(args, cli)``, ``cli`` the :mod:`gpac_utils.cli` module (its shared helpers).
COMMANDS = {"fit-router": _fit_router, "audit": _audit_cmd, "verify": _verify_cmd}
