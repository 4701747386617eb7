"""environment.yml and pyproject.toml declare the same dependencies (pyproject is the source)."""

import tomllib

import yaml

from gpac_utils.workflow.paths import REPO_ROOT


def test_environment_yml_installs_the_package_from_pyproject():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    deps = env["dependencies"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python")]
    assert python == ["python=3.11"]
    assert project["requires-python"] == ">=3.11"
    assert "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert len(pip) == 1 and pip[0].startswith("-e .[")
    extras = pip[0][len("-e .[") : -1].split(",")
    assert set(extras) <= set(project["optional-dependencies"])
    assert {"notebooks", "test"} <= set(extras)
    # Nothing else: every dependency is declared once, in pyproject.toml.
    assert all(isinstance(d, str) and d.split("=")[0] in ("python", "pip") for d in deps if not isinstance(d, dict))


def test_gpu_extra_is_isolated():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(d.startswith("vllm") for d in extras["gpu"])
    for name, deps in extras.items():
        if name != "gpu":
            assert not any(d.startswith("vllm") for d in deps), name
    assert not any(d.startswith(("vllm", "torch")) for d in project["dependencies"])
