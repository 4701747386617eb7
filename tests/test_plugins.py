"""Plugins (issue 52.2): entries discovered through the entry-point group ``gpac_utils.plugins``, and a
certificate that records the distribution that provided each registry name it uses.

The plugin is ``tests/fixtures/plugin/`` (a bound, a score and a calibrator). In process, its module and a
broken one are put on ``sys.path`` with their distribution's metadata (fast); the slow test installs it
with pip into a temporary venv and runs the plain ``gpac`` command there (``python -m gpac_utils``, the
console script's ``main``) and ``CertifiedRouter``, then uninstalls it and checks the refusal line.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpac_utils import GPAC, bounds, calibrate, registry, scores
from gpac_utils.certificate import Certificate
from gpac_utils.checks import DataError
from gpac_utils.cli import main
from gpac_utils.recipe import Recipe
from gpac_utils.workflow.paths import REPO_ROOT

PLUGIN = REPO_ROOT / "tests" / "fixtures" / "plugin"
DIST, VERSION = "gpac-demo-plugin", "0.1.0"
NAMES = {"bound": "hoeffding_demo", "score": "score_demo_length", "method": "G-PAC-demo"}
REGISTRIES = {"bound": bounds.BOUNDS, "score": scores.SCORES, "method": calibrate.CALIBRATORS}


def table(n: int, seed: int) -> pd.DataFrame:
    """Two groups; the loss grows with the score, faster in geometry."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["algebra", "geometry"], n)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(group == "geometry", 0.4, 0.1) * u).astype(int)
    ids = [f"s{seed}-{k}" for k in range(n)]
    return pd.DataFrame({"item_id": ids, "group": group, "loss": loss, "score_demo_length": u})


# --------------------------------------------------------------------------- in process
def test_a_certificate_records_the_package_as_the_provider_of_built_in_names(capsys):
    u = np.linspace(0, 1, 600)
    g = np.where(np.arange(600) % 2 == 0, "a", "b")
    cert = Certificate.from_calibrator(GPAC(eps=0.1).fit(u, (u > 0.8).astype(float), g), score="score_logits")
    providers = cert.provenance["providers"]
    assert set(providers) == {"method", "bound", "correction", "risk", "score"}
    version = registry.package_version()
    assert {(r["distribution"], r["version"]) for r in providers.values()} == {(registry.PACKAGE, version)}
    assert providers["method"]["name"] == "G-PAC" and providers["bound"]["name"] == cert.settings.recipe.bound
    assert f"provided  gpac-utils {version}: method G-PAC, bound " in cert.render()
    read = Certificate.read(cert.to_json())
    assert read.provenance["providers"] == providers


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """The plugin and a broken one, importable with their distributions' metadata; the registries restored."""
    shutil.copy(PLUGIN / "gpac_demo_plugin.py", tmp_path)
    (tmp_path / "gpac_broken_plugin.py").write_text(
        "raise ImportError('needs a package that is not installed\\nmore')\n"
    )
    for dist, module in ((DIST, "gpac_demo_plugin"), ("gpac-broken-plugin", "gpac_broken_plugin")):
        info = tmp_path / f"{dist.replace('-', '_')}-{VERSION}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {VERSION}\n")
        (info / "entry_points.txt").write_text(f"[{registry.PLUGINS}]\n{module.split('_')[1]} = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_plugins", None)  # as in a fresh process: not loaded yet
    before = {role: list(r._entries) for role, r in REGISTRIES.items()}  # listing would load the plugins
    yield tmp_path
    for role, r in REGISTRIES.items():
        for name in [n for n in r._entries if n not in before[role]]:
            r.unregister(name)
    sys.modules.pop("gpac_demo_plugin", None)
    sys.modules.pop("gpac_broken_plugin", None)


