"""environment.yml and pyproject.toml declare the same dependencies (pyproject is the source)."""

import tomllib

import yaml

from gpac_utils.workflow.paths import REPO_ROOT


def test_environment_yml_installs_the_locked_pins():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    deps = env["dependencies"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python")]
    assert python == ["python=3.11"]  # the locks are for CPython 3.11 (workflow/scripts/lock.py)
    assert project["requires-python"] == ">=3.11"
    assert "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    # The same pins as `make venv`: the lock generated from pyproject.toml, nothing typed here.
    assert pip == ["-r requirements/venv.lock"]
    assert (REPO_ROOT / "requirements" / "venv.lock").is_file()
    assert all(isinstance(d, str) and d.split("=")[0] in ("python", "pip") for d in deps if not isinstance(d, dict))


def test_gpu_extra_is_isolated():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(d.startswith("vllm") for d in extras["gpu"])
    for name, deps in extras.items():
        if name != "gpu":
            assert not any(d.startswith("vllm") for d in deps), name
    assert not any(d.startswith(("vllm", "torch")) for d in project["dependencies"])


def _make_venv(tmp_path, pythons: dict[str, str], dry_run: bool = True):
    """``make [-n] venv`` with a PATH holding only ``pythons`` (name -> shell script body)."""
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in pythons.items():
        exe = bin_dir / name
        exe.write_text(f"#!/bin/sh\n{body}\n")
        exe.chmod(0o755)
    make = shutil.which("make")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    return subprocess.run(
        [make, *(["-n"] if dry_run else []), "venv", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


def test_makefile_finds_a_python_by_itself(tmp_path):
    import sys

    real = f'exec {sys.executable} "$@"'  # a Python >= 3.11 (the suite's own)
    old = 'case "$*" in *version_info*) exit 1;; *) echo "Python 3.10.12";; esac'  # answers as 3.10
    # Only `python3`, new enough: taken.
    r = _make_venv(tmp_path / "a", {"python3": real})
    assert "python3 -m venv" in r.stdout, r.stdout + r.stderr
    # python3.11 is preferred over a newer python3.12 and over python3.
    r = _make_venv(tmp_path / "b", {"python3": real, "python3.12": real, "python3.11": real})
    assert "python3.11 -m venv" in r.stdout
    # Without 3.11, the first python3.1x >= 3.11.
    r = _make_venv(tmp_path / "c", {"python3": old, "python3.13": real})
    assert "python3.13 -m venv" in r.stdout
    # Only an old python3: a one-line refusal that says what was looked for.
    r = _make_venv(tmp_path / "d", {"python3": old}, dry_run=False)
    assert r.returncode != 0 and "need Python >= 3.11" in r.stdout
    assert not (tmp_path / "d" / "venv").exists()
