"""Committed outputs do not depend on the CPU: notebooks rerun on the paper profile rewrite their
committed figures and tables byte for byte computing like an AVX2-only machine (numpy's AVX-512 dispatch
disabled, OpenBLAS on Haswell kernels; see ``conftest.narrowed_cpu_env``), and one of them natively too
(skipped on a CPU that computes so natively, no AVX-512 and OpenBLAS on Haswell: that run would repeat the other).

The simulated tables are checked the same way in ``test_simulate.py``; ``make reproduce`` under
both settings checks every notebook (README, *Reproducibility*). These are the notebooks whose
outputs are quick to recompute on the paper profile and exercise the transcendental functions and
reductions (fits, curves on log axes, calibration errors, finite-sample bounds).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpac_utils.workflow.paths import FIGURES, NOTEBOOKS

NOTEBOOKS_CHECKED = ["10_oracle_partition", "11_partition_gap", "12_finite_sample", "25_ece_scores"]

RUN = """
import sys
import gpac_utils.workflow.runner  # first: the runner's lighter start (no IRI checker under nbformat)
import jupytext, papermill
nb = jupytext.read(sys.argv[1])
papermill.execute_notebook(nb, sys.argv[2], parameters={"profile": "paper"}, kernel_name="python3",
                           progress_bar=False, execution_timeout=600)
"""


#: Rerun natively too (the rest only as an AVX2-only machine computes): the finite-sample bounds' transcendental
#: functions. A rerun under the narrowed setting equals the committed files (written natively by ``make
#: reproduce``) only if the notebook's code is current and the CPU does not change its outputs; each native
#: rerun costs as much again.
NATIVE_TOO = {"12_finite_sample"}


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize(
    ("name", "cpu"),
    [
        (name, cpu)
        for name in NOTEBOOKS_CHECKED
        for cpu in ("native", "no-avx512")
        if cpu != "native" or name in NATIVE_TOO
    ],
)
def test_paper_outputs_are_byte_identical(tmp_path, name, cpu, request):
    if cpu == "native" and request.getfixturevalue("narrowing_changes_nothing"):
        pytest.skip("this CPU computes as an AVX2-only machine does: its no-avx512 run is the native run")
    env = {**os.environ, "GPAC_FIGURES": str(tmp_path / "figures")}
    env.pop("MPLBACKEND", None)  # kernels use their inline backend, as in `make reproduce`
    if cpu == "no-avx512":
        env.update(request.getfixturevalue("narrowed_env"))
    r = subprocess.run(
        [sys.executable, "-c", RUN, str(NOTEBOOKS / f"{name}.py"), str(tmp_path / "out.ipynb")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    written = sorted(p for p in (tmp_path / "figures").rglob("*") if p.is_file())
    assert written, f"{name} wrote nothing"
    for path in written:
        committed = FIGURES / path.relative_to(tmp_path / "figures")
        assert committed.exists(), f"{name} wrote {committed.name}, which is not committed"
        assert path.read_bytes() == committed.read_bytes(), f"{name} ({cpu}): {committed} differs"