def test_plugins_load_once_when_a_name_misses_and_the_certificate_names_their_distribution(on_path, caplog):
    with caplog.at_level(logging.WARNING, logger=registry.__name__):
        assert NAMES["bound"] in bounds.BOUNDS  # a miss loads the plugins
        assert NAMES["score"] in scores.SCORES and calibrate.method("gpacdemo").name == NAMES["method"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0], lines  # the broken plugin: one line, loaded once
    assert lines[0] == (
        "warning: plugin broken = gpac_broken_plugin (gpac-broken-plugin 0.1.0, entry-point group gpac_utils.plugins) "
        "not loaded: ImportError: needs a package that is not installed"
    )
    for role, name in NAMES.items():
        assert REGISTRIES[role].provider(name) == (DIST, VERSION)
    data = table(2000, 0)
    cal = calibrate.method(NAMES["method"]).cls(eps=0.15, recipe=Recipe(bound=NAMES["bound"]))
    cal.fit(data["score_demo_length"].to_numpy(), data["loss"].to_numpy(float), data["group"].to_numpy())
    cert = Certificate.from_calibrator(cal, score=NAMES["score"])
    providers = cert.provenance["providers"]
    assert {role: (providers[role]["name"], providers[role]["distribution"]) for role in NAMES} == {
        role: (name, DIST) for role, name in NAMES.items()
    }
    assert providers["risk"]["distribution"] == registry.PACKAGE
    assert (
        f"provided  {DIST} {VERSION}: method G-PAC-demo, bound hoeffding_demo, score score_demo_length; "
        f"gpac-utils {registry.package_version()}: correction none, risk joint\n"
    ) in cert.render()
    bounds.BOUNDS.unregister(NAMES["bound"])  # as if the plugin were uninstalled (it is loaded once)
    with pytest.raises(DataError) as info:
        Certificate.read(cert.to_json(), where="thr.json")
    assert str(info.value) == (
        "thr.json: provenance.providers['bound']: bound 'hoeffding_demo' came from gpac-demo-plugin 0.1.0, which is "
        "not installed here (or does not provide it any more): install gpac-demo-plugin to read this certificate"
    )


def test_a_name_registered_by_code_of_no_distribution_is_recorded_as_such(tmp_path, capsys):
    copy = dataclasses.replace(bounds.BOUNDS["hoeffding_bentkus"], name="in_process_bound")
    with bounds.BOUNDS.registered(copy):
        assert bounds.BOUNDS.provider("in_process_bound") == (None, None)
        u = np.linspace(0, 1, 400)
        cal = GPAC(eps=0.1, recipe=Recipe(bound="in_process_bound")).fit(
            u, (u > 0.8).astype(float), np.where(u > 0.5, "a", "b")
        )
        cert = Certificate.from_calibrator(cal)
        record = {"name": "in_process_bound", "distribution": None, "version": None}
        assert cert.provenance["providers"]["bound"] == record
        assert "no distribution: bound in_process_bound" in cert.render()
    (tmp_path / "thr.json").write_text(cert.to_json())
    assert main(["inspect", str(tmp_path / "thr.json")]) == 1
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'thr.json'}: provenance.providers['bound']: bound 'in_process_bound' was registered by "
        "code of no distribution; register it to read this\n"
    )


