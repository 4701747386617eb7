"""``gpac audit --sequential`` (gpac_utils.audit_sequential, issue 49): a group whose loss rises is
flagged and the others are not; a changed prefix, another certificate and other settings are refused
in one line; one run on all rows equals runs on a split; over repeated looks the false-alarm rate
stays within the level (seeded Monte Carlo) while the one-look test re-run at each look exceeds it;
docs/deploying.md's worked example prints what the page shows."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from gpac_utils import GPAC
from gpac_utils.audit_sequential import CONFIRMED, INCONCLUSIVE, VIOLATED, SequentialAudit, ordered
from gpac_utils.certificate import Certificate
from gpac_utils.cli import main
from gpac_utils.eprocess import EProcess
from gpac_utils.workflow.paths import REPO_ROOT

EPS = 0.1
RATES = {"a": 0.1, "b": 0.2, "c": 0.4}  # loss probability r * U: joint risk r u^2 / 2 at threshold u


def draw(n, rng, rise_after=None):
    """``n`` items of three groups in arrival order ``t``; with ``rise_after``, group b's loss is 0.9 from then on."""
    g = rng.choice(list(RATES), size=n)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.array([RATES[x] for x in g]) * u).astype(float)
    if rise_after is not None:
        late = (g == "b") & (np.arange(n) >= rise_after)
        loss = np.where(late, (rng.uniform(size=n) < 0.9).astype(float), loss)
    t = np.arange(n)
    return pd.DataFrame({"item_id": [f"h{i}" for i in t], "t": t, "group": g, "score": u, "loss": loss})


@pytest.fixture(scope="module")
def cert_path(tmp_path_factory):
    cal = draw(3000, np.random.default_rng(0))
    gpac = GPAC(EPS).fit(cal["score"], cal["loss"], cal["group"])
    cols = {c: (c, cal[c].to_numpy()) for c in ("score", "loss", "group")}
    path = tmp_path_factory.mktemp("cert") / "thresholds.json"
    path.write_text(Certificate.from_calibrator(gpac, columns=cols, created="2026-01-01T00:00:00Z").to_json())
    return path


def run(cert, data, state, *extra):
    return main(
        ["audit", str(cert), "--data", str(data), "--sequential", "--order-col", "t", "--state", str(state), *extra]
    )


def test_a_group_whose_loss_rises_is_flagged_and_the_others_are_not(cert_path, tmp_path, capsys):
    df = draw(3000, np.random.default_rng(1), rise_after=1000)
    df.iloc[:900].to_csv(tmp_path / "first.csv", index=False)
    df.to_csv(tmp_path / "all.csv", index=False)
    state = tmp_path / "state.json"
    assert run(cert_path, tmp_path / "first.csv", state, "-o", str(tmp_path / "r1.csv")) == 0  # before the rise
    assert (pd.read_csv(tmp_path / "r1.csv")["verdict"] != VIOLATED).all()
    capsys.readouterr()
    assert run(cert_path, tmp_path / "all.csv", state, "-o", str(tmp_path / "r2.csv")) == 3
    out = capsys.readouterr().out
    report = pd.read_csv(tmp_path / "r2.csv").set_index("group")
    assert report.loc["b", "verdict"] == VIOLATED and report.loc["b", "e_violated"] >= 3 / 0.05
    assert set(report.loc[["a", "c"], "verdict"]) <= {CONFIRMED, INCONCLUSIVE}
    assert "after 3000 row(s) (2100 new): VIOLATED in ['b']" in out
    looks = json.loads(state.read_text())["looks"]
    assert [(x["rows"], x["new_rows"], x[VIOLATED]) for x in looks] == [(900, 900, []), (3000, 2100, ["b"])]


def test_a_certified_group_without_trials_exits_4_and_unknown_labels_think(cert_path, tmp_path, capsys):
    df = draw(400, np.random.default_rng(7))
    df = df[df["group"] != "c"].assign(group=lambda d: d["group"].replace({"a": "A"}))
    df.to_csv(tmp_path / "data.csv", index=False)
    assert run(cert_path, tmp_path / "data.csv", tmp_path / "state.json", "-o", str(tmp_path / "r.csv")) == 4
    out, err = capsys.readouterr()
    report = pd.read_csv(tmp_path / "r.csv").set_index("group")
    assert report.loc["c", "verdict"] == "no trials yet" and report.loc["A", "verdict"] == "risk 0 by construction"
    assert "are not groups of the certificate" in err and "did you mean 'a'?" in err
    assert "no trials yet: ['a', 'c']" in out


def test_one_run_equals_runs_on_a_split(cert_path, tmp_path):
    df = draw(2000, np.random.default_rng(2), rise_after=1500)
    shuffled = df.sample(frac=1.0, random_state=3)  # the file's row order does not matter; the order column does
    shuffled.to_csv(tmp_path / "all.csv", index=False)
    for name, cut in (("one", []), ("split", [700, 1234])):
        for c in cut:
            df.iloc[:c].sample(frac=1.0, random_state=c).to_csv(tmp_path / "part.csv", index=False)
            assert run(cert_path, tmp_path / "part.csv", tmp_path / f"{name}.json") in (0, 3)
        assert run(cert_path, tmp_path / "all.csv", tmp_path / f"{name}.json") == 3
    one, split = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "split"))
    assert len(split.pop("looks")) == 3 and len(one.pop("looks")) == 1
    assert one == split  # e-processes (exact hex), consumed ids and hashes: the same bits


