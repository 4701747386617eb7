"""The serving side of the command line: ``gpac fit-router``, ``gpac audit`` and ``gpac verify``.

fit-router
    fit the router-based score (:mod:`gpac_utils.llm.router_model`: sentence embeddings of the prompt,
    logistic regression) on a share of a labelled table, write it as a JSON artefact, and write the
    *other* rows, scored by it, as the table to calibrate on (disjoint from the fitting rows); an
    existing ``--score-col`` column of the table is refused unless ``--overwrite-score-col``.
    ``gpac calibrate --score-model router.json`` recomputes the score column from the model and the
    text column (refusing a column that is not the model's score), then records its SHA-256 and embedder.
audit
    test a certificate on fresh labelled data (:func:`gpac_utils.audit.audit`): per group the
    realised risk of the certified kind, its exact interval and a verdict at a family-wise level.
    Exit 0: consistent; 3 (:data:`EXIT_VIOLATED`): violated in some group.
verify
    verify every field of a certificate (:func:`gpac_utils.verify.verify_certificate`): recomputed from
    the table and the recorded settings, checked against the fields it must agree with, or against
    what the operator states (``--expect eps=0.1 alpha=0.05 method=G-PAC score=score_logits ...``);
    the fields not stated are listed as taken on trust, the descriptive ones as not checked. Exit 0
    only when every checked and stated field agrees; 1 naming the first that does not; 2 for a
    malformed or unknown ``--expect`` key.

The parsers are added to ``gpac``'s by :func:`add_parsers`; :data:`COMMANDS` maps each to its handler.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from . import audit as _audit
from . import verify as _verify
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
    f.add_argument(
        "--overwrite-score-col",
        action="store_true",
        help="replace an existing --score-col column of --data in the scored table (refused otherwise)",
    )
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
    v = sub.add_parser(
        "verify",
        help="check every field of a certificate against its table, its settings and what you state",
        description="Recompute every field of a certificate from the calibration table and the recorded settings, "
        "check it against the fields it must agree with, and check what no data can tell against --expect. "
        "Exit 0: every field agrees (the fields not stated are listed as taken on trust); 1: the first field "
        "that does not, named; 2: a bad --expect.",
        formatter_class=fmt,
    )
    v.add_argument("certificate", type=Path, help="JSON written by calibrate")
    v.add_argument("--data", required=True, type=Path, help="the calibration table (any format: its columns decide)")
    v.add_argument(
        "--expect",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="what the certificate must say, of what no data can tell; keys: " + ", ".join(_verify.EXPECT),
    )
    v.add_argument(
        "--score-model",
        type=Path,
        default=None,
        help="the recorded score model's file (default: its recorded path, else beside the certificate)",
    )


# --------------------------------------------------------------------------- fit-router
def _llm():
    """The LLM layer's router model (imported by name: the core imports no outer layer)."""
    return importlib.import_module("gpac_utils.llm.router_model")


def _fit_router(a, cli) -> int:
    return _llm().fit_router_command(a, cli)


def record_score_model(path: Path, frame, *, score_col: str, id_col: str | None) -> dict:
    """What ``gpac calibrate --score-model`` records, after recomputing the score column from the model
    (:func:`gpac_utils.llm.router_model.score_model_record`)."""
    return _llm().score_model_record(path, frame, score_col=score_col, id_col=id_col)[0]


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
    expect = _verify.parse_expect(a.expect)  # usage errors first
    cert = Certificate.read(a.certificate)
    df = cli._read(a.data)
    for line in _verify.verify_certificate(cert, a.data, df, expect=expect, score_model=a.score_model):
        print(line)
    return 0


#: command -> handler ``handler(args, cli)``, ``cli`` the :mod:`gpac_utils.cli` module (its shared helpers).
COMMANDS = {"fit-router": _fit_router, "audit": _audit_cmd, "verify": _verify_cmd}
