"""``gpac inspect``: print a certificate for review, and check a table against it (:mod:`gpac_utils.cli`)."""

from __future__ import annotations

from pathlib import Path

from ..certificate import Certificate, file_sha256
from ..checks import DataError
from .common import EXIT_OK, _read


def _add_parser(sub, fmt) -> None:
    """Add ``gpac inspect`` and its options to the subcommands ``sub``."""
    i = sub.add_parser("inspect", help="print a thresholds file for review", formatter_class=fmt)
    i.add_argument("file", type=Path, help="JSON written by calibrate")
    i.add_argument(
        "--data",
        type=Path,
        help="check this table's column hashes against the file's provenance, and the recorded score model's file "
        "by its SHA-256; exit 1 when one differs",
    )


def _run(a) -> int:
    cert = Certificate.read(a.file)
    print(cert.render())
    if a.data is not None:
        lines, ok = cert.verify(a.data, _read(a.data))  # the columns' values decide (the file's bytes: shown)
        model = cert.score_model_path()
        if model is not None:  # the recorded score model's file: its hash (gpac verify recomputes its scores)
            found = model.is_file()
            same = found and file_sha256(model) == cert.provenance["score_model"]["sha256"]
            ok &= same
            state = "matches" if same else ("DIFFERS" if found else "MISSING")
            lines.append(f"score model {model}: sha256 {state} (provenance.score_model.sha256)")
        print("", *lines, sep="\n")
        if not ok:
            raise DataError(f"--data {a.data}: does not match {a.file} (the lines above marked DIFFERS or MISSING)")
    return EXIT_OK