def test_a_changed_prefix_is_refused_in_one_line(cert_path, tmp_path, capsys):
    df = draw(600, np.random.default_rng(4))
    df.iloc[:400].to_csv(tmp_path / "first.csv", index=False)
    state = tmp_path / "state.json"
    assert run(cert_path, tmp_path / "first.csv", state) == 0
    kept = state.read_text()
    changed = df.copy()
    changed.loc[17, "loss"] = 1.0 - changed.loc[17, "loss"]
    moved = df.astype({"t": float})
    moved.loc[500, "t"] = 10.5  # a new row sorts among the consumed ones
    cases = {
        "changed": (changed, "column 'loss' differs in the 400 rows already consumed"),
        "moved": (moved, "row 11 in the declared order is id 'h500', but the state consumed id 'h11' there"),
        "removed": (df.drop(index=[5]), "row 5 in the declared order is id 'h6', but the state consumed id 'h5'"),
        "shorter": (df.iloc[:300], "has 300 rows, fewer than the 400 the state consumed"),
    }
    capsys.readouterr()
    for name, (frame, message) in cases.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        assert run(cert_path, tmp_path / f"{name}.csv", state) == 1, name
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if not line.startswith("warning:")]
        assert message in err and len(errors) == 1, (name, err)
        assert state.read_text() == kept  # nothing consumed, nothing written


def test_another_certificate_or_other_settings_are_refused(cert_path, tmp_path, capsys):
    df = draw(300, np.random.default_rng(5))
    df.to_csv(tmp_path / "data.csv", index=False)
    state = tmp_path / "state.json"
    assert run(cert_path, tmp_path / "data.csv", state) == 0
    other = tmp_path / "other.json"
    doc = json.loads(cert_path.read_text())
    doc["provenance"]["created"] = "2026-01-02T00:00:00Z"
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    assert run(other, tmp_path / "data.csv", state) == 1
    assert "written for another certificate" in capsys.readouterr().err
    assert run(cert_path, tmp_path / "data.csv", state, "--level", "0.1") == 1
    assert "was written with --level 0.05, this run gives 0.1" in capsys.readouterr().err
    assert run(cert_path, tmp_path / "data.csv", state, "--bet", "grapa") == 1
    assert "--bet 'mixture'" in capsys.readouterr().err
    plain = ["audit", str(cert_path), "--data", str(tmp_path / "data.csv")]
    assert main([*plain, "--state", str(state)]) == 2
    assert "--state: only the sequential mode reads it; add --sequential" in capsys.readouterr().err
    assert main([*plain, "--sequential", "--state", str(state)]) == 2
    assert "--order-col: --sequential needs it" in capsys.readouterr().err
    assert run(cert_path, tmp_path / "data.csv", state, "--score-model", "router.json") == 2  # named as typed
    assert f"--score-model: {cert_path} the certificate records no score model" in capsys.readouterr().err


