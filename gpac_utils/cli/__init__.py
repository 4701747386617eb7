"""Command line: ``gpac calibrate``, ``route``, ``plan``, ``inspect``, ``fit-router``, ``audit`` and ``verify``
(also ``python -m gpac_utils``). ``gpac COMMAND --help`` lists a command's options.

calibrate
    fit PAC / G-PAC / C-PAC (or, with several --group-col, a grouping each: Shift-G-PAC / Min-G-PAC / Path-G-PAC,
    every group of every grouping within eps; docs/overlapping-groups.md) on a table and write the
    certificate: the thresholds (a collection's: one per cell), every setting,
    the provenance and each group's status as JSON (:mod:`gpac_utils.certificate`). A
    larger score U means a *less* certain non-thinking answer: an item is routed to the
    non-thinking model when U <= its group's threshold. A threshold ``null`` in the JSON means
    "always think" (no threshold could be certified for that group). With ``--score-model``
    (a model written by ``fit-router``), the score column is first recomputed from the model and
    the table's text column, and refused unless equal within 1e-5; the model's hash is recorded.
route
    read such a JSON (its schema checked) and a table; write the table with ``threshold`` and
    ``route_nothink`` in the format of the ``-o`` suffix (.csv, .tsv, .parquet, .jsonl). A warning
    names the columns when they differ from those the certificate was calibrated on.
plan
    how many expert labels each group needs, from a labelled pilot: whether each group can certify
    anything at all with its items (:mod:`gpac_utils.feasibility`), the predicted routed share per
    group and number of labels (:mod:`gpac_utils.prediction`) and the budget's best allocation
    (:mod:`gpac_utils.allocation`, an exact dynamic programme). With several ``--group-col`` (a grouping
    each), no forecast: the feasibility table of every group of every grouping, at the level the collection's
    calibrator gives each (docs/planning.md, "Several groupings").
inspect
    print a thresholds file for review (:mod:`gpac_utils.certificate`): its settings, provenance
    (hashes of the table and columns, package version, recipe and its overrides, seed, creation
    time, the score model's path, hash, embedder and text column) and one row per group (n,
    labelled, status, threshold, the certified bound at it); ``--data`` checks a table against the
    file by its columns' values, whatever the format (a copy's bytes are shown; the file the
    provenance names must keep its bytes), and the score model's file by its hash.
fit-router
    fit the router-based score (sentence embeddings of the prompt, logistic regression) on a share
    of a labelled table, write it as JSON, and write the other rows scored by it (the table to
    calibrate on); an existing score column is replaced only with ``--overwrite-score-col``.
audit
    test a certificate on fresh labelled data, per group (:mod:`gpac_utils.audit`; a certificate of
    several groupings: per group of every grouping, each item routed by its cell): the realised
    risk, its bounds and a verdict at a family-wise level; exit 3 when a group is violated (the
    other statuses: ``gpac audit --help``).
verify
    check every field of a certificate (:mod:`gpac_utils.verify`): recomputed from the calibration
    table and the recorded settings, checked against the fields it must agree with, or against
    what you state with ``--expect eps=0.1 alpha=0.05 method=G-PAC score=score_logits ...``. Exit 0:
    every recomputed and cross-checked field agrees and every ``--expect`` matches; the fields you
    do not state are listed as taken on trust.

Exit status: 0 on success, 2 on a usage error (a bad option or parameter value), 1 on a data
error (a missing or malformed file, column or row). Errors are one line, never a traceback;
warnings are ``warning:`` lines, one per kind, with a count.

Checked before any work: every option's value; ``gpac calibrate`` without ``--method`` calibrates
G-PAC when one ``--group-col`` is given, Shift-G-PAC when several are, else PAC; options the chosen
method ignores are refused (``--group-col`` with ``--method pac`` or ``cpac``, several with ``--method
gpac``, one given twice, ``--k``/``--partition``/``--mode`` without ``--method cpac``,
``--simultaneous`` with ``--method pac``; ``gpac route --group-col`` with a file that routes without
groups, or other than one per grouping of the file's); the output path (``-o``: not a directory, its
parent not a file, for ``route`` a known table suffix and not the ``--data`` file); a table with two columns of one name
(the first would be used silently); empty group labels (``''``); and ``gpac plan --budget`` above
what the plan can spend (each group's largest label count on the grid, capped at its rows), or with several
``--group-col`` (no forecast of a collection), as are the options only the forecast reads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import checks, cli_serve, data
from ..checks import DataError, ParameterError
from . import calibrate, common, inspect, plan, route  # one module per command, and their helpers
from .common import EXIT_DATA, EXIT_OK, EXIT_USAGE, _Parser


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="gpac", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter
    for command in (calibrate, route, plan, inspect):
        command._add_parser(sub, fmt)
    cli_serve.add_parsers(sub)  # fit-router, audit, verify
    return ap


# --------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 data error, 2 usage error).

    Errors are printed as one ``error:`` line on stderr, not raised.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        :data:`EXIT_OK` (0), :data:`EXIT_DATA` (1) or :data:`EXIT_USAGE` (2).

    Raises
    ------
    SystemExit
        From :mod:`argparse`, for ``--help`` or a command line it cannot parse (status 2).

    A closed standard output (``gpac inspect thr.json | head``) ends the command quietly, status 0.
    """
    a = _parser().parse_args(argv)
    try:
        with common._warning_lines(checks.SettingWarning):  # the settings that look like a mistake
            if a.command in cli_serve.COMMANDS:  # fit-router, audit, verify: given the helpers
                return cli_serve.COMMANDS[a.command](a, common)
            return sys.modules[f"{__name__}.{a.command}"]._run(a)
    except BrokenPipeError:  # ``gpac inspect ... | head``: the reader has all it wants; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
        return EXIT_OK
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (DataError, data.SchemaError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DATA


if __name__ == "__main__":
    sys.exit(main())
