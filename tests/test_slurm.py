"""The cluster path on a real scheduler: a one-node SLURM cluster (Debian slurm-wlm + munge) started
here, a batch grid through Snakemake's SLURM executor with the project's profile
(workflow/profiles/slurm/), and the generation as a SLURM job array (one shard per task).

``make test-slurm`` (run by ``make test``) installs the packages (apt-get, needs root) and the
``cluster`` extra, then runs this file. The cluster lives in a temporary folder (its own slurm.conf,
munge key and socket, free ports): nothing under /etc is written. Its daemons are stopped by the pids
in their pid files whatever happened. Every scheduler wait has a timeout: the tier fails, never hangs.
Without root, the packages or the plugin, it skips with one line saying why."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from gpac_utils.workflow.paths import REPO_ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROFILE = REPO_ROOT / "workflow" / "profiles" / "slurm"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")
PARTITION, ACCOUNT = "gpactest", "gpac"  # the site settings of the test cluster
# The configuration is also linked where SLURM looks by default: the plugin's job step (jobstep 0.6.1)
# drops SLURM_CONF (with every SLURM_* variable) from the environment of its srun inside a job.
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")
PREFIX = "gpac-slurm-"
# Two runs of notebook 21 (fast profile) differing in eps; the same grid runs locally and on SLURM.
GRID = """\
notebook: 21_table_known_groups
profile: fast
parameters: {pairs: [qwen], scores: [score_logits]}
grid: {eps: [0.05, 0.1]}
table: tables/01_results_known.csv
"""
# The tiny model on CPU in both roles (the walk's prompts), four items, short answers.
GENERATION = ["--benchmark", "walk", "--pair", "smollm2", "--backend", "transformers", "--n-items", "4"]
GENERATION += ["--max-tokens", "16", "--n-verbalized", "2"]
# One request per generate call, on one thread, in the array's tasks and in the single process: a shard
# holds other items than the single process, so a batch of several would pad and shape the matmuls
# differently, and a sampled token at a float-noise tie could differ (it did, once, in CI).
GENERATION += ["--engine-arg", "batch_size=1"]
N_SHARDS = 2


def why_not() -> str | None:
    """Why the tier cannot run here (``None``: it can)."""
    if os.geteuid() != 0:
        return "not root: the tier installs (apt-get) and starts a SLURM cluster (munged, slurmctld, slurmd) as root"
    missing = [exe for exe in DAEMONS if shutil.which(exe) is None]
    if missing:
        return f"no {', '.join(missing)}: `make test-slurm` installs Debian's slurm-wlm and munge (apt-get)"
    if (DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink()) and not stale(DEFAULT_CONF):
        return f"{DEFAULT_CONF} exists: this machine has a SLURM cluster; the tier starts one only where none is"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "no snakemake-executor-plugin-slurm: `make test-slurm` installs the extra (pip install -e '.[cluster]')"
    return None


def stale(conf: Path) -> bool:
    """A link to the configuration of a test cluster that is gone (a killed run left it)."""
    if not conf.is_symlink() or not Path(os.readlink(conf)).parent.name.startswith(PREFIX):
        return False
    try:
        return not alive(int((Path(os.readlink(conf)).parent / "slurmctld.pid").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    started_s: float

    def run(self, argv, timeout: float, **kwargs) -> subprocess.CompletedProcess:
        """``argv`` with the cluster's environment; fails the test (not hangs) after ``timeout`` s."""
        try:
            return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, **kwargs)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{' '.join(map(str, argv[:4]))} ... took over {timeout} s:\n{self.logs(exc)}")

    def alongside(self, argv, beside, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
        """``argv`` (as :meth:`run`, from the repository root) while ``beside`` runs in the background;
        both must end within ``timeout`` s, ``beside`` successfully. ``(argv's result, its seconds)``."""
        pipe = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        background = subprocess.Popen(beside, env=self.env, cwd=REPO_ROOT, **pipe)
        try:
            t0 = time.perf_counter()
            r = self.run(argv, timeout, cwd=REPO_ROOT)
            seconds = time.perf_counter() - t0
            out = background.communicate(timeout=max(30, timeout - seconds))[0]
        finally:
            background.kill()
            background.wait()
        assert background.returncode == 0, f"{' '.join(map(str, beside[:4]))} ... failed:\n{out[-3000:]}"
        return r, seconds

    def jobs(self) -> dict[str, tuple[str, str]]:
        """``{job id: (job name, state)}`` of every job the controller knows, finished ones included."""
        out = self.run(["squeue", "-h", "--states=all", "-o", "%i|%j|%T"], timeout=20).stdout
        return {i: (name, state) for i, name, state in (line.split("|", 2) for line in out.splitlines() if "|" in line)}

    def logs(self, exc=None) -> str:
        """The end of a timed-out command's output and of the daemons' logs."""
        text = [f"{getattr(exc, 'stdout', '') or ''}\n{getattr(exc, 'stderr', '') or ''}"[-3000:]]
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.root / name
            text.append(f"{name}:\n{path.read_text(errors='replace')[-1500:] if path.exists() else ''}")
        return "\n".join(text)


def slurm_conf(root: Path, sock: Path) -> str:
    """One node (this machine: its cores, 85 % of its memory), one partition, no accounting.
    ``MinJobAge``: finished jobs stay visible to ``squeue``, the profile's status query."""
    host = socket.gethostname().split(".")[0]
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    mem_mb = int(mem_kb * 0.85 / 1024)
    return f"""\
ClusterName=gpactest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={mem_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def alive(pid: int) -> bool:
    try:  # slurmctld stays this process's child: reap it
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop(pid_files: list[Path]) -> None:
    """SIGTERM each daemon by the pid in its pid file (in this order), SIGKILL after 10 s."""
    for path in pid_files:
        try:
            pid = int(path.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster():
    reason = why_not()
    if reason:
        pytest.skip(reason)
    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    munge, conf = root / "munge", root / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # one CPU per job and task
    cl = Cluster(root, env, 0.0)
    try:
        root.chmod(0o755)
        munge.mkdir(mode=0o755)  # munged checks: only its user writes here, everyone may enter (the socket)
        (munge / "munge.key").write_bytes(os.urandom(1024))
        (munge / "munge.key").chmod(0o400)
        for path in (munge, munge / "munge.key"):
            shutil.chown(path, "munge", "munge")
        for sub in ("state", "spool"):
            (root / sub).mkdir()
        sock = munge / "munge.socket"
        conf.write_text(slurm_conf(root, sock))
        DEFAULT_CONF.unlink(missing_ok=True)  # a stale link at most: see why_not()
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(conf)
        munged = ["munged", f"--socket={sock}", f"--key-file={munge / 'munge.key'}"]
        munged += [f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}"]
        munged += [f"--seed-file={munge / 'munged.seed'}"]
        for argv, user in ((munged, "munge"), (["slurmctld", "-f", conf], None), (["slurmd", "-f", conf], None)):
            r = subprocess.run(argv, env=env, user=user, timeout=30, capture_output=True, text=True)
            assert r.returncode == 0, f"{argv[0]} did not start: {r.stderr.strip()}\n{cl.logs()}"
        deadline = time.monotonic() + 60
        while cl.run(["sinfo", "-h", "-o", "%T"], timeout=20).stdout.strip() != "idle":
            if time.monotonic() > deadline:
                pytest.fail(f"the node is not idle after 60 s:\n{cl.logs()}")
            time.sleep(0.2)
        cl.started_s = time.perf_counter() - t0
        print(f"\ncluster up in {cl.started_s:.1f} s")
        yield cl
    finally:
        try:  # jobs a failed test left, then the daemons
            subprocess.run(["scancel", "--quiet", "--full", "--user=root"], env=env, timeout=20, capture_output=True)
        except (OSError, subprocess.SubprocessError):
            pass
        stop([root / "slurmd.pid", root / "slurmctld.pid", munge / "munged.pid"])
        if DEFAULT_CONF.is_symlink() and os.readlink(DEFAULT_CONF) == str(conf):
            DEFAULT_CONF.unlink()
        shutil.rmtree(root, ignore_errors=True)


def site_profile(folder: Path) -> Path:
    """The project's profile with the two site settings (partition, account) set for this cluster:
    the only edits a user makes. Nothing else differs."""
    folder.mkdir(parents=True)
    original = (PROFILE / "config.yaml").read_text().splitlines(keepends=True)
    site = {"slurm_partition": PARTITION, "slurm_account": ACCOUNT}
    setting = re.compile(r"(- (slurm_partition|slurm_account)=)\S+")
    edited = [setting.sub(lambda m: m[1] + site[m[2]], line) for line in original]
    changed = [(a, b) for a, b in zip(original, edited) if a != b]
    assert len(changed) == 2, f"the profile must name slurm_partition and slurm_account once each: {changed}"
    (folder / "config.yaml").write_text("".join(edited))
    return folder


def test_batch_grid_on_slurm_equals_the_local_run(cluster, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    batch = [sys.executable, "-m", "snakemake", "-s", "workflow/batch.smk"]
    # The local run (as `make batch`) alongside: it computes while the SLURM run waits on the scheduler.
    local = [*batch, "--cores", "2", "--config", f"grid={grid}", f"out={tmp_path / 'local'}"]
    before, profile = cluster.jobs(), site_profile(tmp_path / "profile")
    logs = tmp_path / "slurm_logs"  # the jobs' logs here (not under the checkout's .snakemake/)
    argv = [*batch, "--workflow-profile", str(profile), "--slurm-logdir", str(logs), "--slurm-keep-successful-logs"]
    r, seconds = cluster.alongside([*argv, "--config", f"grid={grid}", f"out={tmp_path / 'slurm'}"], local, 600)
    job_logs = "\n".join(p.read_text()[-800:] for p in sorted(logs.rglob("*.log")))
    assert r.returncode == 0, f"{r.stderr[-3000:]}\n{job_logs[-3000:]}\n{cluster.logs()}"
    # the jobs went to SLURM (each papermill run among them) and completed there
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/", r.stderr))
    states = {i: state for i, (_, state) in cluster.jobs().items() if i not in before}
    assert sorted(states) == sorted(submitted) and set(states.values()) == {"COMPLETED"}, (submitted, states)
    assert list(submitted.values()).count("papermill") == 2, submitted
    assert (tmp_path / "slurm" / "combined.csv").read_bytes() == (tmp_path / "local" / "combined.csv").read_bytes()
    assert pd.read_csv(tmp_path / "slurm" / "combined.csv")["run"].unique().tolist() == ["eps=0.05", "eps=0.1"]
    print(f"\nbatch grid: {seconds:.1f} s on SLURM ({len(submitted)} jobs), the local run alongside")


def test_generation_as_a_job_array_equals_one_process(cluster, tmp_path):
    from gpac_utils.llm import tiny
    from gpac_utils.llm.generation import ROLES, load_generations

    tiny.model_dir("smollm2-135m")  # converted once here, not by three processes at once
    one_process = [sys.executable, "-m", "gpac_utils.llm.generation", *GENERATION, "--out", str(tmp_path / "one")]
    # Site settings and small resources on the command line; the script's #SBATCH lines are defaults.
    sbatch = ["sbatch", "--wait", f"--array=0-{N_SHARDS - 1}", f"--partition={PARTITION}", f"--account={ACCOUNT}"]
    sbatch += ["--time=15", "--mem=2G", "--cpus-per-task=1", f"--output={tmp_path}/generate-%A_%a.log"]
    argv = [*sbatch, str(PROFILE / "generate.sbatch"), *GENERATION, "--out", str(tmp_path / "array")]
    # The single process alongside the array (it takes one core, the array's two tasks one each).
    one_thread = dataclasses.replace(cluster, env={**cluster.env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    r, seconds = one_thread.alongside(argv, one_process, 600)
    task_logs = "\n".join(p.read_text()[-1500:] for p in sorted(tmp_path.glob("generate-*.log")))
    assert r.returncode == 0, f"{r.stdout}{r.stderr}\n{task_logs}\n{cluster.logs()}"
    job = re.search(r"Submitted batch job (\d+)", r.stdout)[1]
    tasks = {i: state for i, (_, state) in cluster.jobs().items() if i.startswith(f"{job}_")}
    assert sorted(tasks) == [f"{job}_{i}" for i in range(N_SHARDS)] and set(tasks.values()) == {"COMPLETED"}, tasks
    for role in ROLES:  # one shard file per array task, each from its own task
        shards = sorted(p.name for p in (tmp_path / "array" / role).glob("shard-*.jsonl"))
        assert shards == [f"shard-{i:02d}-of-{N_SHARDS:02d}.jsonl" for i in range(N_SHARDS)], (role, shards)
        single, array = load_generations(tmp_path / "one", role), load_generations(tmp_path / "array", role)
        key = ["item_id", "sample"]
        single, array = (df.sort_values(key, ignore_index=True) for df in (single, array))
        assert len(single) > 0 and single["item_id"].nunique() == 4
        # Every field equal, the token logprobs included: each request is computed alone, on one thread.
        pd.testing.assert_frame_equal(array, single, check_exact=True)
    print(f"\ngeneration: SLURM array of {N_SHARDS} tasks {seconds:.1f} s, one process alongside")