def test_false_alarms_over_repeated_looks_stay_within_the_level_and_one_look_tests_do_not():
    """Three certified groups whose risk is exactly eps (every item routed, loss Bernoulli(eps)), 20 looks
    of 50 items each: the share of streams with a false alarm at *some* look; at eps, the boundary of both
    nulls, the confirmation's rate too (docs/deploying.md section 9 quotes every number)."""
    level, k, reps, looks, step = 0.05, 3, 2000, 20, 50
    x = (np.random.default_rng(0).uniform(size=(reps, k, looks * step)) < EPS).astype(float)
    ep = EProcess(EPS, "above", shape=(reps, k))  # what each look of the command runs, per group
    ec = EProcess(EPS, "below", shape=(reps, k))
    sequential, one_look, first = np.zeros(reps, bool), np.zeros(reps, bool), None
    for look in range(looks):
        ep.update(x[..., look * step : (look + 1) * step])
        ec.update(x[..., look * step : (look + 1) * step])
        sequential |= ep.rejects(level / k).any(-1)
        m = (look + 1) * step  # the one-look audit's exact binomial test on all rows so far, re-run
        flagged = (stats.binom.sf(x[..., :m].sum(-1) - 1, m, EPS) <= level / k).any(-1)
        first = flagged.mean() if first is None else first
        one_look |= flagged
    confirmed = (ec.rejects(level / k) & ~ep.rejects(level / k)).any(-1)  # a violated group is not confirmed
    limit = level + 3 * math.sqrt(level * (1 - level) / reps)
    assert sequential.mean() <= limit and first <= limit and round(limit, 3) == 0.065  # the page's numbers
    assert one_look.mean() > limit + 0.1  # re-running the one-look test inflates false alarms
    # each kind of error at most the level; at exactly eps, confirmed read as "risk below eps", the union
    # is bounded by twice the level only, and here exceeds the level
    assert confirmed.mean() <= limit and level < (sequential | confirmed).mean() <= level + limit
    # the first look's exact rate: 1 - (1 - P(Bin(50, eps) >= k*))^3, k* the smallest count flagged at level/k
    kstar = next(c for c in range(step + 1) if stats.binom.sf(c - 1, step, EPS) <= level / k)
    exact = 1 - (1 - stats.binom.sf(kstar - 1, step, EPS)) ** k
    assert abs(first - exact) <= 3 * math.sqrt(exact * (1 - exact) / reps)
    se_points = 100 * math.sqrt(one_look.mean() * (1 - one_look.mean()) / reps)
    page = " ".join(PAGE.read_text().split())
    pct = lambda r: f"{100 * r:.4g} %"  # noqa: E731
    for quoted in (
        f"flags some group in about {100 * one_look.mean():.0f} % of the streams ({pct(one_look.mean())}, a Monte "
        f"Carlo standard error of about {se_points:.1f} points); at its first look alone, in {pct(first)} of them, "
        f"where the exact rate is 1 − (1 − P(Bin({step}, {EPS:g}) ≥ {kstar}))³ = {100 * exact:.1f} % ({kstar} "
        f"losses of {step} the smallest count its test at level {level:g}/{k} flags)",
        f"it happens in {100 * sequential.mean():.1f} % of the streams (the bound: {level:g} + 3 Monte Carlo "
        f"standard errors = {limit:.3f})",
        f"some group is confirmed in {pct(confirmed.mean())} of the streams, and violated or confirmed in "
        f"{pct((sequential | confirmed).mean())}",
    ):
        assert quoted in page, quoted
    assert (round(sequential.mean(), 4), round(one_look.mean(), 4), round(first, 4)) == (0.02, 0.2075, 0.034)
    assert (round(confirmed.mean(), 4), round((sequential | confirmed).mean(), 4), kstar) == (0.048, 0.0655, 11)


def test_the_command_runs_the_monte_carlo_s_e_processes(cert_path):
    """One stream of the Monte Carlo above through SequentialAudit.look, look by look: the same wealth."""
    cert = Certificate.read(cert_path)
    doc = json.loads(cert.to_json())
    for grp in doc["thresholds"]:  # every item routed: the joint risk is the loss rate, eps
        doc["thresholds"][grp] = 1.0
        doc["groups"][grp].update(status="certified", threshold=1.0)
    cert = Certificate.read(json.dumps(doc))
    rng = np.random.default_rng(6)
    n = 600
    g = np.repeat(["a", "b", "c"], n // 3)
    df = pd.DataFrame({"id": np.arange(n), "order": np.arange(n), "group": g, "score": rng.uniform(size=n)})
    df["loss"] = (rng.uniform(size=n) < EPS).astype(float)
    frame = ordered(df, {c: c for c in df.columns}, "data")
    state = SequentialAudit.start(cert, "0" * 64)
    for cut in (100, 350, 600):
        state.look(cert, frame.iloc[:cut])
    for grp in "abc":
        want = EProcess(EPS, "above").update(df.loc[df["group"] == grp, "loss"].to_numpy())
        assert state.groups[grp]["violation"].to_json() == want.to_json()


# --------------------------------------------------------------------------- docs/deploying.md
PAGE = REPO_ROOT / "docs" / "deploying.md"
SECTION = "Repeated audits: the sequential mode"


def test_the_pages_worked_example_prints_what_the_page_shows(tmp_path, capsys, monkeypatch):
    text = PAGE.read_text()
    section = text[text.index(SECTION) :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "deploying.md", "exec"), {})
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    outputs = re.findall(r"```text\n(.*?)```", section, re.S)
    calls = [line.split("#")[0].split()[1:] for line in commands.splitlines() if line.startswith("gpac ")]
    assert [c[0] for c in calls] == ["calibrate", "audit", "audit"] and len(outputs) == 2
    # one definition of a wrong confirmed (the one-look audit's): a confirmed group's risk is at most eps
    assert "confirmed (risk at most eps): ['a']" in outputs[1]
    assert main(calls[0]) == 0
    for argv, shown in zip(calls[1:], outputs):
        capsys.readouterr()
        rc = main(argv)
        out = capsys.readouterr().out
        assert out == shown, out
        assert section.split(shown)[1].lstrip("`\n").startswith(f"exit status {rc}")
    state = (tmp_path / "audit_state.json").read_text()
    assert main(calls[2]) == 3  # again: nothing new consumed, the same verdicts
    again = capsys.readouterr().out
    assert "(0 new): VIOLATED in ['b']" in again and again.split("\n")[2:5] == outputs[1].split("\n")[2:5]
    assert main(calls[1]) == 1 and "fewer than the 3000 the state consumed" in capsys.readouterr().err
    assert json.loads((tmp_path / "audit_state.json").read_text())["consumed"] == json.loads(state)["consumed"]
