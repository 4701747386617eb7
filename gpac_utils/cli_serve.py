"""The serving side of the command line: ``gpac fit-router``, ``gpac audit`` and ``gpac verify``.

fit-router
    fit the router-based score (:mod:`gpac_utils.llm.router_model`: sentence embeddings of the prompt,
    logistic regression) on a share of a labelled table, write it as a JSON artefact, and write the
    *other* rows, scored by it, as the table to calibrate on (disjoint from the fitting rows); an
    existing ``--score-col`` column of the table is refused unless ``--overwrite-score-col``.
    ``gpac calibrate --score-model router.json`` recomputes the score column from the model and the
    text column (refusing a column that is not the model's score within 1e-5), then records its SHA-256
    and embedder.
audit
    test a certificate on fresh labelled data as a gate (:func:`gpac_utils.audit.audit`): per
    certified group (a certificate of several groupings: every group of every grouping, its items
    routed by their cells' thresholds) the realised risk of the certified kind, its bounds, a verdict (violated,
    confirmed, inconclusive; risk 0 by construction for a group that always thinks) at a
    family-wise level, and the risk it would flag four times in five. Exit 0 only when every
    certified group was tested, none violated, each confirmed or large enough; else 3
    (:data:`~gpac_utils.audit.EXIT_VIOLATED`) violated, 4 (:data:`~gpac_utils.audit.EXIT_UNTESTED`) a
    certified group untested, 5 (:data:`~gpac_utils.audit.EXIT_TOO_SMALL`) a group too small
    (:func:`gpac_utils.audit.gate`). Audit items that are calibration items are
    refused (1); with a recorded score model, the scores are recomputed from the text column.
verify
    verify every field of a certificate (:func:`gpac_utils.verify.verify_certificate`): recomputed from
    the table and the recorded settings, checked against the fields it must agree with, or against
    what the operator states (``--expect eps=0.1 alpha=0.05 method=G-PAC score=score_logits ...``);
    the fields not stated are listed as taken on trust, the descriptive ones as not checked. Exit 0
    only when every recomputed and cross-checked field agrees and every ``--expect`` matches; 1
    naming the first that does not; 2 for a malformed or unknown ``--expect`` key, or
    ``--score-model`` for a certificate that records none.

The parsers are added to ``gpac``'s by :func:`add_parsers`; :data:`COMMANDS` maps each to its handler.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import audit as _audit
from . import audit_sequential
from . import verify as _verify
from .certificate import Certificate
from .checks import DataError, ParameterError, check_range


def add_parsers(sub) -> None:
    """Add ``fit-router``, ``audit`` and ``verify`` to ``gpac``'s subparsers."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    f = sub.add_parser("fit-router", help="fit the router-based score on a share of a table", formatter_class=fmt)
    f.add_argument("--data", required=True, type=Path, help="labelled table, one row per item")
    f.add_argument("--text-col", default="question", help="the prompt's text (what the router reads)")
    f.add_argument("--benchmark", help="take --text-col from this shipped benchmark, by item id")
    f.add_argument("--id-col", default="item_id", help="unique item identifier")
    f.add_argument("--loss-col", default="loss", help="loss of the non-thinking answer")
    f.add_argument("--suffices-at", type=float, default=0.0, help="the non-thinking answer suffices: loss <= this")
    f.add_argument("--group-col", help="fit on the same share of each group (stratified)")
    f.add_argument("--fit-fraction", type=float, default=0.5, help="share of the rows the router is fitted on")
    f.add_argument("--seed", type=int, default=0, help="seed of the split and the classifier")
    f.add_argument("--embedder", help="sentence embedder, a registered name (default: the bundled MiniLM)")
    f.add_argument("--score-col", default="score_router", help="column the scored table gets")
    f.add_argument(
        "--overwrite-score-col",
        action="store_true",
        help="replace an existing --score-col column of --data in the scored table (refused otherwise)",
    )
    f.add_argument("--scored", required=True, type=Path, help="the other rows with the router's score (calibrate)")
    f.add_argument("-o", "--output", required=True, type=Path, help="router model JSON to write")
    a = sub.add_parser(
        "audit",
        help="test a certificate on fresh labelled data, as a gate",
        formatter_class=fmt,
        epilog=(
            f"exit status: {_audit.EXIT_PASS} every certified group tested, none violated, each confirmed or large "
            f"enough to flag the --detectable risk with probability --power; {_audit.EXIT_VIOLATED} a group violated; "
            f"{_audit.EXIT_UNTESTED} a certified group not tested (no items, or no routed items) and not "
            f"--allow-untested; {_audit.EXIT_TOO_SMALL} an inconclusive group too small to flag --detectable; "
            "1 bad input (audit items that are calibration items, a missing column, a score model whose hash "
            "differs); 2 usage. The level holds for one look at the data."
        ),
    )
    a.add_argument("certificate", type=Path, help="JSON written by calibrate")
    a.add_argument("--data", required=True, type=Path, help="fresh labelled table (not the calibration items)")
    for key in ("score", "loss", "id"):
        a.add_argument(f"--{key}-col", help=f"default: the certificate's {key} column")
    a.add_argument(
        "--group-col",
        action="append",
        help="default: the certificate's group column; a certificate of several groupings reads its groupings' "
        "columns (given, repeated, they must be those, in its order)",
    )
    a.add_argument("--level", type=float, default=0.05, help="family-wise level over the groups (Bonferroni)")
    a.add_argument("--binary", action="store_true", help="the loss is 0 or loss_bound by design: exact binomial test")
    a.add_argument(
        "--detectable",
        type=float,
        help="the risk each inconclusive group must flag with probability --power (default: 2 eps, at most the "
        "loss bound)",
    )
    a.add_argument("--power", type=float, default=_audit.POWER, help="the probability of flagging --detectable")
    a.add_argument(
        "--allow-untested",
        action="append",
        default=[],
        metavar="GROUP",
        help="accept that this certified group has no trials (repeatable); the verdict line says so",
    )
    a.add_argument("--score-model", type=Path, help="the router model file (default: the certificate's record)")
    a.add_argument("-o", "--output", type=Path, help="write the per-group report (CSV)")
    audit_sequential.add_sequential_options(a)
    v = sub.add_parser(
        "verify",
        help="check every field of a certificate against its table, its settings and what you state",
        description="Recompute the fields of a certificate that its calibration table and recorded settings "
        "determine, check the others against the fields they must agree with, and check what no data can tell "
        "against --expect. Exit 0: every recomputed and cross-checked field agrees and every --expect matches; "
        "fields not stated are listed as taken on trust. 1: the first field that does not agree, named (also a "
        "score_router certificate without a recorded score model); 2: a bad --expect, or --score-model for a "
        "certificate that records no score model.",
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
        help="what the certificate must say, of what no data can tell (recipe=X: exactly recipe X, no field "
        "overridden); keys: " + ", ".join(_verify.EXPECT),
    )
    v.add_argument(
        "--score-model",
        type=Path,
        help="the recorded score model's file (when not given: its recorded path, else beside the "
        "certificate)%(default).0s",
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
def _columns(cert: Certificate, a, df, need: tuple[str, ...], optional=("score", "group", "id"), id_default=None):
    """The audit's columns: the options, else the certificate's (an id column, else ``id_default``); one line
    naming a missing one (of ``need``, or given by an option)."""
    out = {}
    for key in dict.fromkeys((*need, *optional)):
        given = getattr(a, f"{key}_col")
        col = given or cert.columns.get(key) or (id_default if key == "id" else None)
        if col is None and key in need:
            raise DataError(f"--{key}-col: the certificate names no {key} column; give it")
        if col in df.columns:
            out[key] = col
        elif col is not None and (key in need or given):
            where = "" if given else " (the certificate's)"
            why = " to check the audit items are not calibration items, which it records"
            why = why if key == "id" and id_default is None else ""  # the one-look audit's reason
            raise DataError(f"--data {a.data}: no {key} column {col!r}{where}{why}; it has {list(df.columns)}")
    return out


def _group_columns(cert: Certificate, a) -> tuple[str, ...]:
    """A collection certificate's grouping columns (:attr:`~gpac_utils.certificate.Certificate.group_columns`); a
    ``--group-col`` given, repeated, must name those, in its order (``a.group_col`` becomes None). Another
    certificate's ``--group-col``: one value (``a.group_col`` becomes it); returns ``()``."""
    given = a.group_col or []
    if cert.kind != "collection":
        if len(given) > 1:
            raise ParameterError(
                f"--group-col: a {cert.method} certificate audits by one group column, got {len(given)} {given}"
            )
        a.group_col = given[0] if given else None
        return ()
    if cert.groupings is None:
        raise ParameterError(
            f"--group-col: a {cert.method} certificate calibrated on a membership matrix is audited from Python "
            "(gpac_utils.audit.audit with the matrix; its groups are no table's columns)"
        )
    cols = cert.group_columns
    if given and tuple(given) != cols:
        raise ParameterError(
            f"--group-col: a {cert.method} certificate is audited by the columns of its groupings {list(cols)}, in "
            f"this order; got {given} (leave --group-col out to read them from the certificate)"
        )
    a.group_col = None  # read by _collection_labels, not as one column
    return cols


def _collection_labels(cert: Certificate, a, df, cols: tuple[str, ...], cli):
    """The label columns of a collection certificate's groupings, named by them (one label array for a certificate
    of one label column); one line naming a column the table lacks, or a missing or empty label."""
    for g, c in zip(cert.groupings or (None,), cols):
        if c not in df.columns:
            which = f" (the certificate's grouping {g!r})" if g is not None and g != c else ""
            raise DataError(f"--data {a.data}: no group column {c!r}{which}; it has {list(df.columns)}")
    if not cert.groupings:  # one label column (a file before groupings were recorded)
        return cli._groups(df, cols[0], df)
    frame = cli._grouping_labels(df, cols, df)
    return pd.DataFrame({g: frame[c] for g, c in zip(cert.groupings, cols)}, index=df.index)


def _recomputed_scores(cert: Certificate, a, df, cols, cli) -> np.ndarray:
    """The scores the audit routes on: with a recorded score model, recomputed
    (:func:`gpac_utils.audit.model_scores`, its warning as a ``warning:`` line); else the score column's."""
    try:
        with cli._warning_lines(_audit.AuditWarning):
            s = _audit.model_scores(
                cert, df, score_col=cols.get("score"), path=a.score_model, source=f"--data {a.data}"
            )
    except ParameterError as exc:
        raise ParameterError(f"--score-model: {a.certificate} {str(exc).partition(': ')[2]}") from None
    return cli._scores(df, cols["score"], df) if s is None else s  # one line naming a bad score


def _sequential(a, cli, cert: Certificate, df, cols: dict, s, groups, level: float):
    """``gpac audit --sequential`` once the inputs are read (:mod:`gpac_utils.audit_sequential`): the state
    continued and written; the report, its table as shown, its heading, its verdict lines and the exit status."""
    source = f"--data {a.data}"
    loss = pd.to_numeric(df[cols["loss"]], errors="coerce").to_numpy(float)
    ids = df[cols["id"]].to_numpy()
    with cli._warning_lines(_audit.AuditWarning):
        _audit.check_fresh(cert, ids=ids, columns={"score": s, "loss": loss, "id": ids}, source=source)
    checked = df.assign(**{cols["score"]: s})
    if groups is not None:
        checked[cols["group"]] = groups
    frame = audit_sequential.ordered(checked, cols, source)
    if a.state.exists():
        state = audit_sequential.SequentialAudit.read(a.state)
        state.check_same(cert.sha256, level, a.bet, cols, f"--state {a.state}")
    else:
        state = audit_sequential.SequentialAudit.start(cert, cert.sha256, level=level, bet=a.bet, columns=cols)
    report = state.look(cert, frame, source)
    state.write(a.state)
    unknown = sorted(set(report["group"]) - set(cert.groups))
    if unknown:
        listed = _audit._listed(unknown, cert.groups, dict(zip(report["group"], report["n"])))
        print(
            f"warning: {len(unknown)} label(s) of --data {a.data} are not groups of the certificate: they always "
            f"think and are not monitored: {listed}",
            file=sys.stderr,
        )
    shown = report.assign(risk=report["risk"].round(4))
    for c in ("e_violated", "e_confirmed"):
        shown[c] = report[c].map(lambda e: "-" if e != e else f"{e:.3g}")
    heading = f"sequential audit of {a.data} (state {a.state})"
    verdict = "\n".join(audit_sequential.verdict_lines(report, a.allow_untested))
    return report, shown, heading, verdict, audit_sequential.exit_status(report, a.allow_untested)


def _audit_cmd(a, cli) -> int:
    sequential = audit_sequential.wanted(a)  # its options without --sequential refused
    with cli._as_options():
        level = check_range("level", a.level)
        power = a.power if sequential else check_range("power", a.power)
    if a.output is not None:
        cli._output(a.output)
    cert = Certificate.read(a.certificate)
    group_cols = _group_columns(cert, a)
    if sequential and group_cols:
        raise ParameterError(
            f"--sequential: a {cert.method} certificate (a group per label of each of {list(group_cols)}) is audited "
            "in one look for now; drop --sequential, --order-col and --state"
        )
    df = cli._read(a.data)
    if sequential:
        known = ("group",) if cert.kind == "known" else ()
        cols = _columns(cert, a, df, ("id", "order", "score", "loss", *known), (), "item_id")
    else:
        model = bool(cert.has_provenance and (cert.provenance or {}).get(_audit.SCORE_MODEL))
        need = ("loss",) if model else ("score", "loss")
        cols = _columns(cert, a, df, need + (("id",) if cert.calibration_ids is not None else ()))
    s = _recomputed_scores(cert, a, df, cols, cli)
    groups = cli._groups(df, cols["group"], df) if "group" in cols and cert.kind == "known" else None
    if group_cols:
        groups = _collection_labels(cert, a, df, group_cols, cli)
    if sequential:
        report, shown, heading, verdict, status = _sequential(a, cli, cert, df, cols, s, groups, level)
    else:
        with cli._warning_lines(_audit.AuditWarning), cli._as_options():
            report = _audit.audit(
                cert,
                s,
                df[cols["loss"]].to_numpy(float),
                groups,
                ids=df[cols["id"]].to_numpy() if "id" in cols else None,
                level=level,
                binary=a.binary,
                detectable=a.detectable,
                power=power,
                allow_untested=a.allow_untested,
                source=f"--data {a.data}",
            )
        shown = report.assign(**{c: report[c].round(4) for c in ("risk", "lower", "upper", "detectable")})
        shown["p_value"] = report["p_value"].map(lambda p: "-" if p != p else f"{p:.3g}")
        heading = f"tested on {a.data}"
        verdict = _audit.verdict_line(report)
        status = _audit.gate(report)
    print(f"{_verify.described(cert)}, {heading}:")
    print(shown.astype(object).where(shown.notna(), "-").replace(float("inf"), "none").to_string(index=False))
    print(verdict)
    if a.output is not None:
        report.to_csv(a.output, index=False, lineterminator="\n")
    return status


# --------------------------------------------------------------------------- verify
def _verify_cmd(a, cli) -> int:
    expect = _verify.parse_expect(a.expect)  # usage errors first
    cert = Certificate.read(a.certificate)
    df = cli._read(a.data)
    for line in _verify.verify_certificate(cert, a.data, df, expect=expect, score_model=a.score_model):
        print(line)
    return 0


#: command -> handler ``handler(args, cli)``, ``cli`` the :mod:`gpac_utils.cli.common` module (the shared helpers).
COMMANDS = {"fit-router": _fit_router, "audit": _audit_cmd, "verify": _verify_cmd}