# --------------------------------------------------------------------------- installed
def run(*args, env, cwd, ok=True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    assert (done.returncode == 0) == ok, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_an_installed_plugin_works_from_the_plain_gpac_command_and_is_named_when_uninstalled(tmp_path):
    venv, src = tmp_path / "venv", tmp_path / "plugin"
    shutil.copytree(PLUGIN, src)  # pip builds in the source folder: a copy keeps the fixture clean
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    # the project's venv is itself a venv: its packages (numpy, pandas, gpac_utils) are added as a site dir
    parents = "; ".join(f"site.addsitedir({p!r})" for p in site.getsitepackages())
    (Path(purelib) / "_project_venv.pth").write_text(f"import site; {parents}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SOURCE_DATE_EPOCH": "1767225600"}
    pip = [sys.executable, "-m", "pip", "--python", python, "--quiet", "--disable-pip-version-check"]
    run(*pip, "install", "--no-deps", "--no-build-isolation", "--no-index", src, env=env, cwd=tmp_path)
    table(3000, 0).to_csv(tmp_path / "cal.csv", index=False)
    table(4000, 1).to_csv(tmp_path / "fresh.csv", index=False)
    gpac = [python, "-m", "gpac_utils"]
    cal = ["--data", "cal.csv", "--score-col", NAMES["score"], "--group-col", "group", "--method", "gpacdemo"]
    run(*gpac, "calibrate", *cal, "--bound", NAMES["bound"], "--eps", "0.15", "-o", "thr.json", env=env, cwd=tmp_path)
    doc = json.loads((tmp_path / "thr.json").read_text())
    assert (doc["method"], doc["settings"]["bound"], doc["score"]) == (NAMES["method"], NAMES["bound"], NAMES["score"])
    providers = doc["provenance"]["providers"]
    assert {role: providers[role] for role in NAMES} == {
        role: {"name": name, "distribution": DIST, "version": VERSION} for role, name in NAMES.items()
    }
    out = run(*gpac, "verify", "thr.json", "--data", "cal.csv", env=env, cwd=tmp_path).stdout
    assert "bit-identical" in out
    # the calibrator's own setting and field: from the plain command, checked by verify, stated with --expect
    capped = ["calibrate", *cal, "--demo-cap", "0.5", "--eps", "0.15", "-o", "cap.json"]
    run(*gpac, *capped, env=env, cwd=tmp_path)
    doc = json.loads((tmp_path / "cap.json").read_text())
    assert doc["settings"]["demo_cap"] == 0.5 and doc["demo_capped"] and max(doc["thresholds"].values()) <= 0.5
    expect = ["verify", "cap.json", "--data", "cal.csv", "--expect", "method=G-PAC-demo", "demo_cap=0.5"]
    assert "demo_cap=0.5" in run(*gpac, *expect, env=env, cwd=tmp_path).stdout.split("checked")[1]
    stated = run(*gpac, *expect[:-1], "demo_cap=0.4", env=env, cwd=tmp_path, ok=False)
    assert stated.stderr == "error: cap.json: settings.demo_cap is 0.5; --expect demo_cap=0.4\n"
    doc["settings"]["demo_cap"] = 0.55  # an edit that recomputes to other thresholds
    (tmp_path / "cap.json").write_text(json.dumps(doc))
    assert "recomputed 0.55" in run(*gpac, *expect[:4], env=env, cwd=tmp_path, ok=False).stderr
    wrong = run(
        *gpac,
        "calibrate",
        *cal[:-1],
        "gpac",
        "--demo-cap",
        "0.5",
        "--eps",
        "0.15",
        "-o",
        "g.json",
        env=env,
        cwd=tmp_path,
        ok=False,
    )
    assert wrong.stderr.splitlines()[-1] == "error: --demo-cap: only --method gpacdemo uses it (got --method gpac)"
    routed = run(*gpac, *capped[:-2], "--risk", "routed", "-o", "r.json", env=env, cwd=tmp_path, ok=False)
    assert "G-PAC-demo keeps the joint risk's guarantee only, got 'routed'" in routed.stderr.splitlines()[-1]
    assert f"names provided by: {DIST} {VERSION}: method G-PAC-demo, bound hoeffding_demo, score " in out
    out = run(
        *gpac, "audit", "thr.json", "--data", "fresh.csv", "--binary", "--detectable", "0.5", env=env, cwd=tmp_path
    )
    assert "PASS: every certified group tested" in out.stdout
    serve = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT / 'tests')!r})\n"
        "from test_serve import FakeEngine, requests_table\n"
        "from gpac_utils.llm.serve import CertifiedRouter\n"
        "router = CertifiedRouter('thr.json', FakeEngine('cheap'), FakeEngine('thinking'))\n"
        "served = router.serve(requests_table(n=6, groups=('algebra', 'geometry')))\n"
        "print(router.score.name, len(served), sorted(set(served['route'])))\n"
    )
    out = run(python, "-c", serve, env=env, cwd=tmp_path).stdout
    assert out.startswith(f"{NAMES['score']} 6 [")
    run(*pip, "uninstall", "--yes", DIST, env=env, cwd=tmp_path)
    refused = run(*gpac, "verify", "thr.json", "--data", "cal.csv", env=env, cwd=tmp_path, ok=False)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "error: thr.json: provenance.providers['bound']: bound 'hoeffding_demo' came from gpac-demo-plugin 0.1.0, "
        "which is not installed here (or does not provide it any more): install gpac-demo-plugin to read this "
        "certificate\n"
    )


def test_the_documented_plugin_is_the_fixture():
    """docs/extending.md's pyproject snippet is the fixture's, and its group is the package's."""
    page = (REPO_ROOT / "docs" / "extending.md").read_text()
    snippet = page.split("## Plugins", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    assert snippet in (PLUGIN / "pyproject.toml").read_text()
    assert f'[project.entry-points."{registry.PLUGINS}"]' in snippet
